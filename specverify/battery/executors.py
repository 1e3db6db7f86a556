"""Where independent batteries run: local worker processes (the default) or a Ray cluster.

``--executor local`` (default), ``--executor ray`` (the cluster named by ``RAY_ADDRESS``, else a
local Ray instance started for the run) or ``--executor ray://HOST:PORT`` (Ray Client).

Units of work on Ray: a subject (``mutants report``: a mutant; ``check T1 T2 ...``: a target) and,
within a round subject, one task per case enumeration (specverify.interfaces.round.units): the enumerations are
independent of each other and draw no random numbers, so each runs in its own task, in its own
subject process. The seeded part of the battery (the contract, the sequential chi-square's looks,
sampled tokens per round) runs in order in the subject's own task, which starts once its
enumeration tasks are done and replays the battery with their results
(``interfaces.round.run_battery(prefetched=...)``): verdicts and findings are the local executor's for
the same seed. A look of the sequential test is not a unit: its samples continue the rng stream
every earlier look and case drew from (specverify.interfaces.round.units says why).

Ray is an optional extra (``pip install -e '.[ray]'``) imported only when asked for; without it
``--executor ray`` is a usage error naming the extra. ``ray://`` needs the Ray Client as well
(``pip install 'ray[client]'``). Before ``ray.init`` is asked to connect, the address
(``ray://HOST:PORT`` or ``RAY_ADDRESS``) is parsed (``parse_address``: a bad port is an error at
once) and its host:port is probed with a short TCP connect (``probe``), so that an unreachable
cluster is one line within seconds, not Ray's minute of retries; both are plain functions that
need no Ray. Every such failure is an ExecutorUnavailable, which ``check`` and ``mutants report``
print as one line and exit 2.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..errors import UsageError

LOCAL = "local"
RAY_EXTRA_HINT = "--executor ray needs Ray: install the extra with pip install -e '.[ray]' (or pip install 'ray>=2.9')"
RAY_CLIENT_HINT = "pip install 'ray[client]'"
PROBE_TIMEOUT_S = 3.0
"""Seconds the TCP probe of a cluster's address waits (name lookup and connect)."""
NO_PROBE = ("auto", "local")
"""RAY_ADDRESS values that name no host:port (Ray finds or starts the cluster itself)."""
Unit = tuple[Callable[..., Any], tuple[Any, ...]]
"""An independent unit of work: ``(function, its arguments)``, run as its own task."""


class ExecutorUnavailable(UsageError):
    """The executor asked for cannot be used here (a usage error, exit 2)."""


def executor_argument(text: str) -> str:
    """argparse ``type=`` for --executor: local, ray or ray://HOST:PORT (its port checked here)."""
    import argparse

    if text in (LOCAL, "ray"):
        return text
    if text.startswith("ray://"):
        try:
            parse_address(text)
        except ExecutorUnavailable as exc:  # "--executor: 'ray://...': why": argparse names the flag
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None
        return text
    raise argparse.ArgumentTypeError(f"expected local, ray or ray://HOST:PORT, got {text!r}")


def parse_address(address: str, what: str = "--executor") -> tuple[str, int]:
    """``(host, port)`` of ``ray://HOST:PORT`` or ``HOST:PORT`` (``[IPv6]:PORT`` too), or
    ExecutorUnavailable naming ``what`` (the flag or variable it came from) and the problem."""
    text = address.strip()
    rest = text[len("ray://") :] if text.startswith("ray://") else text
    if "://" in rest:
        raise ExecutorUnavailable(f"{what}: {address!r}: expected ray://HOST:PORT or HOST:PORT")
    rest = rest.split("/", 1)[0]
    if rest.startswith("["):
        host, sep, port_text = rest[1:].partition("]:")
    else:
        host, sep, port_text = rest.rpartition(":")
    if not sep or not host:
        raise ExecutorUnavailable(
            f"{what}: {address!r}: expected HOST:PORT (the Ray Client's port is usually 10001, a head node's 6379)"
        )
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ExecutorUnavailable(f"{what}: {address!r}: the port must be an integer in 1..65535, got {port_text!r}")
    return host, int(port_text)


def probe(host: str, port: int, what: str = "--executor", timeout: float = PROBE_TIMEOUT_S) -> None:
    """Return when a TCP connection to host:port opens within ``timeout`` seconds (the name
    lookup included: it runs in a thread that is not waited for past the deadline); else
    ExecutorUnavailable naming ``what`` and why."""
    import time

    from ..common.network import connect_any, resolve

    deadline = time.monotonic() + timeout
    where = f"{what}: cannot reach the Ray cluster at {host}:{port}"
    found = resolve(host, port, timeout)
    if isinstance(found, str):  # the name itself: no lookup answer, or an unknown host
        raise ExecutorUnavailable(f"{where} ({found})")
    why = connect_any(found, deadline, timeout)
    if why is not None:
        raise ExecutorUnavailable(f"{where} ({why}); is the cluster up, and is that its address?")


def client_available() -> bool:
    """Whether the installed Ray has the Ray Client (``ray.util.client`` and grpc import)."""
    try:
        import grpc  # noqa: F401
        import ray.util.client  # noqa: F401
    except ImportError:
        return False
    return True


