"""The round interface's own figures in a battery result (``BatteryResult.figures``): next to each
tokens-per-round case's measured and expected tokens per round (``BatteryResult.mean_tokens_per_round``,
which every interface fills), the most any exact rule gets there. They are information beside
``efficient``, never a finding: the token-wise rule stays the bar for ``efficient``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RoundFigures:
    """``optimum_tokens_per_round``: case name -> block verification's tokens per round, the most
    any exact rule gets from one chain of k drafts (``round.optimum.optimum_tokens_per_round``);
    ``tree_optimum_tokens_per_round``: case name -> a width-2 draft tree's with every node at the
    transport LP's optimum (``round.optimum.nodewise_optimum_tokens_per_round``), the bar for
    multi-draft samplers verified node by node. ``check --json`` carries both under
    ``"figures"``."""

    optimum_tokens_per_round: dict[str, float] = field(default_factory=dict)
    tree_optimum_tokens_per_round: dict[str, float] = field(default_factory=dict)


__all__ = ["RoundFigures"]
