"""The one detector battery: every consumer (mutant report, checker, experiments, benchmarks)
runs a sampler through these functions and never re-implements a detector.

Four detectors, each run on a battery of table-driven cases (``Case``):

- ``exact``: the exact output distribution of the first m emitted tokens, by enumerating every
  path of the sampler's random decisions (specverify.exact), against the target's; a finding when
  TV > ``EXACT_TV_TOL``. No sampling noise, so even a float16-rounding bias (~1e-5) shows.
  Where the sampler cannot be enumerated the case falls back to statistics and says so.
- ``statistical``: chi-square of the first m tokens over sampled runs against the exact target,
  run sequentially at doubling sample sizes; the run's false-fail budget is split Bonferroni over
  every case and every look. Reports the p-value and the samples it needed to see a bias.
- ``tokens_per_round``: the sampler's mean round length against the exact rule's (equal to
  ``expected_tokens(alpha, k)`` for i.i.d. acceptance): exact where enumerable, else a bounded-mean
  test. A finding here is an efficiency finding, not an exactness one.
- ``contract``: 1 to k + 1 ints in range, no exception, no writes into the arrays handed over
  (the models' tables are read-only), a return within a per-call time limit.

A sampler that raises, hangs or returns junk yields findings, never an exception out of here.
References: Leviathan et al. 2023 (arXiv 2211.17192) for the rule; the bug classes are listed
in specverify.mutants.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from . import exact, stats
from .chains import TableModel, handout_iid, iid_model, random_model, toy_chain
from .samplers.chain import speculative_step

EXACT_TV_TOL = 1e-9
"""A correct sampler's exact TV is rounding noise (~1e-15); anything above 1e-9 is a bias."""

BUDGETS = ("quick", "standard", "thorough")

DEFAULT_FALSE_FAIL_RATE = 1e-6
"""Total false-fail budget of one battery run, split Bonferroni across its statistical checks."""


class ContractBreach(Exception):
    """The sampler broke the interface: raised, hung, returned junk or wrote into its inputs."""


@dataclass(frozen=True)
class Case:
    """One model, prefix, k and window of m emitted tokens."""

    name: str
    model: TableModel
    prefix: tuple
    k: int
    m: int


@dataclass
class Finding:
    check: str  # "exact-tv" | "chi-square" | "tokens-per-round" | "contract"
    kind: str  # "distribution" | "contract" | "efficiency" | "error"
    message: str
    case: str | None = None
    data: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"check": self.check, "kind": self.kind, "message": self.message,
                "case": self.case, **self.data}


@dataclass
class BatteryResult:
    findings: list[Finding] = field(default_factory=list)
    exact_tv: float | None = None  # the largest exact TV over enumerable cases
    chi2_p_value: float | None = None  # the smallest chi-square p-value
    samples_to_detect: int | None = None  # runs the statistical detector needed to flag it
    mean_tokens: dict = field(default_factory=dict)  # case -> (measured, expected)
    ran: list[str] = field(default_factory=list)  # what was run, one line each
    seconds: float = 0.0

    def flagged(self, kinds=("distribution", "contract", "error")) -> list[Finding]:
        return [f for f in self.findings if f.kind in kinds]

    @property
    def exact(self) -> bool:
        return not self.flagged()

    @property
    def efficient(self) -> bool | None:
        if not self.mean_tokens:
            return None
        return not self.flagged(("efficiency",))

    def detectors_that_flagged(self) -> list[str]:
        return sorted({f.check for f in self.findings})

    def to_dict(self) -> dict:
        out = asdict(self)
        out["findings"] = [f.to_dict() for f in self.findings]
        out["mean_tokens"] = {k: list(v) for k, v in self.mean_tokens.items()}
        return out


# --------------------------------------------------------------------------- the battery


