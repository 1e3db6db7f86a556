"""``Report``: one subject's verdict as ``specverify.check`` returns it: the battery's result, the
budget and seed it ran at, its coverage, the controls judged beside it, and its exit code
(``specverify.errors.EXIT_CODES``). How it reads is ``report_text``'s (``human``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..battery.core import BatteryResult, Finding
from ..common.files import json_default
from ..errors import verdict_exit_code
from .report_text import VERDICT_WORDS, human


@dataclass
class Report:
    """One sampler's verdict. ``exact``: True (exact), False (a distribution or contract finding),
    None (inconclusive: no finding, but a case could not be judged to the budget's plan)."""

    target: str
    seed: int
    budget: str
    coverage: str
    false_fail_rate: float
    result: BatteryResult = field(repr=False)
    controls: list[dict[str, Any]] = field(default_factory=list)
    """Controls known to be biased, judged beside the subject (``require_flagged``)."""

    @property
    def exact(self) -> bool | None:
        return self.result.exact

    @property
    def efficient(self) -> bool | None:
        return self.result.efficient

    @property
    def findings(self) -> list[Finding]:
        return self.result.findings

    @property
    def counterexample(self) -> dict[str, Any] | None:
        return self.result.counterexample

    @property
    def environment(self) -> str | None:
        """What this environment lacks to run the subject (no CUDA, a missing package), with
        what to do; None when the subject ran. Not a verdict: ``exact`` is then None."""
        return self.result.environment

    @property
    def exit_code(self) -> int:
        """The ``check`` command's exit code (``specverify.errors.EXIT_CODES``): 0 exact, 1 not
        exact, 3 inconclusive, 4 an environment error (``environment``)."""
        return verdict_exit_code(self.exact, self.environment)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``check --json`` prints. ``coverage``: ``summary`` (the budget's plan in
        words), ``reach`` (per dimension, the largest value the cases run reached: what "exact"
        covers) and ``cases`` (every case run, ``battery.coverage_entry``: origin fixed /
        generated / sweep / edge / aimed, its shape, how it was judged, its runs and the TV they
        see)."""
        out = self.result.to_dict()
        cases, reach = out.pop("cases", []), out.pop("reach", {})
        controls = {"controls": self.controls} if self.controls else {}
        return {
            "target": self.target,
            "seed": self.seed,
            "coverage": {"summary": self.coverage, "reach": reach, "cases": cases},
            "false_fail_rate": self.false_fail_rate,
            **out,
            **controls,
        }

    def add_control(
        self, target: str, claim: str, exact: bool | None, findings: list[dict[str, Any]], seconds: float = 0.0
    ) -> None:
        """A control known to be biased (``claim``: how), judged on this report's cases at its
        budget: recorded in ``controls`` (JSON ``"controls"``, only when there is one) and in
        ``ran``; unless it came out NOT EXACT (``exact`` False) this report is inconclusive (a
        shortfall: a run that cannot see a known bias does not show its subject exact)."""
        flagged = exact is False
        self.controls.append(
            {
                "target": target,
                "claim": claim,
                "exact": exact,
                "flagged": flagged,
                "findings": findings,
                "seconds": round(seconds, 2),
            }
        )
        self.result.seconds += seconds
        self.result.ran.append(
            f"control {target} ({claim}): {VERDICT_WORDS[exact]}, {len(findings)} finding(s)"
            + ("" if flagged else ": NOT flagged")
        )
        if not flagged:
            self.result.shortfalls.append(
                f"the control {target} ({claim}) was not flagged at this budget: "
                f"the run lacks the power to see a known bias"
            )

    def require_flagged(self, control: Report, claim: str) -> None:
        """``add_control`` of a control's own ``check`` report (on the same cases, same budget)."""
        self.add_control(
            control.target, claim, control.exact, [f.to_dict() for f in control.findings], control.result.seconds
        )

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), default=json_default, **kwargs)

    def text(self, verbose: bool = False) -> str:
        """The human report ``check`` prints: the verdict first, the counterexample last;
        ``verbose``: the whole listing (``check --verbose``)."""
        return human(self.to_dict(), verbose=verbose)

    def __str__(self) -> str:
        return self.text()


__all__ = ["Report"]
