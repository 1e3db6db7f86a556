"""The kernel battery's sweeps (``sweep_cases``; ``reach`` names how far they go): one dimension
at a time, the others small: every row of batches straddling the batch tiles (``batch_case``), one
case per k (``k_sweep_cases``), dense rows at wide V (``dense_sweep_case``) and sparse rows over
wide vocabularies with their mass on ids past 65,535 (``binned_sweep_case``), each reaching the
value edges (``VALUE_EDGES``). Their instances are built as the fixed cases' (``kernel.cases``).
"""

from __future__ import annotations

import numpy as np

from .cases import KernelCase, normalized, peaky_rows, stack_case

VALUE_EDGES = ("p(x)=0<q(x)", "q(x)=0<p(x)", "p=q", "one-hot p!=q", "one-hot p=q", "disjoint supports")
"""The value edges every sweep reaches (ENGINES-NOTES): a draft with p(x) = 0 < q(x), rejected
where the residual differs from p (a kernel sampling p there shows); one with q(x) = 0 < p(x) (not
a draw from q: judged for behaviour only, ``q_zero``); p = q; one-hot rows, equal and not;
disjoint supports."""

_EDGE_WEIGHTS = {  # kind -> (q over ids a, b, c, d; p over them): the draft is a. Dyadic, and so
    # is every residual's sum: the rule's thresholds are float32 values (the scans need no bisection)
    "generic": ((0.5, 0.25, 0.125, 0.125), (0.25, 0.375, 0.125, 0.25)),  # accepted w.p. 1/2, residual b, d
    "p(x)=0<q(x)": ((0.5, 0.25, 0.25, 0.0), (0.0, 0.5, 0.25, 0.25)),  # residual (0, .5, 0, .5) != p
    "q(x)=0<p(x)": ((0.0, 0.5, 0.5, 0.0), (0.5, 0.25, 0.25, 0.0)),
    "p=q": ((0.5, 0.25, 0.125, 0.125), (0.5, 0.25, 0.125, 0.125)),
    "one-hot p!=q": ((1.0, 0.0, 0.0, 0.0), (0.0, 1.0, 0.0, 0.0)),
    "one-hot p=q": ((1.0, 0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)),
    "disjoint supports": ((0.5, 0.5, 0.0, 0.0), (0.0, 0.0, 0.75, 0.25)),
}
BONUS_WEIGHTS = (0.5, 0.25, 0.125, 0.125)
"""The bonus row's weights over the same four ids (the top id first)."""

BATCH_TILES = (32, 64, 128, 256, 512)
"""The batch tiles the batch sweep straddles (2^j - 1, 2^j, 2^j + 1 rows; rows past each tile)."""


def edge_rows(kind: str, V: int, ids) -> tuple[np.ndarray, np.ndarray]:
    """(q row, p row) float32 [V] of one value edge (``VALUE_EDGES`` or "generic") with its mass
    on the four ``ids`` (a, b, c, d); the draft is a."""
    wq, wp = _EDGE_WEIGHTS[kind]
    q, p = np.zeros(V, np.float32), np.zeros(V, np.float32)
    q[list(ids)], p[list(ids)] = wq, wp
    return q, p


def _chain_rows(rng, V: int, k: int, last: str | None, ids) -> tuple[list, np.ndarray, np.ndarray]:
    """(drafts, q [k, V], p [k + 1, V]): k - 1 random positions (q 80 % of the way to p: long
    runs of acceptances), then the last draft ``last`` (a kind of ``edge_rows`` on ``ids``; None:
    random too), drafts from q; distinct rows at every position (a row read one position off
    shows)."""
    p = peaky_rows(rng, V, k + 1, 1.0)
    q = (0.8 * p[:k] + 0.2 * peaky_rows(rng, V, k, 1.0)).astype(np.float32)
    drafts = [int(rng.choice(V, p=normalized(q[i]))) for i in range(k)]
    if last is not None:
        q[k - 1], p[k - 1] = edge_rows(last, V, ids)
        drafts[k - 1] = int(ids[0])
    return drafts, q, p


