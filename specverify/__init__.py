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

# The API (specverify.api) and the Hypothesis strategies load on first use, so that
# ``import specverify`` stays light: NumPy and SciPy, never polars, matplotlib, rich or torch.
_LAZY = {"check": "api", "assert_exact": "api", "Report": "api", "campaign_runs": "api",
         "strategies": None, "api": None}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'specverify' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f".{_LAZY[name] or name}", __name__)
    value = module if _LAZY[name] is None else getattr(module, name)
    globals()[name] = value
    return value


__all__ = [
    "Report",
    "SAMPLERS",
    "acceptance_rate",
    "assert_exact",
    "best_k",
    "break_even_cost",
    "campaign_runs",
    "check",
    "expected_speedup",
    "expected_tokens",
    "get_sampler",
    "register",
    "speculative_step",
]
