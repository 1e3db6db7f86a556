"""The reference verification kernel: chain speculative sampling for a whole batch at once.

The rule is Leviathan, Kalman, Matias 2023 (arXiv 2211.17192, Algorithm 1) and Chen et al. 2023
(arXiv 2302.01318); notation p = target, q = draft, k = drafted tokens per row.

Contract (the kernel interface; ``specverify.interfaces.kernel.battery`` judges kernels against it)::

    kernel(draft_ids, draft_probs, target_probs, uniforms) -> (output_ids, num_accepted)

- ``draft_ids``: int64 [B, k], the drafted tokens. A row with k_b < k drafts is padded with -1
  at positions k_b.. (ragged rows); -1 may appear only as a suffix.
- ``draft_probs``: float32 [B, k, V], the q rows the drafts were sampled from.
- ``target_probs``: float32 [B, k + 1, V], the p rows; row i is conditioned on drafts[:i]; for a
  ragged row, row k_b is its bonus row.
- ``uniforms``: float32 [B, k + 1] in [0, 1): column i < k is the acceptance coin of draft i;
  column k (the last, even for ragged rows) is the one uniform the emitted token is drawn from by
  inverse CDF in vocabulary order. Or a ``numpy.random.Generator`` / ``_torch().Generator``, from
  which the kernel draws ``g.random((B, k + 1), dtype=np.float32)`` / ``_torch().rand(B, k + 1,
  generator=g)``.
- Arrays are all NumPy arrays or all torch tensors (CPU or CUDA, one device); the outputs are of
  the same kind (and device).
- Probabilities must be finite and nonnegative, and every row the rule reads (q rows 0..k_b - 1,
  p rows 0..k_b) must sum to 1 within 1e-4; the padding rows of a ragged row are not read.
- Returns ``output_ids`` int64 [B, k + 1] (the accepted drafts, then the recovered or bonus
  token, then -1 padding) and ``num_accepted`` int64 [B] in 0..k_b.

The rule: accept draft x at position i iff ``u_i * q_i(x) < p_i(x)`` (that is u_i < min(1,
p_i(x) / q_i(x)) without a division; strict, so a draft with p(x) = 0 is never accepted), and only
when q_i(x) > 0: a drafted token q gives no mass to was not drawn from q, and is rejected, as
vLLM V1 and SGLang do (vLLM V0 and TensorRT-LLM accept it: p / 0 = inf). At the first rejection emit a
token from the residual max(p_i - q_i, 0) and stop; if all k_b drafts are accepted emit the bonus
from p at row k_b. A token from an unnormalized nonnegative row w and the final uniform u is the
smallest y with ``u * sum(w) < cumsum(w)[y]`` (sum(w) taken as the last cumsum entry), so a
zero-weight token is never emitted. A residual that is all zero (probability 0 unless the inputs
are adversarial) is replaced by p_i itself, as ``specverify.samplers.chain.residual`` does.
Comparisons and cumsums are computed in float64 from the inputs, so the reference is exact to
float64 on float32 inputs (``u * q`` of two float32 numbers is exact in float64).

This is ``chain.verify``'s batched form
-----------------------------------------
``reference_kernel`` on one row (B = 1) emits exactly what ``specverify.samplers.chain.verify``
emits when chain.verify's ``rng.random()`` returns the coins ``uniforms[0, :k]`` in order and its
``rng.choice(n, p=w)`` is an inverse CDF with ``uniforms[0, k]`` (up to ties of measure zero:
chain.verify divides ``u < p / q`` and normalizes the residual before the cumsum).
``tests/test_kernel_reference.py`` pins this. The batch is vectorized: no Python loop over rows.

The pieces are exported so that a mutant kernel (``specverify.mutants.kernel_mutants``) swaps exactly one
of them: ``prepare`` (validation and float64 conversion into a ``Batch``), ``accept_mask``,
``first_rejection``, ``residual_weights``, ``inverse_cdf`` and ``verify_batch`` (the rule, with
each piece a keyword parameter whose default is the reference's).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


def _torch():
    """The torch module if it is imported, else None. Tensors and torch generators imply that it
    is, so this module never imports torch itself (the NumPy path does not pay for it)."""
    return sys.modules.get("torch")


PAD = -1  # padding id in draft_ids and output_ids


# ----------------------------------------------------------------------------------------------
# Array backends: the few operations the rule needs, for NumPy and for torch (on the input device)


class _NumpyOps:
    name = "numpy"

    @staticmethod
    def take(a, idx):
        """a[..., idx] along the last axis (idx has a's leading shape)."""
        return np.take_along_axis(a, idx[..., None], axis=-1)[..., 0]

    @staticmethod
    def take_row(a, idx):
        """a[b, idx[b]] for a of shape [B, n, V] and idx of shape [B]: shape [B, V]."""
        return a[np.arange(a.shape[0]), idx]

    @staticmethod
    def arange(n, like):
        return np.arange(n)

    @staticmethod
    def where(c, a, b):
        return np.where(c, a, b)

    @staticmethod
    def maximum0(a):
        return np.maximum(a, 0.0)

    @staticmethod
    def concat(xs, axis):
        return np.concatenate(xs, axis=axis)

    @staticmethod
    def full(shape, value, like):
        return np.full(shape, value, dtype=np.int64)

    @staticmethod
    def to_int64(a):
        return np.asarray(a).astype(np.int64)

    @staticmethod
    def round_to(a, dtype: str):
        """a rounded to float16 or bfloat16 (round to nearest even) and back to float64."""
        if dtype == "float16":
            return a.astype(np.float16).astype(np.float64)
        bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)


