"""The pytest plugin as a user meets it (pytester): the ``specverify_check`` fixture passes an
exact sampler and fails a mutant with the smallest counterexample in the failure message, under
``--specverify-budget`` / ``--specverify-seed``. Statistical false-fail rate: 1e-6 per run, fixed
seeds: deterministic."""

from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]

USER_TESTS = """
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
"""


def plugin_args() -> list[str]:
    """``-p specverify.surface.pytest_plugin`` unless the installed distribution's pytest11 entry point
    already loads it (an editable install of another checkout may lack the entry point)."""
    registered = any(ep.value == "specverify.surface.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if registered else ["-p", "specverify.surface.pytest_plugin"]


def test_the_fixture_as_a_user_runs_it(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess(
        *plugin_args(), "--specverify-budget", "quick", "--specverify-seed", "7", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "specverify: budget quick, seed 7",
            "*AssertionError: *:inverted_ratio: NOT EXACT (seed 7, budget quick*",
            "*smallest counterexample (exact): vocab 2, k=1*",
            "*tokens*sampler*target*difference*",
        ]
    )
    assert "FAILED test_user.py::test_inverted_ratio_is_exact" in out


def test_a_bad_budget_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_user="def test_x(specverify_check):\n    pass\n")
    result = pytester.runpytest_subprocess(*plugin_args(), "--specverify-budget", "huge")
    assert result.ret == 4 and "--specverify-budget" in result.stderr.str()


def test_the_fixture_shows_its_status_line_on_a_terminal_through_capture(tmp_path):
    """Under pytest's default output capture, on a terminal (a pseudo-terminal here), the fixture's
    check shows specverify's status line (then erases it). (Piped, it shows none: the other tests
    here run the fixture without a terminal.)"""
    import os
    import pty
    import subprocess
    import sys

    (tmp_path / "test_user.py").write_text(
        "from specverify import speculative_step\n\n"
        "def test_step(specverify_check):\n"
        "    specverify_check(speculative_step, budget='quick')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "100"}
    env.pop("PYTEST_XDIST_WORKER", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(), "test_user.py"]
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: pytest ended
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert proc.wait(timeout=300) == 0, shown[-2000:]
    text = shown.decode("utf-8", "replace")
    assert "specverify: checking" in text and "1 passed" in text
