"""The kernel battery's cases: batches of (drafts, q rows, p rows) instances, and the claimed
rule's exact law given each instance's drafts.

A ``KernelCase`` holds n instances of one shape (k drafts, vocabulary V), each a row of the
kernel's inputs: ``draft_ids[n, k]`` (-1 after a ragged row's k_b drafts), ``q[n, k, V]``,
``p[n, k + 1, V]`` (float32, as engines hand them over). The fixed cases are the readable core
(every draft of a small model enumerated, the adversarial inputs of ../ENGINES-NOTES: a draft
with p(x) = 0, one with q(x) = 0, p = q, one-hot and disjoint rows, ragged rows); the engine-scale
cases reach what small vocabularies hide (V = 1000 with k = 8, tiles of 1024 and 4096 ids,
ids past int16); ``generated_cases`` draws more from the check's seed (numpy SeedSequence). The
sweeps (``kernel.sweeps``) go one dimension at a time: V, k, batch rows, value edges in each.

``rule_law`` is the token-wise rule's law of a round's output given the drafts (Leviathan et
al., arXiv 2211.17192; Chen et al., 2302.01318), computed in float64 from the float32 rows:
accept draft i with probability a_i = min(1, p_i(x_i) / q_i(x_i)); at the first rejection emit
from norm(max(p_i - q_i, 0)) (p_i itself when that is empty, as ``samplers.chain.residual``);
after k_b acceptances the bonus from p at row k_b. Keys are (accepted drafts j, emitted token y).
A drafted token with q(x) = 0 is not a draw from q: its instance is judged only for behaviour
(``q_zero``: accepted or rejected; after a rejection with an empty residual, what is emitted),
never against a law; the reference rejects it and then emits from p.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ...battery.seed_tree import stream
from ...laws.chains import random_model


@dataclass(frozen=True, eq=False)
class KernelCase:
    name: str
    draft_ids: np.ndarray  # int64 [n, k], -1 after a row's k_b drafts
    q: np.ndarray  # float32 [n, k, V]
    p: np.ndarray  # float32 [n, k + 1, V]
    labels: tuple  # one name per instance
    batches: tuple = ()  # batch sizes the instances are tiled to, row r instance r mod n (``batch_case``)

    @property
    def n(self) -> int:
        return self.draft_ids.shape[0]

    @property
    def k(self) -> int:
        return self.draft_ids.shape[1]

    @property
    def vocab_size(self) -> int:
        return self.p.shape[2]

    def drafts(self, b: int) -> tuple:
        """Instance b's drafts (its k_b leading ids)."""
        row = self.draft_ids[b]
        return tuple(int(x) for x in row[row >= 0])

    def q_zero(self, b: int) -> bool:
        """Whether some draft of instance b has q(x) = 0 (not a draw from q)."""
        return any(self.q[b, i, x] <= 0 for i, x in enumerate(self.drafts(b)))

    def shape_text(self) -> str:
        return f"B={self.n}, k={self.k}, V={self.vocab_size}"


def acceptance(p_row: np.ndarray, q_row: np.ndarray, x: int) -> float:
    """min(1, p(x) / q(x)) in float64; 0 when q(x) = 0 (a token q cannot have drafted is
    rejected, as vLLM V1 and SGLang do; vLLM V0 and TensorRT-LLM accept it: p / 0 = inf)."""
    p, q = float(p_row[x]), float(q_row[x])
    if q <= 0:
        return 0.0
    return min(1.0, p / q)


def emission_weights(p_row: np.ndarray, q_row: np.ndarray | None) -> np.ndarray:
    """What the emitted token is drawn from, normalized (float64): the residual after a
    rejection (``q_row`` given), else p itself (the bonus)."""
    p = p_row.astype(np.float64)
    w = p if q_row is None else np.maximum(p - q_row.astype(np.float64), 0.0)
    if w.sum() <= 0:
        w = p
    return w / w.sum()


