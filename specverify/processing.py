"""Next-token processing in one place (NumPy only): temperature, then top-k, then top-p.

Semantics of transformers' warpers: TemperatureLogitsWarper (logits / t), TopKLogitsWarper
(keep every logit >= the k-th largest: ties at the boundary stay), TopPLogitsWarper (keep the
smallest set of most likely tokens whose mass reaches top_p). ``process_logits`` works on
logits (the models); ``temper``, ``keep_top_k``, ``keep_top_p`` on probabilities (the tables).
One function per step and one check per parameter, so min_p, penalties and logit_bias can join
as further steps. The speculative rule is exact only when p and q are processed alike.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .validation import check_prob_vector


def _is(value, kind) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def check_sampling(temperature, top_k=None, top_p=None) -> tuple[float, int | None, float | None]:
    """The parameters as plain numbers; ValueError naming the argument otherwise (bools, strings
    and a float top_k such as 2.0 are refused)."""
    if not (_is(temperature, numbers.Real) and math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature: must be a finite number >= 0 (0 means greedy), got {temperature!r}")
    if top_k is not None and not (_is(top_k, numbers.Integral) and top_k >= 1):
        raise ValueError(f"top_k: must be None or an integer >= 1, got {top_k!r}")
    if top_p is not None and not (_is(top_p, numbers.Real) and 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p: must be None or lie in (0, 1], got {top_p!r}")
    return (float(temperature), None if top_k is None else int(top_k),
            None if top_p is None else float(top_p))


def mask_top_k(logits: np.ndarray, top_k: int) -> np.ndarray:
    """-inf below the top_k-th largest logit; every logit >= it stays (TopKLogitsWarper)."""
    if top_k >= logits.size:
        return logits
    return np.where(logits >= np.partition(logits, -top_k)[-top_k], logits, -np.inf)


def process_logits(logits, temperature=1.0, top_k=None, top_p=None) -> np.ndarray:
    """Probabilities (float64) after temperature, top-k, top-p; temperature 0 (greedy) refused."""
    t, top_k, top_p = check_sampling(temperature, top_k, top_p)
    if t == 0:
        raise ValueError("temperature: 0 is greedy decoding and has no probability vector")
    z = np.asarray(logits, dtype=np.float64) / t
    z = z if top_k is None else mask_top_k(z, top_k)
    p = np.exp(z - z.max())  # softmax as scipy.special.softmax computes it
    p = p / p.sum()
    return check_prob_vector("processed logits", p if top_p is None else keep_top_p(p, top_p))


def temper(probs: np.ndarray, temperature: float) -> np.ndarray:
    """norm(probs ** (1 / t)) = softmax(log(probs) / t): TemperatureLogitsWarper on log-probs."""
    scaled = probs ** (1.0 / temperature)
    return scaled / scaled.sum()


def keep_top_k(probs: np.ndarray, top_k: int, *, keep_ties: bool = True) -> np.ndarray:
    """The top_k most likely tokens, renormalized. ``keep_ties``: every token >= the top_k-th
    largest stays (TopKLogitsWarper); else exactly top_k, ties cut in index order (stable sort,
    as an engine built on torch.topk keeps exactly k)."""
    if keep_ties:
        kept = probs >= np.sort(probs)[::-1][min(top_k, probs.size) - 1]
    else:
        kept = np.isin(np.arange(probs.size), np.argsort(-probs, kind="stable")[:top_k])
    kept_probs = np.where(kept, probs, 0.0)
    return kept_probs / kept_probs.sum()


def keep_top_p(probs: np.ndarray, top_p: float) -> np.ndarray:
    """The smallest set of most likely tokens whose mass reaches top_p, renormalized
    (TopPLogitsWarper); ties cut in index order (stable sort); top_p = 1 keeps every token."""
    if top_p >= 1.0:
        return probs
    order = np.argsort(-probs, kind="stable")
    n_keep = int(np.searchsorted(np.cumsum(probs[order]), top_p)) + 1
    kept = np.zeros_like(probs)
    kept[order[:n_keep]] = probs[order[:n_keep]]
    return kept / kept.sum()
