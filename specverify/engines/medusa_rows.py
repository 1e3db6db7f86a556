"""Medusa's row (pinned ``pins.MEDUSA``): ``evaluate_posterior`` with typical acceptance, as a
round (lossy by design)."""

from __future__ import annotations

from . import pins
from .engine_probes import round_probe
from .engine_row import Built, Engine
from .row_budgets import FAST_ROUND


def _medusa(download: bool = True):
    from . import others, rounds

    module = others.load_medusa(download=download)
    step = rounds.medusa_round(module.evaluate_posterior, module.generate_candidates)
    return Built(step, round_probe(step.verify), "none needed (deterministic)")


MEDUSA_ROWS = [
    Engine(
        "medusa",
        *pins.MEDUSA[:2],
        "evaluate_posterior (medusa/model/utils.py), typical acceptance",
        "round",
        "lossy",
        "none (deterministic; next token = argmax)",
        _medusa,
        FAST_ROUND,
        files=pins.MEDUSA[2],
    ),
]
