"""The loop battery's sweeps, joint laws, budgets in runs and declared cases.

- The sweeps (``loop.sweeps.sweep_loop_cases``) take one dimension at a time to engine scale: the
  reference passes them all at the standard budget, ``reach`` names what they reach, and each of
  the sweep mutants (``loop_mutants``) is caught by its sweep.
- Unseeded requests of one batch must be independent: exactly where enumerated, by a chi-square
  on identical requests where not.
- Every sample size is a count: a slower subject gets the same runs, findings and verdict; a task
  a guard stops leaves its case not judged, in the guard's words.
- Declared cases get every check the battery's own cases get (tokens per pass by statistics,
  seeded reproducibility, the seed law, logprobs, the joint law).

False-fail rates: enumeration has no sampling noise (TV > 1e-9 is a finding). Every statistical
test runs at the battery's split of 1e-6 per battery (Bonferroni over its tests), so a test that
asserts an exact loop passes a battery fails falsely with probability <= 1e-6; the efficiency
tests (one-sided mean tests) get the same per-check rate. Every seed is fixed, so each test is
the same run each time. Powers are stated where a bias must be seen.
"""

import itertools
import os
import signal
import time
from dataclasses import replace

import loop_wrong_only_there as wrong
import numpy as np
import pytest

from specverify.battery import runner
from specverify.interfaces.loop import corners as loop_corners
from specverify.interfaces.loop.battery import reach, run_loop_battery, standard_cases
from specverify.interfaces.loop.cases import LOOP_BUDGETS, LoopCase, edge_cases, loop_cases, seeded_logits
from specverify.interfaces.loop.mechanism_cases import CONSECUTIVE, CONTINUOUS, mechanism_cases
from specverify.interfaces.loop.reference import tokens_per_pass_rates
from specverify.interfaces.loop.sweeps import NO_SWEEPS, SWEEP_DIMENSIONS, boundary_values, sweep_loop_cases
from specverify.interfaces.loop.tasks import read_outcome
from specverify.laws import exact
from specverify.laws.requests import LogitTable, Request, SamplingParams
from specverify.mutants import get
from specverify.samplers import reference_loop as ref
from specverify.surface import api

STANDARD_REACH = {
    "context": 512,
    "rounds": 16,
    "seeded rounds": 8,
    "max_tokens": 64,
    "requests per batch": 64,
    "vocab": 4096,
    "k": 8,
}


def opaque(loop):
    """``loop`` behind its own generator, seeded from the battery's rng: reproducible, but the
    enumerator cannot follow it (every case goes to statistics)."""

    def run(target, draft, requests, k, rng):
        return loop(target, draft, requests, k, np.random.default_rng(int(rng.integers(2**62))))

    return run


@pytest.fixture(scope="module")
def standard():
    """One standard battery of the reference loop at seed 0: every case, the sweeps included."""
    return run_loop_battery(ref.generate, "standard", 0)


# ---------------------------------------------------------------------------- sweeps and reach


def test_the_reference_passes_every_sweep_and_the_report_names_its_reach(standard):
    r = standard
    assert r.exact is True and r.efficient is True and not r.shortfalls, r.findings
    assert [line for line in r.ran if line.startswith("reach: ")] == [
        "reach: " + ", ".join(f"{k} {v}" for k, v in STANDARD_REACH.items())
    ]
    covered = {c["name"]: c for c in r.cases}
    for case in sweep_loop_cases("standard"):
        entry = covered[case.name]
        assert entry["origin"] == "edge" and entry["judged"] == ("chi-square" if case.positions else "enumeration")
    rows = [row for row in r.power if row.get("kind") == "sweep"]
    assert len(rows) == 4 and {row["runs"] for row in rows} == {300, 400}  # sweep_runs; seeds of the seed law
    assert all(0 < row["false_fail_rate"] < 1e-8 and row["min_detectable_tv"] < 0.3 for row in rows)
    sampled = [c.name for c in mechanism_cases("standard") if c.sweep in (CONTINUOUS, CONSECUTIVE)]
    joint = [line for line in r.ran if line.startswith("joint-law:") and not any(n in line for n in sampled)]
    batches = [c for c in standard_cases("standard", 0) if len(c.requests) > 1 and c.kind != "scale"]
    enumerated = [c for c in batches if not c.seeded and not c.positions and c.name not in sampled]
    assert len(joint) == len(enumerated)  # every enumerated batch


