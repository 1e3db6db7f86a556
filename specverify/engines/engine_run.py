"""Running rows: one row's dict (``run_engine``: load, judge, probe, replay, or a skip line) and
the rows of a chosen list (``run``)."""

from __future__ import annotations

import time
from collections.abc import Callable

from . import loader
from .engine_contract import AdapterError, short_signature
from .engine_probes import ONE_MINUS_F32, ONE_MINUS_F64, describe_probes, replays, run_probes
from .engine_row import Engine
from .engine_table import BUDGET_NAMES, BY_NAME, ENGINES, is_cached, not_cached_skip
from .engine_verdict import (
    edge_text,
    efficiency_text,
    how_text,
    judge,
    power_text,
    row_reach,
    short_counterexample,
    verdict_text,
)


def command(engine: Engine, budget: str) -> str:
    """The command line that reproduces the row."""
    return f"python -m specverify.engines --engine {engine.name} --budget {budget}"


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and its ended children (the subject processes the
    batteries start), user and system: a row's cost apart from what else the machine runs."""
    import resource

    mine, theirs = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + theirs.ru_utime + theirs.ru_stime


def unjudged_row(engine: Engine) -> dict:
    """The fields every row carries, before a verdict: what the row is, and no verdict yet."""
    return {
        "engine": engine.name,
        "package": engine.package,
        "version": engine.version,
        "function": engine.function,
        "interface": engine.interface,
        "expected": engine.expected,
        "exact": None,
        "verdict": None,
        "power": None,
    }


def run_engine(
    engine: Engine,
    budget: str = "quick",
    seed: int = 0,
    download: bool = True,
    stage: Callable | None = None,
    workers: int = 1,
) -> dict:
    """One row (a dict): the verdict and everything the table shows, or a skip line. ``download``
    False: the cache only (a row whose wheel is not cached is a skip line, nothing is fetched).
    ``stage(engine name, what it does now)`` is called as each stage starts; ``workers``:
    ``judge``'s."""
    say = (lambda words: stage(engine.name, words)) if stage else (lambda words: None)
    row = {**unjudged_row(engine), "command": command(engine, budget)}
    if engine.skip is not None:
        if engine.recheck is None:
            return {**row, "verdict": "skipped", "skipped": engine.skip}
        say(f"looking for a {engine.package} {engine.version} wheel")
        return {**row, "verdict": "skipped", "skipped": engine.recheck(engine, download)}
    if not download and not is_cached(engine):
        return {**row, "verdict": "skipped", "skipped": not_cached_skip(engine)}
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    say(f"loading {engine.package} {engine.version}" + ("" if is_cached(engine) else " (downloading its wheel)"))
    try:
        built = engine.build(download)
    except loader.Unavailable as exc:
        return {**row, "verdict": "skipped", "skipped": f"{engine.name}: {exc}"}
    except AdapterError as exc:
        return {**row, "verdict": "adapter error", "error": f"{engine.name}: adapter error: {exc}"}
    load_s = time.perf_counter() - t0
    say(f"judging ({engine.interface} battery, budget {budget})")
    report = judge(engine, built.subject, budget, seed, workers)
    from ..laws.rounding import summary_words  # here: the command's usage errors load no SciPy

    rounded = report.result.rounding  # one policy for every row: laws.rounding
    rounding = summary_words(rounded) if rounded.get("rounding_cases") else ""
    say("probing the measure-zero events and disagreements")
    facts = (
        run_probes(built.probe, ONE_MINUS_F64 if "float64" in engine.uniform_range else ONE_MINUS_F32)
        if built.probe
        else {}
    )
    mz, dis = describe_probes(facts, engine.uniform_range) if facts else ("", "")
    mz = f"{mz} (coins: {built.coins})" if mz else mz
    battery_edges = edge_text(report)
    say("checking that a seeded call replays")
    try:
        replay = "a seeded call replays" if replays(engine, built.subject) else "a seeded call does NOT replay"
    except Exception as exc:  # noqa: BLE001
        replay = f"replay check failed ({type(exc).__name__})"
    r = report.result
    reach, reach_note = row_reach(engine, budget, report)
    return {
        **row,
        "expected": engine.expected,
        "verdict": verdict_text(engine, report),
        "exact": report.exact,
        "power": power_text(r),
        "tv": r.exact_tv_max,
        "signature": short_signature(built.function) if built.function else "",
        "contract": built.feeds,
        "standins": built.standins,
        "how": how_text(report, engine.interface),
        "reach": reach,
        "reach_note": reach_note,
        "rounding": rounding,
        "efficiency": efficiency_text(r),
        "measure_zero": mz,
        "battery_edges": battery_edges,
        "disagreements": dis,
        "randomness": f"{engine.randomness}; {replay}",
        "uniforms": engine.uniform_range,
        "probe_coins": built.coins,
        "probes": facts,
        "findings": [f.to_dict() for f in r.findings if f.kind != "edge"][:8],
        "edge_findings": [f.message for f in r.findings if f.kind == "edge"][:8],
        "shortfalls": r.shortfalls[:4],
        "counterexample": short_counterexample(report.counterexample),
        "budget": report.budget,
        "coverage": report.coverage,
        "seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(cpu_seconds() - cpu0, 1),
        "load_seconds": round(load_s, 1),
    }


def run(
    names: list[str] | None = None,
    budget: str = "quick",
    seed: int = 0,
    download: bool = True,
    progress: Callable | None = None,
    stage: Callable | None = None,
    workers: int = 1,
) -> list[dict]:
    """Rows for ``names`` (all engines when None), in table order. ``download`` False: the cache
    only. ``stage(engine name, words)`` as each stage of a row starts; ``progress(row)`` as each
    row ends; ``workers``: processes per round row (``judge``)."""
    if budget not in BUDGET_NAMES:
        raise ValueError(f"budget: one of {', '.join(BUDGET_NAMES)}, got {budget!r}")
    chosen = ENGINES if not names else [BY_NAME[n] for n in names]
    rows = []
    for engine in chosen:
        row = run_engine(engine, budget, seed, download, stage, workers)
        if progress:
            progress(row)
        rows.append(row)
    return rows
