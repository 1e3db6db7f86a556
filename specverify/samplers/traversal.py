"""Traversal verification of a draft tree: leaf to root, sequence level (Weng et al., "Traversal
Verification for Speculative Tree Decoding", arXiv 2505.12398).

The tree: depth k (the interface's k), ``width`` children per node drafted from q at that node's
prefix, i.i.d. or without replacement (the structures of tree-iid and tree-without-replacement).
Every node X carries a weight a(X) and, for its children, a target row P(. | X) and a draft row
Q(. | X) (initially p and q at X's prefix); the root has a = 1. A child x of X gets

    a(x) = min(1, a(X) P(x | X) / Q(x | X))          (block verification's running weight)

when the traversal reaches it. The traversal is depth first and tests leaves: a node at depth k
is accepted with probability a; a node whose children have all been rejected is then a leaf and
is accepted with probability a (its updated weight). Accepting a node emits the path to it plus
one token from its P (p itself at depth k: the bonus token). Rejecting child x of X deletes it and
updates X, with Z = sum_y max(0, a(X) P(y | X) - Q(y | X)) from X's current values:

    P(. | X) <- max(0, a(X) P(. | X) - Q(. | X)) / Z,   a(X) <- Z / (Z + 1 - a(X)),
    Q(. | X) <- Q without x, renormalized (drafts without replacement only).

Then the next sibling (its a computed from X's updated values) or, when none is left, X itself
is tested. With width 1 this is block verification (arXiv 2403.10444, Algorithm 2, read from the
last draft back); with depth 1 it is recursive rejection sampling (SpecInfer's rule for i.i.d.
siblings, RSD's without replacement): the paper's two special cases. The rule here is written from
those two and the paper's description and checked by exact enumeration, not copied from code;
tests/test_rules.py and tests/test_engine_properties.py hold the exactness evidence.

Children are drafted when the traversal first reaches them (a sibling's draws are independent of
everything visited before it), so the exact enumerator visits only the paths the walk takes.
"""

from __future__ import annotations

import functools

import numpy as np

from ..validation import check_k, check_same_length
from . import register
from .chain import model_output, sample
from .tree import check_width, without_token


class _Rejected(Exception):
    pass


def parent_update(a: float, P: np.ndarray, Q: np.ndarray) -> tuple[float, np.ndarray]:
    """X's (a, P) after one of its children is rejected."""
    r = np.maximum(a * P - Q, 0.0)
    z = float(r.sum())
    denom = z + (1.0 - a)  # not (z + 1) - a: that rounds a = 1 to 1 - 3e-16
    a_new = z / denom if denom > 0 else 1.0
    return a_new, (r / z if z > 0 else P)


def traverse(p_fn, q_fn, path: tuple, a: float, depth: int, k: int, width: int, rng,
             without_replacement: bool, order: str = "siblings-first") -> list[int]:
    """Tokens after ``path`` if this node's subtree (or the node) is accepted; _Rejected if not."""
    if depth == k:
        if rng.random() < a:
            return [sample(model_output("p_fn", p_fn, path), rng)]
        raise _Rejected
    P = model_output("p_fn", p_fn, path)
    Q = model_output("q_fn", q_fn, path)
    check_same_length("p_fn output", P, "q_fn output", Q)
    q_draw = Q
    for _ in range(width):
        x = int(rng.choice(len(q_draw), p=q_draw))
        child_a = min(1.0, a * P[x] / Q[x])
        try:
            return [x] + traverse(p_fn, q_fn, path + (x,), child_a, depth + 1, k, width, rng,
                                  without_replacement, order)
        except _Rejected:
            a, P = parent_update(a, P, Q)
        if order == "node-first" and rng.random() < a:  # mutants: the node before its siblings
            return [sample(P, rng)]
        if without_replacement:
            Q = without_token(Q, x)
            if Q is None:
                break
            q_draw = Q
    if rng.random() < a:
        return [sample(P, rng)]
    raise _Rejected


def traversal_step(p_fn, q_fn, prefix, k, rng, *, width: int = 2,
                   without_replacement: bool = False) -> list[int]:
    """One traversal-verification round of a depth-k tree: 1 to k + 1 tokens."""
    width, k = check_width(width), check_k(k)
    try:
        return traverse(p_fn, q_fn, tuple(prefix), 1.0, 0, k, width, rng, without_replacement)
    except _Rejected:  # the root's weight stays 1: unreachable up to rounding
        raise RuntimeError("traversal verification rejected the root") from None


register("traversal-iid", functools.partial(traversal_step, width=2, without_replacement=False))
register("traversal-without-replacement",
         functools.partial(traversal_step, width=2, without_replacement=True))
