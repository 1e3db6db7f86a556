"""Real engines' samplers behind the handout's interface, so the detector battery can check them.

Each adapter is a function ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]`` that
calls an engine's own verification code (never a re-implementation of it), converting at the
boundary between our letters (p = target, q = draft) and the engine's:

* ``specverify.adapters.hf``: transformers' ``_speculative_sampling`` (plain, and its
  ``assistant_ensemble_weight`` mode, which relaxes the target on purpose);
* ``specverify.adapters.hf_loop``: transformers' ``generate(assistant_model=..., do_sample=True)``
  as a loop subject ``generate(target, draft, requests, k, rng)`` declaring the cases it can run;
  ``python -m specverify check-hf-generate`` (``hf_command``) is ``check`` of it, with a biased
  control that must be flagged;
* ``specverify.adapters.hf_generate``: ``check-hf-generate --tiny-qwen``, the same ``generate`` end
  to end on a tiny random Qwen2 pair, its findings added to that report.

The submodules import torch and transformers; this package imports nothing heavy, so
``import specverify.adapters`` works without them. See docs/ADAPTERS.md for the verdicts.
"""

ADAPTERS = {
    "hf": "specverify.adapters.hf:speculative_step",
    "hf-ensemble": "specverify.adapters.hf:ensemble_speculative_step",
}
"""Checker targets by short name: ``python -m specverify check <target>``."""

__all__ = ["ADAPTERS"]