def test_reach_names_each_swept_dimension_in_every_budget():
    assert reach("standard") == STANDARD_REACH
    assert reach("quick")["context"] == 128 and reach("thorough")["context"] == 2048
    for name in ("quick", "standard", "thorough"):
        b, got = LOOP_BUDGETS[name], reach(name)
        assert all(got[dim] == getattr(b, field) for dim, field in SWEEP_DIMENSIONS.items() if dim != "max_tokens")
        assert got["max_tokens"] == max(b.sweep_max_tokens, b.scale_tokens) and got["vocab"] == b.scale_vocab
    off = reach(replace(LOOP_BUDGETS["standard"], **NO_SWEEPS))
    assert off["context"] < 16 and off["rounds"] == off["seeded rounds"] == 0 and off["requests per batch"] == 8


def test_the_sweeps_reach_their_boundary_values():
    assert boundary_values(64, 32) == [31, 32, 33, 63, 64]
    assert boundary_values(16) == [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16]
    cases = sweep_loop_cases("standard")
    seen = {  # the contexts the target is shown: prompt .. prompt + max_tokens - 1
        n
        for c in cases
        if c.sweep == "context"
        for q in c.requests
        for n in range(len(q.prompt), len(q.prompt) + q.params.max_tokens)
    }
    assert {2**j + d for j in range(1, 9) for d in (-1, 0, 1)} <= seen and max(seen) == 511
    (greedy,) = [c for c in cases if c.sweep == "max_tokens" and not c.positions]
    assert [q.params.max_tokens for q in greedy.requests] == [31, 32, 33, 63, 64]
    (batch,) = [c for c in cases if c.sweep == "requests per batch"]
    assert len(batch.requests) == 64 and batch.requests[3] == batch.requests[7]  # identical requests
    assert max(len(c.requests) for c in cases if c.sweep != "requests per batch") <= 5  # the others small


# ---------------------------------------------------------------------------- the sweep mutants


def _sweep(dimension: str, positions: bool = True) -> list:
    return [c for c in sweep_loop_cases("standard") if c.sweep == dimension and c.positions == positions]


IDENTICAL = [c for c in edge_cases() if c.name.startswith("edge: two identical")]


@pytest.mark.parametrize(
    "mutant_id, cases, check",
    [
        ("loop-batch/coalesces-identical-requests", IDENTICAL, "joint-law"),
        ("loop-seed/recreated-every-third-round", _sweep("seeded rounds"), "seed-law"),
        ("loop-context/sliding-window-16", _sweep("context", positions=False), "sequence-law"),
        ("loop-max-tokens/params-first-32-tokens", _sweep("max_tokens"), "position-law"),
        ("loop-batch/params-first-32-requests", _sweep("requests per batch"), "position-law"),
    ],
)
def test_each_sweep_mutant_is_caught_by_its_sweep(mutant_id, cases, check):
    """The standard budget's own cases for the dimension, nothing else: the coalescing loop by the
    exact joint law (TV 0.85), the sliding window by the exact law from the context of 18 on
    (none below), the others per position at the battery's split rate (about 2e-9): a generator
    re-created every third round repeats six tokens later (all 400 x 6 pairs 6 apart equal,
    where the product law puts 0.27 on equal pairs), raw rows past 32 tokens or requests move a
    position's law by TV 0.34-0.39 where one position's test sees 0.24 over 300 runs and all
    positions pooled far less (power 0.95, stated in the power rows)."""
    result = run_loop_battery(get(mutant_id).fn, "standard", 0, cases=cases)
    assert result.exact is False
    flagged = {f.check for f in result.flagged(("distribution",))}
    assert check in flagged, result.findings
    if mutant_id == "loop-context/sliding-window-16":
        first = min(
            int(c.name.split("context ")[1].split()[0]) for c in cases if c.name in {f.case for f in result.findings}
        )
        assert first == 18


