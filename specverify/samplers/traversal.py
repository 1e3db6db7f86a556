"""Traversal verification of a draft tree: leaf to root, sequence level (Weng, Hu, Chen, Liu, Mei,
Qiu, Tian, Shi, "Traversal Verification for Speculative Tree Decoding", arXiv 2505.12398,
NeurIPS 2025). Written from the paper's Algorithm 3 and Appendices E and F, in this project's
notation (the paper's M_b is the target p, M_s the draft q, p_alpha the weight a below).

The tree: any decoding tree of the paper's Definition 3.1, i.e. every node's children drafted from
q at the node's prefix, i.i.d. or without replacement. ``shape`` (samplers.tree: nested tuples,
``full_shape``) gives its form; by default the full width-``width`` tree of depth k.

Algorithm 3, line by line:
  line 1-2  every node X gets a weight (its sequence-level acceptance rate), a(root) = 1 and for a
            child x of X
                a(x) = min(1, a(X) p(x | X) / q(x | X)),
            p(. | X), q(. | X) being X's *current* target and draft rows (initially the models').
  line 4    the node tested is the first leaf in post-order DFS (Appendix E): children in drafting
            order, a node only after all its children have been deleted, so in the paper's Figure 1
            the order is X3 -> X4 -> X1 -> X5 -> X2.
  line 5-8  it is accepted with probability a(leaf); then the round emits the path root..leaf
  line 16   plus one token from the leaf's current p(. | leaf): the model's p for a leaf that never
            had children (the bonus token at depth k), the residual below for a node whose
            children were all deleted.
  line 10   otherwise the leaf x is deleted and its parent X updated, with
            Z = sum_y max(0, a(X) p(y | X) - q(y | X)) from X's values before the update:
  line 11   eq. (1)  p(. | X) <- max(0, a(X) p(. | X) - q(. | X)) / Z
            eq. (2)  q(. | X) <- q(. | X) with x removed, renormalized (drafts without replacement;
                     i.i.d. drafts keep q)
  line 12   eq. (3)  a(X) <- Z / (Z + 1 - a(X))
  line 13   the remaining chains through X get their weights from X's updated values (here: the
            next sibling's weight is computed when it is reached).
Eq. (3) is the "sequence-level RRSw" of Appendix F: X's children are recursive rejection sampling
towards the target a(X) p(. | X) plus a pseudo-child of mass 1 - a(X) that stands for "accept X
itself", so after rejections the pseudo-child's share of the residual mass is a(X)'s new value.

Special cases (tests/test_rules.py): a chain (width 1) is block verification (arXiv 2403.10444,
Algorithm 2), the paper's Theorem 3.4; depth 1 is recursive rejection sampling over the root's
children (SpecInfer's rule for i.i.d. drafts, RSD's without replacement). Exactness for every shape
(the paper's Theorem 3.3) is checked by exact enumeration on generated models.

Children are drafted when the traversal first reaches them (a sibling's draws are independent of
everything visited before it, and a child is reached only after its earlier siblings are
deleted, when q(. | X) is exactly the law it would have been drafted from), so the exact
enumerator visits only the paths the walk takes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from ..common.validation import check_same_length
from ..laws.arrays import DistFn, Vector
from .chain import Rng, model_output, sample
from .registry import register
from .tree import Shape, round_shape, without_token


class Rejected(Exception):
    """The subtree (or the node) handed to ``traverse`` was rejected."""


def child_weight(a: float, P: Vector, Q: Vector, x: int) -> float:
    """a(x) = min(1, a(X) p(x | X) / q(x | X)): Algorithm 3, lines 1 and 13."""
    return 1.0 if a * P[x] >= Q[x] else float(a * P[x] / Q[x])  # no overflow for tiny q(x)


def parent_update(a: float, P: Vector, Q: Vector) -> tuple[float, Vector]:
    """X's (a, p) after one of its children is rejected: Algorithm 3, line 11 eq. (1) and line 12
    eq. (3), both from X's values before the update."""
    r = np.maximum(a * P - Q, 0.0)
    z = float(r.sum())
    denom = z + (1.0 - a)  # not (z + 1) - a: that rounds a = 1 to 1 - 3e-16
    a_new = z / denom if denom > 0 else 1.0
    return a_new, (r / z if z > 0 else P)


def traverse(
    p_fn: DistFn,
    q_fn: DistFn,
    path: tuple[int, ...],
    a: float,
    shape: Shape,
    rng: Rng,
    without_replacement: bool,
    order: str = "siblings-first",
) -> list[int]:
    """Tokens after ``path`` if this node's subtree (or the node) is accepted; Rejected if not.

    ``shape`` is this node's children's shapes. ``order="node-first"`` is for the mutants only:
    it tests the node after each rejected child, before the remaining siblings.
    """
    if not shape:  # a leaf of the drafted tree: line 6, then line 16 with the model's p
        if rng.random() < a:
            return [sample(model_output("p_fn", p_fn, path), rng)]
        raise Rejected
    P = model_output("p_fn", p_fn, path)
    Q = model_output("q_fn", q_fn, path)
    check_same_length("p_fn output", P, "q_fn output", Q)
    for child in shape:  # post-order: the children, in drafting order, before the node
        x = sample(Q, rng)
        try:
            return [x] + traverse(
                p_fn, q_fn, path + (x,), child_weight(a, P, Q, x), child, rng, without_replacement, order
            )
        except Rejected:
            a, P = parent_update(a, P, Q)
        if order == "node-first" and rng.random() < a:
            return [sample(P, rng)]
        if without_replacement:  # eq. (2)
            left = without_token(Q, x)
            if left is None:
                break
            Q = left
    if rng.random() < a:  # every child deleted: the node is now a leaf (line 4)
        return [sample(P, rng)]
    raise Rejected


def traversal_step(
    p_fn: DistFn,
    q_fn: DistFn,
    prefix: Sequence[int],
    k: int,
    rng: Rng,
    *,
    width: int = 2,
    without_replacement: bool = False,
    shape: object = None,
) -> list[int]:
    """One traversal-verification round: 1 to k + 1 tokens. The draft tree is ``shape`` (depth
    <= k; see samplers.tree.full_shape) or, by default, the full width-``width`` tree of depth k."""
    try:
        return traverse(p_fn, q_fn, tuple(prefix), 1.0, round_shape(k, width, shape), rng, without_replacement)
    except Rejected:  # the root's weight stays 1: unreachable up to rounding
        raise RuntimeError("traversal verification rejected the root") from None


register("traversal-iid", functools.partial(traversal_step, width=2, without_replacement=False))
register("traversal-without-replacement", functools.partial(traversal_step, width=2, without_replacement=True))
