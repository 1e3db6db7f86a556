"""LMDeploy's rows (pinned ``pins.LMDEPLOY``): its speculative rejection sampler in the portable
torch backend (``DefaultRejectionSamplingImpl.forward``, lmdeploy 0.18.0,
``pytorch/backends/default/rejection_sampling.py``) and in the CUDA backend, whose Triton kernels
(``pytorch/kernels/cuda/rejection_sampling.py``) run here under ``TRITON_INTERPRET=1``.

Both take ``(target_logits [B, k, V], draft_token_ids [B, k], bonus_token_ids [B], *, is_greedy,
draft_probs [B, k, V])`` and return ``(output_token_ids [B, k + 1], num_rejected, last_ids)``,
-1 after the first rejection. The rule: accept draft x iff q(x) > 0 and p(x) / q(x) >= u; at the
first rejection emit ``argmax(max(p - q, 0) / E)`` with one exponential row E per request
(shared by its k positions, as vLLM V1's is). What the wrapper feeds: **logits** (log p, the
softmax inside gives p back up to float32 rounding), ``is_greedy`` None (every row sampled), the
caller's bonus token (the inverse CDF of the bonus row at the final uniform), k_b drafts per
group of rows (LMDeploy has no ragged rows).

Randomness: one float64 ``torch.rand((B, k))`` for the coins and one ``q.exponential_()`` of
[B, V] (both in Python, before the kernels), answered from the canonical kernel's explicit
uniforms by ``vllm.ControlledDraws`` with ``vllm.race_noise`` as vLLM V1's are (``vllm``'s
docstring: how the exponential row makes the race pick the final uniform's inverse-CDF token of
max(p - q, 0), and its resolution), so the kernel battery judges both rows exactly from uniforms.

Stand-in (nothing else of LMDeploy is imported): ``lmdeploy.pytorch.backends.base``, whose real
module imports LMDeploy's config and cache machinery; ``backends/rejection_sampling.py`` reads
only its ``BuildSpec`` (a generic marker class), which the stand-in provides.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from . import loader, pins
from .engine_probes import kernel_probe
from .engine_row import Built, Engine
from .row_budgets import FAST_KERNEL, NEEDS_TRITON, TRITON_KERNEL

PACKAGE, VERSION, FILES = pins.LMDEPLOY
BASE = "lmdeploy.pytorch.backends.rejection_sampling"
DEFAULT = "lmdeploy.pytorch.backends.default.rejection_sampling"
CUDA = "lmdeploy.pytorch.backends.cuda.rejection_sampling"
KERNELS = "lmdeploy.pytorch.kernels.cuda.rejection_sampling"
FEEDS = "logits (log p), is_greedy=None, the caller's bonus token, draft_probs q"
"""What the LMDeploy wrapper feeds ``forward``, in words (the contract it states)."""
PARAMETERS = ("target_logits", "draft_token_ids", "bonus_token_ids", "is_greedy", "draft_probs")
"""``forward``'s parameters the wrapper is written for (checked at build: ``signatures``)."""

ImplT = TypeVar("ImplT")


class BuildSpec(Generic[ImplT]):
    """Stand-in for ``lmdeploy.pytorch.backends.base.BuildSpec``: a generic marker class, all that
    ``backends/rejection_sampling.py`` reads of that module."""


def lmdeploy_standins() -> dict:
    """The one stand-in the rejection-sampling files need (module docstring)."""
    return {
        "lmdeploy.pytorch.backends.base": loader.standin(
            "lmdeploy.pytorch.backends.base",
            "stand-in: BuildSpec only (the real module imports LMDeploy's config and cache machinery)",
            BuildSpec=BuildSpec,
        )
    }


def load_lmdeploy(triton: bool = False, root=None, download: bool = True):
    """LMDeploy's rejection-sampling implementation class: ``DefaultRejectionSamplingImpl`` (pure
    torch) or, with ``triton``, ``CudaRejectionSamplingImpl`` over the Triton kernels (interpreted;
    triton installed into the cache when missing and ``download``). loader.Unavailable (one line)
    when the wheel or a file cannot be had."""
    if triton:
        loader.ensure_triton(install=download)
    root = root or loader.fetch(PACKAGE, VERSION, FILES, download)
    std = lmdeploy_standins()
    std[BASE] = loader.load(BASE, root, std)
    if not triton:
        return loader.load(DEFAULT, root, std).DefaultRejectionSamplingImpl
    std[KERNELS] = loader.load(KERNELS, root, std)
    return loader.load(CUDA, root, std).CudaRejectionSamplingImpl


