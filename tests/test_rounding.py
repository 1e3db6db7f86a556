"""The rounding policy (specverify.laws.rounding, laws.precision): exact laws judged at the
subject's working precision against the token-wise rule carried out in it on the same case.
Every verdict here is an exact enumeration (no sampling): no false-fail rate to state."""

from __future__ import annotations

import numpy as np
import pytest
import rounding_subjects as subjects

from specverify.errors import ArgumentError
from specverify.laws import exact, precision, rounding

P = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.15, 0.25, 0.6]])
Q = np.array([[0.3, 0.3, 0.4], [0.5, 0.25, 0.25], [0.1, 0.7, 0.2]])


def p_fn(context):
    return P[len(context) % 3]


def q_fn(context):
    return Q[len(context) % 3]


def judged(sampler, k=2, m=3):
    law = exact.sampler_distribution(sampler, p_fn, q_fn, (), k, m)
    want = exact.sequence_distribution(p_fn, (), m)
    return rounding.judge_law(exact.total_variation(law, want), law, want, p_fn, q_fn, (), k, m), law


def test_bfloat16_emulation_is_torchs_conversion():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).random(2000).astype(np.float32)
    want = torch.from_numpy(x).to(torch.bfloat16).to(torch.float64).numpy()
    assert np.array_equal(rounding.round_to(x, "bfloat16"), want)


def test_precisions_are_named_and_checked():
    assert precision.precision_of(np.float32(1)) == "float32"
    assert precision.precision_of(np.zeros(2, np.float16)) == "float16"
    assert precision.precision_of(1.0) is None
    assert precision.working_precision({"float64", "float32", "float16"}) == "float32"
    assert precision.working_precision({"float64"}) == precision.working_precision(()) == "float64"
    with pytest.raises(ArgumentError, match="precision"):
        precision.check_precision("precision", "float8")


def test_the_rule_in_each_precision_is_rounding_of_that_size():
    """The yardstick grows with the unit roundoff: float64 ~1e-16, float32 ~1e-8, float16 ~1e-4,
    bfloat16 ~1e-3 on the same case."""
    want = exact.sequence_distribution(p_fn, (), 3)
    tv = {p: rounding.yardstick(p_fn, q_fn, (), 2, 3, p, want) for p in precision.PRECISIONS}
    assert tv["float64"] < 1e-15 < tv["float32"] < 1e-6 < tv["float16"] < tv["bfloat16"] < 0.05


def test_plain_float32_rule_is_exact_at_float32_rounding():
    judgement, law = judged(subjects.float32_rule)
    assert law.precisions == {"float32"}
    assert judgement.exact and judgement.tv > rounding.EXACT_TV_TOL and judgement.rule_tv > 0
    assert judgement.words().startswith("exact at float32 rounding (TV ")


def test_float16_ratio_in_float32_code_is_a_finding_with_both_figures():
    judgement, law = judged(subjects.float16_ratio_rule)
    assert law.precisions == {"float16", "float32"} and judgement.precision == "float32"
    assert not judgement.exact and judgement.tv > 100 * judgement.allowed
    assert "above float32 rounding (the rule in float32: " in judgement.words()


def test_a_stated_precision_wins_and_float64_keeps_its_floor():
    with precision.stated("float16"):
        judgement, _ = judged(subjects.float16_ratio_rule)
    assert judgement.precision == "float16" and judgement.how == "stated" and judgement.exact
    law = precision.ObservedLaw({(0,): 1.0}, {"float64"})
    assert not rounding.judge_law(2e-9, law, {(0,): 1.0}, p_fn, q_fn, (), 1, 1).exact


def test_observation_survives_a_memo_replay():
    memo = exact.SubrunMemo()

    def step(p_fn, q_fn, prefix, k, rng):
        return memo.run(rng, lambda: tuple(prefix), lambda: subjects.float32_rule(p_fn, q_fn, prefix, k, rng))

    first = exact.round_length_distribution(step, p_fn, q_fn, (), 1)
    again = exact.round_length_distribution(step, p_fn, q_fn, (), 1)
    assert first.precisions == again.precisions == {"float32"}


