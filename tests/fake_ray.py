"""A stand-in for the ``ray`` module with the part of Ray's API that specverify.battery.executors
uses, run on local worker processes, so that the Ray executor's own code (connect, submit the
units and the calls, wait, get, cancel, shut down) runs in the CPU suite without the 100 MB
extra. ``install(monkeypatch)`` puts it in ``sys.modules["ray"]``: ``import ray`` inside
specverify then finds it.

What it keeps of Ray's semantics (https://docs.ray.io/en/latest/ray-core/api/core.html):

- ``init`` takes the keyword arguments of ``ray.init`` that specverify passes (an unknown one is a
  TypeError, as a renamed argument would be); a second ``init`` without ``shutdown`` is a
  RuntimeError, as Ray's; ``num_cpus`` is the number of worker processes (default 2).
- ``remote(**options)`` returns a decorator (``remote(fn)`` the remote function at once); options
  outside ``num_cpus``, ``max_retries`` and ``num_returns`` are a TypeError. ``f.remote(*args)``
  returns an ObjectRef at once; the task runs in a worker process (its arguments and result
  pickled both ways, as Ray does), and an ObjectRef among the top-level arguments is replaced by
  its value before the task starts, which waits for it: Ray's task dependencies.
- ``get(ref | [refs])`` the values in order (a task's exception raised here, as
  ``RayTaskError`` re-raises it); ``wait(refs, num_returns, timeout)`` ``(ready, not ready)`` in
  the order given, ready holding at most ``num_returns``; ``cancel(ref, force)`` cancels a task
  that has not started; ``shutdown()`` stops the workers; ``is_initialized()``.

The workers are forked (``fork``, as the local executor's): a function defined in a test module
is found there by reference, and ``init`` starts every worker before any of this module's
dispatch threads exists. ``calls`` records every ``init`` and task (the options and the function's
name) for the tests to inspect.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import sys
import threading
import types
from collections.abc import Callable, Iterable
from typing import Any

REMOTE_OPTIONS = frozenset({"num_cpus", "max_retries", "num_returns"})
"""The options of ``ray.remote`` this fake accepts (Ray has more; specverify uses these)."""


class ObjectRef:
    """A task's future result (Ray's ObjectRef): only ``get``, ``wait`` and ``cancel`` read it."""

    def __init__(self, future: cf.Future, name: str):
        self.future, self.name = future, name

    def __repr__(self) -> str:
        return f"ObjectRef({self.name})"


class RemoteFunction:
    """``ray.remote(...)(fn)``: ``.remote(*args)`` submits one task."""

    def __init__(self, ray: FakeRay, fn: Callable, options: dict[str, Any]):
        self._ray, self._fn, self.options = ray, fn, options

    def remote(self, *args: Any) -> ObjectRef:
        return self._ray.submit(self._fn, args, self.options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("Remote functions cannot be called directly: use .remote() (as Ray says)")


class FakeRay(types.ModuleType):
    """The module object: ``sys.modules["ray"] = FakeRay()``."""

    def __init__(self) -> None:
        super().__init__("ray", __doc__)
        self._pool: cf.ProcessPoolExecutor | None = None
        self.calls: list[tuple[str, Any]] = []

    # lifecycle
    def init(
        self,
        address: str | None = None,
        *,
        num_cpus: int | None = None,
        include_dashboard: bool | None = None,
        log_to_driver: bool = True,
        logging_level: int | None = None,
        runtime_env: dict | None = None,
    ) -> None:
        if self._pool is not None:
            raise RuntimeError("Maybe you called ray.init twice by accident?")
        self.calls.append(("init", {"address": address, "num_cpus": num_cpus, "include_dashboard": include_dashboard}))
        workers = num_cpus or 2
        self._pool = cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
        # start every worker now (forked before any dispatch thread of ours exists)
        list(self._pool.map(_identity, range(workers)))

    def is_initialized(self) -> bool:
        return self._pool is not None

    def shutdown(self) -> None:
        self.calls.append(("shutdown", None))
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    # tasks
    def remote(self, *args: Any, **options: Any) -> Any:
        if args and callable(args[0]) and not options:
            return RemoteFunction(self, args[0], {})
        unknown = set(options) - REMOTE_OPTIONS
        if args or unknown:
            raise TypeError(f"ray.remote: unexpected arguments {sorted(unknown) or args}")
        return lambda fn: RemoteFunction(self, fn, dict(options))

    def submit(self, fn: Callable, args: tuple, options: dict[str, Any]) -> ObjectRef:
        if self._pool is None:
            raise RuntimeError("ray.init() was not called")
        name = getattr(fn, "__qualname__", repr(fn))
        self.calls.append(("task", {"fn": name, **options}))
        pool = self._pool
        deps = [a.future for a in args if isinstance(a, ObjectRef)]
        if not deps:
            return ObjectRef(pool.submit(fn, *args), name)
        outer: cf.Future = cf.Future()

        def start_when_ready() -> None:  # Ray starts a task once its argument refs are ready
            cf.wait(deps)
            if not outer.set_running_or_notify_cancel():
                return
            try:
                values = [a.future.result() if isinstance(a, ObjectRef) else a for a in args]
                outer.set_result(pool.submit(fn, *values).result())
            except BaseException as exc:  # noqa: BLE001 - the task's error, handed to get()
                outer.set_exception(exc)

        threading.Thread(target=start_when_ready, daemon=True, name=f"fake-ray {name}").start()
        return ObjectRef(outer, name)

    def get(self, refs: ObjectRef | list[ObjectRef], timeout: float | None = None) -> Any:
        if isinstance(refs, ObjectRef):
            return refs.future.result(timeout)
        return [ref.future.result(timeout) for ref in refs]

    def wait(
        self, refs: Iterable[ObjectRef], *, num_returns: int = 1, timeout: float | None = None
    ) -> tuple[list[ObjectRef], list[ObjectRef]]:
        refs = list(refs)
        if not 1 <= num_returns <= len(refs):
            raise ValueError(f"num_returns must be in 1..{len(refs)}, got {num_returns}")
        cf.wait([r.future for r in refs], timeout, cf.FIRST_COMPLETED)
        ready = [r for r in refs if r.future.done()][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def cancel(self, ref: ObjectRef, *, force: bool = False, recursive: bool = True) -> None:
        self.calls.append(("cancel", ref.name))
        ref.future.cancel()


def _identity(x: int) -> int:
    return x


def install(monkeypatch: Any) -> FakeRay:
    """A fresh fake in ``sys.modules["ray"]`` (monkeypatch restores the real one, or none)."""
    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    return fake
