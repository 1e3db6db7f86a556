"""A mutant report's row and its verdict: ``Status`` (killed, survived, passed, accused, error,
timeout, inconclusive, cannot run here), ``Row`` (one subject's line) and ``judge`` (a battery's result against
the subject's expected effect: a mutant must be flagged as its effect says, a control never)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..battery.core import BatteryResult

BASELINE_ID = "baseline/reference"


SANITY_ID = "sanity/emit-drafts"


SHORT_CHECK_NAMES = {"exact-tv": "exact", "chi-square": "chi2", "tokens-per-round": "tokens", "contract": "contract"}


class Status(enum.StrEnum):
    KILLED = "killed"  # a mutant flagged as its effect says
    SURVIVED = "survived"  # a mutant no detector flagged
    PASSED = "passed"  # a control (or the baseline) judged EXACT
    INCONCLUSIVE = "inconclusive"  # a control with no finding whose verdict is not EXACT (a shortfall)
    ACCUSED = "accused"  # a control flagged, or a fewer-tokens mutant flagged in distribution
    ERROR = "error"  # specverify raised (a bug of ours)
    TIMEOUT = "timeout"  # the subject's battery ran past --timeout
    ENVIRONMENT = "cannot run here"  # no CUDA, a missing package: neither killed nor survived


@dataclass
class Row:
    id: str
    effect: str
    status: Status
    killed_by: str
    exact_tv: float | None
    chi2_p_value: float | None
    samples_to_detect: int | None
    seconds: float
    description: str
    reference: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in (Status.KILLED, Status.PASSED)


def judge(effect: str, result: BatteryResult) -> tuple[str, str]:
    """Status and a detail line for a subject with the given expected effect; a subject that
    cannot run here (``result.environment``) is neither killed nor passed, whatever it is."""
    if result.environment:
        return Status.ENVIRONMENT, result.environment
    wrong = result.flagged()
    slow = result.flagged(("efficiency",))
    edges = result.flagged(("edge",))
    if effect == "exact":  # negative control: judged EXACT, no distribution, contract or edge finding
        if wrong or edges:
            return Status.ACCUSED, (wrong or edges)[0].message
        if result.exact is not True:  # nothing found, yet not judged whole: no evidence it passes
            return Status.INCONCLUSIVE, "; ".join(result.shortfalls) or "the verdict is not EXACT"
        return Status.PASSED, ""
    if effect == "edge":  # exact in law: killed only by an edge check
        if wrong:
            return Status.ACCUSED, f"exact in law, yet: {wrong[0].message}"
        return (Status.KILLED, edges[0].message) if edges else (Status.SURVIVED, "no edge event reported")
    if effect == "fewer-tokens":  # exact in distribution: killed only by tokens per round
        if wrong:
            return Status.ACCUSED, f"exact in distribution, yet: {wrong[0].message}"
        return (Status.KILLED, slow[0].message) if slow else (Status.SURVIVED, "tokens per round as theory")
    return (Status.KILLED, (wrong or slow)[0].message) if (wrong or slow) else (Status.SURVIVED, "")