class _TorchOps:
    name = "torch"

    @staticmethod
    def take(a, idx):
        return _torch().gather(a, -1, idx[..., None])[..., 0]

    @staticmethod
    def take_row(a, idx):
        return a[_torch().arange(a.shape[0], device=a.device), idx]

    @staticmethod
    def arange(n, like):
        return _torch().arange(n, device=like.device)

    @staticmethod
    def where(c, a, b):
        return _torch().where(c, a, b)

    @staticmethod
    def maximum0(a):
        return a.clamp(min=0.0)

    @staticmethod
    def concat(xs, axis):
        return _torch().cat(xs, dim=axis)

    @staticmethod
    def full(shape, value, like):
        return _torch().full(shape, value, dtype=_torch().int64, device=like.device)

    @staticmethod
    def to_int64(a):
        return a.to(_torch().int64)

    @staticmethod
    def round_to(a, dtype: str):
        low = _torch().float16 if dtype == "float16" else _torch().bfloat16
        return a.to(_torch().float32).to(low).to(_torch().float64)


def _is_torch(x) -> bool:
    return _torch() is not None and isinstance(x, _torch().Tensor)


# ----------------------------------------------------------------------------------------------
# Validation at the boundary


@dataclass(frozen=True)
class Batch:
    """A validated kernel call in float64: what ``verify_batch`` reads.

    ``ids`` int64 [B, k] with -1 padding; ``q`` [B, k, V], ``p`` [B, k + 1, V] and ``u``
    [B, k + 1] float64; ``lengths`` int64 [B] (k_b, the drafts before the padding); ``ops`` the
    backend (NumPy or torch, on the inputs' device).
    """

    ids: Any
    q: Any
    p: Any
    u: Any
    lengths: Any
    ops: Any

    @property
    def k(self) -> int:
        return int(self.ids.shape[1])

    @property
    def valid(self):
        """[B, k] bool: the positions that hold a draft (not padding)."""
        return self.ids >= 0

    @property
    def safe_ids(self):
        """The drafts with padding replaced by token 0, safe to gather with."""
        return self.ops.where(self.valid, self.ids, 0 * self.ids)

    @property
    def px(self):
        """[B, k] p_i(x_i) (0 at padding)."""
        return self.ops.take(self.p[:, : self.k], self.safe_ids)

    @property
    def qx(self):
        """[B, k] q_i(x_i) (of token 0 at padding)."""
        return self.ops.take(self.q, self.safe_ids)

    @property
    def coins(self):
        """[B, k] the acceptance uniforms."""
        return self.u[:, : self.k]

    @property
    def final(self):
        """[B] the uniform of the emitted token: always the last column."""
        return self.u[:, self.k]

    def replace(self, **changes) -> Batch:
        return dataclasses.replace(self, **changes)


_FLOAT_NP = (np.float16, np.float32, np.float64)


def _check_kind(name: str, x, want_torch: bool, device=None):
    if want_torch:
        if not _is_torch(x):
            raise TypeError(f"{name}: expected a torch tensor like draft_ids, got {type(x).__name__}")
        if x.device != device:
            raise ValueError(f"{name}: on device {x.device}, draft_ids is on {device}")
    elif not isinstance(x, np.ndarray):
        raise TypeError(f"{name}: expected a NumPy array like draft_ids, got {type(x).__name__}")


def _check_float(name: str, x):
    ok = x.dtype.is_floating_point if _is_torch(x) else x.dtype.type in _FLOAT_NP
    if not ok:
        raise TypeError(f"{name}: expected a floating dtype (float32), got {x.dtype}")


