"""The mutant catalogue: every known way to get speculative sampling wrong, and the negative
controls that are exact but less efficient. ``python -m specverify.mutants report`` runs them all
through the detector battery (specverify.interfaces.round.battery).

- catalogue.py: the single-chain mutants and the controls (handout §5 and real engines' bugs);
- multi_draft.py: tree, adaptive-k and greedy-verification mutants;
- rules.py: block verification and multi-draft selection mutants, the match-target-sample dispute;
- loop_mutants.py: generation-loop mutants and controls (``interface="loop"``: the loop battery
  judges them); loop_mechanism_mutants.py: the same for the machinery around the rule (pools,
  mixed batches, consecutive calls, zero-draft rounds, per-row state, penalties at scale);
- kernel_mutants.py: batched verification-kernel mutants and controls (``interface="kernel"``: the
  kernel battery judges them, exactly from explicit uniforms);
- index.py: ``ALL`` (the whole catalogue) and ``get(id)``; command.py: the command line;
  report.py: the report.

The catalogue loads on first use (``specverify.mutants.ALL``, ``from specverify.mutants import
get``): ``python -m specverify.mutants`` parses its command line (``command.py``) and reports a
usage error before the catalogue, NumPy or SciPy load.
"""

_LAZY = {
    "ALL": "index",
    "get": "index",
    "Mutant": "catalogue",
    "MUTANTS": "catalogue",
    "CONTROLS": "catalogue",
    "KERNEL_CONTROLS": "kernel_mutants",
    "KERNEL_MUTANTS": "kernel_mutants",
    "LOOP_CONTROLS": "loop_mutants",
    "LOOP_ENGINE_CONTROLS": "loop_engine_mutants",
    "LOOP_ENGINE_MUTANTS": "loop_engine_mutants",
    "LOOP_MECHANISM_CONTROLS": "loop_mechanism_mutants",
    "LOOP_MECHANISM_MUTANTS": "loop_mechanism_mutants",
    "LOOP_MUTANTS": "loop_mutants",
    "MULTI_DRAFT_MUTANTS": "multi_draft",
    "RULE_CONTROLS": "rules",
    "RULE_MUTANTS": "rules",
}


def __getattr__(name):
    """A name of ``_LAZY`` from its module, imported now and kept; AttributeError otherwise
    (a submodule, ``specverify.mutants.report``, is imported as usual)."""
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'specverify.mutants' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = sorted(_LAZY)
