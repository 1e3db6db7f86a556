"""specverify.battery.executors without Ray: the cluster address is parsed and probed before ``ray.init``,
so that a bad or unreachable address (``--executor ray://HOST:PORT`` or ``RAY_ADDRESS``) and a
Ray without its client are one line and exit 2 within seconds, through ``check`` and ``mutants
report`` too (a stand-in ``ray`` package on PYTHONPATH whose ``init`` would hang).

Nothing here is statistical: no battery runs."""

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from specverify.battery import executors
from specverify.battery.executors import ExecutorUnavailable, check_cluster, parse_address, probe

ROOT = Path(__file__).resolve().parents[1]


def closed_port() -> int:
    """A local port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ parse_address


@pytest.mark.parametrize(
    "address, expected",
    [
        ("ray://head:10001", ("head", 10001)),
        ("ray://10.0.0.2:10001/", ("10.0.0.2", 10001)),
        ("127.0.0.1:6379", ("127.0.0.1", 6379)),
        ("[::1]:6379", ("::1", 6379)),
        ("ray://[fe80::1]:10001", ("fe80::1", 10001)),
    ],
)
def test_parse_address(address, expected):
    assert parse_address(address) == expected


@pytest.mark.parametrize(
    "address, words",
    [
        ("garbage:99999", "the port must be an integer in 1..65535, got '99999'"),
        ("ray://head:x", "the port must be an integer in 1..65535, got 'x'"),
        ("head:0", "got '0'"),
        ("ray://head", "expected HOST:PORT"),
        ("ray://:10001", "expected HOST:PORT"),
        ("garbage", "expected HOST:PORT"),
        ("http://head:8265", "expected ray://HOST:PORT or HOST:PORT"),
    ],
)
def test_a_malformed_address_is_an_error_naming_where_it_came_from(address, words):
    with pytest.raises(ExecutorUnavailable, match="^RAY_ADDRESS: ") as info:
        parse_address(address, "RAY_ADDRESS")
    assert words in str(info.value) and repr(address) in str(info.value)
    assert "\n" not in str(info.value)


def test_executor_argument_checks_the_port():
    assert executors.executor_argument("ray://head:10001") == "ray://head:10001"
    assert executors.executor_argument("ray") == "ray" and executors.executor_argument("local") == "local"
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'ray://head:99999': the port must"):
        executors.executor_argument("ray://head:99999")
    with pytest.raises(argparse.ArgumentTypeError, match="expected local, ray or ray://HOST:PORT"):
        executors.executor_argument("ray:/head")


# ------------------------------------------------------------------ probe


def test_probe_of_a_closed_port_fails_at_once():
    port = closed_port()
    t0 = time.perf_counter()
    with pytest.raises(
        ExecutorUnavailable,
        match=f"^--executor: cannot reach the Ray cluster at 127.0.0.1:{port} \\(connection refused\\)",
    ):
        probe("127.0.0.1", port)
    assert time.perf_counter() - t0 < 2.0


def test_probe_of_port_9_fails():
    with pytest.raises(ExecutorUnavailable, match="cannot reach the Ray cluster at 127.0.0.1:9"):
        probe("127.0.0.1", 9, timeout=1.0)


def test_probe_of_a_listening_port_returns():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        assert probe("127.0.0.1", server.getsockname()[1], timeout=2.0) is None


def test_probe_does_not_wait_for_a_stalled_name_lookup(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: time.sleep(30))
    t0 = time.perf_counter()
    with pytest.raises(ExecutorUnavailable, match=r"no answer for the name 'slow\.example' within 0\.5 s"):
        probe("slow.example", 6379, "RAY_ADDRESS", timeout=0.5)
    assert time.perf_counter() - t0 < 2.0


def test_probe_of_an_unknown_host(monkeypatch):
    def unknown(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    with pytest.raises(ExecutorUnavailable, match=r"at garbage:6379 \(unknown host: Name or service not known\)"):
        probe("garbage", 6379)


def test_probe_of_a_connect_that_times_out(monkeypatch):
    class Silent(socket.socket):
        def connect(self, address):
            raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "socket", Silent)
    with pytest.raises(ExecutorUnavailable, match=r"\(no answer within 0\.5 s\)"):
        probe("127.0.0.1", 6379, timeout=0.5)


# ------------------------------------------------------------------ check_cluster


def test_check_cluster_reads_ray_address(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "garbage:99999")
    with pytest.raises(
        ExecutorUnavailable,
        match=r"^--executor ray \(RAY_ADDRESS\): 'garbage:99999': "
        r"the port must be an integer in 1\.\.65535",
    ):
        check_cluster("ray")
    port = closed_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(ExecutorUnavailable, match=r"^--executor ray \(RAY_ADDRESS\): cannot reach"):
        check_cluster("ray")
    for nothing in ("", "auto", "local"):  # Ray finds or starts its own: nothing to probe
        monkeypatch.setenv("RAY_ADDRESS", nothing)
        assert check_cluster("ray") is None
    monkeypatch.delenv("RAY_ADDRESS")
    assert executors.cluster_address("ray") is None


def test_ray_client_address_needs_the_client(monkeypatch):
    monkeypatch.setattr(executors, "client_available", lambda: False)
    with pytest.raises(
        ExecutorUnavailable,
        match=r"^--executor: 'ray://127\.0\.0\.1:1' needs the Ray Client, "
        r".*pip install 'ray\[client\]'$",
    ):
        check_cluster("ray://127.0.0.1:1")
    monkeypatch.setenv("RAY_ADDRESS", "ray://127.0.0.1:1")
    with pytest.raises(ExecutorUnavailable, match=r"RAY_ADDRESS.*pip install 'ray\[client\]'"):
        check_cluster("ray")
    monkeypatch.setattr(executors, "client_available", lambda: True)
    with pytest.raises(ExecutorUnavailable, match="cannot reach the Ray cluster at 127.0.0.1:1"):
        check_cluster("ray://127.0.0.1:1")


def test_client_available_says_whether_ray_util_client_and_grpc_import():
    try:
        import grpc  # noqa: F401
        import ray.util.client  # noqa: F401
    except ImportError:
        assert executors.client_available() is False  # this venv: no ray extra
    else:
        assert executors.client_available() is True


# ------------------------------------------------------------------ _connect with a stand-in ray


def fake_ray(init):
    return SimpleNamespace(is_initialized=lambda: False, init=init)


def test_connect_probes_before_ray_init(monkeypatch):
    calls = []
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{closed_port()}")
    with pytest.raises(ExecutorUnavailable, match="cannot reach"):
        executors._connect(fake_ray(lambda **kw: calls.append(kw)), "ray", 2)
    assert calls == []  # never asked Ray to connect (it would retry for a minute)


def test_connect_turns_a_ray_init_error_into_one_line(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def init(**kwargs):
        raise ValueError("Ray could not start\nmore detail")

    with pytest.raises(
        ExecutorUnavailable,
        match=r"^--executor ray: Ray could not start or connect "
        r"\(ValueError: Ray could not start\)$",
    ):
        executors._connect(fake_ray(init), "ray", 2)
    started = []
    assert executors._connect(fake_ray(lambda **kw: started.append(kw)), "ray", 2) is True
    assert started[0]["num_cpus"] == 2 and "address" not in started[0]


# ------------------------------------------------------------------ through check and mutants report

FAKE_RAY = """
import pathlib, time

