"""Multi-draft verification as optimal transport: m i.i.d. drafts per node, one token out.

(a) SpecTr's k-sequential selection ("k-SEQ", Sun, Suresh, Ro, Beirami, Jain, Yu, arXiv
    2310.15141, Algorithm 3 with its residual): with a division factor rho in [1, m], try the
    drafts x_1..x_m ~ q in turn and accept x_i with probability min(1, p(x_i) / (rho q(x_i))).
    Each try accepts with beta = sum_x min(q(x), p(x) / rho), so token y is accepted with
    probability min(q(y), p(y) / rho) (1 - (1 - beta)^m) / beta in all; when every draft fails,
    one token is drawn from the residual p(y) - that, renormalized. The output is exactly p iff
    the accepted mass never exceeds p, i.e. 1 - (1 - beta)^m <= rho beta; ``spectr_rho`` takes the
    smallest such rho (bisection, ending on the feasible side). SpecTr proves this acceptance is
    within a factor 1 - 1/e of the optimal transport's, so it is exact but not optimal: its gap
    to the oracle (specverify.laws.optimal_acceptance) is reported in docs/SAMPLERS.md.
(b) The canonical decomposition (Khisti, Ebrahimi, Dbouk, Behboodi, Louizos, Soatto, arXiv
    2410.18234, Theorem 1): any optimal multi-draft rule can be written as a token *selection*
    step psi(. | drafts) followed by the single-draft rule between the selected token's law r
    and p. Here psi comes from the transport linear program's optimal plan
    (specverify.laws.optimal_acceptance.optimal_selection), so the acceptance sum min(r, p) reaches the optimum
    (the paper's truncated LP for large vocabularies is an approximation; on the battery's
    vocabularies the LP is solved exactly). Exactness does not depend on the LP's accuracy:
    the second step is the token-wise rule against the r that psi actually induces.

Both are node rules for ``tree.tree_walk``: depth k (the interface's k), m = ``width`` drafts per
node, 1 to k + 1 tokens per round.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..laws.arrays import DistFn, Vector, normalized
from ..laws.optimal_acceptance import DraftSet, draft_sets, optimal_selection, selection_law
from .chain import Rng, residual, sample
from .registry import register
from .tree import check_width, tree_walk


def spectr_beta(p: Vector, q: Vector, rho: float) -> float:
    return float(np.minimum(q, p / rho).sum())


def spectr_rho(p: Vector, q: Vector, m: int, iterations: int = 60) -> float:
    """The smallest rho in [1, m] with 1 - (1 - beta)^m <= rho beta (rho beta grows with rho,
    1 - (1 - beta)^m falls); the bisection returns a feasible end."""

    def feasible(rho: float) -> bool:
        beta = spectr_beta(p, q, rho)
        return bool(1.0 - (1.0 - beta) ** m <= rho * beta)

    if feasible(1.0):
        return 1.0
    lo, hi = 1.0, float(m)
    for _ in range(iterations):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def spectr_accepted_mass(p: Vector, q: Vector, m: int, rho: float) -> Vector:
    """Probability that the k-SEQ step accepts token y, for every y."""
    beta = spectr_beta(p, q, rho)
    scale = (1.0 - (1.0 - beta) ** m) / beta if beta > 0 else 0.0
    mass: Vector = np.minimum(q, p / rho) * scale
    return mass


def spectr_residual(p: Vector, q: Vector, m: int, rho: float) -> Vector:
    r = np.maximum(p - spectr_accepted_mass(p, q, m, rho), 0.0)
    total = float(r.sum())
    return r / total if total > 0 else p


@functools.lru_cache(maxsize=4096)
def _spectr(p_bytes: bytes, q_bytes: bytes, width: int) -> tuple[float, Vector]:
    p, q = np.frombuffer(p_bytes), np.frombuffer(q_bytes)
    rho = spectr_rho(p, q, width)
    return rho, spectr_residual(p, q, width, rho)


def _key(v: ArrayLike) -> bytes:
    return np.ascontiguousarray(v, dtype=np.float64).tobytes()


def spectr_parameters(p: Vector, q: Vector, width: int) -> tuple[float, Vector]:
    """(rho, the k-SEQ residual) at a node with target p, draft q and ``width`` drafts (cached)."""
    return _spectr(_key(p), _key(q), width)


def spectr_verify(p: Vector, q: Vector, width: int, rng: Rng) -> tuple[bool, int]:
    """k-SEQ at one node: (True, accepted draft) or (False, a residual sample)."""
    rho, r = spectr_parameters(p, q, width)
    for _ in range(width):
        x = sample(q, rng)
        if rng.random() * rho * q[x] < p[x]:  # u < min(1, p(x) / (rho q(x)))
            return True, x
    return False, sample(r, rng)


@functools.lru_cache(maxsize=4096)
def _canonical(p_bytes: bytes, q_bytes: bytes, width: int) -> tuple[dict[DraftSet, Vector], Vector]:
    p, q = np.frombuffer(p_bytes), np.frombuffer(q_bytes)
    selection = optimal_selection(p, q, width, replacement=True)
    r = selection_law(selection, draft_sets(q, width, replacement=True))
    return selection, normalized(r)


def canonical_selection(p: Vector, q: Vector, width: int) -> tuple[dict[DraftSet, Vector], Vector]:
    """(psi: draft set -> selection law, r: the selected token's law) at a node (cached)."""
    return _canonical(_key(p), _key(q), width)


def canonical_verify(p: Vector, q: Vector, width: int, rng: Rng) -> tuple[bool, int]:
    """Select one of the m drafts with the LP's psi, then the token-wise rule between r and p."""
    drafts = [sample(q, rng) for _ in range(width)]
    selection, r = canonical_selection(p, q, width)
    psi = selection[frozenset(drafts)]
    y = sample(psi, rng)
    if rng.random() * r[y] < p[y]:  # u < min(1, p(y) / r(y)); r(y) may underflow to 0 when
        return True, y  # the drafts' set had probability ~1e-308: no division
    res = residual(p, r)
    return False, sample(res, rng)


def spectr_step(p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng, *, width: int = 2) -> list[int]:
    width = check_width(width)
    return tree_walk(p_fn, q_fn, prefix, k, rng, lambda p, q, rng: spectr_verify(p, q, width, rng))


def canonical_step(p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng, *, width: int = 2) -> list[int]:
    width = check_width(width)
    return tree_walk(p_fn, q_fn, prefix, k, rng, lambda p, q, rng: canonical_verify(p, q, width, rng))


register("spectr", functools.partial(spectr_step, width=2))
register("canonical-ot", functools.partial(canonical_step, width=2))
