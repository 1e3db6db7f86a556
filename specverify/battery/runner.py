"""The only place a subject's code runs: a child process that is killed when a call overruns.

A ``Runner`` forks one child per subject (``start_method="spawn"``, or the environment's
``SPECVERIFY_START_METHOD=spawn``, starts a fresh interpreter instead: CUDA cannot be initialised
in a forked child, so ``check --device cuda`` spawns; the subject must then be importable). The parent sends ``(task, args)`` messages; the child
runs ``task(subject, *args)`` and sends the result back. Tasks batch many sampler calls per
message (a whole enumeration, a look of the sequential test), so the overhead is a few
milliseconds per message, not per call.

What the child does never reaches the parent's process: its stdout and stderr (file descriptors 1
and 2, so C-level output too; Python's streams as UTF-8 whatever the locale) go to a capture file
shown as an excerpt; it ignores SIGINT (the parent owns Ctrl-C) and dies with its parent
(``PR_SET_PDEATHSIG`` on Linux). A call that does not answer within its limit is killed with
SIGKILL, whatever it is doing (a Python loop that swallows exceptions, an endless loop inside one C
call). An exit (``os._exit``), a signal (a segfault) or an out-of-memory kill of the child becomes
``SubjectFailed`` with a sentence that names it.

Progress, not the clock, tells a slow task from a hung one: the child counts every subject call
that returns (``progressed``, called by ``guards.call_subject``) in a counter shared with the
parent (``multiprocessing.RawValue``: fork and spawn alike), and the start of every task (once its
message is read: what unpickling it imports is not the task's time). ``call(..., idle=s)`` kills
a task that has started only when no subject call has returned for ``s`` seconds (``Stalled``: a
hang, whatever the machine's load) or when its absolute ``limit`` passes; without ``idle`` the
limit alone decides.

Where the rest lives: ending the subject's whole process tree (its session, a cgroup v2 leaf or
a child subreaper and /proc) is ``battery.process_tree``; the capture file and its excerpt
``battery.capture``; the guard that keeps the subject from signalling the checker, and SIGTERM to
the checker, ``battery.signals``. This module holds the protocol over the pipe: both its ends
(``Runner`` in the parent, the child's loop) and the framing of its messages.

A daemonic process (a ``multiprocessing.Pool`` worker) cannot have children: ``start`` says so
with a RuntimeError instead of multiprocessing's "can only join a started process".

Tasks must convert the subject's own exceptions, ``SystemExit`` and ``KeyboardInterrupt``
included, into their results (see interfaces.round_tasks.guarded); an exception that escapes a task is a bug
of ours and is raised in the parent as ``RunnerError`` with the child's traceback.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler

from ..common.validation import check_positive_real
from . import capture, process_tree, signals

MAX_MESSAGE_BYTES = 1 << 31
"""The largest reply read from a subject's process (a forged length header beyond it is a failure)."""

KILL_MARGIN_S = 1.0
"""Added to every call's limit before the child is killed (fork, pickling, a loaded machine)."""

IN_SUBJECT_PROCESS = False
"""True in a subject's process: a KeyboardInterrupt there is the subject's (SIGINT is ignored)."""
_PROGRESS = None  # in a subject's process: the counter of subject calls that returned (``progressed``)
LONGEST_WAIT_S = 1e6
"""The longest a call's limit is waited, about 11.6 days: a limit derived from counts (paths x
calls x a call's limit) can pass what ``poll`` and ``Thread.join`` accept (about 24.8 days, else
OverflowError); past this, only the idle guard stops a hang, as it does long before."""
IDLE_POLL_S = 0.1
"""How often the parent reads a task's progress counter while it waits with ``idle``."""
_LIVE: weakref.WeakSet[Runner] = weakref.WeakSet()
DAEMONIC_MESSAGE = (
    "specverify.check cannot run inside a daemonic process (e.g. a multiprocessing.Pool worker): "
    "its subject runs in a child process; use concurrent.futures.ProcessPoolExecutor or run it in "
    "the main process"
)


class SubjectFailed(Exception):
    """The subject's process ended a call abnormally; the message says how."""


class Stalled(SubjectFailed):
    """The idle guard killed a task: no subject call returned for its ``idle`` seconds (a hang);
    what it stops is not judged, never taken as the subject's failure."""


class RunnerError(RuntimeError):
    """A task raised in the child: a bug of specverify's, not the subject's."""


