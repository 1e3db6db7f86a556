"""A round subject that declares a batch of rounds (``specverify_rounds``): its sampled runs go
through the batch, many rounds per call, judged as one-round calls are."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specverify import speculative_step
from specverify.interfaces.round import battery as round_interface
from specverify.interfaces.round import cases as round_cases

# the quick budget on two fixed cases, no sweeps: every case sampled (the subjects reseed)
BUDGET = replace(round_cases.get_budget("quick"), cases=(0, 4), generated=0, engine_vocab=0, sweep_context=0, sweep_k=0)


def reseeded(p_fn, q_fn, prefix, k, rng):
    return speculative_step(p_fn, q_fn, prefix, k, np.random.default_rng(int(rng.integers(2**63))))


def exact_rounds(p_fn, q_fn, prefixes, k, rng):
    g = np.random.default_rng(int(rng.integers(2**63)))
    return [speculative_step(p_fn, q_fn, prefix, k, g) for prefix in prefixes]


def drafts_only_rounds(p_fn, q_fn, prefixes, k, rng):
    """The batch emits one draft-model token per round: exact one round at a time, not batched."""
    g = np.random.default_rng(int(rng.integers(2**63)))
    return [[int(g.choice(len(q_fn(prefix)), p=q_fn(prefix)))] for prefix in prefixes]


def with_rounds(rounds):
    def step(p_fn, q_fn, prefix, k, rng):
        return reseeded(p_fn, q_fn, prefix, k, rng)

    step.specverify_rounds = rounds
    return step


def test_an_exact_batch_is_exact_and_every_case_gets_its_runs():
    result = round_interface.run_battery(with_rounds(exact_rounds), BUDGET, 0)
    assert result.exact is True, result.findings
    assert {row["runs"] for row in result.power} == {BUDGET.n_max}


def test_a_wrong_batch_is_found_although_its_one_round_calls_are_exact():
    # the chi-square at the quick budget's false-fail rate (1e-6 in all); on the handout's toy
    # chain q and p differ by TV 0.4 after token 0: seen at the first look (500 runs)
    result = round_interface.run_battery(with_rounds(drafts_only_rounds), BUDGET, 0, stop_on_first=True)
    assert result.exact is False
    assert any(f.check == "chi-square" for f in result.findings)


def test_a_batch_that_returns_too_few_rounds_is_a_contract_finding():
    result = round_interface.run_battery(with_rounds(lambda p_fn, q_fn, prefixes, k, rng: []), BUDGET, 0)
    assert result.exact is False
    assert any("returned 0 rounds for" in f.message for f in result.findings)


def test_the_rule_in_torch_is_judged_by_its_exact_law_and_sampled_through_its_batch():
    """``samplers.torch_reference``: its generator seeded from ``rng.integers(2**63)``, drawn with
    torch.multinomial and torch.rand; the enumerator follows torch (``laws.torch_random``), so
    every fixed case is judged by its exact law (TV at float64 rounding), and its sampled
    cross-check goes through the declared batch."""
    import pytest

    pytest.importorskip("torch")
    from specverify.samplers import torch_reference

    budget = replace(BUDGET, sweep_k=3)
    result = round_interface.run_battery(torch_reference.speculative_step, budget, 0)
    assert result.exact is True, result.findings
    assert result.exact_tv_max is not None and result.exact_tv_max < 1e-9
    assert not any("not enumerable" in line for line in result.ran), result.ran
