"""specverify: verification and simulation suite for speculative decoding.

Notation: p = target, q = draft, k = drafted tokens per round, alpha = sum(min(p, q)),
c = draft step time / target step time.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the root stays import-light)
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

# Every public name loads on first use (``specverify.speculative_step`` imports the samplers,
# ``specverify.check`` the API), so that ``import specverify`` loads nothing but this file: a
# command line (``python -m specverify check``) parses its arguments, and reports a usage error,
# before NumPy or SciPy load. ``specverify.check`` and the rest load NumPy and SciPy, never
# polars, matplotlib, rich or torch.
_LAZY = {
    "check": "surface.api",
    "assert_exact": "surface.api",
    "Report": "surface.api",
    "campaign_runs": "surface.api",
    "SAMPLERS": "samplers",
    "get_sampler": "samplers",
    "register": "samplers",
    "speculative_step": "samplers.chain",
    "acceptance_rate": "laws.theory",
    "best_k": "laws.theory",
    "break_even_cost": "laws.theory",
    "expected_speedup": "laws.theory",
    "expected_tokens": "laws.theory",
    "strategies": "surface.strategies",
    "api": "surface.api",
    "errors": None,
}


def __getattr__(name: str) -> Any:
    """A name of ``_LAZY`` from its module (None: the module of that name), or a submodule
    (``specverify.laws.exact``), imported now and kept; AttributeError for anything else."""
    import importlib
    import importlib.util

    if name in _LAZY:
        target = _LAZY[name]
        module = importlib.import_module(f".{target or name}", __name__)
        value = module if target is None or target.endswith("." + name) else getattr(module, name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'specverify' has no attribute {name!r}")
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
