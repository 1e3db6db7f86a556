"""The mutant catalogue: every known way to get speculative sampling wrong, and the negative
controls that are exact but less efficient. ``python -m specverify.mutants report`` runs them all
through the detector battery (specverify.interfaces.round).

- catalogue.py: the single-chain mutants and the controls (handout §5 and real engines' bugs);
- multi_draft.py: tree, adaptive-k and greedy-verification mutants;
- rules.py: block verification and multi-draft selection mutants, the match-target-sample dispute;
- loop.py: generation-loop mutants and controls (``interface="loop"``: the loop battery judges them);
- kernel.py: batched verification-kernel mutants and controls (``interface="kernel"``: the kernel
  battery judges them, exactly from explicit uniforms).
"""

from __future__ import annotations

from .catalogue import CONTROLS, MUTANTS, Mutant
from .kernel import KERNEL_CONTROLS, KERNEL_MUTANTS
from .loop import LOOP_CONTROLS, LOOP_MUTANTS
from .multi_draft import MULTI_DRAFT_MUTANTS
from .rules import RULE_CONTROLS, RULE_MUTANTS

ALL: tuple[Mutant, ...] = (
    *MUTANTS,
    *(Mutant(**m) for m in MULTI_DRAFT_MUTANTS),
    *RULE_MUTANTS,
    *CONTROLS,
    *RULE_CONTROLS,
    *LOOP_MUTANTS,
    *LOOP_CONTROLS,
    *KERNEL_MUTANTS,
    *KERNEL_CONTROLS,
)


def get(mutant_id: str) -> Mutant:
    for m in ALL:
        if m.id == mutant_id:
            return m
    known = ", ".join(m.id for m in ALL)
    raise ValueError(f"no mutant with id {mutant_id!r}; known ids: {known}")


__all__ = ["ALL", "CONTROLS", "KERNEL_CONTROLS", "KERNEL_MUTANTS", "LOOP_CONTROLS", "LOOP_MUTANTS", "MUTANTS",
           "Mutant", "get"]
