"""FlashInfer's ``chain_speculative_sampling`` (the generator API) as a canonical kernel and back
(``from_flashinfer`` / ``to_flashinfer``); see the table in ``adapters.kernels``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .canonical import (
    Kernel,
    accepted_from_output,
    as_tensor,
    by_draft_count,
    check_canonical_inputs,
    engine_output,
    finish_canonical,
    require_generator,
)


def from_flashinfer(chain_speculative_sampling: Callable) -> Kernel:
    """Canonical kernel from FlashInfer's ``chain_speculative_sampling`` (a generator kernel).

    Engine (flashinfer/sampling.py, the generator API; vLLM 0.8.5's V0 still calls the older
    form taking ``uniform_samples`` third, rejection_sampler.py:126-131)::

        chain_speculative_sampling(draft_probs[B, k, V] f32, draft_token_ids[B, k] i32,
                                   target_probs[B, k+1, V] f32,
                                   maybe_output_accepted_token_num=None,
                                   maybe_output_emitted_draft_token_num=None,
                                   deterministic=True, generator=None, seed=None, offset=None)
            -> (output_token_ids[B, k+1] i32 -1 padded, accepted_token_num[B],
                emitted_draft_token_num[B])

    The CUDA kernel (include/flashinfer/sampling.cuh, ``ChainSpeculativeSampling``) draws
    ``u = curand_uniform(...)`` in **(0, 1]** from a Philox state seeded by ``generator`` and
    accepts iff ``u * q < p`` (its own letters are swapped: its ``p`` is our q); it samples the
    recovered token from relu(p - q) and the bonus from p in-kernel. ``accepted_token_num`` counts
    drafts accepted independently (past the first rejection too), so ``num_accepted`` is derived
    from the output instead. Fixed k: rows are grouped by k_b.
    """

    def kernel(draft_ids, draft_probs, target_probs, generator):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, generator)
        gen = require_generator(batch, "FlashInfer chain_speculative_sampling")

        def run(rows, kb):
            result = chain_speculative_sampling(
                batch.draft_probs[rows, :kb].contiguous(),
                batch.draft_ids[rows, :kb].to(torch.int32).contiguous(),
                batch.target_probs[rows, : kb + 1].contiguous(),
                deterministic=True,
                generator=gen,
            )
            out = result[0] if isinstance(result, tuple) else result
            out = engine_output(out, "chain_speculative_sampling", (len(rows), kb + 1))
            return out, accepted_from_output(out)

        return finish_canonical(batch, *by_draft_count(batch, run))

    return kernel


def to_flashinfer(kernel: Kernel) -> Callable:
    """FlashInfer's ``chain_speculative_sampling`` signature around a canonical generator kernel.

    Returns int32 outputs like FlashInfer. Both counters report the number of drafts accepted
    before the first rejection (a canonical kernel does not test drafts past it, so FlashInfer's
    independent ``accepted_token_num`` is not available); given buffers are added to in place.
    ``generator=None`` uses torch's default CPU generator; ``seed`` / ``offset`` are refused.
    """

    def chain_speculative_sampling(
        draft_probs,
        draft_token_ids,
        target_probs,
        maybe_output_accepted_token_num=None,
        maybe_output_emitted_draft_token_num=None,
        deterministic=True,
        generator=None,
        seed=None,
        offset=None,
    ):
        if seed is not None or offset is not None:
            raise ValueError("seed/offset: pass a torch.Generator as generator instead")
        ids = as_tensor(draft_token_ids, "draft_token_ids")
        if ids.dim() != 2:
            raise ValueError(f"draft_token_ids must be 2-D [B, k], got {list(ids.shape)}")
        out, acc = kernel(
            ids.long(), draft_probs, target_probs, generator if generator is not None else torch.default_generator
        )
        out = as_tensor(out, "kernel").to(torch.int32)
        acc = as_tensor(acc, "kernel").to(torch.int32)
        accepted = maybe_output_accepted_token_num
        emitted = maybe_output_emitted_draft_token_num
        accepted = acc.clone() if accepted is None else accepted.add_(acc)
        emitted = acc.clone() if emitted is None else emitted.add_(acc)
        return out, accepted, emitted

    return chain_speculative_sampling