def _check_shape(name: str, x, shape: tuple):
    if tuple(x.shape) != shape:
        want = "[" + ", ".join(str(s) for s in shape) + "]"
        raise ValueError(f"{name}: expected shape {want}, got {list(x.shape)}")


def _check_probs(name: str, x, used, tol: float):
    """x float64 [B, n, V] finite, >= 0, and rows used[b, i] sum to 1 within tol."""
    sums = x.sum(-1)
    if not _finite_and_non_negative(x, sums):
        finite = bool((x == x).all()) and bool((abs(x) != float("inf")).all())
        if not finite:
            raise ValueError(f"{name}: contains NaN or inf")
        if bool((x < 0).any()):
            raise ValueError(f"{name}: contains negative probabilities")
    bad = (abs(sums - 1.0) > tol) & used
    if bool(bad.any()):
        b, i = (int(v) for v in (bad.nonzero() if _is_torch(bad) else np.argwhere(bad))[0])
        raise ValueError(f"{name}: row [{b}, {i}] sums to {float(x[b, i].sum()):.9g}, not 1 (tolerance {tol:g})")


def _finite_and_non_negative(x, sums) -> bool:
    """True when every entry of x is certainly finite and >= 0, from two reductions: a finite
    total of the row sums and a non-negative minimum (a NaN fails the comparison, an inf makes the
    total infinite); False means look entry by entry."""
    if (x.numel() if _is_torch(x) else x.size) == 0:
        return True
    return math.isfinite(float(sums.sum())) and float(x.min()) >= 0


def draw_uniforms(generator, batch: int, k: int, like=None):
    """The uniforms a kernel draws from a generator: float32 [batch, k + 1] in [0, 1).

    ``numpy.random.Generator``: ``g.random((batch, k + 1), dtype=np.float32)``;
    ``torch.Generator``: ``torch.rand(batch, k + 1, generator=g)`` (on the generator's device).
    Returned as the kind (and device) of ``like``.
    """
    if isinstance(generator, np.random.Generator):
        u = generator.random((batch, k + 1), dtype=np.float32)
        return _torch().from_numpy(u).to(like.device) if _is_torch(like) else u
    if _torch() is not None and isinstance(generator, _torch().Generator):
        u = _torch().rand(batch, k + 1, generator=generator, device=generator.device)
        return u.to(like.device) if _is_torch(like) else u.numpy()
    raise TypeError(f"uniforms: expected an array or a numpy/torch Generator, got {type(generator).__name__}")


def prepare(draft_ids, draft_probs, target_probs, uniforms, *, tol: float = 1e-4) -> Batch:
    """Validate a kernel call and convert it to a float64 ``Batch``.

    Raises TypeError for a wrong kind (mixed NumPy/torch) or dtype and ValueError for a wrong
    shape, device, padding that is not a suffix, ids outside [0, V), probabilities that are
    negative, non-finite or (in rows the rule reads) do not sum to 1 within ``tol``, and uniforms
    outside [0, 1). Every message names the argument.
    """
    want_torch = _is_torch(draft_ids)
    if not want_torch and not isinstance(draft_ids, np.ndarray):
        raise TypeError(f"draft_ids: expected a NumPy array or torch tensor, got {type(draft_ids).__name__}")
    device = draft_ids.device if want_torch else None
    for name, x in (("draft_probs", draft_probs), ("target_probs", target_probs)):
        _check_kind(name, x, want_torch, device)
    if want_torch:
        is_int = not draft_ids.dtype.is_floating_point and not draft_ids.dtype.is_complex
        is_int = is_int and draft_ids.dtype != _torch().bool
    else:
        is_int = np.issubdtype(draft_ids.dtype, np.integer)
    if not is_int:
        raise TypeError(f"draft_ids: expected an integer dtype (int64), got {draft_ids.dtype}")
    if draft_ids.ndim != 2 or draft_ids.shape[0] < 1:
        raise ValueError(
            f"draft_ids: expected shape [B, k] with B >= 1 (k = 0: bonus tokens only), got {list(draft_ids.shape)}"
        )
    B, k = (int(s) for s in draft_ids.shape)
    _check_float("draft_probs", draft_probs)
    _check_float("target_probs", target_probs)
    if draft_probs.ndim != 3 or draft_probs.shape[-1] < 1:
        raise ValueError(f"draft_probs: expected shape [B, k, V] = [{B}, {k}, V], got {list(draft_probs.shape)}")
    V = int(draft_probs.shape[-1])
    _check_shape("draft_probs", draft_probs, (B, k, V))
    _check_shape("target_probs", target_probs, (B, k + 1, V))

    if isinstance(uniforms, np.ndarray) or _is_torch(uniforms):
        _check_kind("uniforms", uniforms, want_torch, device)
        _check_float("uniforms", uniforms)
        _check_shape("uniforms", uniforms, (B, k + 1))
    else:
        uniforms = draw_uniforms(uniforms, B, k, like=draft_ids)

    ops = _TorchOps if want_torch else _NumpyOps
    ids = ops.to_int64(draft_ids)
    if bool((ids < PAD).any()):
        raise ValueError("draft_ids: negative ids other than the -1 padding")
    if bool((ids >= V).any()):
        raise ValueError(f"draft_ids: ids >= V = {V} (the vocabulary of draft_probs)")
    valid = ids >= 0
    lengths = valid.sum(-1)
    positions = ops.arange(k, ids)
    if bool(((positions[None, :] < lengths[:, None]) != valid).any()):
        raise ValueError("draft_ids: -1 padding must be a suffix of each row (a draft after a -1)")
    if want_torch:
        q, p, u = (x.to(_torch().float64) for x in (draft_probs, target_probs, uniforms))
    else:
        q, p, u = (np.asarray(x, dtype=np.float64) for x in (draft_probs, target_probs, uniforms))
    if not bool(((u >= 0) & (u < 1)).all()):
        raise ValueError("uniforms: every entry must lie in [0, 1)")
    _check_probs("draft_probs", q, valid, tol)
    _check_probs("target_probs", p, ops.arange(k + 1, ids)[None, :] <= lengths[:, None], tol)
    return Batch(ids=ids, q=q, p=p, u=u, lengths=lengths, ops=ops)


