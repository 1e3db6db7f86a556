"""What a hostile subject, user or machine does to the files specverify writes and to the
processes it starts: the writer never replaces a device, a FIFO or a folder, writes
through a symbolic link, never over the subject's own source; no process the subject started, no
capture file is left behind; the subject cannot signal the checker; Ctrl-C keeps the verdicts
already reached; lone surrogates and a C locale do not crash the reports.

Every verdict here is a contract finding or an exact sampler on the quick budget at the default
seed (deterministic); nothing waits on a race: a test that waits polls for a state with a deadline.
"""

import itertools
import json
import multiprocessing
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from process_probes import processes_with

import specverify
from specverify.battery import capture, runner
from specverify.battery.guards import call_subject
from specverify.common import files
from specverify.common.validation import check_distinct_files, check_writable_file
from specverify.surface import junit

ROOT = Path(__file__).resolve().parents[1]
HAS_PROC = Path("/proc/self/cmdline").exists()
needs_proc = pytest.mark.skipif(not HAS_PROC, reason="needs /proc to list processes")

SUBJECTS = textwrap.dedent(
    """
    import os, signal
    from specverify import speculative_step

    def junk(p_fn, q_fn, prefix, k, rng):
        return {0: 1}

    def sigint_the_checker(p_fn, q_fn, prefix, k, rng):
        os.kill(os.getppid(), signal.SIGINT)
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def sigterm_the_checker(p_fn, q_fn, prefix, k, rng):
        os.kill(os.getppid(), signal.SIGTERM)
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def sigterm_the_checkers_group(p_fn, q_fn, prefix, k, rng):
        os.killpg(os.getpgid(os.getppid()), signal.SIGTERM)
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def raises_a_lone_surrogate(p_fn, q_fn, prefix, k, rng):
        raise ValueError("bad \\ud800")

    def prints_an_accent(p_fn, q_fn, prefix, k, rng):
        print("caf\\u00e9")
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def starts_sleep_then_dawdles(p_fn, q_fn, prefix, k, rng):
        import subprocess, time
        marker = os.environ.get("SPECVERIFY_TEST_MARKER")
        if marker and not os.path.exists(marker + ".started"):
            subprocess.Popen(["sleep", os.path.basename(marker)])
            open(marker + ".started", "w").close()
        time.sleep(0.2)
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def _forge(payload):
        import stat, struct
        for fd in range(3, 64):  # the result pipe is a socket the subject's process inherited
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, struct.pack("!i", len(payload)) + payload)
            except OSError:
                pass

    def forges_garbage(p_fn, q_fn, prefix, k, rng):
        _forge(b"hello")
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def forges_a_pickle_of_the_wrong_shape(p_fn, q_fn, prefix, k, rng):
        import pickle
        _forge(pickle.dumps(42))
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    def forges_an_endless_message(p_fn, q_fn, prefix, k, rng):
        import struct
        for fd in range(3, 64):
            try:
                if __import__("stat").S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, struct.pack("!i", 0x7FFFFFF0) + b"x")  # promises 2 GiB, sends 1 byte
            except OSError:
                pass
        import time
        time.sleep(600)
    """
)


