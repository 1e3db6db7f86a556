"""The one detector battery: the mutant report, the checker, the experiments and the benchmarks
all judge a sampler through ``run_battery`` and never re-implement a detector.

Detectors, each on the battery's table-driven cases (``Case``), the subject always in its own
process (specverify.runner):

- ``contract``: 1 to k + 1 int tokens in range from a list, tuple or array; no exception, no
  exit, no write into the arrays p_fn / q_fn hand out (each call gets fresh copies, compared
  afterwards), every call within ``Budget.call_limit_s``; the same seed replays the same rounds.
- ``exact``: the exact distribution of the first m emitted tokens by enumerating every path of
  the sampler's random decisions (specverify.exact); a finding when TV > ``EXACT_TV_TOL``.
- ``chi-square``: sampled runs against the exact target at doubling sample sizes; the false-fail
  budget is split Bonferroni over every case and every look.
- ``tokens-per-round``: the mean round length against the exact rule's; a shortfall is an
  efficiency finding.
- ``binned-chi-square``: the engine-scale cases (``engine_scale_cases``: V 4096 to 152,064, k up
  to 8, and the user's ``--vocab`` / ``--k`` / ``--max-tokens``), sampled and judged on every
  window position by a binned chi-square (specverify.scale); a finding there is shrunk over
  vocabularies and k (``shrink_engine_scale``).

Why this module is over 500 lines: it is still the whole round battery (budgets, cases, the
subject-side tasks, the parent's detectors and the counterexample search); what every battery
shares (results, the subject-side guards, calls under deadlines) is ``specverify.battery``,
re-exported here for callers of the round battery's names. The part of issue 21 not yet done is
moving the rest into ``interfaces/round.py``; its sections follow that cut.

Verdict (``BatteryResult.exact``): False on a distribution finding or a contract breach; None
(inconclusive) when no finding was made but a case could not be judged to the budget's plan (out
of time, or a sampler that does not draw from its rng); True otherwise. References are computed
from the parent's own copies of the tables, never from anything the subject touched.
Rule: Leviathan, Kalman, Matias (arXiv 2211.17192); bug classes: specverify.mutants.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable

import numpy as np

from . import exact, optimum_tokens, runner, scale, stats
from .battery import (BREAKING_KINDS, CAMPAIGN_SECONDS, DEFAULT_FALSE_FAIL_RATE, EXACT_TV_TOL, JUDGED_BY, MESSAGE_CHARS,  # noqa: F401
                      PASSED_THROUGH, PLAIN_INTS, POWER_FALSE_PASS_RATE, SHOW_CHARS, Battery, BatteryResult,
                      ContractBreach, Finding, OutOfTime, as_sequence, call_subject, call_within, coverage_entry,
                      describe_exception, items_of, message_of, plain_tokens, reading, run_in_subject, show,
                      subject_process, time_limit, token_id, type_name)
from .chains import TableModel, handout_iid, iid_model, random_model, toy_chain
from .samplers.chain import speculative_step

MIN_CONTRACT_CALLS = 3
REPLAYED_CALLS = 10


# --------------------------------------------------------------------------- budgets and cases


@dataclass(frozen=True)
class Budget:
    """Everything a battery run may spend; ``BUDGETS`` holds the named ones."""

    name: str
    cases: tuple[int, ...]  # indices into all_cases()
    stat_cases: int  # enumerable cases also tested by statistics (besides every fallback case)
    n_max: int  # largest sample size of the sequential chi-square
    n_min: int = 500
    contract_calls: int = 20
    contract_s: float = 2.0  # per case, after MIN_CONTRACT_CALLS
    call_limit_s: float = 2.0  # one sampler call
    case_enumeration_s: float = 10.0
    enumeration_s: float = 60.0  # all cases together
    max_paths: int = 100_000
    statistics_s: float = 20.0  # when every case was also enumerated (a cross-check)
    fallback_statistics_s: float = 60.0  # when statistics alone judges some case
    detect_tv: float = 0.1  # a case judged by statistics alone must see this TV (w.p. 0.95)
    round_length_runs: int = 4000
    round_length_s: float = 10.0
    detect_tokens: float = 0.5  # ... and a sampled tokens-per-round shortfall of this size
    false_fail_rate: float = DEFAULT_FALSE_FAIL_RATE
    counterexample_s: float = 15.0
    counterexample_samples: int = 2000
    generated: int = 3  # cases drawn from the check's seed besides the fixed ones (generated_cases)
    engine_vocab: int = 256  # one more generated case: an i.i.d. pair over this many ids, k = 1 (0: none)
    # engine-scale cases judged by a binned chi-square per position (specverify.scale): (V, k, side)
    scale_cases: tuple[tuple[int, int, str], ...] = ((4096, 8, "residual"), (33024, 2, "draft"))
    scale_runs: int = 2000  # runs per engine-scale or aimed case (one look)
    scale_s: float = 15.0  # the most seconds one engine-scale case may sample
    aim_s: float = 40.0  # the most seconds all aimed cases together may sample (--vocab/--k/--max-tokens)
    scale_call_limit_s: float = 10.0  # one call's limit on an engine-scale case (past it: a shortfall)

    def coverage(self) -> str:
        chosen = [all_cases()[i] for i in self.cases]
        extra = f" + {self.generated} drawn from the seed" if self.generated else ""
        extra += f" + one over {self.engine_vocab} ids" if self.engine_vocab else ""
        extra += "".join(f" + V{v} k={k} binned" for v, k, _ in self.scale_cases)
        return (f"{len(chosen)} fixed cases{extra}, k up to {max(c.k for c in chosen)}, windows up to "
                f"{max(c.m for c in chosen)} tokens, chi-square up to {self.n_max} runs; a case "
                f"the enumerator cannot follow must see TV {self.detect_tv:g}")


BUDGETS = {
    "quick": Budget("quick", (0, 4, 5, 6), stat_cases=2, n_max=4000, contract_s=1.0,
                    case_enumeration_s=5.0, enumeration_s=15.0, fallback_statistics_s=30.0,
                    detect_tv=0.15, round_length_s=5.0, generated=1, engine_vocab=128,
                    scale_cases=(), scale_runs=1000, scale_s=8.0, aim_s=20.0),
    "standard": Budget("standard", tuple(range(9)), stat_cases=3, n_max=16_000),
    "thorough": Budget("thorough", tuple(range(12)), stat_cases=12, n_max=64_000,
                       enumeration_s=120.0, statistics_s=120.0, fallback_statistics_s=300.0,
                       detect_tv=0.05, round_length_s=30.0, generated=12, engine_vocab=512,
                       case_enumeration_s=30.0,
                       scale_cases=((4096, 8, "residual"), (33024, 8, "draft"), (152064, 4, "residual")),
                       scale_runs=4000, scale_s=60.0, aim_s=240.0),
}


def get_budget(budget: str | Budget) -> Budget:
    if isinstance(budget, Budget):
        return budget
    if budget not in BUDGETS:
        raise ValueError(f"budget: must be one of {', '.join(BUDGETS)}, got {budget!r}")
    return BUDGETS[budget]


@dataclass(frozen=True)
class Case:
    """One model, prefix, k and window of m emitted tokens."""

    name: str
    model: TableModel
    prefix: tuple
    k: int
    m: int


@lru_cache(maxsize=1)
def all_cases() -> tuple[Case, ...]:
    """i.i.d., first- to third-order and position-dependent chains, zeros in p and in q, disjoint
    supports, k from 1 to 5, windows of k + 1 or more tokens (accepted drafts, residual and bonus
    tokens all appear)."""
    zeros_pq = iid_model([0.5, 0.5, 0.0], [0.0, 0.6, 0.4], name="iid-zeros")
    disjoint = iid_model([0.7, 0.3, 0.0], [0.0, 0.0, 1.0], name="iid-disjoint")
    binary = iid_model([0.7, 0.3], [0.4, 0.6], name="iid-binary")
    return (
        Case("handout toy chain, k=2, 2 tokens", toy_chain(), (0,), 2, 2),
        Case("iid V2 alpha=0.7, k=4, 5 tokens", binary, (), 4, 5),
        Case("iid zeros in p and q, k=2, 3 tokens", zeros_pq, (), 2, 3),
        Case("iid disjoint supports, k=1, 2 tokens", disjoint, (), 1, 2),
        Case("2nd-order chain V3, k=1, 3 tokens", random_model(3, 2, 1, 1), (2, 1), 1, 3),
        Case("position-dependent chain V3, k=2, 3 tokens", random_model(3, 1, 3, 2), (1,), 2, 3),
        Case("chain with zeros V3, k=3, 4 tokens", random_model(3, 1, 1, 3, zeros=True), (0,), 3, 4),
        Case("position-dependent 2nd-order V2, k=4, 5 tokens", random_model(2, 2, 2, 5), (0, 1), 4, 5),
        Case("3rd-order chain V2, k=5, 6 tokens", random_model(2, 3, 1, 4), (1, 0, 1), 5, 6),
        Case("handout iid alpha=0.8, k=4, 5 tokens", handout_iid(), (), 4, 5),
        Case("toy chain, k=3, 4 tokens", toy_chain(), (1,), 3, 4),
        Case("chain with zeros V4, k=2, 3 tokens", random_model(4, 1, 1, 6, zeros=True), (3,), 2, 3),
    )


def battery(budget: str | Budget = "standard") -> list[Case]:
    """The fixed cases a budget runs every detector on (``generated_cases`` adds the drawn ones)."""
    return [all_cases()[i] for i in get_budget(budget).cases]


GENERATED_SHAPES = ((2, 5, 6), (3, 4, 4), (4, 3, 3))
"""(V, largest k, largest window) of a drawn case: the enumerator follows all of them."""


def generated_cases(budget: str | Budget, seed: int) -> list[Case]:
    """``budget.generated`` cases drawn from ``numpy.random.SeedSequence(seed)``'s child 1 (the
    same seed gives the same cases): a vocabulary of 2 to 4, order 0 to 2, period 1 to 3, zeros
    or not, k and a window up to ``GENERATED_SHAPES``' bounds, a random prefix; then, with
    ``engine_vocab``, an i.i.d. pair over that many ids (``scale.enumerable_pair``: mass on 40
    of them, edges included; k = 1, one token: ~3,000 paths whatever V) where a bug that needs a
    large vocabulary (a narrow id type, drafts from a truncated q) can show."""
    b = get_budget(budget)
    child = np.random.SeedSequence(seed).spawn(2)[1]
    out = []
    for i, stream in enumerate(child.spawn(b.generated)):
        rng = np.random.default_rng(stream)
        V, k_max, m_max = GENERATED_SHAPES[int(rng.integers(len(GENERATED_SHAPES)))]
        order, period = int(rng.integers(0, 3)), int(rng.integers(1, 4))
        model = random_model(V, order, period, int(rng.integers(1 << 31)), zeros=bool(rng.random() < 0.4))
        k = int(rng.integers(1, k_max + 1))
        m = int(rng.integers(1, min(k + 1, m_max) + 1))
        prefix = tuple(int(x) for x in rng.integers(0, V, max(order, 1)))
        out.append(Case(f"generated #{i} (seed {seed}): {model.name}, k={k}, {m} tokens", model, prefix, k, m))
    if b.engine_vocab:
        V = b.engine_vocab
        model = scale.enumerable_pair(V, np.random.default_rng(child.spawn(1)[0]))
        out.append(Case(f"generated V{V} iid (seed {seed}), k=1, 1 token", model, (), 1, 1))
    return out


WIDE_VOCAB = 128
"""A case over this many ids or more is wide: a call there past its limit is a shortfall (the
sampler too slow to be judged at that vocabulary: inconclusive, never "not exact" for it)."""


def too_slow(breach: str) -> bool:
    """Whether a breach is only a call past its time limit (``guarded``'s or the runner's kill)."""
    return "did not return within" in breach


def engine_scale_case(vocab: int, k: int, m: int, side: str, origin: str, rng, seed: int) -> Case:
    """One engine-scale case: an i.i.d. ``scale.scale_pair`` over ``vocab`` ids drawn from
    ``rng``, k drafts, a window of m tokens, judged by the binned chi-square
    (``RoundBattery.engine_scale``)."""
    return Case(f"{origin} V{vocab} {side} (seed {seed}), k={k}, {m} tokens, binned",
                scale.scale_pair(vocab, side, rng), (), k, m)


SCALE_STREAMS = ("budget and aimed cases", "engine-scale runs", "shrink cases", "shrink runs")
"""The children of ``SeedSequence(seed).spawn(3)[2]`` (the round battery's engine-scale streams),
by index: the cases (one grandchild per case, in ``engine_scale_cases``' order), the rng of their
runs, the smaller cases a shrink draws (one grandchild per candidate) and the rng of its runs."""


def scale_stream(seed: int, purpose: str) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed).spawn(3)[2].spawn(len(SCALE_STREAMS))[SCALE_STREAMS.index(purpose)]


def engine_scale_cases(budget: str | Budget, seed: int, aim=None) -> list[Case]:
    """The budget's engine-scale cases (``scale_cases``: V, k, side; a window of k + 1 tokens, at
    most 9), then, with an ``Aim`` (``interfaces.Aim``: the user's --vocab, --k, --max-tokens),
    one aimed case per k (k = 4 when none is given) at the aimed vocabulary (4096 when none), a
    window of the aimed max_tokens (k + 1 when none; at least 1), sides alternating. Each drawn
    from its own grandchild of ``scale_stream(seed, "budget and aimed cases")``."""
    b = get_budget(budget)
    shapes = [(v, k, min(k + 1, 9), side, "generated") for v, k, side in b.scale_cases]
    if aim:
        for i, k in enumerate(aim.ks or (4,)):
            m = max(1, aim.max_tokens) if aim.max_tokens is not None else k + 1
            shapes.append((aim.vocab or 4096, k, m, scale.SIDES[i % 2], "aimed"))
    streams = scale_stream(seed, "budget and aimed cases").spawn(len(shapes))
    return [engine_scale_case(v, k, m, side, origin, np.random.default_rng(stream), seed)
            for (v, k, m, side, origin), stream in zip(shapes, streams)]


def round_length_cases() -> list[Case]:
    """Tokens per round: the handout's i.i.d. alpha = 0.8 pair at k = 4 (3.3616 tokens), zeros in
    p and q, and the toy chain (non-i.i.d.: the exact rule's own expectation)."""
    return [
        Case("handout iid alpha=0.8, k=4", handout_iid(), (), 4, 1),
        Case("iid zeros in p and q, k=2", iid_model([0.5, 0.5, 0.0], [0.0, 0.6, 0.4]), (), 2, 1),
        Case("handout toy chain, k=2", toy_chain(), (0,), 2, 1),
    ]


def reference_case() -> Case:
    """The handout's two-token window on its toy chain (k = 2)."""
    return all_cases()[0]


# --------------------------------------------------------------------------- results


# --------------------------------------------------------------------------- the subject's side
# Everything in this section runs in the subject's process (runner.Runner.call), or in-process for
# the experiments' own samplers.

def validate_round(out, k: int, vocab_size: int) -> list[int]:
    """The round's tokens as ints, or ContractBreach saying what is wrong with them. Whatever the
    returned object raises while it is read becomes ContractBreach too."""
    if type(out) is np.ndarray and out.dtype.kind in "iu":
        out = out.tolist()
    fast = plain_tokens(out, vocab_size)
    if fast is not None and 1 <= len(fast) <= k + 1:
        return fast
    out, is_sequence = as_sequence(out, "returned")
    if not is_sequence:
        raise ContractBreach(f"returned {type_name(out)}, not a list of token ids")
    n, items = items_of(out, "returned", k + 1)
    if not 1 <= n <= k + 1:
        raise ContractBreach(f"returned {n} tokens with k={k} (must be 1 to {k + 1})")
    return [token_id(t, vocab_size, "returned") for t in items]


def _handing_out(name: str, fn: Callable, handed: list) -> Callable:
    """``fn`` returning a fresh copy per call, remembered beside the row it was copied from."""

    def model(prefix):
        row = np.asarray(fn(prefix), dtype=np.float64)
        given = row.copy()
        handed.append((name, prefix, given, row))
        return given

    return model


def _check_untouched(handed: list) -> None:
    for name, prefix, given, original in handed:
        try:
            same = given.tobytes() == original.tobytes()  # 20x faster than np.array_equal on short rows
        except BaseException as exc:  # noqa: BLE001 - the subject replaced what the array holds
            if type(exc) in PASSED_THROUGH:
                raise
            same = False
        if not same:
            try:
                i = int(np.flatnonzero(given != original)[0]) if given.shape == original.shape else 0
                how = f"entry {i} was {original.flat[i]:.6g}, became {given.flat[i]:.6g}"
            except BaseException as exc:  # noqa: BLE001 - its dtype or shape changed as well
                if type(exc) in PASSED_THROUGH:
                    raise
                how = "its contents, dtype or shape changed"
            raise ContractBreach(f"wrote into an array {name} returned for prefix {tuple(prefix)}: {how}")


def guarded(sampler: Callable, vocab_size: int, call_limit: float | None = None,
            interrupt: bool = False) -> Callable:
    """``sampler`` with every call checked: whatever it raises (SystemExit and, in the subject's
    process, KeyboardInterrupt included), junk it returns, a write into what it was handed, and a
    call that took longer than ``call_limit`` seconds become ContractBreach. ``interrupt`` also
    interrupts a call at its limit (SIGALRM); otherwise a hung call is the runner's to kill."""

    def call(p_fn, q_fn, prefix, k, rng):
        handed: list = []
        p, q = _handing_out("p_fn", p_fn, handed), _handing_out("q_fn", q_fn, handed)
        t0 = time.monotonic()
        out = call_subject(sampler, (p, q, prefix, k, rng), call_limit if interrupt else None)
        if call_limit is not None and time.monotonic() - t0 > call_limit:
            raise ContractBreach(f"one call did not return within {call_limit:g} s "
                                 f"(took {time.monotonic() - t0:.2f} s)")
        _check_untouched(handed)
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


def exact_case(sampler, case: Case, max_paths: int, call_limit: float | None = None) -> tuple[dict, dict]:
    """(sampler's exact distribution, target's) for the case, or NotEnumerable / ContractBreach."""
    g = guarded(sampler, case.model.vocab_size, call_limit)
    got = exact.sampler_distribution(g, case.model.p_fn, case.model.q_fn, case.prefix, case.k,
                                     case.m, max_paths=max_paths)
    return got, exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)


def sample_first_tokens(sampler, case: Case, n: int, rng) -> list[tuple]:
    g = guarded(sampler, case.model.vocab_size)
    return [first_tokens(g, case.model, case.prefix, case.k, case.m, rng) for _ in range(n)]


def _round_length(g, case: Case, rng) -> int:
    return len(g(case.model.p_fn, case.model.q_fn, case.prefix, case.k, rng))


def _first_tokens_run(g, case: Case, rng) -> tuple:
    return first_tokens(g, case.model, case.prefix, case.k, case.m, rng)


def contract_task(sampler, case: Case, budget: Budget, rng, calls: int) -> tuple[dict, object]:
    """Up to ``calls`` rounds from the case's prefix (at least MIN_CONTRACT_CALLS, then until
    ``contract_s`` is spent): {"breach": what or None, "rounds": their tokens}, the rng after."""
    g = guarded(sampler, case.model.vocab_size, budget.call_limit_s, interrupt=True)
    outs: list = []
    stop = time.monotonic() + budget.contract_s
    try:
        while len(outs) < calls and (len(outs) < MIN_CONTRACT_CALLS or time.monotonic() < stop):
            outs.append(g(case.model.p_fn, case.model.q_fn, case.prefix, case.k, rng))
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return {"breach": message_of(exc), "rounds": outs}, rng
    return {"breach": None, "rounds": outs}, rng


def enumerate_task(sampler, case: Case, budget: Budget, seconds: float, lengths: bool = False):
    """("ok", exact distribution) | ("not-enumerable", why) | ("breach", what)."""
    g = guarded(sampler, case.model.vocab_size, budget.call_limit_s)
    try:
        with time_limit(seconds, "exact enumeration", exact.NotEnumerable):
            if lengths:
                return "ok", exact.round_length_distribution(
                    g, case.model.p_fn, case.model.q_fn, case.prefix, case.k, max_paths=budget.max_paths)
            return "ok", exact.sampler_distribution(g, case.model.p_fn, case.model.q_fn, case.prefix,
                                                    case.k, case.m, max_paths=budget.max_paths)
    except exact.NotEnumerable as exc:
        return "not-enumerable", message_of(exc)
    except ContractBreach as exc:
        return "breach", message_of(exc)


def sample_task(sampler, case: Case, n: int, rng, budget: Budget, seconds: float,
                run: Callable = _first_tokens_run) -> tuple[list, str | None, object]:
    """Up to n runs (fewer when ``seconds`` ran out); (runs, breach or None, the rng after)."""
    g = guarded(sampler, case.model.vocab_size, budget.call_limit_s)
    out: list = []
    stop = time.monotonic() + seconds
    try:
        while len(out) < n and (not out or time.monotonic() < stop):
            out.append(run(g, case, rng))
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return out, message_of(exc), rng
    return out, None, rng


# --------------------------------------------------------------------------- the battery run


def _among(case: Case, cases) -> bool:
    return any(case is c for c in cases)


def _cached(fn):
    """Memoize a function of a Case by its contents (a Case holds arrays: not hashable)."""
    memo: dict = {}

    def cached(case: Case):
        m = case.model
        key = (m.p_table.tobytes(), m.q_table.tobytes(), m.p_table.shape, m.order, m.period,
               case.prefix, case.k, case.m)
        if key not in memo:
            memo[key] = fn(case)
        return memo[key]

    return cached


@_cached
def target_distribution(case: Case) -> dict:
    """The exact law of the case's first m tokens, from the parent's own tables."""
    return exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)


_optimum_tokens_per_round = _cached(optimum_tokens.optimum_tokens_per_round)
"""The most tokens per round any exact rule gets from the case's chain of k drafts (information:
the token-wise rule stays the bar for ``efficient``)."""

_tree_optimum_tokens_per_round = _cached(optimum_tokens.nodewise_optimum_tokens_per_round)
"""For multi-draft samplers: a tree of depth k with 2 i.i.d. drafts per node, every node at the
transport LP's optimal acceptance (optimum_tokens.nodewise_optimum_tokens_per_round)."""


@_cached
def expected_round_length(case: Case) -> float:
    """The exact rule's mean round length on the case (= expected_tokens(alpha, k) if i.i.d.)."""
    dist = exact.round_length_distribution(
        speculative_step, case.model.p_fn, case.model.q_fn, case.prefix, case.k)
    return sum(n * w for n, w in dist.items())


def looks(n_min: int, n_max: int) -> list[int]:
    """Sample sizes of the sequential test: n_min, 2 n_min, ... up to n_max."""
    sizes = [n_min]
    while sizes[-1] * 2 <= n_max:
        sizes.append(sizes[-1] * 2)
    return sizes


class RoundBattery(Battery):
    """One run of every detector on one subject (the parent's side; ``battery.Battery``'s
    ``call``, ``now`` and ``breach``)."""

    def __init__(self, subject: runner.Runner, budget: Budget, seed: int, deadline: float | None, aim=None):
        super().__init__(subject, budget, seed, deadline)
        self.aim = aim  # interfaces.Aim: aimed engine-scale cases (engine_scale_cases)
        self.too_slow: list[str] = []  # wide cases whose calls overran their limit (shortfalls)

    # -- contract ------------------------------------------------------------------------------
    def contract(self, cases) -> bool:
        """True when the interface held (False: a breach, recorded). Each case's first rounds
        are replayed from the same rng state: a different replay means the subject does not
        draw (only) from its rng."""
        b, rng = self.budget, np.random.default_rng(self.seed)
        unreproducible = []
        for case in cases:
            start = copy.deepcopy(rng)
            try:
                out, rng = self.call(contract_task, case, b, rng, b.contract_calls,
                                     seconds=b.contract_s + b.call_limit_s)
                if not out["breach"]:
                    n = min(len(out["rounds"]), REPLAYED_CALLS)
                    replay, _ = self.call(contract_task, case, replace(b, contract_s=math.inf), start, n,
                                          seconds=n * b.call_limit_s)
                    out["breach"] = replay["breach"]
                    if replay["rounds"] != out["rounds"][:n]:
                        unreproducible.append(case.name)
            except ContractBreach as exc:
                out = {"breach": str(exc)}
            if out["breach"] and too_slow(out["breach"]) and case.model.vocab_size >= WIDE_VOCAB:
                self.too_slow.append(case.name)  # a sampler slow at a wide vocabulary: not judged there
                self.result.shortfalls.append(f"contract: {case.name}: {out['breach']}; not judged at "
                                              f"this vocabulary")
                continue
            if out["breach"]:
                self.breach(out["breach"], case)
                return False
        if unreproducible:
            self.result.findings.append(Finding(
                "rng", "contract",
                "does not draw from rng: not reproducible (the same seed replayed different rounds); "
                "enumeration skipped, distribution judged by statistics",
                unreproducible[0], {"cases": unreproducible}))
        self.result.ran.append(f"contract: up to {b.contract_calls} rounds on each of {len(cases)} "
                               f"cases, {REPLAYED_CALLS} replayed, fresh copies of the tables, "
                               f"{b.call_limit_s:g} s per call")
        return True

    # -- exact ---------------------------------------------------------------------------------
    def exact(self, cases, stop_on_first: bool) -> list[Case]:
        """Exact TV per case; returns the cases left to statistics."""
        b, r = self.budget, self.result
        stop = self.now() + b.enumeration_s
        if any(f.check == "rng" for f in r.findings):
            r.ran.append("exact: skipped (the sampler does not draw from rng)")
            return list(cases)
        fallback = []
        for case in cases:
            if stop_on_first and r.flagged():
                r.ran.append("exact: stopped after the first finding")
                break
            if self.now() > stop:
                r.ran.append(f"exact: {case.name}: not enumerated (enumeration time "
                             f"{b.enumeration_s:g} s spent); statistics instead")
                fallback.append(case)
                continue
            status, value = self.call(enumerate_task, case, b, b.case_enumeration_s,
                                      seconds=b.case_enumeration_s + b.call_limit_s)
            if status == "breach":
                self.breach(value, case)
                continue
            if status == "not-enumerable":
                r.ran.append(f"exact: {case.name}: not enumerable ({value}); statistics instead")
                fallback.append(case)
                continue
            want = target_distribution(case)
            tv = exact.total_variation(value, want)
            r.exact_tv_max = tv if r.exact_tv_max is None else max(r.exact_tv_max, tv)
            r.ran.append(f"exact: {case.name}: TV {tv:.3g}")
            if tv > EXACT_TV_TOL:
                r.findings.append(Finding(
                    "exact-tv", "distribution",
                    f"exact output distribution differs from the target's: TV {tv:.4g}",
                    case.name, {"exact_tv": tv, "got": _table(value), "expected": _table(want)}))
        return fallback

    # -- statistics ----------------------------------------------------------------------------
    def statistics(self, cases, fallback, false_fail_rate: float) -> None:
        """Chi-square at doubling sample sizes, breadth first (every live case at n before any at
        2n); each look is one check of the Bonferroni split. A case the enumerator could not
        follow and that ran out of time before n_max is a shortfall, with its power stated."""
        b, r = self.budget, self.result
        sizes = looks(b.n_min, b.n_max)
        per_check = stats.split_budget(false_fail_rate, len(cases) * len(sizes))
        rng = np.random.default_rng(self.seed + 1)  # the streams of earlier releases: figures reproduce
        seconds = b.fallback_statistics_s if fallback else b.statistics_s
        stop = time.monotonic() + seconds
        live = {i: [] for i in range(len(cases))}
        last_p: dict = {}
        for n in sizes:
            order = list(live)
            for turn, i in enumerate(order):
                case, samples = cases[i], live[i]
                left = stop - time.monotonic()
                if left <= 0 and samples:
                    self._judged(case, samples, last_p[i], per_check, _among(case, fallback),
                                 f"stopped by the time limit ({seconds:g} s)")
                    del live[i]
                    continue
                share = max(left, 0.0) / (len(order) - turn)  # the cases left in this look share it
                got, breach, rng = self.call(sample_task, case, n - len(samples), rng, b, share,
                                             seconds=share + 2 * case.m * b.call_limit_s)
                samples += got
                if breach:
                    self.breach(breach, case)
                    del live[i]
                    continue
                want = target_distribution(case)
                test = stats.chi_square_test(samples, want, false_fail_rate=per_check)
                p = last_p[i] = test.p_value if test.p_value is not None else 0.0
                r.chi2_p_value_min = p if r.chi2_p_value_min is None else min(r.chi2_p_value_min, p)
                if not test.passed:
                    tv = stats.tv_distance(stats.empirical_distribution(samples), want)
                    r.samples_to_detect = len(samples) if r.samples_to_detect is None else min(
                        r.samples_to_detect, len(samples))
                    r.findings.append(Finding(
                        "chi-square", "distribution",
                        f"sampled distribution differs from the target's: chi-square p-value "
                        f"{p:.3g} < {per_check:.3g} after {len(samples)} runs, empirical TV {tv:.3g} "
                        f"({test.detail})",
                        case.name, {"p_value": p, "samples": len(samples), "empirical_tv": tv}))
                    del live[i]
                elif len(samples) < n:
                    self._judged(case, samples, p, per_check, _among(case, fallback),
                                 f"stopped by the time limit ({seconds:g} s)")
                    del live[i]
        for i in live:
            self._judged(cases[i], live[i], last_p[i], per_check, _among(cases[i], fallback), "passed")

    def _judged(self, case, samples, p, per_check, judged_only_here: bool, how: str) -> None:
        """Record a case the chi-square passed: its power, and a shortfall when statistics alone
        judges it and cannot see the budget's ``detect_tv``."""
        tv = min(stats.min_discrepancy_chi_square(len(samples), target_distribution(case),
                                                  per_check, POWER_FALSE_PASS_RATE), 1.0)
        self.result.power.append({"case": case.name, "runs": len(samples), "min_detectable_tv": tv,
                                  "false_fail_rate": per_check,
                                  "detection_probability": 1 - POWER_FALSE_PASS_RATE})
        line = (f"chi-square: {case.name}: {how} at n={len(samples)} (p-value {p:.3g}); detects TV "
                f">= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}")
        self.result.ran.append(line)
        if judged_only_here and tv > self.budget.detect_tv:
            self.result.shortfalls.append(f"{line}, not the budget's {self.budget.detect_tv:g}")

    # -- engine scale --------------------------------------------------------------------------
    def engine_scale(self, cases, false_fail_rate: float) -> None:
        """Each engine-scale case (``engine_scale_cases``): ``scale_runs`` runs of its first m
        tokens (fewer when its seconds ran out: ``scale_s`` each, the aimed ones ``aim_s`` shared),
        then a binned chi-square per position against p (``scale.judge_positions``), the
        false-fail rate split over every position of every case. A case whose runs see no binned
        TV below 0.5 is a shortfall (the sampler too slow to be judged there)."""
        b, r = self.budget, self.result
        if not cases:
            return
        per_check = stats.split_budget(false_fail_rate, sum(c.m for c in cases))
        rng = np.random.default_rng(scale_stream(self.seed, "engine-scale runs"))
        aimed = sum(c.name.startswith("aimed") for c in cases)
        wide = replace(b, call_limit_s=max(b.call_limit_s, b.scale_call_limit_s))
        for case in cases:
            seconds = b.aim_s / aimed if case.name.startswith("aimed") else b.scale_s
            try:
                runs, breach, rng = self.call(sample_task, case, b.scale_runs, rng, wide, seconds,
                                              seconds=seconds + 2 * case.m * wide.call_limit_s)
            except ContractBreach as exc:  # its process died (killed past the limit, or exited)
                runs, breach = [], str(exc)
            if breach and too_slow(breach):
                r.shortfalls.append(f"engine scale: {case.name}: {breach}; not judged at this vocabulary")
                r.ran.append(f"binned chi-square: {case.name}: too slow ({breach})")
                continue
            if breach:
                self.breach(breach, case)
                continue
            p, n = case.model.p_table[0], len(runs)
            if n < b.scale_runs:
                r.ran.append(f"binned chi-square: {case.name}: {n} of {b.scale_runs} runs, stopped by the "
                             f"time limit ({seconds:g} s)")
            verdict = scale.judge_positions(runs, p, case.m, per_check)
            words = scale.binning_words(len(verdict.want), case.model.vocab_size, n)
            if not verdict.passed:
                r.findings.append(Finding(
                    "binned-chi-square", "distribution",
                    f"token {verdict.position + 1} of the window differs from the target's law: chi-square "
                    f"p-value {verdict.p_value:.3g} < {per_check:.3g}, binned TV {verdict.binned_tv:.3g} ({words})",
                    case.name, {"position": verdict.position, "p_value": verdict.p_value, "samples": n,
                                "binned_tv": verdict.binned_tv, "bins": len(verdict.want)}))
            tv = scale.min_detectable_tv(p, n, per_check, POWER_FALSE_PASS_RATE)
            r.power.append({"case": case.name, "runs": n, "min_detectable_tv": tv, "false_fail_rate": per_check,
                            "detection_probability": 1 - POWER_FALSE_PASS_RATE, "binned": len(verdict.want)})
            r.ran.append(f"binned chi-square: {case.name}: {n} runs, {case.m} position(s); detects a binned "
                         f"TV >= {tv:.3g} per position with probability {1 - POWER_FALSE_PASS_RATE:g} ({words})")
            if tv > 0.5:
                r.shortfalls.append(f"engine scale: {case.name}: {n} runs in {seconds:g} s see only a "
                                    f"binned TV of {tv:.3g}")

    # -- tokens per round ----------------------------------------------------------------------
    def tokens_per_round(self, cases, false_fail_rate: float) -> None:
        """Mean tokens per round against the exact rule's: exact where enumerable, else sampled.

        Only a shortfall is an efficiency finding: an exact single-chain sampler cannot beat the
        rule (the maximal coupling of q and p at every position), while an exact multi-draft
        sampler legitimately does, with more draft tokens; an excess is noted in ``ran``.
        """
        b, r = self.budget, self.result
        rng = np.random.default_rng(self.seed + 2)
        per_check = stats.split_budget(false_fail_rate, len(cases))
        skip_exact = any(f.check == "rng" for f in r.findings)
        for case in cases:
            want = expected_round_length(case)
            status, value = "not-enumerable", None
            if not skip_exact:
                status, value = self.call(enumerate_task, case, b, b.case_enumeration_s, True,
                                          seconds=b.case_enumeration_s + b.call_limit_s)
            if status == "ok":
                got = sum(length * w for length, w in value.items())
                differs, how = abs(got - want) > 1e-9, "exact"
            elif status == "breach":
                self.breach(value, case)
                continue
            else:
                lengths, breach, rng = self.call(
                    sample_task, case, b.round_length_runs, rng, b, b.round_length_s, _round_length,
                    seconds=b.round_length_s + b.call_limit_s)
                if breach:
                    self.breach(breach, case)
                    continue
                test = stats.mean_bound_test(lengths, want, 1, case.k + 1, false_fail_rate=per_check)
                got, differs, how = float(np.mean(lengths)), not test.passed, f"sampled n={len(lengths)}"
                power = stats.min_discrepancy_mean(len(lengths), 1, case.k + 1, per_check,
                                                   POWER_FALSE_PASS_RATE)
                if not differs and power > b.detect_tokens:
                    r.shortfalls.append(f"tokens per round: {case.name}: {len(lengths)} rounds in "
                                        f"{b.round_length_s:g} s see a shortfall of {power:.3g} "
                                        f"tokens, not the budget's {b.detect_tokens:g}")
            r.mean_tokens_per_round[case.name] = (got, want)
            r.optimum_tokens_per_round[case.name] = _optimum_tokens_per_round(case)
            r.tree_optimum_tokens_per_round[case.name] = _tree_optimum_tokens_per_round(case)
            r.ran.append(f"tokens per round: {case.name}: {got:.4f} vs {want:.4f} ({how})"
                         + (" (more than one chain of k drafts gives)" if differs and got > want else ""))
            if differs and got < want:
                r.findings.append(Finding(
                    "tokens-per-round", "efficiency",
                    f"mean tokens per round {got:.4f}, the exact rule gives {want:.4f} ({how})",
                    case.name, {"measured": got, "expected": want}))

    # -- all -----------------------------------------------------------------------------------
    def run(self, stop_on_first: bool) -> BatteryResult:
        b, r = self.budget, self.result
        fixed, drawn = battery(b), generated_cases(b, self.seed)
        big = engine_scale_cases(b, self.seed, self.aim)
        cases = fixed + drawn
        # the false-fail rate: half for the chi-square on whole windows, a quarter for the
        # engine-scale cases' binned one, a quarter for tokens per round
        half = b.false_fail_rate / 2
        if not self.contract(cases):
            r.ran.append("contract: breached; exact, statistical and tokens-per-round detectors skipped")
            return r
        cases = [c for c in cases if c.name not in self.too_slow]
        drawn = [c for c in drawn if c.name not in self.too_slow]
        fallback = self.exact(cases, stop_on_first)
        enumerated = [c for c in cases if all(c is not f for f in fallback)]
        stat = fallback + enumerated[: max(0, b.stat_cases - len(fallback))]
        self.statistics(stat, fallback, half)
        if big and not r.flagged(("distribution",)) and not (stop_on_first and r.flagged()):
            # with a distribution finding already the verdict stands without them
            self.engine_scale(big, half / 2)
        elif big:
            r.ran.append("engine scale: skipped (a finding on the cases before)")
        if not r.flagged(("contract",)):
            self.tokens_per_round(round_length_cases(), half / 2)
        self.cover_cases(fixed, drawn, big, fallback)
        return r

    def cover_cases(self, fixed, drawn, big, fallback) -> None:
        """One ``coverage_entry`` per case run, in the order run."""
        runs = {row["case"]: row for row in self.result.power}
        for origin, cases in (("fixed", fixed), ("generated", drawn)):
            for case in cases:
                sampled = runs.get(case.name)
                judged = "chi-square" if _among(case, fallback) else "enumeration"
                self.result.cover(name=case.name, origin=origin, vocab=case.model.vocab_size, k=case.k,
                                  tokens=case.m, judged=judged, runs=sampled and sampled["runs"],
                                  detect_tv=sampled and sampled["min_detectable_tv"],
                                  prefix=len(case.prefix), order=case.model.order)
        for case in big:
            sampled = runs.get(case.name)
            if sampled is None:  # stopped before it (a finding, the deadline)
                continue
            self.result.cover(name=case.name, origin="aimed" if case.name.startswith("aimed") else "generated",
                              vocab=case.model.vocab_size, k=case.k, tokens=case.m, judged="binned chi-square",
                              runs=sampled["runs"], detect_tv=sampled["min_detectable_tv"],
                              bins=sampled["binned"], prefix=0, order=0)


def enumeration_key(case: Case, budget: Budget, seconds: float, lengths: bool) -> tuple:
    """What makes two ``enumerate_task`` calls the same call: the case, what is enumerated
    (the window's distribution, or the round length's with ``lengths``), and the limits that
    decide its outcome. ``_PrefetchedBattery`` serves a prefetched result only for its key."""
    return (case.name, bool(lengths), float(seconds), budget.max_paths, budget.call_limit_s)


class _PrefetchedBattery(RoundBattery):
    """A battery whose enumerations were computed elsewhere, each in its own subject process
    (specverify.units: one Ray task per case), and are replayed here in the battery's order.

    ``prefetched`` maps ``enumeration_key`` to ``{"outcome": ("ok", value) | ("failed", why)
    | ("error", traceback), "seconds": s}``. An enumeration is a deterministic function of the
    subject and the case (no rng: every random decision is enumerated), so its result is the
    one the subject's own process would have returned. Every other call (contract, the
    sequential chi-square's looks, sampled tokens per round: everything that draws from the
    seeded streams) runs live, in order, as in ``RoundBattery``. The clock (``now``) is charged the
    seconds each served call took where it ran, so the enumeration budget, the per-call limits
    and the deadline decide as they would have in one process; results the run never asks for
    (cases after ``stop_on_first``'s first finding, cases past the enumeration budget) are
    discarded, as the local run never computes them.
    """

    def __init__(self, subject, budget: Budget, seed: int, deadline: float | None, prefetched: dict, aim=None):
        super().__init__(subject, budget, seed, deadline, aim)
        self.prefetched, self.charged = prefetched, 0.0

    def now(self) -> float:
        return time.monotonic() + self.charged

    def call(self, task, *args, seconds: float):
        if task is not enumerate_task:
            return super().call(task, *args, seconds=seconds)
        case, budget, case_seconds, *rest = args
        unit = self.prefetched.get(enumeration_key(case, budget, case_seconds, bool(rest and rest[0])))
        if unit is None:  # not prefetched (or not for these limits): run it here
            return super().call(task, *args, seconds=seconds)
        return self._serve(unit, seconds)

    def _serve(self, unit: dict, seconds: float):
        """The prefetched outcome, as ``RoundBattery.call`` would have returned or raised it."""
        limit = seconds
        if self.deadline is not None:
            limit = min(limit, self.deadline - self.now())
            if limit <= 0:
                raise OutOfTime()
        status, value = unit["outcome"]
        if unit["seconds"] > limit + runner.KILL_MARGIN_S:  # killed here at the limit
            status, value = "failed", f"a call did not return within {limit + runner.KILL_MARGIN_S:g} s; its process was killed"
            self.charged += limit + runner.KILL_MARGIN_S
        else:
            self.charged += unit["seconds"]
        if status == "ok":
            return value
        if status == "error":
            raise runner.RunnerError(f"enumerate_task failed in the subject's process:\n{value}")
        if self.deadline is not None and self.now() >= self.deadline:
            raise OutOfTime()
        raise ContractBreach(value)


def run_battery(subject, budget: str | Budget = "standard", seed: int = 0, *,
                stop_on_first: bool = False, deadline: float | None = None,
                prefetched: dict | None = None, aim=None, **overrides) -> BatteryResult:
    """Every detector on every case of the budget. Never raises for a broken subject.

    ``subject``: a callable (handed to its process by fork) or a started ``runner.Runner``.
    ``overrides`` replace fields of the budget (e.g. ``n_max=8000``); ``deadline`` (a
    ``time.monotonic()`` value) ends the run with ``timed_out`` set; ``stop_on_first`` stops
    enumeration at the first biased case (enough to kill a mutant). ``prefetched``: enumerations
    computed elsewhere (specverify.units, the Ray executor), replayed by ``_PrefetchedBattery``:
    the same result as without them. ``aim``: an ``interfaces.Aim`` (the user's --vocab, --k,
    --max-tokens): aimed engine-scale cases besides the budget's (``engine_scale_cases``).
    """
    from .validation import check_seed, with_overrides

    seed = check_seed(seed)
    b = get_budget(budget)
    b = with_overrides("round", b, overrides)
    if prefetched is None:
        make = lambda handle: RoundBattery(handle, b, seed, deadline, aim)  # noqa: E731
    else:
        make = lambda handle: _PrefetchedBattery(handle, b, seed, deadline, prefetched, aim)  # noqa: E731
    return run_in_subject(subject, make, lambda battery_run: battery_run.run(stop_on_first))


def run_statistics(subject, cases: list[Case], seed: int = 0, budget: str | Budget = "standard",
                   **overrides) -> BatteryResult:
    """The chi-square detector alone on ``cases`` (the budget's whole false-fail rate)."""
    from .validation import with_overrides

    b = get_budget(budget)
    b = with_overrides("round", b, overrides)
    return run_in_subject(subject, lambda handle: RoundBattery(handle, b, seed, None),
                          lambda run: run.statistics(cases, cases, b.false_fail_rate))


def _table(dist: dict, limit: int = 16) -> dict:
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:limit]
    return {" ".join(map(str, key)): round(float(v), 12) for key, v in top}


