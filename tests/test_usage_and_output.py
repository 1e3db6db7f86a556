"""Usage errors and readable output: every command line's usage error is one line
on stderr and exit 2 within seconds (check, mutants, engines, bench, bench_kernel, bench_hot_path,
compare_samplers, experiments; a bad --executor address too); ``python -m specverify --help``
exits 0; the pytest marker refuses what it would otherwise ignore; ``check(interface=3)`` names
the argument; assert_exact's own frame stays out of pytest tracebacks; JUnit failure text has
each finding once; ``check``'s progress line appears only on a terminal; the mutant report's
table fits 100 columns.

Statistical false-fail rate: the battery's 1e-6 per run, fixed seeds: deterministic."""

import io
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from specverify import speculative_step
from specverify.mutants import get
from specverify.surface import api

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]


def run_module(*args, timeout=60):
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0


# ------------------------------------------------------------------ 1. usage errors, --help

HEAVY_MODULES = {"scipy", "torch", "transformers", "polars", "matplotlib", "ray", "rich", "hypothesis"}
"""What no command may import before it has parsed its command line (NumPy may: ~0.1 s)."""


@pytest.mark.parametrize(
    "args, words",
    [
        (("specverify",), "expected a command"),
        (("specverify", "nope"), "expected a command"),
        (("specverify", "check"), "the following arguments are required: TARGET"),
        (("specverify", "check", "--bogus", "a:b"), "unrecognized arguments: --bogus"),
        (("specverify", "check", "a:b", "--budget", "huge"), "invalid choice: 'huge'"),
        (("specverify", "check", "a:b", "--interface", "x"), "argument --interface"),
        (("specverify.mutants",), "required: command"),
        (("specverify.mutants", "report", "--bogus"), "unrecognized arguments: --bogus"),
        (("specverify.mutants", "report", "--workers", "0"), "argument --workers"),
        (("specverify.mutants", "report", "--format", "html"), "argument --format: invalid choice"),
        (("specverify.engines", "--bogus"), "unrecognized arguments: --bogus"),
        (("specverify.engines", "--seed", "-1"), "argument --seed"),
        (("specverify.engines", "--render", "/no/such/rows.json"), "--render: cannot read"),
        (("specverify.bench.kernel_bench", "--bogus"), "unrecognized arguments: --bogus"),
        (("specverify.bench.kernel_bench", "--markdown"), "expected one argument"),
        (("specverify.bench.kernel_bench", "--markdown", "/no/such/dir/K.md"), "argument --markdown: folder"),
        (("specverify.bench", "--bogus"), "unrecognized arguments: --bogus"),
        (("specverify.bench", "--budget", "huge"), "argument --budget: invalid choice: 'huge'"),
        (("specverify.bench", "--markdown", "/no/such/dir/B.md"), "argument --markdown: folder"),
        (("specverify.bench.hot_path", "--bogus"), "unrecognized arguments: --bogus"),
        (("specverify.bench.hot_path", "--repeats", "0"), "--repeats: must be >= 1"),
        (("specverify.bench.hot_path", "--against", "/no/such/dir"), "--against: /no/such/dir holds no specverify"),
        (("specverify.bench.compare_samplers", "--bogus"), "unrecognized arguments: --bogus"),
        (("specverify.bench.compare_samplers", "--out", "/no/such/dir/S.md"), "argument --out: folder"),
        (("specverify.experiments",), "the following arguments are required: NAME"),
        (("specverify.experiments", "nope"), "argument NAME: invalid choice: 'nope'"),
        (("specverify.experiments", "power", "--bogus"), "unrecognized arguments: --bogus"),
        (
            ("specverify.experiments", "power", "--out", "pyproject.toml"),
            "--out: 'pyproject.toml' exists and is not a directory",
        ),
        (
            ("specverify", "check", "a:b", "--executor", "ray://head:99999"),
            "argument --executor: 'ray://head:99999': the port must be an integer in 1..65535",
        ),
        (("specverify.mutants", "report", "--executor", "ray://head"), "argument --executor: 'ray://head': expected"),
        (("specverify", "check-hf-generate", "--bogus"), "unrecognized arguments: --bogus"),
        (("specverify", "check-hf-generate", "--n", "0"), "argument --n: must be >= 1, got 0"),
        (("specverify", "check-hf-generate", "--detect-tv", "0"), "argument --detect-tv: must be a total-variation"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, tuple) else None,
)
def test_a_usage_error_is_one_line_and_exit_2(args, words):
    """One line on stderr, exit 2, and fast: nothing heavy is imported before the command line
    is parsed (``-X importtime`` lists every import; its lines are set aside). Asserting on the
    imports, not the wall clock, keeps this deterministic on a loaded machine; the times (0.1 to
    0.3 s each on 2 idle cores, where SciPy alone costs ~1 s and torch ~5 s) are measured by
    ``python -X importtime -m ARGS``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    code, out, err = proc.returncode, proc.stdout, proc.stderr
    imported = {
        line.split("|")[-1].strip().split(".")[0] for line in err.splitlines() if line.startswith("import time:")
    }
    err = "".join(line + "\n" for line in err.splitlines() if not line.startswith("import time:"))
    assert code == 2 and out == "", (code, out, err)
    assert len(err.strip().splitlines()) == 1 and ": error: " in err and words in err, err
    assert "usage:" not in err and "Traceback" not in err
    assert not imported & HEAVY_MODULES, sorted(imported & HEAVY_MODULES)


def test_help_exits_0_and_lists_the_commands():
    code, out, err, _ = run_module("specverify", "--help")
    assert code == 0 and err == ""
    assert "check " in out and "check-hf-generate" in out and "--help" in out
    code, out, _, _ = run_module("specverify", "check", "--help")
    assert code == 0 and "TARGET" in out and "--budget" in out


# ------------------------------------------------------------------ 2, 3. the pytest marker, tracebacks

MARKER_TESTS = """
import pytest
from specverify import speculative_step
from specverify.mutants import get


@pytest.mark.specverify("quick")
def test_positional(specverify_check):
    specverify_check(speculative_step)


@pytest.mark.specverify(budgte="quick")
def test_misspelled(specverify_check):
    specverify_check(speculative_step)


@pytest.mark.specverify(seed=None, budget="quick")
def test_seed_none_keeps_the_option(specverify_check):
    assert specverify_check(speculative_step).seed == 7


@pytest.mark.specverify(budget="quick")
def test_mutant_fails(specverify_check):
    specverify_check(get("ratio/inverted").fn)
"""


def plugin_args() -> list[str]:
    from importlib.metadata import entry_points

    registered = any(ep.value == "specverify.surface.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if registered else ["-p", "specverify.surface.pytest_plugin"]


def test_the_marker_refuses_what_it_would_ignore_and_hides_assert_exact(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_user=MARKER_TESTS)
    result = pytester.runpytest_subprocess(
        *plugin_args(), "--specverify-seed", "7", "--tb=long", "-p", "no:cacheprovider", "-rA"
    )
    result.assert_outcomes(passed=1, failed=1, errors=2)
    out = result.stdout.str()
    allowed = "budget, seed, interface, allow_inconclusive, precision, reference"
    result.stdout.fnmatch_lines(
        [
            f"*@pytest.mark.specverify takes keywords only ({allowed}), got positional argument(s) "
            f"'quick' (budget='quick'?)*",
            f"*@pytest.mark.specverify: unknown keyword(s) budgte; it takes {allowed}*",
            "*AssertionError: *:inverted_ratio: NOT EXACT (seed 7, budget quick*",
        ]
    )
    assert "ERROR test_user.py::test_positional" in out and "ERROR test_user.py::test_misspelled" in out
    assert "PASSED test_user.py::test_seed_none_keeps_the_option" in out
    # the traceback ends at the test's own call: neither assert_exact nor the fixture's frame
    assert "raise AssertionError(failure_message(report))" not in out
    assert "specverify/surface/api.py" not in out and "specverify/surface/pytest_plugin.py" not in out


@pytest.mark.parametrize("bad", [3, [1]])
def test_a_bad_interface_names_the_argument(bad):
    words = "interface: must be one of auto, round, loop, kernel or an adapter (a callable), got "
    with pytest.raises(TypeError, match=re.escape(words + repr(bad))):
        api.check(speculative_step, interface=bad)
    with pytest.raises(ValueError, match=re.escape(words + "'rounds'")):
        api.check(speculative_step, interface="rounds")


# ------------------------------------------------------------------ 4. JUnit failure text


def test_junit_failure_text_lists_each_finding_once(tmp_path):
    from specverify.surface import check_run as checker
    from specverify.surface import junit

    report = api.check(get("ratio/inverted").fn, target="inverted", budget="quick").to_dict()
    assert report["exact"] is False and report["findings"]
    case = checker.junit_case("inverted", ("ok", report))
    path = tmp_path / "r.xml"
    assert junit.write(str(path), "specverify.check", [case], "test") == 0
    failure = ET.parse(path).find(".//failure")
    text = failure.text
    for line in api.finding_lines(report):
        assert text.count(line) == 1, line
    assert text.count("NOT EXACT") == 1 and text.count("smallest") == 1  # counterexample once too
    assert "ran:" in text and failure.get("message").startswith("[")


# ------------------------------------------------------------------ 5. progress only on a terminal


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_terminal_only(monkeypatch):
    fake = Terminal()
    monkeypatch.setattr(sys, "stderr", fake)
    assert api.check(speculative_step, budget="quick", counterexample=False).exact is True
    shown = fake.getvalue()
    assert "specverify: checking specverify.samplers.chain:speculative_step" in shown
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    api.check(speculative_step, budget="quick", counterexample=False, progress=False)
    assert quiet.getvalue() == ""


def test_only_the_forecast_when_stderr_is_not_a_terminal():
    """No progress lines off a terminal; the forecasts, told before the time is spent, are one line
    each: the enumerations' (right after the contract) and the sampled runs'."""
    code, out, err, _ = run_module(
        "specverify", "check", "specverify:speculative_step", "--budget", "quick", timeout=300
    )
    assert code == 0 and out.startswith("specverify:speculative_step: EXACT")
    first, line = err.splitlines()  # the enumerations' forecast, then the sampled runs'
    stage = "specverify: checking specverify:speculative_step: round battery, budget quick: forecast"
    assert first.startswith(stage + " before enumerating") and line.startswith(stage)


# ------------------------------------------------------------------ 6. the mutant report's table


def test_report_table_fits_100_columns():
    from specverify.mutants.mutant_table import render, summary
    from specverify.mutants.report import Row, Status, subjects

    rows = [
        Row(
            m.id,
            m.effect,
            Status.KILLED if m.effect != "exact" else Status.PASSED,
            "exact,chi2,tokens" if m.effect != "exact" else "",
            0.123456,
            None,
            None,
            12.34,
            m.description,
            m.reference or "",
        )
        for m in subjects(None)
    ]
    rows.append(
        Row(
            "x/" + "a-very-long-mutant-identifier" * 3,
            "contract",
            Status.SURVIVED,
            "contract,some-long-check-name,another-long-check-name,exact",
            None,
            None,
            None,
            1234.5,
            "long",
            "",
        )
    )
    catalogue = render(rows[:-1], "table", 0, "standard").splitlines()
    assert max(len(line) for line in catalogue[:-1]) <= 100  # the catalogue's ids fit whole
    text = render(rows, "table", 0, "standard")
    lines = text.splitlines()
    assert lines[-1] == summary(rows)
    long_id = rows[-1].id  # an id is never wrapped (grep finds it), however long: the table widens
    assert sum(long_id in line for line in lines) == 1
    assert all(name in text for name in ("some-long-check-name,", "another-long-check-name,"))
    assert lines[0].split() == ["id", "effect", "status", "killed_by", "exact_tv", "seconds"]
    assert "shape:" not in text and "┆" not in text and text.isascii()
    assert any(line.startswith("baseline/reference ") for line in lines)


def test_report_cli_table_one_mutant(capsys):
    from specverify.mutants.command import main

    assert main(["report", "--mutant", "ratio/inverted", "--workers", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[-2] == "baseline passed, forced-fail detected; 1/1 mutants killed, 0/0 controls passed"
    assert re.fullmatch(r"\d+ s wall time, \d+ s of judging in 1 process", lines[-1]), lines[-1]
    assert any(line.split()[:3] == ["ratio/inverted", "biased", "killed"] for line in lines)
