"""Closed-form theory of speculative decoding (NumPy only).

Notation: p = target, q = draft, k = drafted tokens per round (the handout's gamma),
alpha = sum_x min(p(x), q(x)) = 1 - TV(p, q), c = draft step time / target step time.

Under i.i.d. acceptance with probability alpha (Leviathan et al. 2023, arXiv 2211.17192, eq. 1
and Theorem 3.8; Chen et al. 2023, arXiv 2302.01318):

    E[tokens per target pass] = sum_{i=0}^{k} alpha^i = (1 - alpha^(k+1)) / (1 - alpha)
    speedup                   = E[tokens] / (k c + 1)

Speculation pays only when speedup > 1, i.e. c < (E[tokens] - 1) / k.

The denominator assumes the target scores k + 1 positions for the price of one. On a GPU that
holds while the forward is memory-bound; on a CPU it does not (a forward over 4
positions of a 1.5B model in fp32 costs about 3 single steps: docs/REAL_MODELS.md). With v(k) = the time of a target forward over k + 1 new
positions in target single steps (v(0) = 1),

    speedup = E[tokens] / (k c + v(k)),  and k = 0 (no speculation) scores exactly 1,

which ``speedup_with_costs`` and ``best_k_with_costs`` compute.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..common.validation import check_alpha, check_cost_ratio, check_k, check_prob_vector, check_same_length
from .arrays import Integer, Real, Vector


def acceptance_rate(p: ArrayLike, q: ArrayLike) -> float:
    """alpha = sum_x min(p(x), q(x)), the per-position acceptance probability."""
    p = check_prob_vector("p", p)
    q = check_prob_vector("q", q)
    check_same_length("p", p, "q", q)
    return float(np.minimum(p, q).sum())


def expected_tokens(alpha: Real, k: Integer) -> float:
    """Expected tokens per round (accepted drafts + 1), 1.0 at alpha 0 and k + 1 at alpha 1."""
    a = check_alpha(alpha)
    k = check_k(k)
    if a == 1.0:
        return float(k + 1)
    # the geometric sum written as a sum avoids 0/0 and loses no accuracy near alpha = 1
    return float(sum(a**i for i in range(k + 1)))


def expected_speedup(alpha: Real, k: Integer, cost_ratio: Real) -> float:
    """Modelled wall-clock speedup over target-only decoding: E[tokens] / (k c + 1)."""
    c = check_cost_ratio(cost_ratio)
    return expected_tokens(alpha, k) / (check_k(k) * c + 1.0)


def best_k(alpha: Real, cost_ratio: Real, max_k: Integer = 32) -> int:
    """The k in 1..max_k with the highest modelled speedup (the smallest on ties).

    It may still be a slowdown: compare ``expected_speedup`` with 1, or ``cost_ratio`` with
    ``break_even_cost(alpha, k)``, to decide whether to speculate at all.
    """
    max_k = check_k(max_k, "max_k")
    speedups = [expected_speedup(alpha, k, cost_ratio) for k in range(1, max_k + 1)]
    return int(np.argmax(speedups)) + 1


def break_even_cost(alpha: Real, k: Integer) -> float:
    """The cost ratio c below which k drafts pay off: (E[tokens] - 1) / k."""
    return (expected_tokens(alpha, k) - 1.0) / check_k(k)


def check_verify_costs(verify_costs: ArrayLike) -> Vector:
    """v(0..K) as float64: v[k] is a target forward over k + 1 positions in target steps."""
    v = np.asarray(verify_costs, dtype=np.float64)
    if v.ndim != 1 or v.size < 1:
        raise ValueError(f"verify_costs: must be a 1-D sequence v(0), v(1), ..., got shape {v.shape}")
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError(f"verify_costs: every entry must be finite and > 0, got {v.tolist()}")
    return v


def speedup_with_costs(alpha: Real, k: Integer, cost_ratio: Real, verify_cost: Real) -> float:
    """E[tokens] / (k c + v): the modelled speedup with a measured verification cost v = v(k).

    k = 0 is no speculation: one target step per token, speedup 1 / v(0) (1 when v(0) = 1).
    """
    c = check_cost_ratio(cost_ratio)
    v = float(check_verify_costs([float(verify_cost)])[0])
    if isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k == 0:
        return 1.0 / v
    k = check_k(k)
    return expected_tokens(alpha, k) / (k * c + v)


def best_k_with_costs(alpha: Real, cost_ratio: Real, verify_costs: ArrayLike) -> int:
    """The k in 0..len(verify_costs) - 1 with the highest ``speedup_with_costs`` (smallest on ties).

    0 means: do not speculate, the measured costs say no k pays.
    """
    v = check_verify_costs(verify_costs)
    speedups = [speedup_with_costs(alpha, k, cost_ratio, v[k]) for k in range(v.size)]
    return int(np.argmax(speedups))