# --------------------------------------------------------------------------- counterexamples

SMALL_PAIRS = [
    ([0.5, 0.5], [0.8, 0.2]),
    ([0.7, 0.3], [0.2, 0.8]),
    ([0.9, 0.1], [0.5, 0.5]),
    ([1.0, 0.0], [0.5, 0.5]),
    ([0.5, 0.3, 0.2], [0.3, 0.3, 0.4]),
    ([0.2, 0.5, 0.3], [0.6, 0.2, 0.2]),
]


def small_models():
    """Candidate models from the smallest up: i.i.d. pairs, then chains that depend on the last
    token, then chains that depend on the position (for wrong-row bugs that i.i.d. models hide)."""
    for p, q in SMALL_PAIRS:
        yield iid_model(p, q, name="iid")
    for v in (2, 3):
        for seed in range(3):
            yield random_model(v, 1, 1, 100 + seed)
        for seed in range(2):
            yield random_model(v, 0, 2, 200 + seed)


def small_cases() -> list[Case]:
    """Candidate cases, smallest first: k, then the window m, then the model."""
    return [Case("counterexample", model, tuple([1 % model.vocab_size] * max(model.order, 1)), k, m)
            for k in (1, 2, 3) for m in range(1, k + 2) for model in small_models()]


COUNTEREXAMPLE_MAX_PATHS = 20_000


