"""Table-driven toy models: i.i.d., Markov chains of any order, and position-dependent chains.

A ``TableModel`` holds the target p and the draft q as tables with one row per context. The
context of a prefix is its last ``order`` tokens (left-padded with token 0) and, when
``period > 1``, the position ``len(prefix) % period``, so every position can have its own
target and draft. Tables are read-only: a sampler that writes into a row it was handed fails
loudly instead of corrupting the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..common.validation import check_k, check_prob_vector
from .arrays import Prefix, Table, Vector


@dataclass(frozen=True)
class TableModel:
    """p and q as tables (``p_table``, ``q_table``: any 2-D array-like of rows, kept as read-only
    float64 ``Table``s, each row checked and renormalized)."""

    p_table: Table
    q_table: Table
    order: int = 1
    period: int = 1
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        p = np.array(self.p_table, dtype=np.float64)
        q = np.array(self.q_table, dtype=np.float64)
        if p.ndim != 2 or p.shape != q.shape:
            raise ValueError(f"p_table and q_table must be 2-D of one shape, got {p.shape}, {q.shape}")
        if self.order < 0 or self.period < 1:
            raise ValueError(f"order must be >= 0 and period >= 1, got {self.order}, {self.period}")
        n_ctx = p.shape[1] ** self.order * self.period
        if p.shape[0] != n_ctx:
            raise ValueError(f"p_table: expected {n_ctx} rows (V^order * period), got {p.shape[0]}")
        for name, table in (("p_table", p), ("q_table", q)):
            for i, row in enumerate(table):
                table[i] = check_prob_vector(f"{name}[{i}]", row)
            table.setflags(write=False)
        object.__setattr__(self, "p_table", p)
        object.__setattr__(self, "q_table", q)

    @property
    def vocab_size(self) -> int:
        return int(self.p_table.shape[1])

    def context_index(self, prefix: Prefix) -> int:
        """The row of ``prefix``: sum over j = 1..order of (its j-th last token, 0 before its
        start) * V^(j - 1), plus (len(prefix) % period) * V^order."""
        n, order = len(prefix), self.order
        if order == 0:  # i.i.d. or position-only: the common case, on every model call
            return n % self.period
        v = int(self.p_table.shape[1])
        idx = 0
        for j in range(1, min(order, n) + 1):
            idx += int(prefix[-j]) * v ** (j - 1)
        row: int = idx + (n % self.period) * v**order  # int ** int is Any to typeshed (a negative power is a float)
        return row

    def p_fn(self, prefix: Prefix) -> Vector:
        row: Vector = self.p_table[self.context_index(prefix)]
        return row

    def q_fn(self, prefix: Prefix) -> Vector:
        row: Vector = self.q_table[self.context_index(prefix)]
        return row

    def alphas(self) -> Vector:
        """alpha = sum min(p, q) for every context."""
        alphas: Vector = np.minimum(self.p_table, self.q_table).sum(axis=1)
        return alphas


@dataclass(frozen=True)
class FirstTokenModel(TableModel):
    """A table model whose row is read from the *first* token of the prefix (0 when it is empty)
    and the position ``len(prefix) % period``: a law that depends on a token as far back as the
    context goes, so a sampler that shows the target only the last W tokens (a sliding window,
    a cache that keeps the last W positions) reads the wrong row once the context is longer
    than W. ``order`` is 1 (one token of context: the first)."""

    def context_index(self, prefix: Prefix) -> int:
        first = int(prefix[0]) if len(prefix) else 0
        return first + (len(prefix) % self.period) * int(self.p_table.shape[1])


def first_token_model(vocab_size: int, period: int, seed: int | np.random.SeedSequence = 0) -> FirstTokenModel:
    """A random ``FirstTokenModel`` (Dirichlet rows for p and q): every (first token, position
    modulo ``period``) has its own p and q."""
    rng = np.random.default_rng(seed)
    rows = vocab_size * period
    p = rng.dirichlet(np.ones(vocab_size), size=rows)
    q = rng.dirichlet(np.ones(vocab_size), size=rows)
    return FirstTokenModel(p, q, order=1, period=period, name=f"V{vocab_size}-first-token-period{period}")


def one_hot_draft_rows(
    vocab_size: int, rows: int, seed: int | np.random.SeedSequence, chance: NDArray[np.bool_] | None = None
) -> tuple[Table, Table]:
    """(p, q) tables of ``rows`` rows: q one-hot in every row, p a random Dirichlet row where the
    boolean mask ``chance`` is set (every row when None) and equal to q elsewhere."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(vocab_size), size=rows)
    q = np.eye(vocab_size)[rng.integers(0, vocab_size, rows)]
    return (p, q) if chance is None else (np.where(chance[:, None], p, q), q)


