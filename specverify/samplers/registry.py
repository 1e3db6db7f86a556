"""The sampler registry: the interface's type, the samplers by name, ``register`` and
``get_sampler``. Its own module so that each sampler module registers itself without importing
the package that imports it (``specverify.samplers`` re-exports all four names)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol


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


__all__ = ["SAMPLERS", "Sampler", "get_sampler", "register"]
