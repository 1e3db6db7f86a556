"""Every speculative sampler behind one interface, and a registry by name.

The interface is the handout's: ``sampler(p_fn, q_fn, prefix, k, rng) -> list[int]`` returns one
round of 1 to k + 1 tokens. ``p_fn`` / ``q_fn`` map a prefix tuple to a probability vector (the
target's and the draft's next-token distributions); all randomness comes from ``rng``, a
``numpy.random.Generator`` (or anything with its ``choice(n, p=...)`` and ``random()``).
Samplers with options are registered with their options bound (``functools.partial``).
Samplers know nothing of how they are checked. The registry is ``samplers.registry`` (each
sampler module registers itself there, and this package imports them all).
"""

from __future__ import annotations

from . import (
    adaptive,  # noqa: F401  (registers "adaptive-confidence", "adaptive-k")
    block,  # noqa: F401  (registers "block")
    greedy,  # noqa: F401  (registers "greedy")
    prompt_lookup,  # noqa: F401  (registers "prompt-lookup")
    transport,  # noqa: F401  (registers "spectr", "canonical-ot")
    traversal,  # noqa: F401  (registers "traversal-iid", "traversal-without-replacement")
    tree,  # noqa: F401  (registers "tree-iid", "tree-without-replacement")
)
from .chain import speculative_step  # (registers "chain")
from .registry import SAMPLERS, Sampler, get_sampler, register

__all__ = ["SAMPLERS", "Sampler", "get_sampler", "register", "speculative_step"]
