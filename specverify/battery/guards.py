"""The subject's side of every battery: what runs in the subject's process (``runner.Runner.call``)
around the subject's own code, or in-process for the experiments' own samplers.

Contract: whatever the subject does (raise, exit, hang in Python, return junk, however hostile its
objects' reprs, strs, lengths and iterations) becomes ``ContractBreach`` with a message that is a
plain str, never an exception of ours escaping a task. ``call_subject`` calls it (whatever the call
raises, ``SystemExit`` and, in the subject's process, ``KeyboardInterrupt`` included, becomes
``ContractBreach``); ``time_limit`` interrupts a Python-level overrun (nested SIGALRM deadlines; a
hang in C is the runner's to kill); ``reading`` and the readers built on it (``items_of``,
``token_id``, ``plain_tokens``, ``as_sequence``) read what it returned; ``show``, ``type_name``,
``describe_exception`` and ``message_of`` put it into words that survive hostile reprs, strs and
lone surrogates. The time limits' own exceptions (``PASSED_THROUGH``: a ``ContractBreach``, the
enumerator's ``NotEnumerable``, ``GuardStopped``) pass through every guard unchanged. The parent's
side (``subject_calls.call_within``) turns a ``ContractBreach`` into a contract finding.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

import numpy as np

from ..common.alarm_safe import in_unalarmed, unalarmed
from ..laws import exact
from . import runner
from .environment import import_site_note


class ContractBreach(Exception):
    """The sampler broke the interface: raised, exited, hung, returned junk or wrote its inputs."""


_DEADLINES: list[tuple[float, str, type]] = []  # nested time limits, innermost last


REFIRE_S = 0.01
"""Seconds after which an expired limit raises again while its body is still running: Python
ignores an exception raised in a garbage-collector callback or a ``__del__`` (where the alarm
may land), so one alarm alone could let an overrunning body run to its end."""


def _arm() -> None:
    if not _DEADLINES:  # the last limit ended while the alarm was being handled
        return
    remaining = min(d for d, _, _ in _DEADLINES) - time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-4))


def _on_alarm(signum, frame):
    if _DEADLINES and in_unalarmed(frame):  # bookkeeping that must finish (common.alarm_safe): again soon
        signal.setitimer(signal.ITIMER_REAL, REFIRE_S)
        return
    now = time.monotonic()
    for deadline, what, exc in _DEADLINES:  # the outermost expired limit wins
        if deadline <= now + 1e-3:
            signal.setitimer(signal.ITIMER_REAL, REFIRE_S)  # again, should this raise be swallowed
            raise exc(what)
    _arm()


@contextmanager
@unalarmed  # its set-up and its finally (the body runs while it is suspended, off the stack)
def time_limit(seconds: float, what: str, exc: type = ContractBreach):
    """Raise ``exc(f"{what} did not return within {seconds} s")`` if the body overruns.

    SIGALRM based (a Python-level loop is interrupted; a loop that swallows the exception or
    hangs in C is the runner's to kill); nests; a no-op outside the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if not _DEADLINES:
        signal.signal(signal.SIGALRM, _on_alarm)
    _DEADLINES.append((time.monotonic() + seconds, f"{what} did not return within {seconds:g} s", exc))
    _arm()
    try:
        yield
    finally:
        _DEADLINES.pop()
        if _DEADLINES:
            _arm()
        else:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)


SHOW_CHARS = 120
"""The most characters of a subject's object (its repr) a message shows."""

MESSAGE_CHARS = 500
"""The most characters of a subject's exception message a finding shows."""


class GuardStopped(Exception):
    """A guard's clock stopped a task (``time_limit(..., exc=GuardStopped)``): not a refusal of
    the enumerator, not the subject's failure, and not evidence about the subject."""


PASSED_THROUGH = (ContractBreach, exact.NotEnumerable, GuardStopped)
"""What ``time_limit`` raises (these exact types): never swallowed while describing junk."""


