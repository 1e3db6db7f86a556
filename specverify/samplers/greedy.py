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

import numpy as np

from ..validation import check_k
from . import register
from .chain import model_output


def greedy_drafts(q_fn, prefix: tuple, k: int) -> tuple[list[int], int]:
    """k drafts, each the draft model's argmax after the drafts before it, and q's length."""
    drafts: list[int] = []
    for _ in range(k):
        q = model_output("q_fn", q_fn, prefix + tuple(drafts))
        drafts.append(int(np.argmax(q)))
    return drafts, len(q)


@register("greedy")
def greedy_step(p_fn, q_fn, prefix, k, rng=None) -> list[int]:
    """One greedy round: the accepted drafts, then the target's argmax (correction or bonus).

    Returns 1 to k + 1 tokens, all equal to what target-only greedy decoding would emit.
    ``rng`` is accepted for the common interface and never used.
    """
    k = check_k(k)
    prefix = tuple(prefix)
    drafts, vocab = greedy_drafts(q_fn, prefix, k)
    for i, x in enumerate(drafts):
        p = model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))
        if len(p) != vocab:
            raise ValueError(
                f"p_fn output and q_fn output have different lengths ({len(p)} and {vocab})"
            )
        target = int(np.argmax(p))
        if x != target:
            return drafts[:i] + [target]
    return drafts + [int(np.argmax(model_output("p_fn", p_fn, prefix + tuple(drafts))))]
