"""The loop as engines run it: the machinery cases (``interfaces.loop.mechanism_cases``), the
checks across consecutive calls (``interfaces.loop.consecutive``), every pair of identical
requests (``calls.identical_pairs``), k = 0, and the mechanism mutants and controls
(``mutants.loop_mechanism_mutants``) on small cases, by exact enumeration where it can.

False-fail rates: enumeration has no sampling noise (TV against 1e-9); the consecutive-call
batteries run at the budget's split rate (1e-6 over the case's tests) with a fixed seed, so each
outcome is deterministic.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specverify.battery.subject_calls import run_in_subject
from specverify.interfaces.loop.calls import identical_pairs
from specverify.interfaces.loop.cases import get_loop_budget
from specverify.interfaces.loop.checks import LoopBattery
from specverify.interfaces.loop.mechanism_cases import (
    CONSECUTIVE,
    CONTINUOUS,
    DENSE_TOKENS,
    ENGINE_POOL,
    FIRST_PENALTY_TOKENS,
    consecutive_calls_case,
    continuous_batch_case,
    dense_parameter_cases,
    late_start_case,
    mechanism_cases,
    penalised_prompt,
    penalty_context_case,
    zero_draft_cases,
)
from specverify.interfaces.loop.sweeps import NO_SWEEPS
from specverify.interfaces.loop.tasks import read_outcome
from specverify.laws import exact
from specverify.laws.requests import independence_tv, sequence_law
from specverify.mutants import loop_mechanism_mutants as mm
from specverify.samplers import reference_loop as ref


def joint_law(fn, case, max_paths=20_000) -> dict:
    """The enumerated joint law of the case's requests' tokens under ``fn``."""
    law = exact.enumerate_distribution(
        lambda rng: read_outcome(fn(case.target, case.draft, list(case.requests), case.k, rng), len(case.requests), 9),
        max_paths=max_paths,
    )
    out: dict = {}
    for outcome, w in law.items():
        key = tuple(row[0] for row in outcome)
        out[key] = out.get(key, 0.0) + w
    return out


def marginal(joint: dict, i: int) -> dict:
    out: dict = {}
    for key, w in joint.items():
        out[key[i]] = out.get(key[i], 0.0) + w
    return out


def test_the_continuous_batch_drives_pools_mixed_params_and_late_identical_requests():
    case = continuous_batch_case()
    reqs = case.requests
    assert len(reqs) > ENGINE_POOL and case.sweep == CONTINUOUS
    assert len({r.params.max_tokens for r in reqs}) >= 4 and any(r.params.stop_token_ids for r in reqs)
    kinds = {"greedy" if r.params.greedy else "default" if r.params.temperature == 1.0 else "explicit" for r in reqs}
    assert kinds == {"greedy", "default", "explicit"}
    assert (0, len(reqs) - 1) in identical_pairs(case)  # the batch's two ends: the last starts late


def test_identical_pairs_are_every_pair_or_the_first_with_each():
    case = continuous_batch_case()
    triple = type(case)("t", case.target, case.draft, (case.requests[0],) * 3, 2)
    assert identical_pairs(triple) == [(0, 1), (0, 2), (1, 2)]
    assert identical_pairs(triple, every=False) == [(0, 1), (0, 2)]


def test_the_budgets_cases_order_and_kinds():
    cases = mechanism_cases("standard")
    assert [c.sweep for c in cases if c.sweep] == [
        CONTINUOUS,
        CONSECUTIVE,
        "penalties x context",
    ]
    long, dense = dense_parameter_cases("standard")
    assert long.sweep == "penalties and grammar x max_tokens"
    assert dense.kind == "scale" and dense.vocab_size == get_loop_budget("standard").scale_vocab
    assert max(q.params.max_tokens for q in dense.requests) == min(64, DENSE_TOKENS)
    off = replace(get_loop_budget("standard"), **NO_SWEEPS)
    assert mechanism_cases(off) == [] and dense_parameter_cases(replace(off, sweep_max_tokens=64, scale_vocab=0)) == []
    assert {c.k for c in zero_draft_cases()} == {0} and any(c.seeded for c in zero_draft_cases())
    assert mechanism_cases("standard") == mechanism_cases("standard")


def test_the_penalised_id_sits_past_any_prefix_of_the_prompt():
    prompt = penalised_prompt(509)
    assert prompt.count(3) == 1 and prompt[-1] == 3 and 3 not in prompt[:FIRST_PENALTY_TOKENS]


def test_the_reference_loop_at_k_0_is_target_only():
    case = zero_draft_cases()[0]
    joint = joint_law(ref.generate, case)
    for i, r in enumerate(case.requests):
        assert exact.total_variation(marginal(joint, i), sequence_law(case.target, r)) < 1e-12
    assert independence_tv(joint) < 1e-12


def test_the_scheduled_pool_control_is_exact_by_enumeration():
    full = late_start_case()  # requests 0, 2 and 3 in a pool of 2, the queue's order drawn from rng
    case = type(full)("pool of 2", full.target, full.draft, tuple(full.requests[i] for i in (0, 2, 3)), 1)
    joint = joint_law(lambda t, d, r, k, g: mm.pool_generate(t, d, r, k, g, pool=2, queue=mm.coin_queue), case)
    for i, r in enumerate(case.requests):
        assert exact.total_variation(marginal(joint, i), sequence_law(case.target, r)) < 1e-12
    assert independence_tv(joint) < 1e-12


def test_a_reused_slot_stream_replays_its_predecessor():
    case = late_start_case()  # request 0 frees slot 0 of a pool of 2; request 2, then 3, take it

    def slots_of_two(target, draft, requests, k, rng):
        streams: dict = {}
        return mm.pool_generate(
            target,
            draft,
            requests,
            k,
            rng,
            pool=2,
            streams=lambda slot, s, g: streams.setdefault(slot, mm.SlotStream(g)).restart(),
        )

    joint = joint_law(slots_of_two, case)
    pair: dict = {}
    for key, w in joint.items():
        pair[(key[0], key[3])] = pair.get((key[0], key[3]), 0.0) + w
    assert independence_tv(pair) > 0.1  # request 3 replays its slot's first occupant (request 0 or 1)


def test_the_sentinel_reaches_a_default_temperature_only_beside_a_greedy_request():
    case = late_start_case()  # request 2: every field at its default; request 1 greedy
    want = sequence_law(case.target, case.requests[2])
    mixed = marginal(joint_law(mm.sentinel_temperature_loop, case), 2)
    alone = type(case)("alone", case.target, case.draft, (case.requests[2],), 1)
    assert exact.total_variation(mixed, want) > 0.2
    assert exact.total_variation(marginal(joint_law(mm.sentinel_temperature_loop, alone), 0), want) < 1e-12


def test_a_zero_draft_round_that_keeps_the_offset_repeats_its_uniform():
    case = zero_draft_cases()[1]
    seeded = [replace(case.requests[0], params=replace(case.requests[0].params, seed=s)) for s in range(40)]
    stuck = mm.counter_stream_loop(advance_zero=False)
    exact_ = mm.counter_stream_loop(advance_zero=True)
    rng = np.random.default_rng(0)
    same_stuck = [stuck(case.target, case.draft, [r], 0, rng)[0] for r in seeded]
    same_exact = [exact_(case.target, case.draft, [r], 0, rng)[0] for r in seeded]
    # one uniform a request: its tokens are the inverse CDFs of one number under each position's row
    assert len({o.tokens for o in same_stuck}) < len({o.tokens for o in same_exact})
    again = [exact_(case.target, case.draft, [r], 0, rng)[0] for r in seeded]
    assert [o.tokens for o in again] == [o.tokens for o in same_exact]  # seeded: replayed


def test_the_first_prompt_tokens_penalty_changes_the_law_at_the_largest_context():
    case = penalty_context_case(512)
    want = sequence_law(case.target, case.requests[0])
    got = marginal(joint_law(mm.penalty_prompt_prefix_loop, case), 0)
    assert exact.total_variation(got, want) > 0.05
    assert exact.total_variation(marginal(joint_law(ref.generate, case), 0), want) < 1e-12


def _consecutive(fn):
    b = get_loop_budget("quick")
    case = consecutive_calls_case()
    return run_in_subject(fn, lambda h: LoopBattery(h, b, 0, None), lambda run: run.run([case], False))


@pytest.mark.parametrize(
    ("fn", "findings"),
    [(ref.generate, set()), (mm.call_replaying_loop, {"joint-law"})],
    ids=["reference", "replayed-across-calls"],
)
def test_consecutive_calls_are_independent_and_seeds_replay(fn, findings):
    result = _consecutive(fn)
    assert {f.check for f in result.findings} == findings
    assert any("across two calls" in line for line in result.ran)


def test_a_seed_that_differs_across_calls_is_a_contract_finding():
    def reseeded_each_call(target, draft, requests, k, rng):
        calls = getattr(reseeded_each_call, "calls", 0)
        reseeded_each_call.calls = calls + 1
        shifted = [replace(r, params=replace(r.params, seed=r.params.seed + calls)) if r.params.seed is not None else r
                   for r in requests]  # fmt: skip
        return ref.generate(target, draft, shifted, k, rng)

    result = _consecutive(reseeded_each_call)
    assert "seeded-reproducibility" in {f.check for f in result.findings}
