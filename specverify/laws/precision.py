"""The working precision of a subject: observed while the enumerator follows it, or stated.

While ``laws.exact`` enumerates a subject, it notes (``note``) the dtypes of the numbers the
subject's random decisions are made against: a NumPy threshold compared with a symbolic uniform,
``rng.choice``'s weights, and under ``laws.torch_random`` torch's ``rand`` dtype, the tensors
compared with a random value and ``multinomial``'s weights. Each round's law comes back as an
``ObservedLaw`` carrying the precisions seen (a ``SubrunMemo`` notes again, on a replay, what its
sub-runs computed in). ``working_precision`` reads them: the widest precision below float64 seen,
else float64 (the battery's p and q rows are float64, so seeing float64 says nothing of the
subject; a float16 ratio inside float32 code is judged at float32, the rest of its code). A user
states it where it cannot be seen (``stated``: ``specverify check --precision``,
``api.check(precision=)``, the pytest fixture); a stated precision wins. ``laws.rounding`` judges
an exact TV at that precision.

Standard library only at import (NumPy is imported where a dtype object must be recognised):
the ``check`` command line and ``surface.request`` check a stated precision before NumPy loads.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

from ..errors import ArgumentError

SIGNIFICAND_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}
"""Bits of each precision's significand, the implicit bit included."""

PRECISIONS = tuple(SIGNIFICAND_BITS)
"""The precisions a subject may be judged at, widest first."""


def check_precision(name: str, value) -> str:
    """``value`` if it names a precision of ``PRECISIONS``; ArgumentError naming ``name`` else."""
    if value not in SIGNIFICAND_BITS:
        raise ArgumentError(f"{name}: must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return value


_NAMES: dict = {}
"""dtype -> precision name or None, as ``precision_of`` found it (dtypes are few and hashable)."""


def precision_of(x) -> str | None:
    """The precision of a NumPy array, scalar or dtype, a torch tensor or dtype (by name, torch
    is not imported here), or a precision's name; None for Python numbers and anything not
    floating."""
    if isinstance(x, str):
        return x if x in SIGNIFICAND_BITS else None  # a name already (a memo's replayed notes)
    try:
        dtype = getattr(x, "dtype", None)
    except Exception:  # noqa: BLE001 - a subject's object whose dtype raises: no precision seen
        return None
    if dtype is None:
        import numpy as np  # here: this module loads without NumPy (module docstring)

        if not (isinstance(x, np.dtype) or type(x).__name__ == "dtype"):  # a NumPy or torch dtype itself
            return None  # a Python number, a list: no precision of its own, nothing cached
        dtype = x
    try:
        return _NAMES[dtype]
    except (KeyError, TypeError):
        pass
    try:
        text = str(dtype).removeprefix("torch.")
    except Exception:  # noqa: BLE001 - a dtype attribute that is not one
        return None
    text = {"half": "float16", "float": "float32", "double": "float64"}.get(text, text)
    name = text if text in SIGNIFICAND_BITS else None
    try:
        _NAMES[dtype] = name
    except TypeError:  # not hashable: not a dtype
        pass
    return name


# ------------------------------------------------------------------------- observing


_OBSERVING: list[set] = []
"""The precisions being gathered, innermost last: a note goes to each (nested enumerations)."""


def note(x) -> None:
    """Record the precision of ``x`` (``precision_of``) in every ``observing`` block open."""
    if _OBSERVING and type(x) is not float:
        name = precision_of(x)
        if name is not None:
            for seen in _OBSERVING:
                seen.add(name)


def note_all(values) -> None:
    """``note`` each of ``values``."""
    if _OBSERVING:
        for x in values:
            note(x)


@contextmanager
def observing():
    """A set that gathers the precisions noted while the block runs."""
    seen: set = set()
    _OBSERVING.append(seen)
    try:
        yield seen
    finally:
        _OBSERVING.remove(seen)


@contextmanager
def unobserved():
    """Notes inside the block go nowhere (the parent's own reference enumerations)."""
    saved = _OBSERVING[:]
    _OBSERVING.clear()
    try:
        yield
    finally:
        _OBSERVING[:] = saved


class ObservedLaw(dict):
    """An exact law ({outcome: probability}) with ``precisions``: the precisions noted while it
    was enumerated (a frozenset of names). Pickles with them, from the subject's process."""

    def __init__(self, law=(), precisions=frozenset()):
        super().__init__(law)
        self.precisions = frozenset(precisions)


def observed_law(law, *parts) -> ObservedLaw:
    """``law`` carrying the union of the precisions of ``parts`` (laws it was made from)."""
    return ObservedLaw(law, frozenset().union(*(getattr(p, "precisions", ()) for p in parts)))


def working_precision(precisions) -> str:
    """The precision a subject is judged at from those observed: the widest below float64, else
    float64 (the battery's rows are float64: seeing float64 tells nothing of the subject)."""
    lower = [p for p in PRECISIONS[1:] if p in set(precisions or ())]
    return lower[0] if lower else "float64"


_STATED: ContextVar[str | None] = ContextVar("specverify_stated_precision", default=None)


@contextmanager
def stated(precision: str | None):
    """Judge every exact law inside the block at ``precision`` (None: as an enclosing block
    states, else as observed)."""
    if precision is None:
        yield
        return
    token = _STATED.set(check_precision("precision", precision))
    try:
        yield
    finally:
        _STATED.reset(token)


def stated_precision() -> str | None:
    """The precision stated for the laws judged now (``stated``), or None."""
    return _STATED.get()


__all__ = [
    "PRECISIONS",
    "SIGNIFICAND_BITS",
    "ObservedLaw",
    "check_precision",
    "note",
    "note_all",
    "observed_law",
    "observing",
    "precision_of",
    "stated",
    "stated_precision",
    "unobserved",
    "working_precision",
]