def find_counterexample(subject, budget: str | Budget = "standard", seed: int = 0,
                        **overrides) -> dict | None:
    """The smallest (k, window, vocabulary, model) on which the subject shows its bias.

    Exact enumeration first (a TV above ``EXACT_TV_TOL``); the candidates the enumerator cannot
    follow then get ``counterexample_samples`` runs each and a chi-square test at a false-fail
    rate of ``false_fail_rate`` split over all candidates (``"method": "statistical"``, with the
    empirical distribution). None when no candidate shows it within ``counterexample_s``.
    """
    from .validation import with_overrides

    b = with_overrides("round", get_budget(budget), overrides)
    deadline = time.monotonic() + b.counterexample_s
    try:
        with subject_process(subject) as handle:
            return _search(RoundBattery(handle, b, seed, deadline), small_cases())
    except (OutOfTime, ContractBreach, runner.SubjectFailed):
        return None


def _search(search: RoundBattery, cases: list[Case]) -> dict | None:
    b = search.budget
    unenumerable = []
    for case in cases:
        status, got = search.call(enumerate_task, case, replace(b, max_paths=COUNTEREXAMPLE_MAX_PATHS),
                                  2.0, seconds=2.0 + b.call_limit_s)
        if status == "not-enumerable":
            unenumerable.append(case)
        elif status == "ok":
            want = target_distribution(case)
            tv = exact.total_variation(got, want)
            if tv > EXACT_TV_TOL:
                return describe(case, got, want, tv, "exact", None)
    rng = np.random.default_rng(search.seed)
    per_case = stats.split_budget(b.false_fail_rate, len(cases))
    for case in unenumerable:
        left = search.deadline - time.monotonic()
        samples, breach, rng = search.call(sample_task, case, b.counterexample_samples, rng, b,
                                           left, seconds=left)
        if breach or len(samples) < b.counterexample_samples:
            continue
        want = target_distribution(case)
        if not stats.chi_square_test(samples, want, false_fail_rate=per_case).passed:
            got = stats.empirical_distribution(samples)
            return describe(case, got, want, stats.tv_distance(got, want), "statistical", len(samples))
    return None


