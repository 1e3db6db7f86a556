"""``specverify engines`` as a new user meets it, without the network: ``--offline`` reads the
cache only (every row), a missing torch is one line and exit 4, ``--list`` loads and downloads
nothing, every option has a help line, and a row's progress reaches stderr as it runs.

Wheels are never downloaded here: the cache is a temporary directory
(``$SPECVERIFY_ENGINES_DIR``), ``subprocess.run`` (pip) is replaced by a recorder that fails the
call, and child processes get ``PIP_NO_INDEX=1``. Where a row must run, its wheel is a small
fake one written into the cache in the engine's calling convention."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from specverify.engines import BY_NAME, ENGINES, Engine, loader
from specverify.engines.__main__ import main

ROOT = Path(__file__).resolve().parents[1]

FAKE_MEDUSA_UTILS = """\
import torch


def evaluate_posterior(logits, candidates, temperature, posterior_threshold, posterior_alpha):
    return torch.tensor(0), candidates.shape[1] - 1  # accepts every candidate (lossy)


def generate_candidates(medusa_logits, logits, medusa_topk, tree_indices, temperature):
    return torch.argmax(logits[:, -1]).reshape(1), None
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty engines cache, and pip (``subprocess.run``) forbidden: the list of its calls."""
    root = tmp_path / "engines-cache"
    monkeypatch.setenv("SPECVERIFY_ENGINES_DIR", str(root))
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "1"))  # restored afterwards
    calls = []

    def no_network(cmd, *args, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: the test forbids the network")

    monkeypatch.setattr(loader.subprocess, "run", no_network)
    return root, calls


def fake_wheel(root: Path, package: str, version: str, files: dict[str, str]) -> Path:
    """A wheel of ``package==version`` holding ``files`` in ``root/dl`` (the cache's layout)."""
    (root / "dl").mkdir(parents=True, exist_ok=True)
    path = root / "dl" / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def child_env(cache_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECVERIFY_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        SPECVERIFY_ENGINES_DIR=str(cache_dir),
        PIP_NO_INDEX="1",
        HYPOTHESIS_PROFILE="ci",
    )
    return env


def run_without_torch(cache_dir: Path, argv: list[str], after: str = "") -> subprocess.CompletedProcess:
    """``specverify <argv>`` in a child where ``import torch`` fails (as if it were not installed);
    ``after``: Python run once the command returned (its code in ``rc``), before exiting with it."""
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # import torch -> ModuleNotFoundError\n"
        "from specverify.cli import main\n"
        f"rc = main({argv!r})\n"
        f"{after}\n"
        "sys.exit(rc)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=child_env(cache_dir), capture_output=True, text=True, timeout=120
    )


# ----------------------------------------------------------------------------- --offline


def test_offline_downloads_nothing_for_any_row(cache):
    from specverify.engines import run

    root, calls = cache
    rows = run(download=False)
    assert calls == []  # no pip download, no pip install of triton
    assert [r["engine"] for r in rows] == [e.name for e in ENGINES]
    for row in rows:
        assert "skipped" in row, row
        if BY_NAME[row["engine"]].build is not None:
            assert "\n" not in row["skipped"]
            assert "not cached" in row["skipped"] and "without --offline" in row["skipped"], row


def test_offline_with_nothing_cached_is_one_environment_line(cache, capsys, monkeypatch):
    """Not an empty table and exit 0: one line saying what to run to fill the cache, exit 4."""
    root, calls = cache
    monkeypatch.setattr("specverify.engines.__main__.missing_torch", lambda engines: None)
    assert main(["--offline"]) == 4
    assert calls == []
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("specverify engines: error: --offline: no wheel of the chosen rows is cached")
    assert str(root) in line and "without --offline" in line, line


def test_offline_reaches_the_triton_step_too(cache, monkeypatch):
    pytest.importorskip("torch")
    root, calls = cache
    fake_wheel(root, "sglang", "0.5.23", {"sglang/kernels/ops/speculative/reject_sampling.py": "X = 1\n"})
    monkeypatch.setitem(sys.modules, "triton", None)  # as if triton were not installed
    from specverify.engines import run_engine

    row = run_engine(BY_NAME["sglang-chain"], download=False)
    assert calls == []  # no pip install of triton
    assert "triton" in row["skipped"] and "without --offline" in row["skipped"], row


def test_offline_runs_a_row_whose_wheel_is_cached(cache, capsys):
    pytest.importorskip("torch")
    root, calls = cache
    fake_wheel(root, "medusa-llm", "0.1", {"medusa/model/utils.py": FAKE_MEDUSA_UTILS})
    assert main(["--offline", "--engine", "medusa", "--json"]) == 0
    assert calls == []
    out, err = capsys.readouterr()
    (row,) = json.loads(out)  # stdout: the JSON only
    assert row["engine"] == "medusa" and row["exact"] is False and "skipped" not in row
    assert "[1/1] medusa: loading medusa-llm 0.1" in err
    assert "[1/1] medusa: judging (round battery, budget quick)" in err
    assert re.search(r"\[1/1\] medusa: not exact \(lossy by design\) \([\d.]+ s\)", err), err


# ----------------------------------------------------------------------------- torch missing


@pytest.mark.parametrize("argv", [["engines"], ["engines", "--engine", "medusa", "--offline"]], ids=" ".join)
def test_missing_torch_is_one_line_and_exit_4(tmp_path, argv):
    from specverify.common.command_line import EXIT_ENVIRONMENT

    done = run_without_torch(tmp_path / "cache", argv)
    assert done.returncode == EXIT_ENVIRONMENT == 4, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("specverify engines: error: torch is not importable")
    assert "pip install -e '.[models]'" in line and "pip install 'specverify[models]'" in line
    assert not (tmp_path / "cache").exists()  # nothing was fetched before the check


