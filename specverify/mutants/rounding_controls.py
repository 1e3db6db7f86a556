"""Rounding: correct samplers in float32 and bfloat16 (controls) and rounding bugs inside float32
code (mutants), judged by the one rounding policy (``specverify.laws.rounding``).

Controls (must pass: exact at their own precision's rounding):
- ``control/float32-rule``: the token-wise rule (Leviathan et al., arXiv 2211.17192) in float32
  throughout: rows, ratio, residual, the inverse CDF's cumulative sums, float32 uniforms.
- ``control/bfloat16-rule``: the same in bfloat16: rows, ratio, residual rounded to it, each coin
  a uniform on bfloat16's grid of [0, 1) (steps of 2^-8, as ``torch.rand(dtype=torch.bfloat16)``
  draws it); tokens drawn from the bfloat16 rows' values.

NumPy only: bfloat16 is emulated (``laws.rounding.round_to``, torch's float32 -> bfloat16 rounding,
tested against torch's conversion), so the catalogue loads, and the controls run, without torch.
NumPy has no bfloat16 dtype for the enumerator to see, so the bfloat16 control notes its coins'
precision itself (``laws.precision.note``), as the torch interception notes a bfloat16 tensor.

Mutants (must stay killed: their TV stands above float32 rounding, the rest of their code's):
- ``rounding/float16-ratio``: float32 code, the acceptance ratio in float16 (lablup/mlxcel#992).
- ``rounding/bfloat16-coins``: float32 code, each coin's threshold rounded to bfloat16.
- ``rounding/float16-cumsum``: float32 code, the residual's cumulative sum in float16.
- ``rounding/float16-ratio-wide``: float64 code whose acceptance ratio is computed in float16 only
  over more than ``NARROW_FROM`` ids (a kernel path taken at engine vocabularies), handed back as
  a Python float: exact on every small case, a bias of order 1e-4 at V 4096 that only the exact
  law of a round at an engine vocabulary (the engine-vocabulary case, ``round.cases``) sees.
"""

from __future__ import annotations

import numpy as np

from ..laws import precision
from ..laws.rounding import coin, round_to
from ..samplers.chain import accepts
from .catalogue import Mutant, round_with

F32 = np.float32


def _row(fn, context) -> np.ndarray:
    return np.asarray(fn(context), dtype=F32)


def _inverse_cdf(w: np.ndarray, rng, cumsum=np.cumsum) -> int:
    """The first token whose cumulative sum (``cumsum``, float32 unless told) exceeds u * total."""
    cdf = cumsum(w)
    u = rng.random(dtype=F32)
    for i, c in enumerate(cdf):
        if w[i] > 0 and u * cdf[-1] < c:
            return i
    return int(np.flatnonzero(w)[-1])


def _float32_round(p_fn, q_fn, prefix, k, rng, *, ratio=lambda px, qx: px / qx, coin=lambda t: t, cumsum=np.cumsum):
    """The rule in float32 with its ratio, coin threshold and residual cumulative sum as hooks."""
    prefix, drafts, qs = tuple(prefix), [], []
    for _ in range(k):
        qs.append(_row(q_fn, prefix + tuple(drafts)))
        drafts.append(_inverse_cdf(qs[-1], rng))
    for i, x in enumerate(drafts):
        p = _row(p_fn, prefix + tuple(drafts[:i]))
        if not rng.random(dtype=F32) < coin(min(F32(1), ratio(p[x], qs[i][x]))):
            residual = np.maximum(p - qs[i], F32(0))
            return drafts[:i] + [_inverse_cdf(residual if residual.sum() > 0 else p, rng, cumsum)]
    return drafts + [_inverse_cdf(_row(p_fn, prefix + tuple(drafts)), rng)]


def float32_rule(p_fn, q_fn, prefix, k, rng):
    return _float32_round(p_fn, q_fn, prefix, k, rng)


def float16_ratio(p_fn, q_fn, prefix, k, rng):
    return _float32_round(p_fn, q_fn, prefix, k, rng, ratio=lambda px, qx: np.float16(px) / np.float16(qx))


