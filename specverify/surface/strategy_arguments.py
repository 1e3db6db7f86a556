"""The size arguments and the seeds of ``specverify.strategies`` (a vocabulary size, a table's order or period,
a request's max_tokens): None for the default range, an int, or a (min, max) pair, checked once
here with errors that name the argument (``specverify.errors.ArgumentError``)."""

from __future__ import annotations

import numbers

import numpy as np
from hypothesis import strategies as st
from numpy.typing import NDArray

from ..errors import ArgumentError

DEFAULT_VOCAB_SIZE = (1, 8)
"""Vocabulary sizes drawn when ``vocab_size=None``."""

IntRange = int | tuple[int, int] | None
"""A size argument: None (the default range), an int or a (min, max) pair."""

Vector = NDArray[np.float64]


def int_range(value: IntRange, name: str, minimum: int, default: tuple[int, int]) -> tuple[int, int]:
    """None -> default, an int -> (v, v), a (lo, hi) pair -> itself; checked against minimum."""
    if value is None:
        return max(default[0], minimum), default[1]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        lo = hi = int(value)
    elif (
        isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in value)
    ):
        lo, hi = int(value[0]), int(value[1])
    else:
        raise ArgumentError(f"{name}: expected None, an int or a (min, max) pair of ints, got {value!r}")
    if lo < minimum:
        raise ArgumentError(f"{name}: must be >= {minimum}, got {value!r}")
    if lo > hi:
        raise ArgumentError(f"{name}: min {lo} is larger than max {hi}")
    return lo, hi


def vocab_sizes(vocab_size: IntRange) -> st.SearchStrategy[int]:
    """Vocabulary sizes in ``vocab_size``'s range (``int_range``; default ``DEFAULT_VOCAB_SIZE``)."""
    return st.integers(*int_range(vocab_size, "vocab_size", 1, DEFAULT_VOCAB_SIZE))


def read_only(*arrays: Vector) -> tuple[Vector, ...]:
    """``arrays`` made read-only (a strategy's drawn arrays may not be changed by a test)."""
    for a in arrays:
        a.setflags(write=False)
    return arrays


def seeds() -> st.SearchStrategy[int]:
    """Seeds for ``numpy.random.default_rng``, drawn by Hypothesis so a failure replays and
    shrinks (towards 0) with the rest of the example."""
    return st.integers(0, 2**32 - 1)


__all__ = ["DEFAULT_VOCAB_SIZE", "IntRange", "Vector", "int_range", "read_only", "seeds", "vocab_sizes"]
