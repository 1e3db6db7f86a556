"""FlashInfer's row (pinned ``pins.FLASHINFER``): CUDA only, a fixed skip line on a CPU machine
(the GPU stage runs ``adapters.kernels.from_flashinfer``)."""

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
        skip="flashinfer: CUDA only, not run on a CPU machine (the GPU stage); adapter ready: "
        "adapters.kernels.from_flashinfer",
        needs=("CUDA (not run on a CPU machine)",),
    ),
]
