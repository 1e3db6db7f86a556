"""Where independent batteries run: local worker processes (the default) or a Ray cluster.

``--executor local`` (default), ``--executor ray`` (the cluster named by ``RAY_ADDRESS``, else a
local Ray instance started for the run) or ``--executor ray://HOST:PORT`` (Ray Client). The unit
of work is one subject's whole battery (``mutants report``: a mutant; ``check T1 T2 ...``: a
target): a battery's looks are sequential by design (each look's false-fail share and the decision
to stop depend on the looks before it), so a subject's battery stays in one task and runs there
exactly as it does in a local worker; verdicts are the same for the same seed.

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
            on_done: Callable[[], None] | None = None, poll_s: float = 0.1) -> list:
    """``[fn(*args) for args in calls]``, each call one Ray task (one CPU, no retries), results in
    order. Connects to ``ray://ADDRESS``, to ``RAY_ADDRESS``, or starts a local instance with
    ``num_cpus`` CPUs (shut down afterwards); an instance already initialised in this process (a
    test's ``ray.init(num_cpus=2)``) is used as it is. Ctrl-C cancels every task."""
    ray = require_ray()
    started = False
    if not ray.is_initialized():
        import logging

        kwargs: dict = {"include_dashboard": False, "log_to_driver": False,
                        "logging_level": logging.ERROR}  # stderr keeps the report's one-line errors
        if executor.startswith("ray://"):
            kwargs["address"] = executor
        elif not os.environ.get("RAY_ADDRESS") and num_cpus:
            kwargs["num_cpus"] = num_cpus
        ray.init(**kwargs)
        started = True
    remote = ray.remote(num_cpus=1, max_retries=0)(fn)
    refs = [remote.remote(*args) for args in calls]
    try:
        pending = list(refs)
        while pending:  # short waits, so that Ctrl-C is seen at once
            done, pending = ray.wait(pending, num_returns=1, timeout=poll_s)
            for _ in done:
                if on_done:
                    on_done()
        return ray.get(refs)
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


__all__ = ["ExecutorUnavailable", "LOCAL", "RAY_EXTRA_HINT", "executor_argument", "ray_map",
           "require_ray"]