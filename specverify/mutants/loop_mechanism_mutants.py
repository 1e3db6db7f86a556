"""Loop mutants in the machinery around the rule: how an engine schedules, batches, seeds and
keeps state, each a few lines on the reference loop (``specverify.samplers.reference_loop``) or
on ``pool_generate``, the reference's rounds run by a continuous-batching scheduler.

The loop battery drives these mechanisms with ``interfaces.loop.mechanism_cases`` (more requests
than a pool, mixed greedy / default / explicit params, consecutive calls, k = 0, parameters at
the largest sizes). References: the public engine reports of the same class of defect; the
mechanisms are modelled, not copied from those engines.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from ..common.validation import check_int
from ..interfaces.loop.mechanism_cases import ENGINE_POOL, FIRST_PENALTY_TOKENS
from ..laws.requests import Output, Request, check_requests
from ..samplers import reference_loop as ref
from ..samplers.chain import LazyRows, verify
from .catalogue import Mutant

# -- a continuous-batching loop: a pool of slots, requests admitted as slots free ------------------


def run_round(s: ref.State, target, draft, k: int, vocab: int) -> None:
    """One round of one request, as the reference loop runs it (drafts, the rule, the emitted
    block cut at a stop, logprobs from the target rows, penalties and grammar advanced)."""
    n = ref.n_drafts(s, k)
    drafts, qs = ref.draft_tokens(s, draft, n, vocab)
    cache: dict[int, np.ndarray] = {}

    def row(i: int) -> np.ndarray:
        if i not in cache:
            cache[i] = ref.target_row(s, target(s.context() + tuple(drafts[:i])), drafts, i, n)
        return cache[i]

    j, token = verify(LazyRows(row), qs, drafts, s.rng)
    emitted, accepted = ref.emit(s, drafts, j, token)
    s.logprobs += [math.log(row(i)[t]) if row(i)[t] > 0 else -math.inf for i, t in enumerate(emitted)]
    s.output += emitted
    s.seen = len(s.output)
    s.drafted += n
    s.accepted += accepted
    ref.advance(s, emitted, drafts, token)


def coin_queue(waiting: list[int], rng) -> list[int]:
    """The queue in request order or reversed, by one draw of ``rng.integers(2)`` (the enumerator
    follows it): a scheduler's own randomness over which waiting request it admits first."""
    return waiting[::-1] if int(rng.integers(2)) else waiting


def pool_generate(target, draft, requests, k, rng, *, pool: int = ENGINE_POOL, queue=None, streams=None):
    """The reference's rounds under continuous batching: ``pool`` slots, each waiting request
    admitted into the first free slot once the one before it there has finished, in request order
    or, with more requests than slots and ``queue``, in the order ``queue(waiting, rng)`` gives;
    every round runs the slots' requests in slot order. A request draws from its own generator
    (seeded) or from ``rng``; ``streams(slot, state, rng)``, when given, replaces an unseeded
    request's generator at its admission."""
    k = check_int("k", k, 0)
    batch = list(requests)
    if not batch:
        return []
    vocab = len(np.asarray(target(batch[0].prompt)))
    check_requests(batch, vocab)
    states = [ref.State(r, g) for r, g in zip(batch, ref.make_rngs(batch, rng))]
    waiting, slots = list(range(len(states))), [None] * pool
    if queue is not None and len(states) > pool:
        waiting = queue(waiting, rng)
    while True:
        for slot in range(pool):
            while (slots[slot] is None or states[slots[slot]].done) and waiting:
                i = waiting.pop(0)
                slots[slot] = i
                if streams is not None and batch[i].params.seed is None:
                    states[i].rng = streams(slot, states[i], rng)
        running = [i for i in slots if i is not None and not states[i].done]
        if not running:
            break
        for i in running:
            run_round(states[i], target, draft, k, vocab)
    return [Output(tuple(s.output), tuple(s.logprobs), s.drafted, s.accepted) for s in states]


def scheduled_pool_loop(target, draft, requests, k, rng):
    """Continuous batching with a pool of ``ENGINE_POOL`` and its scheduler's own randomness (which
    waiting request it admits first, drawn from ``rng``: ``coin_queue``): exact, every request
    still draws fresh numbers."""
    return pool_generate(target, draft, requests, k, rng, queue=coin_queue)


def inverse_cdf(u, p) -> int:
    """The id whose cumulative mass first exceeds the uniform ``u`` (a number, or a symbolic
    uniform the enumerator follows through one comparison per id)."""
    cdf = np.cumsum(np.asarray(p, dtype=np.float64))
    cdf = cdf / cdf[-1]
    last = int(np.flatnonzero(np.asarray(p) > 0)[-1])
    if isinstance(u, float):
        return min(int(cdf.searchsorted(u, side="right")), last)
    for i in range(last):
        if u < cdf[i]:
            return i
    return last