def describe_exit(exitcode: int | None) -> str:
    """A sentence for how the child ended: an exit code, or the signal that killed it."""
    if exitcode is None:
        return "its process stopped answering"
    if exitcode >= 0:
        return f"its process exited with code {exitcode} during a call (os._exit or a C-level exit)"
    sig = -exitcode
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
    if sig == signal.SIGKILL:
        return f"its process was killed by {name} (out of memory?)"
    return f"its process was killed by {name}"


def progressed() -> None:
    """Count one subject call that returned (in a subject's process; a no-op elsewhere): the
    progress ``Runner.call(..., idle=...)`` watches."""
    if _PROGRESS is not None:
        _PROGRESS.value += 1


def _child_main(
    conn,
    parents_end,
    parent_pid: int,
    load: Callable[[], Callable],
    capture_path: str,
    leaf: str | None,
    progress=None,
) -> None:
    global IN_SUBJECT_PROCESS, _PROGRESS
    IN_SUBJECT_PROCESS = True
    _PROGRESS = progress
    parent_pgid = os.getpgrp()  # inherited from the parent, read before leaving it
    process_tree.own_session()
    if not process_tree.join_cgroup(leaf):
        process_tree.keep_orphans()
    parents_end.close()  # so that the parent's death is an EOF here
    process_tree.die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the checker's handler (sigterm_as_interrupt)
    capture.redirect_output(capture_path)
    signals.guard_signals(parent_pid, parent_pgid)
    if "torch" in sys.modules:  # a forked OpenMP pool can deadlock; one thread is enough here
        sys.modules["torch"].set_num_threads(1)
    try:
        subject = load()
    except BaseException as exc:  # noqa: BLE001 - whatever the import does is reported
        capture.flush_streams()
        conn.send(
            (
                "load-failed",
                exc if isinstance(exc, Exception) and _picklable(exc) else RuntimeError(f"{type(exc).__name__}: {exc}"),
            )
        )
        os._exit(0)
    capture.flush_streams()
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if message is None:
            os._exit(0)
        task, args = message
        progressed()  # received and unpickled (imports the task's module under spawn): it starts
        try:
            reply = ("ok", task(subject, *args))
        except BaseException:  # noqa: BLE001 - a task escaped: ours, reported with its traceback
            reply = ("error", traceback.format_exc())
        capture.flush_streams()
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result is ours as well
            conn.send(("error", f"result of {getattr(task, '__name__', task)} not picklable: {exc}"))


def _exception_text(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:200]
    except Exception:  # noqa: BLE001
        return type(exc).__name__


def _picklable(exc: BaseException) -> bool:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return True
    except Exception:  # noqa: BLE001
        return False


class _Leftovers:
    """What a Runner may leave on the machine: its capture file and its subject's process tree.
    Held apart from the Runner so that a ``weakref.finalize`` can release them when the Runner is
    collected or the interpreter exits; only the process that made them releases them (a subject
    that forks and exits normally runs the inherited exit handlers)."""

    def __init__(self):
        self.owner = os.getpid()
        self.capture_path: str | None = None
        self.tree = process_tree.SubjectTree()

    def capture(self) -> str:
        if self.capture_path is None or not os.path.exists(self.capture_path):
            self.capture_path = capture.new_capture_file()
        return self.capture_path

    def remove_capture(self) -> None:
        if self.capture_path is not None and os.getpid() == self.owner:
            try:
                os.unlink(self.capture_path)
            except OSError:
                pass
            self.capture_path = None

    def release(self) -> None:
        self.tree.remove()
        self.remove_capture()