def is_initialized():
    return False

def init(**kwargs):
    pathlib.Path({mark!r}).write_text("init called")
    time.sleep(120)
"""


@pytest.fixture
def stand_in_ray(tmp_path):
    package = tmp_path / "site" / "ray"
    package.mkdir(parents=True)
    mark = tmp_path / "init-called"
    (package / "__init__.py").write_text(FAKE_RAY.format(mark=str(mark)))
    return tmp_path / "site", mark


def run_cli(site, *args, ray_address=None):
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    env.pop("RAY_ADDRESS", None)
    if ray_address is not None:
        env["RAY_ADDRESS"] = ray_address
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=90, cwd=ROOT, env=env)
    return proc, time.perf_counter() - t0


@pytest.mark.parametrize(
    "args, ray_address, words",
    [
        (
            ("specverify", "check", "specverify:speculative_step", "--executor", "ray"),
            "CLOSED",
            "specverify check: --executor ray (RAY_ADDRESS): cannot reach the Ray cluster at 127.0.0.1:",
        ),
        (
            ("specverify", "check", "specverify:speculative_step", "--executor", "ray://127.0.0.1:10001"),
            None,
            "specverify check: --executor: 'ray://127.0.0.1:10001' needs the Ray Client, which the installed "
            "Ray lacks: pip install 'ray[client]'",
        ),
        (
            ("specverify.mutants", "report", "--mutant", "ratio/inverted", "--executor", "ray"),
            "garbage:99999",
            "specverify.mutants: --executor ray (RAY_ADDRESS): 'garbage:99999': the port must be an integer",
        ),
    ],
    ids=["check-unreachable", "check-no-client", "mutants-bad-port"],
)
def test_a_bad_cluster_is_one_line_and_exit_2_through_the_clis(stand_in_ray, args, ray_address, words):
    site, mark = stand_in_ray
    address = f"127.0.0.1:{closed_port()}" if ray_address == "CLOSED" else ray_address
    proc, seconds = run_cli(site, *args, ray_address=address)
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not mark.exists()  # ray.init was never called, so it never hung
    assert seconds < 60  # the stand-in's init would sleep 120 s