def _plain(text, limit: int) -> str:
    """``text`` (a str or a subclass) as a plain str that encodes as UTF-8 (lone surrogates
    backslash-escaped), cut at ``limit`` characters."""
    out = str.__str__(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return out if len(out) <= limit else out[:limit] + "..."


def with_article(noun: str) -> str:
    """``noun`` after "a" or "an", by its first sound: "an int", "an ndarray" (said "en-dee"), "a
    float", "a list". A vowel letter, or a name spoken letter by letter that starts with one
    (``SPELT_WITH_AN``: NumPy's nd*), takes "an"; English's other exceptions, like "a unicode",
    are not among the type names messages show."""
    vowel_sound = noun[:1].lower() in "aeiou" or noun.lower().startswith(SPELT_WITH_AN)
    return f"{'an' if noun and vowel_sound else 'a'} {noun}"


SPELT_WITH_AN = ("nd",)
"""Beginnings of type names read as letters whose names start with a vowel sound ("en-dee")."""


def type_name(obj) -> str:
    """The name of ``obj``'s type, whatever its metaclass does."""
    try:
        name = type(obj).__name__
        if isinstance(name, str):
            return _plain(name, SHOW_CHARS)
    except BaseException as exc:  # noqa: BLE001 - a hostile metaclass
        if type(exc) in PASSED_THROUGH:
            raise
    return "object"


def show(obj, limit: int = SHOW_CHARS) -> str:
    """``repr(obj)`` for a message, cut at ``limit`` characters; a repr that raises (or an int too
    long to print) gives ``<TYPE object>``."""
    try:
        return _plain(repr(obj), limit)
    except BaseException as exc:  # noqa: BLE001 - a hostile __repr__
        if type(exc) in PASSED_THROUGH:
            raise
    return f"<{type_name(obj)} object>"


def describe_exception(exc: BaseException) -> str:
    """``"TYPE: message"`` for an exception a subject raised; when its ``str()`` raises, its repr,
    and when that raises too, the type alone (both failures said). When the exception carries a
    traceback (it was raised), `` (at FILE:LINE in FUNCTION)`` follows: the innermost frame of the
    subject's own code, i.e. neither specverify's harness (battery, interfaces, laws, common) nor
    the standard library or an installed package (NumPy raising inside a kernel is placed at the
    kernel's line that called it; specverify's own samplers and mutants are subjects' code); the
    innermost frame outside the harness where every one is a library's. FILE is a base name."""
    import os
    import sysconfig
    import traceback

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    harness = tuple(os.path.join(package, part) + os.sep for part in ("battery", "interfaces", "laws", "common"))
    paths = sysconfig.get_paths()
    libraries = tuple(
        {os.path.abspath(paths[key]) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    )

    def words() -> str:
        name = type_name(exc)
        try:
            text = _plain(str(exc), MESSAGE_CHARS)
            return f"{name}: {text}" if text else name
        except BaseException as err:  # noqa: BLE001 - a hostile __str__
            if type(err) in PASSED_THROUGH:
                raise
        try:
            return f"{name} (its str() raised; repr: {_plain(repr(exc), MESSAGE_CHARS)})"
        except BaseException as err:  # noqa: BLE001 - a hostile __repr__
            if type(err) in PASSED_THROUGH:
                raise
        return f"{name} (its str() and repr() raised)"

    def frames_raised_through() -> list:
        try:
            return [
                (os.path.abspath(frame.f_code.co_filename), line, frame.f_code.co_name)
                for frame, line in traceback.walk_tb(exc.__traceback__)
            ]
        except BaseException as err:  # noqa: BLE001 - a hostile __traceback__
            if type(err) in PASSED_THROUGH:
                raise
            return []

    def is_subjects_code(path: str) -> bool:
        return path.startswith(package) or not path.startswith(libraries)

    def raise_site() -> str:
        outside = [f for f in frames_raised_through() if not f[0].startswith(harness)]
        own = [f for f in outside if is_subjects_code(f[0])]
        if not outside:
            return ""
        path, line, function = (own or outside)[-1]
        return f" (at {_plain(os.path.basename(path), SHOW_CHARS)}:{line} in {_plain(function, SHOW_CHARS)})"

    return words() + raise_site() + import_site_note(exc)


def message_of(exc: BaseException) -> str:
    """The message of a ContractBreach (or NotEnumerable) as a plain str, whoever raised it: a task
    sends this, never ``str(exc)``, back to the parent."""
    try:
        if type(exc) in PASSED_THROUGH:
            return _plain(str(exc), 4 * MESSAGE_CHARS)
    except BaseException:  # noqa: BLE001 - raised by the subject with a hostile argument
        pass
    try:
        return f"raised {describe_exception(exc)}"
    except BaseException:  # noqa: BLE001 - nothing may escape a task
        return "raised an exception that cannot be described"


@contextmanager
def reading(what: str):
    """Reading what a subject returned (its ``__len__``, ``__iter__``, ``__int__``, ``tolist``, a
    property, ...): whatever that raises becomes ``ContractBreach(f"{what} raised ...")``. The time
    limits' own exceptions pass; a KeyboardInterrupt passes outside the subject's process."""
    try:
        yield
    except PASSED_THROUGH:
        raise
    except KeyboardInterrupt as exc:
        if not runner.IN_SUBJECT_PROCESS:
            raise
        raise ContractBreach(f"{what} raised KeyboardInterrupt") from exc
    except BaseException as exc:  # noqa: BLE001 - the subject's junk is a finding
        raise ContractBreach(f"{what} raised {describe_exception(exc)}") from exc


GUARD_PREFIX = "stopped by a guard: "
"""How the words of whatever a guard stopped begin (a task, a case's runs), in every interface:
what the parent reports as not judged, never as a finding."""


def stopped_by_guard(words: str) -> bool:
    """Whether ``words`` (why a task ended early) are a guard's, not a breach's."""
    return words.startswith(GUARD_PREFIX)


def guard_reason(exc: BaseException) -> str:
    """What a guard's GuardStopped says, without the ``GUARD_PREFIX`` the parent's idle guard
    puts before it (``subject_calls.call_within``)."""
    words = message_of(exc)
    return words[len(GUARD_PREFIX) :] if stopped_by_guard(words) else words


def items_of(seq, what: str, limit: int) -> tuple[int, list]:
    """(``len(seq)``, its items) of a list or tuple (or a subclass) the subject returned, read
    once: its ``len()`` and its iteration must agree. Past ``limit`` items only ``limit`` + 1 are
    read (the caller refuses that many)."""
    with reading(f"{what} {with_article(type_name(seq))} whose len()"):
        n = int.__index__(len(seq))
    with reading(f"{what} {with_article(type_name(seq))} whose iteration"):
        items = list(itertools.islice(iter(seq), min(n, limit) + 1))
    if n <= limit and len(items) != n:
        raise ContractBreach(
            f"{what} {with_article(type_name(seq))} whose len() is {n} but which iterates "
            f"{'more' if len(items) > n else len(items)} items"
        )
    return n, items


def token_id(t, vocab_size: int, what: str) -> int:
    """``t`` as an int in [0, vocab_size): an int or NumPy integer, not a bool; its ``int()`` is
    called once (a subclass may answer differently each time)."""
    with reading(f"{what} {with_article(type_name(t))}; checking its type"):
        is_int = not isinstance(t, bool) and isinstance(t, (int, np.integer))
    if not is_int:
        raise ContractBreach(f"{what} {with_article(type_name(t))} ({show(t)}), not an int token id")
    with reading(f"{what} {with_article(type_name(t))} whose int()"):
        v = int(t)
    if not 0 <= v < vocab_size:
        raise ContractBreach(f"{what} token {show(v)}, outside the vocabulary [0, {vocab_size})")
    return v


PLAIN_INTS = frozenset({int, *(np.dtype(c).type for c in "bBhHiIlLqQ")})
"""Token types that run no code of the subject's when read (``type(t) in PLAIN_INTS``)."""


def plain_tokens(seq, vocab_size: int) -> list[int] | None:
    """The fast path: ``seq`` as a list of ints when it is a list or tuple (exactly those types)
    of plain ints in [0, vocab_size), else None (read it carefully). Runs no subject code."""
    if type(seq) is not list and type(seq) is not tuple:
        return None
    for t in seq:
        if type(t) not in PLAIN_INTS or not 0 <= t < vocab_size:
            return None
    return [int(t) for t in seq]


def as_sequence(seq, what: str) -> tuple[object, bool]:
    """(``seq``, or its ``tolist()`` for a NumPy / torch array, and whether that is a list or
    tuple), read under ``reading``: whatever the subject's object raises is ContractBreach."""
    with reading(f"{what} {with_article(type_name(seq))}; reading it"):
        if not isinstance(seq, (list, tuple)) and hasattr(seq, "tolist"):  # NumPy / torch
            with reading(f"{what} {with_article(type_name(seq))} whose tolist()"):
                seq = seq.tolist()
        return seq, isinstance(seq, (list, tuple))


def call_subject(fn: Callable, args: tuple, interrupt_after: float | None = None, overrun: type = ContractBreach):
    """``fn(*args)``; whatever it raises (SystemExit and, in the subject's process,
    KeyboardInterrupt included) becomes ContractBreach; ``interrupt_after`` seconds interrupt it
    (SIGALRM) with ``overrun`` (ContractBreach, or GuardStopped where an overrun is a hang to stop,
    not a finding). Every call that ends, however, counts as progress (``runner.progressed``:
    the runner's idle guard stops a task only when none has ended for a while)."""
    try:
        if interrupt_after is None:
            return fn(*args)
        with time_limit(interrupt_after, "one call", overrun):
            return fn(*args)
    except (ContractBreach, exact.NotEnumerable, GuardStopped):
        raise  # a time limit, a guard or the enumerator's refusal (the tasks take their message safely)
    except KeyboardInterrupt as exc:
        if not runner.IN_SUBJECT_PROCESS:
            raise
        raise ContractBreach("raised KeyboardInterrupt") from exc
    except SystemExit as exc:
        raise ContractBreach(f"called sys.exit({_exit_code(exc)}) (raised SystemExit)") from exc
    except BaseException as exc:  # noqa: BLE001 - the subject's failure is a finding
        raise ContractBreach(f"raised {describe_exception(exc)}") from exc
    finally:
        runner.progressed()


def _exit_code(exc: SystemExit) -> str:
    try:
        return show(exc.code)
    except BaseException:  # noqa: BLE001 - a SystemExit subclass with a hostile ``code``
        return "?"
