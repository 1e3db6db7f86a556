"""The loop cases that drive an engine's machinery around the rule, and every sampling parameter
at the largest swept sizes (``mechanism_cases``, in every budget, before the sweeps;
``dense_parameter_cases``, the long greedy outputs and the dense row, after them).

The machinery (kind "edge", names starting ``MECHANISM_PREFIX``):

- ``continuous_batch_case``: more requests (10) than an engine-sized pool (``ENGINE_POOL``), with
  staggered max_tokens and stop ids, so that requests finish at different times and later ones
  start mid-stream in a freed slot; greedy requests, sampled requests with every field left at
  its default and sampled requests with explicit fields in one batch (a greedy request's
  sentinel must not reach another's unset temperature: NVIDIA/TensorRT-LLM#19390); penalties
  on rows that move when the batch is condensed (vllm-project/vllm#40269); two pairs of
  identical requests, one at the batch's two ends (the last starts after the first finishes);
  judged by statistics at once (``CONTINUOUS``), the joint law of every identical pair
  (``calls.identical_pairs``);
- ``late_start_case``: the same on 4 requests the enumerator follows (a pool of 2: request 3,
  identical to request 0, starts when a slot frees): the joint law of the whole batch exact;
- ``zero_draft_cases``: k = 0 inside the loop (every round target-only), a law case and a
  seeded case (seeds replayed alone and batched, and judged by their law): a zero-draft round
  that leaves a seeded request's counter-based stream where it was replays its uniform in the
  next round (vllm-project/vllm-ascend#13608);
- ``consecutive_calls_case`` (``CONSECUTIVE``): two ``generate`` calls in one subject process
  with one generator, judged by ``loop.consecutive``: a seeded request replays, unseeded ones
  of the second call are independent of the first.

The parameters at scale (kind "sweep", ``sweep`` "<parameter> x <size>"; cost linear in the
parameters, one case each):

- ``penalty_context_case``: repetition, frequency and presence penalties over a prompt of the
  largest context less 3, the penalised id only at the prompt's end (a penalty that reads the
  prompt's first N tokens misses it for every N below the context), enumerated exactly;
- ``long_output_case``: greedy requests of ``sweep_max_tokens`` tokens after a prompt of the
  largest context less that, one with penalties over a 16-id near-flat row (penalty state fed
  the wrong tokens, e.g. a round's last accepted token only, sgl-project/sglang#33643, sends the
  path elsewhere), one with a last-token grammar; one path, enumerated;
- ``dense_scale_case``: min-p and top-p over a dense row of ``scale_vocab`` ids, and logit bias
  on the three ids at the top of that vocabulary, each request of ``sweep_max_tokens`` tokens
  (at most ``DENSE_TOKENS``; kind "scale": a binned chi-square per position).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...laws.requests import ContextFreeLogits, LastTokenGrammar, LogitTable, Request, SamplingParams
from .cases import LoopCase, get_loop_budget, seeded_logits

MECHANISM_PREFIX = "mechanism"
"""The first word of every machinery case's name."""

CONSECUTIVE = "consecutive calls"
"""``LoopCase.sweep`` of the case judged across two consecutive calls (``loop.consecutive``)."""

CONTINUOUS = "continuous batching"
"""``LoopCase.sweep`` of a batch judged by statistics at once (``LawChecks.sampled_laws``, no
tokens per pass): more requests than the enumerator, or the reference's tokens per pass, can
follow jointly."""

ENGINE_POOL = 4
"""The pool an engine-sized batch is measured against: ``continuous_batch_case`` has more
requests than this, so a loop with this many slots starts its later requests mid-stream."""

DENSE_TOKENS = 16
"""The most tokens of a ``dense_scale_case`` request (each token a few rows of V floats)."""

FIRST_PENALTY_TOKENS = 100
"""What a penalty that reads only the prompt's first N tokens reads (the mutant's N): off every
swept size (the context sweep's prompts are 2^j - 1 and the largest context less 3)."""


