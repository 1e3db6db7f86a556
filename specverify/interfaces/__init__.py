"""Subject interfaces as plug-ins: one registry that every entry point dispatches through.

An interface is a module of this package that owns how one kind of subject is called and judged:

- ``round``: the handout's ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``;
- ``loop``: a whole generation loop ``generate(target, draft, requests, k, rng) -> outputs``;
- ``kernel``: a batched verification kernel ``kernel(draft_ids[B,k], draft_probs[B,k,V],
  target_probs[B,k+1,V], uniforms[B,k+1] | generator) -> (output_ids[B,k+1], num_accepted[B])``.

Each module exposes ``NAME``, ``PARAMETERS`` (the parameter names its subjects use, for
detection), ``ALIASES`` (other spellings of the same parameters), ``coverage(budget)``,
``run(subject, budget, seed, *, deadline, stop_on_first, prefetched, **overrides) ->
BatteryResult``, ``counterexample(subject, budget, seed, result) -> dict | None`` and
``units(load, budget, stop_on_first) -> list`` (independent units for the Ray executor; empty
when the battery runs whole). ``api.check``, ``checker``, the pytest plugin and the mutant
report call ``get(name)`` and ``detect(fn)`` and never name an interface themselves.

Detection (``detect``) scores each interface by how many of a function's leading parameter
names it uses (aliases included) and takes the best; a tie, or a function whose names match no
interface, is a usage error that names ``--interface`` (``interface=`` in the API): a loop with
unusual parameter names is never judged as a round sampler by default.
"""

from __future__ import annotations

import importlib
import inspect

NAMES = ("round", "loop", "kernel")
"""Every registered interface, in the order ``--interface`` lists them."""


class InterfaceError(ValueError):
    """The interface could not be told from the subject, or its name is unknown (a usage error)."""


def get(name: str):
    """The interface module called ``name``; InterfaceError naming the known ones otherwise."""
    if not isinstance(name, str) or name not in NAMES:
        raise InterfaceError(f"interface: must be one of {', '.join(NAMES)}, got {name!r}")
    return importlib.import_module(f"{__name__}.{name}")


def _leading_names(fn) -> tuple[str, ...] | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def score(fn, name: str) -> int:
    """How many of ``fn``'s leading parameters are named as interface ``name`` names them."""
    module = get(name)
    names = _leading_names(fn) or ()
    wanted = module.PARAMETERS
    hits = 0
    for i, got in enumerate(names[:len(wanted)]):
        if got == wanted[i] or got in module.ALIASES.get(wanted[i], ()):
            hits += 1
    return hits


def detect(fn) -> str:
    """The interface ``fn`` is written for, by its parameter names; InterfaceError when it
    cannot be told (a tie, or no name of any interface), naming ``--interface``."""
    names = _leading_names(fn)
    if names is None:
        raise InterfaceError(f"interface: cannot read the parameters of {fn!r}; pass --interface "
                             f"({' | '.join(NAMES)})")
    scores = {name: score(fn, name) for name in NAMES}
    best = max(scores.values())
    winners = [n for n, s in scores.items() if s == best]
    if len(winners) == 1 and best >= 2:
        return winners[0]
    shapes = "; ".join(f"{n}: ({', '.join(get(n).PARAMETERS)})" for n in NAMES)
    raise InterfaceError(
        f"interface: cannot tell which interface a function with parameters ({', '.join(names)}) "
        f"is written for; pass --interface (interface= in the API): {shapes}")


__all__ = ["InterfaceError", "NAMES", "detect", "get", "score"]
