"""Every sampled round case (and a loop core case) is sized from the TV its budget promises
(``round.statistics``, ``round.engine_scale``, ``loop.laws``), and the forecast is printed before
sampling starts, with an ETA on every progress line after it (``surface.progress``). The sizes
are computed, not sampled; the two battery runs assert the reference's verdict EXACT, which
fails falsely at the battery's false-fail rate (1e-6 per run). No assertion reads a clock's value."""

from __future__ import annotations

import pytest

from specverify.battery.core import POWER_FALSE_PASS_RATE
from specverify.battery.subject_calls import listening
from specverify.interfaces.round import cases as round_cases
from specverify.interfaces.round.battery import run_battery
from specverify.interfaces.round.engine_scale import scale_sizes
from specverify.interfaces.round.reach import Forecast, promised_power
from specverify.interfaces.round.statistics import (
    case_looks,
    check_rate,
    cross_check_cases,
    cross_check_runs,
    pooled_law,
)
from specverify.laws import scale, stats
from specverify.samplers.chain import speculative_step
from specverify.surface.progress import ProgressLines


@pytest.mark.parametrize("name", ["quick", "standard", "thorough"])
def test_a_fallback_case_runs_until_it_sees_its_promised_tv_at_the_stated_false_fail_rate(name):
    """Every fixed case as a fallback case (the enumerator follows none): its last look sees the
    budget's detect_tv at the per-look false-fail rate the battery uses; a raised last look is
    the fewest runs that do (one fewer does not)."""
    b = round_cases.get_budget(name)
    fallback = round_cases.battery(b)
    per_check = check_rate(b, fallback, [], b.false_fail_rate / 2)
    for case in fallback:
        sizes = case_looks(b, case, set(), per_check)
        law = round_cases.target_distribution(case)
        seen = lambda n, law=law: stats.min_discrepancy_chi_square(n, law, per_check, POWER_FALSE_PASS_RATE)  # noqa: E731
        assert seen(sizes[-1]) <= b.detect_tv, (case.name, sizes)
        assert sizes == sorted(sizes) and sizes[0] == b.n_min
        if sizes[-1] > b.n_max:
            assert seen(sizes[-1] - 1) > b.detect_tv, (case.name, sizes)


def test_a_swept_case_is_sized_to_the_swept_tv_and_a_fixed_one_to_detect_tv():
    b = round_cases.get_budget("standard")
    case = round_cases.battery(b)[-1]
    per_check = 1e-9
    law = round_cases.target_distribution(case)
    swept = case_looks(b, case, {case.name}, per_check)[-1]
    fixed = case_looks(b, case, set(), per_check)[-1]
    assert stats.min_discrepancy_chi_square(swept, law, per_check, POWER_FALSE_PASS_RATE) <= b.sweep_tv
    assert stats.min_discrepancy_chi_square(fixed, law, per_check, POWER_FALSE_PASS_RATE) <= b.detect_tv


@pytest.mark.parametrize("name", ["quick", "standard"])
def test_the_pooled_cross_check_sees_its_tv_averaged_over_cases_drawn_from_the_seed(name):
    b = round_cases.get_budget(name)
    enumerated = round_cases.battery(b) + round_cases.generated_cases(b, 0)
    cross = cross_check_cases(enumerated, b.stat_cases, 0)
    assert len(cross) == b.stat_cases and cross == cross_check_cases(enumerated, b.stat_cases, 0)
    assert [c.name for c in cross] != [c.name for c in cross_check_cases(enumerated, b.stat_cases, 1)] or len(
        enumerated
    ) <= b.stat_cases
    per_check = check_rate(b, [], cross, b.false_fail_rate / 2)
    n = cross_check_runs(b, cross, per_check)
    law = pooled_law(cross)
    assert n % len(cross) == 0 and abs(sum(law.values()) - 1) < 1e-12
    assert stats.min_discrepancy_chi_square(n, law, per_check, POWER_FALSE_PASS_RATE) <= b.cross_check_tv
    assert n < 2000  # far fewer than a chi-square per case to a fixed 4,000 runs each


