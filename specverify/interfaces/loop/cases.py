"""The loop interface's cases: the budgets, ``LoopCase``, the fixed and edge cases, and the seed
tree every drawn case and run comes from.

A ``LoopCase`` is a target and a draft (``loop.LogitTable``, ``loop.FirstTokenLogits`` or
``loop.ContextFreeLogits``), a batch of requests and k. Cases, in this order (every one judged by
``loop.checks.LoopBattery``):

- the core (``loop_cases``, kind "fixed"): logit tables on a vocabulary of 3 with drafts of the
  same width, wider (padding rows with finite logits, as real pairs have) and narrower; single
  requests and a ragged batch with different params and lengths; k 1 or 2; max_tokens 1 to 3;
- the edges (``edge_cases``, kind "edge", in every budget): max_tokens 0 and 1, a prompt ending
  with its stop id, a stop id as a likely first token, a grammar allowing one token, top-k 1, top-p
  0.05, min-p 0.95, temperature with logit bias, min-p, top-k and top-p together, penalties over
  repeated prompt tokens, an empty batch, two identical unseeded requests, a ragged batch of 8,
  and k = 3 on a vocabulary of 4 with a 3-token prompt and max_tokens 4;
- ``budget.generated`` cases drawn from the check's seed (``loop.generated.generated_loop_cases``);
- then the seeded case (request 0 seeded beside an unseeded one): seeds by replay and by law;
- the sweeps (``loop.sweeps.sweep_loop_cases``, kind "sweep", in every budget) and the corners
  (``loop.corners``);
- last, the engine-scale batches (``loop.generated.scale_loop_cases``, kinds "scale" and
  "aimed"), judged by a binned chi-square per position.

The check's seed fixes everything (``SEED_STREAMS``: one child of ``numpy.random.SeedSequence(seed)``
per purpose), the budget every count (paths, runs, seeds). The bar a subject is judged against is
the reference loop's law and tokens per pass (``loop.reference``). The counterexample search's
smaller candidates are ``loop.counterexample.small_loop_cases``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ...battery import budgets
from ...battery.budgets import LoopBudget
from ...battery.seed_tree import stream
from ...laws.requests import LastTokenGrammar, LogitTable, Request, SamplingParams

LOOP_BUDGETS = budgets.view("loop")
"""The loop sections of the named budgets (``budgets.TABLE``), by name."""


def campaign_loop_budget(name: str) -> LoopBudget:
    """``tv=X``: the thorough loop budget with every request the enumerator cannot follow (fixed,
    edge or generated case) sampled until its chi-square sees TV X (``budgets.campaign``)."""
    return budgets.campaign("loop", name)


def get_loop_budget(budget: object) -> LoopBudget:
    """A ``LoopBudget`` as it is, a name of ``LOOP_BUDGETS`` or ``tv=X`` (``campaign_loop_budget``);
    another interface's budget (a round ``Budget``) by its name (``budgets.section``)."""
    return budgets.section("loop", budget)


@dataclass(frozen=True)
class LoopCase:
    """A target and a draft (logit tables), a batch of requests and k."""

    name: str
    target: LogitTable
    draft: LogitTable
    requests: tuple
    k: int
    seeded: bool = False  # a reproducibility case: request 0 is seeded per run
    kind: str = "fixed"  # "fixed" (the core), "edge" (edge_cases), "generated" (generated_loop_cases),
    # "declared" (by the subject, ``interfaces.loop.declared_cases``), "sweep" (sweep_loop_cases),
    # "scale" / "aimed" (SCALE_KINDS)
    side: str | None = None  # an engine-scale batch's ``scale.scale_pair`` side ("residual" / "draft")
    sweep: str | None = None  # the dimension a sweep case reaches (a key of ``SWEEP_DIMENSIONS``; "a x b": a corner)
    positions: bool = False  # judged per position and by pairs of positions (a context-free target)

    @property
    def vocab_size(self) -> int:
        return self.target.width