def describe_case(subject, case: Case, budget: str | Budget = "standard") -> dict | None:
    """``describe`` of one case, enumerated in the subject's process (None if it cannot be)."""
    b = get_budget(budget)
    try:
        with subject_process(subject) as handle:
            status, got = handle.call(enumerate_task, case, b, b.case_enumeration_s,
                                      limit=b.case_enumeration_s + b.call_limit_s)
    except (runner.SubjectFailed, runner.RunnerError):
        return None
    if status != "ok":
        return None
    want = target_distribution(case)
    return describe(case, got, want, exact.total_variation(got, want), "exact", None)


def describe(case: Case, got: dict, want: dict, tv: float, method: str, samples: int | None) -> dict:
    m = case.model
    return {
        "method": method, "vocab_size": m.vocab_size, "k": case.k, "window": case.m,
        "prefix": list(case.prefix), "model": m.name, "order": m.order, "period": m.period,
        "p": m.p_table.round(6).tolist(), "q": m.q_table.round(6).tolist(),
        ("exact_tv" if method == "exact" else "empirical_tv"): tv, "samples": samples,
        "distributions": [
            {"tokens": list(key), "sampler": round(float(got.get(key, 0.0)), 9),
             "target": round(float(want.get(key, 0.0)), 9)}
            for key in sorted(set(got) | set(want))
        ],
    }


