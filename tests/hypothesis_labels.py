"""hypothesis.event() labels shared by the properties over generated models.

`pytest --hypothesis-show-statistics` prints, per test, the share of generated examples that
carried each label, so a reader can see that the inputs cover what the properties claim: the
model's order and period, where it has zeros, k, and whether the window of emitted tokens was
long enough to reach the bonus token (or, for sampled rounds, whether one did).
"""

from __future__ import annotations

import numpy as np
from hypothesis import event


def label_zeros(p, q) -> None:
    """One of: zeros in p and q / zeros in p only / zeros in q only / no zeros."""
    zp, zq = bool(np.any(np.asarray(p) == 0)), bool(np.any(np.asarray(q) == 0))
    event(
        "zeros in p and q"
        if zp and zq
        else "zeros in p only"
        if zp
        else "zeros in q only"
        if zq
        else "no zeros in p or q"
    )


def label_model(model, k: int | None = None, m: int | None = None, *, lengths=None) -> None:
    """Label a generated TableModel: order, period, zeros, disjoint supports / p == q in some
    context; with k, the k; with m (tokens in the window), whether m > k, i.e. whether the
    window reaches the position of the first round's bonus token; with ``lengths`` (tokens per
    sampled round), whether some round actually emitted the bonus token (k + 1 tokens)."""
    event(f"order {model.order}")
    event(
        f"period {model.period}" + (" (position-dependent)" if model.period > 1 else " (same table at every position)")
    )
    label_zeros(model.p_table, model.q_table)
    if np.any(model.alphas() == 0):
        event("disjoint supports in some context")
    if np.any(np.all(model.p_table == model.q_table, axis=1)):
        event("p == q in some context")
    if k is None:
        return
    event(f"k {k}")
    if m is not None:
        event("window reaches the bonus token (m > k)" if m > k else "window ends before the bonus token (m <= k)")
    if lengths is not None:
        event(
            "a round emitted the bonus token"
            if np.any(np.asarray(lengths) == k + 1)
            else "no round emitted the bonus token"
        )
