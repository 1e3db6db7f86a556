"""Input checks shared by every public function.

Each check raises ``ValueError`` (``TypeError`` for a non-integer k) whose message names the
argument and the problem, so a caller never gets a silent wrong answer or a deep NumPy traceback.

Probability vectors must sum to 1 within ``SUM_TOL`` (absolute). The tolerance is loose enough
for a float32 softmax over a 150k vocabulary (rounding error ~1e-6) and tight enough that an
unnormalized residual such as max(0, p - q) (which sums to 1 - alpha) is rejected.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

SUM_TOL = 1e-5


def check_prob_vector(name: str, v) -> np.ndarray:
    """Return ``v`` as a 1-D float64 array renormalized to sum exactly 1, or raise ValueError."""
    try:
        arr = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not a numeric vector ({exc})") from None
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D probability vector, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name}: empty probability vector")
    total = float(arr.sum())
    # fast path: a finite sum and a non-negative minimum imply every entry is finite and >= 0
    if not (np.isfinite(total) and arr.min() >= 0):
        _raise_entry_error(name, arr)
    if abs(total - 1.0) > SUM_TOL:
        raise ValueError(f"{name}: sums to {total:.9g}, not 1 (tolerance {SUM_TOL:g})")
    return arr / total


def _raise_entry_error(name: str, arr: np.ndarray):
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name}: entry {bad} is {arr[bad]} (NaN or inf)")
    if np.any(arr < 0):
        bad = int(np.flatnonzero(arr < 0)[0])
        raise ValueError(f"{name}: entry {bad} is negative ({arr[bad]:.3g})")
    raise ValueError(f"{name}: the entries overflow when summed (sum is inf)")


def check_same_length(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} have different lengths ({a.shape[0]} and {b.shape[0]})"
        )


def check_k(k, name: str = "k") -> int:
    """k (the handout's gamma) must be an integer >= 1; bools and floats such as 2.0 are refused."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"{name}: must be an integer >= 1, got {k!r} of type {type(k).__name__}")
    if k < 1:
        raise ValueError(f"{name}: must be >= 1, got {k}")
    return int(k)


def check_alpha(alpha, name: str = "alpha") -> float:
    a = _real(alpha, name)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"{name}: must lie in [0, 1], got {a!r}")
    return a


def check_cost_ratio(c, name: str = "cost_ratio") -> float:
    v = _real(c, name)
    if v < 0:
        raise ValueError(f"{name}: must be >= 0 (draft step time / target step time), got {v!r}")
    return v


def _real(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name}: must be a real number, got {x!r}")
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(f"{name}: must be finite, got {v!r}")
    return v