def test_a_window_reaching_every_context_swept_passes():
    """The same window at 1024 tokens is longer than every context of the standard sweep: exact."""

    def wide(target, draft, requests, k, rng):
        return ref.generate(lambda prefix: target(tuple(prefix)[-1024:]), draft, requests, k, rng)

    assert run_loop_battery(wide, "standard", 0, cases=_sweep("context", positions=False)).exact is True


# ---------------------------------------------------------------------------- the joint law


def test_identical_requests_are_judged_jointly_by_statistics_where_not_enumerable():
    """Behind its own generator the coalescing loop is judged by the pairwise chi-square on the
    two identical requests: 4000 runs, false-fail rate 1e-6 / 3 (two requests' laws and the
    pair); the shared output puts all mass on equal pairs, TV 0.85 from the product law, far
    above the 0.1 the test sees with probability 0.95 (asserted from its power row). The exact
    loop behind the same generator passes."""
    coalescing = opaque(get("loop-batch/coalesces-identical-requests").fn)
    result = run_loop_battery(coalescing, "standard", 0, cases=IDENTICAL, extra_samples=4000)
    (row,) = [p for p in result.power if p.get("check") == "joint-law"]
    assert (
        row["pair"] == [0, 1] and row["min_detectable_tv"] < 0.1 and row["false_fail_rate"] == pytest.approx(1e-6 / 3)
    )
    assert {f.check for f in result.flagged()} == {"joint-law"} and "equal outputs" in result.findings[0].message
    exact_loop = run_loop_battery(opaque(ref.generate), "standard", 0, cases=IDENTICAL, extra_samples=4000)
    assert exact_loop.findings == [] and any(line.startswith("joint-law:") for line in exact_loop.ran)


# ---------------------------------------------------------------------------- budgets in runs, guards


def _slowed(loop, seconds: float):
    def run(target, draft, requests, k, rng):
        time.sleep(seconds)
        return loop(target, draft, requests, k, rng)

    return run


def _comparable(result) -> dict:
    d = result.to_dict()
    return {key: value for key, value in d.items() if key not in ("seconds", "output")}


def test_a_slower_subject_gets_the_same_runs_findings_and_verdict():
    """A loaded machine, as the subject sees it: every call 2 ms slower. The run counts are the
    budget's, so the whole result (findings, power, runs per case, lines run, the verdict) is the
    same: here exact, the core case sized past its floor of 200 runs to the 744 that see quick's
    promised TV 0.15."""
    cases = [loop_cases()[0], *_sweep("seeded rounds"), *(c for c in loop_cases() if c.seeded)]
    overrides = dict(samples=200, seeds=3, seed_law_runs=100)
    fast = run_loop_battery(opaque(ref.generate), "quick", 0, cases=cases, **overrides)
    slow = run_loop_battery(_slowed(opaque(ref.generate), 0.002), "quick", 0, cases=cases, **overrides)
    assert _comparable(fast) == _comparable(slow) and fast.exact is True and fast.findings == []
    assert [c["runs"] for c in fast.cases] == [744, 100, 100] and fast.shortfalls == []


def _tiny_guards(monkeypatch) -> dict:
    """Overrides for guards far below the tasks' lengths: a call interrupted past 0.3 s, a task
    stopped once no call returned for 0.3 + 0.01 + 0.05 s (the runner's kill margin made 0.05 s)."""
    monkeypatch.setattr(runner, "KILL_MARGIN_S", 0.05)
    return dict(call_limit_s=0.3, task_idle_s=0.01)


