"""The reference verification kernel (specverify.samplers.reference_kernel) and the kernel mutants.

(a) pinned to ``chain.verify`` row by row; (b) its exact law on a uniform grid; (c) NumPy and torch
agree; (d) generator arguments and a chi-square of the output law; (e) every kernel mutant runs,
each biased one differs from the reference somewhere, each control never does; (f) bad inputs
raise errors that name the argument.
"""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

from specverify.interfaces.kernel import battery as kernel_interface
from specverify.interfaces.kernel.tasks import uses_generator
from specverify.mutants.kernel_mutants import KERNEL_CONTROLS, KERNEL_MUTANTS
from specverify.samplers import chain
from specverify.samplers.reference_kernel import reference_generator_kernel, reference_kernel

# ----------------------------------------------------------------------------------------------
# Instances


def random_instance(
    rng,
    B: int,
    k: int,
    V: int,
    *,
    ragged: bool = True,
    sparse: bool = False,
    zero_coins: float = 0.0,
    from_q: bool = True,
):
    """(draft_ids, draft_probs, target_probs, uniforms) as NumPy arrays of the contract's dtypes.

    Drafts are sampled from their q rows (``from_q``) or uniform over V; ragged rows are padded
    with -1; ``sparse`` zeroes about a third of the probabilities; a ``zero_coins`` share of the
    uniforms is exactly 0.
    """

    def rows(shape):
        w = rng.dirichlet(np.full(V, 0.7), shape)
        if sparse:
            w = w * (rng.random(w.shape) > 0.35)
            w[..., 0] += w.sum(-1) == 0
        return (w / w.sum(-1, keepdims=True)).astype(np.float32)

    q, p = rows((B, k)), rows((B, k + 1))
    if from_q:
        c = np.cumsum(q.astype(np.float64), -1)
        r = rng.random((B, k))[..., None] * c[..., -1:]
        ids = (c <= r).sum(-1)
    else:
        ids = rng.integers(0, V, (B, k))
    lengths = rng.integers(0, k + 1, B) if ragged else np.full(B, k)
    ids = np.where(np.arange(k)[None, :] < lengths[:, None], ids, -1).astype(np.int64)
    u = rng.random((B, k + 1), dtype=np.float32)
    u[rng.random(u.shape) < zero_coins] = 0.0
    return ids, q, p, u


def as_torch(*arrays):
    torch = pytest.importorskip("torch")
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)


def to_numpy(result):
    out, n = result
    return (out.cpu().numpy(), n.cpu().numpy()) if hasattr(out, "cpu") else (out, n)


def same(a, b) -> bool:
    (oa, na), (ob, nb) = to_numpy(a), to_numpy(b)
    return np.array_equal(oa, ob) and np.array_equal(na, nb)


# ----------------------------------------------------------------------------------------------
# (a) pinned to chain.verify


class CoinRng:
    """An rng for chain.verify: ``random()`` returns the acceptance coins in order and
    ``choice(n, p=w)`` is the kernel's inverse CDF with the final uniform."""

    def __init__(self, coins, final: float):
        self.coins, self.final = [float(c) for c in coins], float(final)

    def random(self) -> float:
        return self.coins.pop(0)

    def choice(self, n: int, p) -> int:
        c = np.cumsum(np.asarray(p, dtype=np.float64))
        return int(np.argmax(self.final * c[-1] < c))


def chain_row(ids, q, p, u):
    """(output row, accepted) of chain.verify on one kernel row."""
    k = len(ids)
    kb = int((ids >= 0).sum())
    ps = [p[i].astype(np.float64) for i in range(kb + 1)]
    qs = [q[i].astype(np.float64) for i in range(kb)]
    j, token = chain.verify(ps, qs, [int(x) for x in ids[:kb]], CoinRng(u[:kb], u[k]))
    row = np.full(k + 1, -1)
    row[:j], row[j] = ids[:j], token
    return row, j