def rule_law(case: KernelCase, b: int) -> dict:
    """{(j, y): probability} of the token-wise rule given instance b's drafts."""
    xs = case.drafts(b)
    law: dict = {}
    reach = 1.0
    for i, x in enumerate(xs):
        a = acceptance(case.p[b, i], case.q[b, i], x)
        if a < 1:
            w = emission_weights(case.p[b, i], case.q[b, i])
            for y in np.flatnonzero(w):
                law[(i, int(y))] = law.get((i, int(y)), 0.0) + reach * (1 - a) * float(w[y])
        reach *= a
        if reach == 0:
            return law
    w = emission_weights(case.p[b, len(xs)], None)
    for y in np.flatnonzero(w):
        law[(len(xs), int(y))] = law.get((len(xs), int(y)), 0.0) + reach * float(w[y])
    return law


def emission_breakpoints(case: KernelCase, b: int, j: int) -> np.ndarray:
    """The cumulative sums where the emitted token changes at position j under the rule (the
    residual's, or p's for the bonus), with p_j's own for kernels that read p."""
    xs = case.drafts(b)
    q = case.q[b, j] if j < len(xs) else None
    return np.concatenate(
        [np.cumsum(emission_weights(case.p[b, j], q)), np.cumsum(emission_weights(case.p[b, j], None))]
    )


# --------------------------------------------------------------------------- building cases


def stack_case(name: str, rows: list[tuple[str, list, np.ndarray, np.ndarray]], k: int, batches=()) -> KernelCase:
    """A case from (label, drafts, q rows [k_b, V], p rows [k_b + 1, V]) instances, padded to k."""
    V = rows[0][3].shape[1]
    n = len(rows)
    ids = np.full((n, k), -1, dtype=np.int64)
    q = np.zeros((n, k, V), dtype=np.float32)
    p = np.zeros((n, k + 1, V), dtype=np.float32)
    for b, (_, drafts, qb, pb) in enumerate(rows):
        kb = len(drafts)
        ids[b, :kb] = drafts
        q[b, :kb] = qb[:kb]
        p[b, : kb + 1] = pb[: kb + 1]
        if kb < k:  # padding rows: a point mass on the last id, unlike the real rows (a kernel
            q[b, kb:, V - 1] = 1.0  # that reads them, e.g. the bonus from row k, shows it)
            p[b, kb + 1 :, V - 1] = 1.0
    return KernelCase(name, ids, q, p, tuple(r[0] for r in rows), tuple(batches))


def _model_rows(model, prefix: tuple, drafts: tuple, kb: int) -> tuple[np.ndarray, np.ndarray]:
    p = np.array([model.p_fn(prefix + drafts[:i]) for i in range(kb + 1)], dtype=np.float32)
    q = np.array([model.q_fn(prefix + drafts[:i]) for i in range(kb)], dtype=np.float32).reshape(kb, p.shape[1])
    return q, p


def every_draft_case(V: int = 3, k: int = 2, seed: int = 5) -> KernelCase:
    """Every one of the V^k drafts of a small first-order chain, each its own instance (so the
    marginal over drafts is checked through each conditional law)."""
    model = random_model(V, 1, 1, seed)
    rows = []
    for drafts in itertools.product(range(V), repeat=k):
        q, p = _model_rows(model, (0,), drafts, k)
        rows.append((f"drafts {list(drafts)}", list(drafts), q, p))
    return stack_case(f"every draft of a V{V} chain, k={k}", rows, k)


def adversarial_case() -> KernelCase:
    """The inputs where engines disagree (ENGINES-NOTES): a draft with p(x) = 0, p = q exactly,
    one-hot p and q (equal and different), disjoint supports, a draft with q(x) = 0."""
    k = 3

    def row(*v):
        return np.array(v, dtype=np.float32)

    u = row(0.25, 0.25, 0.25, 0.25)
    pq = row(0.1, 0.2, 0.3, 0.4)
    rows = [
        ("draft with p(x)=0", [3, 1, 0], np.stack([u, u, u]), np.stack([row(0.5, 0.5, 0, 0), u, u, pq])),
        ("p = q exactly", [2, 3, 1], np.stack([pq, pq, pq]), np.stack([pq, pq, pq, pq])),
        ("one-hot p = q", [1, 1, 1], np.stack([row(0, 1, 0, 0)] * 3), np.stack([row(0, 1, 0, 0)] * 4)),
        (
            "one-hot p != q",
            [2, 0, 0],
            np.stack([row(0, 0, 1, 0), row(1, 0, 0, 0), row(1, 0, 0, 0)]),
            np.stack([row(1, 0, 0, 0)] * 4),
        ),
        ("disjoint supports", [0, 1, 0], np.stack([row(0.5, 0.5, 0, 0)] * 3), np.stack([row(0, 0, 0.3, 0.7)] * 4)),
        (
            "draft with q(x)=0 (not a draw from q)",
            [3, 0, 1],
            np.stack([row(0.5, 0.5, 0, 0), u, u]),
            np.stack([row(0.2, 0.2, 0.2, 0.4), u, u, u]),
        ),
        (
            "empty residual: draft with p(x)=q(x)=0, p=q elsewhere",
            [0, 1, 2],
            np.stack([row(0, 0.2, 0.3, 0.5), u, u]),
            np.stack([row(0, 0.2, 0.3, 0.5), u, u, u]),
        ),
    ]
    return stack_case("adversarial inputs V4, k=3", rows, k)


