"""Round cases at engine scale: vocabularies in the thousands to 152k and k up to 8, judged by a
binned chi-square on each of the first tokens.

The enumerator follows a round sampler only while its paths stay few (V^2 for k = 1 and one
token), so a bug that needs a realistic vocabulary (drafts from a q truncated to its top ids, a
residual built in tiles with an off-by-one at a tile's end, token ids kept in a narrow integer
type) never shows on the small cases. Here the target is i.i.d. (p ignores the prefix), so every
output position's law is p itself, whatever the rounds before it did (Leviathan, Kalman, Matias,
arXiv 2211.17192, Theorem 1, applied round after round). Each of a case's first ``m`` positions
is tested on its own against p (a chi-square per position, Bonferroni over positions), in bins:

- **binning** (``bins``): an id whose expected count n p(id) is at least ``MIN_BIN_EXPECTED``
  is a bin of its own; the others are pooled in id order into consecutive groups that each reach
  it (the rare tail, never dropped). The power stated is that of the binned test: a TV between
  the binned laws (at most the TV between the token laws).
- **edges on purpose** (``engine_pair``): p and q put their mass on the ids where kernels'
  tiles and integer types end (0, 1, V - 2, V - 1, and b - 1, b for b in ``BOUNDARIES``), on 24
  ids drawn from the seed, and 5 % spread over the whole vocabulary. Side ``"residual"``: p
  holds the edge ids' mass that q lacks, so rejected drafts' residual lands on them; side
  ``"draft"``: q holds it, so drafts at the edges are accepted or rejected by their ratio.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import stats
from .arrays import Vector, normalized
from .chains import TableModel, iid_model

BOUNDARIES = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
"""Where int8 / uint8 / int16 / uint16 ids wrap and where power-of-two vocabulary tiles end."""

MIN_BIN_EXPECTED = 10.0
"""The smallest expected count of a bin (chi-square's usual floor is 5: twice that, so the
asymptotic p-value holds at the per-position false-fail rates used here)."""

HEAD_IDS = 24
"""Ids besides the edges that carry most of the other model's mass."""

SIDES = ("residual", "draft")

_WEIGHTS = {  # (edge ids, head ids, the whole vocabulary) of p, then of q
    "residual": ((0.60, 0.35, 0.05), (0.05, 0.90, 0.05)),
    "draft": ((0.30, 0.65, 0.05), (0.70, 0.25, 0.05)),
}


def edge_ids(vocab_size: int) -> np.ndarray:
    """0, 1, V - 2, V - 1 and b - 1, b for every boundary b below V: sorted, distinct."""
    ids = {0, 1, vocab_size - 2, vocab_size - 1}
    for b in BOUNDARIES:
        if b < vocab_size:
            ids.update((b - 1, b))
    return np.array(sorted(i for i in ids if 0 <= i < vocab_size))


def engine_pair(vocab_size: int, side: str, rng: np.random.Generator, name: str = "") -> TableModel:
    """An i.i.d. (p, q) over ``vocab_size`` ids with mass on the edge ids (module docstring);
    ``side`` says which model holds it. Drawn from ``rng`` (Dirichlet(1) weights, the head ids)."""
    if side not in SIDES:
        raise ValueError(f"side: must be one of {', '.join(SIDES)}, got {side!r}")
    if vocab_size < 2 * HEAD_IDS:
        raise ValueError(f"vocab_size: an engine-scale pair needs at least {2 * HEAD_IDS} ids, got {vocab_size}")
    edges = edge_ids(vocab_size)
    others = np.setdiff1d(np.arange(vocab_size), edges)
    head = rng.choice(others, HEAD_IDS, replace=False)

    def mix(w_edges: float, w_head: float, w_all: float) -> np.ndarray:
        x = np.full(vocab_size, w_all / vocab_size)
        x[edges] += w_edges * rng.dirichlet(np.ones(len(edges)))
        x[head] += w_head * rng.dirichlet(np.ones(len(head)))
        return normalized(x)

    wp, wq = _WEIGHTS[side]
    p, q = mix(*wp), mix(*wq)
    return iid_model(p, q, name=name or f"engine-V{vocab_size}-{side}")


def scale_pair(vocab_size: int, side: str, rng: np.random.Generator) -> TableModel:
    """The i.i.d. pair an engine-scale case runs on: ``engine_pair`` where the vocabulary has
    room for edges and a head (``2 * HEAD_IDS`` ids or more), else a Dirichlet(0.3) p and a q
    halfway to another Dirichlet(0.3) draw (both rejections and acceptances happen)."""
    if vocab_size >= 2 * HEAD_IDS:
        return engine_pair(vocab_size, side, rng)
    p = rng.dirichlet(np.full(vocab_size, 0.3))
    return iid_model(p, 0.5 * p + 0.5 * rng.dirichlet(np.full(vocab_size, 0.3)), name=f"iid-V{vocab_size}")