def cluster_address(executor: str) -> tuple[str, str] | None:
    """``(address, what names it)`` of the cluster ``ray.init`` will connect to: the ``ray://``
    of --executor, else ``RAY_ADDRESS`` unless it is empty, auto or local (None: Ray starts or
    finds a local instance itself)."""
    if executor.startswith("ray://"):
        return executor, "--executor"
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if not env or env in NO_PROBE:
        return None
    return env, f"--executor {executor} (RAY_ADDRESS)"


def check_cluster(executor: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Before ``ray.init``: the Ray Client is installed when the address is ``ray://``, the
    address parses and its host:port answers within ``timeout`` s; else ExecutorUnavailable."""
    named = cluster_address(executor)
    if named is None:
        return
    address, what = named
    if address.startswith("ray://") and not client_available():
        raise ExecutorUnavailable(
            f"{what}: {address!r} needs the Ray Client, which the installed Ray lacks: {RAY_CLIENT_HINT}"
        )
    host, port = parse_address(address, what)
    probe(host, port, what, timeout)


def require_ray() -> ModuleType:
    """The ``ray`` module, or ExecutorUnavailable with the one line that says what to install."""
    import importlib

    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ExecutorUnavailable(RAY_EXTRA_HINT) from None


def preflight(executor: str) -> None:
    """What a command line can know about ``--executor`` right after parsing, before the battery
    loads: nothing to check for local; for Ray, that it imports (``require_ray``) and that the
    cluster's address, if one is named, parses and answers (``check_cluster``); else
    ExecutorUnavailable, one line (a usage error within seconds). ``ray_map`` checks again."""
    if executor == LOCAL:
        return
    require_ray()
    check_cluster(executor)


def ray_map(
    fn: Callable[..., Any],
    calls: list[tuple[Any, ...]],
    executor: str,
    num_cpus: int | None = None,
    on_done: Callable[[], None] | None = None,
    poll_s: float = 0.1,
    units: list[list[Unit]] | None = None,
) -> list[Any]:
    """``[fn(*args) for args in calls]``, each call one Ray task (one CPU, no retries), results in
    order. ``units[i]``: ``(unit_fn, unit_args)`` pairs run first, each its own task, all in
    parallel; call i then runs as ``fn(*calls[i], *their results)`` once they are done. Connects
    to ``ray://ADDRESS``, to ``RAY_ADDRESS``, or starts a local instance with ``num_cpus`` CPUs
    (shut down afterwards); an instance already initialised in this process (a test's
    ``ray.init(num_cpus=2)``) is used as it is. ``on_done`` is called as each call finishes.
    Ctrl-C cancels every task."""
    ray = require_ray()
    started = _connect(ray, executor, num_cpus)
    refs: list[Any] = []  # Ray's ObjectRefs
    try:
        _submit(ray, fn, calls, units, refs)
        _wait(ray, refs[len(refs) - len(calls) :], on_done, poll_s)
        results: list[Any] = ray.get(refs[len(refs) - len(calls) :])
        return results
    except KeyboardInterrupt:
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished
                pass
        raise
    finally:
        if started:
            ray.shutdown()


def _connect(ray: ModuleType, executor: str, num_cpus: int | None) -> bool:
    """Initialise Ray unless it is; True when this call started it (and must shut it down)."""
    if ray.is_initialized():
        return False
    import logging

    check_cluster(executor)

    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.ERROR,
    }  # stderr keeps the report's one-line errors
    if executor.startswith("ray://"):
        kwargs["address"] = executor
    elif not os.environ.get("RAY_ADDRESS") and num_cpus:
        kwargs["num_cpus"] = num_cpus
    try:
        ray.init(**kwargs)
    except Exception as exc:  # noqa: BLE001 - Ray's own error types vary by version
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ExecutorUnavailable(
            f"--executor {executor}: Ray could not start or connect ({type(exc).__name__}: {first})"
        ) from None
    return True


def _submit(
    ray: ModuleType,
    fn: Callable[..., Any],
    calls: list[tuple[Any, ...]],
    units: list[list[Unit]] | None,
    refs: list[Any],
) -> None:
    """Every unit's task, then every call's (its units' refs as trailing arguments: Ray starts
    it when they are ready and passes their values), appended to ``refs`` as they are submitted
    (so that Ctrl-C cancels what was), the calls' last."""
    remote = ray.remote(num_cpus=1, max_retries=0)
    main = remote(fn)
    unit_refs, remotes = [], {}
    for i in range(len(calls)):
        mine = []
        for unit_fn, unit_args in units[i] if units else ():
            if unit_fn not in remotes:
                remotes[unit_fn] = remote(unit_fn)
            mine.append(remotes[unit_fn].remote(*unit_args))
            refs.append(mine[-1])
        unit_refs.append(mine)
    refs.extend(main.remote(*args, *mine) for args, mine in zip(calls, unit_refs))


def _wait(ray: ModuleType, refs: list[Any], on_done: Callable[[], None] | None, poll_s: float) -> None:
    """Wait for every ref in short waits, so that Ctrl-C is seen at once."""
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1, timeout=poll_s)
        for _ in done:
            if on_done:
                on_done()


__all__ = [
    "ExecutorUnavailable",
    "preflight",
    "LOCAL",
    "PROBE_TIMEOUT_S",
    "RAY_CLIENT_HINT",
    "RAY_EXTRA_HINT",
    "Unit",
    "check_cluster",
    "client_available",
    "cluster_address",
    "executor_argument",
    "parse_address",
    "probe",
    "ray_map",
    "require_ray",
]
