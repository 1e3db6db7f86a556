"""The loop interface: whole requests, not rounds.

    def generate(target, draft, requests, k, rng) -> list[Output | list[int]]

- ``target(prefix)`` and ``draft(prefix)`` return RAW next-token logits (1-D) after a full token
  prefix (prompt + output so far). Their widths may differ: a draft with fewer rows (ids it can
  never propose), or with padding rows past the target's vocabulary (ids that do not exist). The
  target's width is the vocabulary.
- ``requests``: a list of ``Request(prompt, params)``; ``SamplingParams`` below.
- ``k``: drafted tokens per round; ``rng``: a ``numpy.random.Generator`` every unseeded request
  draws from. A request with ``params.seed = s`` draws only from ``np.random.default_rng(s)``, so
  its output is the same alone and in any batch.
- Returns, per request, its emitted tokens, or an ``Output`` that may also carry the processed
  target's log-probability of each emitted token and the counts of drafted / accepted tokens.

The meaning (what ``sequence_law`` computes and the loop battery checks): each request is
distributed exactly as target-only sampling, token by token, each step's distribution being the
target's logits processed with the request's params given its output so far
(``step_distribution``: penalties over accepted tokens only, the grammar advanced by accepted tokens
only), ending at the first stop token (kept) or after ``max_tokens`` tokens.

The reference implementation is ``specverify.samplers.reference_loop.generate``; the checks are
``specverify.interfaces.loop.battery.run_loop_battery``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import processing
from .arrays import Vector

Tokens = tuple[int, ...]
"""A prompt, an output, any run of token ids."""
LogitFn = Callable[[Sequence[int]], ArrayLike]
"""``target`` / ``draft``: raw next-token logits after a prefix."""
Grammar = Callable[[Tokens], Collection[int]]
"""``allowed_tokens``: the ids a grammar allows after the output so far."""


def _is_int(x: object) -> bool:
    return type(x) is int or (isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, bool))


@dataclass(frozen=True)
class SamplingParams:
    """One request's sampling parameters (vLLM / OpenAI names and semantics).

    temperature 0 is greedy; top_k None and top_p 1 and min_p 0 disable those truncations;
    repetition_penalty (> 0, 1 disables) divides positive / multiplies negative logits of every id
    in prompt and output; frequency_penalty and presence_penalty subtract count * f and [count > 0]
    * p over the output; logit_bias maps token -> additive bias; allowed_tokens(output) -> ids the
    grammar allows next (None: no grammar); stop_token_ids end the request (the stop token is
    kept); max_tokens >= 0 bounds the output; seed None draws from the loop's rng, an int from
    ``np.random.default_rng(seed)``. Every bad value is a ValueError naming the field.
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    allowed_tokens: Grammar | None = None
    stop_token_ids: Collection[int] = ()
    max_tokens: int = 16
    seed: int | None = None

    def __post_init__(self) -> None:
        processing.check_sampling(self.temperature, self.top_k, self.top_p)
        processing.check_min_p(self.min_p)
        processing.check_repetition_penalty(self.repetition_penalty)
        processing.check_additive_penalty("frequency_penalty", self.frequency_penalty)
        processing.check_additive_penalty("presence_penalty", self.presence_penalty)
        if not isinstance(self.logit_bias, dict):
            raise TypeError(f"logit_bias: must be a dict token -> bias, got {type(self.logit_bias).__name__}")
        for t, b in self.logit_bias.items():
            if not (_is_int(t) and t >= 0):
                raise ValueError(f"logit_bias: keys must be token ids >= 0, got {t!r}")
            if not (isinstance(b, numbers.Real) and not isinstance(b, bool) and math.isfinite(b)):
                raise ValueError(f"logit_bias: bias of token {t} must be a finite number, got {b!r}")
        if self.allowed_tokens is not None and not callable(self.allowed_tokens):
            raise TypeError("allowed_tokens: must be a function of the output so far, or None")
        stops = self.stop_token_ids
        if not isinstance(stops, (tuple, list, frozenset, set)) or not all(_is_int(t) and t >= 0 for t in stops):
            raise ValueError(f"stop_token_ids: must be a collection of token ids >= 0, got {stops!r}")
        object.__setattr__(self, "stop_token_ids", tuple(sorted({int(t) for t in stops})))
        if not _is_int(self.max_tokens) or self.max_tokens < 0:
            raise ValueError(f"max_tokens: must be an integer >= 0, got {self.max_tokens!r}")
        if self.seed is not None and not (_is_int(self.seed) and self.seed >= 0):
            raise ValueError(f"seed: must be None or an integer >= 0, got {self.seed!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Request:
    """A prompt (at least one token, e.g. a BOS) and its sampling parameters."""

    prompt: Tokens
    params: SamplingParams = field(default_factory=SamplingParams)

    def __post_init__(self) -> None:
        prompt = self.prompt
        if not isinstance(prompt, (tuple, list)) or not prompt or not all(_is_int(t) and t >= 0 for t in prompt):
            raise ValueError(f"prompt: must be a non-empty tuple of token ids >= 0, got {prompt!r}")
        object.__setattr__(self, "prompt", tuple(int(t) for t in prompt))
        if not isinstance(self.params, SamplingParams):
            raise TypeError(f"params: must be a SamplingParams, got {type(self.params).__name__}")


@dataclass(frozen=True)
class Output:
    """One request's result: its tokens; optionally the processed target's log-probability of each
    and the number of drafted / accepted tokens."""

    tokens: Tokens
    logprobs: tuple[float, ...] | None = None
    drafted: int | None = None
    accepted: int | None = None


def check_requests(requests: object, vocab_size: int) -> list[Request]:
    """The requests as a list; ValueError naming the field for ids outside the vocabulary."""
    if not isinstance(requests, (list, tuple)) or not all(isinstance(r, Request) for r in requests):
        raise TypeError("requests: must be a list of Request")
    for i, r in enumerate(requests):
        if max(r.prompt) >= vocab_size:
            raise ValueError(f"prompt: request {i} has token {max(r.prompt)} outside [0, {vocab_size})")
        bad = [t for t in r.params.stop_token_ids if t >= vocab_size]
        if bad:
            raise ValueError(f"stop_token_ids: request {i} has {bad} outside [0, {vocab_size})")
        bad = [t for t in r.params.logit_bias if t >= vocab_size]
        if bad:
            raise ValueError(f"logit_bias: request {i} has token {bad[0]} outside [0, {vocab_size})")
    return list(requests)


def step_distribution(
    logits: ArrayLike, params: SamplingParams, prompt: Tokens, output: Tokens, grammar_output: Tokens | None = None
) -> Vector:
    """The processed next-token distribution of a request after ``output`` (``processing``).

    ``grammar_output`` (default: ``output``) is what the grammar has consumed."""
    allowed = None
    if params.allowed_tokens is not None:
        allowed = params.allowed_tokens(tuple(output if grammar_output is None else grammar_output))
    return processing.process_step(
        logits,
        temperature=params.temperature,
        top_k=params.top_k,
        top_p=params.top_p,
        min_p=params.min_p,
        repetition_penalty=params.repetition_penalty,
        frequency_penalty=params.frequency_penalty,
        presence_penalty=params.presence_penalty,
        logit_bias=params.logit_bias,
        allowed=allowed,
        prompt=prompt,
        output=output,
    )


def finished(output: Tokens, params: SamplingParams) -> bool:
    return len(output) >= params.max_tokens or bool(output and output[-1] in params.stop_token_ids)


def sequence_law(target: LogitFn, request: Request) -> dict[Tokens, float]:
    """The exact law of the request's whole output under target-only sampling, by dynamic
    programming over the processed target (one entry per reachable output)."""
    prompt, params = request.prompt, request.params
    vocab = len(np.asarray(target(prompt)))
    check_requests([request], vocab)
    law: dict[Tokens, float] = {}
    frontier: dict[Tokens, float] = {(): 1.0}
    while frontier:
        nxt: dict[Tokens, float] = {}
        for out, w in frontier.items():
            if finished(out, params):
                law[out] = law.get(out, 0.0) + w
                continue
            p = step_distribution(np.asarray(target(prompt + out))[:vocab], params, prompt, out)
            for t in np.flatnonzero(p).tolist():
                nxt[out + (t,)] = nxt.get(out + (t,), 0.0) + w * float(p[t])
        frontier = nxt
    return law


def independence_tv(joint: Mapping[tuple[Tokens, ...], float]) -> float:
    """The TV between a batch's joint law of outputs (outcome -> probability, entry i of an
    outcome being request i's output) and the product of its requests' marginal laws: 0 exactly
    when the requests are independent, as unseeded requests of one batch must be. Computed on the
    joint law's support: (sum over it of |joint - product| + the product's mass outside it) / 2."""
    if not joint:
        return 0.0
    marginals: list[dict[Tokens, float]] = [{} for _ in next(iter(joint))]
    for outcome, w in joint.items():
        for i, out in enumerate(outcome):
            marginals[i][out] = marginals[i].get(out, 0.0) + w
    gap = inside = 0.0
    for outcome, w in joint.items():
        product = math.prod(marginals[i][out] for i, out in enumerate(outcome))
        gap, inside = gap + abs(w - product), inside + product
    return 0.5 * (gap + max(0.0, 1.0 - inside))


def lag_pairs(tokens: Sequence[int], lag: int) -> list[tuple[int, int]]:
    """The pairs (tokens[i], tokens[i + lag]) of one output with (i // lag) even: no token in two
    pairs, so that where positions are independent draws of one law (a context-free target and
    params) the pairs are independent draws of its product law (their counts multinomial)."""
    return [(tokens[i], tokens[i + lag]) for i in range(len(tokens) - lag) if (i // lag) % 2 == 0]


def as_output(result: Any) -> Output:
    """An ``Output`` from what a loop returned for one request (an Output or a list of ids)."""
    if isinstance(result, Output):
        return result
    if hasattr(result, "tolist") and not isinstance(result, (list, tuple)):
        result = result.tolist()
    return Output(tuple(result))


# ---------------------------------------------------------------------------- table models, grammars


class LogitTable:
    """A model that gives raw logits from a table: row ``table[len(prefix) % period, prefix[-1]]``
    of a (period, vocab, width) array; ``width`` may differ between a target and its draft."""

    def __init__(self, table: ArrayLike, name: str = "table") -> None:
        t = np.array(table, dtype=np.float64)
        if t.ndim == 2:
            t = t[None]
        if t.ndim != 3:
            raise ValueError(f"table: expected shape (period, vocab, width), got {t.shape}")
        t.setflags(write=False)
        self.table, self.name = t, name

    @property
    def width(self) -> int:
        return int(self.table.shape[2])

    def __call__(self, prefix: Sequence[int]) -> Vector:
        prefix = tuple(prefix)
        return self.row(len(prefix) % self.table.shape[0], prefix[-1])

    def row(self, plane: int, token: int) -> Vector:
        """A copy of ``table[plane, token]`` (a caller may write into what it is given)."""
        logits: Vector = self.table[plane, token].copy()
        return logits

    def __repr__(self) -> str:
        return f"LogitTable({self.name}, shape={self.table.shape})"


class ContextFreeLogits(LogitTable):
    """A model whose logits ignore the prefix: one row of ``width`` logits (an engine-scale
    vocabulary costs one row, not V rows). Under context-free processing (temperature, top-k,
    top-p, min-p, logit bias; no penalties, no grammar) every output position of a request then
    has the same law, the processed row, whatever came before it."""

    def __init__(self, row: ArrayLike, name: str = "context-free") -> None:
        r = np.array(row, dtype=np.float64)
        if r.ndim != 1:
            raise ValueError(f"row: expected one row of logits, got shape {r.shape}")
        super().__init__(r[None, None, :], name)

    def __call__(self, prefix: Sequence[int]) -> Vector:
        return self.row(0, 0)


class FirstTokenLogits(LogitTable):
    """A model whose logits depend on a token far back: row ``table[prefix[0] % F, prefix[-1]]``
    of an (F, vocab, width) array, the first token of the prefix (a BOS, a system prompt's
    first id) choosing the table. A loop that shows the target only the last w tokens of a
    longer context (a sliding window, a truncated KV cache) reads another first token there
    and so another row: the loop battery's context sweep (``interfaces.loop.sweeps.sweep_loop_cases``)."""

    def __call__(self, prefix: Sequence[int]) -> Vector:
        prefix = tuple(prefix)
        return self.row(prefix[0] % self.table.shape[0], prefix[-1])


@dataclass(frozen=True)
class LastTokenGrammar:
    """A grammar as a table: ``start`` is allowed first, then ``after[t]`` after token t (or
    ``after_odd[t]`` when the output so far has odd length, if given: a state beyond the last token)."""

    start: Tokens
    after: tuple[Tokens, ...]
    after_odd: tuple[Tokens, ...] | None = None

    def __post_init__(self) -> None:
        for ids in (self.start, *self.after, *(self.after_odd or ())):
            if not ids:
                raise ValueError("allowed_tokens: the grammar allows no token at some state")

    def __call__(self, output: Tokens) -> Tokens:
        if not output:
            return self.start
        table = self.after_odd if self.after_odd is not None and len(output) % 2 else self.after
        return table[output[-1]]


__all__ = [
    "ContextFreeLogits",
    "FirstTokenLogits",
    "Grammar",
    "LastTokenGrammar",
    "LogitFn",
    "LogitTable",
    "Output",
    "Request",
    "SamplingParams",
    "Tokens",
    "as_output",
    "check_requests",
    "finished",
    "independence_tv",
    "lag_pairs",
    "sequence_law",
    "step_distribution",
]