def ragged_case(seed: int = 11) -> KernelCase:
    """Rows with 4, 2, 1 and 0 drafts in one batch (-1 padding; the bonus row at k_b)."""
    model = random_model(5, 1, 1, seed)
    rng = np.random.default_rng(seed)
    rows = []
    for kb in (4, 2, 1, 0, 3):
        drafts = tuple(int(x) for x in rng.integers(0, 5, kb))
        q, p = _model_rows(model, (1,), drafts, kb)
        rows.append((f"k_b={kb}", list(drafts), q, p))
    return stack_case("ragged rows V5, k=4", rows, 4)


def normalized(row: np.ndarray) -> np.ndarray:
    w = row.astype(np.float64)
    return w / w.sum()


def peaky_rows(rng, V: int, rows: int, concentration: float) -> np.ndarray:
    return rng.dirichlet(np.full(V, concentration), size=rows).astype(np.float32)


def dense_case(V: int = 1000, k: int = 8, n: int = 2, seed: int = 21) -> KernelCase:
    """Dense rows: every one of V ids has mass (peaky Dirichlet(0.05) rows), k drafts drawn
    from q. The exact law's cost grows with the support (V breakpoints per accepted count), so
    the battery runs it at ``KernelBudget.dense_vocab``; ``sparse_engine_case`` is V wide at the
    cost of its support."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(n):
        p = peaky_rows(rng, V, k + 1, 0.05)
        q = (0.5 * p[:k] + 0.5 * peaky_rows(rng, V, k, 0.05)).astype(np.float32)
        drafts = [int(rng.choice(V, p=normalized(q[i]))) for i in range(k)]
        rows.append((f"instance {b}", drafts, q, p))
    return stack_case(f"dense rows V{V}, k={k}", rows, k)


def tile_boundary_case(V: int = 4097) -> KernelCase:
    """Mass on both sides of the 1024- and 4096-wide tile boundaries, drafts on them: a kernel
    whose residual or sampling tiles are off by one moves mass across a boundary."""
    k = 2
    rows = []
    for lo in (1023, 4095):
        p = np.zeros((k + 1, V), np.float32)
        q = np.zeros((k, V), np.float32)
        p[:, lo], p[:, lo + 1], p[:, 7] = 0.3, 0.4, 0.3
        q[:, lo], q[:, lo + 1], q[:, 7] = 0.5, 0.3, 0.2  # a rejection leaves mass on lo + 1 and 7
        rows.append((f"drafts at {lo}, {lo}", [lo, lo], q, p))
    return stack_case(f"tile boundaries V{V}, k=2", rows, k)


def wide_ids_case(V: int = 33_024) -> KernelCase:
    """Ids past int8 and int16 (129, 32_900): a kernel that keeps ids in a narrow type wraps them."""
    k = 1
    rows = []
    for x in (129, 32_900):
        p = np.zeros((k + 1, V), np.float32)
        q = np.zeros((k, V), np.float32)
        p[:, x], p[:, 3] = 0.6, 0.4
        q[:, x], q[:, 3] = 0.5, 0.5
        rows.append((f"draft id {x}", [x], q, p))
    return stack_case(f"wide ids V{V}, k=1", rows, k)


def generated_cases(
    seed_sequence: np.random.SeedSequence, count: int, max_vocab: int = 300, max_k: int = 8
) -> list[KernelCase]:
    """``count`` cases drawn from the check's seed: V in 2..max_vocab, k in 1..max_k, rows of
    random peakedness (zeros included), drafts drawn from q, a few instances each."""
    out = []
    for i in range(count):
        rng = np.random.default_rng(stream(seed_sequence, i))
        V = int(rng.choice([2, 3, 4, 5, 8, 50, max_vocab]))
        k = int(rng.integers(1, max_k + 1))
        conc = float(rng.choice([0.05, 0.3, 1.0, 5.0]))
        rows = []
        for b in range(int(rng.integers(1, 4))):
            p = peaky_rows(rng, V, k + 1, conc)
            q = peaky_rows(rng, V, k, conc)
            if rng.random() < 0.5:  # q close to p: long acceptance runs
                q = (0.8 * p[:k] + 0.2 * q).astype(np.float32)
            kb = int(rng.integers(0, k + 1)) if rng.random() < 0.3 else k
            drafts = [int(rng.choice(V, p=normalized(q[j]))) for j in range(kb)]
            rows.append((f"instance {b}", drafts, q, p))
        out.append(stack_case(f"generated #{i}: V{V}, k={k}", rows, k))
    return out


def sparse_engine_case(rng, V: int, k: int, side: str, name: str, instances: int = 2) -> KernelCase:
    """Rows over a vocabulary of V whose mass sits on ``scale.edge_ids(V)`` (where tiles and
    narrow id types end) and 24 ids drawn from ``rng``, nothing elsewhere: the tensors are a real
    engine's width while the exact law stays cheap (its cost grows with the support). ``side``
    "residual": p holds the edge ids' mass that q lacks (rejections land there); "draft": q holds
    it (drafts at the edges, judged by their ratio). Drafts drawn from q."""
    from ...laws.scale import HEAD_IDS, edge_ids

    edges = edge_ids(V)
    head = rng.choice(np.setdiff1d(np.arange(V), edges), min(HEAD_IDS, V - len(edges)), replace=False)
    heavy, light = (0.7, 0.3), (0.1, 0.9)
    wp, wq = (heavy, light) if side == "residual" else (light, heavy)

    def rows(weights, count):
        out = np.zeros((count, V), np.float32)
        for r in range(count):
            out[r, edges] = weights[0] * rng.dirichlet(np.ones(len(edges)))
            out[r, head] = weights[1] * rng.dirichlet(np.ones(len(head)))
        return out

    made = []
    for b in range(instances):
        p, q = rows(wp, k + 1), rows(wq, k)
        drafts = [int(rng.choice(V, p=normalized(q[j]))) for j in range(k)]
        made.append((f"instance {b}", drafts, q, p))
    return stack_case(name, made, k)


def aimed_cases(seed_sequence: np.random.SeedSequence, vocab: int | None, ks: tuple[int, ...]) -> list[KernelCase]:
    """The user's configuration (``interfaces.Aim``): one ``sparse_engine_case`` of one instance
    per k (k = 4 when none is given) at ``vocab`` (4096 when None), sides alternating, one child
    of ``seed_sequence`` each. Measured on the reference (2 cores): V = 32000, k = 1..8 adds
    about 55 s to the standard budget's 6.5 s."""
    from ...laws.scale import SIDES

    V = vocab or 4096
    out = []
    for i, k in enumerate(ks or (4,)):
        rng = np.random.default_rng(stream(seed_sequence, i))
        if V < 64:  # too narrow for edges and a head: dense rows
            p, q = peaky_rows(rng, V, k + 1, 0.3), peaky_rows(rng, V, k, 0.3)
            drafts = [int(rng.choice(V, p=normalized(q[j]))) for j in range(k)]
            out.append(stack_case(f"aimed V{V}, k={k}", [("instance 0", drafts, q, p)], k))
        else:
            out.append(sparse_engine_case(rng, V, k, SIDES[i % 2], f"aimed V{V} {SIDES[i % 2]}, k={k}", instances=1))
    return out


__all__ = [
    "KernelCase",
    "acceptance",
    "normalized",
    "stack_case",
    "adversarial_case",
    "emission_breakpoints",
    "emission_weights",
    "aimed_cases",
    "dense_case",
    "every_draft_case",
    "generated_cases",
    "sparse_engine_case",
    "peaky_rows",
    "ragged_case",
    "rule_law",
    "tile_boundary_case",
    "wide_ids_case",
]
