"""The same verdict on an idle machine and a busy one, side by side in one run.

``specverify bench determinism [--target T | --engine NAME] [--budget B] [--seed S] [--busy N]``
runs one check twice: once as it is, once beside ``--busy`` CPU-bound processes (default 2: on a
2-core machine the check then gets about a third of the time). It prints both wall times, their
ratio and whether the two JSON reports are identical once the fields that time the run are
removed (``timing_free``). A verdict is a function of (subject, seed, budget) alone: the budget
fixes every case's run count and the clocks only guard against a hang (``battery.budgets``), so
"identical" is the only right answer; the ratio shows the load was real.

- ``--target pkg.mod:fn`` (or ``file.py:fn``): ``specverify check TARGET --json``, e.g. the
  transformers adapter ``specverify.adapters.hf:speculative_step`` (needs the ``models`` extra).
- ``--engine NAME``: one row of the engines table, ``specverify engines --engine NAME --json
  --offline`` (its wheel already cached), e.g. ``vllm-v0-rejection-round``.

Exit code 0 when the two reports agree, 1 when they differ (the keys that differ are printed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

TIMING_FIELDS = frozenset({"seconds", "cpu_seconds", "load_seconds", "elapsed_s", "wall_s"})
"""Fields that time a run (removed, at any depth, before the two reports are compared)."""
BUSY_LOOP = "while True: pass"


def timing_free(report):
    """``report`` (parsed JSON) without the fields that time the run, at any depth."""
    if isinstance(report, dict):
        return {k: timing_free(v) for k, v in report.items() if k not in TIMING_FIELDS}
    if isinstance(report, list):
        return [timing_free(v) for v in report]
    return report


def differing_keys(a, b, path: str = "") -> list[str]:
    """The paths (``power[2].runs``) where two parsed reports differ; empty when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}".lstrip(".") for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += differing_keys(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differing_keys(x, y, f"{path}[{i}]")]
    return [] if a == b else [path.lstrip(".") or "(the whole report)"]


def command(args) -> list[str]:
    """The check this benchmark runs twice, as an argv."""
    if args.engine:
        return [sys.executable, "-m", "specverify.engines", "--engine", args.engine, "--budget", args.budget,
                "--seed", str(args.seed), "--json", "--offline"]  # fmt: skip
    return [sys.executable, "-m", "specverify", "check", args.target, "--budget", args.budget,
            "--seed", str(args.seed), "--json"]  # fmt: skip


def timed_run(argv: list[str], busy: int) -> tuple[float, object, str]:
    """(wall seconds, parsed JSON stdout or None, stderr's tail) of ``argv`` beside ``busy``
    CPU-bound processes, which are killed afterwards whatever happens."""
    loaders = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(busy)]
    try:
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
    finally:
        for loader in loaders:
            loader.kill()
            loader.wait()
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        report = None
    return seconds, report, proc.stderr[-2000:]


def compare(argv: list[str], busy: int) -> dict:
    """Both runs and their comparison: {"idle_s", "busy_s", "busy", "identical", "differs",
    "report"}: ``report`` is the idle run's, without its timing fields (None without JSON)."""
    idle_s, idle, idle_err = timed_run(argv, 0)
    busy_s, loaded, busy_err = timed_run(argv, busy)
    out = {"idle_s": idle_s, "busy_s": busy_s, "busy": busy, "report": timing_free(idle)}
    if idle is None or loaded is None:
        why = idle_err if idle is None else busy_err
        return {**out, "identical": False, "differs": [f"no JSON: {why}"]}
    differs = differing_keys(out["report"], timing_free(loaded))
    return {**out, "identical": not differs, "differs": differs[:20]}


def render(args, result: dict) -> str:
    what = f"engines row {args.engine}" if args.engine else args.target
    lines = [
        f"determinism of {what} (budget {args.budget}, seed {args.seed}):",
        f"  idle:                     {result['idle_s']:8.1f} s",
        f"  beside {result['busy']} busy processes: {result['busy_s']:8.1f} s"
        f"  ({result['busy_s'] / max(result['idle_s'], 1e-9):.2f}x the idle time)",
        "  JSON apart from timings:  " + ("identical" if result["identical"] else "DIFFERENT"),
    ]
    lines += [f"    differs at {d}" for d in result["differs"]]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="specverify bench determinism",
        description="The same check idle and beside CPU-bound processes: the same JSON, apart from timings.",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--target", default="specverify:speculative_step", help="a check target (pkg.mod:fn)")
    which.add_argument("--engine", help="an engines-table row instead (its wheel cached: --offline)")
    parser.add_argument("--budget", default="standard", help="quick, standard or thorough (default: standard)")
    parser.add_argument("--seed", type=int, default=0, help="the check's seed, an integer >= 0 (default 0)")
    parser.add_argument("--busy", type=int, default=2, help="CPU-bound processes beside the second run")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(argv)
    if args.busy < 0:
        parser.error(f"--busy: expected an integer >= 0, got {args.busy}")
    if args.seed < 0:
        parser.error(f"--seed: expected an integer >= 0, got {args.seed}")
    result = compare(command(args), args.busy)
    shown = {k: v for k, v in result.items() if k != "report"}
    print(json.dumps(shown, indent=2) if args.json else render(args, result))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
