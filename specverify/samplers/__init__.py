"""Every speculative sampler behind one interface, and a registry by name.

The interface is the handout's: ``sampler(p_fn, q_fn, prefix, k, rng) -> list[int]`` returns one
round of 1 to k + 1 tokens. ``p_fn`` / ``q_fn`` map a prefix tuple to a probability vector (the
target's and the draft's next-token distributions); all randomness comes from ``rng``, a
``numpy.random.Generator`` (or anything with its ``choice(n, p=...)`` and ``random()``).
Samplers with options are registered with their options bound (``functools.partial``).
Samplers know nothing of how they are checked.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

class Sampler(Protocol):
    def __call__(self, p_fn, q_fn, prefix: Sequence[int], k: int, rng) -> list[int]: ...

SAMPLERS: dict[str, Sampler] = {}

def register(name: str, sampler: Callable | None = None):
    """Register ``sampler`` under ``name`` (usable as a decorator)."""

    def add(fn):
        if name in SAMPLERS and SAMPLERS[name] is not fn:
            raise ValueError(f"name: sampler {name!r} is already registered")
        SAMPLERS[name] = fn
        return fn

    return add if sampler is None else add(sampler)

def get_sampler(name: str) -> Sampler:
    try:
        return SAMPLERS[name]
    except KeyError:
        known = ", ".join(sorted(SAMPLERS))
        raise ValueError(f"name: no sampler called {name!r} (known: {known})") from None

from .chain import speculative_step  # noqa: E402  (registers "chain")
from . import greedy  # noqa: E402,F401  (registers "greedy")
from . import tree  # noqa: E402,F401  (registers "tree-iid", "tree-without-replacement")
from . import adaptive  # noqa: E402,F401  (registers "adaptive-confidence", "adaptive-k")
from . import prompt_lookup  # noqa: E402,F401  (registers "prompt-lookup")
from . import block  # noqa: E402,F401  (registers "block")
from . import transport  # noqa: E402,F401  (registers "spectr", "canonical-ot")
from . import traversal  # noqa: E402,F401  (registers "traversal-iid", "traversal-without-replacement")

__all__ = ["SAMPLERS", "Sampler", "get_sampler", "register", "speculative_step"]
