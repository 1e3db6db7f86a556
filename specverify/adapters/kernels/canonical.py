"""The canonical side of the kernel adapters (the convention in ``adapters.kernels``' docstring):
validated inputs (``check_canonical_inputs`` -> ``CanonicalBatch``), a torch generator for any
rng, the uniforms or the bonus draw a generator convention needs, the output's accepted counts,
the groups of rows with equal k_b for engines without ragged rows (``by_draft_count``), and the
canonical output (``finish_canonical``). Every ``from_`` / ``to_`` pair of an engine is written
over these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

Kernel = Callable[..., tuple]


@dataclass(frozen=True)
class CanonicalBatch:
    """Validated canonical inputs as CPU-or-device torch tensors.

    ``counts`` [B] holds each row's k_b; exactly one of ``uniforms`` / ``generator`` is set.
    """

    draft_ids: torch.Tensor  # int64 [B, k]
    draft_probs: torch.Tensor  # float32 [B, k, V]
    target_probs: torch.Tensor  # float32 [B, k + 1, V]
    counts: torch.Tensor  # int64 [B]
    uniforms: torch.Tensor | None  # float32 [B, k + 1]
    generator: torch.Generator | None
    numpy_out: bool

    @property
    def shape(self) -> tuple[int, int, int]:
        """(B, k, V)."""
        return tuple(self.draft_probs.shape)


def as_tensor(x, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    raise ValueError(f"{name} must be a numpy array or a torch tensor, got {type(x).__name__}")


def expect_shape(t: torch.Tensor, name: str, shape: tuple) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {list(shape)}, got {list(t.shape)}")


def torch_generator(rng) -> torch.Generator:
    """A ``torch.Generator`` for ``rng``: itself, or one seeded from a NumPy generator's draw."""
    if isinstance(rng, torch.Generator):
        return rng
    if isinstance(rng, np.random.Generator):
        return torch.Generator().manual_seed(int(rng.integers(2**63)))
    raise ValueError(f"uniforms must be an array or a numpy/torch generator, got {type(rng).__name__}")


def check_canonical_inputs(draft_ids, draft_probs, target_probs, uniforms) -> CanonicalBatch:
    """Validate canonical kernel inputs and convert them; ``ValueError`` names the bad argument.

    Checks: ``draft_ids`` 2-D integers [B, k] whose -1 padding is a suffix of each row and whose
    other ids lie in [0, V); ``draft_probs`` [B, k, V]; ``target_probs`` [B, k + 1, V];
    ``uniforms`` [B, k + 1] in [0, 1), or a generator.
    """
    ids = as_tensor(draft_ids, "draft_ids")
    q = as_tensor(draft_probs, "draft_probs")
    p = as_tensor(target_probs, "target_probs")
    if ids.dim() != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(f"draft_ids must be a 2-D integer array [B, k], got {ids.dtype} of shape {list(ids.shape)}")
    if q.dim() != 3:
        raise ValueError(f"draft_probs must be 3-D [B, k, V], got shape {list(q.shape)}")
    batch, k = ids.shape
    vocab = q.shape[2]
    expect_shape(q, "draft_probs", (batch, k, vocab))
    expect_shape(p, "target_probs", (batch, k + 1, vocab))
    ids = ids.to(torch.int64)
    present = ids >= 0
    counts = present.sum(dim=1)
    positions = torch.arange(k, device=ids.device)
    if bool((present != (positions < counts[:, None])).any()) or bool((ids < -1).any()):
        raise ValueError("draft_ids: each row must hold its k_b drafts first, then -1 padding")
    if bool((ids >= vocab).any()):
        raise ValueError(f"draft_ids must lie in [0, V) = [0, {vocab})")
    u = gen = None
    if isinstance(uniforms, (np.ndarray, torch.Tensor)):
        u = as_tensor(uniforms, "uniforms").to(torch.float32)
        expect_shape(u, "uniforms", (batch, k + 1))
        if bool(((u < 0) | (u >= 1)).any()):
            raise ValueError("uniforms must lie in [0, 1)")
    else:
        gen = torch_generator(uniforms)
    return CanonicalBatch(
        ids, q.to(torch.float32), p.to(torch.float32), counts, u, gen, isinstance(draft_ids, np.ndarray)
    )


def require_generator(batch: CanonicalBatch, engine: str) -> torch.Generator:
    if batch.generator is None:
        raise ValueError(
            f"uniforms: {engine} draws its own randomness; pass a numpy or torch "
            "generator instead of an array of uniforms"
        )
    return batch.generator


def uniforms_of(batch: CanonicalBatch) -> torch.Tensor:
    """The batch's uniforms, drawn in [0, 1) from its generator when it has no array."""
    if batch.uniforms is not None:
        return batch.uniforms
    b, k, _ = batch.shape
    return torch.rand((b, k + 1), generator=batch.generator, dtype=torch.float32)


def draw_rows(probs: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """One index per row of ``probs`` [n, V] (``torch.multinomial``), int64 [n]."""
    if probs.shape[0] == 0:
        return torch.zeros(0, dtype=torch.int64, device=probs.device)
    return torch.multinomial(probs.double(), 1, generator=gen).squeeze(1)


def accepted_from_output(out: torch.Tensor) -> torch.Tensor:
    """Accepted drafts per row of a -1 padded output: its leading non -1 entries, minus one."""
    return (out != -1).to(torch.int64).cumprod(dim=1).sum(dim=1) - 1


def engine_output(out, name: str, shape: tuple) -> torch.Tensor:
    """An engine's output ``out`` as a tensor of ``shape``; ValueError naming the engine function
    ``name`` when it has another shape."""
    out = as_tensor(out, name)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name} returned shape {list(out.shape)}, expected {list(shape)}")
    return out.to(torch.int64)


def by_draft_count(batch: CanonicalBatch, run_group) -> tuple[torch.Tensor, torch.Tensor]:
    """Call ``run_group(rows, k_b)`` per group of rows with equal k_b; assemble canonical output.

    ``run_group`` returns (output_ids [n, k_b + 1], num_accepted [n]) for the group's rows.
    """
    b, k, _ = batch.shape
    out = torch.full((b, k + 1), -1, dtype=torch.int64, device=batch.draft_ids.device)
    acc = torch.zeros(b, dtype=torch.int64, device=batch.draft_ids.device)
    for kb in sorted(set(batch.counts.tolist())):
        rows = torch.nonzero(batch.counts == kb).squeeze(1)
        group_out, group_acc = run_group(rows, kb)
        out[rows, : kb + 1] = group_out
        acc[rows] = group_acc
    return out, acc


def finish_canonical(batch: CanonicalBatch, out: torch.Tensor, acc: torch.Tensor):
    """The canonical kernel's (output_ids, num_accepted), as NumPy arrays when its inputs were."""
    if batch.numpy_out:
        return out.cpu().numpy(), acc.cpu().numpy()
    return out, acc


def rows_by_generator(batch_size: int, generators: dict, default) -> dict:
    """Row indices grouped by generator object: {id: (generator, [rows])}."""
    groups: dict = {}
    for row in range(batch_size):
        gen = generators.get(row, default)
        groups.setdefault(id(gen), (gen, []))[1].append(row)
    return groups
