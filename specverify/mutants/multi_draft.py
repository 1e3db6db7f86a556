"""Mutants of the samplers beyond the single chain: trees, adaptive stopping, greedy verification.

Each mutant has the sampler interface ``fn(p_fn, q_fn, prefix, k, rng) -> list[int]`` and differs
from an exact sampler in specverify/samplers/ by a few lines. ``MULTI_DRAFT_MUTANTS`` lists them
as dicts with keys id, description, effect ("biased" / "contract" / "fewer-tokens"), fn and
reference; specverify.mutants turns them into ``Mutant`` records for the report. Every one is
biased, and the exact enumerator (specverify.laws.exact) shows TV > 1e-6 on the toy models
(tests/test_samplers_beyond_chain.py names the model for each).
"""

from __future__ import annotations

import numpy as np

from ..samplers.chain import accepts, model_output, residual, verify_drafts
from ..samplers.greedy import greedy_step
from ..samplers.tree import tree_walk, without_token

WIDTH = 2


def _verify_topk_candidates(p, q, rng, width: int = WIDTH):
    """Rule (a) applied to q's top-width tokens, which were chosen, not sampled, from q."""
    r = p
    for x in np.argsort(-q, kind="stable")[:width]:
        if q[x] == 0:
            break
        if accepts(r, q, int(x), rng):
            return True, int(x)
        r = residual(r, q)
    return False, int(rng.choice(len(r), p=r))


def _verify_iid_as_without_replacement(p, q, rng, width: int = WIDTH):
    """i.i.d. candidates verified with rule (b)'s update, as if siblings could not repeat.

    Each candidate is drawn from the full q, but the ratio and the residual use q with the
    rejected siblings removed. A duplicate of a rejected sibling (probability sum q^2 per pair)
    has q_i(x) = 0 and r_i(x) = 0; it is counted as one more rejected candidate, so the residual
    is updated a second time for the same token.
    """
    r, q_left = p, q
    for _ in range(width):
        x = int(rng.choice(len(q), p=q))  # the bug: drawn from q, verified against q_left
        if q_left[x] > 0 and accepts(r, q_left, x, rng):
            return True, x
        r = residual(r, q_left)
        q_next = without_token(q_left, x)
        if q_next is None:
            break
        q_left = q_next
    return False, int(rng.choice(len(r), p=r))


def _verify_residual_not_updated(p, q, rng, width: int = WIDTH):
    """Rule (a) with every sibling checked against p instead of the updated residual."""
    for _ in range(width):
        x = int(rng.choice(len(q), p=q))
        if accepts(p, q, x, rng):  # the bug: r stays p
            return True, x
    return False, int(rng.choice(len(p), p=residual(p, q)))


def deterministic_topk_candidates(p_fn, q_fn, prefix, k, rng) -> list[int]:
    return tree_walk(p_fn, q_fn, prefix, k, rng, _verify_topk_candidates)


def duplicate_siblings_counted_twice(p_fn, q_fn, prefix, k, rng) -> list[int]:
    return tree_walk(p_fn, q_fn, prefix, k, rng, _verify_iid_as_without_replacement)


def residual_not_updated(p_fn, q_fn, prefix, k, rng) -> list[int]:
    return tree_walk(p_fn, q_fn, prefix, k, rng, _verify_residual_not_updated)


def stop_peeks_at_target(p_fn, q_fn, prefix, k, rng) -> list[int]:
    """Adaptive drafting that stops when the target would risk rejecting the next draft.

    After the first draft, each new draft x is kept only if p(x) >= q(x) at its position
    (the target's verdict, read before verification); otherwise it is dropped and drafting
    stops, so that position gets a bonus sample from p instead of a rejection sample.
    """
    prefix = tuple(prefix)
    drafts, qs = [], []
    for i in range(k):
        ctx = prefix + tuple(drafts)
        q = model_output("q_fn", q_fn, ctx)
        x = int(rng.choice(len(q), p=q))
        if i > 0 and model_output("p_fn", p_fn, ctx)[x] < q[x]:  # the bug: peeks at p
            break
        drafts.append(x)
        qs.append(q)
    return verify_drafts(p_fn, prefix, drafts, qs, rng)


MULTI_DRAFT_MUTANTS: list[dict] = [
    # Tree siblings are q's top-2 tokens (chosen deterministically, as in Medusa-style top-k
    # trees) but verified with the i.i.d. rule (a), min(1, r(x)/q(x)), as if they had been sampled
    # from q. Deterministic candidates need q set to what actually produced them (a one-hot per
    # candidate), or a rule built for them.
    dict(
        id="tree/deterministic-topk-candidates",
        description="tree siblings are q's deterministic top-2, verified with rule (a) as if sampled from q",
        effect="biased",
        fn=deterministic_topk_candidates,
        reference="arXiv 2401.10774",
    ),
    # Siblings are drawn i.i.d. from q, but verified with the without-replacement update of rule
    # (b): the ratio uses q with the rejected siblings removed. A duplicate of a rejected sibling
    # is counted again as a distinct candidate and updates the residual a second time; the
    # siblings' true proposal distribution is q, not q minus them.
    dict(
        id="tree/duplicate-siblings-counted-twice",
        description="i.i.d. siblings verified with rule (b)'s without-replacement update: duplicates counted twice",
        effect="biased",
        fn=duplicate_siblings_counted_twice,
        reference="arXiv 2402.14160",
    ),
    # Every sibling is verified against the target p; the residual norm(max(0, r - q)) is not
    # carried from one rejected sibling to the next, so tokens favoured by both p and q are
    # accepted too often.
    dict(
        id="tree/residual-not-updated",
        description="every sibling verified against p: the residual is not carried between rejected siblings",
        effect="biased",
        fn=residual_not_updated,
        reference="arXiv 2305.09781",
    ),
    # Adaptive draft length whose stopping rule reads the target: a draft x with p(x) < q(x) is
    # dropped and drafting stops, so the position is filled by a bonus sample from p instead of a
    # rejection sample. Stopping rules may only use information available before the next draft is
    # verified (q, accepted tokens).
    dict(
        id="adaptive/stop-peeks-at-target",
        description="adaptive draft length whose stopping rule reads p: a draft with p(x) < q(x) is dropped",
        effect="biased",
        fn=stop_peeks_at_target,
        reference="arXiv 2405.19715",
    ),
    # The registered greedy sampler (argmax drafts, accept while the draft equals the target's
    # argmax) run on a sampled, non-one-hot p: the output is the target's greedy text, not a
    # sample (handout section 4; TV 0.64 in the handout's toy chain).
    dict(
        id="greedy/argmax-check-at-positive-temperature",
        description="the greedy sampler (argmax drafts, argmax check) run on a sampled, non-one-hot p",
        effect="biased",
        fn=greedy_step,
        reference=None,
    ),
]