def test_rows_that_need_no_torch_run_without_it(tmp_path):
    done = run_without_torch(tmp_path / "cache", ["engines", "--engine", "flashinfer", "--json"])
    assert done.returncode == 0, done.stderr
    assert "CUDA only" in json.loads(done.stdout)[0]["skipped"]


# ----------------------------------------------------------------------------- --list


def test_list_imports_no_torch_creates_and_downloads_nothing(tmp_path):
    cache_dir = tmp_path / "absent"
    after = "assert sys.modules.get('torch') is None and 'triton' not in sys.modules, 'imported'"
    done = run_without_torch(cache_dir, ["engines", "--list"], after)
    assert done.returncode == 0, done.stderr
    assert not cache_dir.exists()
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["engine", "package", "interface", "needs", "cached"]
    for engine in ENGINES:
        (line,) = [ln for ln in lines if ln.startswith(engine.name + " ")]
        assert f"{engine.package}=={engine.version}" in line and f" {engine.interface} " in line, line
        assert line.endswith(" no"), line
    assert f"cache: {cache_dir}" in done.stdout


def test_list_says_what_each_row_needs_and_what_is_cached(cache, capsys):
    root, calls = cache
    fake_wheel(root, "medusa-llm", "0.1", {"medusa/model/utils.py": FAKE_MEDUSA_UTILS})
    assert main(["--list", "--json"]) == 0
    assert calls == []
    rows = {r["engine"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(BY_NAME)
    assert rows["medusa"]["cached"] is True and rows["medusa"]["needs"] == ["torch"]
    assert rows["eagle1"]["cached"] is False and rows["eagle1"]["needs"] == ["torch", "network for the first download"]
    assert any("TRITON_INTERPRET=1" in n for n in rows["vllm-v1-rejection"]["needs"])
    assert not any("triton" in n for n in rows["vllm-v0-rejection"]["needs"])
    assert rows["flashinfer"]["runs_here"] is False and any("CUDA" in n for n in rows["flashinfer"]["needs"])
    assert {r["interface"] for r in rows.values()} == {"kernel", "round"}


def test_the_list_fits_in_100_columns(cache, capsys):
    assert main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["engine", "package", "interface", "needs", "cached"]
    assert all(len(line) <= 100 for line in lines if not line.startswith("cache: ")), lines
    assert sum(line.startswith(tuple(BY_NAME)) for line in lines) == len(BY_NAME)


# ----------------------------------------------------------------------------- --help


def option_entries(help_text: str) -> dict[str, str]:
    """argparse's options block: each option's invocation (``--budget {quick,standard}``) -> its
    help text (continuation lines joined)."""
    entries: dict[str, str] = {}
    block = help_text.split("\noptions:\n", 1)[1].split("\n\n", 1)[0]
    current = None
    for line in block.splitlines():
        if line.startswith("  -"):
            invocation, _, text = line.strip().partition("  ")
            current = invocation
            entries[current] = text.strip()
        elif current is not None:
            entries[current] = (entries[current] + " " + line.strip()).strip()
    return entries


def test_every_option_has_a_help_line(capsys):
    assert main(["--help"]) == 0
    entries = option_entries(capsys.readouterr().out)
    options = {invocation.split()[0].rstrip(",") for invocation in entries}
    assert {"--engine", "--budget", "--seed", "--json", "--offline", "--expect", "--render"} <= options
    assert all(text for text in entries.values()), {k: v for k, v in entries.items() if not v}
    budget = next(text for inv, text in entries.items() if inv.startswith("--budget"))
    assert "quick" in budget and "standard" in budget


# ----------------------------------------------------------------------------- progress


def test_a_silent_stage_gets_a_still_line_every_interval(capsys):
    from specverify.engines import heartbeat

    with heartbeat.RowProgress(2, interval=0.05, terminal=False) as progress:
        progress.stage("vllm-v1-rejection", "judging (kernel battery, budget quick)")
        time.sleep(0.4)
        progress.finished({"engine": "vllm-v1-rejection", "verdict": "exact", "seconds": 0.4})
        progress.finished({"engine": "flashinfer", "skipped": "flashinfer: CUDA only"})
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "specverify engines: [1/2] vllm-v1-rejection: judging (kernel battery, budget quick)"
    still = [ln for ln in err if "still judging" in ln]
    assert len(still) >= 2 and all(ln.startswith("specverify engines: [1/2] vllm-v1-rejection:") for ln in still)
    assert err[-2] == "specverify engines: [1/2] vllm-v1-rejection: exact (0.4 s)"
    assert err[-1] == "specverify engines: [2/2] flashinfer: skipped: CUDA only"


def test_the_command_reports_each_row_as_it_starts_and_while_it_runs(cache, capsys, monkeypatch):
    from specverify.engines import heartbeat

    def slow_build(download=True):
        time.sleep(0.5)
        raise loader.Unavailable("gone")

    slow = Engine("slow-fake", "fake-pkg", "1.0", "f", "kernel", "exact", "none", slow_build, needs=())
    monkeypatch.setitem(BY_NAME, "slow-fake", slow)
    monkeypatch.setattr(heartbeat, "HEARTBEAT_S", 0.1)
    assert main(["--engine", "slow-fake", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)[0]["skipped"] == "slow-fake: gone"  # stdout: the JSON only
    lines = err.splitlines()
    assert lines[0].startswith("specverify engines: [1/1] slow-fake: loading fake-pkg 1.0")
    assert any("slow-fake: still loading fake-pkg 1.0" in ln for ln in lines[1:-1]), lines
    assert lines[-1] == "specverify engines: [1/1] slow-fake: skipped: gone"
