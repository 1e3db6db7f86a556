"""vLLM: V0's PyTorch ``RejectionSampler`` and ``TypicalAcceptanceSampler`` and V1's Triton
``rejection_sample`` (all from vllm 0.8.5), loaded from the wheel, and the controlled draws
(``ControlledDraws``, ``race_noise``) every V1 release's wrapper (``vllm_v1``) uses.

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

V1 with controlled uniforms (``v1_uniforms_kernel``): V1 draws its randomness through torch in
Python (``generate_uniform_probs``' ``torch.rand`` for the coins, ``sample_recovered_tokens``'
``q.exponential_()`` for one exponential row per request, rejection_sampler.py:368, :409) and
compares inside the Triton kernels, where no symbolic value can follow. ``ControlledDraws`` (a
``TorchFunctionMode`` around the call) answers those two draws with values taken from the
canonical kernel's explicit uniforms, so the kernel battery judges the row exactly from its
uniforms, as it judges SGLang's. How the uniforms select the outputs:

* the coins: ``torch.rand((N,))`` returns the drafts' coins, row by row (column i of row b for
  its i-th draft), compared by V1's own kernel (``p / q >= u``, :524);
* the bonus token (a caller's input in V1): inverse CDF of the bonus row at the final uniform;
* the recovered token, ``argmax(w / E)`` over the vocabulary with w = max(p - q, 0) at the
  rejected position (:618-624): the exponential row E of a request that V1 rejects at position j
  is ``race_noise``: E = w where w > 0, +inf where w = 0, and w / (1 + RACE_MARGIN) at t*, the
  token the final uniform selects by inverse CDF of w (float64 cumulative sums of the float32
  row). Then w / E is 1 + RACE_MARGIN at t*, exactly 1 elsewhere on w's support and 0 off it, so
  t* wins whenever the engine's residual is max(p - q, 0) of that position up to a common scale.
  Resolution: the pieces along the final uniform are those of the inverse CDF, found on the
  float32 grid of u (2^-24); a residual whose ratios to w differ between two tokens by more than
  RACE_MARGIN (2^-8) moves the winner and is seen; mass the engine puts off w's support is not
  (E = +inf there), and an empty residual (w = 0) keeps E = 1 but at the id the final uniform
  selects uniformly, so V1's own fallback (argmax of zeros: token 0) shows, as V0's (a uniform id) does. That E turns argmax(w / E) into a sample from norm(w) is the exponential
  race's law (a property of the noise, not of the engine's code) and is not what this judges.
* the position j is the engine's: V1's acceptance reads the coins only, so the call is made
  with E built for the rule's first rejection and made again, for the rows where V1 accepted a
  different count, with E built for V1's.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..adapters.kernels import (
    accepted_from_output,
    by_draft_count,
    check_canonical_inputs,
    engine_output,
    finish_canonical,
    from_vllm_v0,
    vllm_v1_ragged_inputs,
    vllm_v1_sampling_metadata,
)
from . import loader
from .pins import VLLM_V0, VLLM_V0_FILES, VLLM_V1_FILES
from .rounds import grid_uniforms, leading_tokens, targets

PACKAGE, VERSION = VLLM_V0
"""``load_v0`` and ``load_v1`` read vllm 0.8.5 with the fixed stand-ins below; the V1 rows at any
release load through ``vllm_loading`` (``vllm_v1``)."""
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


def v0_uniforms_kernel(rs_module):
    """Canonical kernel with explicit uniforms around V0's ``RejectionSampler.forward``, as
    ``v1_uniforms_kernel`` is around V1's: the call runs unseeded (``seeded_seqs`` None) inside
    ``ControlledDraws``, which answers V0's two draws from the uniforms: ``torch.rand(n, k)``
    (``_create_uniform_samples``, rejection_sampler.py:230) returns the coins, and the exponential
    rows of ``_multinomial`` (:390, one per row and position over ``clamp(p - q, tiny)``) are
    ``race_noise`` at every position, so whichever position V0 rejects at, its race picks the
    token the final uniform selects by inverse CDF of max(p - q, 0) there (the module docstring's
    resolution). The bonus token (V0's input) is the inverse CDF of the bonus row at the final
    uniform. Rows are grouped by k_b (V0 verifies a fixed k); k_b = 0 rows emit the bonus."""
    forward = v0_rejection_sampler(rs_module).forward

    def uniforms_kernel(draft_ids, draft_probs, target_probs, uniforms):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, uniforms)
        if batch.uniforms is None:
            raise ValueError("uniforms: this kernel takes explicit uniforms [B, k + 1], not a generator")
        final = batch.uniforms[:, -1]
        every = torch.arange(batch.draft_ids.shape[0])
        bonus = inverse_cdf(batch.target_probs[every, batch.counts], final)
        k = batch.draft_ids.shape[1]
        noise = torch.stack([race_noise(batch, torch.full_like(batch.counts, j), final) for j in range(k)], 1)

        def run(rows, kb):
            if kb == 0:
                return bonus[rows].unsqueeze(1), torch.zeros(len(rows), dtype=torch.int64)
            coins = batch.uniforms[rows, :kb].contiguous()
            with ControlledDraws(coins, noise[rows, :kb].reshape(len(rows) * kb, -1).contiguous()):
                out = forward(
                    batch.target_probs[rows, : kb + 1].contiguous(),
                    bonus[rows].unsqueeze(1),
                    batch.draft_probs[rows, :kb].contiguous(),
                    batch.draft_ids[rows, :kb].contiguous(),
                    None,
                )
            out = engine_output(out, "RejectionSampler.forward", (len(rows), kb + 1))
            return out, accepted_from_output(out)

        return finish_canonical(batch, *by_draft_count(batch, run))

    return uniforms_kernel


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


# ----------------------------------------------------------------------------- V1, controlled uniforms

RACE_MARGIN = 2.0**-8
"""How much the selected token's w / E exceeds every other token's (1 exactly) in ``race_noise``:
a residual off by more than this ratio between two tokens moves the exponential race's winner."""

RANDOM_DRAWS = (
    torch.rand,
    torch.rand_like,
    torch.randn,
    torch.randn_like,
    torch.randint,
    torch.randint_like,
    torch.randperm,
    torch.multinomial,
    torch.bernoulli,
    torch.normal,
    torch.poisson,
    torch.Tensor.uniform_,
    torch.Tensor.exponential_,
    torch.Tensor.normal_,
    torch.Tensor.random_,
    torch.Tensor.bernoulli_,
    torch.Tensor.geometric_,
    torch.Tensor.cauchy_,
    torch.Tensor.log_normal_,
)
"""The torch functions that draw randomness; inside ``ControlledDraws`` only the two vLLM makes are
answered, any other is an error (randomness the controlled uniforms would not cover)."""


class ControlledDraws(TorchFunctionMode):
    """During one engine call (V1's ``rejection_sample``, V0's ``RejectionSampler.forward``):
    ``torch.rand`` of ``coins``' shape returns ``coins`` (once: V1's ``generate_uniform_probs``,
    v1/sample/rejection_sampler.py:368; V0's ``_create_uniform_samples``), ``Tensor.exponential_``
    on a tensor of ``noise``' shape fills it with ``noise`` (once: V1's ``sample_recovered_tokens``,
    :409; V0's ``_multinomial``); any other draw raises RuntimeError naming it. ``answered`` lists
    the draws answered."""

    def __init__(self, coins: torch.Tensor, noise: torch.Tensor):
        super().__init__()
        self.coins, self.noise = coins, noise
        self.answered: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.rand and "rand" not in self.answered and self.shape_of(args, kwargs) == self.coins.shape:
            self.answered.append("rand")
            return self.coins.to(kwargs.get("dtype") or self.coins.dtype).clone()
        if (
            func is torch.Tensor.exponential_
            and "exponential_" not in self.answered
            and args[0].shape == self.noise.shape
        ):
            self.answered.append("exponential_")
            return args[0].copy_(self.noise)
        if func in RANDOM_DRAWS:
            name = getattr(func, "__name__", str(func))
            raise RuntimeError(f"the engine drew {name} beyond the controlled uniforms (answered: {self.answered})")
        return func(*args, **kwargs)

    @staticmethod
    def shape_of(args, kwargs) -> torch.Size:
        """The size ``torch.rand(*args, **kwargs)`` asks for."""
        size = kwargs.get("size", args[0] if len(args) == 1 else args)
        return torch.Size(size if isinstance(size, (tuple, list, torch.Size)) else (size,))


def inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Per row of ``weights`` [n, V] (non-negative): the token the uniform ``u`` [n] selects by
    inverse CDF in vocabulary order (float64 cumulative sums; the last id for an all-zero row)."""
    c = torch.cumsum(weights.double(), dim=1)
    at = (u.double() * c[:, -1]).unsqueeze(1)
    return torch.searchsorted(c, at, right=True).squeeze(1).clamp(max=weights.shape[1] - 1)


def residual_rows(batch, position: torch.Tensor) -> torch.Tensor:
    """max(p - q, 0) in float32 at each row's ``position`` (clipped to its drafts), as V1's
    ``sample_recovered_tokens_kernel`` forms it (:615)."""
    rows = torch.arange(batch.draft_ids.shape[0])
    at = torch.minimum(position, (batch.counts - 1).clamp(min=0))
    return torch.clamp(batch.target_probs[rows, at] - batch.draft_probs[rows, at], min=0)


def race_noise(batch, position: torch.Tensor, final: torch.Tensor) -> torch.Tensor:
    """The exponential rows E [B, V] that make V1's race at each row's ``position`` pick the token
    ``final`` selects by inverse CDF of the residual there (module docstring); rows with every
    draft accepted (``position`` = k_b) get E = 1. An empty residual (w = 0) gets E = 1 but at
    the id ``final`` selects uniformly over the vocabulary, 1 / (1 + RACE_MARGIN): an engine whose
    fallback weights every id alike (V0's ``clamp(p - q, tiny)``) then emits what it emits under
    real noise, a uniform id, and one that races zeros (V1's argmax of 0 / E) emits token 0."""
    w = residual_rows(batch, position)
    chosen = inverse_cdf(w, final)
    noise = torch.where(w > 0, w, torch.full_like(w, float("inf")))
    rows = torch.arange(w.shape[0])
    noise[rows, chosen] = w[rows, chosen] / (1 + RACE_MARGIN)
    noise[position >= batch.counts] = 1.0
    empty = (position < batch.counts) & (w.sum(dim=1) == 0)
    if bool(empty.any()):
        V = w.shape[1]
        uniform_id = (final[empty].double() * V).long().clamp(max=V - 1)
        noise[empty] = 1.0
        noise[torch.nonzero(empty).squeeze(1), uniform_id] = 1.0 / (1 + RACE_MARGIN)
    return noise


def rule_position(batch) -> torch.Tensor:
    """The token-wise rule's first rejection per row (k_b when all are accepted): accept draft i
    iff q(x) > 0 and u q(x) < p(x); only a first guess at V1's (``v1_uniforms_kernel``)."""
    b, k, _ = batch.shape
    ids = batch.draft_ids.clamp(min=0).unsqueeze(2)
    qx = torch.gather(batch.draft_probs, 2, ids).squeeze(2)
    px = torch.gather(batch.target_probs[:, :k], 2, ids).squeeze(2)
    accept = (qx > 0) & (batch.uniforms[:, :k] * qx < px) & (batch.draft_ids >= 0)
    return accept.to(torch.int64).cumprod(dim=1).sum(dim=1)


def v1_uniforms_kernel(module):
    """Canonical kernel with explicit uniforms around V1's ``rejection_sample`` (module
    docstring): ``(draft_ids, draft_probs, target_probs, uniforms) -> (output_ids,
    num_accepted)``, NumPy in, NumPy out (torch in, torch out). The call runs inside
    ``ControlledDraws``; no request has a generator (``generators = {}``), so V1's draws are the
    one ``torch.rand`` and the one ``exponential_`` those answer."""
    rejection_sample = module.rejection_sample

    def call(batch, bonus, noise):
        b, k, _ = batch.shape
        metadata = vllm_v1_sampling_metadata(b, None, batch.target_probs.device)
        metadata.generators = {}
        with ControlledDraws(batch.uniforms[:, :k][batch.draft_ids >= 0].contiguous(), noise):
            out = rejection_sample(*vllm_v1_ragged_inputs(batch, bonus), metadata)
        return torch.as_tensor(out).to(torch.int64)

    return raced_uniforms_kernel(call)


def race_where_rejected(call, rows, kb: int, guess):
    """``call(rows, kb, position) -> (output ids, accepted)`` with the race built at the rule's
    rejection positions ``guess``, and once more at the engine's own positions where it rejected
    elsewhere (each race is keyed by the position it was built for)."""
    out, acc = call(rows, kb, guess)
    if bool((acc != guess[rows]).any()):
        position = guess.clone()
        position[rows] = acc
        out, acc = call(rows, kb, position)
    return out, acc


def raced_uniforms_kernel(call):
    """The canonical uniforms kernel around ``call(batch, bonus, noise) -> output ids`` (a V1
    ``rejection_sample`` call under ``ControlledDraws``): the bonus token by inverse CDF of the
    final uniform, the exponential race at the rule's rejection position, and once more at V1's
    own position when it rejected elsewhere."""

    def uniforms_kernel(draft_ids, draft_probs, target_probs, uniforms):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, uniforms)
        if batch.uniforms is None:
            raise ValueError("uniforms: this kernel takes explicit uniforms [B, k + 1], not a generator")
        rows = torch.arange(batch.draft_ids.shape[0])
        final = batch.uniforms[:, -1]
        bonus = inverse_cdf(batch.target_probs[rows, batch.counts], final)
        guess = rule_position(batch)
        out = call(batch, bonus, race_noise(batch, guess, final))
        acc = accepted_from_output(out)
        if bool((acc != guess).any()):  # V1 rejected elsewhere: its race at its own position
            out = call(batch, bonus, race_noise(batch, acc, final))
            acc = accepted_from_output(out)
        return finish_canonical(batch, out, acc)

    return uniforms_kernel


# ----------------------------------------------------------------------------- V1, n-gram mode


def greedy_drafts(q_fn, prefix: tuple, k: int) -> list[int]:
    """k drafts of a deterministic proposer (an n-gram or prompt-lookup drafter): each the most
    probable token of q after the drafts before it (lowest id on ties). A deterministic proposer's
    q is one-hot at its draft, which is what V1 assumes when ``draft_probs`` is None."""
    drafts: list[int] = []
    for _ in range(k):
        drafts.append(int(np.argmax(np.asarray(q_fn(prefix + tuple(drafts)), dtype=np.float64))))
    return drafts


def exponential_row(u) -> torch.Tensor:
    """Exp(1) variates from uniforms on the float32 grid, -log(1 - u) moved half a grid step
    inwards (never 0, never inf), as float32."""
    u = np.asarray(u, dtype=np.float64)
    return torch.from_numpy(-np.log1p(-(u + 2.0**-25))).to(torch.float32)


def v1_ngram_round(module, quantity: str = "probabilities", active=None):
    """A round sampler around V1's ``rejection_sample`` in n-gram mode (``draft_probs`` None,
    rejection_sampler.py:135; ``NO_DRAFT_PROBS``: accept draft x when p(x) >= u, recover from p
    with x removed): drafts from ``greedy_drafts``, one request (B = 1). V1's two draws are
    answered by ``ControlledDraws`` from the round's rng (grid uniforms: the enumerator refuses
    integers, so the round battery judges by statistics): the k coins, and the exponential row
    from V more uniforms (``exponential_row``), so the race is V1's own over genuine Exp(1)
    noise; the bonus token (V1's input) is the inverse CDF of p_k at the final uniform. The marginal
    law of the emitted tokens must be p's whatever the proposer, so the row is judged as any round
    sampler; its tokens per round are a greedy proposer's, not the token-wise rule's with q.
    ``quantity``: what ``rejection_sample``'s target argument takes ("probabilities" up to
    0.15.1, "logits" from 0.16.0: log(p) in float32; ``vllm_v1.v1_feeds``); ``active``: a
    context manager factory around each call (``wheel_import.Loaded.active``)."""
    rejection_sample = module.rejection_sample
    active = active or contextlib.nullcontext

    def verify(drafts, ps, coins, noise) -> list[int]:
        k = len(drafts)
        bonus = inverse_cdf(torch.from_numpy(np.asarray(ps[k:], np.float64)), torch.tensor(coins[k:]))
        if k == 0:
            return [int(bonus[0])]
        metadata = vllm_v1_sampling_metadata(1, None)
        metadata.generators = {}
        target = torch.from_numpy(np.asarray(ps[:k], np.float32)).contiguous()
        if quantity == "logits":
            target = torch.log(target).contiguous()
        with active(), ControlledDraws(torch.tensor(coins[:k], dtype=torch.float32), noise[None]):
            out = rejection_sample(
                torch.tensor(drafts, dtype=torch.int32),
                [k],
                k,
                torch.tensor([k], dtype=torch.int32),
                None,
                target,
                bonus.to(torch.int32).reshape(1, 1),
                metadata,
            )
        return leading_tokens([int(t) for t in out[0].tolist()])

    def speculative_step(p_fn, q_fn, prefix, k, rng):
        prefix = tuple(prefix)
        drafts = greedy_drafts(q_fn, prefix, k)
        ps = targets(p_fn, prefix, drafts)
        u = grid_uniforms(rng, k + 1 + len(ps[0]))
        return verify(drafts, ps, [float(x) for x in u[: k + 1]], exponential_row(u[k + 1 :]))

    speculative_step.verify = verify
    return speculative_step
