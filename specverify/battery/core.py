"""The interface-agnostic results of every battery: what the round, loop and kernel batteries
share, so that none of them re-implements it.

``Finding`` (one check's verdict on one case), ``BatteryResult`` (the verdict: ``exact`` False on a
distribution or contract finding, None when a case could not be judged to plan, True otherwise;
``efficient`` likewise on efficiency findings), ``coverage_entry`` (one case as the JSON's
``coverage.cases`` lists it), and the rates and tolerances a verdict is stated with.

The rest of what every battery shares: ``battery.guards`` (the subject's side: calls, time limits
and readers that turn whatever the subject does into a ``ContractBreach``),
``battery.subject_calls`` (the parent's side: ``Battery``, ``call_within``, ``run_in_subject``)
and ``battery.seed_tree`` (``stream(seed, *path)``, the one scheme every battery draws by). The
statistics themselves (the sequential chi-square, its power, exact TV) are
``specverify.laws.stats`` and ``specverify.laws.exact``; each interface's battery
(``interfaces.round`` for round samplers, ``interfaces.loop``, ``interfaces.kernel``) decides what
to run and calls these.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..laws import stats
from ..laws.rounding import EXACT_TV_TOL  # noqa: F401 - the float64 floor, re-exported for the batteries
from .budgets import CAMPAIGN_SECONDS  # noqa: F401 - a campaign's time limits, re-exported
from .environment import environment_problem

DEFAULT_FALSE_FAIL_RATE = stats.DEFAULT_FALSE_FAIL_RATE
POWER_FALSE_PASS_RATE = 0.05
"""Power statements give the smallest TV detected with probability 1 - this."""


@dataclass
class Finding:
    """One thing a detector found. ``check``: exact-tv | chi-square | tokens-per-round |
    contract | rng; ``kind``: distribution | contract | efficiency | error."""

    check: str
    kind: str
    message: str
    case: str | None = None
    evidence: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        """A contract finding whose message shows that this machine, not the subject, is at
        fault (no CUDA, a package missing: ``environment.environment_problem``) is an
        environment finding: it makes the verdict neither EXACT nor NOT EXACT."""
        if self.kind == "contract" and environment_problem(self.message):
            self.kind = "environment"

    def to_dict(self) -> dict:
        return asdict(self)


BREAKING_KINDS = ("distribution", "contract", "error")


def stopping_kinds(stop_on_first) -> tuple[str, ...]:
    """The finding kinds that end a battery early under its ``stop_on_first``: none (False), a
    breaking finding (True), or the kinds given (a tuple: the mutant report stops an edge mutant
    at its first edge finding too)."""
    if not stop_on_first:
        return ()
    return BREAKING_KINDS if stop_on_first is True else tuple(stop_on_first)


ORIGINS = ("fixed", "generated", "sweep", "edge", "aimed", "declared")
"""Where a case of a report's ``coverage.cases`` comes from (``coverage_entry``)."""
JUDGED_BY = ("enumeration", "chi-square", "binned chi-square", "exact from uniforms", "contract")
"""How a case was judged: its law enumerated exactly; a sequential chi-square on whole outputs;
one on binned first tokens (vocabularies the enumerator cannot follow); a kernel's law computed
from its uniforms; only its contract (shapes, replay, untouched inputs)."""


def coverage_entry(
    name: str,
    origin: str,
    vocab: int,
    k,
    tokens: int,
    judged: str,
    runs: int | None = None,
    detect_tv: float | None = None,
    **shape,
) -> dict:
    """One case as the JSON's ``coverage.cases`` lists it: ``origin`` fixed | generated | edge |
    aimed (at the user's --vocab/--k/--max-tokens) | declared (by the subject: the only cases it
    can run, not the battery's standard ones); ``vocab``, ``k`` (an int, or a list for a
    loop's requests), ``tokens`` (the window judged, or a loop's largest max_tokens); ``judged``
    one of ``JUDGED_BY``; ``runs`` the samples drawn (None when enumerated); ``detect_tv`` the
    TV its statistics see with power 0.95 (None when enumerated: any TV above 1e-9); ``shape``:
    anything else that defines the case (prefix length, requests, batch)."""
    if origin not in ORIGINS:
        raise ValueError(f"origin: must be {', '.join(ORIGINS[:-1])} or {ORIGINS[-1]}, got {origin!r}")
    if judged not in JUDGED_BY:
        raise ValueError(f"judged: must be one of {', '.join(JUDGED_BY)}, got {judged!r}")
    return {
        "name": name,
        "origin": origin,
        "vocab": vocab,
        "k": k,
        "tokens": tokens,
        "judged": judged,
        "runs": runs,
        "detect_tv": detect_tv,
        **shape,
    }


