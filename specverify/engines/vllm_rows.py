"""vLLM's rows: V0's rejection sampler as a kernel and as a round and V0's typical acceptance
sampler (pinned ``pins.VLLM_V0``, 0.8.5: V0 no longer exists upstream), and V1's Triton
``rejection_sample`` at the current release (``pins.VLLM``) as a kernel, in n-gram mode as a
round, and in its lossy synthetic and FLy modes. The V1 rows load through ``vllm_loading`` and
wrap by contract (``vllm_v1``), so each also runs at any release from ``pins.VLLM_V1_SINCE`` on
(``Engine.at``; ``specverify engines --versions``)."""

from __future__ import annotations

from functools import partial

from . import pins
from .engine_probes import kernel_probe, round_probe
from .engine_row import Built, Engine
from .row_budgets import (
    CHAIN_FIRST_CASES,
    FAST_KERNEL,
    FAST_ROUND,
    NEEDS_TRITON,
    SLOW_ROUND,
    TRITON_KERNEL,
    stopping_at_first,
)

LOSSY_TRITON_KERNEL = {
    "synthetic": stopping_at_first(TRITON_KERNEL),
    "fly": stopping_at_first(TRITON_KERNEL, CHAIN_FIRST_CASES),
}
"""The lossy modes' budgets, by mode: a lossy Triton row stops at its first finding (its measured
TV), its verdict being known (``row_budgets.CHAIN_FIRST_CASES``: why FLy's start elsewhere)."""


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


def load_v1_release(version: str, download: bool = True):
    """vLLM ``version``'s V1 rejection_sampler module (``wheel_import.Loaded``), Triton interpreted."""
    from . import loader, vllm_loading

    loader.ensure_triton(install=download)
    return vllm_loading.load_vllm("vllm.v1.sample.rejection_sampler", version, download)


def build_v1(version: str, mode: str, download: bool = True):
    """The V1 kernel row at ``version`` in ``mode`` (``vllm_v1.MODES``), its contract checked."""
    from .vllm_v1 import contracted_kernel

    loaded = load_v1_release(version, download)
    kernel, feeds = contracted_kernel(loaded.module, f"vLLM {version} rejection_sample", mode, loaded.active)
    return Built(
        kernel,
        kernel_probe(kernel, explicit=True) if mode == "strict" else None,
        "controlled uniforms: V1's torch.rand and exponential row answered from the explicit uniforms "
        "(vllm.ControlledDraws)",
        feeds=feeds.words(),
        standins=loaded.standin_words(),
        function=loaded.module.rejection_sample,
    )


def build_v1_ngram(version: str, download: bool = True):
    """The V1 n-gram round row at ``version``, its contract checked on the kernel first."""
    from . import vllm as V
    from .vllm_v1 import TARGET_POSITION, contracted_kernel

    loaded = load_v1_release(version, download)
    _, feeds = contracted_kernel(loaded.module, f"vLLM {version} rejection_sample", "strict", loaded.active)
    step = V.v1_ngram_round(loaded.module, feeds.quantities[TARGET_POSITION], loaded.active)
    return Built(
        step, None, "", feeds=feeds.words(), standins=loaded.standin_words(), function=loaded.module.rejection_sample
    )


V1_RANDOMNESS = (
    "torch.rand + one exponential row per request (sampling_metadata.generators), here answered from "
    "the explicit uniforms: the coins, and an exponential row whose race picks the final uniform's "
    "inverse-CDF token of max(p - q, 0) (margin 2^-8; vllm.race_noise)"
)
V1_MODE_ROWS = {
    "strict": ("vllm-v1-rejection", "rejection_sample (v1/sample/rejection_sampler.py, Triton)", "exact"),
    "synthetic": (
        "vllm-v1-synthetic",
        "rejection_sample(synthetic_mode=True, conditional rates 0.7) (v1/sample/rejection_sampler.py, Triton): "
        "accepts u < rate whatever p and q",
        "lossy",
    ),
    "fly": (
        "vllm-v1-fly",
        "rejection_sample(fly_window_size=1, fly_entropy_threshold=0) (v1/sample/rejection_sampler.py + "
        "v1/spec_decode/fly.py, Triton): FLy defers a rejection when the next draft would be accepted",
        "lossy",
    ),
}


def v1_row(version: str = pins.VLLM[1], mode: str = "strict") -> Engine:
    """The V1 kernel row in ``mode`` at ``version`` (the current pin by default)."""
    name, function, expected = V1_MODE_ROWS[mode]
    return Engine(
        name,
        pins.VLLM[0],
        version,
        function,
        "kernel",
        expected,
        V1_RANDOMNESS,
        partial(build_v1, version, mode),
        TRITON_KERNEL if mode == "strict" else LOSSY_TRITON_KERNEL[mode],
        files=pins.VLLM_V1_FILES,
        needs=NEEDS_TRITON,
        since=pins.VLLM_V1_SINCE if mode == "strict" else pins.VLLM[1],
        at=partial(v1_row, mode=mode),
    )


def v1_ngram_row(version: str = pins.VLLM[1]) -> Engine:
    """The V1 n-gram round row at ``version``."""
    return Engine(
        "vllm-v1-ngram-round",
        pins.VLLM[0],
        version,
        "rejection_sample(draft_probs=None) (v1/sample/rejection_sampler.py, Triton), n-gram mode: "
        "a deterministic proposer's drafts, marginal law (round wrapper, B = 1)",
        "round",
        "exact",
        "torch.rand + one exponential row per request, here answered from the round's rng (grid uniforms; "
        "vllm.ControlledDraws)",
        partial(build_v1_ngram, version),
        SLOW_ROUND,
        files=pins.VLLM_V1_FILES,
        needs=NEEDS_TRITON,
        since=pins.VLLM_V1_SINCE,
        at=v1_ngram_row,
    )


V0_NOTE = " (V0 no longer exists upstream: absent from the 0.10.2 and later wheels)"

VLLM_ROWS = [
    Engine(
        "vllm-v0-rejection",
        *pins.VLLM_V0,
        "RejectionSampler.forward (model_executor/layers/rejection_sampler.py)" + V0_NOTE,
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
        *pins.VLLM_V0,
        "RejectionSampler.forward (model_executor/layers/rejection_sampler.py), one round per call (round wrapper, "
        "B = 1)" + V0_NOTE,
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
        *pins.VLLM_V0,
        "TypicalAcceptanceSampler.forward (typical_acceptance_sampler.py)" + V0_NOTE,
        "kernel",
        "lossy",
        "none (deterministic; the caller's bonus token only)",
        _vllm_v0_typical,
        FAST_KERNEL,
        files=pins.VLLM_V0_FILES,
    ),
    v1_row(),
    v1_ngram_row(),
    v1_row(mode="synthetic"),
    v1_row(mode="fly"),
]
