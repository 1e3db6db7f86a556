"""Greedy verification: accept drafts while they equal the target's argmax.

The handout (section 4) derives it from the exact rule: at temperature 0 the target p is one-hot
at its argmax, so min(1, p(x) / q(x)) accepts exactly the drafts equal to the argmax and the
residual norm(max(0, p - q)) is the argmax itself. It is therefore exact for one-hot p, and only
for one-hot p: at temperature > 0 it emits the target's greedy text instead of a sample (TV 0.64
in the handout's toy chain). Engines ship it as their temperature-0 path (Leviathan et al.,
arXiv 2211.17192, section 3; vLLM's rejection sampler treats ``temperature == 0`` requests this
way, vllm-project/vllm ``rejection_sampler.py``).

The drafter is greedy as well (drafts are argmax q, no randomness), so the sampler never touches
``rng``. Ties are broken towards the smallest token id (``numpy.argmax``), for p and q alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..common.validation import check_k
from ..laws.arrays import DistFn, Vector
from .chain import LazyRows, Rng, model_output
from .registry import register


class Row(Protocol):
    """A target row: a NumPy vector or a torch tensor (what ``argmax_token`` reads)."""

    def argmax(self) -> Any: ...


class ArgmaxRows(Protocol):
    """Rows by index (a list, a 2-D array or tensor, ``chain.LazyRows``)."""

    def __getitem__(self, i: int, /) -> Any: ...


def argmax_token(row: Row) -> int:
    """The row's argmax, ties to the lowest id: a NumPy row or a torch row (``row.argmax()``
    returns the first maximal index in both)."""
    return int(row.argmax())


def greedy_node(row: Row, candidates: Sequence[int]) -> tuple[int | None, int]:
    """The greedy rule at one node: the candidate equal to the target row's argmax is accepted.

    Returns (i, argmax) when candidates[i] is the argmax (the first such i), else (None, argmax),
    the correction. The rule written once: ``greedy_verify`` (a chain: one candidate per node)
    and ``models.tree`` (a tree's siblings) call it.
    """
    best = argmax_token(row)
    for i, x in enumerate(candidates):
        if x == best:
            return i, best
    return None, best


def greedy_verify(rows: ArgmaxRows, drafts: Sequence[int]) -> tuple[int, int]:
    """(accepted drafts j, the token after them) from the target rows ``rows`` (row i conditioned
    on drafts[:i]; k + 1 of them): drafts are accepted while each is its row's argmax; the token
    after them is row j's argmax (the correction, or the bonus after k acceptances). Reads rows
    0..j only. ``greedy_step``, ``models.decoding`` and ``models.medusa`` call it."""
    for j, x in enumerate(drafts):
        accepted, best = greedy_node(rows[j], (x,))
        if accepted is None:
            return j, best
    return len(drafts), argmax_token(rows[len(drafts)])


def greedy_drafts(q_fn: DistFn, prefix: tuple[int, ...], k: int) -> tuple[list[int], int]:
    """k drafts, each the draft model's argmax after the drafts before it, and q's length."""
    drafts: list[int] = []
    for _ in range(k):
        q = model_output("q_fn", q_fn, prefix + tuple(drafts))
        drafts.append(argmax_token(q))
    return drafts, len(q)


@register("greedy")
def greedy_step(p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng | None = None) -> list[int]:
    """One greedy round: the accepted drafts, then the target's argmax (correction or bonus).

    Returns 1 to k + 1 tokens, all equal to what target-only greedy decoding would emit.
    ``rng`` is accepted for the common interface and never used.
    """
    k = check_k(k)
    start = tuple(prefix)
    drafts, vocab = greedy_drafts(q_fn, start, k)

    def row(i: int) -> Vector:
        p = model_output("p_fn", p_fn, start + tuple(drafts[:i]))
        if i < k and len(p) != vocab:
            raise ValueError(f"p_fn output and q_fn output have different lengths ({len(p)} and {vocab})")
        return p

    j, token = greedy_verify(LazyRows(row), drafts)
    return drafts[:j] + [token]