@dataclass
class BatteryResult:
    """What one battery run found, in the fields every interface fills (round, loop and kernel
    alike). ``mean_tokens_per_round``: each case's (measured, expected) tokens per round, or per
    pass for a loop, or per row for a kernel. ``figures``: the figures one interface alone
    reports, a dataclass of its own package (``interfaces.round.figures.RoundFigures``: the
    optimum tokens per round over exact rules), None where it reports none; ``to_dict`` gives
    them as a dict under ``"figures"`` (empty for None)."""

    findings: list[Finding] = field(default_factory=list)
    exact_tv_max: float | None = None  # the largest exact TV over enumerated cases
    chi2_p_value_min: float | None = None  # the smallest chi-square p-value
    samples_to_detect: int | None = None  # runs the chi-square needed to flag a bias
    mean_tokens_per_round: dict = field(default_factory=dict)  # case -> (measured, expected)
    figures: object | None = None  # the interface's own figures (a dataclass), None without them
    power: list[dict] = field(default_factory=list)  # statistically judged cases: runs, min TV
    shortfalls: list[str] = field(default_factory=list)  # why the verdict cannot be True
    ran: list[str] = field(default_factory=list)  # what was run, one line each
    output: str = ""  # the tail of what the subject printed
    budget: str = ""
    timed_out: bool = False
    counterexample: dict | None = None
    seconds: float = 0.0
    cases: list[dict] = field(default_factory=list)  # every case run, one ``coverage_entry`` each
    reach: dict = field(default_factory=dict)  # dimension -> the largest value the cases run reached
    rounding: dict = field(default_factory=dict)  # the precision exact laws were judged at (laws.rounding.tally)

    def cover(self, **entry) -> None:
        """Record one case in ``cases`` (``coverage_entry``'s fields), once per name."""
        row = coverage_entry(**entry)
        if all(c["name"] != row["name"] for c in self.cases):
            self.cases.append(row)

    def flagged(self, kinds=BREAKING_KINDS) -> list[Finding]:
        return [f for f in self.findings if f.kind in kinds and f.check != "rng"]

    @property
    def environment(self) -> str | None:
        """What this environment lacks to run the subject (the first environment finding,
        with what to do), or None."""
        found = self.flagged(("environment",))
        return f"{found[0].message}: {environment_problem(found[0].message)}" if found else None

    @property
    def exact(self) -> bool | None:
        if self.flagged():
            return False
        if self.environment:
            return None
        if self.shortfalls or self.timed_out or any(f.check == "rng" for f in self.findings):
            return None
        return True

    @property
    def efficient(self) -> bool | None:
        if self.flagged(("efficiency",)):
            return False
        if not self.mean_tokens_per_round or any(s.startswith("tokens per round") for s in self.shortfalls):
            return None
        return True

    def to_dict(self) -> dict:
        out = asdict(self)
        out["mean_tokens_per_round"] = {
            k: {"measured": a, "expected": b} for k, (a, b) in self.mean_tokens_per_round.items()
        }
        out["figures"] = out["figures"] or {}  # asdict made a dataclass of figures a dict
        out["exact"], out["efficient"], out["environment"] = self.exact, self.efficient, self.environment
        return out


__all__ = [
    "BREAKING_KINDS",
    "CAMPAIGN_SECONDS",
    "DEFAULT_FALSE_FAIL_RATE",
    "EXACT_TV_TOL",
    "JUDGED_BY",
    "ORIGINS",
    "POWER_FALSE_PASS_RATE",
    "BatteryResult",
    "Finding",
    "coverage_entry",
    "stopping_kinds",
]
