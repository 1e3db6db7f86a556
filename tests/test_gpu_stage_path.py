"""The GPU stage's code path runs in CI: ``tox -e cpu`` runs gpu_validation/ on the tiny random
Qwen2 pair (``SPECVERIFY_STAGE_PAIR=tiny``), and there a library function the stage uses that
goes missing fails the step; it does not skip. Then the contract of the library functions the
stage's rule checks call (``specverify.samplers.one_step``), on small rows, and the variables
that size a CPU run of the stage (gpu_validation/conftest.py's ``sized``).

``test_a_missing_library_function_fails_the_ci_step_instead_of_skipping`` runs one stage test in a child pytest (as tox runs it: the tiny pair, no CUDA)
with a plugin (``-p``) that deletes ``specverify.samplers.one_step.one_step_output_distribution``
before the stage imports anything, and asserts the child fails, naming the function, with
nothing skipped. The child imports this checkout (PYTHONPATH = the repository root).
"""

import configparser
import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from specverify.samplers import one_step

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


def stage_conftest():
    """gpu_validation/conftest.py as a module (it imports only the standard library and pytest)."""
    spec = importlib.util.spec_from_file_location("stage_conftest", ROOT / "gpu_validation" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_size_variables_change_only_their_own_field_and_bad_values_are_refused_by_name(monkeypatch):
    conftest = stage_conftest()
    for variable in conftest.SIZE_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    assert conftest.sized(conftest.REAL_SCALE) == conftest.REAL_SCALE
    for field, variable in conftest.SIZE_VARIABLES.items():
        with monkeypatch.context() as env:
            env.setenv(variable, "2")
            changed = conftest.sized(conftest.REAL_SCALE)
        assert changed == dataclasses.replace(conftest.REAL_SCALE, **{field: 2}), variable
    for bad in ("0", "-1", "1.5", "three", ""):
        monkeypatch.setenv("SPECVERIFY_TABLE_PROMPTS", bad)
        with pytest.raises(
            pytest.UsageError, match=re.escape(f"SPECVERIFY_TABLE_PROMPTS: expected a positive integer, got {bad!r}")
        ):
            conftest.sized(conftest.REAL_SCALE)


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


# ------------------------------------------------- the rule on explicit rows, as the stage uses it


def test_one_step_output_law_is_p_on_rows_with_zeros():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p, q = rng.dirichlet(np.full(12, 0.3), size=2)
        p[rng.random(12) < 0.3] = 0.0
        q[rng.random(12) < 0.3] = 0.0
        p, q = p / p.sum(), q / q.sum()
        np.testing.assert_allclose(one_step.one_step_output_distribution(p, q), p, rtol=0, atol=1e-12)


def test_sampled_rounds_stay_on_the_union_of_supports_and_follow_p():
    """Counts of 20,000 rounds on a 6-token pair against p: chi-square at 1e-6 (false-fail rate
    1e-6 for the exact rule; fixed seed, so deterministic); an int seed is a Generator's seed."""
    p = np.array([0.5, 0.3, 0.2, 0.0, 0.0, 0.0])
    q = np.array([0.1, 0.1, 0.1, 0.7, 0.0, 0.0])
    counts = one_step.sample_one_step(p, q, 20_000, 3)
    assert counts.sum() == 20_000 and counts[3:].sum() == 0
    assert stats.chisquare(counts[:3], 20_000 * p[:3]).pvalue > 1e-6
    np.testing.assert_array_equal(counts, one_step.sample_one_step(p, q, 20_000, np.random.default_rng(3)))


HALF = [0.5, 0.5]


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: one_step.one_step_output_distribution(HALF, [1.0]), ValueError, "p.*q|q.*p"),
        (lambda: one_step.one_step_output_distribution([0.5, 0.6], HALF), ValueError, "^p: sums to"),
        (lambda: one_step.sample_one_step(HALF, [0.5, -0.5], 10, 0), ValueError, "^q: "),
        (lambda: one_step.sample_one_step(HALF, HALF, 0, 0), ValueError, "^n: must be >= 1"),
        (lambda: one_step.sample_one_step(HALF, HALF, 2.0, 0), TypeError, "^n: must be an integer"),
    ],
    ids=["lengths", "p-sum", "q-negative", "n-zero", "n-float"],
)
def test_bad_rows_and_counts_are_refused_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()
