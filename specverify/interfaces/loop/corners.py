"""The loop interface's pairwise corners (``interfaces.corners`` says what a corner is and why):
context x rounds, context x max_tokens and context x requests per batch. Prompts of the largest
context less the output, the first token 0, over a target whose rows the first prompt token alone
chooses (``first_token_only_target``), judged per position like the sampled sweeps
(``LoopBattery.positions``). The pairs among rounds, max_tokens and batch are left out: a batch of
``sweep_batch`` requests of ``sweep_max_tokens`` tokens is B x m tokens a run (128 x 128 x 1,000
runs at thorough: about half an hour of the reference loop).
"""

from __future__ import annotations

import numpy as np

from ...laws.requests import FirstTokenLogits, Request, SamplingParams
from ..corners import CORNER_PREFIX
from .cases import LoopCase, get_loop_budget
from .sweeps import BATCH_PARAMS, context_free_pair

FIRST_TOKEN_ROWS = (
    (1.2, -0.4, 0.3, -1.0),
    (-0.8, 0.9, -0.2, 0.6),
    (0.1, 0.2, -1.1, 1.0),
)
"""The loop corners' target: logits chosen by the first prompt token (modulo 3) alone."""


def first_token_only_target() -> FirstTokenLogits:
    """A ``FirstTokenLogits`` over 4 ids whose row is ``FIRST_TOKEN_ROWS[first token % 3]``
    whatever the last token: under context-free params every output position of a request has
    the processed row of its first prompt token as its law (judged per position), and a loop
    that shows the target a window without that token reads another row."""
    table = np.repeat(np.array(FIRST_TOKEN_ROWS)[:, None, :], 4, axis=1)
    return FirstTokenLogits(table, "target V4, rows chosen by the first token alone")


def long_prompt(n: int) -> tuple:
    """A prompt of n tokens: 0, then 1, 2, 3, 1, 2, 3, ... (the first token alone is 0)."""
    return (0,) + tuple(1 + t % 3 for t in range(n - 1))


def loop_corner(name: str, requests: tuple, k: int, sweep: str) -> LoopCase:
    target, (_, draft) = first_token_only_target(), context_free_pair()
    return LoopCase(
        f"{CORNER_PREFIX}: {name}; per position", target, draft, requests, k, kind="sweep", sweep=sweep, positions=True
    )


def loop_corner_cases(budget) -> list[LoopCase]:
    """The loop's corners (context x rounds, x max_tokens, x requests per batch; see the module's
    docstring), those whose two dimensions the budget sweeps, where it has ``sweep_corners``."""
    b = get_loop_budget(budget)
    if not (b.sweep_corners and b.sweep_context):
        return []
    longest, out = b.sweep_context, []
    if b.sweep_rounds and longest > 2 * b.sweep_rounds:
        m = 2 * b.sweep_rounds
        params = SamplingParams(temperature=0.8, top_k=3, max_tokens=m)
        what = f"context {longest} x {b.sweep_rounds} rounds or more (prompt {longest - m}, max_tokens {m}, k=1)"
        out.append(loop_corner(what, (Request(long_prompt(longest - m), params),), 1, "context x rounds"))
    if b.sweep_max_tokens and longest > b.sweep_max_tokens:
        m = b.sweep_max_tokens
        params = SamplingParams(temperature=0.6, top_p=0.95, logit_bias={2: 1.2}, max_tokens=m)
        what = f"context {longest} x max_tokens {m} (prompt {longest - m}, k=4)"
        out.append(loop_corner(what, (Request(long_prompt(longest - m), params),), 4, "context x max_tokens"))
    if b.sweep_batch and longest > 2:
        prompt = long_prompt(longest - 2)
        cycle = BATCH_PARAMS
        reqs = tuple(Request(prompt, cycle[i % len(cycle)]) for i in range(b.sweep_batch))
        what = f"context {longest} x a batch of {b.sweep_batch} requests (prompts {longest - 2}, max_tokens 2, k=2)"
        out.append(loop_corner(what, reqs, 2, "context x requests per batch"))
    return out


__all__ = ["FIRST_TOKEN_ROWS", "first_token_only_target", "long_prompt", "loop_corner", "loop_corner_cases"]
