"""The entry points run as a user runs them, each in a subprocess, cheaply (seconds each):

- `pytest --hypothesis-show-statistics` on one property (of one property file) prints the
  statistics and the labels of tests/hypothesis_labels.py;
- `pytest gpu_validation -rs` on a machine without CUDA skips with one line and exits 0;
- `python -m specverify.mutants report --mutant ID` exits 0 with the mutant's row.

The child imports this checkout (PYTHONPATH = the repository root), with the derandomized ci
Hypothesis profile.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args, timeout=300, **env):
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("SPECVERIFY_")}
    child_env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        HYPOTHESIS_PROFILE="ci",
        MPLBACKEND="Agg",
        **env,
    )
    proc = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=timeout
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_pytest_hypothesis_show_statistics_prints_the_labels():
    rc, out = run(
        "-m",
        "pytest",
        "tests/test_engine_properties.py",
        "-k",
        "test_enumeration_or_statistics_as_the_checker_does",
        "--hypothesis-show-statistics",
        "-p",
        "no:cacheprovider",
        "-q",
    )
    assert rc == 0, out
    assert "Hypothesis Statistics" in out and "Events:" in out, out
    assert "Stopped because settings.max_examples=40" in out, out
    for label in (
        "order ",
        "period ",
        "zeros",
        "k 1",
        "window reaches the bonus token (m > k)",
        "enumerated exactly",
        "fell back from enumeration to statistics",
    ):
        assert f"%, {label}" in out, (label, out)


def test_gpu_stage_skips_with_one_line_without_cuda():
    rc, out = run("-m", "pytest", "gpu_validation", "-rs", "-p", "no:cacheprovider", CUDA_VISIBLE_DEVICES="")
    assert rc == 0, out
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert all("GPU stage skipped" in line for line in skips), out
    # one line per reason: the kernel tests' (no CUDA) and the pair tests' (no CUDA or no weights)
    assert sorted(line.split(": ", 1)[0].split("/")[-1] for line in skips) == [
        "test_kernel_cuda.py",
        "test_qwen_pair.py",
    ], out
    assert " skipped" in out.splitlines()[-1] and "passed" not in out.splitlines()[-1], out


def test_mutant_report_for_one_mutant():
    mutant = "ratio/inverted"
    rc, out = run("-m", "specverify.mutants", "report", "--mutant", mutant)
    assert rc == 0, out
    rows = [line for line in out.splitlines() if mutant in line]
    assert len(rows) == 1 and "killed" in rows[0], out