def k_sweep_cases(max_k: int, V: int = 6, seed: int = 31) -> list[KernelCase]:
    """One case per k = 1..max_k (a bug at one k only shows): a random chain, and the same with
    the last draft a value edge (``VALUE_EDGES`` in turn), V = 6."""
    out = []
    for k in range(1, max_k + 1):
        rng = np.random.default_rng(seed + k)
        kind = VALUE_EDGES[(k - 1) % len(VALUE_EDGES)]
        ids = [(k + j) % V for j in range(4)]
        rows = [("random chain", *_chain_rows(rng, V, k, None, ids))]
        rows.append((f"last draft {kind}", *_chain_rows(rng, V, k, kind, ids)))
        out.append(stack_case(f"k sweep k={k}, V{V}", rows, k))
    return out


def dyadic_row(rng, V: int, bits: int = 24) -> np.ndarray:
    """A flat random row over V <= 2^16 ids (weights uniform on 1..255: every id carries mass, the
    bottom half about a quarter of it) whose entries are multiples of 2^-bits: every cumulative
    sum is exact in float32, so the rule's thresholds fall on float32 values and the scan needs no
    bisection."""
    w = rng.integers(1, 256, V)
    n = w * (1 << bits) // w.sum()
    n[rng.choice(V, (1 << bits) - int(n.sum()), replace=False)] += 1
    return (n / float(1 << bits)).astype(np.float32)


def dense_sweep_case(V: int, seed: int = 41) -> KernelCase:
    """Dense rows at V, k = 1: p flat over every id but the top one (``dyadic_row``), the draft
    that top id V - 1 with p(x) = 0 < q(x) = 1/2, q = p / 2 elsewhere: always rejected, the
    residual max(p - q, 0) = p / 2 over every other id (a residual over the top ids only, or a
    tile that ends below V, moves mass). Its cumulative sums are p's, so the exact law costs one
    scan of V cells (each probe a row of 3 V floats: ~V^2): 4 s at V = 4096 on 2 cores."""
    rng = np.random.default_rng(seed + V)
    p = np.zeros((2, V), np.float32)
    p[0, : V - 1] = dyadic_row(rng, V - 1)
    p[1] = dyadic_row(rng, V)
    q = (p[:1] / 2).astype(np.float32)
    q[0, V - 1] = 0.5
    return stack_case(f"dense sweep V{V}, k=1", [("draft at the top id: p(x)=0<q(x)", [V - 1], q, p)], 1)


def top_ids(V: int) -> tuple[int, int, int, int]:
    """Four distinct ids at the top of a vocabulary of V >= 8: V - 1, 65,536 where V - 2 is past
    it (else V - 2), V - 2 or V - 3, and 65,535 where it is below those (else V // 2)."""
    b = 65_536 if 65_536 < V - 2 else V - 2
    c = V - 2 if b != V - 2 else V - 3
    d = 65_535 if 65_535 < min(b, c) else V // 2
    return V - 1, b, c, d


def binned_sweep_case(V: int) -> KernelCase:
    """Sparse rows over a vocabulary of V with their mass on ``top_ids(V)`` (the draft the top id;
    the residual and the bonus on ids past 65,535 where V allows): a random-looking draft and the
    value edges p(x) = 0 < q(x), q(x) = 0 < p(x) and disjoint supports there, k = 1. An id kept in
    16 bits (token & 0xFFFF) or a tile that ends below V moves mass. Cost grows with V (each probe
    a row of 3 V floats), not with the support."""
    ids = top_ids(V)
    bonus = np.zeros(V, np.float32)
    bonus[list(ids)] = BONUS_WEIGHTS
    rows = []
    for kind in ("generic", "p(x)=0<q(x)", "q(x)=0<p(x)", "disjoint supports"):
        q, p = edge_rows(kind, V, ids)
        rows.append((f"draft {ids[0]}: {kind}", [ids[0]], q[None], np.stack([p, bonus])))
    return stack_case(f"binned sweep V{V}, k=1", rows, 1)