def lmdeploy_uniforms_kernel(forward, feed_probabilities: bool = False):
    """Canonical kernel with explicit uniforms around LMDeploy's ``forward`` (module docstring):
    ``(draft_ids, draft_probs, target_probs, uniforms) -> (output_ids, num_accepted)``. Rows are
    grouped by k_b; k_b = 0 rows emit the bonus. The exponential row is built for the token-wise
    rule's first rejection and, for rows where LMDeploy rejected elsewhere, rebuilt for its own.
    ``feed_probabilities`` True is a deliberately wrong wrapper (p where logits are expected),
    kept for the tests that show the row's checks see it."""
    import torch

    from ..adapters.kernels import (
        accepted_from_output,
        by_draft_count,
        check_canonical_inputs,
        engine_output,
        finish_canonical,
    )
    from .vllm import ControlledDraws, inverse_cdf, race_noise, race_where_rejected, rule_position

    def uniforms_kernel(draft_ids, draft_probs, target_probs, uniforms):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, uniforms)
        if batch.uniforms is None:
            raise ValueError("uniforms: this kernel takes explicit uniforms [B, k + 1], not a generator")
        every = torch.arange(batch.draft_ids.shape[0])
        final = batch.uniforms[:, -1]
        bonus = inverse_cdf(batch.target_probs[every, batch.counts], final)
        guess = rule_position(batch)

        def call(rows, kb, position):
            p = batch.target_probs[rows, :kb].contiguous()
            logits = p if feed_probabilities else torch.log(p)
            coins = batch.uniforms[rows, :kb].double().contiguous()
            with ControlledDraws(coins, race_noise(batch, position, final)[rows].contiguous()):
                out = forward(
                    logits,
                    batch.draft_ids[rows, :kb].contiguous(),
                    bonus[rows].contiguous(),
                    is_greedy=None,
                    draft_probs=batch.draft_probs[rows, :kb].contiguous(),
                )
            out = engine_output(out[0], "RejectionSamplingImpl.forward", (len(rows), kb + 1))
            return out, accepted_from_output(out)

        def run(rows, kb):
            if kb == 0:
                return bonus[rows].unsqueeze(1), torch.zeros(len(rows), dtype=torch.int64)
            return race_where_rejected(call, rows, kb, guess)

        return finish_canonical(batch, *by_draft_count(batch, run))

    return uniforms_kernel


def build_lmdeploy(triton: bool, download: bool = True) -> Built:
    """The row's subject: ``lmdeploy_uniforms_kernel`` around the loaded implementation."""
    from .signatures import check_parameters

    impl = load_lmdeploy(triton=triton, download=download)()
    check_parameters(impl.forward, PARAMETERS, f"lmdeploy {VERSION} {type(impl).__name__}.forward", FEEDS)
    kernel = lmdeploy_uniforms_kernel(impl.forward)
    return Built(
        kernel,
        kernel_probe(kernel, explicit=True),
        "controlled uniforms: LMDeploy's float64 torch.rand and exponential row answered from the explicit "
        "uniforms (vllm.ControlledDraws)",
    )


RANDOMNESS = (
    "float64 torch.rand [B, k] + one exponential row per request (torch's global RNG), here answered from "
    "the explicit uniforms: the coins, and an exponential row whose race picks the final uniform's "
    "inverse-CDF token of max(p - q, 0) (margin 2^-8; vllm.race_noise)"
)

LMDEPLOY_ROWS = [
    Engine(
        "lmdeploy-rejection",
        PACKAGE,
        VERSION,
        f"DefaultRejectionSamplingImpl.forward (pytorch/backends/default/rejection_sampling.py, torch); feeds {FEEDS}",
        "kernel",
        "exact",
        RANDOMNESS,
        lambda download=True: build_lmdeploy(False, download),
        FAST_KERNEL,
        files=FILES,
    ),
    Engine(
        "lmdeploy-rejection-triton",
        PACKAGE,
        VERSION,
        "CudaRejectionSamplingImpl.forward (pytorch/kernels/cuda/rejection_sampling.py, Triton interpreted); "
        f"feeds {FEEDS}",
        "kernel",
        "exact",
        RANDOMNESS,
        lambda download=True: build_lmdeploy(True, download),
        TRITON_KERNEL,
        files=FILES,
        needs=NEEDS_TRITON,
    ),
]
