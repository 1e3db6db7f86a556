"""The optimum tokens per round: the most an exact verifier of a given draft structure can emit.

Chains. For one chain of k drafts, block verification (arXiv 2403.10444, Theorem 2) is optimal
among all exact verifiers of the chain: ``block_expected_tokens`` computes its expected tokens
per round exactly (by enumeration, ``specverify.laws.exact``), the optimum that
``optimum_tokens_per_round`` reports for a battery case.

Trees verified node by node: ``nodewise_optimum_tokens_per_round``, every node at the transport
LP's optimal acceptance (``specverify.laws.optimal_acceptance``, the one-step oracle, through the canonical-ot
rule of ``samplers.transport``).

Part of the round interface, above ``laws.optimal_acceptance``, ``laws.exact`` and ``samplers``: it
runs samplers through the enumerator,
which ``laws`` (imported by ``samplers``) must not.
"""

from __future__ import annotations

from ...common.validation import check_k
from ...laws.exact import round_length_distribution
from ...laws.optimal_acceptance import optimal_acceptance
from ...samplers.block import block_step
from ...samplers.transport import canonical_step


def block_expected_tokens(p_fn, q_fn, prefix, k: int, max_paths: int = 200_000) -> float:
    """Block verification's exact expected tokens per round from ``prefix``: the optimum over
    exact verifiers of one chain of k drafts (arXiv 2403.10444, Theorem 2)."""
    dist = round_length_distribution(block_step, p_fn, q_fn, tuple(prefix), check_k(k), max_paths=max_paths)
    return float(sum(n * w for n, w in dist.items()))


def optimum_tokens_per_round(case) -> float:
    """The optimum tokens per round for a battery case's chain of k drafts (its model, prefix
    and k): block verification's exact expectation."""
    return block_expected_tokens(case.model.p_fn, case.model.q_fn, case.prefix, case.k)


def nodewise_optimum_tokens_per_round(case, width: int = 2, max_paths: int = 200_000) -> float:
    """For a tree of depth ``case.k`` with ``width`` i.i.d. drafts per node, verified node by node
    (the structure of the tree-iid, spectr and canonical-ot samplers): the exact expected tokens
    per round when every node reaches the transport LP's optimal acceptance (the canonical-ot
    rule). On i.i.d. models it is the optimum among node-by-node rules for that draft structure
    (each level accepts independently, so the most per node is the most per round); on Markov
    models it is the greedy per-node optimum. It is not an optimum over every exact tree
    verifier: sequence-level rules (traversal verification, arXiv 2505.12398) can accept more
    from the same tree, as block verification does for a chain."""
    model, k = case.model, check_k(case.k)
    if model.order == 0 and model.period == 1:  # i.i.d.: every node alike, sum of a^i in closed form
        a = optimal_acceptance(model.p_fn(()), model.q_fn(()), width)
        return float(sum(a**i for i in range(k + 1)))

    def sampler(p_fn, q_fn, prefix, k, rng):
        return canonical_step(p_fn, q_fn, prefix, k, rng, width=width)

    dist = round_length_distribution(
        sampler, case.model.p_fn, case.model.q_fn, tuple(case.prefix), check_k(case.k), max_paths=max_paths
    )
    return float(sum(n * w for n, w in dist.items()))


__all__ = ["block_expected_tokens", "nodewise_optimum_tokens_per_round", "optimum_tokens_per_round"]
