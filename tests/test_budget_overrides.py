"""One budget contract for every interface: ``tv=X`` works for the loop as for the
round and kernel batteries, and an unknown or invalid override is an error naming it, never
dropped or run on."""

import numpy as np
import pytest

from specverify import interfaces
from specverify.common.validation import check_overrides
from specverify.interfaces.kernel import battery as kernel
from specverify.interfaces.loop.battery import run_loop_battery
from specverify.interfaces.loop.cases import campaign_loop_budget, loop_cases
from specverify.interfaces.round import battery as round_interface
from specverify.interfaces.round import cases as round_cases
from specverify.samplers.chain import speculative_step
from specverify.samplers.reference_kernel import reference_kernel
from specverify.samplers.reference_loop import generate


def opaque(t, d, reqs, k, rng):
    """The reference loop behind its own generator: reproducible, but not enumerable."""
    return generate(t, d, reqs, k, np.random.default_rng(int(rng.integers(2**62))))


def test_a_loop_campaign_samples_every_request_until_it_sees_its_tv():
    """tv=0.2 on one fixed batch the enumerator cannot follow: each request's runs are sized so
    that its chi-square sees TV 0.2 with probability 0.95 (false-fail 1e-6 split over requests);
    the reference behind its own generator passes at those sizes."""
    b = campaign_loop_budget("tv=0.2")
    assert b.name == "tv=0.2" and b.detect_tv == 0.2 and b.samples == 0
    result = run_loop_battery(opaque, b, 0, cases=[loop_cases()[0]])
    rows = [row for row in result.power if "request" in row]
    assert rows and all(row["min_detectable_tv"] <= 0.2 for row in rows), rows
    assert result.findings == [] and not result.shortfalls


def test_tv_budget_reaches_the_loop_interface_and_a_bad_tv_is_named():
    assert interfaces.get("loop").budget("tv=0.05").detect_tv == 0.05
    assert interfaces.get("loop").budget(round_cases.Budget("tv=0.05", (0,), 1, 100)).name == "tv=0.05"
    with pytest.raises(ValueError, match="budget: tv=X needs 0 < X < 1"):
        campaign_loop_budget("tv=2")


@pytest.mark.parametrize(
    "run",
    [
        lambda **kw: round_interface.run_battery(speculative_step, "quick", 0, **kw),
        lambda **kw: run_loop_battery(generate, "quick", 0, **kw),
        lambda **kw: kernel.run(reference_kernel, "quick", 0, **kw),
    ],
    ids=["round", "loop", "kernel"],
)
def test_an_unknown_override_is_an_error_naming_it(run):
    with pytest.raises(ValueError, match="has no field.* bogus"):
        run(bogus=1)


@pytest.mark.parametrize(
    "what, budget",
    [
        ("round", round_cases.get_budget("quick")),
        ("loop", campaign_loop_budget("tv=0.1")),
        ("kernel", kernel.get_budget("quick")),
    ],
)
def test_invalid_override_values_are_refused_with_the_field_named(what, budget):
    with pytest.raises(ValueError, match=r"call_limit_s \(a .* budget field\): must be > 0"):
        check_overrides(what, budget, {"call_limit_s": -1})
    with pytest.raises(TypeError, match="false_fail_rate"):
        check_overrides(what, budget, {"false_fail_rate": "0.01"})
    with pytest.raises(ValueError, match="false_fail_rate"):
        check_overrides(what, budget, {"false_fail_rate": 1.5})
    with pytest.raises(ValueError, match="detect_tv"):
        check_overrides(what, budget, {"detect_tv": 0.0})
    with pytest.raises(ValueError, match="must be >= 0"):
        check_overrides(what, budget, {"n_max" if what != "loop" else "samples": -5})
    with pytest.raises(TypeError, match="must be an integer"):
        check_overrides(what, budget, {"n_max" if what != "loop" else "samples": 2.5})
    assert check_overrides(what, budget, {"call_limit_s": 3}) == {"call_limit_s": 3}


def test_the_reference_loop_with_a_negative_call_limit_is_refused_not_called_inexact():
    with pytest.raises(ValueError, match="call_limit_s"):
        run_loop_battery(generate, "quick", 0, call_limit_s=-1)


def test_no_statistics_case_is_a_budget_the_round_battery_runs():
    """stat_cases=0 where every case is enumerated: the verdict rests on the exact laws alone
    (no sampling, so no false-fail rate to state), and the report says nothing was sampled."""
    small = dict(cases=(0,), generated=0, engine_vocab=0, sweep_context=0, sweep_k=0, scale_cases=(), stat_cases=0)
    result = round_interface.run_battery(speculative_step, "quick", 0, **small)
    assert result.exact is True and result.findings == []
    assert any(line.startswith("chi-square: no case to sample") for line in result.ran)