def test_a_task_longer_in_all_than_its_guard_is_judged_as_if_unslowed(monkeypatch):
    """Each call 10 ms slower under an idle guard of 0.36 s: the seeded case's seed law (100 calls,
    over 1 s in all) and its replays, and the first case's enumeration, each run to their end:
    the same result as unslowed, exact, nothing stopped. The guard watches progress, not the
    clock."""
    guards = _tiny_guards(monkeypatch)
    cases = [loop_cases()[0], next(c for c in loop_cases() if c.seeded)]
    overrides = dict(seeds=3, seed_law_runs=100, **guards)
    fast = run_loop_battery(ref.generate, "quick", 0, cases=cases, **overrides)
    start = time.monotonic()
    slow = run_loop_battery(_slowed(ref.generate, 0.01), "quick", 0, cases=cases, **overrides)
    assert time.monotonic() - start > 100 * 0.01 > 0.3 + 0.01 + 0.05
    assert _comparable(fast) == _comparable(slow) and fast.exact is True and fast.shortfalls == []
    assert any(line.startswith("seed-law:") and "seeds 0..99" in line for line in slow.ran)
    assert any(line.startswith("sequence-law:") and "exact TV" in line for line in slow.ran)


def _hang(how: str) -> None:
    """Never return: a Python loop, one that swallows every interruption, a C loop (no bytecode
    runs: nothing but SIGKILL stops it), a blocking read of a pipe nobody writes (a signal
    interrupts it) or the same read with the alarm signal blocked (nothing but SIGKILL)."""
    if how == "python":
        while True:
            pass
    if how == "swallowing":
        while True:
            try:
                while True:
                    pass
            except BaseException:  # noqa: BLE001 - the point: it swallows the guard's interruption
                continue
    if how == "c":
        sum(itertools.repeat(0))
    if how == "masked read":
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    os.read(os.pipe()[0], 1)


def _hangs_in(where: str, how: str):
    """The reference loop, hanging (``_hang(how)``) only in the enumeration (the enumerator's rng
    is not a Generator), in the sampled runs (behind its own generator, past the 6 calls of the
    replay check) or on a seeded request."""
    drawn = [0]  # calls with a Generator: the replay check's 3 runs and 3 replays, then the runs

    def run(target, draft, requests, k, rng):
        enumerated = not isinstance(rng, np.random.Generator)
        drawn[0] += not enumerated
        if where == "enumeration" and enumerated:
            _hang(how)
        if where == "runs" and drawn[0] > 6:
            _hang(how)
        if where == "seeds" and requests[0].params.seed is not None:
            _hang(how)
        return (opaque(ref.generate) if where == "runs" else ref.generate)(target, draft, requests, k, rng)

    return run


@pytest.mark.parametrize(
    "where, how, words",
    [
        ("enumeration", "python", "stopped by a guard: exact enumeration: one call did not return within 0.3 s"),
        ("enumeration", "swallowing", "stopped by a guard: exact enumeration: no call of the subject returned"),
        ("enumeration", "c", "stopped by a guard: exact enumeration: no call of the subject returned"),
        ("enumeration", "read", "stopped by a guard: exact enumeration: one call did not return within 0.3 s"),
        ("enumeration", "masked read", "stopped by a guard: exact enumeration: no call of the subject returned"),
        ("runs", "python", "stopped by a guard: its runs after 0 of 2000 runs: one call did not return"),
        ("runs", "c", "stopped by a guard: its runs (2000 runs planned): no call of the subject returned"),
        ("seeds", "masked read", "stopped by a guard: seeded replays (3 seeds planned): no call of the subject"),
        ("seeds", "python", "stopped by a guard: seeded replays after 0 of 3 seeds: one call did not return"),
    ],
)
def test_a_loop_that_hangs_inside_a_task_is_stopped_by_a_guard_and_not_judged(monkeypatch, where, how, words):
    """A call that never returns, interruptible or not, is stopped (at its own limit, or by the
    idle guard once no call returned for 0.36 s): the case not judged, in the guard's words; no
    finding, no power, the verdict inconclusive; within seconds, not at any task's length."""
    guards = _tiny_guards(monkeypatch)
    cases = [next(c for c in loop_cases() if c.seeded)] if where == "seeds" else [loop_cases()[0]]
    start = time.monotonic()
    result = run_loop_battery(_hangs_in(where, how), "quick", 0, cases=cases, seeds=3, **guards)
    assert time.monotonic() - start < 15.0
    assert result.exact is None and result.findings == [] and not result.power
    (shortfall,) = result.shortfalls
    assert words in shortfall and shortfall.endswith("; not judged"), shortfall
    assert not any("statistics instead" in line for line in result.ran) or where == "runs"


