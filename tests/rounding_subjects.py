"""Round samplers in reduced precision, for the rounding policy's tests (``laws.rounding``).

``float32_rule``: the token-wise rule (Leviathan et al., arXiv 2211.17192) written plainly with
its probabilities, ratio and residual in float32, as an engine author writes it: exact at
float32 rounding. ``float16_ratio_rule``: the same code with only the acceptance ratio in
float16, a real bug class (lablup/mlxcel#992): NOT EXACT, its TV above float32 rounding.
EAGLE-1 in float32: ``rounding_eagle_subjects``.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32


def _row(fn, context) -> np.ndarray:
    return np.asarray(fn(context), dtype=F32)


def _pick(w: np.ndarray, rng) -> int:
    return int(rng.choice(len(w), p=w / w.sum()))


def _rule(p_fn, q_fn, prefix, k, rng, ratio):
    prefix, drafts, qs = tuple(prefix), [], []
    for _ in range(k):
        qs.append(_row(q_fn, prefix + tuple(drafts)))
        drafts.append(_pick(qs[-1], rng))
    for i, x in enumerate(drafts):
        p = _row(p_fn, prefix + tuple(drafts[:i]))
        if not rng.random() < min(F32(1), ratio(p[x], qs[i][x])):
            return drafts[:i] + [_pick(np.maximum(p - qs[i], F32(0)), rng)]
    return drafts + [_pick(_row(p_fn, prefix + tuple(drafts)), rng)]


def float32_rule(p_fn, q_fn, prefix, k, rng):
    """The token-wise rule in float32: drafts from float32 q, ratio p(x) / q(x) and the residual
    max(p - q, 0) in float32."""
    return _rule(p_fn, q_fn, prefix, k, rng, lambda px, qx: px / qx)


def float16_ratio_rule(p_fn, q_fn, prefix, k, rng):
    """``float32_rule`` with the acceptance ratio computed in float16."""
    return _rule(p_fn, q_fn, prefix, k, rng, lambda px, qx: np.float16(px) / np.float16(qx))