class SlotStream:
    """A slot's random stream of uniforms: the first occupant's draw from ``rng`` and are kept;
    an occupant admitted later starts the stream again from its beginning (an offset reset to 0),
    replaying them, and draws fresh past their end. Tokens come from uniforms (``inverse_cdf``)."""

    def __init__(self, rng):
        self.rng, self.drawn, self.at = rng, [], 0

    def restart(self) -> SlotStream:
        self.at = 0
        return self

    def random(self):
        if self.at == len(self.drawn):
            self.drawn.append(self.rng.random())
        self.at += 1
        return self.drawn[self.at - 1]

    def choice(self, a, p=None):
        return inverse_cdf(self.random(), p)


def slot_stream_loop(target, draft, requests, k, rng):
    """Continuous batching where each slot owns a random stream and a request admitted into a
    freed slot starts that stream from its beginning: it replays its predecessor's draws."""
    slot_streams: dict[int, SlotStream] = {}

    def streams(slot, state, rng):
        return slot_streams.setdefault(slot, SlotStream(rng)).restart()

    return pool_generate(target, draft, requests, k, rng, streams=streams)


# -- a greedy request's sentinel temperature in a mixed batch --------------------------------------

SENTINEL_TEMPERATURE = 1e-5
"""The temperature a greedy row is given so that one batched softmax serves every row."""

DEFAULT_TEMPERATURE = Request((0,)).params.temperature
"""An unset temperature (``SamplingParams``' default)."""


def sentinel_temperature_loop(target, draft, requests, k, rng):
    """In a batch with a greedy request, every request whose temperature is unset (the default)
    is given the greedy sentinel on the speculative path (target and draft rows)."""
    batch = list(requests)
    if not any(r.params.greedy for r in batch):
        return ref.generate(target, draft, batch, k, rng)

    def temperature(s) -> dict:
        return {"temperature": SENTINEL_TEMPERATURE} if s.params.temperature == DEFAULT_TEMPERATURE else {}

    def trow(s, logits, drafts, i, n):
        return ref.processed_row(s, logits, drafts, i, **temperature(s))

    def qrow(s, logits, drafts, i, vocab):
        z = ref.fit_width(logits, vocab)
        return (
            ref.processed_row(s, z, drafts, i, **temperature(s)) if np.isfinite(z.max()) else np.full(vocab, 1 / vocab)
        )

    return ref.loop_with(
        target, draft, batch, k, rng, trow=trow, drafter=lambda s, d, n, v: ref.draft_tokens(s, d, n, v, row=qrow)
    )


# -- consecutive calls -------------------------------------------------------------------------------

FIRST_STATES: dict[int, tuple] = {}
"""id(generator) -> (the generator, a copy of its state at the first call that used it)."""


def call_replaying_loop(target, draft, requests, k, rng):
    """An engine that wraps the caller's generator once and restores that wrapper's first state
    at every call: unseeded requests of each later call replay the first call's draws."""
    if not isinstance(rng, np.random.Generator):
        return ref.generate(target, draft, requests, k, rng)
    first = FIRST_STATES.setdefault(id(rng), (rng, copy.deepcopy(rng)))[1]
    return ref.generate(target, draft, requests, k, copy.deepcopy(first))


# -- zero-draft rounds and a seeded counter-based stream ------------------------------------------

ROUND_WINDOW = 64
"""Draws a round of a seeded request owns in ``CounterStream`` (2k + 1 at most: k <= 31)."""


class CounterStream:
    """A seeded request's counter-based stream (a Philox seed and offset, as engines keep them):
    draw ``at`` of a round starting at ``base`` is ``default_rng([seed, base + at]).random()``.
    Each round owns ``ROUND_WINDOW`` offsets; ``advance_zero`` False leaves the base where it was
    after a round that drafted nothing, so the next round replays its draw."""

    def __init__(self, seed: int, advance_zero: bool):
        self.seed, self.base, self.at, self.step, self.advance_zero = int(seed), 0, 0, 0, advance_zero

    def start_round(self, n: int) -> None:
        self.base += self.step
        self.at = 0
        self.step = ROUND_WINDOW if (n > 0 or self.advance_zero) else 0

    def random(self) -> float:
        u = float(np.random.default_rng([self.seed, self.base + self.at]).random())
        self.at += 1
        return u

    def choice(self, a, p=None):
        return inverse_cdf(self.random(), p)


def counter_stream_loop(advance_zero: bool):
    def rngs(requests, rng):
        return [rng if r.params.seed is None else CounterStream(r.params.seed, advance_zero) for r in requests]

    def drafter(s, draft, n, vocab):
        if isinstance(s.rng, CounterStream):
            s.rng.start_round(n)
        return ref.draft_tokens(s, draft, n, vocab)

    def generate(target, draft, requests, k, rng):
        return ref.loop_with(target, draft, requests, k, rng, rngs=rngs, drafter=drafter)

    return generate