# ----------------------------------------------------------------------------------------------
# The pieces of the rule


def accept_mask(u, px, qx):
    """Accept iff ``q(x) > 0`` and ``u * q(x) < p(x)``: u < min(1, p(x) / q(x)) without
    dividing (strict), a token q cannot have drafted rejected.

    Leviathan et al. (arXiv 2211.17192) Algorithm 1; all three arrays share one shape.
    """
    return (qx > 0) & (u * qx < px)


def first_rejection(accept):
    """[B] the number of leading True entries of each row of ``accept`` [B, k] (the accepted
    drafts j): the position of the first rejection, or k if there is none."""
    if _is_torch(accept):
        return accept.to(_torch().int64).cumprod(-1).sum(-1)
    return np.cumprod(accept.astype(np.int64), axis=-1).sum(-1)


def residual_weights(p, q):
    """max(p - q, 0) rowwise (unnormalized), or p itself where that row is all zero.

    The residual distribution of Leviathan et al. (arXiv 2211.17192); the all-zero fallback is
    ``specverify.samplers.chain.residual``'s choice (a rejection there had probability 0).
    """
    if _is_torch(p):
        r = (p - q).clamp_(min=0.0)
        return _torch().where((r.sum(-1) > 0)[..., None], r, p)
    r = np.subtract(p, q)
    np.maximum(r, 0.0, out=r)
    empty = ~(r.sum(-1) > 0)
    if empty.any():  # a rejection of probability 0: p itself on those rows
        r[empty] = p[empty]
    return r


def inverse_cdf(weights, u):
    """[...] the smallest y with ``u * sum(w) < cumsum(w)[y]`` for each row w of ``weights``.

    ``weights`` [..., V] is nonnegative and unnormalized, with sum(w) > 0; ``u`` [...] in [0, 1).
    sum(w) is the last cumsum entry, so y < V always and a zero-weight token is never emitted.
    """
    c = weights.cumsum(-1)
    threshold = u * c[..., -1]
    return (c <= threshold[..., None]).sum(-1)


def assemble(batch: Batch, accepted, token):
    """(output_ids [B, k + 1], num_accepted [B]): drafts[:j], then ``token`` at j, then -1."""
    ops, k = batch.ops, batch.k
    positions = ops.arange(k + 1, batch.ids)[None, :]
    drafts = ops.concat([batch.ids, ops.full((batch.ids.shape[0], 1), PAD, batch.ids)], 1)
    j = ops.to_int64(accepted)[:, None]
    pad = ops.full(tuple(drafts.shape), PAD, drafts)
    out = ops.where(positions < j, drafts, ops.where(positions == j, ops.to_int64(token)[:, None], pad))
    return out, ops.to_int64(accepted)


def rows_at(batch: Batch, j):
    """(p_j, q_j) [B, V]: the target and draft rows at position j[b] of each row (q's index is
    clipped to k - 1: a row with j = k has no q row and is not rejected)."""
    ops, k = batch.ops, batch.k
    return ops.take_row(batch.p, j), ops.take_row(batch.q, ops.where(j < k, j, j * 0 + k - 1))


