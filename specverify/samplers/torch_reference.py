"""The exact rule written in torch, as engines write it: one round per call, or a batch of rounds.

``speculative_step(p_fn, q_fn, prefix, k, rng)`` is the handout's round interface; its randomness
comes from a ``torch.Generator`` seeded from ``rng.integers(2**63)`` (an engine's per-request
generator), drawn with ``torch.multinomial`` (the drafts, the token after the last accepted
draft) and ``torch.rand`` (the acceptance coins), on batch-1 tensors. ``rounds(p_fn, q_fn,
prefixes, k, rng)`` is the same rule on a batch of B independent sequences (B x k x V tensors, one
call for all), declared as ``speculative_step.specverify_rounds`` so that the battery samples
through it (``interfaces.round_tasks.BATCH_ATTRIBUTE``).

Rule: Leviathan, Kalman, Matias (arXiv 2211.17192), Algorithm 1: accept draft x with probability
min(1, p(x) / q(x)); at the first rejection emit a token of the residual norm(max(p - q, 0)), after
k acceptances a bonus token of p. Needs torch (the ``models`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from ..laws.arrays import DistFn
from .chain import Rng

Tensor = Any
"""A torch tensor (torch is read as Any by the type check: pyproject.toml's [tool.mypy])."""


def _generator(rng: Rng) -> torch.Generator:
    return torch.Generator().manual_seed(int(rng.integers(2**63)))


def _rows(fn: DistFn, contexts: list[tuple[int, ...]]) -> Tensor:
    return torch.as_tensor(np.stack([np.asarray(fn(c), dtype=np.float64) for c in contexts]))


def batch_rounds(
    p_fn: DistFn, q_fn: DistFn, prefixes: Sequence[Sequence[int]], k: int, generator: torch.Generator
) -> list[list[int]]:
    """One round of the rule per prefix, all B at once, drawing from ``generator``."""
    contexts = [tuple(prefix) for prefix in prefixes]
    drafts: list[Tensor] = []
    qs: list[Tensor] = []
    ps: list[Tensor] = [_rows(p_fn, contexts)]
    for _ in range(k):
        q = _rows(q_fn, contexts)
        x = torch.multinomial(q, 1, generator=generator)[:, 0]
        contexts = [c + (int(t),) for c, t in zip(contexts, x.tolist())]
        drafts.append(x)
        qs.append(q)
        ps.append(_rows(p_fn, contexts))
    batch = len(prefixes)
    if k == 0:
        return [[int(t)] for t in torch.multinomial(ps[0], 1, generator=generator)[:, 0].tolist()]
    x = torch.stack(drafts, 1)  # B x k
    q, p = torch.stack(qs, 1), torch.stack(ps, 1)  # B x k x V, B x (k + 1) x V
    px = p[:, :k].gather(2, x[..., None])[..., 0]
    qx = q.gather(2, x[..., None])[..., 0]
    coins = torch.rand(batch, k, generator=generator, dtype=torch.float64)
    accepted = (coins < torch.clamp(px / qx, max=1.0)).long().cumprod(1).sum(1)  # B: drafts accepted
    rows = torch.arange(batch)
    at = torch.clamp(accepted, max=k - 1)
    residual = torch.clamp(p[rows, at] - q[rows, at], min=0.0)
    last = torch.where((accepted < k)[:, None], residual, p[:, k])
    emitted = torch.multinomial(last / last.sum(1, keepdim=True), 1, generator=generator)[:, 0]
    return [x[b, :n].tolist() + [int(t)] for b, (n, t) in enumerate(zip(accepted.tolist(), emitted.tolist()))]


def speculative_step(p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng) -> list[int]:
    """One round of the rule in torch (batch 1), its generator seeded from ``rng``."""
    return batch_rounds(p_fn, q_fn, [tuple(prefix)], k, _generator(rng))[0]


def rounds(p_fn: DistFn, q_fn: DistFn, prefixes: Iterable[Sequence[int]], k: int, rng: Rng) -> list[list[int]]:
    """One independent round per prefix in one call, the generator seeded from ``rng``."""
    return batch_rounds(p_fn, q_fn, [tuple(prefix) for prefix in prefixes], k, _generator(rng))


def one_round_only(p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng) -> list[int]:
    """``speculative_step`` without the batch declaration (the benchmarks' one-round subject)."""
    return speculative_step(p_fn, q_fn, prefix, k, rng)


speculative_step.specverify_rounds = rounds  # type: ignore[attr-defined]
