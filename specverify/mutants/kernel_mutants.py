"""Kernel mutants: batched verification kernels that each differ from the reference in one defect.

Every entry has the kernel signature ``fn(draft_ids, draft_probs, target_probs, uniforms) ->
(output_ids, num_accepted)`` (the contract in ``specverify.samplers.reference_kernel``) and reads as
"``reference_kernel`` but X": it validates its inputs with ``prepare`` and runs ``verify_batch``
with one piece swapped (a hook) or one input transformed, so it is a few lines from the
reference. ``interface="kernel"``: the kernel battery (``specverify.interfaces.kernel.battery``) judges
them, not the round detectors.

Effects (as in ``specverify.mutants.catalogue``): ``biased`` (the law of the batch's output
differs from the rule's, some only at V > 1024, past 65,535 ids, at one k or past a batch tile
of 256: the battery's sweeps; a kernel whose rows are not independent is caught by its
batch-order check, its batch rows or its pairwise test), ``edge`` (exact in law, wrong where
the law puts no weight: a float32 grid point of the uniforms such as u = 0, a drafted token with
q(x) = 0, an empty residual), ``contract`` (malformed output) and ``exact``
(``KERNEL_CONTROLS``: look different, are exact, must never be flagged).

References: the handout's bug table ("handout §5"), arXiv ids, and public engine threads
``owner/repo#N`` read for this module (vllm-project/vllm#46533: placeholder -1 drafts could be
accepted by the rejection kernels; vllm-project/vllm-ascend#16370: the acceptance draw reused for
the residual's categorical draw). ``None`` where no public report was verified.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..samplers.kernel_batch import PAD, draw_uniforms, prepare
from ..samplers.reference_kernel import (
    accept_mask,
    assemble,
    first_rejection,
    inverse_cdf,
    reference_kernel,
    residual_weights,
    rows_at,
    verify_batch,
)
from .catalogue import Mutant

TILE_WIDTHS = (1024, 4096)  # kernel/residual-tile-off-by-one-*: the vocabulary tile of the scan
TARGET_TEMPERATURE = 0.7  # kernel/temperature-target-only
CHUNK_ROWS = 3  # kernel/chunks-of-3 (control)
BATCH_TILE = 256  # kernel/batch-tile-*: the rows of a batch a kernel's program handles at once
TOP_IDS = 512  # kernel/residual-top-512: the ids a truncated residual keeps
BUGGY_K = 7  # kernel/bonus-row-off-by-one-at-k7: the one draft length with the bug


def _kernel(transform: Callable | None = None, **hooks) -> Callable:
    """A kernel: ``prepare``, then ``transform(batch)`` (default none), then ``verify_batch``
    with ``hooks`` (each one of verify_batch's keyword pieces)."""

    def kernel(draft_ids, draft_probs, target_probs, uniforms):
        batch = prepare(draft_ids, draft_probs, target_probs, uniforms)
        return verify_batch(batch if transform is None else transform(batch), **hooks)

    return kernel


def _copy(x):
    return x.clone() if hasattr(x, "clone") else x.copy()


# ----------------------------------------------------------------------------------------------
# The acceptance test


def _low_precision_ratio(dtype: str) -> Callable:
    """p(x) and q(x) rounded to float16 / bfloat16 before the comparison."""

    def accept(b):
        return accept_mask(b.coins, b.ops.round_to(b.px, dtype), b.ops.round_to(b.qx, dtype))

    return _kernel(accept=accept)


accept_less_equal = _kernel(accept=lambda b: b.coins * b.qx <= b.px)
uniform_one_minus = _kernel(accept=lambda b: (1.0 - b.coins) * b.qx < b.px)
greedy_argmax_check = _kernel(accept=lambda b: b.safe_ids == b.p[:, : b.k].argmax(-1))
continue_after_reject = _kernel(first=lambda accept: accept.sum(-1))


def _wrapped_ids(bits: int) -> Callable:
    """Drafts read through an int``bits`` register: the gather index wraps (negative indices
    read from the vocabulary's end); the output still copies the int64 ids."""

    def accept(b):
        half = 1 << (bits - 1)
        V = b.q.shape[-1]
        idx = ((b.safe_ids + half) % (2 * half) - half) % V
        return accept_mask(b.coins, b.ops.take(b.p[:, : b.k], idx), b.ops.take(b.q, idx))

    return _kernel(accept=accept)


# ----------------------------------------------------------------------------------------------
# The inputs a row reads


def _shared_uniforms(b):
    return b.replace(u=b.u[:1] + 0 * b.u)


def _previous_row_q(b):
    return b.replace(q=b.ops.concat([b.q[-1:], b.q[:-1]], 0))


def _padding_as_token(b):
    V, k = b.q.shape[-1], b.k
    return b.replace(ids=b.ops.where(b.valid, b.ids, 0 * b.ids + V - 1), lengths=0 * b.lengths + k)


def _bonus_from_last_row(b):
    """Row k_b (the bonus row of a ragged row) replaced by row k."""
    ops, k = b.ops, b.k
    positions = ops.arange(k + 1, b.ids)[None, :] + 0 * b.lengths[:, None]  # [B, k + 1]
    rows = ops.where(positions == b.lengths[:, None], 0 * positions + k, positions)
    batch_index = ops.arange(b.p.shape[0], b.ids)[:, None]
    return b.replace(p=b.p[batch_index, rows])


def _tile_source(b):
    """[B] the row each batch row reads past the first tile: row r - BATCH_TILE for r >= it."""
    rows = b.ops.arange(b.p.shape[0], b.ids)
    return b.ops.where(rows >= BATCH_TILE, rows - BATCH_TILE, rows)


def _target_from_previous_tile(b):
    return b.replace(p=b.p[_tile_source(b)])


def _coins_from_previous_tile(b):
    return b.replace(u=b.ops.concat([b.u[_tile_source(b)][:, : b.k], b.u[:, b.k :]], 1))


def _bonus_row_early_at_k7(b):
    """At k = BUGGY_K only: row k_b - 1 read as the bonus row (a row with all its drafts
    accepted emits from p_{k_b - 1} instead of p_{k_b})."""
    if b.k != BUGGY_K:
        return b
    ops = b.ops
    positions = ops.arange(b.k + 1, b.ids)[None, :] + 0 * b.lengths[:, None]
    early = (positions == b.lengths[:, None]) & (positions > 0)
    rows = ops.where(early, positions - 1, positions)
    return b.replace(p=b.p[ops.arange(b.p.shape[0], b.ids)[:, None], rows])


def _temper_target(b):
    tempered = b.p ** (1.0 / TARGET_TEMPERATURE)
    total = tempered.sum(-1)[..., None]
    return b.replace(p=b.ops.where(total > 0, tempered / (total + (total == 0)), b.p))


# ----------------------------------------------------------------------------------------------
# The emitted token


def _tile_off_by_one(tile: int) -> Callable:
    """The scan's tile t >= 1 loads its first entry from one position early: the token at each
    tile boundary gets its left neighbour's mass."""

    def recover(w, u):
        shifted = _copy(w)
        n = shifted[..., tile::tile].shape[-1]
        shifted[..., tile::tile] = w[..., tile - 1 :: tile][..., :n]
        return inverse_cdf(shifted, u)

    return _kernel(recover=recover)


def _unnormalized_recover(w, u):
    """smallest y with u < cumsum(w)[y] (u not scaled by sum(w)); the rest falls to V - 1."""
    c = w.cumsum(-1)
    y = (c <= u[..., None]).sum(-1)
    return y.clip(0, w.shape[-1] - 1)


def _next_position_rows(b, j):
    ops = b.ops
    _, q_j = rows_at(b, j)
    return ops.take_row(b.p, ops.where(j < b.k, j + 1, j)), q_j


def _residual_over_top_ids(p, q):
    """max(p - q, 0) over p's TOP_IDS largest ids only, zero elsewhere (a truncation fast path;
    p over those ids when that is empty)."""
    V = p.shape[-1]
    if V <= TOP_IDS:
        return residual_weights(p, q)
    if hasattr(p, "topk"):
        kth = p.topk(TOP_IDS, dim=-1).values[..., -1:]
    else:
        kth = np.partition(p, V - TOP_IDS, axis=-1)[..., V - TOP_IDS : V - TOP_IDS + 1]
    keep = p >= kth
    return residual_weights(p * keep, q * keep)


def _p_when_draft_has_none(b, j):
    """(p_j, q_j), with q_j zeroed for a row whose rejected draft x has p(x) = 0 (the residual
    max(p - 0, 0) is then p itself)."""
    ops = b.ops
    p_j, q_j = rows_at(b, j)
    at = ops.where(j < b.k, j, j * 0 + b.k - 1)
    x = ops.take(b.safe_ids, at)
    none = (ops.take(p_j, x) <= 0)[:, None]
    return p_j, ops.where(none, 0 * q_j, q_j)


def _uint16_ids(w, u):
    return inverse_cdf(w, u) & 0xFFFF


residual_unnormalized = _kernel(recover=_unnormalized_recover)
residual_next_position = _kernel(rows=_next_position_rows)
uniform_reused_for_residual = _kernel(
    recover_uniform=lambda b, j: b.ops.take(b.coins, b.ops.where(j < b.k, j, j * 0 + b.k - 1))
)
recover_argmax = _kernel(recover=lambda w, u: w.argmax(-1))


def pad_with_zero(draft_ids, draft_probs, target_probs, uniforms):
    """The reference, padding output_ids with token 0 instead of -1."""
    out, n = reference_kernel(draft_ids, draft_probs, target_probs, uniforms)
    return out * (out != PAD), n


# ----------------------------------------------------------------------------------------------
# Controls


def reference_renamed(draft_ids, draft_probs, target_probs, uniforms):
    """The reference kernel under another name."""
    return reference_kernel(draft_ids, draft_probs, target_probs, uniforms)


def _division_accept(b):
    """u < min(1, p(x) / q(x)) by float64 division, where q(x) > 0 (as the reference).

    Since u < 1, u < min(1, r) iff u < r, NaN included. Equal to u * q < p on float32 inputs:
    u * q is exact in float64, and p - u * q, if not 0, is too large for p / q to round onto u.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = b.px / b.qx
    return (b.qx > 0) & (b.coins < ratio)


ratio_division = _kernel(accept=_division_accept)


def chunked(draft_ids, draft_probs, target_probs, uniforms):
    """The reference run on chunks of CHUNK_ROWS rows (uniforms drawn first for the batch)."""
    is_array = hasattr(uniforms, "shape")
    if not is_array:
        uniforms = draw_uniforms(uniforms, int(draft_ids.shape[0]), int(draft_ids.shape[1]), like=draft_ids)
    parts = [
        reference_kernel(
            draft_ids[s : s + CHUNK_ROWS],
            draft_probs[s : s + CHUNK_ROWS],
            target_probs[s : s + CHUNK_ROWS],
            uniforms[s : s + CHUNK_ROWS],
        )
        for s in range(0, int(draft_ids.shape[0]), CHUNK_ROWS)
    ]
    if hasattr(draft_ids, "clone"):
        import torch

        return torch.cat([o for o, _ in parts]), torch.cat([n for _, n in parts])
    return np.concatenate([o for o, _ in parts]), np.concatenate([n for _, n in parts])


# ----------------------------------------------------------------------------------------------
# The catalogue


def _degenerate_residual(fallback: str) -> Callable:
    """max(p - q, 0), with an all-zero row replaced by a point mass on token 0 or V - 1, or by
    the uniform over V (vLLM V0's finfo.tiny clamp normalizes to it), instead of p itself."""

    def residual(p, q):
        r = p - q
        r = r * (r > 0)
        empty = (r.sum(-1) <= 0)[..., None]
        fill = 0 * p
        if fallback == "token-0":
            fill[..., 0] = 1.0
        elif fallback == "last-id":
            fill[..., -1] = 1.0
        else:
            fill = fill + 1.0
        return r + empty * fill

    return _kernel(residual=residual)


def num_accepted_counts_bonus(draft_ids, draft_probs, target_probs, uniforms):
    """The reference, reporting num_accepted + 1 (the emitted token counted as accepted)."""
    out, n = reference_kernel(draft_ids, draft_probs, target_probs, uniforms)
    return out, n + 1


def exponential_race(draft_ids, draft_probs, target_probs, generator):
    """Coins from ``generator``; the emitted token argmax(w / E) with ONE row E of Exp(1) noise
    per request, shared by its k + 1 positions (vLLM V1 rejection_sampler.py, 0.8.5, draws one
    exponential row per request): P(argmax_y w_y / E_y = y) = w_y / sum(w), and only one
    position's token is emitted per request, so sharing E is exact. The race is run once per
    request, on the row it emits from (``raced_tokens``)."""
    B, k = int(draft_ids.shape[0]), int(draft_ids.shape[1])
    V = int(draft_probs.shape[-1])
    batch = prepare(draft_ids, draft_probs, target_probs, draw_uniforms(generator, B, k, like=draft_ids))
    if hasattr(draft_ids, "clone"):
        import torch

        noise = torch.empty((B, V), dtype=torch.float64, device=draft_ids.device).exponential_(generator=generator)
    else:
        noise = generator.standard_exponential((B, V))
    j = first_rejection(accept_mask(batch.coins, batch.px, batch.qx) & batch.valid)
    j = batch.ops.where(j < batch.lengths, j, batch.lengths)
    return assemble(batch, j, raced_tokens(batch, j, noise))


def raced_tokens(batch, j, noise):
    """[B] each row's emitted token, argmax(w / noise) over the one row w it emits from: the
    residual max(p_j - q_j, 0) where draft j was rejected (j < k_b), p at row k_b where all were
    accepted. The residual is built on the rejected rows alone and the race run once per row:
    the same tokens as racing both rows on every row and choosing (``verify_batch``'s general
    path), without the work on the rows that do not emit them."""
    w = batch.ops.take_row(batch.p, j)  # a fresh array (advanced indexing): written below
    rejected = j < batch.lengths
    if bool(rejected.any()):
        w[rejected] = residual_weights(w[rejected], batch.q[rejected, j[rejected]])
    w /= noise
    return w.argmax(-1)


_H, _R, _S = "handout", "real-world", "specverify"
_RULE = "arXiv 2211.17192; arXiv 2302.01318"


def _m(id: str, description: str, effect: str, fn: Callable, reference=None, source=_S):
    return Mutant(f"kernel/{id}", description, effect, fn, reference, source, interface="kernel")


KERNEL_MUTANTS: tuple[Mutant, ...] = tuple(
    [_m(f"residual-tile-off-by-one-{t}", f"residual cumsum scanned in tiles of {t}: the token "
        f"at each tile boundary gets its left neighbour's mass (visible only at V > {t})",
        "biased", _tile_off_by_one(t)) for t in TILE_WIDTHS]
    + [
        _m("ratio-float16", "p(x) and q(x) rounded to float16 in the acceptance test (tiny "
           "bias; p(x) < 3e-8 flushes to 0)", "biased", _low_precision_ratio("float16")),
        _m("ratio-bfloat16", "p(x) and q(x) rounded to bfloat16 in the acceptance test (8-bit "
           "mantissa)", "biased", _low_precision_ratio("bfloat16")),
        _m("accept-less-equal", "accept iff u * q(x) <= p(x): measure-zero, visible only on "
           "the uniforms' float32 grid (u = 0 accepts a draft with p(x) = 0)", "edge",
           accept_less_equal, _RULE),
        _m("uniform-one-minus", "coin flipped to 1 - u as for a (0, 1] uniform: measure-zero, "
           "visible only on the float32 grid (acceptance 2^-24 low; u = 0 rejects p(x) = q(x))",
           "edge", uniform_one_minus),
        _m("uniform-shared-across-batch", "uniforms[0] used for every batch row (each row's "
           "law is exact; rows are not independent: a batch-order contract breach)", "contract",
           _kernel(_shared_uniforms)),
        _m("draft-probs-previous-row", "row b reads row b - 1's draft probabilities (row 0 "
           "reads row B - 1; exact at B = 1; a batch-order contract breach)", "contract",
           _kernel(_previous_row_q)),
        _m("padding-as-token", "-1 padding read as token V - 1 and verified like a draft "
           "(ragged rows): emits an id the row never drafted", "contract", _kernel(_padding_as_token),
           "vllm-project/vllm#46533",
           _R),
        _m("ids-int16", "draft ids gathered through int16: ids >= 32768 wrap (V > 32768)",
           "biased", _wrapped_ids(16)),
        _m("ids-int8", "draft ids gathered through int8: ids >= 128 wrap (V > 128)", "biased",
           _wrapped_ids(8)),
        _m("residual-unnormalized", "recovered token by u < cumsum(max(p - q, 0)) without "
           "scaling u by the sum: the missing mass falls to token V - 1", "biased",
           residual_unnormalized),
        _m("residual-next-position", "residual max(p_{i+1} - q_i, 0): the target row one "
           "position late", "biased", residual_next_position),
        _m("bonus-last-row", "bonus drawn from target row k instead of row k_b for ragged rows",
           "biased", _kernel(_bonus_from_last_row)),
        _m("uniform-reused-for-residual", "recovered token drawn with the rejected position's "
           "acceptance coin instead of uniforms[:, k]", "biased", uniform_reused_for_residual,
           "vllm-project/vllm-ascend#16370", _R),
        _m("recover-argmax", "recovered token = argmax of the residual (greedy) instead of a "
           "sample", "biased", recover_argmax),
        _m("continue-after-reject", "num_accepted counts every accepted draft, not the first "
           "run", "biased", continue_after_reject, "handout §5", _H),
        _m("temperature-target-only", f"p^(1/{TARGET_TEMPERATURE}) renormalized used for the "
           "whole rule (temperature applied to the target only)", "biased",
           _kernel(_temper_target)),
        _m("greedy-argmax-check", "draft accepted iff it is argmax(p_i), at temperature > 0",
           "biased", greedy_argmax_check, "handout §4-5", _H),
        _m("pad-with-zero", "output_ids padded with token 0 instead of -1", "contract",
           pad_with_zero),
        _m("num-accepted-counts-bonus", "num_accepted counts the emitted token too", "contract",
           num_accepted_counts_bonus),
        _m("q-zero-accepted", "a drafted token with q(x) = 0 accepted (u * 0 < p(x): p / 0 = inf, "
           "as vLLM V0 and TensorRT-LLM do); drafts not drawn from q, e.g. n-gram or one-sided "
           "top-p", "edge", _kernel(accept=lambda b: b.coins * b.qx < b.px)),
        _m("degenerate-residual-token-0", "an empty residual (p <= q everywhere) falls back to "
           "token 0 (vLLM V1's argmax of zeros), not p", "edge", _degenerate_residual("token-0")),
        _m("degenerate-residual-last-id", "an empty residual falls back to token V - 1 (SGLang's "
           "fallback), not p", "edge", _degenerate_residual("last-id")),
        _m("degenerate-residual-uniform", "an empty residual falls back to the uniform over V "
           "(vLLM V0's finfo.tiny clamp), not p", "edge", _degenerate_residual("uniform")),
        _m("residual-p-when-p-zero", "a rejected draft with p(x) = 0 emits from p instead of "
           "the residual max(p - q, 0) (the two differ where q overlaps p elsewhere)", "biased",
           _kernel(rows=_p_when_draft_has_none), _RULE),
        _m(f"batch-tile-{BATCH_TILE}-target", f"rows past a batch tile of {BATCH_TILE} read the "
           f"target rows of row b - {BATCH_TILE} (exact at B <= {BATCH_TILE})", "biased",
           _kernel(_target_from_previous_tile)),
        _m(f"batch-tile-{BATCH_TILE}-coins", f"rows past a batch tile of {BATCH_TILE} reuse the "
           f"coins of row b - {BATCH_TILE} (each row's own law exact; rows not independent)",
           "biased", _kernel(_coins_from_previous_tile)),
        _m(f"residual-top-{TOP_IDS}", f"residual max(p - q, 0) over the target's top {TOP_IDS} "
           f"ids only (a truncation fast path; visible at V > {TOP_IDS} with mass outside them)",
           "biased", _kernel(residual=_residual_over_top_ids), _RULE),
        _m(f"bonus-row-off-by-one-at-k{BUGGY_K}", f"at k = {BUGGY_K} only, the bonus drawn from "
           "target row k_b - 1 instead of k_b", "biased", _kernel(_bonus_row_early_at_k7), _RULE),
        _m("ids-uint16-emitted", "the emitted token stored as uint16 (token & 0xFFFF): ids past "
           "65,535 wrap (V > 65,536)", "biased", _kernel(recover=_uint16_ids, bonus=_uint16_ids)),
    ]
)  # fmt: skip

KERNEL_CONTROLS: tuple[Mutant, ...] = (
    _m("reference-renamed", "the reference kernel under another name", "exact",
       reference_renamed, _RULE),
    _m("ratio-division", "accept iff u < min(1, p(x)/q(x)) by float64 division (same decisions "
       "as u * q < p on float32 inputs)", "exact", ratio_division, _RULE),
    _m(f"chunks-of-{CHUNK_ROWS}", f"the reference run on chunks of {CHUNK_ROWS} batch rows",
       "exact", chunked),
    _m("exponential-race", "draws from a generator; the emitted token by an exponential race "
       "with one noise row per request for all its positions (vLLM V1's recovered-token "
       "sampling): exact, only one token per request is emitted", "exact", exponential_race),
)  # fmt: skip

__all__ = ["BATCH_TILE", "BUGGY_K", "KERNEL_CONTROLS", "KERNEL_MUTANTS", "TARGET_TEMPERATURE", "TILE_WIDTHS", "TOP_IDS"]
