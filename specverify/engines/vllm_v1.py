"""vLLM V1's ``rejection_sample`` (``vllm/v1/sample/rejection_sampler.py``) in any release from
0.8.5 on, wrapped by contract: one wrapper that reads what the loaded function takes and feeds it
that, checked before any verdict (``engine_contract``).

What changed across releases, and how the wrapper meets it:

* 0.8.5: ``target_probs`` (probabilities), ``GREEDY_TEMPERATURE = -1``; the recovered token is
  ``argmax(max(p - q, 0) / E)``.
* 0.10.2: imports ``vllm.triton_utils`` (loaded from the wheel; ``vllm_loading``).
* 0.15.1: ``GREEDY_TEMPERATURE = 0``.
* 0.16.0: ``target_logits`` with the softmax inside; 0.20.0: ``synthetic_mode``,
  ``synthetic_conditional_rates``; 0.23.0: ``use_fp64_gumbel``; by 0.24.0 the recovered token is
  a tiled ``prob * (1 / E)`` (the version table in docs/ENGINES.md).
* 0.33.0: every kernel launch goes through vLLM's JIT-warmup dispatcher; the coins are float64;
  FLy (``fly_window_size``, ``fly_entropy_threshold``, ``fly_entropy_top_k``).

The wrapper feeds the target's row as the parameter's name says (:func:`v1_feeds`):
probabilities as they are, or logits ``log(p)`` in float32 (``-inf`` where p = 0, so the
engine's softmax gives p back up to float32 rounding and exactly 0 off p's support). The
temperature in the sampling metadata is 1 (the caller scales logits before ``rejection_sample``
in every release), which must not be the release's ``GREEDY_TEMPERATURE``. Randomness is
answered from the explicit uniforms by ``vllm.ControlledDraws`` (the coins in the dtype the
release asks for; the exponential row by ``vllm.race_noise``), as the 0.8.5 row always did.

Modes (0.24.0 on): ``strict`` (the standard rule, exact expected), ``synthetic`` (acceptance
``u < rate`` at fixed conditional rates, whatever p and q: lossy by design; rates
``SYNTHETIC_RATE``) and ``fly`` (FLy: a high-entropy rejection is deferred when the next
``FLY_WINDOW`` drafts would be accepted; lossy by its own docstring; threshold
``FLY_THRESHOLD`` so every position is gated).
"""

from __future__ import annotations

import inspect
from contextlib import nullcontext

import torch

from ..adapters.kernels import (
    vllm_v1_ragged_inputs,
    vllm_v1_sampling_metadata,
)
from .engine_contract import AdapterError, Feeds, check_feeds, check_known_answer, quantity_of
from .vllm import ControlledDraws, raced_uniforms_kernel

SYNTHETIC_RATE = 0.7
"""The synthetic mode's conditional acceptance rate at every position (the row's choice; vLLM
derives it from the configured unconditional rates)."""
FLY_WINDOW, FLY_THRESHOLD, FLY_TOP_K = 1, 0.0, 3
"""FLy's window, entropy threshold (0: every position's entropy is at or above it) and top-k."""
MODES = ("strict", "synthetic", "fly")
TEMPERATURE = 1.0
TARGET_POSITION = 5
"""``rejection_sample``'s sixth argument is the target's row (``target_probs`` / ``target_logits``)."""


def mode_arguments(mode: str, k: int) -> dict:
    """The keyword arguments of ``mode`` for a call with k drafts (module docstring)."""
    if mode == "strict":
        return {}
    if mode == "synthetic":
        return {"synthetic_mode": True, "synthetic_conditional_rates": torch.full((k,), SYNTHETIC_RATE)}
    if mode == "fly":
        return {
            "fly_window_size": FLY_WINDOW,
            "fly_entropy_threshold": FLY_THRESHOLD,
            "fly_entropy_top_k": FLY_TOP_K,
        }
    raise ValueError(f"mode: one of {', '.join(MODES)}, got {mode!r}")


def v1_feeds(module, mode: str = "strict", quantity: str | None = None) -> Feeds:
    """What the wrapper feeds ``module.rejection_sample``: the target's row as its parameter's
    name says (``quantity`` forces one: a deliberately wrong wrapper), q as probabilities,
    temperature 1 against the release's ``GREEDY_TEMPERATURE``, and ``mode``'s keywords.
    AdapterError when the target's parameter names neither logits nor probabilities."""
    params = list(inspect.signature(module.rejection_sample).parameters)
    target = params[TARGET_POSITION] if len(params) > TARGET_POSITION else "(none)"
    fed = quantity or quantity_of(target)
    if fed is None:
        raise AdapterError(f"rejection_sample's argument 6 is {target}, which names neither logits nor probabilities")
    sentinel = getattr(module, "GREEDY_TEMPERATURE", None)
    return Feeds(
        "rejection_sample",
        {4: "probabilities", TARGET_POSITION: fed},
        positional=8,
        passes=tuple(mode_arguments(mode, 1)),
        temperature="1 in the sampling metadata (the caller scales logits first)",
        temperature_value=TEMPERATURE,
        sentinel_value=None if sentinel is None else float(sentinel),
    )


def target_rows(p: torch.Tensor, quantity: str) -> torch.Tensor:
    """The target's rows as fed: probabilities as they are, logits as log(p) in float32."""
    return p.contiguous() if quantity == "probabilities" else torch.log(p.float()).contiguous()


def v1_kernel(module, feeds: Feeds, mode: str = "strict", active=None):
    """Canonical kernel with explicit uniforms around ``module.rejection_sample`` fed as
    ``feeds`` says (``vllm.v1_uniforms_kernel``'s method: the call inside ``ControlledDraws``,
    made again at V1's own first rejection when it differs from the rule's). ``active``: a
    context manager factory wrapping each call (``wheel_import.Loaded.active``)."""
    rejection_sample = module.rejection_sample
    quantity = feeds.quantities[TARGET_POSITION]
    active = active or nullcontext

    def call(batch, bonus, noise):
        b, k, _ = batch.shape
        metadata = vllm_v1_sampling_metadata(b, None, batch.target_probs.device)
        metadata.generators = {}
        metadata.temperature = torch.full((b,), feeds.temperature_value, dtype=torch.float32)
        args = list(vllm_v1_ragged_inputs(batch, bonus))
        args[TARGET_POSITION] = target_rows(args[TARGET_POSITION], quantity)
        coins = batch.uniforms[:, :k][batch.draft_ids >= 0].contiguous()
        with active(), ControlledDraws(coins, noise):
            out = rejection_sample(*args, metadata, **mode_arguments(mode, k))
        return torch.as_tensor(out).to(torch.int64)

    return raced_uniforms_kernel(call)


def contracted_kernel(module, label: str, mode: str = "strict", active=None, quantity: str | None = None):
    """(kernel, feeds): the wrapper for ``mode`` after its contract holds: ``check_feeds``
    against ``rejection_sample``'s signature, then the known-answer case (in strict mode: the
    lossy modes answer it differently by design, and what they are fed is the same).
    AdapterError (the row's one line, naming ``label``: "vLLM 0.33.0 rejection_sample")
    otherwise; ``quantity`` forces what the target's row is fed as (tests: a wrong wrapper)."""
    feeds = v1_feeds(module, mode, quantity)
    check_feeds(module.rejection_sample, feeds, label)
    strict = feeds if mode == "strict" else v1_feeds(module, "strict", quantity)
    check_known_answer(v1_kernel(module, strict, "strict", active), label)
    return v1_kernel(module, feeds, mode, active), feeds
