"""The round battery's sweeps: every context length and every k up to the budget's, over models
whose law depends on what a size could cut off, each case enumerated exactly (no sampling, so no
false-fail rate to state); the reach the report prints."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specverify import speculative_step
from specverify.interfaces.round import battery as round_interface
from specverify.interfaces.round import cases as round_cases
from specverify.interfaces.round import corners as round_corners
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
    assert result.reach["context"] >= 64 and result.reach["k"] == 8 and result.reach["window"] == 9
    assert round_cases.get_budget("quick").engine_vocab == 0  # quick: no dense engine-vocabulary case
    assert result.reach["exact V"] == max(c.model.vocab_size for c in round_cases.battery("quick"))
    # the box a run reports is the box the budget states (every case enumerated)
    assert result.reach == round_interface.reach(budget)


@pytest.mark.parametrize("budget, context, k", [("quick", 64, 8), ("standard", 512, 8), ("thorough", 4096, 10)])
def test_every_budget_sweeps(budget, context, k):
    b = round_cases.get_budget(budget)
    assert (b.sweep_context, b.sweep_k) == (context, k)


# --------------------------------------------------------------------------- the pairwise corner


def windowed_on_long_rounds(p_fn, q_fn, prefix, k, rng):
    """The rule, but with a context past 2,048 tokens and k >= 9 the target sees only the last 16
    tokens: a bug that needs both sizes at once (each sweep alone keeps one of them small)."""
    if len(prefix) > 2048 and k >= 9:
        return speculative_step(lambda ctx: p_fn(tuple(ctx)[-16:]), q_fn, prefix, k, rng)
    return speculative_step(p_fn, q_fn, prefix, k, rng)


def _sweeps_only(budget: str):
    """The budget with one fixed case, its sweeps and its corners: no drawn, wide or engine-scale
    cases (statistics: the cross-check of one enumerated case drawn from the seed)."""
    return replace(
        round_cases.get_budget(budget), cases=(0,), generated=0, engine_vocab=0, scale_cases=(), stat_cases=1
    )


def test_only_thorough_has_the_context_by_k_corner():
    assert not round_corners.round_corner_cases("quick") and not round_corners.round_corner_cases("standard")
    (corner,) = round_corners.round_corner_cases("thorough")
    b = round_cases.get_budget("thorough")
    assert corner.k == b.sweep_k and len(corner.prefix) + corner.m == b.sweep_context + 2  # the context sweep's
    assert corner.prefix[0] == 0 and set(corner.prefix[1:]) == {1}
    assert round_interface.reach("thorough")["context"] == b.sweep_context + 2  # the corner stays in the box


def test_a_bug_at_a_long_context_and_a_large_k_only_shows_at_the_thorough_corner():
    """Enumerated (no sampling on the swept cases), the one statistical test the cross-check of
    one enumerated case drawn from the seed, at the battery's false-fail rate (1e-6): standard's sweeps keep k <= 8 and
    contexts <= 514, thorough's one-dimension sweeps keep k = 2 at long contexts and the empty
    context at k = 10; only the corner (context 4087 x k = 10) reads the windowed rows."""
    standard = round_interface.run_battery(windowed_on_long_rounds, _sweeps_only("standard"), 0)
    assert standard.exact is True and not standard.findings, standard.findings
    thorough = round_interface.run_battery(windowed_on_long_rounds, _sweeps_only("thorough"), 0)
    assert thorough.exact is False
    assert {f.case.split(":")[0] for f in thorough.flagged(("distribution",))} == {"corner context 4087 x k=10"}
