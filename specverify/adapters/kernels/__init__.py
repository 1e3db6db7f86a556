"""Engines' verification-kernel calling conventions, adapted to the canonical kernel interface.

The canonical kernel (p = target, q = draft, k = drafted tokens per row)::

    kernel(draft_ids, draft_probs, target_probs, uniforms) -> (output_ids, num_accepted)

* ``draft_ids`` int [B, k]; a row with k_b < k drafts is padded with -1 at positions k_b..;
* ``draft_probs`` float32 [B, k, V] (q rows); ``target_probs`` float32 [B, k + 1, V] (p; row i is
  conditioned on drafts[:i]; for a ragged row, row k_b is its bonus row);
* ``uniforms`` float32 [B, k + 1] in [0, 1): column i < k is the acceptance coin of draft i,
  column k the uniform the emitted token (recovered at the first rejection, or bonus) is drawn
  from by inverse CDF in vocabulary order; OR a ``numpy.random.Generator`` / ``torch.Generator``;
* returns ``output_ids`` int64 [B, k + 1] (accepted drafts, the emitted token, then -1) and
  ``num_accepted`` int64 [B], as NumPy arrays when ``draft_ids`` is a NumPy array, else tensors.

Each engine convention gets a ``from_<engine>`` function (engine-convention callable -> canonical
kernel) and a ``to_<engine>`` function (canonical kernel -> engine convention, for tests). Only the
boundary is converted here: argument names and order, dtypes, uniform ranges, ragged layouts.
No engine code is copied; the engine's callable is an argument, so nothing here imports vllm,
sglang, flashinfer or tensorrt_llm.

=============  ===========================================  =========  ========================
engine         callable (source)                            uniforms   randomness
=============  ===========================================  =========  ========================
vLLM V0        ``RejectionSampler.forward`` (vllm 0.8.5,    [0, 1)     own: torch.Generator per
               model_executor/layers/rejection_sampler.py            row in ``seeded_seqs``;
               :62-157)                                              bonus drawn by the caller
vLLM V1        ``rejection_sample`` (vllm 0.8.5,            [0, 1)     own: ``sampling_metadata
               v1/sample/rejection_sampler.py:135-232)                .generators``; bonus
                                                                     drawn by the caller
FlashInfer     ``flashinfer.sampling.chain_speculative_     (0, 1]     own: ``generator`` (curand
               sampling`` (generator API)                            Philox)
SGLang chain   ``chain_speculative_sampling_triton``        [0, 1)     inputs: ``uniform_samples``
               (sglang 0.5.23, kernels/ops/speculative/              and ``uniform_samples_for_
               reject_sampling.py:242-295)                           final_sampling``
TRT-LLM torch  ``get_rejected_indices`` + ``sample_         [0, 1)     own: ``generator``
               rejected`` (tensorrt_llm/_torch/pyexecutor/           (torch.rand, multinomial);
               sampling_utils.py)                                    bonus drawn by the caller
=============  ===========================================  =========  ========================

Generator conventions cannot take canonical uniforms: their adapted kernels raise ``ValueError``
when given an array and need a generator. A NumPy generator is turned into one
``torch.Generator`` seeded from ``rng.integers(2**63)``. Where the engine samples the bonus token
outside its kernel (vLLM V0 and V1, TRT-LLM), the adapter draws it with ``torch.multinomial`` from
``target_probs[b, k_b]`` and that generator, before calling the engine. Engines without ragged
rows (V0, FlashInfer, SGLang, TRT-LLM per request) are called once per group of rows with equal
k_b; V0 and TRT-LLM never run verification for k_b = 0, so those rows get the adapter's bonus.

Where things are: ``canonical`` holds the conversions every pair is written over (validated
inputs, a torch generator, the uniforms, the bonus draw, ``by_draft_count`` for engines without
ragged rows, ``engine_output``, ``finish_canonical``); each engine's pair is one module
(``vllm_conventions``, ``flashinfer_convention``, ``sglang_convention``, ``trtllm_convention``). A
new engine convention is one more such module, its row in the table above and its names below.
This ``__init__`` only re-exports.
"""

from __future__ import annotations

from .canonical import (
    CanonicalBatch,
    Kernel,
    accepted_from_output,
    by_draft_count,
    check_canonical_inputs,
    engine_output,
    finish_canonical,
    torch_generator,
)
from .flashinfer_convention import from_flashinfer, to_flashinfer
from .sglang_convention import from_sglang_chain, to_sglang_chain
from .trtllm_convention import from_trtllm, to_trtllm
from .vllm_conventions import (
    from_vllm_v0,
    from_vllm_v1,
    to_vllm_v0,
    to_vllm_v1,
    vllm_v1_ragged_inputs,
    vllm_v1_sampling_metadata,
)

__all__ = [
    "CanonicalBatch",
    "Kernel",
    "check_canonical_inputs",
    "accepted_from_output",
    "by_draft_count",
    "engine_output",
    "finish_canonical",
    "torch_generator",
    "vllm_v1_sampling_metadata",
    "vllm_v1_ragged_inputs",
    "from_vllm_v0",
    "to_vllm_v0",
    "from_vllm_v1",
    "to_vllm_v1",
    "from_flashinfer",
    "to_flashinfer",
    "from_sglang_chain",
    "to_sglang_chain",
    "from_trtllm",
    "to_trtllm",
]
