"""vLLM's two verification conventions as canonical kernels and back: V0's
``RejectionSampler.forward`` (``from_vllm_v0`` / ``to_vllm_v0``) and V1's ``rejection_sample``
with its ragged inputs and sampling metadata (``from_vllm_v1`` / ``to_vllm_v1``); see the table in
``adapters.kernels``."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import torch

from .canonical import (
    CanonicalBatch,
    Kernel,
    accepted_from_output,
    as_tensor,
    by_draft_count,
    check_canonical_inputs,
    draw_rows,
    engine_output,
    expect_shape,
    finish_canonical,
    require_generator,
    rows_by_generator,
)


def from_vllm_v0(forward: Callable) -> Kernel:
    """Canonical kernel from vLLM V0's ``RejectionSampler.forward`` (a generator kernel).

    Engine (vllm 0.8.5, model_executor/layers/rejection_sampler.py:62-157)::

        forward(target_with_bonus_probs[B, k+1, V] f32, bonus_token_ids[B, 1] i64,
                draft_probs[B, k, V] f32, draft_token_ids[B, k] i64,
                seeded_seqs: dict[int, torch.Generator] | None = None) -> [B, k+1] i64, -1 padded

    Accepts iff ``torch.rand < min(1, p/q)`` (:293-299), uniforms in [0, 1), one
    ``torch.Generator`` per seeded row (:229-250); the recovered token is an exponential race over
    ``clamp(p - q, min=finfo.tiny)`` (:347, :374-400). The engine does not sample the bonus: the
    adapter draws it from ``target_probs[:, k_b]`` with the generator and passes it as
    ``bonus_token_ids``. Every row gets the same generator in ``seeded_seqs`` (its rows draw from
    it one after another). Fixed k only: rows are grouped by k_b, and k_b = 0 rows (no
    verification in V0) emit the bonus. ``num_accepted`` is derived from the output.
    """

    def kernel(draft_ids, draft_probs, target_probs, generator):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, generator)
        gen = require_generator(batch, "vLLM V0 RejectionSampler.forward")

        def run(rows, kb):
            target = batch.target_probs[rows, : kb + 1].contiguous()
            bonus = draw_rows(target[:, kb], gen).unsqueeze(1)
            if kb == 0:
                return bonus, torch.zeros(len(rows), dtype=torch.int64)
            out = forward(
                target,
                bonus,
                batch.draft_probs[rows, :kb].contiguous(),
                batch.draft_ids[rows, :kb].contiguous(),
                {i: gen for i in range(len(rows))},
            )
            out = engine_output(out, "RejectionSampler.forward", (len(rows), kb + 1))
            return out, accepted_from_output(out)

        return finish_canonical(batch, *by_draft_count(batch, run))

    return kernel


def to_vllm_v0(kernel: Kernel) -> Callable:
    """vLLM V0's ``RejectionSampler.forward`` signature around a canonical generator kernel.

    Rows are grouped by their ``seeded_seqs`` generator (unseeded rows share torch's default CPU
    generator, as V0's unseeded ``torch.rand``) and the kernel is called once per group. Where a
    row accepts all k drafts, its last token is replaced by ``bonus_token_ids`` (V0 emits the
    caller's bonus, never one of its own).
    """

    def forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=None):
        q = as_tensor(draft_probs, "draft_probs")
        if q.dim() != 3:
            raise ValueError(f"draft_probs must be 3-D [B, k, V], got shape {list(q.shape)}")
        b, k, v = q.shape
        target_with_bonus_probs = as_tensor(target_with_bonus_probs, "target_with_bonus_probs")
        draft_token_ids = as_tensor(draft_token_ids, "draft_token_ids")
        bonus_token_ids = as_tensor(bonus_token_ids, "bonus_token_ids")
        expect_shape(target_with_bonus_probs, "target_with_bonus_probs", (b, k + 1, v))
        expect_shape(draft_token_ids, "draft_token_ids", (b, k))
        expect_shape(bonus_token_ids, "bonus_token_ids", (b, 1))
        out = torch.full((b, k + 1), -1, dtype=torch.int64)
        for gen, rows in rows_by_generator(b, seeded_seqs or {}, torch.default_generator).values():
            idx = torch.tensor(rows)
            ids, acc = kernel(draft_token_ids[idx], q[idx], target_with_bonus_probs[idx], gen)
            ids, acc = as_tensor(ids, "kernel").to(torch.int64), as_tensor(acc, "kernel").long()
            ids[acc == k, k] = bonus_token_ids[idx][acc == k, 0].to(torch.int64)
            out[idx] = ids
        return out

    return forward


def vllm_v1_sampling_metadata(batch_size: int, generator: torch.Generator, device=None) -> SimpleNamespace:
    """Minimal stand-in for vLLM V1's ``SamplingMetadata`` as ``rejection_sample`` reads it.

    vllm 0.8.5 v1/sample/rejection_sampler.py reads ``all_greedy`` (:174, :191), ``all_random``
    (:178), ``temperature`` (:177, compared with GREEDY_TEMPERATURE = -1 into ``is_greedy``) and
    ``generators`` (:199 -> ``generate_uniform_probs``, :410 in ``sample_recovered_tokens``).
    ``top_k`` / ``top_p`` are read only by ``compute_probs`` (:275, :282) and are ``None`` here.
    Every row uses ``generator``.
    """
    return SimpleNamespace(
        all_greedy=False,
        all_random=True,
        temperature=torch.ones(batch_size, dtype=torch.float32, device=device),
        generators={i: generator for i in range(batch_size)},
        top_k=None,
        top_p=None,
    )


def vllm_v1_ragged_inputs(batch: CanonicalBatch, bonus: torch.Tensor) -> tuple:
    """V1 ``rejection_sample``'s arguments before ``sampling_metadata`` for a canonical batch, in
    its ragged layout (v1/sample/rejection_sampler.py:135-150): every row's present drafts and
    their q and p rows flattened, the rows' draft counts, k, their cumulative sums, and ``bonus``
    [B] as the bonus token ids [B, 1] int32."""
    k = batch.shape[1]
    present = batch.draft_ids >= 0
    return (
        batch.draft_ids[present].to(torch.int32).contiguous(),
        batch.counts.tolist(),
        k,
        torch.cumsum(batch.counts, 0).to(torch.int32),
        batch.draft_probs[present].contiguous(),
        batch.target_probs[:, :k][present].contiguous(),
        bonus.to(torch.int32).reshape(-1, 1).contiguous(),
    )


def from_vllm_v1(rejection_sample: Callable) -> Kernel:
    """Canonical kernel from vLLM V1's ragged ``rejection_sample`` (a generator kernel).

    Engine (vllm 0.8.5, v1/sample/rejection_sampler.py:135-232)::

        rejection_sample(draft_token_ids[N] i32, num_draft_tokens: list[int], max_spec_len: int,
                         cu_num_draft_tokens[B] i32, draft_probs[N, V] f32 | None,
                         target_probs[N, V] f32, bonus_token_ids[B, 1] i32,
                         sampling_metadata) -> [B, max_spec_len + 1] i32, -1 padded

    N = sum k_b: the canonical padded rows are flattened in row order and
    ``cu_num_draft_tokens`` is the inclusive cumulative sum of k_b. Accepts iff
    ``q > 0 and p / q >= u`` (:524), u = ``torch.rand`` in [0, 1) per draft, from the request's
    generator (:337-384); the recovered token is ``argmax(max(p - q, 0) / E)`` with one
    exponential row E per request (:401-412, :618-624). Bonus-row probabilities are not passed:
    the adapter draws ``bonus_token_ids`` from ``target_probs[b, k_b]`` with the generator.
    ``sampling_metadata`` is :func:`vllm_v1_sampling_metadata`. ``max_spec_len`` = k.
    """

    def kernel(draft_ids, draft_probs, target_probs, generator):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, generator)
        gen = require_generator(batch, "vLLM V1 rejection_sample")
        b, k, _ = batch.shape
        bonus = draw_rows(batch.target_probs[torch.arange(b), batch.counts], gen)
        out = rejection_sample(
            *vllm_v1_ragged_inputs(batch, bonus), vllm_v1_sampling_metadata(b, gen, batch.target_probs.device)
        )
        out = engine_output(out, "rejection_sample", (b, k + 1))
        return finish_canonical(batch, out, accepted_from_output(out))

    return kernel


def to_vllm_v1(kernel: Kernel) -> Callable:
    """vLLM V1's ``rejection_sample`` signature around a canonical generator kernel.

    The ragged rows are padded back to [B, max_spec_len]; each row's bonus target row (which V1
    does not pass) is a one-hot at its ``bonus_token_ids`` entry, and that token replaces the
    kernel's last token where all drafts are accepted. ``draft_probs=None`` (n-gram) becomes a
    one-hot q at each draft, V1's q := 1 (rejection_sampler.py:513). Rows are grouped by their
    ``sampling_metadata.generators`` entry (unseeded rows: torch's default CPU generator). Only
    ``all_random`` metadata is supported.
    """

    def rejection_sample(
        draft_token_ids,
        num_draft_tokens,
        max_spec_len,
        cu_num_draft_tokens,
        draft_probs,
        target_probs,
        bonus_token_ids,
        sampling_metadata,
    ):
        counts = torch.as_tensor(list(num_draft_tokens), dtype=torch.int64)
        b, n = len(counts), int(counts.sum())
        ids = as_tensor(draft_token_ids, "draft_token_ids")
        p = as_tensor(target_probs, "target_probs")
        expect_shape(ids, "draft_token_ids", (n,))
        if p.dim() != 2 or p.shape[0] != n:
            raise ValueError(f"target_probs must have shape [N={n}, V], got {list(p.shape)}")
        v = p.shape[1]
        cu = as_tensor(cu_num_draft_tokens, "cu_num_draft_tokens").to(torch.int64)
        if not torch.equal(cu, torch.cumsum(counts, 0)):
            raise ValueError("cu_num_draft_tokens must be the cumulative sum of num_draft_tokens")
        if b and int(counts.max()) > max_spec_len:
            raise ValueError("max_spec_len must be at least max(num_draft_tokens)")
        bonus_token_ids = as_tensor(bonus_token_ids, "bonus_token_ids")
        expect_shape(bonus_token_ids, "bonus_token_ids", (b, 1))
        if not getattr(sampling_metadata, "all_random", False):
            raise ValueError("sampling_metadata: only all_random batches are supported")
        if draft_probs is None:
            q = torch.nn.functional.one_hot(ids.long(), v).to(torch.float32)
        else:
            q = as_tensor(draft_probs, "draft_probs")
            expect_shape(q, "draft_probs", (n, v))
        k = int(max_spec_len)
        present = torch.arange(k)[None, :] < counts[:, None]
        pad_ids = torch.full((b, k), -1, dtype=torch.int64)
        pad_ids[present] = ids.long()
        pad_q = torch.zeros((b, k, v), dtype=torch.float32)
        pad_q[present] = q.float()
        pad_p = torch.zeros((b, k + 1, v), dtype=torch.float32)
        pad_p[:, :k][present] = p.float()
        bonus = bonus_token_ids[:, 0].long()
        pad_p[torch.arange(b), counts] = torch.nn.functional.one_hot(bonus, v).float()
        out = torch.full((b, k + 1), -1, dtype=torch.int32)
        generators = dict(sampling_metadata.generators)
        for gen, rows in rows_by_generator(b, generators, torch.default_generator).values():
            idx = torch.tensor(rows)
            got, acc = kernel(pad_ids[idx], pad_q[idx], pad_p[idx], gen)
            got, acc = as_tensor(got, "kernel").to(torch.int64), as_tensor(acc, "kernel").long()
            full = acc == counts[idx]
            got[full, counts[idx][full]] = bonus[idx][full]
            out[idx] = got.to(torch.int32)
        return out

    return rejection_sample
