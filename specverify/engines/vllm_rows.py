"""vLLM's rows (pinned ``pins.VLLM``): V0's rejection sampler as a kernel and as a round, V0's typical
acceptance sampler, V1's Triton rejection sampler as a kernel and in n-gram mode as a round. Each
builder loads vLLM's own files (``vllm.load_v0`` / ``load_v1``) and wraps them."""

from __future__ import annotations

from . import pins
from .engine_probes import kernel_probe, round_probe
from .engine_row import Built, Engine
from .row_budgets import FAST_KERNEL, FAST_ROUND, NEEDS_TRITON, SLOW_ROUND, TRITON_KERNEL


def _vllm_v0_rejection(download: bool = True):
    from . import vllm as V

    rs, _ = V.load_v0(download=download)
    kernel = V.v0_uniforms_kernel(rs)
    return Built(
        kernel,
        kernel_probe(kernel, explicit=True),
        "controlled uniforms: V0's torch.rand and exponential rows answered from the explicit uniforms "
        "(vllm.ControlledDraws)",
    )


def _vllm_v0_round(download: bool = True):
    from . import rounds
    from . import vllm as V

    rs, _ = V.load_v0(download=download)
    sampler = V.v0_rejection_sampler(rs)
    step = rounds.vllm_v0_round(sampler.forward)

    def verify(drafts, ps, qs, coin, seed):
        with V.v0_coins(sampler, coin):
            return step.verify(drafts, ps, qs, None, seed)

    return Built(step, round_probe(verify), "RNG injection: RejectionSampler._create_uniform_samples returns the coin")


def _vllm_v0_typical(download: bool = True):
    from . import vllm as V

    _, typ = V.load_v0(download=download)
    kernel = V.v0_typical_kernel(typ)
    return Built(kernel, kernel_probe(kernel), "none needed (deterministic)")


def _vllm_v1(download: bool = True):
    from . import vllm as V

    module = V.load_v1(download=download)
    kernel = V.v1_uniforms_kernel(module)
    return Built(
        kernel,
        kernel_probe(kernel, explicit=True),
        "controlled uniforms: V1's torch.rand and exponential row answered from the explicit uniforms "
        "(vllm.ControlledDraws)",
    )


def _vllm_v1_ngram(download: bool = True):
    from . import vllm as V

    return Built(V.v1_ngram_round(V.load_v1(download=download)), None, "")


VLLM_ROWS = [
    Engine(
        "vllm-v0-rejection",
        *pins.VLLM,
        "RejectionSampler.forward (model_executor/layers/rejection_sampler.py)",
        "kernel",
        "exact",
        "torch.rand / exponential_ with the request's torch.Generator (seeded_seqs; unseeded rows: torch's "
        "global RNG), here answered from the explicit uniforms: the coins, and an exponential row per position "
        "whose race picks the final uniform's inverse-CDF token of max(p - q, 0) (vllm.v0_uniforms_kernel)",
        _vllm_v0_rejection,
        FAST_KERNEL,
        files=pins.VLLM_V0_FILES,
    ),
    Engine(
        "vllm-v0-rejection-round",
        *pins.VLLM,
        "RejectionSampler.forward (model_executor/layers/rejection_sampler.py), one round per call (round wrapper, B = 1)",
        "round",
        "exact",
        "the request's torch.Generator (seeded_seqs={0: generator}) seeded from the round's rng: the bonus token "
        "(torch.multinomial), then torch.rand coins and the exponential race",
        _vllm_v0_round,
        FAST_ROUND,
        files=pins.VLLM_V0_FILES,
    ),
    Engine(
        "vllm-v0-typical",
        *pins.VLLM,
        "TypicalAcceptanceSampler.forward (typical_acceptance_sampler.py)",
        "kernel",
        "lossy",
        "none (deterministic; the caller's bonus token only)",
        _vllm_v0_typical,
        FAST_KERNEL,
        files=pins.VLLM_V0_FILES,
    ),
    Engine(
        "vllm-v1-rejection",
        *pins.VLLM,
        "rejection_sample (v1/sample/rejection_sampler.py, Triton)",
        "kernel",
        "exact",
        "torch.rand + one exponential row per request (sampling_metadata.generators), here answered from "
        "the explicit uniforms: the coins, and an exponential row whose race picks the final uniform's "
        "inverse-CDF token of max(p - q, 0) (margin 2^-8; vllm.race_noise)",
        _vllm_v1,
        TRITON_KERNEL,
        files=pins.VLLM_V1_FILES,
        needs=NEEDS_TRITON,
    ),
    Engine(
        "vllm-v1-ngram-round",
        *pins.VLLM,
        "rejection_sample(draft_probs=None) (v1/sample/rejection_sampler.py, Triton), n-gram mode: "
        "a deterministic proposer's drafts, marginal law (round wrapper, B = 1)",
        "round",
        "exact",
        "torch.rand + one exponential row per request, here answered from the round's rng (grid uniforms; "
        "vllm.ControlledDraws)",
        _vllm_v1_ngram,
        SLOW_ROUND,
        files=pins.VLLM_V1_FILES,
        needs=NEEDS_TRITON,
    ),
]