def verify_batch(
    batch: Batch,
    *,
    accept: Callable = None,
    first: Callable = first_rejection,
    rows: Callable = rows_at,
    residual: Callable = residual_weights,
    recover: Callable = inverse_cdf,
    bonus: Callable = inverse_cdf,
    recover_uniform: Callable = None,
):
    """The rule on a validated ``Batch``: (output_ids [B, k + 1], num_accepted [B]).

    Each keyword is one piece, defaulting to the reference's:
      accept(batch) -> [B, k] bool (default ``accept_mask(batch.coins, batch.px, batch.qx)``;
        padding positions are masked to False afterwards);
      first(accept) -> [B] accepted drafts j;
      rows(batch, j) -> (p_j, q_j), the rows the residual is built from (default ``rows_at``);
      residual(p_j, q_j) -> [B, V] weights after a rejection;
      recover(weights, u) / bonus(weights, u) -> [B] the emitted token after a rejection / after
        all k_b acceptances;
      recover_uniform(batch, j) -> [B] the uniform of the recovered token (default the last
        column, ``batch.final``).
    """
    ops = batch.ops
    if batch.k == 0:  # nothing drafted: every row emits its bonus from p at row 0
        j = ops.to_int64(batch.lengths)
        return assemble(batch, j, ops.to_int64(bonus(ops.take_row(batch.p, j), batch.final)))
    ok = (accept(batch) if accept is not None else accept_mask(batch.coins, batch.px, batch.qx)) & batch.valid
    j = ops.to_int64(first(ok))
    j = ops.where(j < batch.lengths, j, batch.lengths)
    rejected = j < batch.lengths
    p_j, q_j = rows(batch, j)
    u_rec = batch.final if recover_uniform is None else recover_uniform(batch, j)
    own = residual is residual_weights and recover is inverse_cdf and bonus is inverse_cdf
    if own and batch.p.shape[-1] >= WIDE_ROWS:
        return assemble(batch, j, _reference_tokens(batch, j, rejected, p_j, q_j, u_rec))
    recovered = recover(residual(p_j, q_j), u_rec)
    emitted = bonus(ops.take_row(batch.p, j), batch.final)
    token = ops.where(rejected, ops.to_int64(recovered), ops.to_int64(emitted))
    return assemble(batch, j, token)


def _reference_tokens(batch: Batch, j, rejected, p_j, q_j, u_rec):
    """[B] the emitted tokens of the reference's own pieces, each computed only on the rows that
    emit it: the recovered token on the rejected rows, the bonus on the others. The pieces are
    rowwise, so the tokens are those of computing both on every row and choosing (the general
    path of ``verify_batch``, which a replaced piece takes), at about half the work."""
    ops = batch.ops
    token = ops.to_int64(j * 0)
    if bool(rejected.any()):
        token[rejected] = ops.to_int64(inverse_cdf(residual_weights(p_j[rejected], q_j[rejected]), u_rec[rejected]))
    kept = ~rejected
    if bool(kept.any()):
        token[kept] = ops.to_int64(inverse_cdf(batch.p[kept, j[kept]], batch.final[kept]))
    return token


WIDE_ROWS = 64
"""From this vocabulary on, ``verify_batch`` computes each emitted token only on the rows that
emit it (``_reference_tokens``); below it, indexing the rows costs more than it saves."""


def reference_kernel(draft_ids, draft_probs, target_probs, uniforms):
    """The exact rule for a batch (see the module docstring for the contract):
    (output_ids int64 [B, k + 1], num_accepted int64 [B]), of the inputs' kind and device.

    ``chain.verify``'s batched form: Leviathan et al. arXiv 2211.17192, Chen et al. 2302.01318.
    """
    return verify_batch(prepare(draft_ids, draft_probs, target_probs, uniforms))


def reference_generator_kernel(draft_ids, draft_probs, target_probs, generator):
    """``reference_kernel`` whose fourth parameter is named ``generator``: the kernel battery
    passes such kernels a ``numpy.random.Generator`` / ``torch.Generator`` (drawn from as
    ``draw_uniforms`` says) instead of explicit uniforms."""
    return reference_kernel(draft_ids, draft_probs, target_probs, generator)


__all__ = [
    "Batch",
    "PAD",
    "accept_mask",
    "assemble",
    "draw_uniforms",
    "first_rejection",
    "inverse_cdf",
    "prepare",
    "reference_generator_kernel",
    "reference_kernel",
    "residual_weights",
    "rows_at",
    "verify_batch",
]
