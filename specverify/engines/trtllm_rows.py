"""TensorRT-LLM's row (pinned ``pins.TENSORRT_LLM``): not run here (no wheel on the package index,
and its sampling needs the compiled runtime); ``recheck_wheel`` says which when a wheel turns up."""

from __future__ import annotations

from . import loader, pins
from .engine_row import Engine


def recheck_wheel(engine: Engine, download: bool) -> str:
    """TRT-LLM's skip line (``Engine.recheck``), unless a wheel of the pinned version is in the cache or on the index."""
    try:
        loader.wheel_file(engine.package, engine.version, download)
    except loader.Unavailable:
        return engine.skip
    return (
        f"tensorrt-llm: a {engine.version} wheel is present but its sampling_utils needs the "
        f"compiled TensorRT-LLM runtime; not wired here (adapters.kernels.from_trtllm is)"
    )


TRTLLM_ROWS = [
    Engine(
        "tensorrt-llm",
        *pins.TENSORRT_LLM,
        "sampling_utils.get_rejected_indices / sample_rejected",
        "kernel",
        "exact",
        "torch.rand / torch.multinomial with a generator",
        skip="tensorrt-llm 1.2.1: the package index serves only a stub sdist whose setup downloads the real "
        "wheel from its vendor's host, unreachable here; adapter ready: adapters.kernels.from_trtllm",
        needs=("a tensorrt-llm wheel (none on the package index)", "the compiled TensorRT-LLM runtime"),
        recheck=recheck_wheel,
    ),
]
