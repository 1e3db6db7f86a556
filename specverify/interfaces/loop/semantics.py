"""Where a law departs from this project's target-only definition, named: "top-p before top-k".

This project's target-only sampling (``laws.processing.process_step``) applies, after the mask,
logit bias and penalties, temperature, then top-k, then top-p (on the renormalised top-k),
then min-p. Engines do not all agree: SGLang's speculative verifier applies top-k, renormalises,
then top-p, while its normal sampler applies top-p first (sgl-project/sglang#36173). Where both
truncations are set and their order matters, the two orders give different laws, and a loop
whose output follows the other order is told so in words, not only by a TV.

``VARIANTS`` holds each known alternative semantics as a step function with
``laws.requests.step_distribution``'s signature; ``variant_law`` is a request's exact output law
under one (the DP of ``laws.requests.sequence_law`` with that step); ``named_difference`` says
which variant a law follows when the project's definition does not give it. Used twice: on a
finding without ``--reference`` (the semantic difference named in the finding) and, with a
reference, to report where the engine's own target-only path differs from the project's
definition (information, never a finding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ...laws import exact
from ...laws.processing import keep_min_p, keep_top_k, keep_top_p
from ...laws.requests import Request, SamplingParams, finished, sequence_law, step_distribution

MATCH_TV = 1e-9
"""A law within this TV of a variant's (float64 rounding) follows that variant."""


LOOSE_CACHE_SIZE = 1024
"""The most params whose untruncated copy ``untruncated`` keeps (a loop's requests: a handful)."""

_untruncated: dict[int, tuple[SamplingParams, SamplingParams]] = {}


def untruncated(params: SamplingParams) -> SamplingParams:
    """``params`` without top-k, top-p and min-p, made once per params object and kept (with
    the object itself, so that its id is not reused while kept): a loop asks for it on every
    row of every step, and a fresh ``dataclasses.replace`` (the params' validation included)
    costs more than the row's processing."""
    hit = _untruncated.get(id(params))
    if hit is None or hit[0] is not params:
        if len(_untruncated) >= LOOSE_CACHE_SIZE:
            _untruncated.clear()
        hit = _untruncated[id(params)] = (params, replace(params, top_k=None, top_p=1.0, min_p=0.0))
    return hit[1]


def top_p_before_top_k(logits, params: SamplingParams, prompt, output, grammar_output=None) -> np.ndarray:
    """``step_distribution`` with top-p applied before top-k (each renormalised), min-p last."""
    p = step_distribution(logits, untruncated(params), prompt, output, grammar_output)
    if params.greedy:
        return p
    p = keep_top_p(p, params.top_p) if params.top_p is not None else p
    p = keep_top_k(p, params.top_k) if params.top_k is not None else p
    return keep_min_p(p, params.min_p)


VARIANTS: dict[str, Callable[..., np.ndarray]] = {"applies top-p before top-k": top_p_before_top_k}
"""Each known alternative target-only semantics: its words -> its step function."""


def both_truncations(params: SamplingParams) -> bool:
    """Whether both top-k and top-p truncate (their order can matter)."""
    return not params.greedy and params.top_k is not None and params.top_p is not None and params.top_p < 1.0


def variant_law(target, request: Request, step: Callable[..., np.ndarray]) -> dict:
    """The exact law of the request's whole output when each step is ``step`` (the DP of
    ``laws.requests.sequence_law``)."""
    prompt, params = request.prompt, request.params
    vocab = len(np.asarray(target(prompt)))
    law: dict = {}
    frontier: dict = {(): 1.0}
    while frontier:
        nxt: dict = {}
        for out, w in frontier.items():
            if finished(out, params):
                law[out] = law.get(out, 0.0) + w
                continue
            p = step(np.asarray(target(prompt + out))[:vocab], params, prompt, out)
            for t in np.flatnonzero(p).tolist():
                nxt[out + (t,)] = nxt.get(out + (t,), 0.0) + w * float(p[t])
        frontier = nxt
    return law


def named_difference(target, request: Request, law: dict) -> str | None:
    """The words of the variant (``VARIANTS``) whose law of ``request`` is ``law`` within
    ``MATCH_TV`` while the project's definition is not; None when none is."""
    if exact.total_variation(law, sequence_law(target, request)) <= MATCH_TV:
        return None
    for words, step in VARIANTS.items():
        if exact.total_variation(law, variant_law(target, request, step)) <= MATCH_TV:
            return words
    return None


def difference_words(words: str) -> str:
    """A finding's sentence for a named difference: the loop's law is target-only sampling that
    ``words``, not this project's, and what to do when the engine means it."""
    return (
        f"the output follows target-only sampling that {words}; this project's definition applies top-k, "
        f"renormalises, then top-p (engines differ here: sgl-project/sglang#36173). If the engine's own "
        f"target-only path does the same, pass it as --reference to judge the loop against it"
    )


__all__ = [
    "LOOSE_CACHE_SIZE",
    "MATCH_TV",
    "VARIANTS",
    "both_truncations",
    "difference_words",
    "named_difference",
    "top_p_before_top_k",
    "untruncated",
    "variant_law",
]