def shrink_engine_scale(subject, budget: str | Budget, seed: int, case: Case) -> dict | None:
    """The smallest engine-scale case that still shows a binned finding of ``case``: the shapes of
    ``scale.shrink_shapes`` (V one past each tile / id-type boundary below the case's, k = 1 before
    the case's k), each a fresh ``engine_scale_case`` of the case's side drawn from
    ``scale_stream(seed, "shrink cases")``, given ``counterexample_samples`` runs and the binned
    chi-square at the false-fail rate split over every candidate position; the case itself is the
    last candidate. Within ``counterexample_s``; None when none shows it."""
    b = get_budget(budget)
    side = scale.side_of(case.model) or "residual"
    shapes = scale.shrink_shapes(case.model.vocab_size, case.k, scale.side_of(case.model))
    streams = scale_stream(seed, "shrink cases").spawn(len(shapes))
    candidates = [engine_scale_case(v, k, min(k + 1, case.m), side, "shrunk", np.random.default_rng(st), seed)
                  for (v, k), st in zip(shapes, streams)]
    candidates[-1] = case
    per_check = stats.split_budget(b.false_fail_rate, sum(c.m for c in candidates))
    deadline = time.monotonic() + b.counterexample_s
    rng = np.random.default_rng(scale_stream(seed, "shrink runs"))
    try:
        with subject_process(subject) as handle:
            search = RoundBattery(handle, b, seed, deadline)
            for cand in candidates:
                left = deadline - time.monotonic()
                runs, breach, rng = search.call(sample_task, cand, b.counterexample_samples, rng, b, left,
                                                seconds=left)
                if breach or len(runs) < b.counterexample_samples:
                    continue
                verdict = scale.judge_positions(runs, cand.model.p_table[0], cand.m, per_check)
                if not verdict.passed:
                    return describe_binned(cand, verdict)
    except (OutOfTime, ContractBreach, runner.SubjectFailed):
        return None
    return None