def battery(budget: str = "standard") -> list[Case]:
    """The cases every detector runs on: i.i.d., first-, second- and third-order and
    position-dependent chains, zeros in p and in q, disjoint supports, k from 1 to 5, windows of
    k + 1 or more tokens so that accepted drafts, residual and bonus tokens all appear.
    """
    zeros_pq = iid_model([0.5, 0.5, 0.0], [0.0, 0.6, 0.4], name="iid-zeros")
    disjoint = iid_model([0.7, 0.3, 0.0], [0.0, 0.0, 1.0], name="iid-disjoint")
    binary = iid_model([0.7, 0.3], [0.4, 0.6], name="iid-binary")
    cases = [
        Case("handout toy chain, k=2, 2 tokens", toy_chain(), (0,), 2, 2),
        Case("iid V2 alpha=0.7, k=4, 5 tokens", binary, (), 4, 5),
        Case("iid zeros in p and q, k=2, 3 tokens", zeros_pq, (), 2, 3),
        Case("iid disjoint supports, k=1, 2 tokens", disjoint, (), 1, 2),
        Case("2nd-order chain V3, k=1, 3 tokens", random_model(3, 2, 1, 1), (2, 1), 1, 3),
        Case("position-dependent chain V3, k=2, 3 tokens", random_model(3, 1, 3, 2), (1,), 2, 3),
        Case("chain with zeros V3, k=3, 4 tokens", random_model(3, 1, 1, 3, zeros=True), (0,), 3, 4),
        Case("position-dependent 2nd-order V2, k=4, 5 tokens", random_model(2, 2, 2, 5), (0, 1), 4, 5),
        Case("3rd-order chain V2, k=5, 6 tokens", random_model(2, 3, 1, 4), (1, 0, 1), 5, 6),
    ]
    if budget == "quick":
        return [cases[0], cases[4], cases[5], cases[6]]
    if budget == "thorough":
        cases += [
            Case("handout iid alpha=0.8, k=4, 5 tokens", handout_iid(), (), 4, 5),
            Case("toy chain, k=3, 4 tokens", toy_chain(), (1,), 3, 4),
            Case("chain with zeros V4, k=2, 3 tokens", random_model(4, 1, 1, 6, zeros=True), (3,), 2, 3),
        ]
    return cases


def round_length_cases() -> list[Case]:
    """Cases for tokens per round: the handout's i.i.d. alpha = 0.8 pair at k = 4 (3.3616
    tokens), zeros in p and q, and the toy chain (non-i.i.d.: the exact rule's own expectation)."""
    return [
        Case("handout iid alpha=0.8, k=4", handout_iid(), (), 4, 1),
        Case("iid zeros in p and q, k=2", iid_model([0.5, 0.5, 0.0], [0.0, 0.6, 0.4]), (), 2, 1),
        Case("handout toy chain, k=2", toy_chain(), (0,), 2, 1),
    ]


def reference_case() -> Case:
    """The handout's two-token window on its toy chain (k = 2)."""
    return battery()[0]


# --------------------------------------------------------------------------- contract


_DEADLINES: list[tuple[float, str, type]] = []  # nested time limits, innermost last


def _arm() -> None:
    remaining = min(d for d, _, _ in _DEADLINES) - time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-4))


def _on_alarm(signum, frame):
    now = time.monotonic()
    for deadline, what, exc in _DEADLINES:  # the outermost expired limit wins
        if deadline <= now + 1e-3:
            raise exc(what)
    _arm()


@contextmanager
def time_limit(seconds: float, what: str, exc: type = None):
    """Raise ``exc(f"{what} did not return within {seconds} s")`` if the body overruns.

    SIGALRM based, so it interrupts a sampler stuck in a Python loop; nests (the earliest
    deadline fires); a no-op outside the main thread, where signals cannot be delivered.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    exc = exc or ContractBreach
    if not _DEADLINES:
        signal.signal(signal.SIGALRM, _on_alarm)
    _DEADLINES.append((time.monotonic() + seconds, f"{what} did not return within {seconds:g} s", exc))
    _arm()
    try:
        yield
    finally:
        _DEADLINES.pop()
        if _DEADLINES:
            _arm()
        else:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)


def validate_round(out, k: int, vocab_size: int) -> list[int]:
    """The round's tokens as ints, or ContractBreach saying what is wrong with them."""
    if isinstance(out, (str, bytes)) or not hasattr(out, "__len__"):
        raise ContractBreach(f"returned {type(out).__name__}, not a list of token ids")
    tokens = list(out)
    if not 1 <= len(tokens) <= k + 1:
        raise ContractBreach(f"returned {len(tokens)} tokens with k={k} (must be 1 to {k + 1})")
    for t in tokens:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise ContractBreach(f"returned a {type(t).__name__} ({t!r}), not an int token id")
        if not 0 <= int(t) < vocab_size:
            raise ContractBreach(f"returned token {int(t)}, outside the vocabulary [0, {vocab_size})")
    return [int(t) for t in tokens]


