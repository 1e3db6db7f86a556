"""Vectorized simulation of many independent speculative rounds on a table-driven model.

``speculative_step`` (samplers/chain.py) runs one round with a Python loop; checking a sampler
statistically needs 10^4 to 10^6 rounds, so this module runs N independent rounds at once with
NumPy on a ``TableModel`` (specverify.laws.chains), where every next-token distribution is a row of
``p_table`` / ``q_table`` picked by a context index (last ``order`` tokens, position modulo
``period``).

The rule is exactly the one of ``speculative_step`` (Leviathan, Kalman, Matias 2023,
arXiv 2211.17192, Algorithm 1; Chen et al. 2023, arXiv 2302.01318): k drafts from q; draft i
is accepted when a uniform is below min(1, p(x_i) / q(x_i)), with p conditioned on the drafts
before i; the first rejection emits one token from norm(max(0, p - q)) (the helper
``chain.residual``, applied once per context) and ends the round; if all k are accepted a bonus
token is drawn from p. The simulator therefore agrees *in distribution* with
``speculative_step``: the emitted sequences have the same law, but the random numbers are drawn
in a different order, so a seed does not reproduce ``speculative_step``'s tokens one for one.
Batched GPU engines do the same (vLLM's rejection sampler, vllm-project/vllm PR #2336, draws all
uniforms of a batch at once).

Categorical draws use the inverse CDF with one uniform per row: the token is the number of CDF
entries <= u. Tokens of probability 0 are never drawn, and a row whose CDF rounds to just under
1 is clipped to its last token of positive probability.

This is a simulator with its own signature, not a sampler of the handout's interface, so it is
not registered in ``SAMPLERS``.
"""

from __future__ import annotations

import json
import numbers
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..common.validation import check_k
from ..laws.arrays import Table, Vector
from ..laws.chains import TableModel, toy_chain
from .chain import Rng, acceptance, residual, speculative_step

IntArray = NDArray[np.int64]

PAD = -1  # marks the slots of a round's (k + 1)-wide row after the round ended
CHUNK_ROWS = 1 << 15  # rows simulated together; see _row_chunks
_COLUMNWISE_MAX_VOCAB = 32  # above this, _sample_rows binary-searches instead


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------


def _check_model(model: object) -> TableModel:
    if not isinstance(model, TableModel):
        raise ValueError(f"model: expected a specverify.laws.chains.TableModel, got {type(model).__name__}")
    return model


def _check_prefix(prefix: Iterable[int], vocab_size: int) -> tuple[int, ...]:
    try:
        tokens = tuple(prefix)
    except TypeError:
        raise ValueError(f"prefix: expected a sequence of token ids, got {prefix!r}") from None
    for i, tok in enumerate(tokens):
        if isinstance(tok, bool) or not isinstance(tok, numbers.Integral):
            raise ValueError(f"prefix: token {i} is {tok!r}, not an integer token id")
        if not 0 <= int(tok) < vocab_size:
            raise ValueError(f"prefix: token {i} is {tok}, outside the vocabulary [0, {vocab_size})")
    return tuple(int(t) for t in tokens)


def _check_rng(rng: Rng) -> Rng:
    if not callable(getattr(rng, "random", None)):
        raise ValueError(f"rng: expected a numpy.random.Generator, got {type(rng).__name__}")
    return rng


# ---------------------------------------------------------------------------------------------
# vectorized building blocks
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tables:
    """What a round needs from a TableModel, precomputed once per call.

    The rule's pieces come from ``samplers.chain``, entry by entry, not rewritten: ``accept`` is
    ``chain.acceptance`` = min(1, p / q) per (context, token), flattened (0 where q = 0: such a
    token is never drafted). ``final_cdf`` stacks the CDFs of ``chain.residual`` norm(max(0,
    p - q)) (rows 0 .. C-1) and of p, the bonus row (rows C .. 2C-1), so the token that ends a
    round is one draw from row ``ctx + C * all_accepted``. Only the sampling is vectorized;
    ``tests/test_rule_once.py`` replays a round's uniforms through ``chain.speculative_step``
    and gets the same tokens.
    """

    vocab: int
    order: int
    period: int
    n_ctx: int
    q_cdf: Table
    q_last: IntArray
    accept: Vector
    final_cdf: Table
    final_last: IntArray

    @classmethod
    def of(cls, model: TableModel) -> _Tables:
        p, q = model.p_table, model.q_table
        res = np.array([residual(p_row, q_row) for p_row, q_row in zip(p, q)])
        accept = np.zeros(q.shape)
        for c, x in zip(*np.nonzero(q > 0)):
            accept[c, x] = acceptance(p[c], q[c], x)
        q_cdf = np.cumsum(q, axis=1)
        final_cdf = np.cumsum(np.concatenate([res, p]), axis=1)
        return cls(
            model.vocab_size,
            model.order,
            model.period,
            p.shape[0],
            q_cdf,
            _last_positive(q),
            accept.ravel(),
            final_cdf,
            _last_positive(np.concatenate([res, p])),
        )