@pytest.mark.parametrize("name", ["standard", "thorough"])
def test_the_binned_cases_are_sized_to_the_scale_tv_per_position(name):
    """The binned cases a budget may run (its engine-scale cases and its dense engine-vocabulary
    case where the enumerator cannot follow it) each see ``scale_tv`` per position at the rate
    split over every position; at standard (the dense case alone) at the fewest runs that do,
    past its floor ``scale_runs``: no run beyond its promise."""
    b = round_cases.get_budget(name)
    dense = [c for c in round_cases.generated_cases(b, 0) if c.name.startswith(round_cases.ENGINE_VOCAB_ORIGIN)]
    big = dense + round_cases.engine_scale_cases(b, 0)
    rate = b.false_fail_rate / 4
    per_check = stats.split_budget(rate, sum(c.m for c in big))
    sizes = scale_sizes(b, big, rate)
    for case, n in zip(big, sizes):
        assert n >= b.scale_runs
        assert scale.min_detectable_tv(case.model.p_table[0], n, per_check, POWER_FALSE_PASS_RATE) <= b.scale_tv
    if name == "standard":
        assert len(big) == 1 and sizes[0] > b.scale_runs
        tv = scale.min_detectable_tv(dense[0].model.p_table[0], sizes[0] - 1, per_check, POWER_FALSE_PASS_RATE)
        assert tv > b.scale_tv


def test_the_readme_power_figures_are_the_budgets_fields():
    assert promised_power("standard") == {
        "fixed": 0.1,
        "generated": 0.1,
        "swept": 0.15,
        "binned": 0.12,
        "cross-check": 0.25,
    }


def test_the_forecast_is_said_before_any_run_with_calls_seconds_and_the_other_budgets():
    """A quick run of the reference (no sweeps, no binned cases): one forecast, with seconds,
    naming the standard and thorough budgets' calls, said before the first sampled run."""
    said: list = []
    with listening(said.append):
        result = run_battery(speculative_step, "quick", 0, sweep_context=0, sweep_k=0, engine_vocab=0)
    forecasts = [w for w in said if isinstance(w, Forecast)]  # the enumerations' (first_forecast), the runs'
    assert result.exact is True and len(forecasts) == 2
    words = forecasts[1]
    assert words.seconds is not None and words.seconds >= 0
    assert "calls" in words and "; standard:" in words and "; thorough:" in words


def test_a_forecast_is_printed_at_once_and_every_progress_line_after_it_shows_its_eta(capfd):
    lines = ProgressLines("a target")
    lines.say("forecast: the quick budget samples 400 runs, about 12 s", 12.0)
    lines.say("forecast: the quick budget samples 400 runs, about 12 s")  # a stage's words: not printed
    lines.started = 0.0
    lines._line()
    lines.stop()
    err = capfd.readouterr().err.splitlines()
    assert err[0] == "specverify: forecast: the quick budget samples 400 runs, about 12 s"
    assert len(err) == 2 and ", ETA " in err[1] and err[1].startswith("specverify: forecast:")


def test_a_loop_core_case_runs_until_it_sees_detect_tv_whatever_samples_says():
    """A core case the enumerator may not follow (``max_paths=1``, as ``check-hf-generate``'s
    budget has it) at ``samples=50``: raised to the runs that see ``detect_tv``, so no shortfall
    and no inconclusive verdict from the budget's own sizing. Its chi-square's false-fail rate is
    the loop battery's (1e-6 in all, split; stated in the power row)."""
    from specverify.interfaces.loop.battery import run as run_loop_battery
    from specverify.interfaces.loop.cases import loop_cases
    from specverify.samplers.reference_loop import generate

    result = run_loop_battery(generate, "quick", 0, cases=[loop_cases()[0]], max_paths=1, samples=50, detect_tv=0.3)
    rows = [row for row in result.power if "check" not in row]
    assert result.exact is True and result.shortfalls == []
    assert rows and all(row["runs"] > 50 and row["min_detectable_tv"] <= 0.3 for row in rows)
    assert all(row["false_fail_rate"] <= 1e-6 for row in rows)


