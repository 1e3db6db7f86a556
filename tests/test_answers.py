"""Answers that are not verdicts: a usage error (exit 2) and an environment error (exit 4) are
neither EXACT nor NOT EXACT, the same in ``check``, the API, JUnit, the pytest plugin and the
mutant report; several targets are each answered, whatever the others are.

Every check here either ends before a battery runs or on a contract breach of its first call,
so no statistical test decides anything (no false-fail rate to state)."""

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from specverify import interfaces
from specverify.battery.core import BatteryResult, Finding
from specverify.battery.environment import environment_problem
from specverify.common.command_line import EXIT_ENVIRONMENT, EXIT_USAGE
from specverify.errors import EnvironmentProblem
from specverify.mutants.report import Status, judge
from specverify.surface import api

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

SUBJECTS = textwrap.dedent(
    """
    import numpy as np


    def three_parameter_kernel(draft_ids, draft_probs, target_probs):
        return draft_ids, np.zeros(len(draft_ids), dtype=np.int64)


    def cuda_kernel(draft_ids, draft_probs, target_probs, uniforms):
        # what torch's CPU build raises for .to("cuda"); the real call is in test_a_real_cuda_move
        raise AssertionError("Torch not compiled with CUDA enabled")


    def torch_cuda_kernel(draft_ids, draft_probs, target_probs, uniforms):
        import torch

        torch.as_tensor(np.asarray(draft_probs)).to("cuda")
        return draft_ids, np.zeros(len(draft_ids), dtype=np.int64)


    class KernelClass:
        def __call__(self, draft_ids, draft_probs, target_probs, uniforms):
            return draft_ids


    def wrong_kernel(draft_ids, draft_probs, target_probs, uniforms):
        raise ValueError("a bug of the subject's own")
    """
)

NEEDS_A_PACKAGE = (
    "import not_a_package_specverify_knows\n\ndef speculative_step(p_fn, q_fn, prefix, k, rng):\n    return []\n"
)


@pytest.fixture
def subjects(tmp_path):
    path = tmp_path / "subjects.py"
    path.write_text(SUBJECTS)
    (tmp_path / "needs_pkg.py").write_text(NEEDS_A_PACKAGE)
    return tmp_path


def cli(*args, cwd=None):
    proc = subprocess.run(
        [sys.executable, "-m", "specverify", *args], capture_output=True, text=True, timeout=300, env=ENV, cwd=cwd
    )
    return proc.returncode, proc.stdout, proc.stderr


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    "target, interface, says",
    [
        ("subjects.py:three_parameter_kernel", "auto", "cannot be called as the kernel interface's f(draft_ids"),
        ("specverify.samplers.reference_kernel:reference_kernel", "loop", "the loop interface's f(target, draft"),
        ("specverify.samplers.reference_kernel:reference_kernel", "round", "the round interface's f(p_fn, q_fn"),
        ("subjects.py:KernelClass", "auto", "'KernelClass' is a class, not a function"),
    ],
)
def test_a_signature_that_does_not_fit_is_a_usage_error(subjects, target, interface, says):
    code, out, err = cli("check", target, "--interface", interface, "--budget", "quick", cwd=subjects)
    assert code == EXIT_USAGE, (out, err)
    assert says in err and len(err.splitlines()) == 1, err
    assert "NOT EXACT" not in out + err


def test_signature_problem_reads_the_parameters():
    def kernel(draft_ids, draft_probs, target_probs, uniforms):
        return draft_ids

    def round_step(p_fn, q_fn, prefix, k, rng, extra=None):
        return []

    assert interfaces.signature_problem(kernel, "kernel") is None
    assert interfaces.signature_problem(round_step, "round") is None  # a defaulted extra is fine
    assert "too many positional arguments" in interfaces.signature_problem(kernel, "round")
    assert "is a class" in interfaces.signature_problem(BatteryResult, "round")
    assert interfaces.signature_problem(len, "round") is not None  # len(obj, /): one argument
    with pytest.raises(interfaces.InterfaceError, match="is a class, not a function"):
        interfaces.detect(BatteryResult)