# ---------------------------------------------------------------------------- declared cases

NEAR_TARGET = LogitTable(seeded_logits(61, 1, 3, 3, 1.0), "target V3")
NEAR_DRAFT = LogitTable(
    NEAR_TARGET.table + np.random.default_rng(62).normal(scale=0.1, size=(1, 3, 3)), "draft near it"
)
NEAR = LoopCase(
    "T=0.7, a draft near the target, m=4, k=3",
    NEAR_TARGET,
    NEAR_DRAFT,
    (Request((0,), SamplingParams(temperature=0.7, max_tokens=4)),),
    3,
)
TWINS = LoopCase(
    "two identical requests, m=2, k=1",
    NEAR_TARGET,
    NEAR_DRAFT,
    (Request((1,), SamplingParams(max_tokens=2)),) * 2,
    1,
)
SEEDY = LoopCase(
    "one request, m=3, k=1",
    LogitTable(seeded_logits(63, 2, 3, 3, 1.0), "target V3 period 2"),
    LogitTable(seeded_logits(64, 1, 3, 3), "draft V3"),
    (Request((0,), SamplingParams(max_tokens=3)),),
    1,
)
DECLARED_BUDGET = replace(LOOP_BUDGETS["quick"], samples=400, seeds=8, seed_law_runs=600, detect_tv=0.5)
"""400 runs a declared case: each request's chi-square must see TV 0.5 (it sees 0.3-0.4)."""


def _twice(s, logits, drafts, i, vocab):  # the draft processed at T^2, as transformers' assistant is
    return ref.processed_row(s, ref.fit_width(logits, vocab), drafts, i, temperature=s.params.temperature**2)


def draft_temperature_twice(target, draft, requests, k, rng):
    """The reference loop drafting at T^2 (exact: the rule verifies against the q it drew from)."""
    return ref.loop_with(
        target, draft, requests, k, rng, drafter=lambda s, d, n, v: ref.draft_tokens(s, d, n, v, row=_twice)
    )


def _check(loop, *cases):
    return api.check(loop, budget=DECLARED_BUDGET, cases=list(cases), counterexample=False)


def _rate(loop, case) -> float:
    law = exact.enumerate_distribution(
        lambda rng: read_outcome(loop(case.target, case.draft, list(case.requests), case.k, rng), 1, 3)
    )
    return tokens_per_pass_rates(law, 1)[0]


def test_declared_cases_get_tokens_per_pass_by_statistics():
    """A loop the enumerator cannot follow, on a declared case: tokens per pass by the one-sided
    mean test over 400 runs at false-fail rate 1e-6 / 2 (the law test and the seed law share the
    battery's 1e-6). Drafting at T^2 gives 3.11 tokens per pass where the rule gives 3.82 (both
    enumerated here, unwrapped): a shortfall of 0.72, above the one the test sees with probability
    0.95 (read from its line, asserted: about 0.3). The exact loop behind the same generator is
    efficient; every check kind ran on the declared case."""
    expected, slower = _rate(ref.generate, NEAR), _rate(draft_temperature_twice, NEAR)
    assert expected - slower > 0.5
    report = _check(opaque(draft_temperature_twice), NEAR)
    assert report.exact is True and report.result.efficient is False
    (finding,) = report.findings
    assert finding.check == "tokens-per-pass" and finding.evidence["expected"] == pytest.approx(expected)
    assert abs(finding.evidence["measured"] - slower) < 0.15
    (line,) = [x for x in report.result.ran if x.startswith("tokens-per-pass:")]
    assert float(line.split("detects a shortfall >= ")[1].split()[0]) < expected - slower
    good = _check(opaque(ref.generate), NEAR)
    assert good.exact is True and good.result.efficient is True and good.findings == []
    ran = " ".join(good.result.ran)
    for check in ("loop-chi-square:", "tokens-per-pass:", "seeded-reproducibility:", "seed-law:"):
        assert check in ran