def _v4() -> tuple[LogitTable, LogitTable]:
    return (
        LogitTable(seeded_logits(17, 2, 4, 4, 1.0), "target V4 period 2"),
        LogitTable(seeded_logits(19, 1, 4, 4), "draft V4"),
    )


def _v3() -> tuple[LogitTable, LogitTable]:
    return (
        LogitTable(seeded_logits(11, 2, 3, 3, 0.8), "target V3 period 2"),
        LogitTable(seeded_logits(12, 1, 3, 3), "draft V3"),
    )


def continuous_batch_case() -> LoopCase:
    """10 requests, k = 2, V4 (see the module's docstring): requests 0 and 9 identical (every
    field at its default), 2 and 7 identical (explicit fields); greedy 1, 4 and 8; stops at 2, 3
    and a max_tokens of 1 to 5, so requests finish in every round."""
    target, draft = _v4()
    default = SamplingParams(max_tokens=4)
    explicit = SamplingParams(temperature=0.7, top_k=3, presence_penalty=0.4, stop_token_ids=(3,), max_tokens=5)
    reqs = (
        Request((1,), default),
        Request((2, 0), SamplingParams(temperature=0, repetition_penalty=1.4, max_tokens=2)),
        Request((0,), explicit),
        Request((3, 1), SamplingParams(stop_token_ids=(2,), max_tokens=3)),
        Request((1, 2), SamplingParams(temperature=0, max_tokens=1)),
        Request((2,), SamplingParams(temperature=1.3, min_p=0.1, frequency_penalty=0.6, max_tokens=3)),
        Request((0, 3), SamplingParams(max_tokens=1)),
        Request((0,), explicit),
        Request((3,), SamplingParams(temperature=0, logit_bias={1: 0.5}, max_tokens=3)),
        Request((1,), default),
    )
    return LoopCase(
        f"{MECHANISM_PREFIX}: continuous batching, 10 requests beyond a pool of {ENGINE_POOL} (staggered "
        "max_tokens and stops; greedy, default and explicit params; identical 0 / 9 and 2 / 7); k=2",
        target,
        draft,
        reqs,
        2,
        kind="edge",
        sweep=CONTINUOUS,
    )


def late_start_case() -> LoopCase:
    """4 requests, k = 1, V3, enumerated: request 0 (one token) frees its slot after the first
    round of a pool of 2; request 3, identical to it, starts later; a greedy and a default one."""
    target, draft = _v3()
    first = SamplingParams(temperature=0.9, max_tokens=1)
    reqs = (
        Request((1,), first),
        Request((0,), SamplingParams(temperature=0, max_tokens=3)),
        Request((2,), SamplingParams(max_tokens=2)),
        Request((1,), first),
    )
    return LoopCase(
        f"{MECHANISM_PREFIX}: a late start (identical requests 0 and 3, request 3 admitted when a slot of a "
        "pool of 2 frees; greedy and default beside them); k=1",
        target,
        draft,
        reqs,
        1,
        kind="edge",
    )


def zero_draft_cases() -> list[LoopCase]:
    """k = 0: a batch enumerated (default, explicit with a repetition penalty, greedy), and a
    seeded request of 3 tokens beside an unseeded one (seeds replayed, and their law)."""
    target, draft = _v3()
    batch = (
        Request((1,), SamplingParams(max_tokens=3)),
        Request((0, 2), SamplingParams(temperature=0.8, repetition_penalty=1.3, max_tokens=2)),
        Request((2,), SamplingParams(temperature=0, max_tokens=2)),
    )
    seeded = (
        Request((0,), SamplingParams(temperature=0.9, max_tokens=3)),
        Request((1,), SamplingParams(max_tokens=3)),
    )
    return [
        LoopCase(
            f"{MECHANISM_PREFIX}: k = 0, target-only rounds inside the loop (default, penalised, greedy); k=0",
            target,
            draft,
            batch,
            0,
            kind="edge",
        ),
        LoopCase(
            f"{MECHANISM_PREFIX}: k = 0, a seeded request of 3 target-only rounds beside an unseeded one; k=0",
            target,
            draft,
            seeded,
            0,
            seeded=True,
            kind="edge",
        ),
    ]


