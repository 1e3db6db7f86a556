"""The engines table: its rows in order (``ENGINES``, from the ``*_rows`` modules, one per engine),
what each row needs here (``listing``, ``missing_torch``; loads no engine), and the table's text
(``render_table``, ``render_findings``) from the rows ``engine_run.run`` returns.

A new engine, or a new release of one, is a ``<engine>_rows`` module (its builders and its
``Engine`` rows, pinned in ``pins``) and one line in ``ENGINES``."""

from __future__ import annotations

import json

from ..errors import EnvironmentProblem
from . import loader
from .eagle_rows import EAGLE_ROWS
from .engine_row import Engine
from .engine_verdict import reach_text
from .flashinfer_rows import FLASHINFER_ROWS
from .lmdeploy_rows import LMDEPLOY_ROWS
from .medusa_rows import MEDUSA_ROWS
from .mlx_rows import MLX_ROWS
from .row_budgets import MODELS_EXTRA
from .sglang_rows import SGLANG_ROWS
from .trtllm_rows import TRTLLM_ROWS
from .vllm_rows import VLLM_ROWS
from .vllm_runner_v2_rows import VLLM_RUNNER_V2_ROWS

ENGINES = [
    *VLLM_ROWS,
    *VLLM_RUNNER_V2_ROWS,
    *SGLANG_ROWS,
    *LMDEPLOY_ROWS,
    *MLX_ROWS,
    *EAGLE_ROWS,
    *MEDUSA_ROWS,
    *TRTLLM_ROWS,
    *FLASHINFER_ROWS,
]
"""Every row, in table order."""
BY_NAME = {e.name: e for e in ENGINES}
BUDGET_NAMES = ("quick", "standard")


# ----------------------------------------------------------------------------- what a row needs


def runs_here(engine: Engine) -> bool:
    """Whether the row runs an engine's code (False: a fixed skip line)."""
    return engine.build is not None


def is_cached(engine: Engine) -> bool:
    """Whether the row's wheel (or the files it unpacks) is in the cache; looks only."""
    return loader.is_cached(engine.package, engine.version, engine.files)


def not_cached_skip(engine: Engine) -> str:
    """The skip line of a row whose wheel is not cached when downloads are off (``--offline``)."""
    return (
        f"{engine.name}: {engine.package}=={engine.version} is not cached (cache: {loader.cache_root()}) and "
        "--offline downloads nothing; run without --offline to fetch it"
    )


def missing_torch(engines: list[Engine]) -> str | None:
    """One line naming the extra to install when a row of ``engines`` needs torch and torch does
    not import here; None when torch imports or no row needs it. Imports torch (rows need it)."""
    if not any(runs_here(e) and "torch" in e.needs for e in engines):
        return None
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        why = (str(exc).splitlines() or [type(exc).__name__])[0]
        return f"torch is not importable ({why}); the engines' code needs it: {MODELS_EXTRA}"
    return None


def check_offline_cache(engines: list[Engine]) -> None:
    """``--offline``: EnvironmentProblem (one line: what to run to fill the cache) when rows of
    ``engines`` run engine code and none of their wheels is cached, so that nothing would run."""
    runnable = [e for e in engines if runs_here(e)]
    if runnable and not any(is_cached(e) for e in runnable):
        raise EnvironmentProblem(
            f"--offline: no wheel of the chosen rows is cached in {loader.cache_root()}; run the same "
            "command once without --offline to download them (specverify engines --list shows what is cached)"
        )


def listing(engines: list[Engine] | None = None) -> list[dict]:
    """One dict per row, for ``--list``: name, package, version, interface, what it needs and
    whether its wheel is cached. Loads no engine and no torch, downloads and creates nothing."""
    out = []
    for engine in ENGINES if engines is None else engines:
        cached = is_cached(engine)
        needs = list(engine.needs)
        if runs_here(engine) and not cached:
            needs.append("network for the first download")
        out.append(
            {
                "engine": engine.name,
                "package": engine.package,
                "version": engine.version,
                "interface": engine.interface,
                "needs": needs,
                "runs_here": runs_here(engine),
                "cached": cached,
            }
        )
    return out


def render_listing(rows: list[dict]) -> str:
    """``listing`` rows as aligned columns within ``tables.WIDTH`` (what each row needs wraps),
    with the cache directory on the last line."""
    from ..common import tables

    head = ("engine", "package", "interface", "needs", "cached")
    body = [
        (
            r["engine"],
            f"{r['package']}=={r['version']}",
            r["interface"],
            "; ".join(r["needs"]) if r["runs_here"] else "not run here: " + "; ".join(r["needs"]),
            "yes" if r["cached"] else "no",
        )
        for r in rows
    ]
    table = tables.render(head, body, shrink=(3,), min_widths={3: 20}, rule=False)
    return "\n".join([table, "", f"cache: {loader.cache_root()} ($SPECVERIFY_ENGINES_DIR)"])


# ----------------------------------------------------------------------------- the table


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def seconds_text(row: dict) -> str:
    """A row's wall seconds, and its CPU seconds where the row has them (``cpu_seconds``: what the
    row cost apart from what else the machine ran)."""
    cpu = row.get("cpu_seconds")
    return f"{row['seconds']} s" + (f", CPU {cpu} s" if cpu is not None else "")


def render_table(rows: list[dict]) -> str:
    """The markdown table (one row per judged engine function) and the skip lines below it."""
    head = (
        "| engine | version | function | verdict | power | how | efficiency | measure-zero events | "
        "where engines disagree | randomness | reproduce |"
    )
    lines = [head, "|" + "---|" * 11]
    skips = []
    for r in rows:
        if "skipped" in r or "error" in r:
            skips.append(f"- skipped: {r['skipped']}" if "skipped" in r else f"- error: {r['error']}")
            continue
        mz = r["measure_zero"] + (f"; {r['battery_edges']}" if r.get("battery_edges") else "")
        lines.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    r["engine"],
                    f"{r['package']} {r['version']}",
                    r["function"],
                    r["verdict"],
                    r["power"],
                    "; ".join(
                        x
                        for x in (
                            r.get("how", ""),
                            reach_text(r.get("reach", {}), r.get("reach_note", "")),
                            r.get("rounding", ""),
                        )
                        if x
                    ),
                    r["efficiency"],
                    mz,
                    r["disagreements"],
                    f"{r['randomness']}; uniforms {r['uniforms']}",
                    f"`{r['command']}` ({seconds_text(r)})",
                )
            )
            + " |"
        )
    return "\n".join(lines + ([""] + skips if skips else []))


def render_findings(rows: list[dict]) -> str:
    """Each row's first distribution finding and smallest counterexample, as JSON blocks."""
    out = []
    for r in rows:
        if "skipped" in r or "error" in r or not (r.get("findings") or r.get("counterexample")):
            continue
        out.append(f"### {r['engine']}\n")
        for f in r.get("findings", [])[:3]:
            out.append(f"- {f['kind']} ({f['check']}): {f['message'][:300]}")
        if r.get("counterexample"):
            out.append("\n```json\n" + json.dumps(r["counterexample"], indent=1, default=str)[:3000] + "\n```")
        out.append("")
    return "\n".join(out)
