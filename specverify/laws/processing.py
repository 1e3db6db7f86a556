"""Next-token processing in one place (NumPy only): temperature, then top-k, then top-p, and the
request-level steps of a generation loop (min-p, penalties, logit bias, a grammar's mask).

Semantics of transformers' warpers: TemperatureLogitsWarper (logits / t), TopKLogitsWarper
(keep every logit >= the k-th largest: ties at the boundary stay), TopPLogitsWarper (keep the
smallest set of most likely tokens whose mass reaches top_p). ``process_logits`` works on
logits (the models); ``temper``, ``keep_top_k``, ``keep_top_p`` on probabilities (the tables).
One function per step and one check per parameter. The speculative rule is exact only when p and
q are processed alike.

Request-level steps, on logits, in the order ``process_step`` applies them: grammar mask and logit
bias, then penalties, then temperature and the truncations. That order is this module's definition
(the loop's reference and every loop check use it); engines agree that bias and penalties come
before temperature, but differ on bias vs repetition penalty and on min-p vs top-k / top-p, which
matters only when both are set:

- ``mask_allowed``: -inf outside the ids a grammar allows (vLLM's structured-output bitmask);
- ``add_logit_bias``: logits[t] += bias[t] (OpenAI ``logit_bias``; vLLM's LogitBiasLogitsProcessor);
- ``penalize_repetition``: every id seen in prompt or output: logit / r when > 0, logit * r
  otherwise (CTRL, arXiv 1909.05858; transformers' RepetitionPenaltyLogitsProcessor; vLLM's
  apply_penalties, which also counts the prompt);
- ``penalize_frequency_presence``: logit - frequency * count - presence * (count > 0), counts over
  the output only (OpenAI's API reference, "frequency and presence penalties"; vLLM);
- then temperature, top-k, top-p (as above) and ``keep_min_p``: keep tokens whose probability is at
  least min_p times the largest (transformers' MinPLogitsWarper, applied after top-p as
  ``GenerationMixin`` orders its warpers). Temperature 0 is greedy: the argmax of the
  processed logits (first index on ties), as a one-hot vector.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..common.validation import check_prob_vector
from .arrays import Real, Vector, normalized


def _is(value: object, kind: type) -> bool:
    """``value`` is of the abstract ``kind`` (numbers.Real or numbers.Integral) and not a bool; a
    plain int or float is decided without the ABC's isinstance (10x slower, on every step)."""
    if type(value) is int:
        return True
    if type(value) is float:
        return kind is not numbers.Integral
    return isinstance(value, kind) and not isinstance(value, bool)


