"""Loop mutants and controls judged against the engine's own target-only path (``--reference``).

An engine's speculative path and its normal (target-only) sampler are two pieces of code, and
they need not agree with this project's definition, only with each other. SGLang's speculative
verifier applies top-k, renormalises, then top-p, while its normal sampler applies top-p first
(sgl-project/sglang#36173). Each entry here carries its own target-only path
(``Mutant.own_reference``), which the mutant report passes as the reference:

- the mutant: the speculative path applies top-p before top-k, the target-only path top-k first
  (this project's order): NOT EXACT against its own reference, and without one (the truncation
  cases of ``interfaces.loop.truncation_cases``);
- the control: both paths apply top-p before top-k: EXACT against its own reference; without one
  NOT EXACT, the finding naming the order (``interfaces.loop.semantics``).

Each loop is the reference loop (``samplers.reference_loop.loop_with``) with its target rows, and
each target-only path ``reference_loop.target_only_with`` with its step, processed by
``interfaces.loop.semantics.top_p_before_top_k``.
"""

from __future__ import annotations

from ..interfaces.loop.semantics import top_p_before_top_k
from ..laws.requests import step_distribution
from ..samplers import reference_loop as ref
from .catalogue import Mutant


def top_p_first_row(s, logits, drafts, i, n):
    """The target row of the speculative path, with top-p applied before top-k."""
    hist = tuple(s.penalty_tokens) + tuple(drafts[:i])
    return top_p_before_top_k(logits, s.params, s.request.prompt, hist, tuple(s.grammar_tokens) + tuple(drafts[:i]))


def speculative_top_p_first(target, draft, requests, k, rng):
    """The reference loop whose speculative path verifies against target rows that apply top-p
    before top-k (the drafts as the reference's: any q keeps the rule exact)."""
    return ref.loop_with(target, draft, requests, k, rng, trow=top_p_first_row)


def target_only_top_k_first(target, draft, requests, k, rng):
    """The engine's normal sampler in this project's order (top-k, then top-p); ignores the draft and k."""
    return ref.target_only_with(step_distribution, target, requests, rng)


def target_only_top_p_first(target, draft, requests, k, rng):
    """The engine's normal sampler applying top-p before top-k; ignores the draft and k."""
    return ref.target_only_with(top_p_before_top_k, target, requests, rng)


_S = "specverify"

LOOP_ENGINE_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "loop-truncation/top-p-first-speculative-only",
        "top-k / top-p order swapped on the speculative path only: it applies top-p before top-k, the "
        "engine's own target-only path top-k first",
        "biased",
        speculative_top_p_first,
        "sgl-project/sglang#36173",
        _S,
        interface="loop",
        own_reference=target_only_top_k_first,
    ),
)

LOOP_ENGINE_CONTROLS: tuple[Mutant, ...] = (
    Mutant(
        "loop-control/top-p-first-both-paths",
        "both paths apply top-p before top-k: exact against the engine's own target-only path (without "
        "--reference, NOT EXACT with the order named)",
        "exact",
        speculative_top_p_first,
        "sgl-project/sglang#36173",
        _S,
        interface="loop",
        own_reference=target_only_top_p_first,
    ),
)

__all__ = [
    "LOOP_ENGINE_CONTROLS",
    "LOOP_ENGINE_MUTANTS",
    "speculative_top_p_first",
    "target_only_top_k_first",
    "target_only_top_p_first",
    "top_p_first_row",
]
