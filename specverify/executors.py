"""Where independent batteries run: local worker processes (the default) or a Ray cluster.

``--executor local`` (default), ``--executor ray`` (the cluster named by ``RAY_ADDRESS``, else a
local Ray instance started for the run) or ``--executor ray://HOST:PORT`` (Ray Client).

Units of work on Ray: a subject (``mutants report``: a mutant; ``check T1 T2 ...``: a target) and,
within a round subject, one task per case enumeration (specverify.units): the enumerations are
independent of each other and draw no random numbers, so each runs in its own task, in its own
subject process. The seeded part of the battery (the contract, the sequential chi-square's looks,
sampled tokens per round) runs in order in the subject's own task, which starts once its
enumeration tasks are done and replays the battery with their results
(``interfaces.round.run_battery(prefetched=...)``): verdicts and findings are the local executor's for
the same seed. A look of the sequential test is not a unit: its samples continue the rng stream
every earlier look and case drew from (specverify.units says why).

Ray is an optional extra (``pip install -e '.[ray]'``) imported only when asked for; without it
``--executor ray`` is a usage error naming the extra.
"""

from __future__ import annotations

import os
from typing import Callable

LOCAL = "local"
RAY_EXTRA_HINT = "--executor ray needs Ray: install the extra with pip install -e '.[ray]' (or pip install 'ray>=2.9')"


class ExecutorUnavailable(Exception):
    """The executor asked for cannot be used here (a usage error, exit 2)."""


def executor_argument(text: str) -> str:
    """argparse ``type=`` for --executor: local, ray or ray://ADDRESS."""
    import argparse

    if text in (LOCAL, "ray") or (text.startswith("ray://") and len(text) > len("ray://")):
        return text
    raise argparse.ArgumentTypeError(f"expected local, ray or ray://ADDRESS, got {text!r}")


def require_ray():
    """The ``ray`` module, or ExecutorUnavailable with the one line that says what to install."""
    try:
        import ray
    except ImportError:
        raise ExecutorUnavailable(RAY_EXTRA_HINT) from None
    return ray


def ray_map(fn: Callable, calls: list[tuple], executor: str, num_cpus: int | None = None,
            on_done: Callable[[], None] | None = None, poll_s: float = 0.1,
            units: list[list[tuple[Callable, tuple]]] | None = None) -> list:
    """``[fn(*args) for args in calls]``, each call one Ray task (one CPU, no retries), results in
    order. ``units[i]``: ``(unit_fn, unit_args)`` pairs run first, each its own task, all in
    parallel; call i then runs as ``fn(*calls[i], *their results)`` once they are done. Connects
    to ``ray://ADDRESS``, to ``RAY_ADDRESS``, or starts a local instance with ``num_cpus`` CPUs
    (shut down afterwards); an instance already initialised in this process (a test's
    ``ray.init(num_cpus=2)``) is used as it is. ``on_done`` is called as each call finishes.
    Ctrl-C cancels every task."""
    ray = require_ray()
    started = _connect(ray, executor, num_cpus)
    refs: list = []
    try:
        _submit(ray, fn, calls, units, refs)
        _wait(ray, refs[len(refs) - len(calls):], on_done, poll_s)
        return ray.get(refs[len(refs) - len(calls):])
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


def _connect(ray, executor: str, num_cpus: int | None) -> bool:
    """Initialise Ray unless it is; True when this call started it (and must shut it down)."""
    if ray.is_initialized():
        return False
    import logging

    kwargs: dict = {"include_dashboard": False, "log_to_driver": False,
                    "logging_level": logging.ERROR}  # stderr keeps the report's one-line errors
    if executor.startswith("ray://"):
        kwargs["address"] = executor
    elif not os.environ.get("RAY_ADDRESS") and num_cpus:
        kwargs["num_cpus"] = num_cpus
    ray.init(**kwargs)
    return True


def _submit(ray, fn: Callable, calls: list[tuple], units, refs: list) -> None:
    """Every unit's task, then every call's (its units' refs as trailing arguments: Ray starts
    it when they are ready and passes their values), appended to ``refs`` as they are submitted
    (so that Ctrl-C cancels what was), the calls' last."""
    remote = ray.remote(num_cpus=1, max_retries=0)
    main = remote(fn)
    unit_refs, remotes = [], {}
    for i in range(len(calls)):
        mine = []
        for unit_fn, unit_args in (units[i] if units else ()):
            if unit_fn not in remotes:
                remotes[unit_fn] = remote(unit_fn)
            mine.append(remotes[unit_fn].remote(*unit_args))
            refs.append(mine[-1])
        unit_refs.append(mine)
    refs.extend(main.remote(*args, *mine) for args, mine in zip(calls, unit_refs))


def _wait(ray, refs: list, on_done: Callable[[], None] | None, poll_s: float) -> None:
    """Wait for every ref in short waits, so that Ctrl-C is seen at once."""
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1, timeout=poll_s)
        for _ in done:
            if on_done:
                on_done()


__all__ = ["ExecutorUnavailable", "LOCAL", "RAY_EXTRA_HINT", "executor_argument", "ray_map",
           "require_ray"]