@pytest.mark.parametrize("batch", [1, 7])
def test_reference_kernel_is_chain_verify_row_by_row(batch):
    rng = np.random.default_rng(20240601 + batch)
    for _ in range(150 if batch == 1 else 60):
        V, k = int(rng.integers(2, 51)), int(rng.integers(1, 9))
        ids, q, p, u = random_instance(rng, batch, k, V, sparse=bool(rng.random() < 0.5))
        out, n = reference_kernel(ids, q, p, u)
        assert out.dtype == np.int64 and n.dtype == np.int64
        assert out.shape == (batch, k + 1) and n.shape == (batch,)
        for b in range(batch):
            row, j = chain_row(ids[b], q[b], p[b], u[b])
            assert n[b] == j and np.array_equal(out[b], row), (V, k, b)


def test_residual_all_zero_emits_from_p():
    """A rejection with p(x) = q(x) = 0 and p = q elsewhere: the residual is 0, the token is
    drawn from p (chain.residual's choice)."""
    p = np.array([[[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]], dtype=np.float32)
    q = p[:, :1].copy()
    out, n = reference_kernel(np.array([[0]]), q, p, np.array([[0.0, 0.75]], dtype=np.float32))
    assert n[0] == 0 and out[0].tolist() == [2, -1]


def test_edge_acceptances():
    """Strict u * q < p: p(x) = 0 rejected even at u = 0; q(x) = 0 < p(x) rejected (not a draw
    from q); p = q = 0 rejected."""
    q = np.array([[[0.0, 0.5, 0.5]]] * 3, dtype=np.float32)
    p = np.array([[[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]] * 3, dtype=np.float32)
    p[0, 0] = [0.5, 0.0, 0.5]  # draft 1: p(x) = 0 < q(x)
    p[1, 0] = [0.5, 0.5, 0.0]  # draft 0: q(x) = 0 < p(x)
    ids = np.array([[1], [0], [0]])  # row 2: p(0) = q(0) = 0
    out, n = reference_kernel(ids, q, p, np.zeros((3, 2), dtype=np.float32))
    assert n.tolist() == [0, 0, 0]
    assert out[1].tolist() == [0, -1]  # rejected: the residual max(p - q, 0) = [0.5, 0, 0]


# ----------------------------------------------------------------------------------------------
# (b) the exact law, V = 3, k = 2

F = Fraction
# dyadic rows: every acceptance ratio and residual CDF point is a multiple of 1/64, so the
# midpoint grid of GRID^3 uniforms gives each outcome exactly its probability
Q_ROWS = [[F(1, 2), F(1, 4), F(1, 4)], [F(1, 4), F(1, 4), F(1, 2)]]
P_ROWS = [[F(1, 4), F(3, 8), F(3, 8)], [F(3, 8), F(3, 8), F(1, 4)], [F(1, 4), F(1, 2), F(1, 4)]]
GRID = 64


def rule_law(p_rows, q_rows, drafts) -> dict[tuple, Fraction]:
    """The law of the emitted tokens (accepted drafts + one token) of Leviathan et al.'s rule
    for fixed drafts, in exact fractions."""
    law, alive = Counter(), F(1)
    for i, x in enumerate(drafts):
        p, q = p_rows[i], q_rows[i]
        a = min(F(1), p[x] / q[x]) if q[x] > 0 else F(int(p[x] > 0))
        r = [max(pi - qi, F(0)) for pi, qi in zip(p, q)]
        for y, w in enumerate(r):
            if w and a < 1:
                law[tuple(drafts[:i]) + (y,)] += alive * (1 - a) * w / sum(r)
        alive *= a
    for y, w in enumerate(p_rows[len(drafts)]):
        if w and alive:
            law[tuple(drafts) + (y,)] += alive * w
    return dict(law)


def rows_f32(rows, B):
    return np.broadcast_to(np.array(rows, dtype=np.float32), (B, len(rows), 3)).copy()


def emitted(out, n):
    return [tuple(row[: j + 1]) for row, j in zip(out.tolist(), n.tolist())]


def test_exact_law_on_a_uniform_grid():
    mid = ((np.arange(GRID) + 0.5) / GRID).astype(np.float32)
    u = np.stack(np.meshgrid(mid, mid, mid, indexing="ij"), -1).reshape(-1, 3)
    B = len(u)
    q, p = rows_f32(Q_ROWS, B), rows_f32(P_ROWS, B)
    first_token = Counter()
    for drafts in itertools.product(range(3), repeat=2):
        out, n = reference_kernel(np.tile(np.array(drafts), (B, 1)), q, p, u)
        got = {s: F(c, B) for s, c in Counter(emitted(out, n)).items()}
        assert got == rule_law(P_ROWS, Q_ROWS, list(drafts)), drafts
        weight = Q_ROWS[0][drafts[0]] * Q_ROWS[1][drafts[1]]
        for s, pr in got.items():
            first_token[s[0]] += weight * pr
    # drafts sampled from q: the first emitted token is distributed as p_0 (the rule's theorem)
    assert dict(first_token) == {y: w for y, w in enumerate(P_ROWS[0])}


# ----------------------------------------------------------------------------------------------
# (c) NumPy and torch


def test_numpy_and_torch_agree():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    for _ in range(40):
        V, k = int(rng.integers(2, 40)), int(rng.integers(1, 7))
        args = random_instance(rng, 9, k, V, sparse=True, zero_coins=0.2, from_q=bool(rng.random() < 0.5))
        a = reference_kernel(*args)
        t = reference_kernel(*as_torch(*args))
        assert isinstance(t[0], torch.Tensor) and t[0].dtype == torch.int64
        assert same(a, t)


# ----------------------------------------------------------------------------------------------
# (d) generators and the output law

ROWS_D = 200_000
FALSE_FAIL = 1e-6  # the chi-square test fails a correct kernel with probability 1e-6


def _law_instance(B):
    drafts = (0, 2)
    return (
        np.tile(np.array(drafts), (B, 1)),
        rows_f32(Q_ROWS, B),
        rows_f32(P_ROWS, B),
        rule_law(P_ROWS, Q_ROWS, list(drafts)),
    )


def _chi_square_pvalue(out, n, law) -> float:
    counts = Counter(emitted(*to_numpy((out, n))))
    assert set(counts) <= set(law), set(counts) - set(law)  # nothing outside the support
    outcomes = sorted(law)
    observed = np.array([counts[s] for s in outcomes], dtype=float)
    expected = np.array([float(law[s]) for s in outcomes]) * observed.sum()
    return chisquare(observed, expected).pvalue


def test_numpy_generator():
    ids, q, p, law = _law_instance(ROWS_D)
    out, n = reference_kernel(ids, q, p, np.random.default_rng(11))
    # the kernel draws g.random((B, k + 1), dtype=float32): the same seed, the same tokens
    u = np.random.default_rng(11).random((ROWS_D, 3), dtype=np.float32)
    assert same((out, n), reference_kernel(ids, q, p, u))
    assert same((out, n), reference_generator_kernel(ids, q, p, np.random.default_rng(11)))
    assert _chi_square_pvalue(out, n, law) > FALSE_FAIL


def test_torch_generator():
    torch = pytest.importorskip("torch")
    ids, q, p, law = _law_instance(ROWS_D)
    args = as_torch(ids, q, p)
    out, n = reference_kernel(*args, torch.Generator().manual_seed(11))
    assert isinstance(out, torch.Tensor)
    u = torch.rand(ROWS_D, 3, generator=torch.Generator().manual_seed(11))
    assert same((out, n), reference_kernel(*args, u))
    assert _chi_square_pvalue(out, n, law) > FALSE_FAIL
    # a torch generator with NumPy arrays gives NumPy outputs
    out_np, _ = reference_kernel(ids[:5], q[:5], p[:5], torch.Generator().manual_seed(1))
    assert isinstance(out_np, np.ndarray)


# ----------------------------------------------------------------------------------------------
# (e) the kernel mutants


def _mutant_probes():
    """Instances on which the biased mutants show: random small batches, u = 0 exactly (the
    measure-zero ones), V = 5000 with residual mass at the tile boundaries, wrapped ids."""
    rng = np.random.default_rng(3)
    probes = [
        random_instance(rng, 8, int(rng.integers(1, 6)), int(rng.integers(2, 12)), sparse=bool(s % 2), zero_coins=0.1)
        for s in range(30)
    ]

    def one_hot_rows(V, B, rows, hot):
        w = np.zeros((B, rows, V), dtype=np.float32)
        w[..., hot] = 1.0
        return w

    # u = 0: a p(x) = 0 draft (accepted by <=) and a p(x) = q(x) draft (rejected by 1 - u)
    p = np.array([[[0.0, 1.0], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]]], dtype=np.float32)
    q = np.array([[[1.0, 0.0]], [[0.5, 0.5]]], dtype=np.float32)
    probes.append((np.array([[0], [0]]), q, p, np.zeros((2, 2), dtype=np.float32)))
    # low precision in the ratio: p(x) = 1e-8 flushes to 0 in float16 (rejected at u = 0);
    # bfloat16 rounds p(x) = 0.3 up to 0.30078125 (accepted at u * q(x) = 0.30025)
    q = np.array([[[0.5, 0.5]], [[0.5, 0.5]]], dtype=np.float32)
    p = np.array([[[1e-8, 1.0 - 1e-8], [0.5, 0.5]], [[0.3, 0.7], [0.5, 0.5]]], dtype=np.float32)
    probes.append((np.array([[0], [0]]), q, p, np.array([[0.0, 0.5], [0.6005, 0.5]], dtype=np.float32)))
    # a drafted token with q(x) = 0 < p(x) (rejected by the reference), and an empty residual
    # (p(x) = q(x) = 0 drafted, p = q elsewhere: the reference then emits from p)
    q = np.array([[[0.0, 0.5, 0.5]], [[0.0, 0.4, 0.6]]], dtype=np.float32)
    p = np.array([[[0.5, 0.25, 0.25], [0.2, 0.3, 0.5]], [[0.0, 0.4, 0.6], [0.2, 0.3, 0.5]]], dtype=np.float32)
    probes.append((np.array([[0], [0]]), q, p, np.array([[0.3, 0.1], [0.3, 0.1]], dtype=np.float32)))
    # tile boundaries: draft 0 always rejected (p(0) = 0), residual = p with mass on both sides
    V, us = 5000, np.linspace(0.05, 0.95, 10, dtype=np.float32)
    p = np.zeros((len(us), 2, V), dtype=np.float32)
    p[:, 0, [1023, 4095]] = 0.5
    p[:, 1, 0] = 1.0
    probes.append(
        (
            np.zeros((len(us), 1), dtype=np.int64),
            one_hot_rows(V, len(us), 1, 0),
            p,
            np.stack([np.zeros_like(us), us], 1),
        )
    )
    # ids that wrap in int16 (V = 40000, id 35000) and in int8 (V = 300, id 200)
    for V, x in ((40000, 35000), (300, 200)):
        w = one_hot_rows(V, 1, 2, x)
        probes.append((np.array([[x]]), w[:, :1], w, np.array([[0.5, 0.5]], dtype=np.float32)))
    # a rejected p(x) = 0 draft whose residual is not p; k = 7 with every draft accepted (the
    # bonus row differs from row 6); the top id 70000 - 1 emitted (past 65,535)
    q = np.array([[[0.4, 0.4, 0.2, 0.0]]], dtype=np.float32)
    p = np.array([[[0.0, 0.5, 0.3, 0.2], [0.25] * 4]], dtype=np.float32)
    probes.append((np.array([[0]]), q, p, np.array([[0.5, 0.1]], dtype=np.float32)))
    p = one_hot_rows(4, 1, 8, 0)
    p[0, 7] = [0.0, 0.0, 0.0, 1.0]
    probes.append((np.zeros((1, 7), dtype=np.int64), one_hot_rows(4, 1, 7, 0), p, np.full((1, 8), 0.5, np.float32)))
    probes.append(
        (np.array([[69_999]]), *[one_hot_rows(70_000, 1, n, 69_999) for n in (1, 2)], np.full((1, 2), 0.5, np.float32))
    )
    # a residual rising over 1000 ids (its bottom half outside the top 512, read at u = 0.1); 300
    # rows of distinct draws (row 256 reads row 0's target and coins), accepted at random
    V = 1000
    q = one_hot_rows(V, 1, 1, 0)
    p = np.tile(np.arange(V, dtype=np.float64) / (V * (V - 1) / 2), (1, 2, 1)).astype(np.float32)
    probes.append((np.array([[0]]), q, p, np.array([[0.5, 0.1]], dtype=np.float32)))
    B, rng = 300, np.random.default_rng(4)
    q = np.full((B, 1, 4), 0.25, dtype=np.float32)
    p = rng.dirichlet(np.ones(4), (B, 2)).astype(np.float32)
    probes.append((rng.integers(0, 4, (B, 1)), q, p, rng.random((B, 2), dtype=np.float32)))
    return probes


PROBES = _mutant_probes()


@pytest.mark.parametrize("mutant", KERNEL_MUTANTS, ids=lambda m: m.id)
def test_kernel_mutant_runs_and_differs(mutant):
    assert mutant.interface == "kernel" and mutant.id.startswith("kernel/")
    ids, q, p, u = PROBES[0]
    out, n = mutant.fn(ids, q, p, u)
    if mutant.effect != "contract":
        assert out.shape == (ids.shape[0], ids.shape[1] + 1) and n.shape == (ids.shape[0],)
        assert out.dtype == np.int64 and n.dtype == np.int64
    # the torch path computes the same thing
    assert same(mutant.fn(*PROBES[1]), mutant.fn(*as_torch(*PROBES[1])))
    assert mutant.effect in ("biased", "contract", "edge")
    assert any(not same(mutant.fn(*args), reference_kernel(*args)) for args in PROBES), mutant.id


def test_kernel_catalogue_shape():
    ids = [m.id for m in KERNEL_MUTANTS + KERNEL_CONTROLS]
    assert len(set(ids)) == len(ids)
    assert len(KERNEL_MUTANTS) >= 14 and len(KERNEL_CONTROLS) >= 3
    assert all(m.effect == "exact" for m in KERNEL_CONTROLS)
    assert all(
        "measure-zero" in m.description
        for m in KERNEL_MUTANTS
        if m.id in ("kernel/accept-less-equal", "kernel/uniform-one-minus")
    )


ARRAY_CONTROLS = [m for m in KERNEL_CONTROLS if not uses_generator(m.fn)]
GENERATOR_CONTROLS = [m for m in KERNEL_CONTROLS if uses_generator(m.fn)]


@pytest.mark.parametrize("control", GENERATOR_CONTROLS, ids=lambda m: m.id)
def test_generator_control_is_judged_exact(control):
    """Its own generator, so no row-by-row comparison: the kernel battery's chi-square judges it
    (quick budget: false-fail rate 1e-6 for the whole run, fixed seed)."""
    assert kernel_interface.run(control.fn, "quick", 0).exact is True


@pytest.mark.parametrize("control", ARRAY_CONTROLS, ids=lambda m: m.id)
def test_kernel_control_equals_reference(control):
    rng = np.random.default_rng(5)
    rows = 0
    while rows < 1000:
        V, k = int(rng.integers(2, 30)), int(rng.integers(1, 7))
        args = random_instance(rng, 50, k, V, sparse=True, zero_coins=0.1, from_q=bool(rng.random() < 0.7))
        assert same(control.fn(*args), reference_kernel(*args))
        rows += 50
    # generators too
    assert same(control.fn(*args[:3], np.random.default_rng(2)), reference_kernel(*args[:3], np.random.default_rng(2)))


# ----------------------------------------------------------------------------------------------
# (f) bad inputs


def _good():
    ids = np.array([[1, 0, -1], [2, -1, -1]])
    q = np.full((2, 3, 4), 0.25, dtype=np.float32)
    p = np.full((2, 4, 4), 0.25, dtype=np.float32)
    return ids, q, p, np.full((2, 4), 0.5, dtype=np.float32)


def _with(index, value):
    args = list(_good())
    args[index] = value(args[index]) if callable(value) else value
    return args


def _set(a, where, v):
    a = a.copy()
    a[where] = v
    return a


BAD = [
    ("draft_ids", TypeError, _with(0, lambda a: a.astype(np.float32))),
    ("draft_ids", TypeError, _with(0, [[1, 0, -1], [2, -1, -1]])),
    ("draft_ids", ValueError, _with(0, lambda a: a[0])),
    ("draft_ids", ValueError, _with(0, lambda a: _set(a, (0, 0), -1))),  # -1 before a draft
    ("draft_ids", ValueError, _with(0, lambda a: _set(a, (0, 0), 4))),  # id >= V
    ("draft_ids", ValueError, _with(0, lambda a: _set(a, (0, 0), -2))),
    ("draft_probs", ValueError, _with(1, lambda a: a[:, :2])),
    ("draft_probs", ValueError, _with(1, lambda a: _set(a, (0, 0, 0), -0.1))),
    ("draft_probs", ValueError, _with(1, lambda a: _set(a, (0, 1, 0), 0.5))),  # sum 1.25
    ("target_probs", ValueError, _with(2, lambda a: a[:, :3])),
    ("target_probs", TypeError, _with(2, lambda a: a.astype(np.int64))),
    ("target_probs", ValueError, _with(2, lambda a: _set(a, (1, 3, 0), np.nan))),
    ("target_probs", ValueError, _with(2, lambda a: _set(a, (1, 1, 2), 0.3))),  # bonus row
    ("uniforms", ValueError, _with(3, lambda a: _set(a, (0, 0), 1.0))),
    ("uniforms", ValueError, _with(3, lambda a: _set(a, (1, 3), -0.25))),
    ("uniforms", ValueError, _with(3, lambda a: a[:, :3])),
    ("uniforms", TypeError, _with(3, lambda a: a.astype(np.int32))),
    ("uniforms", TypeError, _with(3, [[0.5] * 4] * 2)),
]


@pytest.mark.parametrize("name,error,args", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_inputs_name_the_argument(name, error, args):
    with pytest.raises(error, match=f"^{name}:"):
        reference_kernel(*args)


def test_good_inputs_and_unread_padding_rows_pass():
    ids, q, p, u = _good()
    q[1, 1:] = 0.0  # padding rows of a ragged row are not read and need not be distributions
    p[1, 2:] = 7.0
    out, n = reference_kernel(ids, q, p, u)
    assert out.shape == (2, 4)


def test_mixed_kinds_and_devices_are_refused():
    torch = pytest.importorskip("torch")
    ids, q, p, u = _good()
    with pytest.raises(TypeError, match="^draft_probs:"):
        reference_kernel(*as_torch(ids), q, *as_torch(p, u))
    with pytest.raises(TypeError, match="^uniforms:"):
        reference_kernel(*as_torch(ids, q, p), u)
    with pytest.raises(TypeError, match="^target_probs:"):
        reference_kernel(ids, q, torch.from_numpy(p), u)
