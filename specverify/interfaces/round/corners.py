"""The round interface's pairwise corner (``interfaces.corners`` says what a corner is and why):
context x k. A prefix of ``sweep_context - sweep_k + 1`` tokens (prefix and window reach the
context sweep's largest context), the first token 0 and every later one 1, k = ``sweep_k``, a
window of k + 1 tokens, over a first-token model (``first_token_chance_model``: the row is chosen
by the first token and the position) whose draft is one-hot and whose target has chance at 4
positions of the window only, so the enumeration stays small at any k; a sampler that shows the
target a window of the last W tokens reads first-token-1 rows there. Judged as the round sweeps
are (enumerated within ``sweep_max_paths``).
"""

from __future__ import annotations

import numpy as np

from ...laws.chains import FirstTokenModel, one_hot_draft_rows
from ..corners import CORNER_PREFIX, CORNER_SEED
from .cases import SWEEP_PERIOD, Case, get_budget


def first_token_chance_model(vocab: int, period: int, seed: int, chance: tuple[int, ...]) -> FirstTokenModel:
    """A ``chains.FirstTokenModel`` (the row chosen by the first token and the position modulo
    ``period``) whose draft is one-hot in every row and whose target is a random Dirichlet row at
    the positions in ``chance`` and equal to the draft elsewhere (accepted with certainty there):
    the law depends on the first token however long the context, and at most ``len(chance)``
    coins of chance keep the enumeration small at any k."""
    rows = vocab * period
    p, q = one_hot_draft_rows(vocab, rows, seed, np.isin(np.arange(rows) // vocab, chance))
    name = f"V{vocab}-first-token-one-hot-draft-period{period}-chance" + ",".join(map(str, chance))
    return FirstTokenModel(p, q, order=1, period=period, name=name)


def round_corner_cases(budget: object) -> list[Case]:
    """The round's corner (context x k, see the module's docstring), or none where the budget
    has no ``sweep_corners`` or does not sweep both."""
    b = get_budget(budget)
    if not (b.sweep_corners and b.sweep_context and b.sweep_k):
        return []
    k, period = b.sweep_k, SWEEP_PERIOD
    n = max(b.sweep_context - k + 1, 1)
    chance = tuple(sorted({(n + j) % period for j in (0, k // 2, k - 1, k)}))
    model = first_token_chance_model(2, period, CORNER_SEED, chance)
    prefix = (0,) + (1,) * (n - 1)
    name = f"{CORNER_PREFIX} context {n} x k={k}: {model.name}, {k + 1} tokens"
    return [Case(name, model, prefix, k, k + 1)]


__all__ = ["first_token_chance_model", "round_corner_cases"]