def test_the_api_raises_a_usage_error_for_a_mismatch_not_an_assertion():
    def kernel(draft_ids, draft_probs, target_probs):
        return draft_ids

    with pytest.raises(api.UsageError, match="kernel interface's f"):
        api.assert_exact(kernel, budget="quick")


# --------------------------------------------------------------------------- environment errors


@pytest.mark.parametrize(
    "message, advice",
    [
        ("raised AssertionError: Torch not compiled with CUDA enabled", "cannot run CUDA code"),
        ("raised RuntimeError: Found no NVIDIA driver on your system. Please check", "cannot run CUDA code"),
        ("raised ModuleNotFoundError: No module named 'torch'", "pip install 'specverify[models]'"),
        (
            "raised ModuleNotFoundError: No module named 'flash_attn.ops' [imported by the installed package 'vllm']",
            "pip install flash_attn",
        ),
        ("raised ValueError: probabilities do not sum to 1", None),
        ("raised AssertionError: draft_ids.shape == (2, 3)", None),
    ],
)
def test_environment_problem_tells_the_machine_from_the_subject(message, advice):
    got = environment_problem(message)
    assert (got is None) if advice is None else (advice in got), got


def test_a_missing_module_that_is_the_target_itself_is_a_usage_mistake():
    message = "ModuleNotFoundError: No module named 'torch'"
    assert environment_problem(message, own_module="torch.spec") is None
    assert environment_problem(message, own_module="other.spec") is not None


def test_an_environment_finding_is_no_verdict():
    result = BatteryResult(
        findings=[
            Finding("contract", "contract", "raised AssertionError: Torch not compiled with CUDA enabled", "case")
        ]
    )
    assert result.findings[0].kind == "environment"
    assert result.exact is None and "cannot run CUDA code" in result.environment
    assert result.to_dict()["environment"] == result.environment
    assert judge("biased", result)[0] == Status.ENVIRONMENT  # not a killed mutant
    assert judge("exact", result)[0] == Status.ENVIRONMENT  # nor an accused control
    own = BatteryResult(findings=[Finding("contract", "contract", "raised ValueError: a bug", "case")])
    assert own.exact is False and own.environment is None


def test_a_control_with_no_finding_passes_only_when_its_verdict_is_exact():
    """A control whose battery found nothing but left a case unjudged (a shortfall) has no
    evidence that it is exact: inconclusive, a row that is not ok, never "passed"."""
    short = BatteryResult(shortfalls=["exact: case A: stopped by a guard: no call returned within 32 s"])
    assert short.exact is None
    status, detail = judge("exact", short)
    assert status == Status.INCONCLUSIVE and "stopped by a guard" in detail
    whole = BatteryResult(mean_tokens_per_round={"case A": (2.0, 2.0)})
    assert whole.exact is True and judge("exact", whole) == (Status.PASSED, "")


def test_a_kernel_that_needs_cuda_is_an_environment_error_in_cli_json_and_junit(subjects):
    xml = subjects / "out.xml"
    code, out, err = cli(
        "check", "subjects.py:cuda_kernel", "--budget", "quick", "--json", "--junit-xml", str(xml), cwd=subjects
    )
    assert code == EXIT_ENVIRONMENT, (out, err)
    report = json.loads(out)
    assert report["exact"] is None and "cannot run CUDA code" in report["environment"]
    case = ET.parse(xml).getroot().find("testsuite").find("testcase")
    assert case.find("skipped") is not None and case.find("failure") is None


def test_a_real_cuda_move_on_a_machine_without_cuda(subjects):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the move succeeds")
    code, out, err = cli("check", "subjects.py:torch_cuda_kernel", "--budget", "quick", cwd=subjects)
    assert code == EXIT_ENVIRONMENT, (out, err)


