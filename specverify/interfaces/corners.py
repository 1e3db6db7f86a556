"""The pairwise corners of the sweeps, what every interface's share: the cases at the joint
largest values of pairs of swept dimensions, at budgets whose ``sweep_corners`` is set (thorough,
and so ``tv=X``).

The sweeps (``round.cases.sweep_cases``, ``loop.sweeps.sweep_loop_cases``,
``kernel.sweeps.sweep_cases``) take one dimension at a time to its largest value with the others
small, so their cost stays linear in the number of dimensions; a bug that needs two sizes at once
(a cache cut short only in long rounds, a batch tile wrong only for long drafts) passes all of
them. A corner case puts both sizes at their largest, over a model whose law depends on what
either size could cut off, as the one-dimensional sweeps' do. Each interface's corners are its
own part: ``round.corners`` (context x k), ``loop.corners`` (context x rounds, x max_tokens, x
requests per batch), ``kernel.corners`` (k x batch, binned V x k); this module holds what they
share: the seed, the name prefix and the coverage words.

Every corner is built from the budget alone (fixed seeds: ``CORNER_SEED``), so a verdict stays a
function of (subject, seed, budget); each is judged as its interface's sweeps are (enumerated
within ``sweep_max_paths`` / ``extra_max_paths``, ``sweep_runs`` runs where sampled, exact from
uniforms), and its coverage origin is the sweeps'. Rule: Leviathan, Kalman, Matias (arXiv
2211.17192).
"""

from __future__ import annotations

CORNER_SEED = 19
"""The seed of every corner's tables: the same corners for every check's seed."""

CORNER_PREFIX = "corner"
"""The name prefix of every corner case (``kernel.sweeps.SWEEPS`` lists it: origin "sweep")."""


def corner_words(dimensions: list[str]) -> str:
    """The corners in a coverage line: "; pairwise corners context x k" ("" with none)."""
    return f"; pairwise corners {', '.join(dimensions)}" if dimensions else ""


__all__ = ["CORNER_PREFIX", "CORNER_SEED", "corner_words"]
