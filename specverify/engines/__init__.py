"""Real engines' own verification code, judged: a table of verdicts anyone can rerun.

``python -m specverify.engines [--engine NAME] [--json] [--budget quick|standard]`` downloads
pinned engine wheels without their dependencies (``loader.fetch``), loads each engine's
verification module unmodified from the downloaded files (small documented stand-ins for imports
that need CUDA or a server: ``vllm.py``, ``others.py``), wraps it in the kernel interface
(``adapters.kernels``) or the round interface (``rounds``), runs the battery on it and prints one
row per engine, version and function. Engines that cannot be fetched or imported here are one
skip line each. Nothing of an engine's code is in this package: it is read from the wheel at run
time. ``download=False`` (``--offline``) reads the cache only, for every row; ``listing``
(``--list``) says what each row needs and whether its wheel is cached without loading torch; the
command's progress lines are ``heartbeat``'s.

Each row: the verdict (exact / not exact / inconclusive, with the power the run had), tokens
per round against the token-wise rule, the measure-zero events (u = 0 and u = 1 - 2^-24 on the
float32 grid, controlled through explicit uniforms or by RNG injection at the engine's own
uniform-drawing function), the behaviours where engines disagree (a drafted token with q(x) = 0,
an empty residual), where the randomness comes from, and the command that reproduces the row.

Where things are: ``engine_row`` (what a row is: ``Engine``, ``Built``), one ``<engine>_rows``
module per engine (``vllm_rows``, ``sglang_rows``, ``eagle_rows``, ``medusa_rows``,
``trtllm_rows``, ``flashinfer_rows``: its builders and rows) with the budgets they pick
(``row_budgets``), ``engine_table`` (the rows in order, what each needs, the table's text),
``engine_probes`` (the disagreement probes and the replay check), ``engine_verdict`` (the battery's
report and its words) and ``engine_run`` (one row, and the chosen rows). A new engine or release
is one new ``<engine>_rows`` module plus its line in ``engine_table.ENGINES``. This ``__init__``
only re-exports the names callers use.
"""

from __future__ import annotations

from . import loader, pins
from .engine_probes import (
    ONE_MINUS_F32,
    ONE_MINUS_F64,
    PROBE_V,
    describe_probes,
    kernel_probe,
    probe_cases,
    replays,
    round_probe,
    run_probes,
)
from .engine_row import Built, Engine
from .engine_run import command, run, run_engine
from .engine_table import (
    BUDGET_NAMES,
    BY_NAME,
    ENGINES,
    is_cached,
    listing,
    missing_torch,
    not_cached_skip,
    render_findings,
    render_listing,
    render_table,
    runs_here,
)
from .engine_verdict import judge, reach_text, row_reach
from .row_budgets import FAST_KERNEL, FAST_ROUND, MODELS_EXTRA, NEEDS_TRITON, SLOW_ROUND, TRITON_KERNEL, TRITON_SWEEPS

__all__ = [
    "BUDGET_NAMES",
    "BY_NAME",
    "ENGINES",
    "FAST_KERNEL",
    "FAST_ROUND",
    "MODELS_EXTRA",
    "NEEDS_TRITON",
    "ONE_MINUS_F32",
    "ONE_MINUS_F64",
    "PROBE_V",
    "SLOW_ROUND",
    "TRITON_KERNEL",
    "TRITON_SWEEPS",
    "Built",
    "Engine",
    "command",
    "describe_probes",
    "is_cached",
    "judge",
    "kernel_probe",
    "listing",
    "loader",
    "missing_torch",
    "not_cached_skip",
    "pins",
    "probe_cases",
    "reach_text",
    "render_findings",
    "render_listing",
    "render_table",
    "replays",
    "round_probe",
    "row_reach",
    "run",
    "run_engine",
    "run_probes",
    "runs_here",
]