def guarded(sampler: Callable, vocab_size: int) -> Callable:
    """``sampler`` with every call checked: exceptions and junk become ContractBreach."""

    def call(p_fn, q_fn, prefix, k, rng):
        try:
            out = sampler(p_fn, q_fn, prefix, k, rng)
        except (ContractBreach, exact.NotEnumerable):
            raise
        except Exception as exc:  # the user's sampler raised: that is a finding
            if isinstance(exc, ValueError) and "read-only" in str(exc):
                raise ContractBreach(f"wrote into an array p_fn or q_fn returned (they are "
                                     f"read-only here: {exc})") from exc
            raise ContractBreach(f"raised {type(exc).__name__}: {exc}") from exc
        return validate_round(out, k, vocab_size)

    return call


def first_tokens(sampler, model: TableModel, prefix: tuple, k: int, m: int, rng) -> tuple:
    """Run rounds from ``prefix`` until at least m tokens are out; the first m of them."""
    out: list[int] = []
    ctx = tuple(prefix)
    while len(out) < m:
        new = sampler(model.p_fn, model.q_fn, ctx, k, rng)
        out += new
        ctx += tuple(new)
    return tuple(out[:m])


def contract_detector(sampler, cases, seed: int, result: BatteryResult,
                      calls: int = 20, call_timeout: float = 2.0) -> None:
    """A few rounds per case with read-only model tables, each within ``call_timeout``."""
    rng = np.random.default_rng(seed)
    for case in cases:
        g = guarded(sampler, case.model.vocab_size)
        try:
            for _ in range(calls):
                with time_limit(call_timeout, f"one round on {case.name!r}"):
                    g(case.model.p_fn, case.model.q_fn, case.prefix, case.k, rng)
        except ContractBreach as exc:
            result.findings.append(Finding("contract", "contract", str(exc), case.name))
            return  # one breach is enough; the other detectors will skip broken cases too
    result.ran.append(f"contract: {calls} rounds on each of {len(cases)} cases, read-only tables, "
                      f"{call_timeout:g} s per call")


# --------------------------------------------------------------------------- exact


def exact_case(sampler, case: Case, max_paths: int) -> tuple[dict, dict]:
    """(sampler's exact distribution, target's) for the case, or NotEnumerable / ContractBreach."""
    g = guarded(sampler, case.model.vocab_size)
    got = exact.sampler_distribution(g, case.model.p_fn, case.model.q_fn, case.prefix, case.k,
                                     case.m, max_paths=max_paths)
    return got, exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)


def exact_detector(sampler, cases, result: BatteryResult, max_paths: int = 100_000,
                   case_timeout: float = 10.0, stop_on_first: bool = False) -> list[Case]:
    """Exact TV per case; returns the cases that could not be enumerated (for statistics).

    ``stop_on_first`` ends the run at the first biased case (enough to kill a mutant); the
    cases left unrun are not handed to statistics either.
    """
    fallback = []
    for case in cases:
        if stop_on_first and result.flagged():
            result.ran.append("exact: stopped after the first finding")
            break
        try:
            with time_limit(case_timeout, "exact enumeration", exact.NotEnumerable):
                got, want = exact_case(sampler, case, max_paths)
        except exact.NotEnumerable as exc:
            result.ran.append(f"exact: {case.name}: not enumerable ({exc}); statistics instead")
            fallback.append(case)
            continue
        except ContractBreach as exc:
            result.findings.append(Finding("contract", "contract", str(exc), case.name))
            continue
        tv = exact.total_variation(got, want)
        result.exact_tv = tv if result.exact_tv is None else max(result.exact_tv, tv)
        result.ran.append(f"exact: {case.name}: TV {tv:.3g}")
        if tv > EXACT_TV_TOL:
            result.findings.append(Finding(
                "exact-tv", "distribution",
                f"exact output distribution differs from the target's: TV {tv:.4g}",
                case.name, {"exact_tv": tv, "got": _table(got), "expected": _table(want)}))
    return fallback


