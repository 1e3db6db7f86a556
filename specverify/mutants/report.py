"""``python -m specverify.mutants report``: prove the detectors kill every catalogued mutant and
accuse no correct sampler.

Shaped after mutation-testing tools (mutmut, cosmic-ray): stable ids, a baseline run first (the
reference sampler must pass every detector), a forced-fail sanity check (the detectors must be
able to fail), then every mutant with killed / survived / error / timeout, and a non-zero exit
naming the culprits. Every row comes from ``specverify.detectors.run_battery``: the report only
renders what the one detector battery found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import polars as pl

from .. import detectors
from ..detectors import time_limit
from ..files import write_atomically
from ..samplers.chain import draft
from . import ALL, Mutant, get

BASELINE_ID = "baseline/reference"
SANITY_ID = "sanity/emit-drafts"
FORMATS = ("table", "markdown", "json", "csv")
STAT_CASES = 1  # the statistical detector runs on the handout's toy chain (plus any case the
STAT_N_MAX = 8000  # enumerator cannot follow), sequentially up to 8,000 runs: see detectors
EXACT_MAX_PATHS = 40_000  # per case; a case beyond it falls back to statistics
SHORT_CHECK_NAMES = {"exact-tv": "exact", "chi-square": "chi2", "tokens-per-round": "tokens",
                     "contract": "contract"}


def emit_drafts(p_fn, q_fn, prefix, k, rng):
    """The forced-fail subject: no verification at all. Every detector must flag it."""
    return draft(q_fn, tuple(prefix), k, rng)[0]


@dataclass
class Row:
    id: str
    effect: str
    status: str  # killed | survived | passed | accused | error | timeout
    killed_by: str
    exact_tv: float | None
    chi2_p_value: float | None
    samples_to_detect: int | None
    seconds: float
    description: str
    reference: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("killed", "passed")


def judge(effect: str, result: detectors.BatteryResult) -> tuple[str, str]:
    """Status and a detail line for a subject with the given expected effect."""
    wrong = result.flagged()
    slow = result.flagged(("efficiency",))
    if effect == "exact":  # negative control: no distribution or contract finding allowed
        return ("accused", wrong[0].message) if wrong else ("passed", "")
    if effect == "fewer-tokens":  # exact in distribution: killed only by tokens per round
        if wrong:
            return "accused", f"exact in distribution, yet: {wrong[0].message}"
        return ("killed", slow[0].message) if slow else ("survived", "tokens per round as theory")
    return ("killed", (wrong or slow)[0].message) if (wrong or slow) else ("survived", "")


def run_subject(mutant_id: str, effect: str, budget: str, seed: int, timeout: float) -> tuple:
    """Run one subject in a worker; returns (status, detail, BatteryResult dict or None, seconds)."""
    fn = {BASELINE_ID: detectors.speculative_step, SANITY_ID: emit_drafts}.get(mutant_id)
    fn = fn or get(mutant_id).fn
    t0 = time.perf_counter()
    try:
        with time_limit(timeout, f"the whole battery on {mutant_id}", TimeoutError):
            result = detectors.run_battery(
                fn, budget=budget, seed=seed, stat_cases=STAT_CASES, n_max=STAT_N_MAX,
                exact_max_paths=EXACT_MAX_PATHS, stop_on_first=effect not in ("exact", "fewer-tokens"))
    except TimeoutError as exc:
        return "timeout", str(exc), None, time.perf_counter() - t0
    except Exception as exc:  # a bug of ours, never the mutant's (the battery catches those)
        return "error", f"{type(exc).__name__}: {exc}", None, time.perf_counter() - t0
    status, detail = judge(effect, result)
    return status, detail, result.to_dict(), result.seconds


def make_row(subject: Mutant, outcome: tuple) -> Row:
    status, detail, result, seconds = outcome
    result = result or {}
    checks = sorted({f["check"] for f in result.get("findings", [])})
    return Row(
        id=subject.id, effect=subject.effect, status=status,
        killed_by=",".join(SHORT_CHECK_NAMES.get(c, c) for c in checks) if status == "killed" else "",
        exact_tv=result.get("exact_tv"), chi2_p_value=result.get("chi2_p_value"),
        samples_to_detect=result.get("samples_to_detect"), seconds=round(seconds, 2),
        description=subject.description, reference=subject.reference or "", detail=detail,
    )


def subjects(only: str | None) -> list[Mutant]:
    baseline = Mutant(BASELINE_ID, "the reference speculative_step", "exact",
                      detectors.speculative_step, "arXiv 2211.17192")
    sanity = Mutant(SANITY_ID, "forced fail: emit the drafts unverified", "biased", emit_drafts,
                    "handout §5")
    rest = [get(only)] if only else list(ALL)
    return [baseline, sanity, *rest]


def run_all(items: list[Mutant], budget: str, seed: int, timeout: float, workers: int,
            progress: bool) -> list[Row]:
    args = [(m.id, m.effect, budget, seed, timeout) for m in items]
    if workers <= 1:
        outcomes = [run_subject(*a) for a in _progress(args, progress)]
    else:
        # controls and the baseline run every case in full: start them first so that the two
        # workers finish together
        order = sorted(range(len(args)), key=lambda i: args[i][1] not in ("exact", "fewer-tokens"))
        with ProcessPoolExecutor(workers) as pool:
            futures = {i: pool.submit(run_subject, *args[i]) for i in order}
            for _ in _progress(as_completed(futures.values()), progress, total=len(args)):
                pass
            outcomes = [futures[i].result() for i in range(len(args))]
    return [make_row(m, o) for m, o in zip(items, outcomes)]


def _progress(items, enabled: bool, total: int | None = None):
    if not enabled:
        yield from items
        return
    from rich.progress import track

    yield from track(items, description="mutants", total=total, transient=True,
                     console=_stderr_console())


def _stderr_console():
    from rich.console import Console

    return Console(file=sys.stderr)


def to_frame(rows: list[Row]) -> pl.DataFrame:
    return pl.DataFrame(
        [{k: getattr(r, k) for k in ("id", "effect", "status", "killed_by", "exact_tv",
                                      "chi2_p_value", "samples_to_detect", "seconds")}
         for r in rows],
        schema_overrides={"exact_tv": pl.Float64, "chi2_p_value": pl.Float64,
                          "samples_to_detect": pl.Int64},
    )


def summary(rows: list[Row]) -> str:
    mutants = [r for r in rows[2:] if r.effect != "exact"]
    controls = [r for r in rows[2:] if r.effect == "exact"]
    killed = sum(r.status == "killed" for r in mutants)
    passed = sum(r.status == "passed" for r in controls)
    base, sanity = rows[0], rows[1]
    return (f"baseline {'passed' if base.status == 'passed' else 'FAILED'}, forced-fail "
            f"{'detected' if sanity.status == 'killed' else 'NOT DETECTED'}; "
            f"{killed}/{len(mutants)} mutants killed, {passed}/{len(controls)} controls passed; "
            f"{sum(r.seconds for r in rows):.0f} s of detector time")


def culprits(rows: list[Row]) -> list[Row]:
    return [r for r in rows if not r.ok]


def render(rows: list[Row], fmt: str, seed: int, budget: str) -> str:
    frame = to_frame(rows)
    if fmt == "json":
        return json.dumps({
            "seed": seed, "budget": budget, "summary": summary(rows),
            "ok": not culprits(rows),
            "rows": [r.__dict__ for r in rows],
        }, indent=2) + "\n"
    if fmt == "csv":
        return frame.write_csv()
    if fmt == "markdown":
        return _markdown(frame) + "\n\n" + summary(rows) + "\n"
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=160, fmt_str_lengths=60,
                   tbl_hide_dataframe_shape=True, float_precision=None):
        return f"{frame}\n{summary(rows)}\n"


def _markdown(frame: pl.DataFrame) -> str:
    def cell(v):
        if v is None:
            return ""
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m specverify.mutants",
                                 description="Run the mutant catalogue against the detectors.")
    sub = ap.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="baseline, forced fail, then every mutant and control")
    rep.add_argument("--format", choices=FORMATS, default="table")
    rep.add_argument("--out", help="write the report to this file (atomically) as well")
    rep.add_argument("--mutant", metavar="ID", help="run one mutant (besides baseline and sanity)")
    rep.add_argument("--seed", type=int, default=0)
    rep.add_argument("--budget", choices=("quick", "standard", "thorough"), default="standard")
    rep.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    rep.add_argument("--timeout", type=float, default=120.0, help="seconds per subject")
    sub.add_parser("list", help="list the catalogue's ids")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.command == "list":
        for m in ALL:
            print(f"{m.id:48s} {m.effect:13s} {m.description}")
        return 0
    if args.mutant:
        try:
            get(args.mutant)
        except ValueError as exc:
            print(f"specverify.mutants: --mutant: {exc}", file=sys.stderr)
            return 2
    progress = sys.stderr.isatty()
    rows = run_all(subjects(args.mutant), args.budget, args.seed, args.timeout, args.workers,
                   progress)
    text = render(rows, args.format, args.seed, args.budget)
    if args.out:
        write_atomically(args.out, text)
    sys.stdout.write(text)
    bad = culprits(rows)
    for r in bad:
        print(f"culprit: {r.id} ({r.effect}) {r.status}: {r.detail}", file=sys.stderr)
    return 1 if bad else 0
