"""Block verification: the k-token chain verified jointly (Sun, Mendlovic, Leviathan, Aharoni,
Beirami, Ro, Suresh, "Block Verification Accelerates Speculative Decoding", arXiv 2403.10444,
Algorithm 2; vLLM PR vllm-project/vllm#46781).

Drafts x_1..x_k from q as for the chain; p_i, q_i are the target's and the draft's rows at
position i (conditioned on x_1..x_{i-1}); p_{k+1} is the bonus row. The rule keeps a running,
clipped prefix weight

    w_0 = 1,    w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i)),

and for every i < k the mass of the weighted residual one position later,

    Z_i = sum_x max(0, w_i p_{i+1}(x) - q_{i+1}(x)),    h_i = Z_i / (Z_i + 1 - w_i),    h_k = w_k.

With independent uniforms eta_i, the accepted length is tau = the largest i with eta_i <= h_i
(0 if none). The round emits x_1..x_tau and then a bonus token from p_{k+1} when tau = k, else
one token from the weighted residual norm(max(0, w_tau p_{tau+1} - q_{tau+1})).

The paper proves the emitted sequence is distributed as the target's (Theorem 1) and that no
valid verifier of the same k-token chain accepts more in expectation (Theorem 2), so its expected
tokens per round is the optimum for a chain draft; it is never below the token-wise rule's
(with k = 1 the two are the same rule: h_1 = w_1 = min(1, p/q)). Here the uniforms are drawn
from eta_k down to eta_1 and the scan stops at the first success: the same tau, fewer draws.
specverify checks exactness by enumeration (tests/test_rules.py, tests/test_engine_properties.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..common.validation import check_k, check_same_length
from ..laws.arrays import DistFn, Vector
from .chain import Rng, Rows, draft, model_output, sample
from .registry import register


def block_weights(ps: Rows, qs: Sequence[Vector], drafts: Sequence[int]) -> list[float]:
    """[w_0, ..., w_k]: the clipped running products of p_i(x_i) / q_i(x_i)."""
    w = [1.0]
    for i, x in enumerate(drafts):
        if qs[i][x] <= 0:
            raise ValueError(f"q_fn: drafted token {x} has q(x) = 0; drafts must be sampled from q")
        w.append(min(1.0, float(w[-1] * ps[i][x] / qs[i][x])))
    return w


def weighted_residual(w: float, p: Vector, q: Vector) -> Vector:
    """max(0, w p - q), unnormalized (its sum is Z)."""
    r: Vector = np.maximum(w * p - q, 0.0)
    return r


def acceptance_thresholds(ps: Rows, qs: Sequence[Vector], w: Sequence[float]) -> list[float]:
    """[h_1, ..., h_k] (h_k = w_k); h_i = 1 where Z_i + 1 - w_i = 0 (w_i = 1 and no residual)."""
    k = len(qs)
    h = []
    for i in range(1, k):
        z = float(weighted_residual(w[i], ps[i], qs[i]).sum())
        denom = z + (1.0 - w[i])  # not (z + 1) - w: that rounds w = 1 to 1 - 3e-16
        h.append(z / denom if denom > 0 else 1.0)
    h.append(w[k])
    return h


def accepted_length(h: Sequence[float], rng: Rng) -> int:
    """tau = the largest i with eta_i < h_i (0 if none), drawing eta_k first."""
    for i in range(len(h), 0, -1):
        if rng.random() < h[i - 1]:
            return i
    return 0


def correction(ps: Rows, qs: Sequence[Vector], w: Sequence[float], tau: int, rng: Rng) -> int:
    """The token after x_1..x_tau: bonus from p_{k+1}, or the weighted residual's sample."""
    if tau == len(qs):
        return sample(ps[tau], rng)
    r = weighted_residual(w[tau], ps[tau], qs[tau])
    total = float(r.sum())
    return sample(r / total if total > 0 else ps[tau], rng)


def block_verify(ps: Rows, qs: Sequence[Vector], drafts: Sequence[int], rng: Rng) -> tuple[int, int]:
    """(accepted drafts tau, the token after them) from the k + 1 target rows and k draft rows:
    the same signature as ``chain.verify``."""
    w = block_weights(ps, qs, drafts)
    tau = accepted_length(acceptance_thresholds(ps, qs, w), rng)
    return tau, correction(ps, qs, w, tau, rng)


def target_rows(p_fn: DistFn, prefix: tuple[int, ...], drafts: Sequence[int], qs: Sequence[Vector]) -> list[Vector]:
    """The k + 1 target rows of one verification pass."""
    ps: list[Vector] = []
    for i in range(len(drafts) + 1):
        p = model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))
        if i < len(qs):
            check_same_length("p_fn output", p, "q_fn output", qs[i])
        ps.append(p)
    return ps


@register("block")
def block_step(p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng) -> list[int]:
    """One block-verification round: 1 to k + 1 tokens distributed exactly as the target p."""
    start = tuple(prefix)
    drafts, qs = draft(q_fn, start, check_k(k), rng)
    ps = target_rows(p_fn, start, drafts, qs)
    tau, token = block_verify(ps, qs, drafts, rng)
    return list(drafts[:tau]) + [int(token)]