def _table(dist: dict, limit: int = 16) -> dict:
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:limit]
    return {" ".join(map(str, key)): round(float(v), 12) for key, v in top}


# --------------------------------------------------------------------------- statistics


def sample_first_tokens(sampler, case: Case, n: int, rng) -> list[tuple]:
    g = guarded(sampler, case.model.vocab_size)
    return [first_tokens(g, case.model, case.prefix, case.k, case.m, rng) for _ in range(n)]


def looks(n_min: int, n_max: int) -> list[int]:
    """Sample sizes of the sequential test: n_min, 2 n_min, ... up to n_max."""
    sizes = [n_min]
    while sizes[-1] * 2 <= n_max:
        sizes.append(sizes[-1] * 2)
    return sizes


def statistical_detector(sampler, cases, seed: int, result: BatteryResult, false_fail_rate: float,
                         n_min: int = 500, n_max: int = 16_000, time_budget: float = 20.0) -> None:
    """Chi-square of the first m tokens, at doubling sample sizes, until it fails or n_max.

    Each look is one check in the Bonferroni split, so the whole detector's false-fail rate is at
    most ``false_fail_rate``. Samples are reused across looks (the looks are nested), and the
    looks go breadth first (every live case at n before any at 2n), so a slow sampler that
    runs out of ``time_budget`` has still been tested on every case.
    """
    sizes = looks(n_min, n_max)
    per_check = stats.split_budget(false_fail_rate, len(cases) * len(sizes))
    rng = np.random.default_rng(seed)
    deadline = time.perf_counter() + time_budget
    live = {i: [] for i in range(len(cases))}  # case index -> samples so far
    want = [exact.sequence_distribution(c.model.p_fn, c.prefix, c.m) for c in cases]
    last_p: dict = {}
    for n in sizes:
        for i in list(live):
            case, samples = cases[i], live[i]
            if time.perf_counter() > deadline and samples:
                result.ran.append(f"chi-square: {case.name}: stopped at n={len(samples)} "
                                  f"(p-value {last_p[i]:.3g}; time budget {time_budget:g} s)")
                del live[i]
                continue
            try:
                with time_limit(max(5.0, 2e-3 * n), f"{n - len(samples)} sampled runs"):
                    samples += sample_first_tokens(sampler, case, n - len(samples), rng)
            except ContractBreach as exc:
                result.findings.append(Finding("contract", "contract", str(exc), case.name))
                del live[i]
                continue
            test = stats.chi_square_test(samples, want[i], false_fail_rate=per_check)
            p = last_p[i] = test.p_value if test.p_value is not None else 0.0
            result.chi2_p_value = p if result.chi2_p_value is None else min(result.chi2_p_value, p)
            if not test.passed:
                tv = stats.tv_distance(stats.empirical_distribution(samples), want[i])
                result.samples_to_detect = n if result.samples_to_detect is None else min(
                    result.samples_to_detect, n)
                result.findings.append(Finding(
                    "chi-square", "distribution",
                    f"sampled distribution differs from the target's: chi-square p-value "
                    f"{p:.3g} < {per_check:.3g} after {n} runs, empirical TV {tv:.3g} "
                    f"({test.detail})",
                    case.name, {"p_value": p, "samples": n, "empirical_tv": tv}))
                del live[i]
    for i in live:
        result.ran.append(f"chi-square: {cases[i].name}: passed at n={sizes[-1]} "
                          f"(p-value {last_p[i]:.3g})")


# --------------------------------------------------------------------------- tokens per round


def expected_round_length(case: Case) -> float:
    """The exact rule's mean round length on the case (= expected_tokens(alpha, k) if i.i.d.)."""
    dist = exact.round_length_distribution(
        speculative_step, case.model.p_fn, case.model.q_fn, case.prefix, case.k)
    return sum(n * w for n, w in dist.items())