def batch_case(batches: tuple[int, ...], V: int = 5) -> KernelCase:
    """Five instances, k = 2, V = 5: draft 0 random-looking (accepted w.p. 1/2), draft 1 a value
    edge (p(x) = 0 < q(x), p = q, one-hot p != q, disjoint supports) or random-looking, the bonus
    row its own; ``batches``: the batch sizes the battery tiles them to (row r is instance r mod
    5: five is odd, so a row that reads row r - 2^j or r + 1 reads another instance)."""
    rows = []
    for i, kind in enumerate(("generic", "p(x)=0<q(x)", "p=q", "one-hot p!=q", "disjoint supports")):
        ids0, ids1 = [(i + j) % V for j in range(4)], [(i + j + 1) % V for j in range(4)]
        (q0, p0), (q1, p1) = edge_rows("generic", V, ids0), edge_rows(kind, V, ids1)
        bonus = np.zeros(V, np.float32)
        bonus[[(i + j + 2) % V for j in range(4)]] = BONUS_WEIGHTS
        rows.append((f"draft 1 {kind}", [ids0[0], ids1[0]], np.stack([q0, q1]), np.stack([p0, p1, bonus])))
    return stack_case(f"batch rows V{V}, k=2", rows, 2, batches)


def sweep_cases(budget) -> list[KernelCase]:
    """The sweeps of a ``KernelBudget``, one dimension at a time, the others small: the batch
    case (``batch_sweep``), one case per k (``k_sweep``), dense rows (``dense_sweep``) and wide
    sparse rows (``binned_sweep``)."""
    out = [batch_case(tuple(budget.batch_sweep))] if budget.batch_sweep else []
    out += k_sweep_cases(budget.k_sweep)
    out += [dense_sweep_case(V) for V in budget.dense_sweep]
    return out + [binned_sweep_case(V) for V in budget.binned_sweep]


SWEEPS = ("batch rows", "k sweep", "dense sweep", "binned sweep", "corner")
"""Name prefixes of ``sweep_cases``' cases and the corners' (their coverage origin is "sweep")."""
WIDE_SWEEPS = ("dense sweep", "binned sweep")
"""The sweeps over wide vocabularies: exact from uniforms where the kernel takes them; a kernel that
draws its own randomness is judged there by binned statistics (``plan.statistical_law``)."""


def wide_sweep(case: KernelCase) -> bool:
    """Whether ``case`` is one of the ``WIDE_SWEEPS``."""
    return case.name.startswith(WIDE_SWEEPS)


def reach(budget) -> dict:
    """Each swept dimension's largest value at a ``KernelBudget``: {"dense V", "binned V", "k",
    "batch"} (0: not swept there). Dense V counts the engine-scale dense case (k = 8) too; binned
    V the fixed wide-id case (V = 33,024). The same box for every kernel: one that takes uniforms
    is judged there exactly from them, one that draws its own by statistics (binned on the
    ``WIDE_SWEEPS``)."""
    engine = budget.engine_scale
    return {
        "dense V": max((*budget.dense_sweep, budget.dense_vocab if engine else 0)),
        "binned V": max((*budget.binned_sweep, 33_024 if engine else 0)),
        "k": max(budget.k_sweep, 8 if engine else 0),
        "batch": max(budget.batch_sweep, default=0),
    }


__all__ = [
    "BATCH_TILES",
    "BONUS_WEIGHTS",
    "SWEEPS",
    "VALUE_EDGES",
    "WIDE_SWEEPS",
    "batch_case",
    "binned_sweep_case",
    "dense_sweep_case",
    "dyadic_row",
    "edge_rows",
    "k_sweep_cases",
    "reach",
    "sweep_cases",
    "top_ids",
    "wide_sweep",
]
