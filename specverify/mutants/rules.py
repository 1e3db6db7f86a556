"""Mutants of the rules beyond the token-wise rule (block verification, multi-draft selection),
and the "accept iff the draft equals a sample of the target" dispute.

Each mutant has the sampler interface and differs from its exact rule in specverify/samplers/ by
a few lines. ``RULE_MUTANTS`` lists them as ``Mutant`` records (specverify.mutants adds them to
``ALL``, so ``python -m specverify.mutants report`` runs them).

The dispute. mlx-swift-lm PR ml-explore/mlx-swift-lm#459 calls the rule "accept x ~ q iff an
independent y ~ p equals it" biased; mlxcel (lablup/mlxcel#992) ships it as exact. Both are right
about different code: what the round emits at the first mismatch decides it.
  - emit the target's sample y and stop (catalogue.match_target_sample, a control): exact,
    P(z) = q(z) p(z) + p(z) (1 - q(z)) = p(z). The *accepted drafts* are biased toward tokens both
    models like (accepted with probability sum p q, not alpha), which is #459's observation, but
    the emitted stream is the target's.
  - emit the draft x and stop (``match_target_sample_emit_draft`` below): the first token is x
    whatever happens, so it is distributed as q. Biased by TV(p, q) at the first position.
docs/DISPUTES.md gives the enumerated distributions (``python -m specverify.mutants.rules``).
"""

from __future__ import annotations

import numpy as np

from ..common.validation import check_k
from ..samplers import get_sampler, traversal
from ..samplers.block import acceptance_thresholds, accepted_length, block_weights, target_rows, weighted_residual
from ..samplers.chain import accepts, draft, residual, sample
from ..samplers.transport import canonical_selection, spectr_parameters
from ..samplers.tree import full_shape, tree_walk
from .catalogue import Mutant, round_with

_BLOCK = "arXiv 2403.10444"


def _block_round(p_fn, q_fn, prefix, k, rng, *, thresholds=acceptance_thresholds,
                 recover=None) -> list[int]:  # fmt: skip
    """samplers.block.block_step with the thresholds and the residual as parameters."""
    prefix = tuple(prefix)
    drafts, qs = draft(q_fn, prefix, check_k(k), rng)
    ps = target_rows(p_fn, prefix, drafts, qs)
    w = block_weights(ps, qs, drafts)
    tau = accepted_length(thresholds(ps, qs, w, drafts), rng)
    if tau == len(drafts):
        return list(drafts) + [sample(ps[tau], rng)]
    return list(drafts[:tau]) + [recover(ps[tau], qs[tau], w[tau], rng)]


def _block_thresholds(ps, qs, w, drafts):
    return acceptance_thresholds(ps, qs, w)


def _weighted_recover(p, q, w, rng):
    r = weighted_residual(w, p, q)
    return sample(r / r.sum() if r.sum() > 0 else p, rng)


def block_tokenwise_acceptance(p_fn, q_fn, prefix, k, rng):
    """The block skeleton (tau = the last position whose test passes) with the token-wise test
    min(1, p_i(x_i) / q_i(x_i)) and the ordinary residual norm(max(0, p - q)), as in
    vllm-project/vllm-ascend#7807 before PR #7808."""

    def thresholds(ps, qs, w, drafts):
        return [min(1.0, ps[i][x] / qs[i][x]) for i, x in enumerate(drafts)]

    return _block_round(
        p_fn, q_fn, prefix, k, rng, thresholds=thresholds, recover=lambda p, q, w, rng: sample(residual(p, q), rng)
    )


def block_weight_on_draft(p_fn, q_fn, prefix, k, rng):
    """Block verification whose residual puts the prefix weight on q: norm(max(0, p - w q))
    instead of norm(max(0, w p - q)) (the thresholds are the paper's)."""

    def recover(p, q, w, rng):
        r = np.maximum(p - w * q, 0.0)
        return sample(r / r.sum() if r.sum() > 0 else p, rng)

    return _block_round(p_fn, q_fn, prefix, k, rng, thresholds=_block_thresholds, recover=recover)


def block_ordinary_residual(p_fn, q_fn, prefix, k, rng):
    """Block verification's acceptance with the token-wise residual norm(max(0, p - q)): the
    prefix weight w_tau is left out of the residual."""
    return _block_round(
        p_fn,
        q_fn,
        prefix,
        k,
        rng,
        thresholds=_block_thresholds,
        recover=lambda p, q, w, rng: sample(residual(p, q), rng),
    )