def consecutive_calls_case() -> LoopCase:
    """Request 0 seeded per run (``loop.consecutive``), two sampled unseeded requests and a
    greedy one, V3, k = 2, max_tokens 2: called twice in one process with one generator."""
    target, draft = _v3()
    reqs = (
        Request((0,), SamplingParams(temperature=0.9, max_tokens=2)),
        Request((1,), SamplingParams(max_tokens=2)),
        Request((2,), SamplingParams(temperature=0.7, top_k=2, max_tokens=2)),
        Request((0,), SamplingParams(temperature=0, max_tokens=2)),
    )
    return LoopCase(
        f"{MECHANISM_PREFIX}: two consecutive calls in one process with one generator (request 0 seeded); k=2",
        target,
        draft,
        reqs,
        2,
        kind="edge",
        sweep=CONSECUTIVE,
    )


def penalised_prompt(n: int) -> tuple:
    """A prompt of n tokens over ids 0-2 (0, 1, 2, 0, 1, 2, ...) whose last token is 3: id 3
    appears once, at the end, where a penalty that reads a prefix of the prompt misses it."""
    return tuple(t % 3 for t in range(n - 1)) + (3,)


def penalty_context_case(context: int) -> LoopCase | None:
    """Penalties x the largest context (``penalised_prompt`` of ``context`` - 3, max_tokens 3,
    k = 2) on a context-free V4 target whose likeliest id is 3; enumerated."""
    if context < 8:
        return None
    target = ContextFreeLogits(np.array([0.3, 0.2, 0.1, 1.2]), "context-free target V4, id 3 likeliest")
    draft = ContextFreeLogits(np.array([0.1, 0.4, 0.0, 0.6]), "context-free draft V4")
    params = SamplingParams(repetition_penalty=2.0, frequency_penalty=0.4, presence_penalty=0.3, max_tokens=3)
    return LoopCase(
        f"sweep: penalties x context {context} (prompt {context - 3}, the penalised id 3 only at its end, "
        "max_tokens 3); k=2",
        target,
        draft,
        (Request(penalised_prompt(context - 3), params),),
        2,
        kind="sweep",
        sweep="penalties x context",
    )


def _grammar16() -> LastTokenGrammar:
    after = tuple(tuple(sorted({(t + 1) % 16, (t + 5) % 16, (t + 11) % 16})) for t in range(16))
    return LastTokenGrammar((0, 3, 7), after)


def long_output_case(context: int, max_tokens: int) -> LoopCase | None:
    """Greedy x max_tokens: two greedy requests of ``max_tokens`` tokens after a prompt of
    ``context`` - ``max_tokens`` (over ids 0-15), V16 near-flat context-free rows (the draft the
    target: k + 1 tokens a round unless the grammar cuts them), k = 4: one with
    repetition, frequency and presence penalties (the path visits every id in turn, so a count fed
    the wrong tokens changes it), one with a last-token grammar of 3 ids a state. One path."""
    if max_tokens < 2 or context <= max_tokens:
        return None
    row = np.linspace(1.0, 1.45, 16)
    target = ContextFreeLogits(row, "context-free target V16, near-flat")
    draft = ContextFreeLogits(row, "the same row: every greedy draft accepted")
    prompt = tuple(t % 16 for t in range(context - max_tokens))
    penalties = SamplingParams(
        temperature=0, repetition_penalty=1.1, frequency_penalty=0.05, presence_penalty=0.02, max_tokens=max_tokens
    )
    grammar = SamplingParams(temperature=0, allowed_tokens=_grammar16(), frequency_penalty=0.1, max_tokens=max_tokens)
    return LoopCase(
        f"sweep: penalties and a grammar x max_tokens {max_tokens} (greedy, prompt {len(prompt)}); k=4",
        target,
        draft,
        (Request(prompt, penalties), Request(prompt, grammar)),
        4,
        kind="sweep",
        sweep="penalties and grammar x max_tokens",
    )


