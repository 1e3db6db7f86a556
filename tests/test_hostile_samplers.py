"""``check`` against samplers that exit, hang, print, dawdle, use another random source or edit
their inputs: each gets the right verdict and exit code, and ``--json`` stays one JSON object.

Verdicts: exit 0 exact, 1 not exact (a finding), 2 usage error, 3 inconclusive. Statistical
false-fail rate: the battery's 1e-6 per run at fixed seeds, so each verdict here is deterministic
except where a test says it depends on time (the slow sampler: any machine gives it too few runs).
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_probes import processes_with

import specverify
from specverify.interfaces.round import cases as round_cases

ROOT = Path(__file__).resolve().parents[1]

SUBJECTS = textwrap.dedent(
    """
    import itertools, os, random, sys, time
    import numpy as np
    from specverify import speculative_step

    print("noise at import")

    def calls_sys_exit(p_fn, q_fn, prefix, k, rng):
        sys.exit(0)

    def calls_os_exit(p_fn, q_fn, prefix, k, rng):
        os._exit(0)

    def exits_with_message(p_fn, q_fn, prefix, k, rng):
        raise SystemExit("sampler gave up")

    def raises_keyboard_interrupt(p_fn, q_fn, prefix, k, rng):
        raise KeyboardInterrupt

    def hangs_in_c(p_fn, q_fn, prefix, k, rng):
        return [sum(itertools.repeat(0))]

    def swallows_the_timeout(p_fn, q_fn, prefix, k, rng):
        while True:
            try:
                time.sleep(1000)
            except Exception:
                continue

    def prints(p_fn, q_fn, prefix, k, rng):
        print("{not json", flush=True)
        print("to stderr", file=sys.stderr)
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def global_numpy_rng(p_fn, q_fn, prefix, k, rng):
        return speculative_step(p_fn, q_fn, prefix, k, np.random.default_rng(np.random.randint(2**31)))

    def global_random(p_fn, q_fn, prefix, k, rng):
        return speculative_step(p_fn, q_fn, prefix, k, np.random.default_rng(random.getrandbits(63)))

    def slow_reseeded(p_fn, q_fn, prefix, k, rng):  # not enumerable: straight to the sampled runs
        time.sleep(0.05)
        return speculative_step(p_fn, q_fn, prefix, k, np.random.default_rng(int(rng.integers(2**63))))

    def unlocks_the_table(p_fn, q_fn, prefix, k, rng):
        p = p_fn(tuple(prefix))
        table = p.base if p.base is not None else p
        table.setflags(write=True)
        table[...] = 1.0 / table.size  # make the target uniform, then sample from it exactly
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    CALLS = [0]

    def exits_mid_run(p_fn, q_fn, prefix, k, rng):
        CALLS[0] += 1
        if CALLS[0] > 500:  # past the contract stage, inside exact enumeration
            os._exit(3)
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def returns_a_dict(p_fn, q_fn, prefix, k, rng):
        return {0: 1}

    def returns_a_set(p_fn, q_fn, prefix, k, rng):
        return set(speculative_step(p_fn, q_fn, prefix, k, rng))
    """
)


@pytest.fixture(scope="module")
def subjects(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "hostile.py"
    path.write_text(SUBJECTS)
    return str(path)


def check(target, *args, timeout=600):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "specverify", "check", target, "--json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    report = json.loads(proc.stdout) if proc.returncode != 2 else None  # --json parses
    return proc.returncode, report, proc.stderr


def contract_message(report) -> str:
    found = [f for f in report["findings"] if f["kind"] == "contract"]
    assert found, report["findings"]
    return found[0]["message"]


@pytest.mark.parametrize(
    "name, words",
    [
        ("calls_sys_exit", "sys.exit(0)"),
        ("calls_os_exit", "exited with code 0"),
        ("exits_with_message", "sampler gave up"),
        ("raises_keyboard_interrupt", "KeyboardInterrupt"),
        ("exits_mid_run", "exited with code 3"),
        ("returns_a_dict", "returned dict"),
        ("returns_a_set", "returned set"),
    ],
)
def test_exits_and_junk_are_contract_findings(subjects, name, words):
    code, report, _ = check(f"{subjects}:{name}", "--budget", "quick")
    assert code == 1 and report["exact"] is False
    assert words in contract_message(report)


@pytest.mark.parametrize("name", ["hangs_in_c", "swallows_the_timeout"])
def test_hangs_are_killed_and_reported(subjects, name):
    start = time.monotonic()
    code, report, _ = check(f"{subjects}:{name}", "--budget", "quick", timeout=120)
    assert code == 1 and report["exact"] is False
    assert "did not return within" in contract_message(report)
    assert time.monotonic() - start < 60  # the first call is killed after its limit, not later


def test_output_of_the_sampler_is_captured_not_mixed_into_json(subjects):
    code, report, _ = check(f"{subjects}:prints", "--budget", "quick")
    assert code == 0 and report["exact"] is True and report["findings"] == []
    assert "noise at import" in report["output"] and "{not json" in report["output"]
    assert "to stderr" in report["output"]


@pytest.mark.parametrize("name", ["global_numpy_rng", "global_random"])
def test_another_random_source_is_inconclusive_never_not_exact(subjects, name):
    code, report, _ = check(f"{subjects}:{name}", "--budget", "quick")
    assert code == 3 and report["exact"] is None
    assert [f["check"] for f in report["findings"]] == ["rng"]
    assert "does not draw from rng" in report["findings"][0]["message"]
    # no enumerated distribution it did not follow: enumeration skipped, statistics judged it
    assert report["exact_tv_max"] is None
    assert any(line.startswith("exact: skipped") for line in report["ran"])
    assert any(line.startswith("chi-square:") and "passed" in line for line in report["ran"])


def test_a_slow_sampler_stopped_by_the_time_limit_says_so_and_is_inconclusive(subjects):
    # 0.05 s per call is well inside the 2 s per-call guard: never a finding. The budget plans
    # every run whatever the pace; only the user's time limit (4 s here, where the quick budget's
    # two cases would need minutes at this pace) stops it, and the report says after how many of
    # the planned runs. The API is what the command runs. The first forecast's counts of the
    # reference rule (per code, kept on disk: seconds once, round.first_forecast) are counted
    # first, so that the limit times this check and not a count a cold cache would add to it.
    from specverify.interfaces.round import battery as round_battery
    from specverify.interfaces.round.first_forecast import enumeration_calls

    for name in ("quick", "standard", "thorough"):
        other = round_cases.get_budget(name)
        swept = round_battery.sweep_cases(other, 0) + round_battery.round_corner_cases(other)
        enumeration_calls(
            other,
            round_battery.battery(other) + round_battery.generated_cases(other, 0) + swept,
            {c.name for c in swept},
        )
    budget = dataclasses.replace(
        round_cases.BUDGETS["quick"],
        cases=(0, 4),
        generated=0,
        engine_vocab=0,
        sweep_context=0,
        sweep_k=0,
        contract_calls=3,
    )
    result = specverify.check(f"{subjects}:slow_reseeded", budget=budget, time_limit=4.0, counterexample=False)
    report = result.to_dict()
    assert result.exit_code == 3 and report["exact"] is None and report["findings"] == []
    assert report["timed_out"] is True
    stopped = [s for s in report["shortfalls"] if s.startswith("stopped by the time limit after ")]
    assert len(stopped) == 1 and stopped[0] in report["ran"], report["shortfalls"]
    done, planned = (int(x.replace(",", "")) for x in stopped[0].split("after ")[1].split(" runs")[0].split(" of "))
    assert 0 <= done < planned


def test_unlocking_the_table_is_a_contract_finding_and_the_reference_stays_private(subjects):
    code, report, _ = check(f"{subjects}:unlocks_the_table", "--budget", "quick")
    assert code == 1 and report["exact"] is False
    assert "wrote into an array p_fn returned" in contract_message(report)


@pytest.mark.parametrize("how", ["sys.exit(0)", "os._exit(0)"])
def test_exit_at_import_is_a_usage_error_not_silence(tmp_path, how):
    path = tmp_path / "exits.py"
    path.write_text(f"import os, sys\n{how}\ndef f(p_fn, q_fn, prefix, k, rng):\n    return [0]\n")
    code, _, err = check(f"{path}:f")
    assert code == 2 and "TARGET" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, words", [(["--seed", "-1"], "must be >= 0"), (["--seed", "x"], "not int")])
def test_check_refuses_a_bad_seed(args, words):
    code, _, err = check("specverify:speculative_step", *args)
    assert code == 2 and words in err


# --------------------------------------------------------------------------- the report's CLI


def report_cli(*args, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "specverify.mutants", "report", *args], capture_output=True, text=True, env=env, **kwargs
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["--seed", "-1"], "--seed: must be >= 0"),
        (["--timeout", "-5"], "--timeout: must be > 0"),
        (["--timeout", "0"], "--timeout: must be > 0"),
        (["--out", "/no/such/folder/r.json"], "does not exist"),
    ],
)
def test_report_usage_errors(args, words):
    proc = report_cli(*args, timeout=60)
    assert proc.returncode == 2 and words in proc.stderr and proc.stdout == ""


def test_report_file_follows_the_umask(tmp_path):
    out = tmp_path / "r.csv"
    proc = report_cli("--mutant", "ratio/inverted", "--format", "csv", "--out", str(out), "--workers", "1", timeout=300)
    assert proc.returncode == 0
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list processes")
def test_ctrl_c_stops_the_report_and_its_workers_within_2_s(tmp_path):
    """The workers are killed (SIGKILL runs no finalizer): the report deletes their subjects'
    capture files itself, so none is left in TMPDIR."""
    marker = "424242"  # a seed no other process uses: marks the report's processes
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "specverify.mutants", "report", "--seed", marker],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while len(processes_with(marker)) < 3 and time.monotonic() < deadline:  # main + 2 workers
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - start < 2.0
    assert proc.returncode == 130 and len(err.strip().splitlines()) == 1 and "interrupted" in err
    time.sleep(0.5)
    assert processes_with(marker) == []
    assert sorted(p.name for p in tmp_path.glob("specverify-subject-*")) == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_limit_whose_alarm_lands_in_a_finalizer_still_stops_the_body():
    """Python ignores an exception raised in a ``__del__`` (or a garbage-collector callback), where
    a limit's alarm may land: the limit raises again until its body has stopped. Here the first
    alarm lands, for certain, in a finalizer that outlasts the limit; the body would run 5 s."""
    from specverify.battery.guards import GuardStopped, time_limit

    class SlowToFinalize:
        def __del__(self):
            end = time.monotonic() + 0.2
            while time.monotonic() < end:
                pass

    start = time.monotonic()
    with pytest.raises(GuardStopped, match="body did not return within 0.05 s"):
        with time_limit(0.05, "body", GuardStopped):
            SlowToFinalize()  # finalized at once, holding the alarm for 0.2 s
            while time.monotonic() - start < 5.0:
                pass
    assert time.monotonic() - start < 2.0


def _exact_stage(subject, budget, case):
    """The exact detector alone on ``case`` through the battery's own calls (the subject in its
    process, the enumeration under its guards): the result, and the seconds it took."""
    from specverify.battery.subject_calls import run_in_subject
    from specverify.interfaces.round.battery import RoundBattery

    start = time.monotonic()
    result = run_in_subject(
        subject, lambda handle: RoundBattery(handle, budget, 0, None), lambda r: r.exact([case], False)
    )
    return result, time.monotonic() - start


def _slowed_step(p_fn, q_fn, prefix, k, rng):
    time.sleep(0.01)
    return specverify.speculative_step(p_fn, q_fn, prefix, k, rng)


def test_an_enumeration_slower_than_its_guard_is_never_cut_while_it_progresses(monkeypatch):
    """Each call sleeps 10 ms (well inside its 0.5 s limit): 117 paths take over 1.17 s, more than
    twice the idle guard (0.5 + 0.01 + 0.05 s). The enumeration is followed to its end and gives
    the unslowed run's law, TV for TV."""
    from specverify.battery import runner

    monkeypatch.setattr(runner, "KILL_MARGIN_S", 0.05)
    budget = dataclasses.replace(round_cases.get_budget("quick"), call_limit_s=0.5, enumeration_idle_s=0.01)
    case = round_cases.all_cases()[0]  # handout toy chain, k=2, 2 tokens: 117 paths
    slowed, seconds = _exact_stage(_slowed_step, budget, case)
    plain, _ = _exact_stage(specverify.speculative_step, budget, case)
    assert seconds > 2 * (0.5 + 0.01 + 0.05)
    assert [line for line in slowed.ran if line.startswith(f"exact: {case.name}: TV")] == [
        line for line in plain.ran if line.startswith(f"exact: {case.name}: TV")
    ]
    assert slowed.ran == plain.ran and slowed.exact_tv_max == plain.exact_tv_max
    assert slowed.exact is plain.exact is True and not slowed.shortfalls


