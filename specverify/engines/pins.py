"""The pinned engine packages: for each, the package, its version and the files of its wheel that
the rows unpack. Only plain data (no import beyond this file), so that ``specverify engines
--list`` reads what is pinned and what is cached without loading torch or an engine."""

from __future__ import annotations

VLLM_V0 = ("vllm", "0.8.5")
"""V0's PyTorch samplers: vLLM removed V0 upstream (its samplers are absent from the 0.10.2 and
later wheels), so its rows stay at 0.8.5, the last release judged with them."""
VLLM = ("vllm", "0.33.0")
"""vLLM's current release (V1's ``rejection_sample``); ``VLLM_V1_SINCE`` is the first release
``specverify engines --versions all`` judges for the V1 rows."""
VLLM_V1_SINCE = "0.8.5"
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
LMDEPLOY = (
    "lmdeploy",
    "0.18.0",
    (
        "lmdeploy/pytorch/backends/rejection_sampling.py",
        "lmdeploy/pytorch/backends/default/rejection_sampling.py",
        "lmdeploy/pytorch/backends/cuda/rejection_sampling.py",
        "lmdeploy/pytorch/kernels/cuda/rejection_sampling.py",
    ),
)
MLX_LM = ("mlx-lm", "0.32.2", ("mlx_lm/generate.py", "mlx_lm/models/cache.py", "mlx_lm/sample_utils.py"))
MLX = ("mlx", "0.32.4")
"""The mlx the MLX-LM row installs into ``<cache>/site`` (with ``mlx-cpu`` of the same version: the
CPU backend's libraries; neither imports alone on Linux)."""
SGLANG_BLOCKWISE = (
    "sglang",
    "0.5.23",
    (
        "sglang/kernels/ops/speculative/dspark/blockwise_rejection.py",
        "sglang/kernels/ops/speculative/dspark/dispatch.py",
    ),
)
TENSORRT_LLM = ("tensorrt-llm", "1.2.1")
FLASHINFER = ("flashinfer-python", "0.7.2.post1")

__all__ = [
    "EAGLE",
    "FLASHINFER",
    "LMDEPLOY",
    "MEDUSA",
    "MLX",
    "MLX_LM",
    "SGLANG",
    "SGLANG_BLOCKWISE",
    "TENSORRT_LLM",
    "VLLM",
    "VLLM_RUNNER_V2",
    "VLLM_RUNNER_V2_FILES",
    "VLLM_V0",
    "VLLM_V0_FILES",
    "VLLM_V1_FILES",
    "VLLM_V1_SINCE",
]