def seeded_logits(seed: int, period: int, vocab: int, width: int, scale: float = 1.2) -> np.ndarray:
    """A (period, vocab, width) table of normal logits from ``default_rng(seed)``, rounded to 3
    places: the fixed cases' and the counterexample candidates' tables."""
    return np.random.default_rng(seed).normal(scale=scale, size=(period, vocab, width)).round(3)


@lru_cache(maxsize=1)
def loop_cases() -> tuple[LoopCase, ...]:
    target = LogitTable(seeded_logits(11, 2, 3, 3, 0.8), "target V3 period 2")
    same = LogitTable(seeded_logits(12, 1, 3, 3), "draft V3")
    padded = seeded_logits(13, 1, 3, 4)
    padded[..., 3] = 0.5  # a padding row with a finite logit, as real pairs have
    wider = LogitTable(padded, "draft V3 + 1 padding row")
    narrower = LogitTable(seeded_logits(14, 1, 3, 2), "draft with 2 of the 3 ids")
    tiny_t = seeded_logits(15, 1, 3, 3)
    tiny_t[..., 2] = -1e4  # the target never emits token 2 ...
    tiny_d = seeded_logits(16, 1, 3, 3)
    tiny_d[..., 2] = np.log(1e-8) + tiny_d[..., :2].max(axis=-1)  # ... the draft rarely drafts it
    grammar = LastTokenGrammar((0, 1), ((1, 2), (0, 2), (0, 1)), ((0, 1), (1, 2), (0, 1, 2)))
    penalties = SamplingParams(
        temperature=1.0,
        repetition_penalty=1.4,
        frequency_penalty=0.5,
        presence_penalty=0.3,
        min_p=0.15,
        logit_bias={0: 0.5},
        stop_token_ids=(2,),
        max_tokens=3,
    )
    greedy = SamplingParams(temperature=0, repetition_penalty=2.5, logit_bias={1: 0.3}, max_tokens=2)
    short = SamplingParams(temperature=0.8, top_k=1, max_tokens=1)  # one token, no branching
    return (
        LoopCase("penalties, min-p, logit bias, stop; k=2", target, same, (Request((0,), penalties),), 2),
        LoopCase(
            "grammar, top-k, top-p; narrower draft; k=2",
            target,
            narrower,
            (
                Request(
                    (1,), SamplingParams(temperature=0.9, top_k=2, top_p=0.95, max_tokens=3, allowed_tokens=grammar)
                ),
            ),
            2,
        ),
        LoopCase(
            "logit bias, stop; draft with a padding row; k=1",
            target,
            wider,
            (
                Request(
                    (2,),
                    SamplingParams(temperature=1.3, logit_bias={2: -0.7, 1: 0.4}, stop_token_ids=(1,), max_tokens=3),
                ),
            ),
            1,
        ),
        LoopCase(
            "draft q(2) = 1e-8 where the target has p(2) = 0; k=2",
            LogitTable(tiny_t, "target p(2) = 0"),
            LogitTable(tiny_d, "draft q(2) = 1e-8"),
            (Request((0,), SamplingParams(max_tokens=2)),),
            2,
        ),
        LoopCase(
            "ragged batch: penalties + stop, greedy, one token; k=2",
            target,
            same,
            (
                Request((0,), replace(penalties, min_p=0.0, logit_bias={}, stop_token_ids=())),
                Request((1, 2), greedy),
                Request((2,), short),
            ),
            2,
        ),
        LoopCase(
            "seeded request beside an unseeded one; k=1",
            target,
            same,
            (
                Request((0,), SamplingParams(max_tokens=3, repetition_penalty=1.3)),
                Request((1,), SamplingParams(max_tokens=3)),
            ),
            1,
            seeded=True,
        ),
    ) + edge_cases()