HANGS_WHEN_ENUMERATED = textwrap.dedent(
    """
    import itertools, os
    import numpy as np
    from specverify import speculative_step

    def enumerated(rng):  # the enumerator's rng, not a Generator: hang only there
        return not isinstance(rng, np.random.Generator)

    def in_python(p_fn, q_fn, prefix, k, rng):
        while enumerated(rng):
            pass
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def swallowing(p_fn, q_fn, prefix, k, rng):
        while enumerated(rng):
            try:
                while True:
                    pass
            except BaseException:
                continue
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def in_c(p_fn, q_fn, prefix, k, rng):
        if enumerated(rng):
            sum(itertools.repeat(0))
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def reading_a_pipe(p_fn, q_fn, prefix, k, rng):
        if enumerated(rng):
            os.read(os.pipe()[0], 1)
        return speculative_step(p_fn, q_fn, prefix, k, rng)
    """
)


@pytest.mark.parametrize("name", ["in_python", "swallowing", "in_c", "reading_a_pipe"])
def test_a_hang_inside_an_enumeration_is_stopped_by_a_guard_and_not_judged(tmp_path, monkeypatch, name):
    """A call that never returns, interruptible or not, is stopped: at its own limit (SIGALRM) or by
    the idle guard (no call returned for 0.3 + 0.01 + 0.05 s); the case is not judged: no finding,
    no TV, the verdict inconclusive."""
    import importlib.util

    from specverify.battery import runner

    monkeypatch.setattr(runner, "KILL_MARGIN_S", 0.05)
    path = tmp_path / "hangs_when_enumerated.py"
    path.write_text(HANGS_WHEN_ENUMERATED)
    spec = importlib.util.spec_from_file_location("hangs_when_enumerated", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    budget = dataclasses.replace(round_cases.get_budget("quick"), call_limit_s=0.3, enumeration_idle_s=0.01)
    case = round_cases.all_cases()[0]
    result, seconds = _exact_stage(getattr(module, name), budget, case)
    assert result.findings == [] and result.exact_tv_max is None
    stopped = [line for line in result.ran if line.startswith(f"exact: {case.name}: stopped by a guard")]
    assert stopped and any("stopped by a guard" in s for s in result.shortfalls), result.ran
    assert result.exact is None  # INCONCLUSIVE
    assert seconds < 10.0


_SLOW_CALL = {"count": 0}


def _one_slow_sampled_call(p_fn, q_fn, prefix, k, rng):
    """The reference rule whose third call sleeps 0.4 s (past a 0.1 s call limit)."""
    _SLOW_CALL["count"] += 1
    if _SLOW_CALL["count"] == 3:
        time.sleep(0.4)
    return specverify.speculative_step(p_fn, q_fn, prefix, k, rng)


def _one_slow_batch(p_fn, q_fn, prefixes, k, rng):
    """The reference rule's rounds for a batch; the first batch sleeps 1 s (past its limit)."""
    _SLOW_CALL["count"] += 1
    if _SLOW_CALL["count"] == 1:
        time.sleep(1.0)
    return [specverify.speculative_step(p_fn, q_fn, prefix, k, rng) for prefix in prefixes]


def _batched_with_one_slow_batch(p_fn, q_fn, prefix, k, rng):
    return specverify.speculative_step(p_fn, q_fn, prefix, k, rng)


_batched_with_one_slow_batch.specverify_rounds = _one_slow_batch


@pytest.mark.parametrize(
    "subject, call_limit_s",
    [(_one_slow_sampled_call, 0.1), (_batched_with_one_slow_batch, 0.0005)],
    ids=["one round per call", "a batch of rounds per call"],
)
def test_a_sampled_call_past_its_limit_is_stopped_by_a_guard_not_a_finding(subject, call_limit_s):
    """A call slower than ``call_limit_s`` in the chi-square's sampled runs (one round, or a
    declared batch past its limit per round) is no evidence of a wrong law: the case is not
    judged ("stopped by a guard" in the report), no finding, the verdict INCONCLUSIVE, as the
    loop's sampled runs and the enumerations treat it. Deterministic: no statistic is judged."""
    from specverify.battery.subject_calls import run_in_subject
    from specverify.interfaces.round.battery import RoundBattery

    budget = dataclasses.replace(round_cases.get_budget("quick"), call_limit_s=call_limit_s)
    case = round_cases.all_cases()[0]  # the handout's toy chain, k=2, 2 tokens
    result = run_in_subject(
        subject,
        lambda handle: RoundBattery(handle, budget, 0, None),
        lambda battery: battery.statistics([case], [], budget.false_fail_rate),
    )
    assert result.findings == [] and result.power == [], result.ran
    stopped = [s for s in result.shortfalls if s.startswith(f"chi-square: {case.name}: stopped by a guard: ")]
    assert stopped and "did not return within" in stopped[0] and stopped[0].endswith("; not judged"), result.ran
    assert stopped[0] in result.ran
    assert result.exact is None  # INCONCLUSIVE


def _hangs_on_its_third_call(p_fn, q_fn, prefix, k, rng):
    _SLOW_CALL["count"] += 1
    if _SLOW_CALL["count"] == 3:
        time.sleep(60)
    return specverify.speculative_step(p_fn, q_fn, prefix, k, rng)


def test_a_sampled_call_that_never_returns_is_killed_and_stopped_by_a_guard(monkeypatch):
    """A sampled run's call that never returns: its block's process is killed at the block's kill
    limit (made 1 s here, ``sample_guard_s``), and the case is "stopped by a guard", not judged,
    no contract finding, as a call past its limit is."""
    from specverify.battery import runner
    from specverify.battery.subject_calls import run_in_subject
    from specverify.interfaces.round import sampling
    from specverify.interfaces.round.battery import RoundBattery

    monkeypatch.setattr(runner, "KILL_MARGIN_S", 0.05)
    monkeypatch.setattr(sampling, "sample_guard_s", lambda case, n, budget: 1.0)
    budget = round_cases.get_budget("quick")
    case = round_cases.all_cases()[0]
    start = time.monotonic()
    result = run_in_subject(
        _hangs_on_its_third_call,
        lambda handle: RoundBattery(handle, budget, 0, None),
        lambda battery: battery.statistics([case], [], budget.false_fail_rate),
    )
    assert result.findings == [] and result.exact is None, result.ran
    stopped = [s for s in result.shortfalls if s.startswith(f"chi-square: {case.name}: stopped by a guard: ")]
    assert stopped and "its process was killed" in stopped[0], result.shortfalls
    assert time.monotonic() - start < 30.0
