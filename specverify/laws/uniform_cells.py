"""The exact law of a deterministic function of one float32 uniform, by scanning and bisection.

A verification kernel that takes its uniforms as inputs is a deterministic function of them.
Along one uniform (the others held fixed) its output is piecewise constant: it changes only at
thresholds (an acceptance ratio, the cumulative sums the emitted token is read from). This
module finds those pieces for many independent problems at once:

1. ``probe_points``: for each problem, the float32 values to try first: every breakpoint the
   claimed rule has (both sides of it: the value itself and the float32 just below), the
   midpoints between consecutive breakpoints, a regular grid, and the extremes 0 and 1 - 2^-24.
2. ``segments``: evaluates every probe (one batched call of ``evaluate`` per round), then, between
   two adjacent probes with different labels, bisects on the float32 bit patterns until the two
   are neighbouring floats: the change point is exact on the float32 grid, wherever the kernel
   puts it (another comparison, another precision, another vocabulary order).

The measure of a piece [a, b) is b - a (the continuous uniform); on a generator's float32 grid
(``torch.rand``: multiples of 2^-24) it differs by at most 2^-24 per boundary. What the scan
assumes, stated: between two adjacent probes with the same label the function does not change
and change back (the probes include both ends and the middle of every cell of the claimed rule,
so such a kernel would have to map part of one cell to another token and then back). Knows
nothing of kernels: ``evaluate(problem_ids, values) -> int labels``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FLOAT32_ONE_MINUS = np.float32(1.0 - 2.0**-24)
"""The largest float32 below 1: ``torch.rand``'s largest value."""
GRID_POINTS = 64
"""Regular probes per problem besides the rule's breakpoints."""


def to_bits(values: ArrayLike) -> NDArray[np.int64]:
    """Float32 values in [0, 1] as their int64 bit patterns (monotone for non-negative floats)."""
    return np.asarray(values, dtype=np.float32).view(np.int32).astype(np.int64)


def from_bits(bits: ArrayLike) -> NDArray[np.float32]:
    return np.asarray(bits, dtype=np.int64).astype(np.int32).view(np.float32)


def probe_points(breakpoints: ArrayLike, grid: int = GRID_POINTS) -> NDArray[np.float32]:
    """Sorted unique float32 probes in [0, 1) for one problem: each breakpoint b in (0, 1) and
    the float32 just below it, the midpoints between consecutive breakpoints, ``grid`` regular
    points, 0 and 1 - 2^-24."""
    b = np.asarray(breakpoints, dtype=np.float64).ravel()
    b = np.unique(np.clip(b[np.isfinite(b)], 0.0, 1.0))
    edges = np.unique(np.concatenate([[0.0, 1.0], b]))
    mids = (edges[:-1] + edges[1:]) / 2
    at = b.astype(np.float32)
    below = np.nextafter(at, np.float32(0))
    pts = np.concatenate(
        [
            at,
            below,
            mids.astype(np.float32),
            np.linspace(0, 1, grid, endpoint=False, dtype=np.float32),
            [np.float32(0), FLOAT32_ONE_MINUS],
        ]
    ).astype(np.float32)
    pts = pts[(pts >= 0) & (pts < 1)]
    return np.unique(pts)


@dataclass
class Pieces:
    """One problem's pieces: ``starts[i]`` (float32) begins piece i, which runs to
    ``starts[i + 1]`` (or 1); ``labels[i]`` is the function's value there."""

    starts: NDArray[np.float32]
    labels: NDArray[np.int64]

    def measures(self) -> NDArray[np.float64]:
        ends = np.append(self.starts[1:].astype(np.float64), 1.0)
        return ends - self.starts.astype(np.float64)

    def label_at(self, values: ArrayLike) -> NDArray[np.int64]:
        """The piece's label at each value (the function's value there, by the scan)."""
        i = np.searchsorted(self.starts, np.asarray(values, dtype=np.float32), side="right") - 1
        return self.labels[np.clip(i, 0, len(self.labels) - 1)]

    def law(self) -> dict[int, float]:
        """label -> total measure."""
        out: dict[int, float] = {}
        for label, m in zip(self.labels.tolist(), self.measures().tolist()):
            out[label] = out.get(label, 0.0) + m
        return out


def segments(
    evaluate: Callable[[NDArray[np.int64], NDArray[np.float32]], ArrayLike], probes: list[NDArray[np.float32]]
) -> list[Pieces]:
    """The pieces of every problem (``probes[i]``: problem i's sorted float32 probes; the first
    must be 0). ``evaluate(problem_ids, values)`` returns one int label per (problem, value);
    it is called once for all probes, then once per bisection round for every open interval."""
    ids = np.concatenate([np.full(len(p), i, dtype=np.int64) for i, p in enumerate(probes)])
    vals = np.concatenate(probes).astype(np.float32)
    labels = np.asarray(evaluate(ids, vals), dtype=np.int64)
    known = {i: dict(zip(to_bits(p).tolist(), labels[ids == i].tolist())) for i, p in enumerate(probes)}
    # open intervals (problem, lo_bits, hi_bits) whose ends have different labels
    open_: list[tuple[int, int, int]] = []
    for i, table in known.items():
        bits = sorted(table)
        open_ += [(i, a, b) for a, b in zip(bits, bits[1:]) if table[a] != table[b]]
    while open_:
        narrow = [(i, a, b) for i, a, b in open_ if b - a > 1]
        if not narrow:
            break
        mids = np.array([(a + b) // 2 for _, a, b in narrow], dtype=np.int64)
        got = np.asarray(evaluate(np.array([i for i, _, _ in narrow], dtype=np.int64), from_bits(mids)), dtype=np.int64)
        nxt = []
        for (i, a, b), m, lab in zip(narrow, mids.tolist(), got.tolist()):
            known[i][m] = lab
            if lab != known[i][a]:
                nxt.append((i, a, m))
            if lab != known[i][b]:
                nxt.append((i, m, b))
        open_ = nxt
    out = []
    for i in range(len(probes)):
        bits = sorted(known[i])
        labs = [known[i][b] for b in bits]
        keep = [0] + [j for j in range(1, len(bits)) if labs[j] != labs[j - 1]]
        out.append(
            Pieces(
                from_bits(np.array([bits[j] for j in keep], dtype=np.int64)),
                np.array([labs[j] for j in keep], dtype=np.int64),
            )
        )
    return out


__all__ = ["FLOAT32_ONE_MINUS", "GRID_POINTS", "Pieces", "from_bits", "probe_points", "segments", "to_bits"]
