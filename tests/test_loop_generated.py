"""The loop battery's generated cases, edges and seeds.

Each subject of ``loop_wrong_only_there`` is wrong only where the loop's core cases do not reach:
the core cases alone call it exact, the standard battery does not. The reference loop and every
loop control stay exact over seeds 1-4 here (seed 0, with every case: tests/test_mutants.py).

False-fail rates: exact enumeration has no sampling noise (TV > 1e-9 is a finding); the
statistical checks (``seed-law``, and the chi-square of a case a subject's paths overflow) share
the battery's total false-fail rate of 1e-6 per run (Bonferroni), so the 16 runs of
``test_reference_and_controls_stay_exact_over_seeds_1_to_4`` falsely fail with probability
<= 1.6e-5; every seed is fixed, so each test is deterministic.
"""

import loop_wrong_only_there as wrong
import numpy as np
import pytest

from specverify.interfaces.loop.battery import run_loop_battery
from specverify.interfaces.loop.cases import LOOP_BUDGETS, SEED_STREAMS, edge_cases, loop_cases, seed_stream
from specverify.interfaces.loop.counterexample import find_loop_counterexample
from specverify.interfaces.loop.generated import generated_loop_cases
from specverify.interfaces.loop.sweeps import NO_SWEEPS
from specverify.laws import exact
from specverify.laws.requests import sequence_law
from specverify.mutants.loop_mutants import LOOP_CONTROLS
from specverify.samplers.reference_loop import generate

CORE = [c for c in loop_cases() if c.kind == "fixed"]


def _reference_law(case, i):
    def run(rng):
        return tuple(o.tokens for o in generate(case.target, case.draft, list(case.requests), case.k, rng))

    law: dict = {}
    for out, w in exact.enumerate_distribution(run, max_paths=100_000).items():
        law[out[i]] = law.get(out[i], 0.0) + w
    return law


# ---------------------------------------------------------------------------- generated cases


def test_generated_cases_are_drawn_from_the_seed_within_their_ranges():
    assert [LOOP_BUDGETS[b].generated for b in ("quick", "standard", "thorough")] == [2, 4, 16]
    a, b = generated_loop_cases("standard", 3), generated_loop_cases("standard", 3)
    assert [c.name for c in a] == [c.name for c in b] and len(a) == 4
    assert all(np.array_equal(x.target.table, y.target.table) for x, y in zip(a, b))
    assert [c.name for c in generated_loop_cases("standard", 4)] != [c.name for c in a]
    assert [c.name for c in generated_loop_cases("quick", 3)] == [c.name for c in a[:2]]  # case i: child i
    assert SEED_STREAMS[0] == "generated cases"
    assert seed_stream(3, "generated cases").entropy == 3
    cases = [c for s in range(5) for c in generated_loop_cases("thorough", s)]
    assert len(cases) == 80 and all(c.kind == "generated" for c in cases)
    assert {c.vocab_size for c in cases} == {2, 3, 4, 5} and {c.k for c in cases} == {1, 2, 3, 4}
    reqs = [r for c in cases for r in c.requests]
    assert {len(r.prompt) for r in reqs} == {1, 2, 3, 4}
    assert {r.params.max_tokens for r in reqs} == set(range(6))
    assert any(r.params.temperature == 0 for r in reqs) and any(r.params.allowed_tokens for r in reqs)
    assert any(r.params.stop_token_ids for r in reqs) and any(r.params.logit_bias for r in reqs)
    assert any(r.params.top_k for r in reqs) and any(r.params.min_p for r in reqs)
    assert any(r.params.repetition_penalty != 1 for r in reqs)
    assert {c.draft.width - c.target.width for c in cases} == {-1, 0, 1}


@pytest.mark.parametrize("seed", range(5))
def test_the_reference_is_exact_on_every_drawn_and_edge_case(seed):
    for case in generated_loop_cases("standard", seed) + list(edge_cases()):
        for i, r in enumerate(case.requests):
            assert exact.total_variation(_reference_law(case, i), sequence_law(case.target, r)) < 1e-9, case.name


# ---------------------------------------------------------------------------- edges


