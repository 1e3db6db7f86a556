"""A kernel call validated at the boundary: ``prepare`` turns the kernel interface's arrays into a
float64 ``Batch`` (what ``reference_kernel.verify_batch`` reads), with the array backend the rule
computes with (NumPy, or torch on the inputs' device), and ``draw_uniforms`` draws a kernel's
uniforms from a generator.

Contract: ``prepare`` raises TypeError for a wrong kind (mixed NumPy/torch) or dtype and
ValueError for a wrong shape, device, padding that is not a suffix, ids outside [0, V),
probabilities that are negative, non-finite or (in rows the rule reads) do not sum to 1 within
``tol``, and uniforms outside [0, 1), every message naming the argument; the shapes and the
padding (``PAD``) are those of ``specverify.samplers.reference_kernel``'s module docstring. This
module never imports torch itself: tensors and torch generators imply that it is imported.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np


def torch_module():
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
        return torch_module().gather(a, -1, idx[..., None])[..., 0]

    @staticmethod
    def take_row(a, idx):
        return a[torch_module().arange(a.shape[0], device=a.device), idx]

    @staticmethod
    def arange(n, like):
        return torch_module().arange(n, device=like.device)

    @staticmethod
    def where(c, a, b):
        return torch_module().where(c, a, b)

    @staticmethod
    def maximum0(a):
        return a.clamp(min=0.0)

    @staticmethod
    def concat(xs, axis):
        return torch_module().cat(xs, dim=axis)

    @staticmethod
    def full(shape, value, like):
        return torch_module().full(shape, value, dtype=torch_module().int64, device=like.device)

    @staticmethod
    def to_int64(a):
        return a.to(torch_module().int64)

    @staticmethod
    def round_to(a, dtype: str):
        low = torch_module().float16 if dtype == "float16" else torch_module().bfloat16
        return a.to(torch_module().float32).to(low).to(torch_module().float64)


def is_torch(x) -> bool:
    return torch_module() is not None and isinstance(x, torch_module().Tensor)


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
        if not is_torch(x):
            raise TypeError(f"{name}: expected a torch tensor like draft_ids, got {type(x).__name__}")
        if x.device != device:
            raise ValueError(f"{name}: on device {x.device}, draft_ids is on {device}")
    elif not isinstance(x, np.ndarray):
        raise TypeError(f"{name}: expected a NumPy array like draft_ids, got {type(x).__name__}")


def _check_float(name: str, x):
    ok = x.dtype.is_floating_point if is_torch(x) else x.dtype.type in _FLOAT_NP
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
        b, i = (int(v) for v in (bad.nonzero() if is_torch(bad) else np.argwhere(bad))[0])
        raise ValueError(f"{name}: row [{b}, {i}] sums to {float(x[b, i].sum()):.9g}, not 1 (tolerance {tol:g})")


def _finite_and_non_negative(x, sums) -> bool:
    """True when every entry of x is certainly finite and >= 0, from two reductions: a finite
    total of the row sums and a non-negative minimum (a NaN fails the comparison, an inf makes the
    total infinite); False means look entry by entry."""
    if (x.numel() if is_torch(x) else x.size) == 0:
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
        return torch_module().from_numpy(u).to(like.device) if is_torch(like) else u
    if torch_module() is not None and isinstance(generator, torch_module().Generator):
        u = torch_module().rand(batch, k + 1, generator=generator, device=generator.device)
        return u.to(like.device) if is_torch(like) else u.numpy()
    raise TypeError(f"uniforms: expected an array or a numpy/torch Generator, got {type(generator).__name__}")


def prepare(draft_ids, draft_probs, target_probs, uniforms, *, tol: float = 1e-4) -> Batch:
    """Validate a kernel call and convert it to a float64 ``Batch``.

    Raises TypeError for a wrong kind (mixed NumPy/torch) or dtype and ValueError for a wrong
    shape, device, padding that is not a suffix, ids outside [0, V), probabilities that are
    negative, non-finite or (in rows the rule reads) do not sum to 1 within ``tol``, and uniforms
    outside [0, 1). Every message names the argument.
    """
    want_torch = is_torch(draft_ids)
    if not want_torch and not isinstance(draft_ids, np.ndarray):
        raise TypeError(f"draft_ids: expected a NumPy array or torch tensor, got {type(draft_ids).__name__}")
    device = draft_ids.device if want_torch else None
    for name, x in (("draft_probs", draft_probs), ("target_probs", target_probs)):
        _check_kind(name, x, want_torch, device)
    if want_torch:
        is_int = not draft_ids.dtype.is_floating_point and not draft_ids.dtype.is_complex
        is_int = is_int and draft_ids.dtype != torch_module().bool
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

    if isinstance(uniforms, np.ndarray) or is_torch(uniforms):
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
        q, p, u = (x.to(torch_module().float64) for x in (draft_probs, target_probs, uniforms))
    else:
        q, p, u = (np.asarray(x, dtype=np.float64) for x in (draft_probs, target_probs, uniforms))
    if not bool(((u >= 0) & (u < 1)).all()):
        raise ValueError("uniforms: every entry must lie in [0, 1)")
    _check_probs("draft_probs", q, valid, tol)
    _check_probs("target_probs", p, ops.arange(k + 1, ids)[None, :] <= lengths[:, None], tol)
    return Batch(ids=ids, q=q, p=p, u=u, lengths=lengths, ops=ops)


__all__ = ["PAD", "Batch", "draw_uniforms", "is_torch", "prepare", "torch_module"]