def _one_hot_rows(table: np.ndarray) -> np.ndarray:
    """Each row's largest logit kept, every other at -inf: a draft whose q is one-hot."""
    return np.where(table == table.max(axis=-1, keepdims=True), table, -np.inf)


@lru_cache(maxsize=1)
def edge_cases() -> tuple[LoopCase, ...]:
    """The edges every budget reaches on purpose (part of ``loop_cases``), each enumerable in a few
    dozen paths: max_tokens 0 beside 1; a prompt that ends with its stop id where the stop id is
    also a likely first token; a grammar allowing one token, top-k 1, top-p 0.05 and min-p 0.95 in
    one batch (each request deterministic); temperature with logit bias, min-p, top-k and top-p
    together; penalties over a prompt with repeated tokens; an empty batch; two identical
    unseeded requests in one batch (their joint law must be the product of their laws: a loop
    that shares one output between them is caught exactly); a ragged batch of 8
    (prompts of 1 to 4 tokens, max_tokens 0 to 5, greedy and sampled); and k = 3 drafts on a
    vocabulary of 4 with a 3-token prompt and max_tokens 4 (a period-2 target, so the prompt's
    length matters; a one-hot draft and top-k 2 keep it to 16 paths)."""
    t3 = LogitTable(seeded_logits(11, 2, 3, 3, 0.8), "target V3 period 2")
    d3 = LogitTable(seeded_logits(12, 1, 3, 3), "draft V3")
    t4 = LogitTable(seeded_logits(17, 2, 4, 4, 1.0), "target V4 period 2")
    d4 = LogitTable(seeded_logits(19, 1, 4, 4), "draft V4")
    hot4 = LogitTable(_one_hot_rows(seeded_logits(18, 1, 4, 4)), "one-hot draft V4")
    one = LastTokenGrammar((1,), ((2,), (0,), (1, 2), (1,)))  # one token allowed at most states
    ragged = (
        Request((0,), SamplingParams(temperature=0, max_tokens=5)),
        Request((1, 2), SamplingParams(max_tokens=0)),
        Request((2, 0, 1), SamplingParams(temperature=0, repetition_penalty=1.5, max_tokens=3)),
        Request((3, 3, 1, 0), SamplingParams(top_k=1, max_tokens=4, stop_token_ids=(2,))),
        Request((1,), SamplingParams(temperature=0.9, max_tokens=1)),
        Request((2, 1), SamplingParams(temperature=0, logit_bias={3: 0.6}, max_tokens=2)),
        Request((0, 0, 0), SamplingParams(min_p=0.9, max_tokens=5)),
        Request((3,), SamplingParams(top_p=0.4, max_tokens=2)),
    )
    return (
        LoopCase(
            "edge: max_tokens 0 beside max_tokens 1; k=1",
            t3,
            d3,
            (Request((1,), SamplingParams(max_tokens=0)), Request((0,), SamplingParams(temperature=0.7, max_tokens=1))),
            1,
            kind="edge",
        ),
        LoopCase(
            "edge: a prompt ending with its stop id, the stop id a likely first token; k=2",
            t3,
            d3,
            (Request((0, 2), SamplingParams(stop_token_ids=(2,), logit_bias={2: 1.0}, max_tokens=2)),),
            2,
            kind="edge",
        ),
        LoopCase(
            "edge: a grammar allowing one token, top-k 1, top-p 0.05, min-p 0.95; k=2",
            t4,
            hot4,
            (
                Request((0,), SamplingParams(allowed_tokens=one, max_tokens=3)),
                Request((1,), SamplingParams(temperature=1.3, top_k=1, max_tokens=3)),
                Request((2,), SamplingParams(top_p=0.05, max_tokens=3)),
                Request((3,), SamplingParams(min_p=0.95, max_tokens=3)),
            ),
            2,
            kind="edge",
        ),
        LoopCase(
            "edge: temperature, logit bias, min-p, top-k and top-p together; k=2",
            t4,
            d4,
            (
                Request(
                    (1,),
                    SamplingParams(
                        temperature=0.7, logit_bias={0: 0.8, 3: -0.5}, min_p=0.1, top_k=3, top_p=0.9, max_tokens=3
                    ),
                ),
            ),
            2,
            kind="edge",
        ),
        LoopCase(
            "edge: penalties over a prompt with repeated tokens; k=2",
            t3,
            d3,
            (
                Request(
                    (1, 1, 2, 1),
                    SamplingParams(repetition_penalty=1.6, frequency_penalty=0.4, presence_penalty=0.3, max_tokens=2),
                ),
            ),
            2,
            kind="edge",
        ),
        LoopCase("edge: an empty batch; k=2", t3, d3, (), 2, kind="edge"),
        LoopCase(
            "edge: two identical unseeded requests (same prompt and params) in one batch; k=2",
            t3,
            d3,
            (Request((1,), SamplingParams(temperature=0.9, max_tokens=2)),) * 2,
            2,
            kind="edge",
        ),
        LoopCase(
            "edge: a ragged batch of 8 (prompts 1-4 tokens, max_tokens 0-5); k=2", t4, hot4, ragged, 2, kind="edge"
        ),
        LoopCase(
            "edge: k=3 on a vocabulary of 4, a 3-token prompt, max_tokens 4; k=3",
            t4,
            hot4,
            (Request((2, 0, 3), SamplingParams(temperature=0.8, top_k=2, logit_bias={1: 0.7}, max_tokens=4)),),
            3,
            kind="edge",
        ),
    )


