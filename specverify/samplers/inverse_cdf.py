"""The exact rule with every token drawn by inverse CDF, as engines' kernels draw (NumPy).

Leviathan, Kalman, Matias (arXiv 2211.17192), Algorithm 1, written the way a kernel writes it
rather than with ``rng.choice``: each token is ``searchsorted(cdf, u, side='right')`` of one
uniform u against the cumulative sums (divided by their last entry, as ``Generator.choice`` does
inside, so that u < 1 never runs past the last token), and draft x is accepted when
``u * q(x) < p(x)`` (probability min(1, p(x) / q(x))). The exact enumerator follows every one of
these draws as cells of [0, 1) (``laws.threshold_cells``), so their law is exact, not sampled.
``speculative_step`` draws with ``rng.random()`` and ``np.searchsorted``; its torch form is
``samplers.torch_inverse_cdf``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..common.validation import check_k
from ..laws.arrays import DistFn
from .chain import Rng, model_output


def inverse_cdf(w: np.ndarray, u) -> int:
    """The token of the non-negative weights w that the uniform u selects: ``searchsorted`` of u
    in the cumulative sums divided by their last entry (``side='right'``: a zero-weight token is
    never selected)."""
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    return int(np.searchsorted(cdf, u, side="right"))


def speculative_step(p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng) -> list[int]:
    """One round of the rule (1 to k + 1 tokens distributed as p), every token by inverse CDF."""
    start, k = tuple(prefix), check_k(k)
    drafts: list[int] = []
    qs: list[np.ndarray] = []
    for _ in range(k):
        q = np.asarray(model_output("q_fn", q_fn, start + tuple(drafts)), dtype=np.float64)
        drafts.append(inverse_cdf(q, rng.random()))
        qs.append(q)
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = np.asarray(model_output("p_fn", p_fn, start + tuple(drafts[:i])), dtype=np.float64)
        if rng.random() * q[x] < p[x]:  # accepted with probability min(1, p(x) / q(x))
            continue
        return drafts[:i] + [inverse_cdf(np.maximum(p - q, 0.0), rng.random())]
    p = np.asarray(model_output("p_fn", p_fn, start + tuple(drafts)), dtype=np.float64)
    return drafts + [inverse_cdf(p, rng.random())]


__all__ = ["inverse_cdf", "speculative_step"]
