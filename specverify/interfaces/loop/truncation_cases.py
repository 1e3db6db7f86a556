"""The truncation-order cases: top-k and top-p both set, where their order changes the law.

This project's target-only sampling applies top-k, renormalises, then top-p
(``laws.processing.process_step``); an engine may apply top-p first on one path and not the other
(sgl-project/sglang#36173). On these cases the two orders give laws at exact TV 0.14 to 0.39
apart (``loop.semantics.variant_law``; each request of them), so that a loop whose speculative path applies top-p
before top-k is NOT EXACT at every budget, the finding naming the order, and an engine whose
both paths do so is EXACT only against its own target-only path (``--reference``). Kind "edge":
enumerated (a vocabulary of 4, at most 3 tokens), in every budget.
"""

from __future__ import annotations

from functools import lru_cache

from ...laws.requests import LogitTable, Request, SamplingParams
from .cases import LoopCase, seeded_logits


@lru_cache(maxsize=1)
def truncation_cases() -> tuple[LoopCase, ...]:
    """A single request (top-k 3, top-p 0.7: TV 0.31 between the orders) and a batch of two
    (top-k 3 / top-p 0.7: TV 0.14, beside top-k 2 / top-p 0.6: TV 0.39), k = 2, each on its own period-2 table."""
    one = LogitTable(seeded_logits(62, 2, 4, 4, 1.0), "target V4 period 2 (order-sensitive)")
    two = LogitTable(seeded_logits(61, 2, 4, 4, 1.0), "target V4 period 2 (order-sensitive, batch)")
    draft = LogitTable(seeded_logits(71, 1, 4, 4), "draft V4")
    wide = SamplingParams(temperature=1.0, top_k=3, top_p=0.7, max_tokens=3)
    narrow = SamplingParams(temperature=1.0, top_k=2, top_p=0.6, max_tokens=2)
    return (
        LoopCase("truncation order: top-k 3 and top-p 0.7; k=2", one, draft, (Request((0,), wide),), 2, kind="edge"),
        LoopCase(
            "truncation order: a batch of top-k / top-p pairs; k=2",
            two,
            draft,
            (Request((0,), wide), Request((2, 3), narrow)),
            2,
            kind="edge",
        ),
    )


__all__ = ["truncation_cases"]
