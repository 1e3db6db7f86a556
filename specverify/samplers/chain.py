"""The single-chain speculative step with exact rejection sampling.

Leviathan, Kalman, Matias 2023 (arXiv 2211.17192), Algorithm 1; Chen et al. 2023
(arXiv 2302.01318). For a drafted token x with target p and draft q at its position:
accept with probability min(1, p(x) / q(x)); on rejection emit one token from
norm(max(0, p - q)) and end the round; when all k drafts are accepted emit a bonus token from p.
The emitted sequence is then distributed exactly as sampling from p token by token.
``verify`` holds the rule's loop on precomputed rows (``verify_with``: the same walk with its
pieces as parameters, for the mutant catalogue); ``verify_drafts``, ``models.decoding``,
``models.medusa`` and ``adapters.hf`` call it, and ``samplers.batched`` builds its tables from
``acceptance`` and ``residual``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ..common.validation import check_k, check_prob_vector, check_same_length
from ..laws.arrays import DistFn, Vector
from .registry import register

Rng = np.random.Generator
"""The round's random source: a numpy Generator (the exact enumerator passes a stand-in that
branches on every draw, ``laws.exact.EnumeratingRng``)."""


class Rows(Protocol):
    """Target rows by index: a list, a 2-D array, or ``LazyRows`` computed when read."""

    def __getitem__(self, i: int, /) -> Vector: ...


def model_output(name: str, fn: Callable[[tuple[int, ...]], Any], prefix: tuple[int, ...]) -> Vector:
    """Call a model and validate what it returned, naming the model and the prefix on error
    ("q_fn((0, 1)): sums to ..."); the prefix is formatted only then (it costs as much as the
    check of a short row)."""
    out = fn(prefix)
    try:
        return check_prob_vector(name, out)
    except ValueError as exc:
        raise ValueError(f"{name}({prefix}){str(exc)[len(name) :]}") from None


def residual(p: Vector, q: Vector) -> Vector:
    """norm(max(0, p - q)), the distribution to sample from after a rejection.

    Its normalizer is 1 - alpha > 0 whenever a rejection is possible. If rounding leaves it at 0
    (p and q equal to the last bit), the rejection had probability ~1e-16 and p itself is returned.
    """
    r = np.maximum(p - q, 0.0)
    total = float(r.sum())
    return r / total if total > 0 else p


def draft(q_fn: DistFn, prefix: tuple[int, ...], k: int, rng: Rng) -> tuple[list[int], list[Vector]]:
    """Sample k drafts from q, keeping every q vector each draft was sampled from."""
    drafts: list[int] = []
    qs: list[Vector] = []
    for _ in range(k):
        q = model_output("q_fn", q_fn, prefix + tuple(drafts))
        drafts.append(sample(q, rng))
        qs.append(q)
    return drafts, qs


def acceptance(p: Vector, q: Vector, x: int) -> float:
    """min(1, p(x) / q(x)), the probability that draft x is accepted.

    q(x) = 0 cannot happen when x was sampled from q; if a broken rng or model produces it anyway,
    a ValueError names the token instead of dividing by zero.
    """
    if q[x] <= 0:
        raise ValueError(f"q_fn: drafted token {x} has q(x) = 0; drafts must be sampled from q")
    return 1.0 if p[x] >= q[x] else float(p[x] / q[x])  # no overflow for tiny q(x)


def accepts(p: Vector, q: Vector, x: int, rng: Rng) -> bool:
    """Accept draft x with probability ``acceptance(p, q, x)`` = min(1, p(x) / q(x))."""
    return bool(rng.random() < acceptance(p, q, x))


CHOICE_ATOL = float(np.sqrt(np.finfo(np.float64).eps))
"""How far from 1 ``Generator.choice`` lets p sum before it raises (numpy/random/_generator.pyx)."""


def sample(p: Vector, rng: Rng) -> int:
    """One token from p (a draft from q, the bonus after k acceptances, a residual's token): the
    draw ``rng.choice(len(p), p=p)`` makes, token for token and number for number.

    A ``numpy.random.Generator`` draws by the inverse CDF directly, as ``Generator.choice`` does
    inside (cdf = cumsum(p) divided by its last entry, then ``searchsorted(rng.random(),
    side="right")``), without choice's checks of p on every call, which cost more than the draw
    itself: 1.7x to 2.5x faster at V = 4 to 33,024 (``tests/test_chain_properties.py`` pins the equality).
    A p whose sum is not well within choice's tolerance, a negative entry, and any other rng (the
    exact enumerator's ``EnumeratingRng``) go through ``rng.choice``, so what it refuses or
    models stays as it was; a draw it defers (``deferred``) is emitted undecided, so the
    enumerator sums over it where nothing reads it (``laws.summed_draws``)."""
    if type(rng) is np.random.Generator and type(p) is np.ndarray and p.dtype == np.float64 and p.ndim == 1 and p.size:
        cdf = np.add.accumulate(p)  # np.cumsum(p) and p.min() without their wrappers (4x the work at V = 4)
        total = cdf[-1]
        if abs(total - 1.0) <= CHOICE_ATOL / 2 and np.minimum.reduce(p) >= 0:
            cdf /= total
            return int(cdf.searchsorted(rng.random(), side="right"))
    x = rng.choice(len(p), p=p)
    return x if getattr(x, "deferred", False) else int(x)  # the enumerator's deferred draw, undecided


def recover(p: Vector, q: Vector, rng: Rng) -> int:
    """One token from residual(p, q): what the round emits at its first rejection."""
    return sample(residual(p, q), rng)


def verify_with(
    ps: Rows,
    qs: Sequence[Vector],
    drafts: list[int],
    rng: Rng,
    *,
    accept: Callable[[Vector, Vector, int, Rng], bool],
    reject: Callable[[Vector, Vector, int, Rng], int],
    bonus: Callable[[Rng], int],
) -> tuple[int, int]:
    """The rule's walk with its three pieces as parameters: drafts are tested in order with
    ``accept(p_i, q_i, x_i, rng)``; the first one refused ends the round with
    ``(i, reject(p_i, q_i, x_i, rng))``; when all k pass it is ``(k, bonus(rng))``.

    ``verify`` is this walk with the rule's own pieces (``accepts``, ``recover``, a sample of the
    bonus row); the mutant catalogue (``specverify.mutants.catalogue.round_with``) swaps one
    piece, so every mutant differs from the reference in that piece only. Row i of ``ps`` is read
    once, when draft i is tested."""
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = ps[i]
        if not accept(p, q, x, rng):
            return i, reject(p, q, x, rng)
    return len(drafts), bonus(rng)


def verify(ps: Rows, qs: Sequence[Vector], drafts: list[int], rng: Rng) -> tuple[int, int]:
    """(accepted drafts j, the token after them) from the k + 1 target rows ``ps`` (row i
    conditioned on drafts[:i]) and the k draft rows ``qs`` the drafts were sampled from, the rows
    of gpt-fast's generate.py and vLLM's rejection sampler. Reads each row of ``ps`` once."""
    return verify_with(
        ps,
        qs,
        drafts,
        rng,
        accept=accepts,
        reject=lambda p, q, x, rng: recover(p, q, rng),
        bonus=lambda rng: sample(ps[len(drafts)], rng),
    )


class LazyRows:
    """row(0), row(1), ... computed when read: ``verify`` calls a model only where it gets."""

    def __init__(self, row: Callable[[int], Vector]) -> None:
        self.row = row

    def __getitem__(self, i: int) -> Vector:
        return self.row(i)


def verify_drafts(p_fn: DistFn, prefix: tuple[int, ...], drafts: list[int], qs: list[Vector], rng: Rng) -> list[int]:
    """``verify`` with row i = p_fn(prefix + drafts[:i]), called lazily: the accepted drafts plus
    one token."""

    def row(i: int) -> Vector:
        p = model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))
        if i < len(qs):
            check_same_length("p_fn output", p, "q_fn output", qs[i])
        return p

    j, token = verify(LazyRows(row), qs, drafts, rng)
    return list(drafts[:j]) + [token]


@register("chain")
def speculative_step(p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng) -> list[int]:
    """One speculative round: 1 to k + 1 tokens distributed exactly as the target p."""
    start = tuple(prefix)
    drafts, qs = draft(q_fn, start, check_k(k), rng)
    return verify_drafts(p_fn, start, drafts, qs, rng)