ENUMERABLE_SUPPORT = 40
"""The ids an enumerable wide case (``enumerable_pair``) puts mass on."""

MISSING_FROM_Q = 4
"""Ids of that support where q is 0 and p is not (a rejection's residual must reach them)."""


def enumerable_pair(vocab_size: int, rng: np.random.Generator, name: str = "") -> TableModel:
    """An i.i.d. (p, q) over ``vocab_size`` ids that the enumerator follows exactly at k = 1 and
    one token: both put their mass on at most ``ENUMERABLE_SUPPORT`` ids, the edge ids below V
    (``edge_ids``: 127, 128, V - 1, ...) and ids drawn from ``rng``, so a round costs about
    2 |support|^2 paths whatever V is (a dense pair costs 2 V^2: 130k paths at V = 256).
    p is Dirichlet(0.3) on the support; q is halfway between p and another Dirichlet(0.3) draw,
    with ``MISSING_FROM_Q`` drawn ids set to 0 (q(x) = 0 on ids p keeps), renormalized. The
    tensors are V wide, so an id past a narrow type or a draft from a truncated q still shows."""
    size = min(ENUMERABLE_SUPPORT, vocab_size)
    edges = edge_ids(vocab_size)[:size]
    others = np.setdiff1d(np.arange(vocab_size), edges)
    drawn = rng.choice(others, size - len(edges), replace=False) if size > len(edges) else others[:0]
    support = np.concatenate([edges, drawn]).astype(np.int64)
    p, q = np.zeros(vocab_size), np.zeros(vocab_size)
    p[support] = rng.dirichlet(np.full(size, 0.3))
    q[support] = 0.5 * p[support] + 0.5 * rng.dirichlet(np.full(size, 0.3))
    if len(drawn) > MISSING_FROM_Q:
        q[drawn[:MISSING_FROM_Q]] = 0.0
    return iid_model(p, q / q.sum(), name=name or f"iid-V{vocab_size}")