def test_a_subjects_own_exception_is_still_evidence(subjects):
    code, out, err = cli("check", "subjects.py:wrong_kernel", "--budget", "quick", cwd=subjects)
    assert code == 1 and "NOT EXACT" in out, (out, err)


def test_an_import_of_a_module_found_nowhere_is_a_usage_error(subjects):
    """Not installed, not beside the file, not an extra's: the subject's own import line, not
    advice to install whatever PyPI has under that name (test_subject_imports has the rest)."""
    code, out, err = cli("check", "needs_pkg.py:speculative_step", "--budget", "quick", cwd=subjects)
    assert code == EXIT_USAGE, (out, err)
    assert "needs_pkg.py:1: 'import not_a_package_specverify_knows'" in err and "pip install" not in err


def test_the_api_raises_environment_problem_not_assertion(subjects):
    with pytest.raises(EnvironmentProblem, match="cannot run CUDA code"):
        api.assert_exact(str(subjects / "subjects.py") + ":cuda_kernel", budget="quick")
    report = api.check(str(subjects / "subjects.py") + ":cuda_kernel", budget="quick")
    assert report.exit_code == EXIT_ENVIRONMENT and report.counterexample is None


def test_the_pytest_plugin_skips_a_subject_that_cannot_run_here(pytester, subjects):
    pytester.makepyfile(
        test_env=f"""
        def test_cuda(specverify_check):
            specverify_check({str(subjects / "subjects.py")!r} + ":cuda_kernel", budget="quick")
        """
    )
    from test_pytest_plugin import plugin_args

    result = pytester.runpytest_subprocess(*plugin_args(), "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*cannot run CUDA code*"])


# --------------------------------------------------------------------------- several targets


def test_a_missing_target_does_not_stop_the_others_and_the_xml_is_written(subjects):
    xml = subjects / "several.xml"
    code, out, err = cli(
        "check",
        "missing.py:f",
        "specverify.samplers.chain:speculative_step",
        "no-colon",
        "--budget",
        "quick",
        "--junit-xml",
        str(xml),
        cwd=subjects,
    )
    assert code == EXIT_USAGE, (out, err)
    assert ": EXACT" in out  # the good target was checked
    assert "no such file 'missing.py'" in err and "'no-colon'" in err
    cases = ET.parse(xml).getroot().find("testsuite").findall("testcase")
    assert [c.get("name") for c in cases] == ["missing.py:f", "specverify.samplers.chain:speculative_step", "no-colon"]
    assert [c.find("error") is not None for c in cases] == [True, False, True]


# --------------------------------------------------------------------------- long work shows itself


def test_a_slow_import_is_not_silent_when_stderr_is_not_a_terminal(tmp_path, monkeypatch, capfd):
    """``progress="lines"`` (what ``specverify check`` uses on a pipe) prints the running stage
    every PROGRESS_LINE_SECONDS, from the loading of the target on; a short check prints only its
    two forecasts, once each: before enumerating and before sampling."""
    from specverify.surface import progress

    slow = tmp_path / "slow_import.py"
    slow.write_text(
        "import time\ntime.sleep(1.5)\n\ndef speculative_step(p_fn, q_fn, prefix, k, rng):\n    return []\n"
    )
    monkeypatch.setattr(progress, "PROGRESS_LINE_SECONDS", 0.4)
    api.check(f"{slow}:speculative_step", budget="quick", progress="lines", counterexample=False)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("specverify: ")]
    assert any(line.startswith(f"specverify: loading {slow}:speculative_step (") for line in lines), lines
    monkeypatch.setattr(progress, "PROGRESS_LINE_SECONDS", 60.0)
    api.check("specverify.samplers.chain:speculative_step", budget="quick", progress="lines", counterexample=False)
    told = [line for line in capfd.readouterr().err.splitlines() if line.startswith("specverify: ")]
    # the enumerations' forecast, right after the contract, then the sampled runs'
    assert len(told) == 2 and "forecast before enumerating" in told[0] and "forecast" in told[1], told