def test_the_standard_budget_covers_the_same_cases_whether_or_not_the_dense_case_is_enumerated():
    """Standard has no engine-scale case of its own: the dense V = 4,096 case is judged by its
    exact law or, where the enumerator cannot follow it, binned; the aimed cases run either way.
    A budget with engine-scale cases and ``scale_beside_exact`` False runs them only where the
    dense case fell back (the mutant report's); thorough runs all of them either way. Computed,
    not sampled."""
    from dataclasses import replace

    from specverify import interfaces
    from specverify.interfaces.round.reach import reach

    b = round_cases.get_budget("standard")
    big = round_cases.engine_scale_cases(b, 0, interfaces.aim(vocab=40_000, k="2"))
    assert b.scale_cases == () and len(big) == 1 and big[0].name.startswith("aimed")
    for exact in (False, True):
        assert round_cases.binned_cases(b, big, engine_vocab_exact=exact) == big
    beside = replace(b, scale_cases=((4096, 2, "residual"),))
    big = round_cases.engine_scale_cases(beside, 0, interfaces.aim(vocab=40_000, k="2"))
    assert round_cases.binned_cases(beside, big, engine_vocab_exact=False) == big
    assert [c.name for c in round_cases.binned_cases(beside, big, engine_vocab_exact=True)] == [big[-1].name]
    assert big[-1].name.startswith("aimed")
    thorough = round_cases.get_budget("thorough")
    every = round_cases.engine_scale_cases(thorough, 0)
    assert round_cases.binned_cases(thorough, every, engine_vocab_exact=True) == every
    assert "binned V" not in reach("standard") and reach("standard")["exact V"] == b.engine_vocab
    assert reach("thorough")["binned V"] == 152_064


@pytest.mark.parametrize("seed", range(6))
def test_the_cross_check_draws_only_cases_of_few_outcomes(seed):
    """The dense engine-vocabulary case (V outcomes) is never drawn into the pooled cross-check,
    whose runs would grow with its outcomes; the cases drawn are the seed's."""
    from specverify.interfaces.round.statistics import CROSS_CHECK_OUTCOMES

    b = round_cases.get_budget("standard")
    enumerated = round_cases.battery(b) + round_cases.generated_cases(b, seed) + round_cases.sweep_cases(b, seed)
    cross = cross_check_cases(enumerated, b.stat_cases, seed)
    assert len(cross) == b.stat_cases
    assert all(len(round_cases.target_distribution(c)) <= CROSS_CHECK_OUTCOMES for c in cross)
    assert not any(c.name.startswith(round_cases.ENGINE_VOCAB_ORIGIN) for c in cross)
    per_check = check_rate(b, [], cross, b.false_fail_rate / 2)
    assert cross_check_runs(b, cross, per_check) <= 1000  # 400-600 runs at standard (docs/BUDGETS.md)


def test_the_forecast_plans_a_dense_case_the_enumerator_cannot_follow_as_the_battery_runs_it():
    """The other budgets' forecast (``other_budgets``) for a subject whose dense engine-vocabulary
    case fell back: that case's binned runs (``scale_sizes``), as the battery runs it, not a
    chi-square over its V outcomes (tens of thousands of runs). Computed, not sampled."""
    from specverify.interfaces.round.corners import round_corner_cases
    from specverify.interfaces.round.reach import other_budgets
    from specverify.interfaces.round.statistics import planned_runs

    def planner(other, fallback, cross, big):
        swept = {c.name for c in round_cases.sweep_cases(other, 0) + round_corner_cases(other)}
        return planned_runs(other, fallback, cross, big, swept, other.false_fail_rate / 2)

    b = round_cases.get_budget("standard")
    cases = round_cases.battery(b) + round_cases.generated_cases(b, 0) + round_cases.sweep_cases(b, 0)
    dense = [c for c in cases if c.name.startswith(round_cases.ENGINE_VOCAB_ORIGIN)]
    rest = [c for c in cases if c is not dense[0]]
    cross = cross_check_cases(rest, b.stat_cases, 0)
    runs, windows = other_budgets(round_cases.get_budget("quick"), 0, {dense[0].name}, False, planner)["standard"]
    assert runs == planner(b, [], cross, dense) and len(windows) == len(cross) + 1
    assert runs < 2 * scale_sizes(b, dense, b.false_fail_rate / 4)[0]
