"""The whole catalogue in one tuple (``ALL``: the chain mutants, the multi-draft, rule, rounding, loop (the rule's steps and the machinery around it) and
kernel mutants, then the controls) and ``get(id)``; ``specverify.mutants`` re-exports both."""

from __future__ import annotations

from .catalogue import CONTROLS, MUTANTS, Mutant
from .kernel_mutants import KERNEL_CONTROLS, KERNEL_MUTANTS
from .loop_engine_mutants import LOOP_ENGINE_CONTROLS, LOOP_ENGINE_MUTANTS
from .loop_mechanism_mutants import LOOP_MECHANISM_CONTROLS, LOOP_MECHANISM_MUTANTS
from .loop_mutants import LOOP_CONTROLS, LOOP_MUTANTS
from .multi_draft import MULTI_DRAFT_MUTANTS
from .rounding_controls import ROUNDING_CONTROLS, ROUNDING_MUTANTS
from .rules import RULE_CONTROLS, RULE_MUTANTS

ALL: tuple[Mutant, ...] = (
    *MUTANTS,
    *(Mutant(**m) for m in MULTI_DRAFT_MUTANTS),
    *RULE_MUTANTS,
    *ROUNDING_MUTANTS,
    *CONTROLS,
    *RULE_CONTROLS,
    *ROUNDING_CONTROLS,
    *LOOP_MUTANTS,
    *LOOP_ENGINE_MUTANTS,
    *LOOP_MECHANISM_MUTANTS,
    *LOOP_CONTROLS,
    *LOOP_ENGINE_CONTROLS,
    *LOOP_MECHANISM_CONTROLS,
    *KERNEL_MUTANTS,
    *KERNEL_CONTROLS,
)


def get(mutant_id: str) -> Mutant:
    for m in ALL:
        if m.id == mutant_id:
            return m
    known = ", ".join(m.id for m in ALL)
    raise ValueError(f"no mutant with id {mutant_id!r}; known ids: {known}")


__all__ = [
    "ALL",
    "CONTROLS",
    "KERNEL_CONTROLS",
    "KERNEL_MUTANTS",
    "LOOP_CONTROLS",
    "LOOP_MECHANISM_CONTROLS",
    "LOOP_MECHANISM_MUTANTS",
    "LOOP_MUTANTS",
    "MUTANTS",
    "Mutant",
    "get",
]


__all__ = ["ALL", "get"]