class Runner:
    """One subject in one child process; ``call`` runs a task on it within a limit.

    ``load`` runs in the child and returns the subject (a callable); ``Runner.for_callable(fn)``
    hands a function over by fork. ``start()`` returns after the subject loaded, or raises the
    exception ``load`` raised (an import error, a usage error) or ``SubjectFailed`` when the child
    died loading it. After ``SubjectFailed`` the next ``call`` starts a fresh child (the capture
    file is kept: the output excerpt covers every child). ``close()`` ends the subject's process
    tree (whatever sessions or groups its processes made) and deletes the capture file and the
    cgroup leaf; read ``output_excerpt()`` before it.
    """

    def __init__(self, load: Callable[[], Callable], load_limit: float = 120.0, start_method: str | None = None):
        self._load = load
        self._load_limit = check_positive_real("load_limit", load_limit)
        method = start_method or os.environ.get("SPECVERIFY_START_METHOD") or "fork"
        if method not in ("fork", "spawn"):
            raise ValueError(f"start_method: must be fork or spawn, got {method!r}")
        self.start_method = method
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self._progress = None  # the child's counter of subject calls that returned (``progressed``)
        self._leftovers = _Leftovers()
        self._finalizer = weakref.finalize(self, self._leftovers.release)

    @property
    def capture_path(self) -> str | None:
        """The file the subject's stdout and stderr go to (None before ``start`` and after ``close``)."""
        return self._leftovers.capture_path

    @property
    def containment(self) -> str | None:
        """How the subject's processes are found when it ends: "cgroup" (its cgroup v2 leaf) or
        "/proc" (its descendants and the runner's records of them); None when no subject runs."""
        return self._leftovers.tree.mechanism

    @classmethod
    def for_callable(cls, fn: Callable) -> Runner:
        return cls(_Constant(fn))

    def clone(self) -> Runner:
        """A new, unstarted Runner of the same subject, loaded the same way."""
        return type(self)(self._load, self._load_limit, self.start_method)

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> Runner:
        if multiprocessing.current_process().daemon:
            raise RuntimeError(DAEMONIC_MESSAGE)
        ctx = multiprocessing.get_context(self.start_method)
        parent, child = ctx.Pipe()
        capture = self._leftovers.capture()
        leaf = self._leftovers.tree.leaf_for_child()
        self._progress = ctx.RawValue("Q", 0)
        self._process = ctx.Process(  # type: ignore[attr-defined]  # typeshed's BaseContext lacks Process; every context has it
            target=_child_main,
            args=(child, parent, os.getpid(), self._load, capture, leaf, self._progress),
            daemon=True,
            name="specverify-subject",
        )
        process = self._process
        try:
            process.start()
        finally:
            child.close()
        assert process.pid is not None, "a started process has its pid"
        self._leftovers.tree.adopt(process.pid)  # it leads its own group (os.setsid)
        self._conn = parent
        _LIVE.add(self)
        status, value = self._receive(self._load_limit, "loading the subject")
        if status == "load-failed":
            self.kill()
            raise value
        return self

    def kill(self) -> None:
        """SIGKILL the child and every process it started (its process tree, see the module's
        docstring) and reap the child; the capture file and the cgroup leaf stay (a later
        ``call`` starts a fresh child)."""
        process = self._process
        if process is not None:
            self._leftovers.tree.end()  # before reaping: the child's pid and group id are still ours
            if process.is_alive():  # it had not led its group yet
                process.kill()
            process.join(5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def close(self) -> None:
        """Kill the subject's process tree, delete the capture file and remove the cgroup leaf.
        (The child has nothing to save on an orderly exit, it would ``os._exit``; what it started
        must go in any case.)"""
        self.kill()
        self._leftovers.release()

    def __enter__(self) -> Runner:
        return self.start() if self._process is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- calls ---------------------------------------------------------------------------------
    def call(self, task: Callable, *args, limit: float, idle: float | None = None):
        """``task(subject, *args)`` in the child; SubjectFailed when it overruns ``limit`` s
        (plus ``KILL_MARGIN_S``) or the child dies; with ``idle``, ``Stalled`` (a SubjectFailed)
        when no subject call returned for ``idle`` s (plus ``KILL_MARGIN_S``) while the task ran;
        RunnerError when the task itself raised. A ``limit`` past ``LONGEST_WAIT_S`` waits that long."""
        if idle is not None:
            check_positive_real("idle", idle)
        limit = min(limit, LONGEST_WAIT_S)
        if self._process is None or not self._process.is_alive():
            self.kill()
            self.start()
        before = self._progress.value if self._progress is not None else 0  # read before the task can start
        self._pipe().send((task, args))
        if idle is not None:
            self._wait_progressing(limit + KILL_MARGIN_S, idle + KILL_MARGIN_S, before)
        status, value = self._receive(limit + KILL_MARGIN_S, "a call")
        if status == "error":
            raise RunnerError(f"{getattr(task, '__name__', task)} failed in the subject's process:\n{value}")
        return value

    def _pipe(self) -> Connection:
        """The pipe to the subject's process (``start`` sets it, ``kill`` clears it)."""
        assert self._conn is not None, "no subject process: the runner is started before a call"
        return self._conn

    def _wait_progressing(self, limit: float, idle: float, seen: int) -> None:
        """Wait for the task's reply while it progresses: kill it (``Stalled``) once no subject
        call has returned for ``idle`` s, or (SubjectFailed) once ``limit`` s have passed.
        ``seen``: the progress counter read before the task was sent (so its start is seen
        even when the child got there before this wait began)."""
        conn, progress = self._pipe(), self._progress
        assert progress is not None, "a started runner has its progress counter"
        start = time.monotonic()
        last_change = None  # the idle clock runs from the task's start in the child
        while not conn.poll(min(IDLE_POLL_S, idle)):
            now = time.monotonic()
            if progress.value != seen:
                seen, last_change = progress.value, now
            elif last_change is not None and now - last_change >= idle:
                self.kill()
                raise Stalled(f"no call of the subject returned for {idle:g} s (a hang); its process was killed")
            if now - start >= limit:
                self.kill()
                raise SubjectFailed(f"a call did not return within {limit:g} s; its process was killed")

    def _receive(self, limit: float, what: str):
        if not self._pipe().poll(limit):
            self.kill()
            raise SubjectFailed(f"{what} did not return within {limit:g} s; its process was killed")
        data = self._read_message(limit)
        try:
            status, value = ForkingPickler.loads(data)
        except Exception as exc:  # noqa: BLE001 - bytes the subject wrote onto our pipe
            self.kill()
            raise SubjectFailed(
                f"{what} returned bytes that are not a reply of specverify's "
                f"({_exception_text(exc)}): the subject wrote onto the result pipe; "
                f"its process was killed"
            ) from None
        self._leftovers.tree.record()
        return status, value

    def _read_message(self, limit: float) -> bytes:
        """One whole message from the child, within ``limit`` s once its first bytes arrived (a
        length header the subject forged could otherwise keep ``recv_bytes`` waiting forever) and
        at most ``MAX_MESSAGE_BYTES``; SubjectFailed when the child died, overran or lied."""
        box: dict = {}
        conn = self._pipe()

        def read() -> None:
            try:
                box["data"] = conn.recv_bytes(MAX_MESSAGE_BYTES)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                box["error"] = exc

        reader = threading.Thread(target=read, daemon=True, name="specverify-receive")
        reader.start()
        reader.join(limit)
        if reader.is_alive():  # a message that never ends: kill the writer, which ends the read
            self.kill()
            reader.join(5)
            raise SubjectFailed(f"a reply did not arrive whole within {limit:g} s; its process was killed")
        error = box.get("error")
        if error is None:
            return box["data"]
        if isinstance(error, EOFError) or (isinstance(error, OSError) and "bad message length" not in str(error)):
            process = self._process
            assert process is not None, "a reply is read only from a started subject's process"
            exited = _wait_unreaped(process, 5)
            self.kill()  # ends its tree while its pid is still ours, then reaps it
            raise SubjectFailed(describe_exit(process.exitcode if exited else None)) from None
        self.kill()
        raise SubjectFailed(
            f"the subject's process sent a malformed reply ({_exception_text(error)}); its process was killed"
        ) from None

    def output_excerpt(self, chars: int = capture.OUTPUT_EXCERPT_CHARS) -> str:
        """What the subject printed (stdout and stderr together): the first and the last
        ``chars // 2`` characters when there is more."""
        return capture.excerpt(self.capture_path, chars)


def _wait_unreaped(process, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``process`` (a child) to end, leaving it unreaped where the
    platform allows (``os.waitid`` with WNOWAIT): a zombie keeps its pid and process group id from
    being reused while the runner ends its tree. Whether it ended."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped already
            return True
        except (AttributeError, OSError):  # no waitid: reap it
            process.join(max(0.0, deadline - time.monotonic()))
            return process.exitcode is not None
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


class _Constant:
    """``load`` for a subject handed over by fork."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self) -> Callable:
        return self.fn


def kill_all() -> None:
    """Kill every live subject process (Ctrl-C: the parent stops within a second or two)."""
    for runner in list(_LIVE):
        runner.kill()


__all__ = [
    "DAEMONIC_MESSAGE",
    "IN_SUBJECT_PROCESS",
    "KILL_MARGIN_S",
    "MAX_MESSAGE_BYTES",
    "Runner",
    "RunnerError",
    "Stalled",
    "SubjectFailed",
    "describe_exit",
    "kill_all",
    "progressed",
]