@pytest.mark.parametrize(
    "loop, case, check",
    [
        (wrong.reseeds_every_round, SEEDY, "seed-law"),
        (get("loop-seed/consumed-by-batch-mates").fn, SEEDY, "seeded-reproducibility"),
        (opaque(get("loop-logprobs/wrong-row").fn), NEAR, "logprobs"),
        (opaque(get("loop-batch/coalesces-identical-requests").fn), TWINS, "joint-law"),
    ],
    ids=["seed-law", "seeded-reproducibility", "logprobs", "joint-law"],
)
def test_declared_cases_get_every_loop_check(loop, case, check):
    """Each on one declared case, the battery's own checks, at false-fail rate 1e-6 split over the
    case's tests: the declared case again with request 0 seeded (replays over 8 seeds, two rounds
    or more each, so a batch-mate drawing from the seeded generator changes the second: seeds 4,
    5 and 7 here; its law over seeds 0..599, which the chi-square sees at TV 0.3 with probability
    0.95, where a generator re-created each round is 0.36 away over 300 seeds), the logprobs of
    every run (exact: no noise), the joint law of identical requests (400 runs; a shared output
    is TV 0.64 from the product law, where the test sees 0.45 with probability 0.95)."""
    report = _check(loop, case)
    assert report.exact is False
    assert check in {f.check for f in report.findings} and all(f.case == case.name for f in report.findings)


# ---------------------------------------------------------------------------- the pairwise corners


def window_on_long_generations(target, draft, requests, k, rng):
    """The reference loop, but in a batch with a request of max_tokens over 32 the target sees only
    the last 1024 tokens of each context: wrong only where a long context meets a long generation
    (every one-dimension sweep keeps one of them short)."""
    if any(q.params.max_tokens > 32 for q in requests):
        return ref.generate(lambda prefix: target(tuple(prefix)[-1024:]), draft, requests, k, rng)
    return ref.generate(target, draft, requests, k, rng)


def test_only_thorough_has_the_corners_and_they_stay_in_the_box():
    assert not loop_corners.loop_corner_cases("quick") and not loop_corners.loop_corner_cases("standard")
    found = loop_corners.loop_corner_cases("thorough")
    assert [c.sweep for c in found] == ["context x rounds", "context x max_tokens", "context x requests per batch"]
    assert all(c.positions and c.kind == "sweep" and c.requests[0].prompt[0] == 0 for c in found)
    assert {c.name for c in found} <= {c.name for c in standard_cases("thorough", 0)}
    assert reach("thorough")["context"] == LOOP_BUDGETS["thorough"].sweep_context  # the corners stay in the box


def test_a_window_on_long_generations_only_shows_at_the_thorough_corner():
    """Standard's enumerated sweeps (no noise) pass it: the context sweep (to 512, max_tokens 3)
    and the greedy max_tokens batch (to 64 tokens: the window on, every context short).
    Thorough's context x rounds corner (prompt 1984, max_tokens 64, 1,000 runs) reads the rows of
    another first token: TV 0.78 from the processed row at every position, where one position's
    chi-square (at the battery's split of 1e-6) sees 0.13 with probability 0.95."""
    standard = [c for c in sweep_loop_cases("standard") if c.sweep in ("context", "max_tokens") and not c.positions]
    assert {c.sweep for c in standard} == {"context", "max_tokens"}
    assert run_loop_battery(window_on_long_generations, "standard", 0, cases=standard).exact is True
    (corner,) = [c for c in loop_corners.loop_corner_cases("thorough") if c.sweep == "context x rounds"]
    result = run_loop_battery(window_on_long_generations, "thorough", 0, cases=[corner], stop_on_first=True)
    assert result.exact is False
    assert "position-law" in {f.check for f in result.flagged(("distribution",))}, result.findings