def _last_positive(table: Table) -> IntArray:
    """Per row, the last index whose probability is > 0."""
    last: IntArray = table.shape[1] - 1 - np.argmax(table[:, ::-1] > 0, axis=1)
    return last


def _sample_rows(cdf_table: Table, last_pos: IntArray, ctx: IntArray, u: Vector) -> IntArray:
    """Inverse-CDF draw from row ``ctx[r]`` of a CDF table with the uniform ``u[r]``.

    The token is the number of CDF entries <= u (a token of probability 0 adds no step to the
    CDF, so it is never drawn), clipped to the row's last token of positive probability, since
    the CDF can round to just under 1. Small vocabularies compare one column at a time (O(nV)
    vectorized work, O(n) memory); larger ones group the rows by context and binary-search
    each group's CDF row (O(n log V)).
    """
    v = cdf_table.shape[1]
    if v <= _COLUMNWISE_MAX_VOCAB:
        flat = cdf_table.ravel()
        base = ctx * v
        tok = np.zeros(ctx.shape[0], dtype=np.int64)
        for j in range(v - 1):
            tok += flat[base + j] <= u
    else:
        tok = np.empty(ctx.shape[0], dtype=np.int64)
        order = np.argsort(ctx, kind="stable")
        contexts, starts = np.unique(ctx[order], return_index=True)
        for c, rows in zip(contexts, np.split(order, starts[1:])):
            tok[rows] = np.searchsorted(cdf_table[c], u[rows], side="right")
    return np.minimum(tok, last_pos[ctx])


def _initial_state(model: TableModel, prefix: tuple[int, ...], n: int) -> tuple[IntArray, IntArray]:
    """Per row: ``hist`` (order, n), the last ``order`` tokens, most recent first (0 where the
    prefix is shorter, as in ``TableModel.context_index``), and ``pos`` (n,), the length."""
    hist = np.zeros((model.order, n), dtype=np.int64)
    for j in range(1, min(model.order, len(prefix)) + 1):
        hist[j - 1] = prefix[-j]
    return hist, np.full(n, len(prefix), dtype=np.int64)


def _context_indices(tables: _Tables, hist: IntArray, pos: IntArray) -> IntArray:
    """Vectorized ``TableModel.context_index`` for every row's (history, length) state."""
    idx: IntArray = (pos % tables.period) * tables.vocab**tables.order
    for j in range(tables.order):
        idx += hist[j] * tables.vocab**j
    return idx


def _advance(hist: IntArray, pos: IntArray, tokens: IntArray, mask: NDArray[np.bool_] | None = None) -> None:
    """Append ``tokens`` to the rows selected by ``mask`` (all rows when None), in place."""
    if mask is None:
        hist[1:] = hist[:-1].copy()
        if hist.shape[0]:
            hist[0] = tokens
        pos += 1
        return
    for j in range(hist.shape[0] - 1, 0, -1):
        hist[j] = np.where(mask, hist[j - 1], hist[j])
    if hist.shape[0]:
        hist[0] = np.where(mask, tokens, hist[0])
    pos += mask


def _rounds(tables: _Tables, hist: IntArray, pos: IntArray, k: int, rng: Rng) -> tuple[IntArray, IntArray]:
    """One round for every row of the state (hist, pos), which is not modified.

    Returns tokens of shape (k + 1, n), one column per row (rows as columns keep every per-step
    operation on contiguous memory), and the round lengths.
    """
    n = len(pos)
    h, ps = hist.copy(), pos.copy()
    ctx = np.empty((k + 1, n), dtype=np.int64)
    drafts = np.empty((k, n), dtype=np.int64)
    for i in range(k):
        ctx[i] = _context_indices(tables, h, ps)
        drafts[i] = _sample_rows(tables.q_cdf, tables.q_last, ctx[i], rng.random(n))
        _advance(h, ps, drafts[i])
    ctx[k] = _context_indices(tables, h, ps)

    accept_prob = tables.accept[ctx[:k] * tables.vocab + drafts]
    accepted = rng.random((k, n)) < accept_prob
    all_ok = accepted.all(axis=0)
    n_acc = np.where(all_ok, k, np.argmin(accepted, axis=0))

    rows = np.arange(n)
    final_row = ctx[n_acc, rows] + tables.n_ctx * all_ok
    final = _sample_rows(tables.final_cdf, tables.final_last, final_row, rng.random(n))
    tokens = np.full((k + 1, n), PAD, dtype=np.int64)
    tokens[:k] = np.where(np.arange(k)[:, None] < n_acc, drafts, PAD)
    tokens[n_acc, rows] = final
    return tokens, n_acc + 1


def _prepare(
    model: TableModel, prefix: Sequence[int], k: int, n: int, rng: Rng
) -> tuple[TableModel, tuple[int, ...], int, int, _Tables]:
    checked = _check_model(model)
    k = check_k(k)
    n = check_k(n, "n")
    tokens = _check_prefix(prefix, checked.vocab_size)
    _check_rng(rng)
    return checked, tokens, k, n, _Tables.of(checked)


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------


