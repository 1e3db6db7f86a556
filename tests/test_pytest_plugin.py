"""The pytest plugin as a user meets it (pytester): the ``specverify_check`` fixture passes an
exact sampler and fails a mutant with the smallest counterexample in the failure message, under
``--specverify-budget`` / ``--specverify-seed``. Statistical false-fail rate: 1e-6 per run, fixed
seeds: deterministic."""

from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]

USER_TESTS = '''
import pytest
from specverify import speculative_step
from specverify.mutants import get


def test_engine_step_is_exact(specverify_check):
    report = specverify_check(speculative_step)
    assert report.exact is True and report.budget == "quick" and report.seed == 7


@pytest.mark.specverify(seed=3)
def test_marker_sets_the_seed(specverify_check):
    assert specverify_check(speculative_step).seed == 3


def test_inverted_ratio_is_exact(specverify_check):
    specverify_check(get("ratio/inverted").fn)
'''


def plugin_args() -> list[str]:
    """``-p specverify.pytest_plugin`` unless the installed distribution's pytest11 entry point
    already loads it (an editable install of another checkout may lack the entry point)."""
    registered = any(ep.value == "specverify.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if registered else ["-p", "specverify.pytest_plugin"]


def test_the_fixture_as_a_user_runs_it(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess(*plugin_args(), "--specverify-budget", "quick",
                                           "--specverify-seed", "7", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["specverify: budget quick, seed 7",
                                 "*AssertionError: *:inverted_ratio: NOT EXACT (seed 7, budget quick*",
                                 "*smallest counterexample (exact): vocab 2, k=1*",
                                 "*tokens*sampler*target*difference*"])
    assert "FAILED test_user.py::test_inverted_ratio_is_exact" in out


def test_a_bad_budget_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_user="def test_x(specverify_check):\n    pass\n")
    result = pytester.runpytest_subprocess(*plugin_args(), "--specverify-budget", "huge")
    assert result.ret == 4 and "--specverify-budget" in result.stderr.str()