# -- per-row state when a batch is condensed -------------------------------------------------------


def condensed_rows_loop(target, draft, requests, k, rng):
    """Per-row penalty state: when finished requests leave the batch, the rows below move up but
    their penalty histories stay at the old row indices (each reads what its new row held)."""

    def offsets(active, counts):
        ref.set_offsets(active, counts)
        still = [s for s in active if not s.done]
        if len(still) < len(active):
            stored = [list(s.penalty_tokens) for s in active]
            for row, s in enumerate(still):
                s.penalty_tokens = stored[row]

    return ref.loop_with(target, draft, requests, k, rng, offsets=offsets)


# -- a penalty over the prompt's first N tokens ---------------------------------------------------


def _penalty_prompt_prefix(s, logits, drafts, i, n):
    hist = tuple(s.penalty_tokens) + tuple(drafts[:i])
    grammar = tuple(s.grammar_tokens) + tuple(drafts[:i])
    return ref.cached_step(logits, s.params, s.request.prompt[:FIRST_PENALTY_TOKENS], hist, grammar)


def penalty_prompt_prefix_loop(target, draft, requests, k, rng):
    """The target rows' repetition penalty counts only the prompt's first ``FIRST_PENALTY_TOKENS``
    tokens (a fixed-size prompt-token buffer)."""
    return ref.loop_with(target, draft, requests, k, rng, trow=_penalty_prompt_prefix)


_R, _S = "real-world", "specverify"


def _m(id, description, effect, fn, reference, source=_R):
    return Mutant(id, description, effect, fn, reference, source, interface="loop")


LOOP_MECHANISM_MUTANTS: tuple[Mutant, ...] = (
    _m("loop-pool/slot-stream-reused", "continuous batching: a request admitted into a freed slot "
       "starts the slot's random stream from its beginning, replaying its predecessor's draws",
       "biased", slot_stream_loop, "NVIDIA/TensorRT-LLM#19487"),
    _m("loop-batch/sentinel-temperature", "in a batch with a greedy request, an unset temperature "
       "becomes the greedy sentinel 1e-5 on the speculative path", "biased",
       sentinel_temperature_loop, "NVIDIA/TensorRT-LLM#19390"),
    _m("loop-calls/replayed-across-calls", "the engine restores its generator's first state at "
       "every call: unseeded requests of a later call replay the first call's draws", "biased",
       call_replaying_loop, "NVIDIA/TensorRT-LLM#19487; ml-explore/mlx-lm#1620", _S),
    _m("loop-seed/zero-draft-round-offset", "a seeded request's counter-based stream is not "
       "advanced by a round that drafted nothing: the next round replays its draw (k = 0 rounds)",
       "biased", counter_stream_loop(advance_zero=False), "vllm-project/vllm-ascend#13608; "
       "NVIDIA/TensorRT-LLM#17599"),
    _m("loop-batch/rows-condensed-state-left", "when finished requests leave the batch, the rows "
       "below move up without their penalty state", "biased", condensed_rows_loop,
       "vllm-project/vllm#40269; vllm-project/vllm#51890"),
    _m("loop-penalty/first-100-prompt-tokens", "the repetition penalty counts only the prompt's "
       f"first {FIRST_PENALTY_TOKENS} tokens", "biased", penalty_prompt_prefix_loop,
       "a fixed-size prompt-token buffer (no public thread found)", _S),
)  # fmt: skip

LOOP_MECHANISM_CONTROLS: tuple[Mutant, ...] = (
    _m("loop-control/scheduled-pool", f"continuous batching over a pool of {ENGINE_POOL} with the "
       "scheduler's own randomness (which waiting request it admits first, drawn from rng)", "exact", scheduled_pool_loop,
       None, _S),
    _m("loop-control/counter-stream-seeds", "seeded requests on counter-based streams, every round "
       "(zero-draft ones too) owning its window of offsets", "exact",
       counter_stream_loop(advance_zero=True), "NVIDIA/TensorRT-LLM#17599", _S),
)  # fmt: skip

__all__ = [
    "CounterStream",
    "LOOP_MECHANISM_CONTROLS",
    "LOOP_MECHANISM_MUTANTS",
    "SlotStream",
    "call_replaying_loop",
    "condensed_rows_loop",
    "coin_queue",
    "counter_stream_loop",
    "inverse_cdf",
    "penalty_prompt_prefix_loop",
    "pool_generate",
    "run_round",
    "scheduled_pool_loop",
    "sentinel_temperature_loop",
    "slot_stream_loop",
]
