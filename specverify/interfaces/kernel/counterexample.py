"""The kernel's counterexample: the smallest flagged instance, found during the run (no search
afterwards), as a kernel developer reads it: the instance's tensors and the laws of (accepted
drafts, emitted token) side by side.
"""

from __future__ import annotations

import numpy as np


def row_text(v: np.ndarray, limit: int = 8):
    """A probability row as the counterexample shows it: every entry of a short row, else its
    ``limit`` largest by id."""
    if len(v) <= limit:
        return [round(float(x), 6) for x in v]
    top = np.argsort(-v)[:limit]
    return {int(i): round(float(v[i]), 6) for i in sorted(top)}


def describe(flagged) -> dict:
    """A finding as a kernel developer reads it: the instance's tensors (their names) and the
    laws of (accepted drafts, emitted token) side by side."""
    _, case, b, got, want, tv, method, n = flagged
    xs = case.drafts(b)
    keys = sorted(set(got) | set(want), key=lambda key: -abs(got.get(key, 0) - want.get(key, 0)))
    return {
        "method": "exact" if method == "exact" else "statistical",
        "vocab_size": case.vocab_size,
        "k": case.k,
        "window": case.k + 1,
        "prefix": [],
        "model": f"{case.name}: {case.labels[b]}",
        "draft_ids": list(xs),
        "p": [row_text(case.p[b, i]) for i in range(len(xs) + 1)],
        "q": [row_text(case.q[b, i]) for i in range(len(xs))],
        ("exact_tv" if method == "exact" else "empirical_tv"): tv,
        "samples": n,
        "distributions": [
            {
                "tokens": list(xs[:j]) + [y],
                "sampler": round(float(got.get((j, y), 0.0)), 9),
                "target": round(float(want.get((j, y), 0.0)), 9),
            }
            for j, y in keys[:64]
        ],
    }


__all__ = ["describe", "row_text"]
