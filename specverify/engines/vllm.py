"""vLLM: V0's PyTorch ``RejectionSampler`` and ``TypicalAcceptanceSampler`` and V1's Triton
``rejection_sample`` (all from vllm 0.8.5), loaded from the wheel.

Stand-ins (nothing else of vLLM is imported):

* ``vllm.envs``: ``VLLM_USE_FLASHINFER_SAMPLER = False`` (the FlashInfer path is CUDA only;
  ``RejectionSampler(use_flashinfer=False)`` is passed as well).
* ``vllm.logger``: ``init_logger(name)`` -> ``logging.getLogger(name)``.
* ``vllm.platforms``: ``current_platform`` with ``device_type = "cpu"`` and
  ``simple_compile_backend = "eager"`` (read by ``@torch.compile`` on V0's ``_multinomial``; the
  compiled function is run with TorchDynamo disabled, i.e. as the plain PyTorch it is written in).
* V1 only, type names its functions never call: ``vllm.v1.sample.metadata.SamplingMetadata``,
  ``vllm.v1.spec_decode.metadata.SpecDecodeMetadata``, and
  ``vllm.v1.sample.ops.topk_topp_sampler.apply_top_k_top_p`` (used by ``compute_probs`` only,
  which the adapter does not call; the stand-in raises if it ever is).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from types import SimpleNamespace

import torch

from ..adapters.kernels import from_vllm_v0, from_vllm_v1
from . import loader
from .pins import VLLM, VLLM_V0_FILES, VLLM_V1_FILES

PACKAGE, VERSION = VLLM
V0_FILES, V1_FILES = VLLM_V0_FILES, VLLM_V1_FILES
TYPICAL_THRESHOLD, TYPICAL_ALPHA = 0.09, 0.3
"""vLLM's defaults for ``--typical-acceptance-sampler-posterior-threshold`` / ``-alpha``."""


def common_standins() -> dict:
    return {
        "vllm.envs": loader.standin(
            "vllm.envs", "stand-in: only the flag rejection_sampler.py reads", VLLM_USE_FLASHINFER_SAMPLER=False
        ),
        "vllm.logger": loader.standin("vllm.logger", "stand-in: stdlib logging", init_logger=logging.getLogger),
        "vllm.platforms": loader.standin(
            "vllm.platforms",
            "stand-in: a CPU platform",
            current_platform=SimpleNamespace(device_type="cpu", simple_compile_backend="eager"),
        ),
    }


def _no_compile(fn):
    """TorchDynamo off for calls of ``fn`` (a ``torch.compile``-wrapped engine function)."""
    import torch._dynamo

    return torch._dynamo.disable(fn)


def load_v0(root=None, download: bool = True):
    """(rejection_sampler module, typical_acceptance_sampler module) from the wheel; ``download``
    False: the cache only (loader.Unavailable when the wheel is not there)."""
    root = root or loader.fetch(PACKAGE, VERSION, V0_FILES, download)
    std = common_standins()
    base = loader.load("vllm.model_executor.layers.spec_decode_base_sampler", root, std)
    std["vllm.model_executor.layers.spec_decode_base_sampler"] = base
    rs = loader.load("vllm.model_executor.layers.rejection_sampler", root, std)
    typ = loader.load("vllm.model_executor.layers.typical_acceptance_sampler", root, std)
    rs._multinomial = _no_compile(rs._multinomial)
    return rs, typ


def v0_rejection_sampler(rs_module):
    sampler = rs_module.RejectionSampler(strict_mode=True, use_flashinfer=False)
    sampler.init_tensors("cpu", device_type="cpu")
    return sampler


def v0_typical_sampler(typ_module):
    sampler = typ_module.TypicalAcceptanceSampler(TYPICAL_THRESHOLD, TYPICAL_ALPHA, strict_mode=True)
    sampler.init_tensors("cpu", device_type="cpu")
    return sampler


def v0_rejection_kernel(rs_module):
    """Canonical generator kernel around ``RejectionSampler.forward`` (adapters.from_vllm_v0)."""
    sampler = v0_rejection_sampler(rs_module)

    def draft_ids_kernel(draft_ids, draft_probs, target_probs, generator):
        return kernel(draft_ids, draft_probs, target_probs, generator)

    kernel = from_vllm_v0(sampler.forward)
    return draft_ids_kernel


def v0_typical_kernel(typ_module):
    """Canonical generator kernel around ``TypicalAcceptanceSampler.forward`` (deterministic; only
    the bonus token, drawn by the adapter as vLLM's sampler does, is random)."""
    sampler = v0_typical_sampler(typ_module)

    def forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=None):
        return sampler.forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids)

    kernel = from_vllm_v0(forward)

    def draft_ids_kernel(draft_ids, draft_probs, target_probs, generator):
        return kernel(draft_ids, draft_probs, target_probs, generator)

    return draft_ids_kernel


@contextmanager
def v0_coins(sampler, value: float):
    """RNG injection for the measure-zero probes: ``_create_uniform_samples`` returns ``value``
    on every coin (the recovered token's exponential race still uses the generator)."""

    def coins(seeded_seqs, batch_size, k, device):
        return torch.full((batch_size, k + 1), value, dtype=torch.float32, device=device)

    sampler._create_uniform_samples = coins
    try:
        yield
    finally:
        del sampler._create_uniform_samples


def v1_standins() -> dict:
    std = common_standins()

    def apply_top_k_top_p(*args, **kwargs):
        raise NotImplementedError("stand-in: compute_probs is not exercised by the adapter")

    std.update(
        {
            "vllm.v1.sample.metadata": loader.standin(
                "vllm.v1.sample.metadata", "stand-in: type only", SamplingMetadata=SimpleNamespace
            ),
            "vllm.v1.sample.ops.topk_topp_sampler": loader.standin(
                "vllm.v1.sample.ops.topk_topp_sampler",
                "stand-in: compute_probs only",
                apply_top_k_top_p=apply_top_k_top_p,
            ),
            "vllm.v1.spec_decode.metadata": loader.standin(
                "vllm.v1.spec_decode.metadata", "stand-in: type only", SpecDecodeMetadata=SimpleNamespace
            ),
        }
    )
    return std


def load_v1(root=None, download: bool = True):
    """V1's rejection_sampler module (Triton, interpreted); ``download`` False: the cache only (no
    wheel or triton is fetched)."""
    loader.ensure_triton(install=download)
    root = root or loader.fetch(PACKAGE, VERSION, V1_FILES, download)
    return loader.load("vllm.v1.sample.rejection_sampler", root, v1_standins())


def v1_kernel(module):
    kernel = from_vllm_v1(module.rejection_sample)

    def draft_ids_kernel(draft_ids, draft_probs, target_probs, generator):
        return kernel(draft_ids, draft_probs, target_probs, generator)

    return draft_ids_kernel


@contextmanager
def v1_coins(module, value: float):
    """RNG injection: the module's ``generate_uniform_probs`` returns ``value`` for every draft."""
    original = module.generate_uniform_probs

    def coins(num_tokens, num_draft_tokens, generators, device):
        return torch.full((num_tokens,), value, dtype=torch.float32, device=device)

    module.generate_uniform_probs = coins
    try:
        yield
    finally:
        module.generate_uniform_probs = original