def check_sampling(temperature: Any, top_k: Any = None, top_p: Any = None) -> tuple[float, int | None, float | None]:
    """The parameters as plain numbers; ValueError naming the argument otherwise (bools, strings
    and a float top_k such as 2.0 are refused)."""
    if not (_is(temperature, numbers.Real) and math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature: must be a finite number >= 0 (0 means greedy), got {temperature!r}")
    if top_k is not None and not (_is(top_k, numbers.Integral) and top_k >= 1):
        raise ValueError(f"top_k: must be None or an integer >= 1, got {top_k!r}")
    if top_p is not None and not (_is(top_p, numbers.Real) and 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p: must be None or lie in (0, 1], got {top_p!r}")
    return (float(temperature), None if top_k is None else int(top_k), None if top_p is None else float(top_p))


def mask_top_k(logits: Vector, top_k: int) -> Vector:
    """-inf below the top_k-th largest logit; every logit >= it stays (TopKLogitsWarper)."""
    if top_k >= logits.size:
        return logits
    return np.where(logits >= np.partition(logits, -top_k)[-top_k], logits, -np.inf)


def process_logits(
    logits: ArrayLike, temperature: Real = 1.0, top_k: int | None = None, top_p: Real | None = None
) -> Vector:
    """Probabilities (float64) after temperature, top-k, top-p; temperature 0 (greedy) refused."""
    t, top_k, top_p = check_sampling(temperature, top_k, top_p)
    if t == 0:
        raise ValueError("temperature: 0 is greedy decoding and has no probability vector")
    z = np.asarray(logits, dtype=np.float64) / t
    z = z if top_k is None else mask_top_k(z, top_k)
    p = np.exp(z - z.max())  # softmax as scipy.special.softmax computes it
    p = p / p.sum()
    return check_prob_vector("processed logits", p if top_p is None else keep_top_p(p, top_p))


def temper(probs: Vector, temperature: float) -> Vector:
    """norm(probs ** (1 / t)) = softmax(log(probs) / t): TemperatureLogitsWarper on log-probs."""
    scaled = probs ** (1.0 / temperature)
    return normalized(scaled)


def keep_top_k(probs: Vector, top_k: int, *, keep_ties: bool = True) -> Vector:
    """The top_k most likely tokens, renormalized. ``keep_ties``: every token >= the top_k-th
    largest stays (TopKLogitsWarper); else exactly top_k, ties cut in index order (stable sort,
    as an engine built on torch.topk keeps exactly k)."""
    if keep_ties:
        kept = probs >= np.sort(probs)[::-1][min(top_k, probs.size) - 1]
    else:
        kept = np.isin(np.arange(probs.size), np.argsort(-probs, kind="stable")[:top_k])
    kept_probs = np.where(kept, probs, 0.0)
    return normalized(kept_probs)


def keep_top_p(probs: Vector, top_p: float) -> Vector:
    """The smallest set of most likely tokens whose mass reaches top_p, renormalized
    (TopPLogitsWarper); ties cut in index order (stable sort); top_p = 1 keeps every token."""
    if top_p >= 1.0:
        return probs
    order = np.argsort(-probs, kind="stable")
    n_keep = int(np.searchsorted(np.cumsum(probs[order]), top_p)) + 1
    kept = np.zeros_like(probs)
    kept[order[:n_keep]] = probs[order[:n_keep]]
    return normalized(kept)


# ---------------------------------------------------------------------------- request-level steps


def check_min_p(min_p: Any) -> float:
    if not (_is(min_p, numbers.Real) and 0.0 <= min_p <= 1.0):
        raise ValueError(f"min_p: must lie in [0, 1] (0 disables it), got {min_p!r}")
    return float(min_p)


def check_repetition_penalty(penalty: Any) -> float:
    """The repetition penalty divides positive logits: it must be a finite number > 0."""
    if not (_is(penalty, numbers.Real) and math.isfinite(penalty) and penalty > 0):
        raise ValueError(f"repetition_penalty: must be a finite number > 0 (1 disables it), got {penalty!r}")
    return float(penalty)


def check_additive_penalty(name: str, value: Any) -> float:
    if not (_is(value, numbers.Real) and math.isfinite(value)):
        raise ValueError(f"{name}: must be a finite number (0 disables it), got {value!r}")
    return float(value)


def mask_allowed(logits: Vector, allowed: Iterable[int]) -> Vector:
    """-inf outside ``allowed`` (an iterable of ids); ValueError when it allows nothing or names an
    id outside the vocabulary."""
    ids = np.asarray(sorted({int(t) for t in allowed}), dtype=np.int64)
    if ids.size == 0:
        raise ValueError("allowed_tokens: the grammar allows no token")
    if ids[0] < 0 or ids[-1] >= logits.size:
        raise ValueError(f"allowed_tokens: ids must lie in [0, {logits.size}), got {ids.tolist()}")
    out = np.full(logits.size, -np.inf)
    out[ids] = logits[ids]
    return out


def add_logit_bias(logits: Vector, bias: Mapping[int, float]) -> Vector:
    """logits[t] + bias[t] for every (t, bias) in the mapping ``bias``."""
    out = np.array(logits, dtype=np.float64)
    for t, b in dict(bias).items():
        if not 0 <= int(t) < out.size:
            raise ValueError(f"logit_bias: token {t} outside the vocabulary [0, {out.size})")
        out[int(t)] += float(b)
    return out


def penalize_repetition(logits: Vector, seen: Iterable[int], penalty: float) -> Vector:
    """Every id in ``seen`` (prompt and output): logit / penalty when > 0, else logit * penalty."""
    if penalty == 1.0:
        return logits
    ids = np.asarray(sorted({int(t) for t in seen}), dtype=np.int64)
    out = np.array(logits, dtype=np.float64)
    z = out[ids]
    out[ids] = np.where(z > 0, z / penalty, z * penalty)
    return out


def penalize_frequency_presence(logits: Vector, output: Iterable[int], frequency: float, presence: float) -> Vector:
    """logit - frequency * count - presence * (count > 0), counts over the output tokens."""
    if frequency == 0.0 and presence == 0.0:
        return logits
    counts = np.bincount(np.asarray(list(output), dtype=np.int64), minlength=logits.size)[: logits.size]
    out: Vector = logits - frequency * counts - presence * (counts > 0)
    return out


def keep_min_p(probs: Vector, min_p: float) -> Vector:
    """Tokens with probability >= min_p * max(probs), renormalized (MinPLogitsWarper)."""
    if min_p <= 0.0:
        return probs
    kept = np.where(probs >= min_p * probs.max(), probs, 0.0)
    return normalized(kept)


def greedy_row(logits: Vector) -> Vector:
    """One-hot at the argmax (first index on ties): temperature 0."""
    out = np.zeros(logits.size)
    out[int(np.argmax(logits))] = 1.0
    return out


def process_step(
    logits: ArrayLike,
    *,
    temperature: Real = 1.0,
    top_k: int | None = None,
    top_p: Real | None = None,
    min_p: Real = 0.0,
    repetition_penalty: Real = 1.0,
    frequency_penalty: Real = 0.0,
    presence_penalty: Real = 0.0,
    logit_bias: Mapping[int, float] | None = None,
    allowed: Iterable[int] | None = None,
    prompt: Iterable[int] = (),
    output: Iterable[int] = (),
) -> Vector:
    """The next-token distribution (float64) of one request's step: the raw ``logits`` with the
    grammar mask (``allowed``: ids or None), logit bias, repetition penalty over prompt + output,
    frequency / presence penalties over the output, then temperature (0: one-hot argmax), top-k,
    top-p, min-p. ValueError naming the parameter when one is out of range or nothing is left."""
    t, top_k, top_p = check_sampling(temperature, top_k, top_p)
    z = np.array(logits, dtype=np.float64)
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"logits: expected a non-empty 1-D vector, got shape {z.shape}")
    if allowed is not None:
        z = mask_allowed(z, allowed)
    if logit_bias:
        z = add_logit_bias(z, logit_bias)
    z = penalize_repetition(z, tuple(prompt) + tuple(output), check_repetition_penalty(repetition_penalty))
    z = penalize_frequency_presence(
        z,
        output,
        check_additive_penalty("frequency_penalty", frequency_penalty),
        check_additive_penalty("presence_penalty", presence_penalty),
    )
    if not np.isfinite(z.max()):
        raise ValueError("logits: no token has a finite logit after the mask and penalties")
    if t == 0:
        return greedy_row(z)
    z = z / t
    z = z if top_k is None else mask_top_k(z, top_k)
    p = np.exp(z - z.max())
    p = p / p.sum()
    p = p if top_p is None else keep_top_p(p, top_p)
    return check_prob_vector("processed logits", keep_min_p(p, check_min_p(min_p)))