def bins(p: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """(the bin of every id, the number of bins) for ``n`` samples from ``p`` (module docstring)."""
    expected = n * np.asarray(p, dtype=np.float64)
    bin_of = np.empty(len(expected), dtype=np.int64)
    alone = np.flatnonzero(expected >= MIN_BIN_EXPECTED)
    bin_of[alone] = np.arange(len(alone))
    n_bins, last_group = len(alone), None
    pooled, group_mass = [], 0.0
    for i in np.flatnonzero(expected < MIN_BIN_EXPECTED):
        pooled.append(i)
        group_mass += expected[i]
        if group_mass >= MIN_BIN_EXPECTED:
            bin_of[pooled], last_group = n_bins, n_bins
            n_bins += 1
            pooled, group_mass = [], 0.0
    if pooled:  # the last partial group joins the pooled group before it, else an id's own bin
        if last_group is None:
            if n_bins == 0:  # nothing reaches the floor: one bin (a test with no degree of freedom)
                last_group, n_bins = 0, 1
            else:  # the least likely id that is alone takes the rare tail in
                last_group = int(bin_of[alone[np.argmin(expected[alone])]])
        bin_of[pooled] = last_group
    return bin_of, n_bins


def binned_law(p: np.ndarray, bin_of: np.ndarray, n_bins: int) -> np.ndarray:
    """The probability of p in each bin."""
    return np.bincount(bin_of, weights=p, minlength=n_bins)


def as_outcomes(mass: Vector) -> dict[tuple[int, ...], float]:
    """{(bin,): probability} of the bins with mass (``stats``' form of a law)."""
    return {(b,): float(m) for b, m in enumerate(mass) if m > 0}


def min_detectable_tv(p: np.ndarray, n: int, per_check: float, false_pass_rate: float) -> float:
    """The binned TV the chi-square at ``per_check`` sees with probability 1 - ``false_pass_rate``
    on ``n`` samples from p, binned for n (``bins``; ``stats.min_discrepancy_chi_square``, at most
    1; 1 with no sample)."""
    if n < 1:
        return 1.0
    law = as_outcomes(binned_law(p, *bins(p, n)))
    return min(stats.min_discrepancy_chi_square(n, law, per_check, false_pass_rate), 1.0)


def binned(tokens: Iterable[int], bin_of: NDArray[np.int64]) -> list[tuple[int, ...]]:
    """Each sampled token as its bin, ``(bin,)`` (a token outside the vocabulary never gets here:
    the round's contract rejects it first)."""
    return [(int(bin_of[t]),) for t in tokens]


def binning_words(n_bins: int, vocab_size: int, n: int) -> str:
    return (
        f"binned: {n_bins} bins over {vocab_size} ids at n={n} (ids expected >= "
        f"{MIN_BIN_EXPECTED:g} times alone, the rest pooled in id order)"
    )


def side_of(model: TableModel) -> str | None:
    """The side an ``engine_pair`` was drawn with (from its name), None for any other model."""
    side = model.name.rsplit("-", 1)[-1]
    return side if model.name.startswith("engine-V") and side in SIDES else None


SHRINK_VOCABS = tuple(b + 1 for b in BOUNDARIES)
"""The vocabularies a shrink tries, smallest first: one id past each boundary, the smallest
vocabulary where that boundary's tile or id type first matters."""


def shrink_shapes(vocab_size: int, k: int, side: str | None) -> list[tuple[int, int]]:
    """(V, k) candidates for a smaller engine-scale case, smallest first: every ``SHRINK_VOCABS``
    below ``vocab_size`` (only with a ``side``: an engine pair needs one), then ``vocab_size``;
    k = 1 before the case's own k at each V."""
    vocabs = [v for v in SHRINK_VOCABS if v < vocab_size and v >= 2 * HEAD_IDS] if side else []
    ks = sorted({1, k})
    return [(v, kk) for v in vocabs + [vocab_size] for kk in ks]


@dataclass
class PositionVerdict:
    """The binned chi-square of one window position: the first position that failed, or the
    last one tested when all passed (``passed``)."""

    position: int
    passed: bool
    p_value: float
    counts: np.ndarray  # samples per bin
    want: np.ndarray  # the target's probability per bin
    bin_of: np.ndarray
    n: int

    @property
    def binned_tv(self) -> float:
        return 0.5 * float(np.abs(self.counts / max(self.n, 1) - self.want).sum())


def judge_positions(runs: Sequence[Sequence[int]], p: Vector, m: int, per_check: float) -> PositionVerdict:
    """Each of the first ``m`` positions of ``runs`` (token sequences, each at least m long)
    against ``p`` by a binned chi-square at ``per_check``; stops at the first that fails.
    ValueError when there is nothing to judge (no run, or m < 1)."""
    verdict = judge_columns([[run[j] for run in runs] for j in range(m)], p, per_check)
    if verdict is None:
        raise ValueError(f"runs: nothing to judge ({len(runs)} runs, m = {m}): at least one run and m >= 1")
    return verdict


def judge_columns(
    columns: Sequence[Sequence[int]], p: Vector, per_check: float, min_samples: int = 1
) -> PositionVerdict | None:
    """Each column (the tokens sampled at one position) against ``p`` by a binned chi-square at
    ``per_check``, its bins chosen for its own sample size (``bins``); columns with fewer than
    ``min_samples`` tokens are skipped. The first verdict that fails, else the last one tested
    (None when none was)."""
    verdict = None
    for j, column in enumerate(columns):
        n = len(column)
        if n < min_samples:
            continue
        bin_of, n_bins = bins(p, n)
        mass = binned_law(p, bin_of, n_bins)
        test = stats.chi_square_test(binned(column, bin_of), as_outcomes(mass), false_fail_rate=per_check)
        verdict = PositionVerdict(
            j,
            test.passed,
            test.p_value if test.p_value is not None else 0.0,
            np.bincount(bin_of[np.asarray(column, dtype=np.int64)], minlength=n_bins),
            mass,
            bin_of,
            n,
        )
        if not test.passed:
            break
    return verdict


def bin_label(bin_of: np.ndarray, b: int) -> str:
    """'id 1023' for a bin of one id, 'ids 5..4090 (pooled, 312 ids)' for a pooled one."""
    ids = np.flatnonzero(bin_of == b)
    if len(ids) == 1:
        return f"id {ids[0]}"
    return f"ids {ids[0]}..{ids[-1]} (pooled, {len(ids)} ids)"


def binned_rows(verdict: PositionVerdict, limit: int = 16) -> list[dict[str, Any]]:
    """The bins whose frequency differs most from the target's, as ``round_counterexample.describe``'s
    ``distributions`` rows (``tokens``: the bin's label)."""
    freq = verdict.counts / max(verdict.n, 1)
    order = np.argsort(-np.abs(freq - verdict.want))[:limit]
    return [
        {
            "tokens": [bin_label(verdict.bin_of, int(b))],
            "sampler": round(float(freq[b]), 9),
            "target": round(float(verdict.want[b]), 9),
        }
        for b in order
    ]


def heaviest(x: Vector, limit: int = 12) -> dict[int, float]:
    """{id: probability} of the ``limit`` most likely ids (a row too wide to print whole)."""
    top = np.argsort(-x)[:limit]
    return {int(i): round(float(x[i]), 6) for i in sorted(top)}


__all__ = [
    "BOUNDARIES",
    "MIN_BIN_EXPECTED",
    "PositionVerdict",
    "SHRINK_VOCABS",
    "SIDES",
    "as_outcomes",
    "bin_label",
    "binned",
    "binned_law",
    "binned_rows",
    "binning_words",
    "bins",
    "edge_ids",
    "engine_pair",
    "heaviest",
    "judge_columns",
    "judge_positions",
    "min_detectable_tv",
    "scale_pair",
    "shrink_shapes",
    "side_of",
]
