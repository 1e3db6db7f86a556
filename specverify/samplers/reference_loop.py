"""The reference speculative generation loop (the loop interface of ``specverify.laws.requests``), exact.

``generate(target, draft, requests, k, rng)`` runs every request round by round, batched: each
round visits the unfinished requests in order. For one request a round is

1. ``n = min(k, max_tokens - len(output) - 1)`` drafts, so that the bonus token never overruns
   ``max_tokens``; draft i from q_i, the draft's logits fitted to the target's width (padding rows
   past the vocabulary dropped, ids the draft lacks at -inf) and processed with the request's params
   given output + drafts[:i];
2. the target rows p_i, processed alike (penalties over the accepted output plus drafts[:i], the
   grammar advanced by the same tokens), read lazily by ``chain.verify`` (the one rule);
3. the emitted block drafts[:j] + [token] cut after its first stop token; the accepted count is
   the number of drafts emitted (a stop inside the accepted block counted once);
4. penalties and grammar advanced by the emitted tokens only.

A seeded request draws from ``np.random.default_rng(seed)`` and no other request touches it. Each
step is a parameter of ``loop_with`` (defaults: the reference), so that every loop mutant in
``specverify.mutants.loop_mutants`` differs from this loop in one piece. ``target_only`` decodes with the
target alone under the same params; ``sequence_law`` (specverify.laws.requests) is its exact law.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..common.validation import check_int
from ..laws.arrays import Vector
from ..laws.requests import (
    LogitFn,
    Output,
    Request,
    SamplingParams,
    Tokens,
    check_requests,
    finished,
    step_distribution,
)
from .chain import LazyRows, Rng, Rows, sample, verify


@dataclass
class State:
    """One request in flight."""

    request: Request
    rng: Rng
    output: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    penalty_tokens: list[int] = field(default_factory=list)  # what the penalties count
    grammar_tokens: list[int] = field(default_factory=list)  # what the grammar has consumed
    seen: int = 0  # how much of the output the models are shown (a ragged batch's offset)
    drafted: int = 0
    accepted: int = 0

    @property
    def params(self) -> SamplingParams:
        return self.request.params

    @property
    def done(self) -> bool:
        return finished(tuple(self.output), self.params)

    def context(self) -> Tokens:
        return self.request.prompt + tuple(self.output[: self.seen])


def fit_width(logits: ArrayLike, vocab: int) -> Vector:
    """The draft's logits on the target's vocabulary: padding rows past it dropped, missing ids at
    -inf (the draft cannot propose them)."""
    z = np.asarray(logits, dtype=np.float64)[:vocab]
    return z if z.size == vocab else np.concatenate([z, np.full(vocab - z.size, -np.inf)])


ROW_CACHE_BYTES = 64 * 2**20
"""The most bytes of logits and rows ``cached_step`` keeps (past them it starts afresh)."""

_ROWS: dict[tuple[Any, ...], tuple[SamplingParams, Vector]] = {}
_ROW_BYTES = [0]


def reads_no_tokens(params: SamplingParams) -> bool:
    """Whether the processing of a row ignores the prompt and output: no grammar, and every
    penalty at its no-op value (``processing`` returns the logits unchanged there)."""
    return (
        params.allowed_tokens is None
        and params.repetition_penalty == 1.0
        and params.frequency_penalty == 0.0
        and params.presence_penalty == 0.0
    )


def cached_step(
    logits: ArrayLike, params: SamplingParams, prompt: Tokens, output: Tokens, grammar_output: Tokens
) -> Vector:
    """``step_distribution(logits, params, prompt, output, grammar_output)``, memoized in this
    process: a battery re-runs the loop along every enumerated path and for every sampled run,
    over the same few contexts, and the processing (penalties, sorts for top-k / top-p) is most of
    a loop call. Keyed on the params object (kept alive by the entry, so its id is not reused),
    the logits' bytes and, unless the params read no tokens (``reads_no_tokens``), the token
    tuples: ``allowed_tokens(output)`` is a function of the output (``SamplingParams``). A fresh
    copy each time: a caller may write into it."""
    z = np.asarray(logits)
    key = (id(params), z.dtype.str, z.shape, z.tobytes()) + (
        () if reads_no_tokens(params) else (prompt, output, grammar_output)
    )
    hit = _ROWS.get(key)
    if hit is None:
        row = step_distribution(z, params, prompt, output, grammar_output)
        if _ROW_BYTES[0] > ROW_CACHE_BYTES:
            _ROWS.clear()
            _ROW_BYTES[0] = 0
        hit = _ROWS[key] = (params, row)
        _ROW_BYTES[0] += z.nbytes + row.nbytes
    return hit[1].copy()


def processed_row(
    state: State,
    logits: ArrayLike,
    drafts: Sequence[int],
    i: int,
    *,
    penalties: bool = True,
    grammar: bool = True,
    **change: Any,
) -> Vector:
    """The request's step distribution after output + drafts[:i] (``change``: params replaced)."""
    params = state.params
    if penalties and grammar and not change:
        hist = tuple(state.penalty_tokens) + tuple(drafts[:i])
        return cached_step(logits, params, state.request.prompt, hist, tuple(state.grammar_tokens) + tuple(drafts[:i]))
    if change or not penalties:
        from dataclasses import replace

        off: dict[str, Any] = (
            {} if penalties else {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
        )
        params = replace(params, **off, **change)
    if not grammar:
        from dataclasses import replace

        params = replace(params, allowed_tokens=None)
    hist = tuple(state.penalty_tokens) + tuple(drafts[:i])
    return step_distribution(
        logits, params, state.request.prompt, hist, tuple(state.grammar_tokens) + tuple(drafts[:i])
    )


# ---------------------------------------------------------------------------- the steps (hooks)


def make_rngs(requests: Sequence[Request], rng: Rng) -> list[Rng]:
    return [rng if r.params.seed is None else np.random.default_rng(r.params.seed) for r in requests]


def n_drafts(state: State, k: int) -> int:
    return max(0, min(k, state.params.max_tokens - len(state.output) - 1))


def target_row(state: State, logits: ArrayLike, drafts: Sequence[int], i: int, n: int) -> Vector:
    return processed_row(state, logits, drafts, i)


def draft_row(state: State, logits: ArrayLike, drafts: Sequence[int], i: int, vocab: int) -> Vector:
    z = fit_width(logits, vocab)
    if not np.isfinite(z.max()):
        return np.full(vocab, 1.0 / vocab)  # the draft has no row here: any q keeps the rule exact
    try:
        return processed_row(state, z, drafts, i)
    except ValueError:  # e.g. the grammar allows only ids the draft lacks
        return np.full(vocab, 1.0 / vocab)


def draft_tokens(
    state: State,
    draft: LogitFn,
    n: int,
    vocab: int,
    row: Callable[[State, ArrayLike, list[int], int, int], Vector] = draft_row,
) -> tuple[list[int], list[Vector]]:
    drafts: list[int] = []
    qs: list[Vector] = []
    for i in range(n):
        q = row(state, draft(state.context() + tuple(drafts)), drafts, i, vocab)
        drafts.append(sample(q, state.rng))  # the numbers of state.rng.choice(vocab, p=q)
        qs.append(q)
    return drafts, qs


def run_verify(state: State, ps: Rows, qs: Sequence[Vector], drafts: list[int], draft: LogitFn) -> tuple[int, int]:
    return verify(ps, qs, drafts, state.rng)


def emit(state: State, drafts: Sequence[int], j: int, token: int) -> tuple[list[int], int]:
    """(the emitted block cut after its first stop token, the accepted drafts in it)."""
    block = list(drafts[:j]) + [int(token)]
    stops = state.params.stop_token_ids
    for i, t in enumerate(block):
        if t in stops:
            return block[: i + 1], min(j, i + 1)
    return block, j


def logprob_row(i: int, j: int) -> int:
    return i


def advance(state: State, emitted: list[int], drafts: Sequence[int], token: int) -> None:
    state.penalty_tokens += emitted
    state.grammar_tokens += emitted


def set_offsets(states: Iterable[State], emitted_counts: Sequence[int]) -> None:
    for s in states:
        s.seen = len(s.output)


def loop_with(
    target: LogitFn,
    draft: LogitFn,
    requests: Iterable[Request],
    k: int,
    rng: Rng,
    *,
    rngs: Callable[[list[Request], Rng], list[Rng]] = make_rngs,
    drafts_for: Callable[[State, int], int] = n_drafts,
    trow: Callable[[State, ArrayLike, list[int], int, int], Vector] = target_row,
    drafter: Callable[[State, LogitFn, int, int], tuple[list[int], list[Vector]]] = draft_tokens,
    verifier: Callable[[State, Rows, list[Vector], list[int], LogitFn], tuple[int, int]] = run_verify,
    cut: Callable[[State, list[int], int, int], tuple[list[int], int]] = emit,
    lp_row: Callable[[int, int], int] = logprob_row,
    update: Callable[[State, list[int], list[int], int], None] = advance,
    offsets: Callable[[list[State], list[int]], None] = set_offsets,
) -> list[Output]:
    """The reference loop with its steps as parameters (defaults: exactly the reference). k = 0 is
    target-only rounds inside the loop (no drafts; each round one token from the target row)."""
    k = check_int("k", k, 0)
    batch = list(requests)
    if not batch:
        return []
    vocab = len(np.asarray(target(batch[0].prompt)))
    check_requests(batch, vocab)
    states = [State(r, g) for r, g in zip(batch, rngs(batch, rng))]
    for s in states:
        s.seen = 0
    while True:
        active = [s for s in states if not s.done]
        if not active:
            break
        counts: list[int] = []
        for s in active:
            n = drafts_for(s, k)
            drafts, qs = drafter(s, draft, n, vocab)
            cache: dict[int, Vector] = {}

            def row(
                i: int, s: State = s, drafts: list[int] = drafts, n: int = n, cache: dict[int, Vector] = cache
            ) -> Vector:
                if i not in cache:
                    cache[i] = trow(s, target(s.context() + tuple(drafts[:i])), drafts, i, n)
                return cache[i]

            ps = LazyRows(row)
            j, token = verifier(s, ps, qs, drafts, draft)
            emitted, accepted = cut(s, drafts, j, token)
            s.logprobs += [
                math.log(ps[lp_row(i, j)][t]) if ps[lp_row(i, j)][t] > 0 else -math.inf for i, t in enumerate(emitted)
            ]
            s.output += emitted
            s.drafted += n
            s.accepted += accepted
            update(s, emitted, drafts, token)
            counts.append(len(emitted))
        offsets(active, counts)
    return [Output(tuple(s.output), tuple(s.logprobs), s.drafted, s.accepted) for s in states]


def generate(target: LogitFn, draft: LogitFn, requests: Iterable[Request], k: int, rng: Rng) -> list[Output]:
    """The reference speculative loop: every request distributed exactly as ``target_only``."""
    return loop_with(target, draft, requests, k, rng)


def target_only(target: LogitFn, requests: Iterable[Request], rng: Rng) -> list[Output]:
    """Target-only decoding, token by token, with each request's params (no drafts)."""
    return target_only_with(step_distribution, target, requests, rng)


def target_only_with(
    step: Callable[[ArrayLike, SamplingParams, Tokens, Tokens], Vector],
    target: LogitFn,
    requests: Iterable[Request],
    rng: Rng,
) -> list[Output]:
    """Target-only decoding with each row ``step(logits, params, prompt, output)`` (``target_only``'s
    is ``step_distribution``; an engine's own order of truncations is another)."""
    batch = list(requests)
    if not batch:
        return []
    vocab = len(np.asarray(target(batch[0].prompt)))
    check_requests(batch, vocab)
    outs = []
    for r, g in zip(batch, make_rngs(batch, rng)):
        out: list[int] = []
        lps: list[float] = []
        while not finished(tuple(out), r.params):
            p = step(np.asarray(target(r.prompt + tuple(out)))[:vocab], r.params, r.prompt, tuple(out))
            t = int(g.choice(vocab, p=p))
            out.append(t)
            lps.append(math.log(p[t]))
        outs.append(Output(tuple(out), tuple(lps), 0, 0))
    return outs


__all__ = ["State", "fit_width", "generate", "loop_with", "target_only", "target_only_with"]
