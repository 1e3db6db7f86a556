"""Tree speculation: several candidate drafts per position, verified one sibling at a time.

Two exact sibling rules, both "recursive rejection sampling" over the candidates at one node
(target p, draft q at that node's prefix):

(a) i.i.d. candidates (SpecInfer's multi-step speculative sampling, Miao et al.,
    arXiv 2305.09781, Algorithm 2): every candidate is drawn from q. Candidate x is accepted with
    probability min(1, r(x) / q(x)), where r starts as p and after each rejection becomes
    norm(max(0, r - q)); q stays the same.
(b) candidates without replacement (Recursive Speculative Decoding, Jeon et al.,
    arXiv 2402.14160, recursive rejection sampling; also Sequoia, Chen et al., arXiv 2402.12374):
    candidate i is drawn from q_i, q_1 = q and q_{i+1} = q_i with candidate i removed and
    renormalized, so siblings never repeat. Candidate x is accepted with probability
    min(1, r_i(x) / q_i(x)); after a rejection r_{i+1} = norm(max(0, r_i - q_i)) (with the q_i the
    candidate was drawn from) and q_{i+1} as above. If q runs out of support before ``width``
    candidates, drafting stops early.

In both, if every candidate is rejected one token is drawn from the final r and the round ends.

Why it is exact (one node): let H be the rejected candidates so far. Given H the next candidate
is distributed as q_i, and r_i, q_i are functions of H only. Then
P(emit y | H) = min(r_i(y), q_i(y)) + (1 - sum min(r_i, q_i)) * P(emit y | H, rejected), and by
induction from the last step (emit from r) the second factor is r_{i+1}(y) whatever the rejected
candidate was, so P(emit y | H) = min(r_i, q_i)(y) + max(0, r_i - q_i)(y) = r_i(y); with H empty,
r_1 = p. A rejected candidate x had r_i(x) < q_i(x), so r_{i+1}(x) = 0 and is never re-emitted.

Trees of depth k (k = the tree depth, the interface's k): the node at every accepted token has
``width`` children drafted from q at that node's prefix, so a full tree holds
width + width^2 + ... + width^k draft tokens. A real engine drafts the whole tree up front, one
batched draft call per level (k draft calls), and verifies it in one target pass with a tree
attention mask. Here each sibling is drawn just before it is verified and a node's children only
when the walk descends into it: the draws that are skipped are never looked at and are
independent of everything that is, so the emitted distribution is the same, and the exact
enumerator (specverify.laws.exact) visits far fewer paths. A round emits the accepted path (at most
k tokens) plus one token: a residual sample at the first node whose candidates all fail, or a
bonus token from p after k accepted levels. With width 1 both rules are the single-chain rule.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import cast

from ..common.validation import check_k, check_same_length
from ..laws.arrays import DistFn, Vector
from .chain import Rng, accepts, model_output, residual, sample
from .registry import register


def check_width(width: object) -> int:
    if isinstance(width, bool) or not isinstance(width, numbers.Integral) or int(width) < 1:
        raise ValueError(f"width: must be an integer >= 1, got {width!r}")
    return int(width)


def without_token(q: Vector, x: int) -> Vector | None:
    """q with token x removed and renormalized; None when nothing is left to draw."""
    rest = q.copy()
    rest[x] = 0.0
    total = float(rest.sum())
    return rest / total if total > 0 else None


def sibling_rule(p: Vector, q: Vector, width: int, rng: Rng, without_replacement: bool) -> tuple[int | None, int]:
    """Recursive rejection sampling over ``width`` candidates at one node: the tree rule, written
    once (``verify_siblings`` and ``shaped_walk`` call it).

    Returns (i, the i-th candidate) when candidate i (0-based, in drafting order) is accepted, or
    (None, a token drawn from the final residual) when every candidate drawn is rejected.
    """
    r = p
    for i in range(width):
        x = sample(q, rng)
        if accepts(r, q, x, rng):
            return i, x
        r = residual(r, q)
        if without_replacement:
            left = without_token(q, x)
            if left is None:
                break
            q = left
    return None, sample(r, rng)


def verify_siblings(p: Vector, q: Vector, width: int, rng: Rng, without_replacement: bool) -> tuple[bool, int]:
    """Recursive rejection sampling over ``width`` candidates at one node (``sibling_rule``).

    Returns (True, accepted candidate) or (False, token drawn from the final residual).
    """
    i, token = sibling_rule(p, q, width, rng, without_replacement)
    return i is not None, token


def tree_walk(
    p_fn: DistFn,
    q_fn: DistFn,
    prefix: Sequence[int],
    k: int,
    rng: Rng,
    verify: Callable[[Vector, Vector, Rng], tuple[bool, int]],
) -> list[int]:
    """Walk a depth-k tree: at each node ``verify(p, q, rng) -> (accepted, token)`` picks the child
    to descend into (accepted) or the correction token that ends the round (not accepted).

    After k accepted levels a bonus token is drawn from p. Mutants swap in their own ``verify``.
    """
    k = check_k(k)
    path = list(prefix)
    start = len(path)
    for _ in range(k):
        ctx = tuple(path)
        p = model_output("p_fn", p_fn, ctx)
        q = model_output("q_fn", q_fn, ctx)
        check_same_length("p_fn output", p, "q_fn output", q)
        accepted, token = verify(p, q, rng)
        path.append(int(token))
        if not accepted:
            return path[start:]
    p = model_output("p_fn", p_fn, tuple(path))
    return path[start:] + [sample(p, rng)]


def tree_step(
    p_fn: DistFn,
    q_fn: DistFn,
    prefix: Sequence[int],
    k: int,
    rng: Rng,
    *,
    width: int = 2,
    without_replacement: bool = False,
) -> list[int]:
    """One tree round of depth k with ``width`` candidates per node: 1 to k + 1 tokens."""
    width = check_width(width)

    def verify(p: Vector, q: Vector, rng: Rng) -> tuple[bool, int]:
        return verify_siblings(p, q, width, rng, without_replacement)

    return tree_walk(p_fn, q_fn, prefix, k, rng, verify)


def tree_nodes(width: int, k: int) -> int:
    """Draft tokens in a full tree of depth k and branching ``width``: width + ... + width^k."""
    width, k = check_width(width), check_k(k)
    return sum(width**d for d in range(1, k + 1))


# ------------------------------------------------------------------------------ any tree shape
#
# A draft tree's shape is a nested tuple: a node is the tuple of its children's shapes, a leaf is
# (). ``full_shape((2, 2))`` is the width-2 tree of depth 2, ``((), ((),))`` a root with a leaf
# child and a child that has one child. The children of a node are drafted in order from q at the
# node's prefix (i.i.d. or without replacement), the i-th child carrying the i-th subshape: the
# decoding trees of arXiv 2505.12398, Definition 3.1 (sparse trees such as EAGLE's included, as
# long as the children are sampled rather than taken top-k).


Shape = tuple["Shape", ...]
"""A draft tree's shape: the tuple of its children's shapes (a leaf: ``()``)."""


def full_shape(widths: Iterable[int]) -> Shape:
    """The tree with ``widths[d]`` children at every node of depth d (depth = len(widths))."""
    checked = tuple(check_width(w) for w in widths)
    shape: Shape = ()
    for w in reversed(checked):
        shape = (shape,) * w
    return shape


def check_shape(shape: object) -> Shape:
    """A tree shape (nested tuples of tuples); its depth must be >= 1."""

    def check(node: object, depth: int) -> None:
        if not isinstance(node, tuple):
            raise TypeError(f"shape: nodes must be tuples of child shapes, got {node!r}")
        if depth > 64:
            raise ValueError("shape: deeper than 64 levels")
        for child in node:
            check(child, depth + 1)

    check(shape, 0)
    checked = cast(Shape, shape)  # check() walked it: tuples of tuples all the way down
    if not checked:
        raise ValueError("shape: the root needs at least one child")
    return checked


def shape_depth(shape: Shape) -> int:
    """The longest root-to-leaf path, in draft tokens."""
    return 1 + max(map(shape_depth, shape)) if shape else 0


def round_shape(k: int, width: int = 2, shape: object = None) -> Shape:
    """The draft tree of one round: ``shape`` if given (its depth must be <= k, so the round emits
    at most k + 1 tokens), else the full width-``width`` tree of depth k."""
    k = check_k(k)
    if shape is None:
        return full_shape((check_width(width),) * k)
    checked = check_shape(shape)
    if shape_depth(checked) > k:
        raise ValueError(f"shape: depth {shape_depth(checked)} exceeds k = {k}")
    return checked


def shaped_walk(
    p_fn: DistFn, q_fn: DistFn, path: tuple[int, ...], shape: Shape, rng: Rng, without_replacement: bool
) -> list[int]:
    """Token-level verification of a draft tree of any shape (the baseline of arXiv 2505.12398,
    section 2.2 and Algorithm 2, applied top-down): recursive rejection sampling over the node's
    children in drafting order; an accepted child is descended into with its own subshape; when
    every child fails one token comes from the final residual; at a leaf, one token from p."""
    p = model_output("p_fn", p_fn, path)
    if not shape:
        return [sample(p, rng)]
    q = model_output("q_fn", q_fn, path)
    check_same_length("p_fn output", p, "q_fn output", q)
    i, x = sibling_rule(p, q, len(shape), rng, without_replacement)
    if i is None:
        return [x]
    return [x] + shaped_walk(p_fn, q_fn, path + (x,), shape[i], rng, without_replacement)


def tree_shape_step(
    p_fn: DistFn,
    q_fn: DistFn,
    prefix: Sequence[int],
    k: int,
    rng: Rng,
    *,
    shape: object,
    without_replacement: bool = False,
) -> list[int]:
    """One token-level round over a draft tree of the given ``shape`` (depth <= k)."""
    return shaped_walk(p_fn, q_fn, tuple(prefix), round_shape(k, shape=shape), rng, without_replacement)


register("tree-iid", functools.partial(tree_step, width=2, without_replacement=False))
register("tree-without-replacement", functools.partial(tree_step, width=2, without_replacement=True))