def describe_binned(case: Case, verdict) -> dict:
    """``describe``'s shape for a binned finding (``scale.PositionVerdict``): the case, the
    heaviest ids of p and q (rows too wide to print whole), the position and the bins that differ
    most."""
    m = case.model
    return {"method": "binned", "vocab_size": m.vocab_size, "k": case.k, "window": case.m, "prefix": [],
            "model": m.name, "order": 0, "period": 1, "position": verdict.position,
            "p": scale.heaviest(m.p_table[0]), "q": scale.heaviest(m.q_table[0]),
            "empirical_tv": verdict.binned_tv, "p_value": verdict.p_value, "samples": verdict.n,
            "bins": len(verdict.want), "distributions": scale.binned_rows(verdict)}

__all__ = [
    "BUDGETS", "BatteryResult", "Budget", "Case", "ContractBreach", "EXACT_TV_TOL", "Finding",
    "all_cases", "as_sequence", "battery", "coverage_entry", "describe_binned", "engine_scale_case", "engine_scale_cases", "scale_stream", "shrink_engine_scale", "call_within", "describe_case", "enumeration_key", "generated_cases", "exact_case", "find_counterexample", "first_tokens", "get_budget",
    "guarded", "reference_case", "run_battery", "run_statistics", "sample_first_tokens", "time_limit",
    "validate_round",
]
