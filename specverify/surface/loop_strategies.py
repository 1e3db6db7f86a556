"""Hypothesis strategies for the loop interface (``generate(target, draft, requests, k, rng)``):
logit tables, grammars, sampling parameters, requests and whole batches, re-exported by
``specverify.strategies``. Small by default (vocabularies of 2 to 3, max_tokens up to 3) so that
the exact enumeration of a whole batch stays cheap."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from ..laws.requests import LastTokenGrammar, LogitTable, Request, SamplingParams
from .strategy_arguments import IntRange, int_range, seeds

# ---------------------------------------------------------------------------- the loop interface
# Requests, params, grammars and logit tables for specverify.laws.requests's generate(target, draft,
# requests, k, rng). Small by default (vocabularies of 2 to 3, max_tokens up to 3) so that the
# exact enumeration of a whole batch stays cheap.


@st.composite
def logit_tables(draw: st.DrawFn, vocab_size: int, width: int | None = None, period: IntRange = (1, 2)) -> LogitTable:
    """A ``LogitTable`` over ``vocab_size`` contexts with ``width`` logits per row (default: the
    vocabulary); rows may hold a -inf (a token the model never gives)."""
    width = vocab_size if width is None else width
    per = draw(st.integers(*int_range(period, "period", 1, (1, 2))))
    values = draw(
        st.lists(
            st.floats(-3, 3, allow_nan=False).map(lambda x: round(x, 3)),
            min_size=per * vocab_size * width,
            max_size=per * vocab_size * width,
        )
    )
    table = np.array(values).reshape(per, vocab_size, width)
    return LogitTable(table, f"drawn {per}x{vocab_size}x{width}")


@st.composite
def grammars(draw: st.DrawFn, vocab_size: int) -> LastTokenGrammar:
    """A ``LastTokenGrammar``: a non-empty allowed set first and after each token (and, half the
    time, a different table at odd lengths)."""
    ids = st.lists(st.integers(0, vocab_size - 1), min_size=1, max_size=vocab_size, unique=True).map(
        lambda xs: tuple(sorted(xs))
    )
    table = st.tuples(*[ids] * vocab_size)
    return LastTokenGrammar(draw(ids), draw(table), draw(st.none() | table))


@st.composite
def sampling_params(
    draw: st.DrawFn, vocab_size: int, max_tokens: IntRange = (0, 3), seeded: bool = False
) -> SamplingParams:
    """``SamplingParams`` with every field drawn (greedy included); ``seeded``: a seed is drawn
    half the time."""
    token = st.integers(0, vocab_size - 1)
    return SamplingParams(
        temperature=draw(st.sampled_from([0.0, 0.7, 1.0, 1.5])),
        top_k=draw(st.none() | st.integers(1, vocab_size)),
        top_p=draw(st.sampled_from([1.0, 0.9, 0.6])),
        min_p=draw(st.sampled_from([0.0, 0.1, 0.3])),
        repetition_penalty=draw(st.sampled_from([1.0, 1.3, 0.8])),
        frequency_penalty=draw(st.sampled_from([0.0, 0.5, -0.3])),
        presence_penalty=draw(st.sampled_from([0.0, 0.4])),
        logit_bias=draw(st.dictionaries(token, st.sampled_from([-1.0, 0.5, 2.0]), max_size=2)),
        allowed_tokens=draw(st.none() | grammars(vocab_size)),
        stop_token_ids=draw(st.lists(token, max_size=1, unique=True).map(tuple)),
        max_tokens=draw(st.integers(*int_range(max_tokens, "max_tokens", 0, (0, 3)))),
        seed=draw(st.none() | seeds()) if seeded else None,
    )


@st.composite
def requests(draw: st.DrawFn, vocab_size: int, max_tokens: IntRange = (0, 3), seeded: bool = False) -> Request:
    """A ``Request``: a prompt of 1 to 2 tokens and drawn params."""
    prompt = draw(st.lists(st.integers(0, vocab_size - 1), min_size=1, max_size=2).map(tuple))
    return Request(prompt, draw(sampling_params(vocab_size, max_tokens, seeded)))


class LoopSetup(NamedTuple):
    target: object
    draft: object
    requests: list[Request]
    k: int


@st.composite
def loop_setups(
    draw: st.DrawFn,
    vocab_size: IntRange = (2, 3),
    batch: IntRange = (1, 3),
    max_tokens: IntRange = (0, 3),
    k: IntRange = (1, 2),
    seeded: bool = False,
) -> LoopSetup:
    """(target, draft, requests, k): logit tables whose draft is as wide as the target, narrower
    or wider (padding rows), and a ragged batch of requests with their own params and lengths."""
    v = draw(st.integers(*int_range(vocab_size, "vocab_size", 2, (2, 3))))
    width = draw(st.sampled_from([v, v + 1, max(v - 1, 1)]))
    n = draw(st.integers(*int_range(batch, "batch", 1, (1, 3))))
    reqs = draw(st.lists(requests(v, max_tokens, seeded), min_size=n, max_size=n))
    return LoopSetup(
        draw(logit_tables(v)), draw(logit_tables(v, width)), reqs, draw(st.integers(*int_range(k, "k", 1, (1, 2))))
    )


__all__ = ["LoopSetup", "grammars", "logit_tables", "loop_setups", "requests", "sampling_params"]
