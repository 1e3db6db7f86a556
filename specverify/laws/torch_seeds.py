"""The seeds of one followed torch run: which generator a torch draw may be followed from.

While ``laws.torch_random`` follows a run, ``rng.integers`` over more than ``max_branching``
outcomes (``int(rng.integers(2**63))``) gives a ``TorchSeed``, whose ``int()`` is a negative number
of its own, only to seed torch (``manual_seed``) or ``random.seed`` in its run, once each. A torch
draw is followed only from a generator (``generator=`` or the default) seeded, since last drawn
from, with a seed of this run not yet used for torch (``check_generator`` then reseeds it with a
marker, so that a seed set twice shows as reused); ``random.random()`` is followed only once
``random.seed`` took such a seed (``python_seeded``). A constant, missing or reused seed refuses
through ``rng.refuse`` (``NotEnumerable``: not independent draws), as does a seed that seeded no
draw by the run's end (``unused``, checked by the run).
"""

from __future__ import annotations

import functools
import itertools
import random as pyrandom

import torch

_SEEDS = itertools.count()  # seeds and generator markers, unique in the process
_UNSEEDED = "a torch draw from a generator not seeded, in this run, with a fresh seed from rng.integers"


class TorchSeed:
    """A seed for torch or ``random.seed`` (module docstring): ``int()`` gives it; no arithmetic,
    comparison or index (their TypeError, the seed unused, ends the run as NotEnumerable)."""

    def __init__(self, value: int):
        self.value = value

    def __int__(self):
        return self.value


class RunSeeds:
    """The seeds one run handed out and the generators they seeded (module docstring)."""

    def __init__(self, rng):
        self.rng, self.python_seeded = rng, False
        self.seeds: dict[int, set] = {}  # this run's seeds (as uint64) -> the uses left: torch, python
        self.markers: dict[int, tuple] = {}  # id(generator) -> (generator, the seed we left it with)

    def token(self) -> TorchSeed:
        """A fresh seed of this run, for torch and for ``random.seed`` once each (what
        ``EnumeratingRng.integers`` returns for a range it cannot branch over)."""
        value = -(1 << 62) - next(_SEEDS)
        self.seeds[value % (1 << 64)] = {"torch", "python"}
        return TorchSeed(value)

    def _use(self, key, use: str, refusal: str) -> None:
        if use not in self.seeds.get(key, ()):
            self.rng.refuse(refusal)
        self.seeds[key].discard(use)

    def python_seed(self, a=None, version=2):
        """``random.seed`` while followed: only a seed of this run, used once."""
        key = int(a) % (1 << 64) if isinstance(a, (int, TorchSeed)) else None
        self._use(key, "python", "random.seed with a value that is not a fresh seed from rng.integers in this run")
        self.python_seeded = True

    def python_refusal(self, name: str, *args, **kwargs):
        """Python's ``random.<name>`` other than ``seed`` and ``random`` while followed: refused."""
        self.rng.refuse(f"Python's random.{name} is not modelled by the exact enumerator")

    def check_generator(self, kwargs) -> None:
        """Check the generator a draw reads: seeded from this run's rng since this run last drew
        from it. Then reseed it with a marker of ours, so that a seed set twice shows as reused."""
        gen = kwargs.get("generator") or torch.default_generator
        if gen.device.type != "cpu":
            self.rng.refuse(f"a torch draw on {gen.device} is not modelled (CPU generators only)")
        key = gen.initial_seed()
        if self.markers.get(id(gen), (None, None))[1] != key:
            self._use(key, "torch", _UNSEEDED)
        marker = -(1 << 62) - next(_SEEDS)
        self.markers[id(gen)] = (gen.manual_seed(marker), marker % (1 << 64))

    def unused(self) -> bool:
        """Whether a seed of this run seeded neither torch nor ``random``."""
        return any(len(uses) == 2 for uses in self.seeds.values())


@functools.cache
def python_random_names() -> tuple[str, ...]:
    """The functions of Python's ``random`` module that are methods of its hidden ``Random``
    (the ones a followed run replaces), as the module first had them."""
    return tuple(
        name
        for name in getattr(pyrandom, "__all__", ())
        if isinstance(getattr(getattr(pyrandom, name), "__self__", None), pyrandom.Random)
    )


__all__ = ["RunSeeds", "TorchSeed", "python_random_names"]