def test_every_budget_reaches_the_edges_on_purpose():
    cases = [c for c in loop_cases() if not c.seeded]
    reqs = [(c, r) for c in cases for r in c.requests]
    params = [r.params for _, r in reqs]
    assert {0, 1} <= {p.max_tokens for p in params} and max(p.max_tokens for p in params) >= 4
    assert any(r.prompt[-1] in r.params.stop_token_ids for _, r in reqs)
    assert any(p.stop_token_ids and p.logit_bias.get(p.stop_token_ids[0], 0) > 0 for p in params)
    assert any(p.allowed_tokens is not None and len(p.allowed_tokens(())) == 1 for p in params)
    assert any(p.top_k == 1 for p in params) and any(p.top_p <= 0.05 for p in params)
    assert any(p.min_p >= 0.9 for p in params)
    assert any(p.temperature not in (0, 1) and p.logit_bias and p.min_p and p.top_k and p.top_p < 1 for p in params)
    assert any(r.params.repetition_penalty != 1 and len(set(r.prompt)) < len(r.prompt) for _, r in reqs)
    assert any(not c.requests for c in cases)
    ragged = [c for c in cases if len(c.requests) == 8]
    assert ragged and len({len(r.prompt) for r in ragged[0].requests}) > 1
    assert len({r.params.max_tokens for r in ragged[0].requests}) > 1
    assert any(c.k >= 3 and c.vocab_size >= 4 for c in cases)
    assert any(len(r.prompt) >= 3 for _, r in reqs)


# ---------------------------------------------------------------------------- wrong only there


@pytest.mark.parametrize("name", list(wrong.WRONG))
def test_a_loop_wrong_only_there_is_not_exact(name):
    """The standard battery (stopping at its first finding: the same verdict) calls it not exact;
    the core cases alone, seeds judged by replay only, call it exact (the same-seed pair aside)."""
    fn = wrong.WRONG[name]
    result = run_loop_battery(fn, "standard", 0, stop_on_first=True)
    assert result.exact is False, result.ran
    if name != "same_seed_shares_a_stream":
        before = run_loop_battery(fn, "quick", 0, cases=CORE, seed_law_runs=0)
        assert before.exact is True, before.findings


def test_seeds_judged_by_their_law_and_by_same_seed_pairs():
    """The fixed seeded case alone decides here (no sweeps, no engine-scale batch: the seeded
    sweep is tests/test_loop_sweeps.py's)."""
    reseeding = run_loop_battery(wrong.reseeds_every_round, "standard", 0, scale_vocab=0, **NO_SWEEPS)
    assert {f.check for f in reseeding.flagged()} == {"seed-law"}  # replay alone sees nothing
    shared = run_loop_battery(wrong.same_seed_shares_a_stream, "standard", 0, scale_vocab=0, **NO_SWEEPS)
    assert {f.check for f in shared.flagged()} == {"seeded-reproducibility"}
    assert "same seed" in shared.flagged()[0].message
    ce = find_loop_counterexample(wrong.reseeds_every_round, "standard", 0, {"seed-law"})
    assert ce["check"] == "seed-law" and ce["method"] == "statistical" and ce["samples"] == 400


def test_the_seed_law_states_its_power():
    result = run_loop_battery(generate, "standard", 0, scale_vocab=0, **NO_SWEEPS)
    power = [p for p in result.power if p.get("check") == "seed-law"]
    assert len(power) == 1 and power[0]["runs"] == 400 and power[0]["seeds"] == "0..399"
    assert 0 < power[0]["false_fail_rate"] < 1e-6 and power[0]["min_detectable_tv"] < 0.35
    assert any(line.startswith("seed-law:") for line in result.ran)


# ---------------------------------------------------------------------------- no false accusation


@pytest.mark.parametrize("seed", range(1, 5))
def test_reference_and_controls_stay_exact_over_seeds_1_to_4(seed):
    """Every case but the engine-scale batch (its binned test: test_engine_scale.py, the reference
    over seeds 1-4) and the sweeps. Seed 0 is tests/test_mutants.py's: there every loop control
    runs the whole standard battery (sweeps and engine-scale batch included) at seed 0."""
    for control in LOOP_CONTROLS:
        result = run_loop_battery(control.fn, "standard", seed, scale_vocab=0, **NO_SWEEPS)
        assert result.exact is True, (control.id, seed, result.findings)
        assert result.exact_tv_max < 1e-12
