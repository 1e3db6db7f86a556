"""FlashInfer's row (pinned ``pins.FLASHINFER``): CUDA only, a fixed skip line. Its adapter
(``adapters.kernels.from_flashinfer``) is ready for a CUDA machine; neither this table nor the GPU
stage (``gpu_validation/``, which runs the project's reference kernels and mutants on CUDA) runs
FlashInfer's own code yet."""

from __future__ import annotations

from . import pins
from .engine_row import Engine

FLASHINFER_ROWS = [
    Engine(
        "flashinfer",
        *pins.FLASHINFER,
        "sampling.chain_speculative_sampling",
        "kernel",
        "exact",
        "curand Philox from a torch.Generator",
        skip="flashinfer: CUDA only (a CUDA JIT kernel), not run here; the GPU stage does not run it yet "
        "either; adapter ready for a CUDA machine: adapters.kernels.from_flashinfer",
        needs=("CUDA (not run on a CPU machine)",),
    ),
]
