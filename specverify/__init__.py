"""specverify: verification and simulation suite for speculative decoding.

Notation: p = target, q = draft, k = drafted tokens per round, alpha = sum(min(p, q)),
c = draft step time / target step time.
"""

from .samplers import SAMPLERS, get_sampler, register
from .samplers.chain import speculative_step
from .theory import (
    acceptance_rate,
    best_k,
    break_even_cost,
    expected_speedup,
    expected_tokens,
)

__version__ = "0.1.0"

__all__ = [
    "SAMPLERS",
    "acceptance_rate",
    "best_k",
    "break_even_cost",
    "expected_speedup",
    "expected_tokens",
    "get_sampler",
    "register",
    "speculative_step",
]
