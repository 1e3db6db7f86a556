"""The GPU stage's code path runs in CI: ``tox -e cpu`` runs gpu_validation/ on the tiny random
Qwen2 pair (``SPECVERIFY_STAGE_PAIR=tiny``), and there a library function the stage uses that
goes missing fails the step; it does not skip.

The second test runs one stage test in a child pytest (as tox runs it: the tiny pair, no CUDA)
with a plugin (``-p``) that deletes ``specverify.samplers.one_step.one_step_output_distribution``
before the stage imports anything, and asserts the child fails, naming the function, with
nothing skipped. The child imports this checkout (PYTHONPATH = the repository root).
"""

import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "pip install -e '.[models]'"
STAGE_TEST = "gpu_validation/test_qwen_pair.py::test_rule_is_exact_on_real_distributions"
REMOVED = "specverify.samplers.one_step:one_step_output_distribution"
PLUGIN = '''"""Deletes the function named by SPECVERIFY_TEST_REMOVE (module:name) when pytest loads it."""
import importlib
import os

module, name = os.environ["SPECVERIFY_TEST_REMOVE"].split(":")
delattr(importlib.import_module(module), name)
'''


def tox_env(name: str) -> configparser.SectionProxy:
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "tox.ini", encoding="utf-8")
    return config[f"testenv:{name}"]


def setenv(section: configparser.SectionProxy) -> dict:
    lines = [line.split("=", 1) for line in section["setenv"].strip().splitlines()]
    return {key.strip(): value.strip() for key, value in lines}


def test_tox_cpu_runs_the_stage_on_the_tiny_pair_and_tox_gpu_on_the_real_one():
    cpu, gpu = tox_env("cpu"), tox_env("gpu")
    assert "gpu_validation" in cpu["commands"].split(), cpu["commands"]
    assert setenv(cpu)["SPECVERIFY_STAGE_PAIR"] == "tiny"
    assert setenv(gpu)["SPECVERIFY_STAGE_PAIR"] == "real"


def test_a_missing_library_function_fails_the_ci_step_instead_of_skipping(tmp_path):
    pytest.importorskip("torch", reason=f"the stage's tiny pair needs torch: {INSTALL}")
    pytest.importorskip("transformers", reason=f"the stage's tiny pair needs transformers: {INSTALL}")
    (tmp_path / "remove_a_function.py").write_text(PLUGIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECVERIFY_")}
    env.update(
        PYTHONPATH=os.pathsep.join(
            [str(ROOT), str(tmp_path), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        ),
        HYPOTHESIS_PROFILE="ci",
        MPLBACKEND="Agg",
        SPECVERIFY_STAGE_PAIR="tiny",
        SPECVERIFY_STAGE_DEVICE="cpu",
        SPECVERIFY_TEST_REMOVE=REMOVED,
    )
    args = [sys.executable, "-m", "pytest", STAGE_TEST, "-p", "remove_a_function", "-p", "no:cacheprovider", "-rs"]
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    summary = out.strip().splitlines()[-1]
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, out
    assert "1 failed" in summary and "skipped" not in summary and "passed" not in summary, out
    assert "AttributeError" in out and REMOVED.split(":")[1] in out, out
