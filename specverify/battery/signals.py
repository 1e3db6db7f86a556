"""Signals between the checker and its subject: the subject's Python cannot signal the checker,
and SIGTERM to the checker stops it as Ctrl-C does.

The subject cannot signal the checker from Python: in its process ``os.kill``, ``os.killpg`` and
``signal.pidfd_send_signal`` raise PermissionError when aimed at the parent's process or process
group (or at every process, pid -1), so ``os.kill(os.getppid(), signal.SIGINT)`` is the subject's
exception, a contract finding, never an "interrupted" check. This is a guard on Python's calls, not
a sandbox: native code calling kill(2) itself, or a ``kill`` command run by the subject, is not
blocked.

SIGTERM: within ``sigterm_as_interrupt`` the checker turns SIGTERM into ``Terminated`` (a
KeyboardInterrupt), so that it stops as on Ctrl-C, the subjects' process trees killed and capture
files deleted; ``how_stopped`` names the stop and its exit code (143, or 130 for Ctrl-C).
"""

from __future__ import annotations

import contextlib
import errno
import operator
import os
import signal
import threading


def _refuse_to_signal_the_checker() -> None:
    raise PermissionError(errno.EPERM, "specverify: a subject may not signal the checker's process")


def guard_signals(parent_pid: int, parent_pgid: int) -> None:
    """In the subject's process: Python's ways to send a signal refuse the parent's pid, its
    process group and pid -1 (every process) with PermissionError. ``os.getppid`` is left as it
    is (a made-up answer could aim the subject's kill at an innocent process). Native code that
    calls kill(2) itself is not blocked: this guards the subject's Python, it is no sandbox.
    ``signal.pthread_kill`` needs no guard: it reaches only threads of the subject's own process."""
    real_kill, real_killpg = os.kill, os.killpg

    def kill(pid, sig, /):
        target = operator.index(pid)
        if target in (parent_pid, -1, -parent_pgid):
            _refuse_to_signal_the_checker()
        return real_kill(pid, sig)

    def killpg(pgid, sig, /):
        if operator.index(pgid) == parent_pgid:
            _refuse_to_signal_the_checker()
        return real_killpg(pgid, sig)

    kill.__doc__, killpg.__doc__ = real_kill.__doc__, real_killpg.__doc__
    os.kill, os.killpg = kill, killpg
    real_pidfd_send_signal = getattr(signal, "pidfd_send_signal", None)
    if real_pidfd_send_signal is not None:

        def pidfd_send_signal(pidfd, sig, *args, **kwargs):
            if _pidfd_target(pidfd) == parent_pid:
                _refuse_to_signal_the_checker()
            return real_pidfd_send_signal(pidfd, sig, *args, **kwargs)

        signal.pidfd_send_signal = pidfd_send_signal


def _pidfd_target(pidfd) -> int | None:
    try:
        with open(f"/proc/self/fdinfo/{operator.index(pidfd)}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, TypeError):
        pass
    return None


class Terminated(KeyboardInterrupt):
    """SIGTERM received by the checker, raised where it is, so that it stops as on Ctrl-C: the
    subjects' process trees killed, capture files deleted, finished verdicts reported (exit 143)."""


def how_stopped(stop: KeyboardInterrupt) -> tuple[str, int]:
    """The words and exit code for a command stopped by ``stop``: ("terminated (SIGTERM)", 143)
    for ``Terminated``, ("interrupted", 130) for Ctrl-C."""
    from ..common.command_line import EXIT_INTERRUPTED, EXIT_TERMINATED

    if isinstance(stop, Terminated):
        return "terminated (SIGTERM)", EXIT_TERMINATED
    return "interrupted", EXIT_INTERRUPTED


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises ``Terminated`` (a KeyboardInterrupt) in the main thread
    instead of ending the process at once (which would leave the subject's children and capture
    file behind). Does nothing outside the main thread, where signals cannot be handled."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = ["Terminated", "guard_signals", "how_stopped", "sigterm_as_interrupt"]
