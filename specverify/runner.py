"""The only place a subject's code runs: a child process that is killed when a call overruns.

A ``Runner`` forks one child per subject (``start_method="spawn"``, or the environment's
``SPECVERIFY_START_METHOD=spawn``, starts a fresh interpreter instead: CUDA cannot be initialised
in a forked child, so ``check --device cuda`` spawns; the subject must then be importable). The parent sends ``(task, args)`` messages; the child
runs ``task(subject, *args)`` and sends the result back. Tasks batch many sampler calls per
message (a whole enumeration, a look of the sequential test), so the overhead is a few
milliseconds per message, not per call.

What the child does never reaches the parent's process: its stdout and stderr (file descriptors 1
and 2, so C-level output too) go to a capture file shown as an excerpt; it ignores SIGINT (the
parent owns Ctrl-C) and dies with its parent (``PR_SET_PDEATHSIG`` on Linux). A call that does not
answer within its limit is killed with SIGKILL, whatever it is doing (a Python loop that swallows
exceptions, an endless loop inside one C call). An exit (``os._exit``), a signal (a segfault) or an
out-of-memory kill of the child becomes ``SubjectFailed`` with a sentence that names it.

Tasks must convert the subject's own exceptions, ``SystemExit`` and ``KeyboardInterrupt``
included, into their results (see detectors.guarded); an exception that escapes a task is a bug
of ours and is raised in the parent as ``RunnerError`` with the child's traceback.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import tempfile
import traceback
import weakref
from typing import Callable

from .validation import check_positive_real

OUTPUT_EXCERPT_CHARS = 2000
"""How much of the subject's captured stdout/stderr reports show (its head and its tail)."""

KILL_MARGIN_S = 1.0
"""Added to every call's limit before the child is killed (fork, pickling, a loaded machine)."""

_PR_SET_PDEATHSIG = 1
IN_SUBJECT_PROCESS = False
"""True in a subject's process: a KeyboardInterrupt there is the subject's (SIGINT is ignored)."""
_LIVE: "weakref.WeakSet[Runner]" = weakref.WeakSet()


class SubjectFailed(Exception):
    """The subject's process ended a call abnormally; the message says how."""


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


def _die_with_parent(parent_pid: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):  # not Linux: the child still exits on EOF from the parent
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(0)


def _child_main(conn, parents_end, parent_pid: int, load: Callable[[], Callable],
                capture_path: str) -> None:
    global IN_SUBJECT_PROCESS
    IN_SUBJECT_PROCESS = True
    parents_end.close()  # so that the parent's death is an EOF here
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fd = os.open(capture_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    if "torch" in sys.modules:  # a forked OpenMP pool can deadlock; one thread is enough here
        sys.modules["torch"].set_num_threads(1)
    try:
        subject = load()
    except BaseException as exc:  # noqa: BLE001 - whatever the import does is reported
        conn.send(("load-failed", exc if isinstance(exc, Exception) and _picklable(exc)
                   else RuntimeError(f"{type(exc).__name__}: {exc}")))
        os._exit(0)
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if message is None:
            os._exit(0)
        task, args = message
        try:
            reply = ("ok", task(subject, *args))
        except BaseException:  # noqa: BLE001 - a task escaped: ours, reported with its traceback
            reply = ("error", traceback.format_exc())
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result is ours as well
            conn.send(("error", f"result of {getattr(task, '__name__', task)} not picklable: {exc}"))


def _picklable(exc: BaseException) -> bool:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return True
    except Exception:  # noqa: BLE001
        return False


class Runner:
    """One subject in one child process; ``call`` runs a task on it within a limit.

    ``load`` runs in the child and returns the subject (a callable); ``Runner.for_callable(fn)``
    hands a function over by fork. ``start()`` returns after the subject loaded, or raises the
    exception ``load`` raised (an import error, a usage error) or ``SubjectFailed`` when the child
    died loading it. After ``SubjectFailed`` the next ``call`` starts a fresh child.
    """

    def __init__(self, load: Callable[[], Callable], load_limit: float = 120.0,
                 start_method: str | None = None):
        self._load = load
        self._load_limit = check_positive_real("load_limit", load_limit)
        method = start_method or os.environ.get("SPECVERIFY_START_METHOD") or "fork"
        if method not in ("fork", "spawn"):
            raise ValueError(f"start_method: must be fork or spawn, got {method!r}")
        self.start_method = method
        self._process = None
        self._conn = None
        fd, self.capture_path = tempfile.mkstemp(prefix="specverify-subject-", suffix=".log")
        os.close(fd)

    @classmethod
    def for_callable(cls, fn: Callable) -> "Runner":
        return cls(_Constant(fn))

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> "Runner":
        ctx = multiprocessing.get_context(self.start_method)
        parent, child = ctx.Pipe()
        self._process = ctx.Process(
            target=_child_main, args=(child, parent, os.getpid(), self._load, self.capture_path),
            daemon=True, name="specverify-subject")
        self._process.start()
        child.close()
        self._conn = parent
        _LIVE.add(self)
        status, value = self._receive(self._load_limit, "loading the subject")
        if status == "load-failed":
            self.kill()
            raise value
        return self

    def kill(self) -> None:
        """SIGKILL the child (if any) and reap it."""
        if self._process is not None and self._process.is_alive():
            self._process.kill()
        if self._process is not None:
            self._process.join(5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def close(self) -> None:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
            except OSError:
                pass
            self._process.join(2)
        self.kill()

    def __enter__(self) -> "Runner":
        return self.start() if self._process is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.kill()
            os.unlink(self.capture_path)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- calls ---------------------------------------------------------------------------------
    def call(self, task: Callable, *args, limit: float):
        """``task(subject, *args)`` in the child; SubjectFailed when it overruns ``limit`` s
        (plus ``KILL_MARGIN_S``) or the child dies; RunnerError when the task itself raised."""
        if self._process is None or not self._process.is_alive():
            self.kill()
            self.start()
        self._conn.send((task, args))
        status, value = self._receive(limit + KILL_MARGIN_S, "a call")
        if status == "error":
            raise RunnerError(f"{getattr(task, '__name__', task)} failed in the subject's process:\n{value}")
        return value

    def _receive(self, limit: float, what: str):
        if not self._conn.poll(limit):
            self.kill()
            raise SubjectFailed(f"{what} did not return within {limit:g} s; its process was killed")
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            self._process.join(5)
            code = self._process.exitcode
            self.kill()
            raise SubjectFailed(describe_exit(code)) from None

    def output_excerpt(self, chars: int = OUTPUT_EXCERPT_CHARS) -> str:
        """What the subject printed (stdout and stderr together): the first and the last
        ``chars // 2`` characters when there is more."""
        try:
            with open(self.capture_path, "rb") as f:
                data = f.read()
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        if len(text) <= chars:
            return text
        return f"{text[:chars // 2]}\n[... {len(text) - chars} characters ...]\n{text[-(chars // 2):]}"


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


__all__ = ["Runner", "RunnerError", "SubjectFailed", "describe_exit", "kill_all"]
