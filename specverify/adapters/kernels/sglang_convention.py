"""SGLang's ``chain_speculative_sampling_triton`` (its uniforms are inputs; optionally block
verification) as a canonical kernel and back (``from_sglang_chain`` / ``to_sglang_chain``); see the
table in ``adapters.kernels``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .canonical import (
    Kernel,
    as_tensor,
    by_draft_count,
    check_canonical_inputs,
    expect_shape,
    finish_canonical,
    uniforms_of,
)


def from_sglang_chain(chain_speculative_sampling_triton: Callable, block_verification: bool = False) -> Kernel:
    """Canonical kernel from SGLang's ``chain_speculative_sampling_triton`` (uniforms as inputs).

    Engine (sglang 0.5.23, kernels/ops/speculative/reject_sampling.py:242-295; the CUDA
    ``tree_speculative_sampling_target_only`` takes the same buffers)::

        chain_speculative_sampling_triton(
            predicts[B*(k+1)] i32 (out), accept_index[B, k+1] i32 (out),
            accept_token_num[B] i32 (out), candidates[B, k+1] i64, retrive_index[B, k+1] i64,
            retrive_next_token[B, k+1], retrive_next_sibling[B, k+1] (unused by the chain),
            uniform_samples[B, k+1] f32, uniform_samples_for_final_sampling[B] f32,
            target_probs[B, k+1, V] f32, draft_probs[B, k, V] f32, threshold_single,
            threshold_acc, deterministic, *, block_verification=False) -> None

    Mapping found in the source: ``candidates[:, 0]`` is the root (last verified token, never
    read by the chain kernel), ``candidates[:, s]`` for s >= 1 is draft s - 1; the coin of draft
    i is ``uniform_samples[:, i]`` (line 146 loads column ``step - 1``), so column k is unused;
    the emitted token uses ``uniform_samples_for_final_sampling[b]`` (line 166) by inverse CDF
    over ``max(p - q, 0)`` (or p when all are accepted; lines 175-239). Accepts iff
    ``q in (0, 1] and u * q < p`` (lines 148-149). Writes ``predicts[retrive_index[b, j]]`` for
    j <= num_accept, ``accept_index[b, j] = retrive_index[b, j]`` and ``accept_token_num[b]``.

    The adapter passes canonical ``uniforms[:, :k_b]`` then ``uniforms[:, k]`` as
    ``uniform_samples`` (the last column unused), ``uniforms[:, k]`` as
    ``uniform_samples_for_final_sampling``; ``retrive_index`` is ``arange(B*(k+1))`` so
    ``predicts`` reshapes to the canonical output, pre-filled with -1. Thresholds 1.0 (exact),
    ``deterministic=True``. Given a generator, the uniforms are drawn from it in [0, 1) first.
    ``block_verification=True`` passes SGLang's block-verification switch (another exact rule:
    its law given the drafts differs from the token-wise rule's; judge it on its marginal law).
    Fixed k: rows are grouped by k_b.
    """

    def kernel(draft_ids, draft_probs, target_probs, uniforms):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, uniforms)
        u = uniforms_of(batch)
        k = batch.shape[1]

        def run(rows, kb):
            n, slots = len(rows), kb + 1
            candidates = torch.zeros((n, slots), dtype=torch.int64)
            candidates[:, 1:] = batch.draft_ids[rows, :kb]
            next_token = torch.arange(1, slots + 1, dtype=torch.int64).repeat(n, 1)
            next_token[:, -1] = -1
            predicts = torch.full((n * slots,), -1, dtype=torch.int32)
            accept_index = torch.full((n, slots), -1, dtype=torch.int32)
            accept_token_num = torch.zeros(n, dtype=torch.int32)
            chain_speculative_sampling_triton(
                predicts=predicts,
                accept_index=accept_index,
                accept_token_num=accept_token_num,
                candidates=candidates,
                retrive_index=torch.arange(n * slots, dtype=torch.int64).view(n, slots),
                retrive_next_token=next_token,
                retrive_next_sibling=torch.full((n, slots), -1, dtype=torch.int64),
                uniform_samples=torch.cat([u[rows, :kb], u[rows, k:]], dim=1).contiguous(),
                uniform_samples_for_final_sampling=u[rows, k].contiguous(),
                target_probs=batch.target_probs[rows, :slots].contiguous(),
                draft_probs=batch.draft_probs[rows, :kb].contiguous(),
                threshold_single=1.0,
                threshold_acc=1.0,
                deterministic=True,
                **({"block_verification": True} if block_verification else {}),
            )
            return predicts.view(n, slots).to(torch.int64), accept_token_num.to(torch.int64)

        return finish_canonical(batch, *by_draft_count(batch, run))

    return kernel


def to_sglang_chain(kernel: Kernel) -> Callable:
    """SGLang's ``chain_speculative_sampling_triton`` signature around a canonical kernel.

    Drafts are ``candidates[:, 1:]``; canonical uniforms are ``uniform_samples[:, :k]`` followed
    by ``uniform_samples_for_final_sampling``. Fills ``predicts``, ``accept_index`` and
    ``accept_token_num`` in place through ``retrive_index`` as the engine does. Only the exact
    chain rule is offered: thresholds other than 1.0 and ``block_verification`` are refused.
    """

    def chain_speculative_sampling_triton(
        predicts,
        accept_index,
        accept_token_num,
        candidates,
        retrive_index,
        retrive_next_token,
        retrive_next_sibling,
        uniform_samples,
        uniform_samples_for_final_sampling,
        target_probs,
        draft_probs,
        threshold_single,
        threshold_acc,
        deterministic,
        *,
        block_verification=False,
    ):
        if block_verification:
            raise ValueError("block_verification: only the token-by-token chain rule is offered")
        if threshold_single != 1.0 or threshold_acc != 1.0:
            raise ValueError("threshold_single/threshold_acc must be 1.0 (the exact rule)")
        cand = as_tensor(candidates, "candidates")
        if cand.dim() != 2 or cand.shape[1] < 1:
            raise ValueError(f"candidates must be 2-D [B, k+1], got {list(cand.shape)}")
        b, slots = cand.shape
        k = slots - 1
        us = as_tensor(uniform_samples, "uniform_samples")
        if us.dim() != 2 or us.shape[0] != b or us.shape[1] < k:
            raise ValueError(f"uniform_samples must have shape [B={b}, >= k={k}], got {list(us.shape)}")
        final = as_tensor(uniform_samples_for_final_sampling, "uniform_samples_for_final_sampling")
        expect_shape(final, "uniform_samples_for_final_sampling", (b,))
        expect_shape(as_tensor(retrive_index, "retrive_index"), "retrive_index", (b, slots))
        uniforms = torch.cat([us[:, :k].float(), final.float()[:, None]], dim=1)
        out, acc = kernel(cand[:, 1:].long(), draft_probs, target_probs, uniforms)
        out, acc = as_tensor(out, "kernel").long(), as_tensor(acc, "kernel").long()
        for row in range(b):
            n = int(acc[row])
            slots_written = retrive_index[row, : n + 1].long()
            predicts[slots_written] = out[row, : n + 1].to(predicts.dtype)
            accept_index[row, : n + 1] = slots_written.to(accept_index.dtype)
        accept_token_num.copy_(acc.to(accept_token_num.dtype))

    return chain_speculative_sampling_triton