def dense_scale_case(vocab: int, k: int, max_tokens: int) -> LoopCase | None:
    """Min-p, top-p and logit bias x the engine-scale vocabulary and the largest max_tokens: a
    dense context-free row of ``vocab`` normal logits (scale 2, ``default_rng(61)``), its draft the
    row plus noise of scale 0.15; request 0 with top-p 0.9 and min-p 0.02 at temperature 1.1,
    request 1 with logit bias +3, +2 and -4 on the vocabulary's last three ids at temperature 0.9;
    binned."""
    if vocab < 8 or max_tokens < 1:
        return None
    rng = np.random.default_rng(61)
    row = rng.normal(scale=2.0, size=vocab)
    target = ContextFreeLogits(row, f"dense context-free target V{vocab}")
    draft = ContextFreeLogits(row + rng.normal(scale=0.15, size=vocab), f"dense context-free draft V{vocab}")
    reqs = (
        Request((0,), SamplingParams(temperature=1.1, top_p=0.9, min_p=0.02, max_tokens=max_tokens)),
        Request(
            (vocab - 1,),
            SamplingParams(
                temperature=0.9, logit_bias={vocab - 1: 3.0, vocab - 2: 2.0, vocab - 3: -4.0}, max_tokens=max_tokens
            ),
        ),
    )
    return LoopCase(
        f"sweep: min-p, top-p and logit bias x V{vocab}, max_tokens {max_tokens} (dense row, biased ids at the top); "
        f"k={k}, binned",
        target,
        draft,
        reqs,
        k,
        kind="scale",
        sweep="parameters x vocabulary",
    )


@lru_cache(maxsize=8)
def _mechanism_cases(context: int, max_tokens: int, batch: int) -> tuple[LoopCase, ...]:
    machinery = [continuous_batch_case(), late_start_case(), *zero_draft_cases(), consecutive_calls_case()]
    at_scale = penalty_context_case(context)
    return tuple((machinery if batch else []) + ([at_scale] if at_scale is not None else []))


def mechanism_cases(budget: object = "standard") -> list[LoopCase]:
    """The budget's machinery cases (with the batch sweep, ``sweep_batch`` > 0), then its
    penalties over the largest context (with the context sweep): the module's
    docstring; before the sweeps, a few seconds in all. ``NO_SWEEPS`` turns them off with the
    sweeps. The same budget gives the same case objects (cached)."""
    b = get_loop_budget(budget)
    return list(_mechanism_cases(b.sweep_context, b.sweep_max_tokens if b.sweep_context else 0, b.sweep_batch))


@lru_cache(maxsize=8)
def _dense(vocab: int, k: int, context: int, max_tokens: int) -> tuple[LoopCase, ...]:
    long = long_output_case(context, max_tokens) if context else None
    dense = dense_scale_case(vocab, k, min(max_tokens, DENSE_TOKENS)) if max_tokens else None
    return tuple(c for c in (long, dense) if c is not None)


def dense_parameter_cases(budget: object = "standard") -> list[LoopCase]:
    """The budget's ``long_output_case`` (with the context and max_tokens sweeps), then its
    ``dense_scale_case`` (at ``scale_vocab``, ``scale_k``, ``sweep_max_tokens`` tokens at most
    ``DENSE_TOKENS``; none without an engine-scale vocabulary or the max_tokens sweep), after the
    sweeps: a loop that makes the long greedy outputs random costs ``extra_max_paths`` long runs
    before statistics, as ``sweeps.greedy_max_tokens_case`` does. Cached like ``mechanism_cases``."""
    b = get_loop_budget(budget)
    return list(_dense(b.scale_vocab, b.scale_k, b.sweep_context, b.sweep_max_tokens))


__all__ = [
    "CONSECUTIVE",
    "CONTINUOUS",
    "DENSE_TOKENS",
    "ENGINE_POOL",
    "FIRST_PENALTY_TOKENS",
    "MECHANISM_PREFIX",
    "consecutive_calls_case",
    "continuous_batch_case",
    "dense_parameter_cases",
    "dense_scale_case",
    "late_start_case",
    "long_output_case",
    "mechanism_cases",
    "penalised_prompt",
    "penalty_context_case",
    "zero_draft_cases",
]
