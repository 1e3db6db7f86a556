"""The pinned engine packages: for each, the package, its version and the files of its wheel that
the rows unpack. Only plain data (no import beyond this file), so that ``specverify engines
--list`` reads what is pinned and what is cached without loading torch or an engine."""

from __future__ import annotations

VLLM = ("vllm", "0.8.5")
VLLM_V0_FILES = (
    "vllm/model_executor/layers/rejection_sampler.py",
    "vllm/model_executor/layers/spec_decode_base_sampler.py",
    "vllm/model_executor/layers/typical_acceptance_sampler.py",
)
VLLM_V1_FILES = ("vllm/v1/sample/rejection_sampler.py",)
VLLM_RUNNER_V2 = ("vllm", "0.33.0")
VLLM_RUNNER_V2_FILES = (
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py",
    "vllm/v1/worker/gpu/sample/gumbel.py",
    "vllm/v1/spec_decode/fly.py",
)
"""vLLM's model runner v2 sampler and the files of the same wheel it imports (vllm_runner_v2_rows)."""
SGLANG = ("sglang", "0.5.23", ("sglang/kernels/ops/speculative/reject_sampling.py",))
EAGLE = ("eagle-llm", "1.2.1", ("eagle/model/utils.py",))
MEDUSA = ("medusa-llm", "0.1", ("medusa/model/utils.py",))
TENSORRT_LLM = ("tensorrt-llm", "1.2.1")
FLASHINFER = ("flashinfer-python", "0.7.2.post1")

__all__ = [
    "EAGLE",
    "FLASHINFER",
    "MEDUSA",
    "SGLANG",
    "TENSORRT_LLM",
    "VLLM",
    "VLLM_RUNNER_V2",
    "VLLM_RUNNER_V2_FILES",
    "VLLM_V0_FILES",
    "VLLM_V1_FILES",
]
