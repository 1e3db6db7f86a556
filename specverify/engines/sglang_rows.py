"""SGLang's rows (pinned ``pins.SGLANG``): its Triton chain kernel token-wise, with block
verification as a kernel (law given drafts: a different rule) and as a round (marginal law)."""

from __future__ import annotations

from . import pins
from .engine_probes import kernel_probe
from .engine_row import Built, Engine
from .row_budgets import NEEDS_TRITON, SLOW_ROUND, TRITON_KERNEL


def _sglang(block: bool, download: bool = True):
    from functools import partial

    from ..adapters.kernels import from_sglang_chain
    from . import others, rounds

    module = others.load_sglang(download=download)
    fn = module.chain_speculative_sampling_triton
    if block:
        step = rounds.sglang_chain_round(fn, block_verification=True)
        kernel = from_sglang_chain(partial(fn, block_verification=True))
        return Built(step, kernel_probe(kernel, explicit=True), "explicit uniforms (inputs)")
    kernel = from_sglang_chain(fn)

    def chain_kernel(draft_ids, draft_probs, target_probs, uniforms):
        return kernel(draft_ids, draft_probs, target_probs, uniforms)

    return Built(chain_kernel, kernel_probe(chain_kernel, explicit=True), "explicit uniforms (inputs)")


def _sglang_block_kernel(download: bool = True):
    from functools import partial

    from ..adapters.kernels import from_sglang_chain
    from . import others

    module = others.load_sglang(download=download)
    kernel = from_sglang_chain(partial(module.chain_speculative_sampling_triton, block_verification=True))

    def block_kernel(draft_ids, draft_probs, target_probs, uniforms):
        return kernel(draft_ids, draft_probs, target_probs, uniforms)

    return Built(block_kernel, kernel_probe(block_kernel, explicit=True), "explicit uniforms (inputs)")


SGLANG_ROWS = [
    Engine(
        "sglang-chain",
        *pins.SGLANG[:2],
        "chain_speculative_sampling_triton (kernels/ops/speculative/reject_sampling.py), token-wise",
        "kernel",
        "exact",
        "the caller's uniforms (uniform_samples, uniform_samples_for_final_sampling)",
        lambda download=True: _sglang(False, download),
        TRITON_KERNEL,
        files=pins.SGLANG[2],
        needs=NEEDS_TRITON,
    ),
    Engine(
        "sglang-block-kernel",
        *pins.SGLANG[:2],
        "chain_speculative_sampling_triton(block_verification=True), law given drafts",
        "kernel",
        "different-rule",
        "the caller's uniforms; one coin per position, reused for the pre-check and the acceptance test",
        _sglang_block_kernel,
        {b: {**v, "stop_on_first": True} for b, v in TRITON_KERNEL.items()},
        files=pins.SGLANG[2],
        needs=NEEDS_TRITON,
    ),
    Engine(
        "sglang-block-round",
        *pins.SGLANG[:2],
        "chain_speculative_sampling_triton(block_verification=True), marginal law (round wrapper, B = 1)",
        "round",
        "exact",
        "the caller's uniforms, drawn from the round's rng",
        lambda download=True: _sglang(True, download),
        SLOW_ROUND,
        files=pins.SGLANG[2],
        needs=NEEDS_TRITON,
    ),
]