def one_hot_draft_model(
    vocab_size: int, period: int, seed: int | np.random.SeedSequence = 0, chance: tuple[int, ...] | None = None
) -> TableModel:
    """A position-dependent model (order 0, ``period`` rows) whose draft is one-hot at every
    position: the drafts are deterministic, so the law of a whole window of k + 1 tokens
    enumerates in few paths at any k, while every position's own row (the bonus's included)
    matters. The target is a random Dirichlet row at the positions in ``chance`` (every position
    when None) and equal to the draft elsewhere (an acceptance ratio of 1 there: the draft is
    accepted, no coin outcome to enumerate, whichever way a sampler draws its coins)."""
    p, q = one_hot_draft_rows(vocab_size, period, seed, None if chance is None else np.isin(np.arange(period), chance))
    where = "" if chance is None else "-chance" + ",".join(map(str, chance))
    return TableModel(p, q, order=0, period=period, name=f"V{vocab_size}-one-hot-draft-period{period}{where}")


def iid_model(p: ArrayLike, q: ArrayLike, name: str = "iid") -> TableModel:
    """p and q that ignore the prefix: acceptance is i.i.d. with alpha = sum min(p, q)."""
    return TableModel(np.atleast_2d(p), np.atleast_2d(q), order=0, name=name)


def toy_chain() -> TableModel:
    """The handout's first-order chain on 3 tokens: alpha 0.6 after token 0, 0.5 after 1 and 2."""
    p = np.array([[0.2, 0.5, 0.3], [0.5, 0.3, 0.2], [0.3, 0.3, 0.4]])
    q = np.array([[0.6, 0.2, 0.2], [0.1, 0.2, 0.7], [0.8, 0.1, 0.1]])
    return TableModel(p, q, order=1, name="toy-chain")


def handout_iid() -> TableModel:
    """The handout's i.i.d. pair: p = [0.5, 0.3, 0.2], q = [0.3, 0.3, 0.4], alpha = 0.8."""
    return iid_model([0.5, 0.3, 0.2], [0.3, 0.3, 0.4], name="handout-iid")


def random_model(
    vocab_size: int, order: int = 1, period: int = 1, seed: int | np.random.SeedSequence = 0, zeros: bool = False
) -> TableModel:
    """A random table model (Dirichlet rows) whose every context has its own p and q; with
    ``zeros`` each row of p and of q gets one zero entry (tokens one model never emits).
    ``seed``: ``numpy.random.default_rng``'s (an int or a ``SeedSequence``)."""
    rng = np.random.default_rng(seed)
    rows = vocab_size**order * period
    p = rng.dirichlet(np.ones(vocab_size), size=rows)
    q = rng.dirichlet(np.ones(vocab_size), size=rows)
    if zeros:
        p[np.arange(rows), rng.integers(0, vocab_size, rows)] = 0.0
        q[np.arange(rows), rng.integers(0, vocab_size, rows)] = 0.0
        p[p.sum(1) == 0, 0] = 1.0
        q[q.sum(1) == 0, 0] = 1.0
        p /= p.sum(1, keepdims=True)
        q /= q.sum(1, keepdims=True)
    name = f"V{vocab_size}-order{order}" + (f"-period{period}" if period > 1 else "") + ("-zeros" if zeros else "")
    return TableModel(p, q, order=order, period=period, name=name)


def sequence_distribution(p_fn: Callable[[Prefix], ArrayLike], prefix: Prefix, m: int) -> dict[tuple[int, ...], float]:
    """Exact distribution of the next m tokens when sampling from p token by token (one entry
    per reachable sequence)."""
    m = check_k(m, "m")
    prefix = tuple(prefix)
    frontier: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(m):
        extended: dict[tuple[int, ...], float] = {}
        for seq, prob in frontier.items():
            p = check_prob_vector(f"p_fn({prefix + seq})", p_fn(prefix + seq))
            for tok in np.flatnonzero(p).tolist():
                extended[seq + (tok,)] = prob * float(p[tok])
        frontier = extended
    return frontier
