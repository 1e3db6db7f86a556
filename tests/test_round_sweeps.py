"""The round battery's sweeps: every context length and every k up to the budget's, over models
whose law depends on what a size could cut off, each case enumerated exactly (no sampling, so no
false-fail rate to state); the reach the report prints."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specverify import speculative_step
from specverify.interfaces import round as round_interface
from specverify.interfaces import round_cases
from specverify.laws import exact
from specverify.mutants import get


def test_boundary_values_are_the_edges_and_the_powers_of_two_with_their_neighbours():
    assert round_cases.boundary_values(17) == [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17]
    assert round_cases.boundary_values(512)[-4:] == [256, 257, 511, 512]
    assert round_cases.boundary_values(8, smallest=1) == [1, 2, 3, 4, 5, 7, 8]


def test_the_standard_sweeps_reach_a_context_of_512_and_k_8():
    cases = round_cases.sweep_cases("standard", 0)
    contexts = [len(c.prefix) for c in cases if c.name.startswith("sweep context")]
    ks = [c.k for c in cases if c.name.startswith("sweep k=")]
    assert contexts == round_cases.boundary_values(512) and ks == list(range(1, 9))
    assert all(c.m == c.k + 1 for c in cases if c.name.startswith("sweep k="))  # the bonus token is in the window


def _sweep_findings(mutant_id: str) -> list[str]:
    """The cases of the standard sweeps on which the mutant's exact law differs from the target's
    (the sweeps alone, enumerated in process)."""
    fn = get(mutant_id).fn
    out = []
    for case in round_cases.sweep_cases("standard", 0):
        got = exact.sampler_distribution(fn, case.model.p_fn, case.model.q_fn, case.prefix, case.k, case.m)
        if exact.total_variation(got, round_cases.target_distribution(case)) > 1e-9:
            out.append(case.name)
    return out


def test_a_window_of_16_tokens_shows_from_a_context_of_17_on():
    flagged = _sweep_findings("position/window-16")
    lengths = sorted(int(name.split()[2]) for name in flagged if name.startswith("sweep context"))
    # the window's two emitted tokens see contexts of n and n + 1: wrong once n + 1 > 16
    assert lengths and lengths[0] in (15, 16, 17) and all(n >= 15 for n in lengths)
    assert round_cases.boundary_values(512)[-1] in lengths


def test_a_bug_at_k_7_only_shows_on_the_k_7_case_only():
    assert [n.split(":")[0] for n in _sweep_findings("bonus/wrong-row-at-k7")] == ["sweep k=7"]


def test_the_reference_reaches_the_quick_budgets_box():
    budget = replace(round_cases.get_budget("quick"), scale_cases=())
    result = round_interface.run_battery(speculative_step, budget, 0)
    assert result.exact is True
    assert result.reach["context"] >= 128 and result.reach["k"] == 8 and result.reach["window"] == 9
    assert result.reach["exact V"] == 128
    # the box a run reports is the box the budget states (every case enumerated)
    assert result.reach == round_interface.reach(budget)


@pytest.mark.parametrize("budget, context, k", [("quick", 128, 8), ("standard", 512, 8), ("thorough", 4096, 10)])
def test_every_budget_sweeps(budget, context, k):
    b = round_cases.get_budget(budget)
    assert (b.sweep_context, b.sweep_k) == (context, k)
