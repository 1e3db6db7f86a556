"""Cells of [0, 1): one uniform compared with many thresholds at once, as one decision.

Inverse-CDF code draws a token as ``searchsorted(cumsum(w), u)`` or ``(cumsum(w) > u).argmax()``:
one uniform u compared with every cumulative sum. Whatever such code reads (the index, the mask,
its argmax or sum), it is a function of which cell of the sorted thresholds u lies in. So the
enumerator decides the cell once: the thresholds strictly inside the interval [lo, hi) that
earlier comparisons on this path left u cut it into cells; the cell [e, f) is taken with
probability (f - e) / (hi - lo), u's interval narrows to it, and every comparison ``u < t`` is then
known: True exactly when t >= f. Ties have probability 0 for a continuous uniform, so
``side='left'`` and ``side='right'``, ``<`` and ``<=`` give the same law (on a float64 generator's
grid of 2^-53 they differ by at most 2^-53 per threshold). The same idea as the kernel interface's
uniform cells (``laws.uniform_cells``), inside the enumerator.

Over more cells than the rng may branch over at once (``max_branching``), the cell is found by
bisection: binary decisions on the middle threshold, then one decision among the cells left, so
the law is the same and every decision stays within the cap.

``subject_line`` names the line of the subject's code that made the current call (the innermost
frame outside the enumerator, NumPy, torch and the standard library), so that a refusal of a use
no cell can express says where it is.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types

import numpy as np


def cell_below(rng, lo: float, hi: float, thresholds: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Decide the cell of [lo, hi) a uniform lies in among ``thresholds`` (float64, in the
    uniform's own scale; NaN ones are never below). Returns (the cell's lo, its hi, below) with
    below[j] = (u < thresholds[j]) on the cell. Branches through ``rng.decide`` only when some
    threshold lies strictly inside (lo, hi)."""
    t = np.asarray(thresholds, dtype=np.float64)
    inside = np.unique(t[(t > lo) & (t < hi)])  # sorted; NaN fails both tests
    bounds = np.concatenate(([lo], inside, [hi]))
    cap = max(2, rng.max_branching)
    while len(bounds) - 1 > cap:  # bisect down to at most cap cells
        mid = len(bounds) // 2
        w = (bounds[mid] - bounds[0]) / (bounds[-1] - bounds[0])
        bounds = bounds[: mid + 1] if rng.decide((w, 1.0 - w)) == 0 else bounds[mid:]
    if len(bounds) > 2:
        widths = np.diff(bounds)
        pick = rng.decide(tuple((widths / widths.sum()).tolist()))
        bounds = bounds[pick : pick + 2]
    lo, hi = float(bounds[0]), float(bounds[-1])
    with np.errstate(invalid="ignore"):
        return lo, hi, t >= hi


LAWS = os.path.normcase(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""The enumerator's own package: never the subject's code."""
STDLIB = tuple(
    os.path.normcase(p) + os.sep for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")} if p
)
"""The standard library's folders (``operator``, ``functools`` call through them)."""


def _outside_subject(filename: str) -> bool:
    """Whether a frame of this file is the enumerator's, NumPy's, torch's or the standard
    library's rather than the subject's (an installed engine is the subject's)."""
    name = os.path.normcase(filename)
    parts = name.split(os.sep)
    if name.startswith(("<frozen", "<__array_function__", LAWS) + STDLIB):
        return True  # the enumerator's own frames first: installed, they sit in site-packages too
    if "site-packages" in parts or "dist-packages" in parts:
        return "numpy" in parts or "torch" in parts
    return False


def subject_line() -> str | None:
    """Where the subject's code made the current call, as "FILE, line N": its innermost frame on
    the stack (None when none is found), FILE relative to the working directory when under it."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _outside_subject(filename):
            try:
                shown = os.path.relpath(filename)
            except ValueError:  # another drive
                shown = filename
            return f"{filename if shown.startswith('..') else shown}, line {frame.f_lineno}"
        frame = frame.f_back
    return None


def two_uniforms(what: str) -> str:
    """The plain sentence that refuses ``what`` of two random values (a comparison, a sum), with
    the subject's line."""
    where = subject_line()
    return (
        f"{where + ': ' if where else ''}{what} of two symbolic uniforms (two random values compared or "
        "combined with each other) is not modelled: no cell of [0, 1) of one uniform expresses it"
    )


__all__ = ["cell_below", "subject_line", "two_uniforms"]
