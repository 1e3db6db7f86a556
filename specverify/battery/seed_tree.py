"""The seed tree every battery draws by: ``stream(seed, *path)``.

Every random number a battery draws comes from one node of the tree
of ``numpy.random.SeedSequence(seed)``, the check's seed: ``stream(seed, *path)`` is the node
``SeedSequence(seed, spawn_key=path)``, which is what ``SeedSequence(seed).spawn`` hands out
(``stream(seed, 2, 1)`` is ``SeedSequence(seed).spawn(3)[2].spawn(2)[1]``: the streams drawn by
spawn before are the same nodes, their figures unchanged). ``path[0]`` names the purpose, an
index of the interface's table (``round_cases.ROUND_STREAMS``, ``loop_cases.SEED_STREAMS``,
``kernel.KERNEL_STREAMS``), the rest is what that table says (a case, a look, a replayed seed, a
chunk); the root itself (``default_rng(seed)``) is the stream of each interface's contract or
replay check, as the tables say. Nothing is made by adding offsets to the seed, so no two
purposes, cases or looks share numbers, and a node's numbers depend only on the seed and its
path: a look of a case draws the same numbers whatever else the battery runs (an independent
unit of work).
"""

from __future__ import annotations

import numpy as np


def stream(seed: int | np.random.SeedSequence, *path: int) -> np.random.SeedSequence:
    """The node at ``path`` of ``SeedSequence(seed)``'s tree (the module's docstring): ``seed``
    an int (the check's seed), or a ``SeedSequence`` node, whose path this extends (its child
    ``path[0]``, that one's child ``path[1]``, ...). ``stream(seed)`` is the root."""
    if isinstance(seed, np.random.SeedSequence):
        return np.random.SeedSequence(
            seed.entropy, spawn_key=tuple(seed.spawn_key) + tuple(int(i) for i in path), pool_size=seed.pool_size
        )
    return np.random.SeedSequence(int(seed), spawn_key=tuple(int(i) for i in path))


__all__ = ["stream"]
