"""TensorRT-LLM's torch sampling utilities (``get_rejected_indices`` + ``sample_rejected``) as a
canonical kernel and back (``from_trtllm`` / ``to_trtllm``); see the table in
``adapters.kernels``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .canonical import Kernel, as_tensor, check_canonical_inputs, draw_rows, finish_canonical, require_generator


def from_trtllm(get_rejected_indices: Callable, sample_rejected: Callable) -> Kernel:
    """Canonical kernel from TensorRT-LLM's torch-sampler pair (a generator kernel, per request).

    Engine (NVIDIA/TensorRT-LLM, tensorrt_llm/_torch/pyexecutor/sampling_utils.py; called by
    ``TorchSampler._process_draft_tokens_rejection_sampling`` in pyexecutor/sampler.py)::

        get_rejected_indices(draft_probs[k, V], target_probs[k+1, V], generator: torch.Generator,
                             draft_tokens: list[int]) -> rejected positions, ``.nonzero()`` [r, 1]
        sample_rejected(draft_probs[k, V], target_probs[k+1, V], generator,
                        num_accepted: int) -> int

    Rejects iff ``torch.rand(k, generator=generator) > min(1, p / q)`` (uniforms in [0, 1); its
    letters are swapped: its ``p`` is our q), i.e. accepts iff u <= p / q; the caller takes
    ``rejected[0]`` as the number accepted; ``sample_rejected`` draws
    ``torch.multinomial(relu(p - q))`` at that row. The bonus (no rejection) is the target
    sampler's own draw at step k, outside these functions: the adapter draws it from
    ``target_probs[b, k_b]``. Called once per row, as TRT-LLM does per request; k_b = 0 rows are
    not verified (``get_draft_token_length(request) > 0``) and emit the bonus.
    """

    def kernel(draft_ids, draft_probs, target_probs, generator):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, generator)
        gen = require_generator(batch, "TensorRT-LLM get_rejected_indices/sample_rejected")
        b, k, _ = batch.shape
        out = torch.full((b, k + 1), -1, dtype=torch.int64)
        acc = torch.zeros(b, dtype=torch.int64)
        for row in range(b):
            kb = int(batch.counts[row])
            q, p = batch.draft_probs[row, :kb], batch.target_probs[row, : kb + 1]
            n = kb
            if kb:
                rejected = get_rejected_indices(q, p, gen, batch.draft_ids[row, :kb].tolist())
                n = int(rejected.reshape(-1)[0]) if rejected.numel() else kb
            token = int(sample_rejected(q, p, gen, n)) if n < kb else int(draw_rows(p[kb:], gen)[0])
            out[row, :n] = batch.draft_ids[row, :n]
            out[row, n] = token
            acc[row] = n
        return finish_canonical(batch, out, acc)

    return kernel


def to_trtllm(kernel: Kernel) -> tuple[Callable, Callable]:
    """TensorRT-LLM's ``(get_rejected_indices, sample_rejected)`` around a canonical kernel.

    ``get_rejected_indices`` runs the kernel on the one request and returns ``[[n]]`` (the first
    rejected position) or an empty [0, 1] tensor; TRT-LLM's own returns every independently
    rejected position but its caller reads only the first. ``sample_rejected`` returns the token
    the same kernel call emitted, so the pair must be called in TRT-LLM's order, for the same
    request and generator; anything else raises ``ValueError``.
    """
    last: dict = {}

    def get_rejected_indices(draft_probs, target_probs, generator, draft_tokens):
        q = as_tensor(draft_probs, "draft_probs")
        if q.dim() != 2:
            raise ValueError(f"draft_probs must be 2-D [k, V], got {list(q.shape)}")
        k = q.shape[0]
        p = as_tensor(target_probs, "target_probs")
        p = p.squeeze(0) if p.dim() == 3 else p
        if p.dim() != 2 or p.shape[0] < k + 1 or p.shape[1] != q.shape[1]:
            raise ValueError(f"target_probs must be [k+1={k + 1}, V], got {list(p.shape)}")
        ids = torch.as_tensor(list(draft_tokens)[:k], dtype=torch.int64)
        if ids.numel() != k:
            raise ValueError(f"draft_tokens must hold at least k={k} tokens")
        out, acc = kernel(ids[None], q[None], p[None, : k + 1], generator)
        n = int(as_tensor(acc, "kernel")[0])
        last.clear()
        last.update(generator=generator, num_accepted=n, token=int(as_tensor(out, "kernel")[0, n]))
        return torch.tensor([[n]]) if n < k else torch.zeros((0, 1), dtype=torch.int64)

    def sample_rejected(draft_probs, target_probs, generator, num_accepted):
        if last.get("generator") is not generator or last.get("num_accepted") != num_accepted:
            raise ValueError(
                "sample_rejected: call get_rejected_indices first for this request "
                "and pass its first rejected position as num_accepted"
            )
        return last["token"]

    return get_rejected_indices, sample_rejected
