"""A verdict is a function of (subject, seed, budget) alone: never of the machine's speed or load.

The budget fixes every case's run count (``battery.budgets``); clocks only guard against a hang.
So the same check run on an idle machine and beside two CPU-bound processes (on a 2-core machine:
the subject gets about a third of the time) must print the same JSON, byte for byte, apart from
the seconds it took. The subject is one the enumerator cannot follow (a Generator reseeded from
the rng), so every case is judged by sampled runs: the part that used to stop at a wall clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

SUBJECT = """\
import numpy as np
from specverify import speculative_step

def reseeded(p_fn, q_fn, prefix, k, rng):
    return speculative_step(p_fn, q_fn, prefix, k, np.random.default_rng(int(rng.integers(2**63))))
"""

BUSY = "while True: pass"


def _check(target: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "specverify", "check", target, "--budget", "quick", "--seed", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    report.pop("seconds")
    return report


def test_the_same_json_idle_and_beside_two_cpu_bound_processes(tmp_path):
    path = tmp_path / "reseeded.py"
    path.write_text(SUBJECT)
    target = f"{path}:reseeded"
    idle = _check(target)
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2)]
    try:
        loaded = _check(target)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    assert json.dumps(loaded, sort_keys=True) == json.dumps(idle, sort_keys=True)
    # and the runs are the budget's: every case to the quick budget's n_max, a swept one to its
    # sweep_runs
    assert idle["exact"] is True and idle["power"]
    assert {row["runs"] for row in idle["power"]} == {1000, 4000}


def _reseeded(p_fn, q_fn, prefix, k, rng):
    from specverify import speculative_step

    return speculative_step(p_fn, q_fn, prefix, k, np.random.default_rng(int(rng.integers(2**63))))


def test_the_same_result_with_one_worker_or_three():
    """The sampled runs come in blocks, each from its own stream: three processes sharing them
    give the result one gives (the quick budget on two fixed cases, every case sampled)."""
    from dataclasses import replace

    from specverify.interfaces import round as round_interface
    from specverify.interfaces import round_cases

    budget = replace(round_cases.get_budget("quick"), cases=(0, 4), generated=0, sweep_context=0, sweep_k=0)
    one, three = (round_interface.run_battery(_reseeded, budget, 5, workers=n).to_dict() for n in (1, 3))
    for report in (one, three):
        report.pop("seconds")
    assert one == three
    assert one["exact"] is True and {row["runs"] for row in one["power"]} == {budget.n_max}
