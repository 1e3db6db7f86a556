"""The exact rule with every token drawn by inverse CDF, in torch, as engines' kernels draw.

``samplers.inverse_cdf.speculative_step`` (Leviathan, Kalman, Matias, arXiv 2211.17192) on batch-1
float64 tensors, its randomness from a ``torch.Generator`` seeded from ``rng.integers(2**63)`` (an
engine's per-request generator): the drafts by ``torch.searchsorted(cdf, u, right=True)``, the
residual's and the bonus token by ``(cdf > u).int().argmax()``, the coins ``torch.rand(1) * q(x) <
p(x)``; the cumulative sums divided by their last entry. The exact enumerator follows each of these
(``laws.torch_random``: a uniform against a row of thresholds is one cell of [0, 1)). Needs torch
(the ``models`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..common.validation import check_k
from ..laws.arrays import DistFn
from .chain import Rng, model_output


def torch_speculative_step(p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng) -> list[int]:
    """One round of the rule (1 to k + 1 tokens distributed as p), every token by inverse CDF in
    torch (module docstring), from one generator seeded from ``rng``."""
    generator = torch.Generator().manual_seed(int(rng.integers(2**63)))
    start, k = tuple(prefix), check_k(k)

    def row(fn: DistFn, name: str, context: tuple[int, ...]):
        return torch.tensor(np.asarray(model_output(name, fn, context), dtype=np.float64))

    def uniform():
        return torch.rand(1, generator=generator, dtype=torch.float64)

    def cdf(w):
        c = torch.cumsum(w, 0)
        return c / c[-1]

    drafts: list[int] = []
    qs = []
    for _ in range(k):
        q = row(q_fn, "q_fn", start + tuple(drafts))
        drafts.append(int(torch.searchsorted(cdf(q), uniform(), right=True)))
        qs.append(q)
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = row(p_fn, "p_fn", start + tuple(drafts[:i]))
        if bool(uniform() * q[x] < p[x]):
            continue
        return drafts[:i] + [int((cdf(torch.clamp(p - q, min=0.0)) > uniform()).int().argmax())]
    p = row(p_fn, "p_fn", start + tuple(drafts))
    return drafts + [int((cdf(p) > uniform()).int().argmax())]


__all__ = ["torch_speculative_step"]