def traversal_node_before_siblings(p_fn, q_fn, prefix, k, rng):
    """Traversal verification that, after a child is rejected, tests the parent as a leaf before
    visiting the child's remaining siblings (the node ahead of its unvisited subtrees)."""
    try:
        return traversal.traverse(
            p_fn, q_fn, tuple(prefix), 1.0, full_shape((2,) * check_k(k)), rng, False, order="node-first"
        )
    except traversal.Rejected:
        raise RuntimeError("traversal verification rejected the root") from None


def match_target_sample_emit_draft(p_fn, q_fn, prefix, k, rng):
    """Accept x ~ q only if an independent y ~ p equals it; at the first mismatch emit the draft
    x (not y) and stop. The first token is always a draft: distributed as q."""

    def accept(p, q, x, rng):
        return sample(p, rng) == x

    return round_with(p_fn, q_fn, prefix, k, rng, accept=accept,
                  recover=lambda p, q, x, rng: [x])  # fmt: skip


def _spectr_q_over_unrejected(p, q, rng, width: int = 2):
    """k-SEQ whose later tries use q renormalized over the tokens not yet rejected (the
    without-replacement update), while the drafts are i.i.d. from the full q."""
    rho, r = spectr_parameters(p, q, width)
    q_left = q
    for _ in range(width):
        x = int(rng.choice(len(q), p=q))
        if rng.random() * rho * q_left[x] < p[x]:  # the bug: q_left, not q
            return True, x
        q_left = q_left.copy()
        q_left[x] = 0.0
        q_left = q_left / q_left.sum() if q_left.sum() > 0 else q
    return False, int(rng.choice(len(r), p=r))


def spectr_q_over_unrejected(p_fn, q_fn, prefix, k, rng):
    return tree_walk(p_fn, q_fn, prefix, k, rng, _spectr_q_over_unrejected)


def _canonical_selected_as_draft(p, q, rng, width: int = 2):
    """The canonical rule whose second step treats the selected draft as a sample of q: the
    token-wise test and residual use q instead of the selection's law r."""
    drafts = [int(rng.choice(len(q), p=q)) for _ in range(width)]
    selection, _ = canonical_selection(p, q, width)
    psi = selection[frozenset(drafts)]
    y = int(rng.choice(len(psi), p=psi))
    if accepts(p, q, y, rng):  # the bug: q, not r
        return True, y
    return False, sample(residual(p, q), rng)


def canonical_selected_as_draft(p_fn, q_fn, prefix, k, rng):
    return tree_walk(p_fn, q_fn, prefix, k, rng, _canonical_selected_as_draft)


RULE_MUTANTS: tuple[Mutant, ...] = (
    Mutant("block/tokenwise-acceptance", "block verification built from the token-wise test "
           "min(1, p/q) per position and the ordinary residual", "biased",
           block_tokenwise_acceptance, "vllm-project/vllm-ascend#7807; arXiv 2403.10444",
           "real-world"),
    Mutant("block/ordinary-residual", "block verification's acceptance, but the residual "
           "norm(max(0, p - q)) without the prefix weight w_tau", "biased",
           block_ordinary_residual, "vllm-project/vllm-ascend#7808; arXiv 2403.10444",
           "real-world"),
    Mutant("block/weight-on-draft", "block verification with the residual weight on the wrong "
           "side: norm(max(0, p - w_tau q))", "biased", block_weight_on_draft, _BLOCK),
    Mutant("spectr/q-over-unrejected", "SpecTr k-SEQ whose later tries renormalize q over the "
           "tokens not yet rejected, though the drafts are i.i.d.", "biased",
           spectr_q_over_unrejected, "arXiv 2310.15141"),
    Mutant("canonical/selected-as-draft", "canonical OT rule whose second step verifies the "
           "selected draft against q instead of the selection's law r", "biased",
           canonical_selected_as_draft, "arXiv 2410.18234"),
    Mutant("traversal/node-before-siblings", "traversal verification testing a node as a leaf "
           "after its first rejected child, before the child's siblings", "biased",
           traversal_node_before_siblings, "arXiv 2505.12398"),
    Mutant("verify/match-target-sample-emit-draft", "accept x only if an independent y ~ p "
           "equals it, else emit the draft x: first token ~ q", "biased",
           match_target_sample_emit_draft, "ml-explore/mlx-swift-lm#459; lablup/mlxcel#992",
           "real-world"),
)  # fmt: skip

RULE_CONTROLS: tuple[Mutant, ...] = (
    Mutant("control/block-verification", "block verification (the registered 'block' sampler)",
           "exact", get_sampler("block"), _BLOCK),
)  # fmt: skip
