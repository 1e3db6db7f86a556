"""Kernel subjects for tests/test_kernel_interface.py: a per-row loop of the token-wise rule
(written independently of specverify.samplers.reference_kernel, so the battery is not judged by itself)
and a few broken kernels. Importable as TARGET strings: tests/kernel_subjects.py:NAME."""

from __future__ import annotations

import numpy as np


def _emit(w: np.ndarray, u: float) -> int:
    c = np.cumsum(w)
    return min(int(np.searchsorted(c, u * c[-1], side="right")), len(c) - 1)


def _rows(draft_ids, draft_probs, target_probs, uniforms, accept, residual):
    B, k = draft_ids.shape
    out = np.full((B, k + 1), -1, np.int64)
    nacc = np.zeros(B, np.int64)
    for b in range(B):
        kb = int((draft_ids[b] >= 0).sum())
        j = 0
        while j < kb and accept(
            float(uniforms[b, j]), float(draft_probs[b, j, draft_ids[b, j]]), float(target_probs[b, j, draft_ids[b, j]])
        ):
            out[b, j] = draft_ids[b, j]
            j += 1
        p = target_probs[b, j].astype(np.float64)
        w = residual(p, draft_probs[b, j].astype(np.float64)) if j < kb else p
        out[b, j], nacc[b] = _emit(w if w.sum() > 0 else p, float(uniforms[b, k])), j
    return out, nacc


def strict(u, q, p):
    return q > 0 and u * q < p


def clipped(p, q):
    return np.maximum(p - q, 0.0)


def loop_kernel(draft_ids, draft_probs, target_probs, uniforms):
    """The rule, one row at a time: accept iff q(x) > 0 and u q(x) < p(x)."""
    return _rows(draft_ids, draft_probs, target_probs, uniforms, strict, clipped)


def non_strict(draft_ids, draft_probs, target_probs, uniforms):
    """u <= p / q: a p(x) = 0 draft accepted when u = 0 (measure zero on the float32 grid)."""
    return _rows(draft_ids, draft_probs, target_probs, uniforms, lambda u, q, p: q > 0 and u <= p / q, clipped)


def q_zero_accepted(draft_ids, draft_probs, target_probs, uniforms):
    """p / 0 = inf: a drafted token with q(x) = 0 accepted."""
    return _rows(draft_ids, draft_probs, target_probs, uniforms, lambda u, q, p: u * q < p, clipped)


def float16_ratio(draft_ids, draft_probs, target_probs, uniforms):
    """Probabilities rounded to float16 before the rule."""
    half = lambda a: a.astype(np.float16).astype(np.float32)  # noqa: E731
    return loop_kernel(draft_ids, half(draft_probs), half(target_probs), uniforms)


def resample_from_p(draft_ids, draft_probs, target_probs, uniforms):
    """On rejection, emit from p instead of the residual (handout §5)."""
    return _rows(draft_ids, draft_probs, target_probs, uniforms, strict, lambda p, q: p)


def generator_kernel(draft_ids, draft_probs, target_probs, generator):
    """The rule drawing its own uniforms from a numpy Generator."""
    u = generator.random((draft_ids.shape[0], draft_ids.shape[1] + 1), dtype=np.float32)
    return loop_kernel(draft_ids, draft_probs, target_probs, u)


def generator_resample_from_p(draft_ids, draft_probs, target_probs, generator):
    u = generator.random((draft_ids.shape[0], draft_ids.shape[1] + 1), dtype=np.float32)
    return resample_from_p(draft_ids, draft_probs, target_probs, u)


def wrong_shape(draft_ids, draft_probs, target_probs, uniforms):
    out, nacc = loop_kernel(draft_ids, draft_probs, target_probs, uniforms)
    return out[:, :-1], nacc


def writes_inputs(draft_ids, draft_probs, target_probs, uniforms):
    result = loop_kernel(draft_ids, draft_probs, target_probs, uniforms)
    target_probs[0, 0, 0] = 0.5
    return result


def ignores_uniforms(draft_ids, draft_probs, target_probs, uniforms):
    """Draws from the global NumPy RNG instead of its uniforms (exact in law)."""
    return loop_kernel(draft_ids, draft_probs, target_probs, np.random.random(uniforms.shape).astype(np.float32))


def reversed_final_uniform(draft_ids, draft_probs, target_probs, uniforms):
    """Reads the final uniform as 1 - u (tokens in another order along u; the law is the same)."""
    u = uniforms.copy()
    u[:, -1] = np.nextafter(np.float32(1), np.float32(0)) - u[:, -1]
    return loop_kernel(draft_ids, draft_probs, target_probs, u)


def torch_only(draft_ids, draft_probs, target_probs, uniforms):
    """Fails on NumPy input (uses a tensor method), works on torch tensors."""
    out, nacc = loop_kernel(draft_ids.numpy(), draft_probs.numpy(), target_probs.numpy(), uniforms.numpy())
    import torch

    return torch.from_numpy(out), torch.from_numpy(nacc)


def tile_32_wrong_target(draft_ids, draft_probs, target_probs, uniforms):
    """Rows past a batch tile of 32 read the target rows of row b - 32 (exact at B <= 32)."""
    rows = np.arange(draft_ids.shape[0])
    return loop_kernel(draft_ids, draft_probs, target_probs[np.where(rows >= 32, rows - 32, rows)], uniforms)


def generator_one_row(draft_ids, draft_probs, target_probs, generator):
    """The rule drawing ONE row of uniforms from its generator for the whole batch: each row's
    law is the rule's, the rows are not independent."""
    u = generator.random((1, draft_ids.shape[1] + 1), dtype=np.float32)
    return loop_kernel(draft_ids, draft_probs, target_probs, np.repeat(u, draft_ids.shape[0], axis=0))


def tile_256_wrong_target_at_long_drafts(draft_ids, draft_probs, target_probs, uniforms):
    """The reference kernel, but with k >= 7 drafts rows past a batch tile of 256 read row b - 256's
    target rows: wrong only where a batch of more than 256 rows meets long drafts (exact at every
    k in batches of 256 rows or fewer, and at k <= 6 in any batch)."""
    from specverify.samplers.reference_kernel import reference_kernel

    B, k = draft_ids.shape
    if k >= 7 and B > 256:
        rows = np.arange(B)
        target_probs = target_probs[np.where(rows >= 256, rows - 256, rows)]
    return reference_kernel(draft_ids, draft_probs, target_probs, uniforms)


def generator_first_65536_ids(draft_ids, draft_probs, target_probs, generator):
    """The rule drawing its own uniforms over a vocabulary tile that ends at id 65,535: past
    V = 65,536 the ids above it get no target mass (a draft there is rejected, the emitted token
    comes from the first 65,536 ids). Exact at every V <= 65,536."""
    u = generator.random((draft_ids.shape[0], draft_ids.shape[1] + 1), dtype=np.float32)
    if target_probs.shape[-1] > 65_536:
        target_probs = target_probs.copy()
        target_probs[..., 65_536:] = 0.0
    return loop_kernel(draft_ids, draft_probs, target_probs, u)
