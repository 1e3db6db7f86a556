"""``mutants report --executor ray`` and ``check --executor ray`` on a local Ray instance started
here (``ray.init(num_cpus=2)``): the same verdicts as the local executor for the same seed.
Skipped with one line when the ray extra is not installed (``pip install -e '.[ray]'``).

Each subject's battery runs whole in one Ray task (specverify.executors), as in a local worker;
verdicts at fixed seeds and a false-fail rate of 1e-6 are deterministic (a look's runs are
bounded by time, so an exact subject's p-values may differ on a loaded machine, not its verdict).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

from specverify import checker  # noqa: E402
from specverify.mutants import report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ("ratio/inverted", "control/unknown-draft-probs")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield ray
    ray.shutdown()


def test_report_on_ray_gives_the_local_verdicts(local_ray):
    from specverify.mutants import get

    items = [*report.subjects(None)[:2], *(get(m) for m in MUTANTS)]
    t0 = time.perf_counter()
    here = report.run_all(items, "quick", 0, 120.0, 2, False)
    t1 = time.perf_counter()
    there = report.run_all(items, "quick", 0, 120.0, 2, False, executor="ray")
    t2 = time.perf_counter()
    print(f"\n{len(items)} subjects, quick budget: local (2 workers) {t1 - t0:.1f} s, "
          f"ray (num_cpus=2) {t2 - t1:.1f} s")
    assert [(r.id, r.status, r.killed_by) for r in there] == [(r.id, r.status, r.killed_by) for r in here]
    assert all(r.ok for r in there)
    # the statistics agree too where no time limit cut a look short (the mutants stop at their
    # first finding, at 500 runs, on both); an exact subject's runs per look are bounded by time
    for a, b in zip(here, there):
        if a.status == report.Status.KILLED:
            assert (a.exact_tv, a.samples_to_detect) == (b.exact_tv, b.samples_to_detect)


def test_check_of_several_targets_on_ray(local_ray):
    calls = [("specverify:speculative_step", "quick", 0),
             ("specverify.mutants.catalogue:no_verification", "quick", 0)]
    from specverify.executors import ray_map

    outcomes = ray_map(checker.check_target, calls, "ray")
    assert [(s, r["exact"]) for s, r in outcomes] == [("ok", True), ("ok", False)]
    assert outcomes[1][1]["counterexample"]["vocab_size"] == 2


def test_the_cli_starts_its_own_local_ray():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-m", "specverify", "check", "specverify:speculative_step",
                           "--budget", "quick", "--json", "--executor", "ray"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["exact"] is True