@pytest.fixture(scope="module")
def subjects(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile_files") / "subjects.py"
    path.write_text(SUBJECTS)
    return str(path)


def run_check(*args, env=None, tmpdir=None, timeout=300):
    """``python -m specverify check ARGS`` in its own session (a signal that escapes the guard
    cannot reach pytest); ``tmpdir``: its TMPDIR, where its capture files go."""
    env = {
        k: v for k, v in {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}.items() if v is not None
    }  # None: unset
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return subprocess.run(
        [sys.executable, "-m", "specverify", "check", *args],
        capture_output=True,
        timeout=timeout,
        env=env,
        start_new_session=True,
    )


def captures_in(folder) -> list[str]:
    return sorted(p.name for p in Path(folder).glob("specverify-subject-*"))


def gone_within(marker: str, seconds: float = 10.0) -> list[int]:
    """The processes with ``marker`` still there after ``seconds`` (a SIGKILLed process takes a
    moment to disappear from /proc): polls, returns early when none is left."""
    deadline = time.monotonic() + seconds
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def marker_seconds(tag: int) -> str:
    """A `sleep` argument no other process uses: 300.<pid><tag>."""
    return f"300.{os.getpid()}{tag}"


# --------------------------------------------------------------------------- 1. the writer


def test_writer_leaves_a_fifo_and_a_folder_as_they_were(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    for path, words in ((fifo, "a FIFO"), (folder, "a folder")):
        with pytest.raises(files.NotARegularFile, match=words):
            files.write_atomically(path, "report\n")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_ISDIR(os.lstat(folder).st_mode)
    assert list(folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "folder"]  # no temporary left
    # the CLIs' path: one line, exit 2, the node untouched
    assert files.write_or_report(fifo, "report\n", "test: --out") == 2
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("kind", ["device", "fifo", "folder"])
def test_writable_file_argument_refuses_what_is_not_a_regular_file(tmp_path, kind):
    if kind == "device":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full")
        path, words = "/dev/full", "is a device"
    elif kind == "fifo":
        path, words = tmp_path / "fifo", "is a FIFO"
        os.mkfifo(path)
    else:
        path, words = tmp_path, "is a folder"
    with pytest.raises(ValueError, match=words):
        check_writable_file("--junit-xml", path)


def test_writer_writes_through_a_symbolic_link_atomically(tmp_path):
    real_dir, link_dir = tmp_path / "real", tmp_path / "links"
    real_dir.mkdir()
    link_dir.mkdir()
    target = real_dir / "report.xml"
    target.write_text("old\n")
    link = link_dir / "report.xml"
    link.symlink_to(target)
    before = target.stat().st_ino
    files.write_atomically(link, "new \ud800\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"new \\ud800\n"  # a lone surrogate written as its escape
    assert target.stat().st_ino != before  # renamed onto the target, not rewritten in place
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert sorted(p.name for p in real_dir.iterdir()) == ["report.xml"]
    assert sorted(p.name for p in link_dir.iterdir()) == ["report.xml"]
    # a check through the link sees its target
    assert check_writable_file("--junit-xml", link) == str(link)


def test_the_same_file_twice_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    for a, b in (("r.json", str(tmp_path / "r.json")), ("real.json", "link.json"), ("./sub/../r.json", "r.json")):
        with pytest.raises(ValueError, match="--out and --junit-xml: both name"):
            check_distinct_files(out=a, junit_xml=b)
    check_distinct_files(out="a.json", junit_xml="b.xml", markdown=None)  # distinct: fine


def test_check_refuses_a_fifo_for_its_junit_xml(subjects, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = run_check(f"{subjects}:junk", "--budget", "quick", "--junit-xml", str(fifo), timeout=60)
    assert proc.returncode == 2 and b"a FIFO" in proc.stderr and proc.stdout == b""
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_check_refuses_to_write_its_junit_xml_over_the_subjects_source(subjects, tmp_path):
    source = Path(subjects)
    text = source.read_text()
    link = tmp_path / "link.py"
    link.symlink_to(source)
    relative = os.path.relpath(source)
    for junit_path in (str(source), relative, str(link)):
        proc = run_check(f"{subjects}:junk", "--budget", "quick", "--junit-xml", junit_path, timeout=60)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and "is the source of TARGET" in err, err
        assert len(err.strip().splitlines()) == 1 and proc.stdout == b""
    assert source.read_text() == text and link.is_symlink()


def test_check_writes_its_junit_xml_through_a_link(subjects, tmp_path):
    target = tmp_path / "real.xml"
    target.write_text("old")
    link = tmp_path / "link.xml"
    link.symlink_to(target)
    proc = run_check(f"{subjects}:junk", "--budget", "quick", "--junit-xml", str(link), "--json", timeout=120)
    assert proc.returncode == 1 and json.loads(proc.stdout)["exact"] is False
    assert link.is_symlink()
    case = ET.parse(target).getroot().find("testsuite/testcase")
    assert case.get("name").endswith(":junk") and case.find("failure") is not None


# --------------------------------------------------------------------------- 3-4. processes and files


def _spawn_sleep(subject, seconds: str) -> int:
    """A task (runs in the subject's process): starts `sleep SECONDS` and returns at once."""
    subprocess.Popen(["sleep", seconds], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return os.getpid()


def _fork_sleep(subject, seconds: str) -> int:
    """A task: os.fork, the child becomes `sleep SECONDS`."""
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp("sleep", ["sleep", seconds])
        finally:
            os._exit(1)
    return pid


def _spawn_sleep_and_hang(subject, seconds: str) -> None:
    _spawn_sleep(subject, seconds)
    while True:
        time.sleep(1)


def _print_and_exit(subject, code: int) -> None:
    print("last words", flush=True)
    os._exit(code)


def _identity(x):
    return x


def _wait_for(marker: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert processes_with(marker), f"sleep {marker} never started"


@needs_proc
@pytest.mark.parametrize("task", [_spawn_sleep, _fork_sleep], ids=["popen", "fork"])
def test_close_kills_what_the_subject_started_and_deletes_its_capture(task):
    seconds = marker_seconds(1 if task is _spawn_sleep else 2)
    handle = runner.Runner.for_callable(_identity).start()
    child = handle.call(task, seconds, limit=10.0)
    assert child != os.getpid()
    _wait_for(seconds)
    capture = handle.capture_path
    assert capture and os.path.exists(capture)
    handle.close()
    assert gone_within(seconds) == []
    assert not os.path.exists(capture) and handle.capture_path is None


@needs_proc
def test_a_killed_call_takes_the_subjects_children_with_it():
    seconds = marker_seconds(3)
    handle = runner.Runner.for_callable(_identity).start()
    try:
        with pytest.raises(runner.SubjectFailed, match="did not return within"):
            handle.call(_spawn_sleep_and_hang, seconds, limit=0.5)
        assert gone_within(seconds) == []
        assert handle.call(_identity, limit=10.0) is _identity  # a fresh process answers
    finally:
        handle.close()


def test_a_crashed_subject_keeps_its_output_until_close_then_leaves_no_file():
    handle = runner.Runner.for_callable(_identity).start()
    capture = handle.capture_path
    with pytest.raises(runner.SubjectFailed, match="exited with code 3"):
        handle.call(_print_and_exit, 3, limit=10.0)
    assert "last words" in handle.output_excerpt()
    handle.close()
    assert not os.path.exists(capture) and handle.output_excerpt() == ""


def _slow_call(_):
    time.sleep(0.05)


def _progress_then(subject, calls: int, then: str) -> int:
    """``calls`` subject calls of 50 ms each (each one progress), then ``then``: "return" the
    count, or hang, "c" in C (no bytecode runs: nothing but SIGKILL stops it) or "sleep" 1000 s."""
    for _ in range(calls):
        call_subject(_slow_call, (None,))
    if then == "c":
        sum(itertools.repeat(0))
    elif then == "sleep":
        time.sleep(1000)
    return calls


@pytest.mark.parametrize("hang", ["c", "sleep"])
def test_the_idle_guard_kills_a_task_that_stops_progressing(monkeypatch, hang):
    """Killed at about ``idle`` after its last subject call returned, long before its limit."""
    monkeypatch.setattr(runner, "KILL_MARGIN_S", 0.05)
    handle = runner.Runner.for_callable(_identity).start()
    try:
        start = time.monotonic()
        with pytest.raises(runner.Stalled, match=r"no call of the subject returned for 0\.35 s"):
            handle.call(_progress_then, 4, hang, limit=60.0, idle=0.3)
        assert 0.2 + 0.35 <= time.monotonic() - start < 10.0
        assert handle.call(_identity, limit=10.0) is _identity  # a fresh process answers
    finally:
        handle.close()


def test_the_idle_guard_spares_a_task_that_progresses_past_idle_in_total(monkeypatch):
    """30 calls of 50 ms (1.5 s in all) under an idle guard of 0.35 s: each call returns well
    within it, so the task runs to its end."""
    monkeypatch.setattr(runner, "KILL_MARGIN_S", 0.05)
    handle = runner.Runner.for_callable(_identity).start()
    try:
        start = time.monotonic()
        assert handle.call(_progress_then, 30, "return", limit=60.0, idle=0.3) == 30
        assert time.monotonic() - start >= 30 * 0.05
    finally:
        handle.close()


def test_a_limit_past_what_poll_accepts_is_waited_as_the_longest_wait():
    """An absolute limit derived from counts (paths x calls x a call's limit) can pass the
    24.8 days ``poll`` accepts; the call still returns (it crashed with OverflowError)."""
    handle = runner.Runner.for_callable(_identity).start()
    try:
        assert handle.call(_progress_then, 2, "return", limit=1e12, idle=5.0) == 2
        assert handle.call(_identity, limit=1e12) is _identity
    finally:
        handle.close()


PARENT_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from specverify.battery import capture, runner
    from test_hostile_files_and_processes import _identity, _spawn_sleep
    handle = runner.Runner.for_callable(_identity).start()
    handle.call(_spawn_sleep, {seconds!r}, limit=10.0)
    print("started", flush=True)
    {ending}
    """
)


@needs_proc
@pytest.mark.parametrize(
    "ending", ["pass", "raise KeyboardInterrupt", "del handle"], ids=["exit", "ctrl-c", "collected"]
)
def test_nothing_is_left_when_the_checker_ends_without_closing(tmp_path, ending):
    seconds = marker_seconds({"pass": 4, "raise KeyboardInterrupt": 5, "del handle": 6}[ending])
    script = PARENT_SCRIPT.format(tests=str(ROOT / "tests"), seconds=seconds, ending=ending)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, start_new_session=True
    )
    assert "started" in proc.stdout, proc.stderr
    assert gone_within(seconds) == []
    assert captures_in(tmp_path) == []


# --------------------------------------------------------------------------- 5. signals


@pytest.mark.parametrize("name", ["sigint_the_checker", "sigterm_the_checker", "sigterm_the_checkers_group"])
def test_the_subject_cannot_signal_the_checker(subjects, tmp_path, name):
    xml = tmp_path / "r.xml"
    proc = run_check(
        f"{subjects}:{name}", "--budget", "quick", "--json", "--junit-xml", str(xml), tmpdir=tmp_path, timeout=120
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["exact"] is False
    assert "may not signal the checker" in report["findings"][0]["message"]
    assert ET.parse(xml).getroot().find("testsuite/testcase/failure") is not None
    assert captures_in(tmp_path) == []


@pytest.mark.parametrize(
    "name, words",
    [
        ("forges_garbage", "not a reply of specverify's"),
        ("forges_a_pickle_of_the_wrong_shape", "not a reply of specverify's"),
        ("forges_an_endless_message", "did not arrive whole within"),
    ],
)
def test_bytes_forged_onto_the_result_pipe_are_a_contract_finding(subjects, tmp_path, name, words):
    """The subject writes onto the pipe its process answers on: garbage, a pickle that is not a
    reply, a length header promising 2 GiB that never come (read within the call's limit, 2 s at
    quick, then killed). Verdict False (exit 1) with a finding that says so, JSON and XML parse,
    no capture file left; never an UnpicklingError traceback or a hang."""
    xml = tmp_path / "r.xml"
    start = time.monotonic()
    proc = run_check(
        f"{subjects}:{name}", "--budget", "quick", "--json", "--junit-xml", str(xml), tmpdir=tmp_path, timeout=120
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["exact"] is False
    assert any(words in f["message"] for f in report["findings"] if f["kind"] == "contract"), report["findings"]
    assert ET.parse(xml).getroot().find("testsuite/testcase/failure") is not None
    assert captures_in(tmp_path) == []
    assert time.monotonic() - start < 60


@needs_proc
def test_sigterm_to_the_checker_stops_it_like_ctrl_c(subjects, tmp_path):
    """``kill -TERM`` on a running check: exit 143 with one line saying so, the subject's children
    killed and no capture file left (before, the process died at once and left both)."""
    seconds = marker_seconds(7)
    marker = tmp_path / seconds
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path), "SPECVERIFY_TEST_MARKER": str(marker)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "specverify", "check", f"{subjects}:starts_sleep_then_dawdles", "--budget", "quick"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        text=True,
    )
    _wait_for(seconds, 60)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert err.strip().splitlines() == ["specverify check: terminated (SIGTERM)"]
    assert gone_within(seconds) == []
    assert captures_in(tmp_path) == []


# --------------------------------------------------------------------------- 6. daemonic processes


def _check_in_a_pool_worker():
    return specverify.check(specverify.speculative_step, budget="quick").exit_code


def test_check_inside_a_pool_worker_says_why_it_cannot_run():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        with pytest.raises(RuntimeError, match="cannot run inside a daemonic process") as info:
            pool.apply(_check_in_a_pool_worker)
    assert "ProcessPoolExecutor" in str(info.value)


# --------------------------------------------------------------------------- 7. Ctrl-C


SLOW_IMPORT = textwrap.dedent(
    """
    import time
    from pathlib import Path
    Path({ready!r}).write_text("loading")
    time.sleep(600)

    def f(p_fn, q_fn, prefix, k, rng):
        return [0]
    """
)


@needs_proc
def test_ctrl_c_on_the_second_target_keeps_the_first_targets_verdict(subjects, tmp_path):
    ready = tmp_path / "ready"
    slow = tmp_path / "slow_import.py"
    slow.write_text(SLOW_IMPORT.format(ready=str(ready)))
    xml = tmp_path / "r.xml"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specverify",
            "check",
            f"{subjects}:junk",
            f"{slow}:f",
            "--json",
            "--budget",
            "quick",
            "--junit-xml",
            str(xml),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120  # the first target checked, the second loading (120 s limit)
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), proc.communicate(timeout=5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "interrupted after 1 of 2 targets" in err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    first = json.loads(lines[0])
    assert first["target"].endswith(":junk") and first["exact"] is False
    cases = ET.parse(xml).getroot().findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == [f"{subjects}:junk"]
    assert captures_in(tmp_path) == []
    assert gone_within(str(slow)) == []


# --------------------------------------------------------------------------- 8. encoding


def test_junit_escapes_lone_surrogates_and_stays_parseable(tmp_path):
    path = tmp_path / "r.xml"
    case = junit.Case("t\udcff.py:f", "specverify.check", 0.5, "failure", "bad \ud800", "bad \ud800\x01 \ufffe")
    assert junit.write(path, "suite", [case], "test: --junit-xml") == 0
    el = ET.parse(path).getroot().find("testsuite/testcase")
    assert el.get("name") == "t\\udcff.py:f"
    assert el.find("failure").get("message") == "bad \\ud800"


def test_an_undecodable_file_name_and_a_lone_surrogate_do_not_crash_the_reports(tmp_path):
    source = os.path.join(os.fsencode(tmp_path), b"s\xff.py")
    with open(source, "w") as f:
        f.write(SUBJECTS)
    xml = tmp_path / "r.xml"
    target = source + b":raises_a_lone_surrogate"
    proc = run_check(target, "--budget", "quick", "--junit-xml", str(xml), timeout=120)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert b"NOT EXACT" in proc.stdout and b"bad \\ud800" in proc.stdout
    failure = ET.parse(xml).getroot().find("testsuite/testcase/failure")
    assert "bad \\ud800" in failure.get("message")


@pytest.mark.parametrize("json_flag", [False, True], ids=["human", "json"])
def test_a_sampler_printing_an_accent_under_the_c_locale(subjects, json_flag):
    env = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": None, "LC_CTYPE": None}
    args = [f"{subjects}:prints_an_accent", "--budget", "quick"] + (["--json"] if json_flag else [])
    proc = run_check(*args, env=env, timeout=300)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0 and "Traceback" not in err, err
    if json_flag:
        assert "caf\u00e9" in json.loads(proc.stdout)["output"]
    else:
        assert b"EXACT" in proc.stdout and b"caf\\xe9" in proc.stdout  # escaped for ASCII stdout


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_capture_files_of_a_killed_host_are_removed_by_the_next_run(tmp_path, monkeypatch):
    """A host killed by SIGKILL or a default SIGTERM (pytest under ``timeout``) runs no finalizer
    and leaves its capture files; the next process to make one deletes those whose maker is no
    longer running, and keeps a running maker's."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(capture, "_SWEPT", set())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = tmp_path / f"{capture.capture_prefix(dead.pid)}abc.log"
    alive = tmp_path / f"{capture.capture_prefix(os.getppid())}def.log"
    other = tmp_path / "specverify-subject-notapid-x.log"
    for path in (orphan, alive, other):
        path.write_text("")
    with runner.Runner(lambda: specverify.speculative_step) as subject:
        subject.start()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [alive.name, other.name, os.path.basename(subject.capture_path)]
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, other.name])
    assert capture.remove_orphan_captures() == []  # once per process
