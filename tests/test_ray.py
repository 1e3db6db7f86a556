"""The Ray executor (specverify.battery.executors): ``mutants report --executor ray`` and ``check
--executor ray`` give the local executor's verdicts for the same seed.

Every test that takes ``local_ray`` runs twice where Ray is installed: on ``tests/fake_ray.py``
(a stand-in ``ray`` module on forked worker processes, always: the CPU suite runs the executor's
own code, connect, submit, wait, get, cancel and shut down, without the ray extra) and on a local
Ray instance started here (``ray.init(num_cpus=2)``; ``tox -e ray``). The tests that start a
``specverify`` process need the real Ray, and skip with one line without the extra; their fake
twins run the same command lines in this process.

On Ray each case enumeration of a round subject is its own task (specverify.interfaces.round.units)
and the subject's task replays them with its seeded detectors run in order, as in a local worker:
verdicts, findings and the run log at fixed seeds are deterministic (no clock decides how many
runs a look draws), so the two executors agree line for line.
"""

import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import fake_ray
import pytest

from specverify.battery import executors
from specverify.mutants import report

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ("ratio/inverted", "control/unknown-draft-probs")
HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="the ray extra is not installed (pip install -e '.[ray]')")


@pytest.fixture(scope="module", params=["fake", "ray"] if HAS_RAY else ["fake"])
def local_ray(request):
    """An initialised ``ray`` module: the fake in ``sys.modules`` for the module's tests, or the real one."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("RAY_ADDRESS", raising=False)
        if request.param == "fake":
            ray = fake_ray.install(mp)
        else:
            import ray
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
        )
        yield ray
        ray.shutdown()


@pytest.fixture
def fake(monkeypatch):
    """The fake ``ray`` module, not initialised: ``ray_map`` starts it and shuts it down itself."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return fake_ray.install(monkeypatch)


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
    # the statistics agree too: a look's runs are fixed by (subject, seed, budget)
    assert [(r.exact_tv, r.samples_to_detect) for r in there] == [(r.exact_tv, r.samples_to_detect) for r in here]


def check_lines(argv: list[str], capsys) -> tuple[int, list[dict]]:
    """``specverify check ARGV --json`` run in this process: its exit code and its reports."""
    from specverify import cli

    code = cli.main(["check", *argv, "--json"])
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")]


TARGETS = ["specverify:speculative_step", "specverify.mutants.catalogue:no_verification"]


def test_check_of_several_targets_on_ray(fake, capsys):
    """``check T1 T2 --executor ray`` as the command line runs it: ray_map starts the instance,
    one task per case enumeration and one per target, each target's units handed to it, and
    shuts it down; the reports are the local executor's, in order."""
    code, there = check_lines([*TARGETS, "--budget", "quick", "--executor", "ray"], capsys)
    assert [r["exact"] for r in there] == [True, False] and code == 1
    assert there[1]["counterexample"]["vocab_size"] == 2
    started = [what for what, _ in fake.calls if what in ("init", "shutdown")]
    assert started == ["init", "shutdown"] and not fake.is_initialized()
    tasks = [opts for what, opts in fake.calls if what == "task"]
    assert [t["fn"] for t in tasks].count("check_target") == 2
    assert len(tasks) > 2 and all(t["num_cpus"] == 1 and t["max_retries"] == 0 for t in tasks)
    code_here, here = check_lines([*TARGETS, "--budget", "quick"], capsys)
    assert code_here == code
    assert [without_seconds(r) for r in there] == [without_seconds(r) for r in here]


def without_seconds(report_dict: dict) -> dict:
    """A check report without what the clock or the machine decides (seconds, the time forecast)."""
    return {key: value for key, value in report_dict.items() if "second" not in key and key not in ("output",)}


@needs_ray
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

    if hasattr(local_ray, "cloudpickle"):  # real Ray: tests/ is not importable in its workers
        local_ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
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
    assert there == here  # the same samples per look, the same decisions, the same log


def add(a: int, b: int, *units: int) -> tuple[int, tuple[int, ...]]:
    """A task: its call's sum and the results of its units, as they arrived."""
    return a + b, units


def square(x: int) -> int:
    return x * x


def test_ray_map_runs_each_call_after_its_units_and_hands_it_their_results(fake):
    done = []
    got = executors.ray_map(
        add,
        [(1, 2), (3, 4), (5, 6)],
        "ray",
        num_cpus=3,
        on_done=lambda: done.append(1),
        units=[[(square, (2,)), (square, (3,))], [], [(square, (4,))]],
    )
    assert got == [(3, (4, 9)), (7, ()), (11, (16,))]
    assert len(done) == 3
    init = fake.calls[0]
    assert init[0] == "init" and init[1]["num_cpus"] == 3 and init[1]["include_dashboard"] is False
    assert [opts["fn"] for what, opts in fake.calls if what == "task"] == ["square"] * 3 + ["add"] * 3
    assert fake.calls[-1] == ("shutdown", None) and not fake.is_initialized()


def test_ray_map_uses_an_instance_already_started_and_leaves_it_running(fake):
    fake.init(num_cpus=2)
    try:
        assert executors.ray_map(add, [(1, 1)], "ray") == [(2, ())]
        assert fake.is_initialized() and ("shutdown", None) not in fake.calls
    finally:
        fake.shutdown()


def interrupt():
    raise KeyboardInterrupt


def test_ctrl_c_in_ray_map_cancels_every_task_and_shuts_down(fake):
    with pytest.raises(KeyboardInterrupt):
        executors.ray_map(add, [(1, 2), (3, 4)], "ray", on_done=interrupt, units=[[(square, (2,))], []])
    assert [name for what, name in fake.calls if what == "cancel"] == ["square", "add", "add"]
    assert fake.calls[-1] == ("shutdown", None)


def test_a_ray_that_cannot_start_is_one_line(fake, monkeypatch):
    def refuses(**kwargs):
        raise RuntimeError("no resources\nand a traceback Ray would print")

    monkeypatch.setattr(fake, "init", refuses)
    with pytest.raises(executors.ExecutorUnavailable) as caught:
        executors.ray_map(add, [(1, 2)], "ray")
    assert str(caught.value) == "--executor ray: Ray could not start or connect (RuntimeError: no resources)"


def test_a_task_error_reaches_the_caller(fake):
    with pytest.raises(ZeroDivisionError):
        executors.ray_map(divmod, [(1, 0)], "ray")
    assert fake.calls[-1] == ("shutdown", None)


def report_rows(executor: str, capsys) -> list[tuple]:
    """``mutants report --mutant bonus/no-bonus-token --format json`` in this process: its rows."""
    from specverify.mutants import command

    argv = ["report", "--mutant", "bonus/no-bonus-token", "--budget", "quick", "--seed", "1", "--format", "json"]
    assert command.main([*argv, "--executor", executor]) == 0
    return [(r["id"], r["status"], r["killed_by"]) for r in json.loads(capsys.readouterr().out)["rows"]]


def test_the_report_command_on_the_fake_ray_gives_the_local_rows(fake, capsys):
    there = report_rows("ray", capsys)
    assert [what for what, _ in fake.calls if what in ("init", "shutdown")] == ["init", "shutdown"]
    assert there == report_rows("local", capsys)
    assert [s for _, s, _ in there] == ["passed", "killed", "killed"]


@needs_ray
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