def bfloat16_coins(p_fn, q_fn, prefix, k, rng):
    return _float32_round(p_fn, q_fn, prefix, k, rng, coin=lambda t: F32(round_to(t, "bfloat16")))


def float16_cumsum(p_fn, q_fn, prefix, k, rng):
    return _float32_round(
        p_fn, q_fn, prefix, k, rng, cumsum=lambda w: np.cumsum(w.astype(np.float16), dtype=np.float16)
    )


NARROW_FROM = 2048
"""``rounding/float16-ratio-wide`` computes its ratio in float16 over more ids than this."""


def float16_ratio_past(p, q, x, rng) -> bool:
    """The rule's coin, its ratio p(x) / q(x) computed in float16 when p has more than
    ``NARROW_FROM`` ids (a q(x) that float16 rounds to 0 accepts), as a Python float."""
    if len(p) <= NARROW_FROM:
        return accepts(p, q, x, rng)
    px, qx = float(np.float16(p[x])), float(np.float16(q[x]))
    return bool(rng.random() < (min(1.0, px / qx) if qx > 0 else 1.0))


def float16_ratio_wide(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, accept=float16_ratio_past)


def bfloat16_rule(p_fn, q_fn, prefix, k, rng):
    """The token-wise rule in bfloat16: rows, ratio and residual rounded to bfloat16 after each
    operation (``round_to``, torch's rounding), each coin a uniform on bfloat16's grid of [0, 1)
    compared with the bfloat16 ratio (``laws.rounding.coin``: u < ratio for u in steps of 2^-8, as
    ``torch.rand(dtype=torch.bfloat16) < ratio``), tokens drawn from the bfloat16 rows' values."""
    prefix, drafts, qs = tuple(prefix), [], []

    def row(fn, context):
        return round_to(fn(context), "bfloat16")

    def pick(w):
        return int(rng.choice(len(w), p=w / w.sum()))

    for _ in range(k):
        qs.append(row(q_fn, prefix + tuple(drafts)))
        drafts.append(pick(qs[-1]))
    for i, x in enumerate(drafts):
        p = row(p_fn, prefix + tuple(drafts[:i]))
        ratio = min(1.0, float(round_to(p[x] / qs[i][x], "bfloat16")))
        precision.note("bfloat16")  # the coin's precision: no NumPy dtype shows it (module docstring)
        if not coin(rng.random(), ratio, "bfloat16"):
            residual = round_to(np.maximum(p - qs[i], 0.0), "bfloat16")
            return drafts[:i] + [pick(residual if residual.sum() > 0 else p)]
    return drafts + [pick(row(p_fn, prefix + tuple(drafts)))]


_S = "specverify"
_LEVIATHAN = "arXiv 2211.17192"

ROUNDING_CONTROLS: tuple[Mutant, ...] = (
    Mutant("control/float32-rule", "the token-wise rule in float32 throughout (rows, ratio, residual, "
           "cumulative sums, uniforms): exact at float32 rounding", "exact", float32_rule, _LEVIATHAN, _S),
    Mutant("control/bfloat16-rule", "the token-wise rule in bfloat16 (rows, ratio, residual, bfloat16-grid coins): "
           "exact at bfloat16 rounding", "exact", bfloat16_rule, _LEVIATHAN, _S),
)  # fmt: skip

ROUNDING_MUTANTS: tuple[Mutant, ...] = (
    Mutant("rounding/float16-ratio", "float32 code with the acceptance ratio in float16", "biased",
           float16_ratio, "lablup/mlxcel#992", "real-world"),
    Mutant("rounding/bfloat16-coins", "float32 code with each coin's threshold rounded to bfloat16",
           "biased", bfloat16_coins, None, _S),
    Mutant("rounding/float16-cumsum", "float32 code with the residual's cumulative sum in float16",
           "biased", float16_cumsum, None, _S),
    Mutant("rounding/float16-ratio-wide", f"float64 code with the acceptance ratio in float16 past V {NARROW_FROM}",
           "biased", float16_ratio_wide, None, _S),
)  # fmt: skip

__all__ = ["ROUNDING_CONTROLS", "ROUNDING_MUTANTS"]
