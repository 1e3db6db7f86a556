"""EAGLE-1's rows (pinned ``pins.EAGLE``): ``evaluate_posterior`` on a chain and on a top-2 tree,
as rounds."""

from __future__ import annotations

from . import pins
from .engine_probes import round_probe
from .engine_row import Built, Engine
from .row_budgets import FAST_ROUND


def _eagle(download: bool = True):
    from . import others, rounds

    module = others.load_eagle(download=download)
    step = rounds.eagle_round(module.evaluate_posterior, module)
    return Built(step, round_probe(step.verify), "RNG injection: the module's global `random` returns the coin")


def _eagle_tree(download: bool = True):
    from . import others, rounds

    module = others.load_eagle(download=download)
    return Built(rounds.eagle_tree_round(module.evaluate_posterior, module), None, "")


EAGLE_ROWS = [
    Engine(
        "eagle1",
        *pins.EAGLE[:2],
        "evaluate_posterior (eagle/model/utils.py), chain",
        "round",
        "exact",
        "Python's global random.random() (coins) and torch.multinomial (emitted token)",
        _eagle,
        FAST_ROUND,
        uniform_range="[0, 1) (float64)",
        files=pins.EAGLE[2],
    ),
    Engine(
        "eagle1-tree",
        *pins.EAGLE[:2],
        "evaluate_posterior (eagle/model/utils.py), top-2 tree (two first drafts without replacement, each a chain)",
        "round",
        "exact",
        "Python's global random.random() (coins) and torch.multinomial (emitted token)",
        _eagle_tree,
        FAST_ROUND,
        uniform_range="[0, 1) (float64)",
        files=pins.EAGLE[2],
    ),
]
