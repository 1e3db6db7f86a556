"""The sampler registry: the interface's type, the samplers by name, ``register`` and
``get_sampler``. Its own module so that each sampler module registers itself without importing
the package that imports it (``specverify.samplers`` re-exports all four names)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, overload

import numpy as np

from ..laws.arrays import DistFn


class Sampler(Protocol):
    """The round interface (the handout's signature): ``speculative_step(p_fn, q_fn, prefix, k,
    rng) -> list[int]``, one round's 1 to k + 1 tokens."""

    def __call__(
        self, p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: np.random.Generator
    ) -> list[int]: ...


SamplerT = TypeVar("SamplerT", bound=Sampler)

SAMPLERS: dict[str, Sampler] = {}


@overload
def register(name: str) -> Callable[[SamplerT], SamplerT]: ...
@overload
def register(name: str, sampler: SamplerT) -> SamplerT: ...
def register(name: str, sampler: Sampler | None = None) -> Any:
    """Register ``sampler`` under ``name`` (usable as a decorator); it is returned as it was."""

    def add(fn: SamplerT) -> SamplerT:
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


__all__ = ["SAMPLERS", "Sampler", "SamplerT", "get_sampler", "register"]