# --------------------------------------------------------------------------- drawn from the seed

SEED_STREAMS = (
    "generated cases",
    "seed-law and same-seed runs",
    "engine-scale cases",
    "engine-scale runs",
    "shrink cases",
    "shrink runs",
    "loop chi-square",
    "seed replay runs",
    "counterexample runs",
)
"""What each child of ``numpy.random.SeedSequence(seed)`` draws (``battery.stream``), by index:
child 0 the generated cases (one grandchild per case, so that case i is the same whatever the
budget's count), child 1 the ``rng`` handed to the loop in the seed-law and same-seed runs (what
unseeded batch-mates draw from), child 2 the engine-scale and aimed cases (``scale_loop_cases``,
one grandchild per case), child 3 the rng of their runs, child 4 the smaller batches a binned
finding is shrunk over (``shrink_binned_loop``, one grandchild per candidate), child 5 the rng of
their runs, child 6 the chi-square of a case the enumerator cannot follow (grandchild i for case i
of the battery's cases), child 7 the loop's rng in the seed replay runs (``loop_seed_task``: node
``(7, s, r)`` for request seed s and run r: 0 alone, 1 batched, 2 the second request alone, 3 the
same-seed pair), child 8 the counterexample search's chi-square runs (grandchild i for candidate
i). The root itself (``default_rng(seed)``) draws the replay check's three runs."""


def seed_stream(seed: int, purpose: str, *path: int) -> np.random.SeedSequence:
    """The node ``(SEED_STREAMS.index(purpose), *path)`` of ``SeedSequence(seed)``'s tree."""
    return stream(seed, SEED_STREAMS.index(purpose), *path)


CORE_KINDS = ("fixed", "declared")
"""LoopCase kinds judged as the core: every path enumerated up to ``max_paths``, else ``samples``
runs whose power is required (an edge or generated case: ``extra_samples``, its power stated)."""

SCALE_KINDS = ("scale", "aimed")
"""LoopCase kinds judged by ``LoopBattery.scale_case`` (a binned chi-square per position)."""


__all__ = [
    "CORE_KINDS",
    "LOOP_BUDGETS",
    "LoopBudget",
    "LoopCase",
    "SCALE_KINDS",
    "SEED_STREAMS",
    "campaign_loop_budget",
    "edge_cases",
    "get_loop_budget",
    "loop_cases",
    "seed_stream",
    "seeded_logits",
]
