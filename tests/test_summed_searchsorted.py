"""``np.searchsorted(cdf, u)`` of a symbolic uniform is a draw summed over where nothing but the
output reads it (``summed_draws.CellToken``), decided where read, with the same law either way."""

from __future__ import annotations

import numpy as np

from specverify.laws import exact
from specverify.laws.summed_draws import SUMMED_FROM


def _cdf_of(w: np.ndarray) -> np.ndarray:
    """Cumulative sums over their last entry (u < 1 never runs past the last token)."""
    c = np.cumsum(w)
    return c / c[-1]


def _cdf(n: int, seed: int) -> np.ndarray:
    return _cdf_of(np.random.default_rng(seed).random(n))


WIDE, NARROW = _cdf(SUMMED_FROM + 6, 1), _cdf(3, 2)


def _emitted(rng):
    return (np.searchsorted(WIDE, rng.random(), side="right"), np.searchsorted(NARROW, rng.random(), side="right"))


def _read(rng):
    return (int(np.searchsorted(WIDE, rng.random(), side="right")), int(np.searchsorted(NARROW, rng.random())))


def _counted(fn):
    runs = [0]

    def counted(rng):
        runs[0] += 1
        return fn(rng)

    return counted, runs


def _max_difference(a: dict, b: dict) -> float:
    return max(abs(a.get(x, 0.0) - b.get(x, 0.0)) for x in set(a) | set(b))


def test_an_emitted_searchsorted_is_summed_with_the_law_of_the_decided_one():
    """The wide draw only emitted: its cells summed, not branched on (3 paths: the narrow draw's
    cells, fewer than SUMMED_FROM, still branch); wrapped in int(): one path per pair of cells; the
    same law to the last bit."""
    emitted, runs = _counted(_emitted)
    summed = exact.enumerate_distribution(emitted, max_paths=10_000)
    decided = exact.enumerate_distribution(_read, max_paths=10_000)
    assert runs[0] == 3 and len(summed) == len(decided) == (SUMMED_FROM + 6) * 3
    assert _max_difference(summed, decided) == 0.0


def test_reading_the_uniform_again_decides_its_pending_cell_first():
    """u read after its searchsorted (u < 0.5) stays in the cell the index was drawn from."""

    def reread(rng, wrap):
        u = rng.random()
        x = np.searchsorted(WIDE, u, side="right")
        return (wrap(x), bool(u < 0.5))

    lazy = exact.enumerate_distribution(lambda rng: reread(rng, lambda x: x))
    eager = exact.enumerate_distribution(lambda rng: reread(rng, int))
    assert _max_difference(lazy, eager) == 0.0
    half = np.searchsorted(WIDE, 0.5, side="right")  # the cell 0.5 cuts in two
    assert all((x > half) == (not below) for x, below in lazy if x != half)
    assert {below for x, below in lazy if x == half} == {True, False}


def test_an_inverse_cdf_round_that_emits_its_last_token_unread_is_exact_at_dense_v_256():
    """Leviathan et al.'s rule (arXiv 2211.17192) at k = 1 by inverse CDF, its residual and bonus
    emitted without int(): the exact law at V 256 in at most 2 V paths, TV to p at float64's floor."""
    v = 256
    rs = np.random.default_rng(3)
    p, q = rs.dirichlet(np.ones(v)), rs.dirichlet(np.ones(v))

    def sampler(p_fn, q_fn, prefix, k, rng):
        qx, px = q_fn(prefix), p_fn(prefix)
        x = int(np.searchsorted(_cdf_of(qx), rng.random(), side="right"))
        if rng.random() * qx[x] < px[x]:
            return [x, np.searchsorted(_cdf_of(px), rng.random(), side="right")]
        return [np.searchsorted(_cdf_of(np.maximum(px - qx, 0.0)), rng.random(), side="right")]

    counted, runs = _counted(lambda rng: tuple(sampler(lambda _: p, lambda _: q, (), 1, rng)))
    law = exact.enumerate_distribution(counted, max_paths=2 * v)
    first = {}
    for out, w in law.items():
        first[out[0]] = first.get(out[0], 0.0) + w
    assert runs[0] <= 2 * v
    assert exact.total_variation(first, dict(enumerate(p))) < 1e-12