def tokens_per_round_detector(sampler, cases, seed: int, result: BatteryResult,
                              false_fail_rate: float, n: int = 4000) -> None:
    """Mean tokens per round against the exact rule's: exact where enumerable, else sampled.

    Only a shortfall is an efficiency finding: an exact single-chain sampler cannot beat the
    rule (it is the maximal coupling of q and p at every position), while an exact multi-draft
    sampler legitimately does, with more draft tokens; an excess is noted in ``ran``.
    """
    rng = np.random.default_rng(seed)
    per_check = stats.split_budget(false_fail_rate, len(cases))
    for case in cases:
        want = expected_round_length(case)
        g = guarded(sampler, case.model.vocab_size)
        try:
            try:
                with time_limit(10.0, "exact enumeration", exact.NotEnumerable):
                    dist = exact.round_length_distribution(
                        g, case.model.p_fn, case.model.q_fn, case.prefix, case.k)
                got = sum(length * w for length, w in dist.items())
                differs, how = abs(got - want) > 1e-9, "exact"
            except exact.NotEnumerable:
                with time_limit(max(5.0, 2e-3 * n), f"{n} sampled rounds"):
                    lengths = [len(g(case.model.p_fn, case.model.q_fn, case.prefix, case.k, rng))
                               for _ in range(n)]
                test = stats.mean_bound_test(lengths, want, 1, case.k + 1, false_fail_rate=per_check)
                got, differs, how = float(np.mean(lengths)), not test.passed, f"sampled n={n}"
        except ContractBreach as exc:
            result.findings.append(Finding("contract", "contract", str(exc), case.name))
            continue
        result.mean_tokens[case.name] = (got, want)
        result.ran.append(f"tokens per round: {case.name}: {got:.4f} vs {want:.4f} ({how})"
                          + (" (more than one chain of k drafts gives)" if differs and got > want else ""))
        if differs and got < want:
            result.findings.append(Finding(
                "tokens-per-round", "efficiency",
                f"mean tokens per round {got:.4f}, the exact rule gives {want:.4f} ({how})",
                case.name, {"measured": got, "expected": want}))


# --------------------------------------------------------------------------- the battery run


def run_battery(sampler, budget: str = "standard", seed: int = 0,
                false_fail_rate: float = DEFAULT_FALSE_FAIL_RATE,
                stat_cases: int | None = None, n_max: int | None = None,
                exact_max_paths: int = 100_000, stop_on_first: bool = False) -> BatteryResult:
    """Every detector on every case of the battery. Never raises for a broken sampler.

    ``stat_cases`` / ``n_max`` bound the statistical detector (cases, largest sample size);
    ``stop_on_first`` stops exact enumeration at the first biased case (see exact_detector).
    """
    if budget not in BUDGETS:
        raise ValueError(f"budget: must be one of {', '.join(BUDGETS)}, got {budget!r}")
    t0 = time.perf_counter()
    cases = battery(budget)
    result = BatteryResult()
    half = false_fail_rate / 2  # half for the distribution test, half for tokens per round
    contract_detector(sampler, cases, seed, result)
    if result.findings:  # broken interface: the other detectors would only repeat it
        result.ran.append("contract: breached; exact, statistical and tokens-per-round "
                          "detectors skipped")
        result.seconds = time.perf_counter() - t0
        return result
    fallback = exact_detector(sampler, cases, result, max_paths=exact_max_paths,
                              stop_on_first=stop_on_first)
    n_stat = {"quick": 2, "standard": 3, "thorough": len(cases)}[budget] if stat_cases is None else stat_cases
    enumerated = [c for c in cases if all(c is not f for f in fallback)]
    stat = fallback + enumerated[: max(0, n_stat - len(fallback))]
    n_max = n_max or {"quick": 4000, "standard": 16_000, "thorough": 64_000}[budget]
    statistical_detector(sampler, stat, seed + 1, result, half, n_max=n_max)
    tokens_per_round_detector(sampler, round_length_cases(), seed + 2, result, half)
    result.seconds = time.perf_counter() - t0
    return result


__all__ = [
    "BatteryResult", "Case", "ContractBreach", "EXACT_TV_TOL", "Finding", "battery",
    "contract_detector", "exact_detector", "first_tokens", "guarded",
    "run_battery", "statistical_detector", "tokens_per_round_detector",
]