def test_kernel_tolerance_and_engine_bound_are_the_analytic_bound():
    from specverify.interfaces.kernel import plan as kernel
    from specverify.interfaces.kernel import sweeps as kc

    case = kc.k_sweep_cases(2)[0]
    support = int((case.p > 0).sum(axis=2).max())
    assert kernel.tolerance(case) == 4 * 2.0**-24 * (case.k + 1 + support)
    with precision.stated("bfloat16"):
        assert kernel.tolerance(case) == rounding.analytic_bound("bfloat16", case.k, support)
    assert rounding.analytic_bound("float32", 1, 3, 2) == pytest.approx(40 * 2.0**-24)


def test_check_reports_the_precision_and_rounding_controls_pass_and_mutants_stay_killed():
    from specverify.mutants import rounding_controls as rc
    from specverify.surface import api

    small = dict(budget="quick", counterexample=False, progress=False)
    good = api.check(rc.float32_rule, **small)
    assert good.exact and good.result.rounding["precision"] == "float32" and good.result.rounding["rounding_cases"]
    assert any(line.startswith("rounding: judged at float32 (observed)") for line in good.result.ran)
    for mutant in (rc.float16_ratio, rc.bfloat16_coins, rc.float16_cumsum):
        report = api.check(mutant, **small, fail_fast=True)
        assert report.exact is False, mutant.__name__
        assert "above float32 rounding" in report.findings[0].message


def test_precision_reaches_the_command_line_and_the_loop_allowance():
    from specverify.surface import check_command

    assert check_command.parse_args(["x.py:f", "--precision", "bfloat16"]).request.precision == "bfloat16"
    assert check_command.parse_args(["x.py:f"]).request.precision is None
    with pytest.raises(SystemExit):
        check_command.parse_args(["x.py:f", "--precision", "float8"])
    assert rounding.stated_allowance(2, 5, 3) == rounding.EXACT_TV_TOL
    with precision.stated("float32"):
        assert rounding.stated_allowance(2, 5, 3) == rounding.analytic_bound("float32", 2, 5, 3)
    assert rounding.longest_window([(1, 2), ((3,), (4, 5, 6))]) == 3


def test_api_check_with_a_stated_float16_precision_passes_the_float16_ratio_rule():
    from specverify.surface import api

    with pytest.raises(ArgumentError, match="precision"):
        api.check(subjects.float32_rule, budget="quick", precision="float8")
    report = api.check(subjects.float16_ratio_rule, budget="quick", counterexample=False, precision="float16")
    assert report.exact and report.result.rounding["precision_from"] == "stated"
    assert "EXACT at float16 rounding" in report.text().splitlines()[0]


def test_the_fixture_takes_precision_from_its_marker():
    from specverify.surface import pytest_plugin

    assert "precision" in pytest_plugin.MARKER_KEYWORDS


def test_rounding_controls_and_mutants_need_no_torch():
    """The mutant report's main job runs without torch: the rounding controls and mutants are
    NumPy only (bfloat16 emulated), and the bfloat16 control is judged at bfloat16, exact at its
    rounding, while the bfloat16-coins mutant stays a finding at float32. Exact enumeration in a
    fresh interpreter where ``import torch`` fails: no false-fail rate to state."""
    import subprocess
    import sys

    script = """
import sys
class NoTorch:  # import torch -> ModuleNotFoundError, as where it is not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NoTorch())
import numpy as np
from specverify.laws import exact, rounding
from specverify.mutants import get
P = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.15, 0.25, 0.6]])
Q = np.array([[0.3, 0.3, 0.4], [0.5, 0.25, 0.25], [0.1, 0.7, 0.2]])
p_fn, q_fn = (lambda c: P[len(c) % 3]), (lambda c: Q[len(c) % 3])
want = exact.sequence_distribution(p_fn, (), 3)
for mutant_id, precision, is_exact in (("control/bfloat16-rule", "bfloat16", True),
                                       ("control/float32-rule", "float32", True),
                                       ("rounding/bfloat16-coins", "float32", False)):
    law = exact.sampler_distribution(get(mutant_id).fn, p_fn, q_fn, (), 2, 3)
    j = rounding.judge_law(exact.total_variation(law, want), law, want, p_fn, q_fn, (), 2, 3)
    assert (j.precision, j.exact) == (precision, is_exact), (mutant_id, j.words())
assert "torch" not in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
