"""Code an interrupting alarm must not land in: bookkeeping that has to run to its end.

``battery.guards.time_limit`` interrupts an overrunning body by raising from a SIGALRM handler,
and raises again every ``REFIRE_S`` while the body runs (a single raise may be swallowed). Python
runs that handler between any two bytecodes of the main thread, so a raise can also land inside the
code that undoes a context: the limit's own ``finally`` (its deadline is then never removed and
keeps firing) or ``laws.torch_random.Interception.__exit__`` (its ``TorchFunctionMode`` then stays
on torch's mode stack, and every later enumeration in the process is answered by a dead run).
Masking the signal cannot prevent this (CPython runs the handler in the main thread whichever
thread the kernel delivered to), so the handler asks instead: a function marked ``unalarmed`` is on
the interrupted stack; if so it defers the raise (``in_unalarmed``) and the alarm fires again later.

Standard library only; the laws and the battery both use it.
"""

from __future__ import annotations

from types import CodeType, FrameType

_UNALARMED: set[CodeType] = set()


def unalarmed(fn):
    """Mark ``fn`` (a function, or a generator function's body) as code no alarm raises in."""
    _UNALARMED.add(fn.__code__)
    return fn


def in_unalarmed(frame: FrameType | None) -> bool:
    """Whether a function marked ``unalarmed`` is running on the stack that ``frame`` ends."""
    while frame is not None:
        if frame.f_code in _UNALARMED:
            return True
        frame = frame.f_back
    return False


__all__ = ["in_unalarmed", "unalarmed"]
