"""``mutants report --executor ray`` and ``check --executor ray`` on a local Ray instance started
here (``ray.init(num_cpus=2)``): the same verdicts as the local executor for the same seed.
Skipped with one line when the ray extra is not installed (``pip install -e '.[ray]'``).

On Ray each case enumeration of a round subject is its own task (specverify.interfaces.round.units) and the
subject's task replays them with its seeded detectors run in order, as in a local worker:
verdicts at fixed seeds and a false-fail rate of 1e-6 are deterministic (a look's runs are
bounded by time, so an exact subject's p-values may differ on a loaded machine, not its verdict).
"""

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

from specverify.mutants import report  # noqa: E402
from specverify.surface import check_run as checker  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ("ratio/inverted", "control/unknown-draft-probs")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}}
    )
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
    print(f"\n{len(items)} subjects, quick budget: local (2 workers) {t1 - t0:.1f} s, ray (num_cpus=2) {t2 - t1:.1f} s")
    assert [(r.id, r.status, r.killed_by) for r in there] == [(r.id, r.status, r.killed_by) for r in here]
    assert all(r.ok for r in there)
    # the statistics agree too where no time limit cut a look short (the mutants stop at their
    # first finding, at 500 runs, on both); an exact subject's runs per look are bounded by time
    for a, b in zip(here, there):
        if a.status == report.Status.KILLED:
            assert (a.exact_tv, a.samples_to_detect) == (b.exact_tv, b.samples_to_detect)


def test_check_of_several_targets_on_ray(local_ray):
    from specverify.surface.request import CheckRequest

    request = CheckRequest.of(budget="quick", seed=0)
    calls = [("specverify:speculative_step", request), ("specverify.mutants.catalogue:no_verification", request)]
    from specverify.battery.executors import ray_map

    outcomes = ray_map(
        checker.check_target,
        calls,
        "ray",  # as the CLI: with per-case units
        units=[checker.target_units(t, r) for t, r in calls],
    )
    assert [(s, r["exact"]) for s, r in outcomes] == [("ok", True), ("ok", False)]
    assert outcomes[1][1]["counterexample"]["vocab_size"] == 2


def test_the_cli_starts_its_own_local_ray():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specverify",
            "check",
            "specverify:speculative_step",
            "--budget",
            "quick",
            "--json",
            "--executor",
            "ray",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["exact"] is True


def compared(result) -> dict:
    """A BatteryResult's dict without the wall-clock seconds and the subject's printed output."""
    d = result.to_dict()
    d.pop("seconds"), d.pop("output")
    return d


def battery_dict(mutant_id: str, budget, seed: int, stop_on_first: bool, *got) -> dict:
    """A Ray task: the subject's battery with its units (``got``) replayed."""
    from specverify.interfaces.round import battery as round_interface
    from specverify.interfaces.round import units

    return compared(
        round_interface.run_battery(
            report.subject_fn(mutant_id), budget, seed, stop_on_first=stop_on_first, prefetched=units.prefetched(got)
        )
    )


SPLIT_SUBJECTS = (
    ("control/unknown-draft-probs", "exact"),
    ("ratio/inverted", "biased"),
    ("bonus/no-bonus-token", "fewer-tokens"),
)


def test_the_per_case_split_on_ray_gives_the_local_battery_results(local_ray):
    from specverify.battery.executors import ray_map
    from specverify.interfaces.round import battery as round_interface
    from specverify.interfaces.round import cases as round_cases
    from specverify.interfaces.round import units

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # tests/ is not importable there
    b = replace(round_cases.get_budget("quick"), **report.REPORT_OVERRIDES)
    calls, unit_lists, here = [], [], []
    for mutant_id, effect in SPLIT_SUBJECTS:
        stop = report.stops_on_first(effect)
        calls.append((mutant_id, b, 5, stop))
        unit_lists.append(
            [
                (units.enumeration_unit, (partial(report.subject_fn, mutant_id), b, lengths, i))
                for lengths, i in units.enumeration_calls(b, stop)
            ]
        )
        here.append(compared(round_interface.run_battery(report.subject_fn(mutant_id), b, 5, stop_on_first=stop)))
    there = ray_map(battery_dict, calls, "ray", units=unit_lists)
    assert [d["exact"] for d in there] == [True, False, True]
    assert there[2]["efficient"] is False  # the fewer-tokens mutant: killed by tokens per round
    whole = 0
    for a, b_ in zip(here, there):
        assert (a["exact"], a["efficient"], a["findings"]) == (b_["exact"], b_["efficient"], b_["findings"])
        if not any("time limit" in line for line in a["ran"] + b_["ran"]):
            assert a == b_  # the same samples per look, the same decisions, the same log
            whole += 1
    assert whole >= 2, "looks were cut by time on both sides: the machine is too loaded to compare"


def test_the_report_cli_on_ray_gives_the_local_rows():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    rows = {}
    for executor in ("local", "ray"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "specverify.mutants",
                "report",
                "--mutant",
                "bonus/no-bonus-token",
                "--budget",
                "quick",
                "--seed",
                "1",
                "--format",
                "json",
                "--executor",
                executor,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        rows[executor] = [(r["id"], r["status"], r["killed_by"]) for r in json.loads(proc.stdout)["rows"]]
    assert rows["ray"] == rows["local"]
    assert [s for _, s, _ in rows["ray"]] == ["passed", "killed", "killed"]
