"""The optimal-acceptance oracle: the most any exact rule can accept from a given draft structure.

One step, m drafts. The drafts' set S (the distinct drafted tokens) has a law Q_m(S) that depends
only on q, m and whether the drafts are i.i.d. or drawn without replacement. An exact rule emits
Y ~ p; its acceptance is P(Y in S). Any exact rule is a coupling of (S, Y) with marginals Q_m and
p, and any coupling is a rule (sample Y from the coupling's conditional given S), so

    max P(Y in S) = max sum_{S, y in S} a(S, y)
                    s.t. sum_{y in S} a(S, y) <= Q_m(S),  sum_{S containing y} a(S, y) <= p(y),
                         a >= 0

(the unaccepted mass can always be completed to a coupling: both leftovers total the same).
This is the optimal-transport view of multi-draft speculative sampling of SpecTr (Sun, Suresh,
Ro, Beirami, Jain, Yu, arXiv 2310.15141, section 3) and of Khisti et al. (arXiv 2410.18234),
solved here with scipy.optimize.linprog (HiGHS) on the small vocabularies of the battery. With
m = 1 it is alpha = sum min(p, q) (the maximal coupling).

The optimum tokens per round of a whole round (block verification's for a chain, the LP at every
node of a tree) needs the samplers and the enumerator: it is ``specverify.interfaces.round.optimum``, a
floor above. This module imports no sampler (``samplers.transport`` imports it).
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections import defaultdict

import numpy as np
from numpy.typing import ArrayLike

from ..common.validation import check_k, check_prob_vector, check_same_length
from .arrays import Integer, Vector

DraftSet = frozenset[int]
"""The distinct tokens among a step's drafts."""

LP_TOL = 1e-9


def draft_sets(q: ArrayLike, m: int, replacement: bool = True) -> dict[DraftSet, float]:
    """Law of the set of distinct tokens among m drafts from q: i.i.d. (``replacement``) or
    without replacement (q renormalized over the tokens not yet drawn; drafting stops when q's
    support runs out, as in samplers.tree)."""
    q = np.asarray(q, dtype=np.float64)
    support = [int(t) for t in np.flatnonzero(q > 0)]
    out: dict[DraftSet, float] = defaultdict(float)
    if replacement:
        for seq in itertools.product(support, repeat=m):
            out[frozenset(seq)] += float(np.prod([q[t] for t in seq]))
        return dict(out)

    def walk(drawn: tuple[int, ...], weight: float) -> None:
        left = [t for t in support if t not in drawn]
        if len(drawn) == m or not left:
            out[frozenset(drawn)] += weight
            return
        total = sum(q[t] for t in left)
        for t in left:
            walk(drawn + (t,), weight * q[t] / total)

    walk((), 1.0)
    return dict(out)


def _check(p: ArrayLike, q: ArrayLike, m: Integer) -> tuple[Vector, Vector, int]:
    p, q = check_prob_vector("p", p), check_prob_vector("q", q)
    check_same_length("p", p, "q", q)
    return p, q, check_k(m, "m")


@functools.lru_cache(maxsize=4096)
def _solve(
    p_bytes: bytes, q_bytes: bytes, m: int, replacement: bool
) -> tuple[list[tuple[DraftSet, float]], list[tuple[int, int]], Vector, float]:
    p, q = np.frombuffer(p_bytes), np.frombuffer(q_bytes)
    sets = sorted(draft_sets(q, m, replacement).items(), key=lambda kv: sorted(kv[0]))
    pairs = [(i, y) for i, (s, _) in enumerate(sets) for y in sorted(s)]
    a_ub = np.zeros((len(sets) + len(p), len(pairs)))
    for j, (i, y) in enumerate(pairs):
        a_ub[i, j] = 1.0
        a_ub[len(sets) + y, j] = 1.0
    b_ub = np.concatenate([[w for _, w in sets], p])
    from scipy.optimize import linprog  # here, not at import: scipy.optimize costs ~1 s to load

    res = linprog(-np.ones(len(pairs)), A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"linprog failed: {res.message}")
    return sets, pairs, res.x, float(-res.fun)


def optimal_acceptance(p: ArrayLike, q: ArrayLike, m: Integer, replacement: bool = True) -> float:
    """The largest P(emitted token is one of the m drafts) over every exact one-step rule."""
    p, q, m = _check(p, q, m)
    return min(1.0, max(0.0, _solve(p.tobytes(), q.tobytes(), m, bool(replacement))[3]))


def optimal_selection(p: ArrayLike, q: ArrayLike, m: Integer, replacement: bool = True) -> dict[DraftSet, Vector]:
    """For every draft set S, a distribution over S (the canonical rule's selection step,
    arXiv 2410.18234) built from the LP's optimal plan: the accepted mass a(S, .) renormalized,
    the rest spread over S in proportion to q. Selecting a token this way and then running the
    token-wise rule against p accepts sum min(r, p) >= the LP optimum (r = the selection's law)."""
    p, q, m = _check(p, q, m)
    sets, pairs, x, _ = _solve(p.tobytes(), q.tobytes(), m, bool(replacement))
    plan = {s: np.zeros(len(p)) for s, _ in sets}
    for (i, y), v in zip(pairs, x):
        plan[sets[i][0]][y] += max(v, 0.0)
    out = {}
    for s, w in sets:
        a = plan[s]
        left = max(w - a.sum(), 0.0)
        members = sorted(s)
        fill = np.zeros(len(p))
        fill[members] = q[members] / q[members].sum()
        psi = a + left * fill
        out[s] = psi / psi.sum() if psi.sum() > 0 else fill
    return out


def selection_law(selection: dict[DraftSet, Vector], sets: dict[DraftSet, float]) -> Vector:
    """r(y) = sum_S Q_m(S) psi(y | S), the law of the selected token."""
    law: Vector = functools.reduce(operator.add, (w * selection[s] for s, w in sets.items()))
    return law