def _row_chunks(n: int) -> Iterator[slice]:
    """Slices of at most ``CHUNK_ROWS`` rows: rows are independent, and chunks that fit in the
    CPU caches run several times faster than one pass over millions of rows."""
    for start in range(0, n, CHUNK_ROWS):
        yield slice(start, min(start + CHUNK_ROWS, n))


def simulate_rounds(model: TableModel, prefix: Sequence[int], k: int, n: int, rng: Rng) -> tuple[IntArray, IntArray]:
    """Run ``n`` independent speculative rounds from ``prefix``.

    Returns ``tokens``, an int array of shape (n, k + 1) holding each round's 1 to k + 1 tokens
    followed by -1 padding, and ``lengths``, an int array of shape (n,). Each row is distributed
    as one call of ``speculative_step(model.p_fn, model.q_fn, prefix, k, rng)``.
    """
    model, start, k, n, tables = _prepare(model, prefix, k, n, rng)
    tokens = np.empty((n, k + 1), dtype=np.int64)
    lengths = np.empty(n, dtype=np.int64)
    for rows in _row_chunks(n):
        hist, pos = _initial_state(model, start, rows.stop - rows.start)
        chunk_tokens, lengths[rows] = _rounds(tables, hist, pos, k, rng)
        tokens[rows] = chunk_tokens.T
    return tokens, lengths


def simulate_round_lengths(model: TableModel, prefix: Sequence[int], k: int, n: int, rng: Rng) -> IntArray:
    """Tokens emitted per round (1 to k + 1) for ``n`` independent rounds from ``prefix``."""
    return simulate_rounds(model, prefix, k, n, rng)[1]


def _first_tokens(tables: _Tables, hist: IntArray, pos: IntArray, k: int, m: int, rng: Rng) -> IntArray:
    """(m, n): the first m tokens of every row, running rounds until each has m tokens out."""
    n = len(pos)
    out = np.full((m, n), PAD, dtype=np.int64)
    done = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        sub_hist, sub_pos = hist[:, active], pos[active]
        tokens, lengths = _rounds(tables, sub_hist, sub_pos, k, rng)
        for t in range(k + 1):
            emitted = t < lengths
            slot = done[active] + t
            write = emitted & (slot < m)
            out[slot[write], active[write]] = tokens[t, write]
            _advance(sub_hist, sub_pos, tokens[t], emitted)
        hist[:, active], pos[active] = sub_hist, sub_pos
        done[active] += lengths
        active = active[done[active] < m]
    return out


def simulate_tokens(model: TableModel, prefix: Sequence[int], k: int, m: int, n: int, rng: Rng) -> IntArray:
    """The first ``m`` tokens of ``n`` independent speculative decodings from ``prefix``.

    Each row runs rounds, every round continuing from the tokens that row has emitted so far,
    until at least ``m`` tokens are out; the surplus of the last round is dropped. Rows reach
    different lengths and contexts, so each round computes every row's context index from its
    own last ``order`` tokens and position. Returns an int array of shape (n, m), each row
    distributed as the first m tokens of sampling from p token by token.
    """
    model, start, k, n, tables = _prepare(model, prefix, k, n, rng)
    m = check_k(m, "m")
    out = np.empty((n, m), dtype=np.int64)
    for rows in _row_chunks(n):
        hist, pos = _initial_state(model, start, rows.stop - rows.start)
        out[rows] = _first_tokens(tables, hist, pos, k, m, rng).T
    return out


# ---------------------------------------------------------------------------------------------
# benchmark
# ---------------------------------------------------------------------------------------------


def benchmark_batched_vs_loop(
    n_rounds_batched: int = 1_000_000, n_rounds_loop: int = 20_000, seed: int = 0, k: int = 4
) -> dict[str, object]:
    """Rounds per second of ``simulate_rounds`` and of a Python loop over ``speculative_step``,
    timed side by side in one run on ``toy_chain()`` from prefix (0,).

    Both are timed after a short warm-up (10,000 batched rounds and 1,000 loop rounds).
    """
    model, prefix = toy_chain(), (0,)
    rng = np.random.default_rng(seed)
    simulate_rounds(model, prefix, k, 10_000, rng)
    for _ in range(1000):
        speculative_step(model.p_fn, model.q_fn, prefix, k, rng)

    start = time.perf_counter()
    simulate_rounds(model, prefix, k, n_rounds_batched, rng)
    batched_s = time.perf_counter() - start

    start = time.perf_counter()
    for _ in range(n_rounds_loop):
        speculative_step(model.p_fn, model.q_fn, prefix, k, rng)
    loop_s = time.perf_counter() - start

    batched_rate = n_rounds_batched / batched_s
    loop_rate = n_rounds_loop / loop_s
    return {
        "model": model.name,
        "k": k,
        "n_rounds_batched": n_rounds_batched,
        "n_rounds_loop": n_rounds_loop,
        "batched_rounds_per_s": batched_rate,
        "loop_rounds_per_s": loop_rate,
        "batched_vs_loop_speedup": batched_rate / loop_rate,
    }


if __name__ == "__main__":
    print(json.dumps(benchmark_batched_vs_loop(), indent=2))
