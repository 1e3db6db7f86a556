"""The names of the types the laws and the samplers pass around, for their annotations.

A probability row is a float64 vector (``Vector``), a table of rows a float64 matrix
(``Table``); a prefix is a sequence of token ids (``Prefix``: a tuple, a list); ``p_fn`` and
``q_fn`` map a prefix to the next token's row (``DistFn``). Arguments that a function checks
itself at run time (``common.validation``) take what that check accepts: ``Real`` (a Python or
NumPy real), ``Integer`` (a Python or NumPy integer) and ``numpy.typing.ArrayLike`` for vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

Vector: TypeAlias = NDArray[np.float64]
"""A probability row (or any float64 vector)."""

Table: TypeAlias = NDArray[np.float64]
"""Rows of probabilities, one per context (2-D float64)."""

Prefix: TypeAlias = Sequence[int]
"""The tokens so far."""

DistFn: TypeAlias = Callable[[Prefix], Vector]
"""``p_fn`` / ``q_fn``: the next token's distribution after a prefix."""

Real: TypeAlias = float | np.floating[Any]
"""A real number argument, checked at run time (an int is a float to the type checker)."""

Integer: TypeAlias = int | np.integer[Any]
"""An integer argument, checked at run time."""


def normalized(v: Vector) -> Vector:
    """``v / v.sum()``: the row rescaled to sum 1 (numpy's stubs type a sum as Any; this names
    the result's type once)."""
    out: Vector = v / v.sum()
    return out


__all__ = ["DistFn", "Integer", "Prefix", "Real", "Table", "Vector", "normalized"]
