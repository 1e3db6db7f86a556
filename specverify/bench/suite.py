"""``python -m specverify.bench [--json] [--quick] [--markdown PATH]``: how fast the suite is.

Everything is measured side by side in one run and reported as ratios as well as seconds, since
the shared machines this runs on are noisy (absolute rates move by 2x between runs; ratios of
things timed back to back move far less):

- batched_vs_loop: rounds per second of the batched simulator against a Python loop over
  ``speculative_step`` (``samplers.batched.benchmark_batched_vs_loop``);
- exact_enumeration: ``exact.sampler_distribution`` of the reference on random first-order
  chains, by k, vocabulary size V and window m, with the number of paths, capped per cell;
- check: ``api.check`` (the detector battery plus the counterexample search, as the CLI
  runs it) on the reference, mutants and negative controls: seconds, samples the statistical
  detector needed, verdicts;
- power: the smallest TV the suite's tests and the handout's fixed test detect at 30,000 runs
  (specverify.laws.stats via specverify.experiments.analytic.detectable_tvs).

``--markdown docs/BENCHMARKS.md`` writes the committed report (regenerate it that way).

The battery, the mutants, the experiments (matplotlib, polars) and SciPy are imported by the
functions that use them, after the command line is parsed, so that a usage error is quick.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time

CHECK_SUBJECTS = (
    "rejection/resample-from-p",
    "draft/temperature-draft-only",
    "draft/low-precision",
    "bonus/no-bonus-token",
    "control/greedy-draft-one-hot-q",
    "control/product-form-acceptance",
)
QUICK_CHECK_SUBJECTS = ("rejection/resample-from-p", "control/product-form-acceptance")
ENUMERATION_CAP_S = 5.0  # seconds per (k, V, m) cell before it is reported as capped
ENUMERATION_MAX_PATHS = 300_000


def machine() -> dict:
    """nproc, CPU model (/proc/cpuinfo), Python and NumPy versions, date (UTC)."""
    import numpy as np

    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "nproc": nproc,
        "cpu_model": model,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def bench_batched(quick: bool) -> dict:
    from ..samplers.batched import benchmark_batched_vs_loop

    if quick:
        return benchmark_batched_vs_loop(n_rounds_batched=100_000, n_rounds_loop=2_000)
    return benchmark_batched_vs_loop(n_rounds_batched=1_000_000, n_rounds_loop=20_000)


def time_enumeration(vocab: int, k: int, m: int, cap_s: float = ENUMERATION_CAP_S) -> dict:
    """Seconds and paths to enumerate m tokens of the reference on a random chain, or capped."""
    from ..battery.guards import time_limit
    from ..laws import exact
    from ..laws.chains import random_model
    from ..samplers.chain import speculative_step

    model, paths = random_model(vocab, 1, 1, 1000 * vocab + k), [0]

    def counted(p_fn, q_fn, prefix, k, rng):  # one call per enumerated path
        paths[0] += 1
        return speculative_step(p_fn, q_fn, prefix, k, rng)

    row = {"vocab": vocab, "k": k, "window": m}
    start = time.perf_counter()
    try:
        with time_limit(cap_s, "exact enumeration", exact.NotEnumerable):
            dist = exact.sampler_distribution(
                counted, model.p_fn, model.q_fn, (0,), k, m, max_paths=ENUMERATION_MAX_PATHS
            )
        tv = exact.total_variation(dist, exact.sequence_distribution(model.p_fn, (0,), m))
        row.update(status="ok", outcomes=len(dist), exact_tv=tv)
    except exact.NotEnumerable as exc:
        row.update(status=f"capped: {exc}"[:80], outcomes=None, exact_tv=None)
    row.update(seconds=time.perf_counter() - start, paths=paths[0])
    return row


def bench_exact_enumeration(quick: bool) -> list[dict]:
    vocabs, ks, windows = ((2, 3), (1, 2, 3), (2,)) if quick else ((2, 3, 4), range(1, 6), (2, 3))
    rows = [time_enumeration(v, k, m) for m in windows for v in vocabs for k in ks]
    base = rows[0]["seconds"]
    for row in rows:
        row["ratio_to_smallest"] = row["seconds"] / base
    return rows


def bench_check(quick: bool, budget: str | None = None) -> list[dict]:
    """``api.check`` on the reference and each subject; seconds relative to the reference."""
    from .. import mutants
    from ..samplers.chain import speculative_step
    from ..surface import api

    budget = budget or ("quick" if quick else "standard")
    subjects = [("reference/speculative_step", "exact", speculative_step)]
    subjects += [(m.id, m.effect, m.fn) for m in map(mutants.get, QUICK_CHECK_SUBJECTS if quick else CHECK_SUBJECTS)]
    rows = []
    for name, effect, fn in subjects:
        start = time.perf_counter()
        report = api.check(fn, target=name, budget=budget).to_dict()
        rows.append(
            {
                "sampler": name,
                "effect": effect,
                "budget": budget,
                "seconds": time.perf_counter() - start,
                "exact": report["exact"],
                "efficient": report["efficient"],
                "findings": len(report["findings"]),
                "exact_tv_max": report["exact_tv_max"],
                "samples_to_detect": report["samples_to_detect"],
            }
        )
    for row in rows:
        row["seconds_vs_reference"] = row["seconds"] / rows[0]["seconds"]
    return rows


def bench_power() -> list[dict]:
    from ..experiments.analytic import HANDOUT_N, detectable_tvs

    return detectable_tvs(HANDOUT_N).to_dicts()


def run_bench(quick: bool = False, budget: str | None = None) -> dict:
    """Every measurement above, as one dict with named fields."""
    from ..battery.budgets import NAMES

    if budget is not None and budget not in NAMES:
        raise ValueError(f"budget: must be one of {list(NAMES)}, got {budget!r}")
    start = time.perf_counter()
    batched = bench_batched(quick)
    result = {
        "machine": machine(),
        "quick": quick,
        "batched_vs_loop_speedup": batched["batched_vs_loop_speedup"],
        "batched_vs_loop": batched,
        "exact_enumeration": bench_exact_enumeration(quick),
        "check": bench_check(quick, budget),
        "power": bench_power(),
    }
    result["seconds"] = time.perf_counter() - start
    return result


# --------------------------------------------------------------------------- rendering


def _cell(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def _md_table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def to_markdown(result: dict) -> str:
    m, b = result["machine"], result["batched_vs_loop"]
    mode = "--quick " if result["quick"] else ""
    return (
        "\n\n".join(
            [
                "# Benchmarks",
                f"Measured {m['date']} on {m['nproc']} CPU(s), {m['cpu_model']}; Python {m['python']}, "
                f"NumPy {m['numpy']} ({m['platform']}). Whole run: {result['seconds']:.0f} s. Shared "
                "machines are noisy: read the ratios, which are timed side by side in one run, rather "
                "than the absolute rates.",
                f"Regenerate: `python -m specverify.bench {mode}--markdown docs/BENCHMARKS.md` "
                "(`--json` prints the same figures as one JSON object). The experiments' figures are "
                "in [figures/](figures/README.md) (`python -m specverify.experiments all`).",
                "## Batched simulator vs a Python loop over speculative_step",
                f"{b['model']}, k = {b['k']}, from prefix (0,): batched "
                f"{b['batched_rounds_per_s']:,.0f} rounds/s ({b['n_rounds_batched']:,} rounds), loop "
                f"{b['loop_rounds_per_s']:,.0f} rounds/s ({b['n_rounds_loop']:,} rounds): "
                f"**{b['batched_vs_loop_speedup']:.0f}x**.",
                "## Exact enumeration of the reference (random first-order chains, prefix (0,))",
                f"`exact.sampler_distribution`, capped at {ENUMERATION_CAP_S:g} s or "
                f"{ENUMERATION_MAX_PATHS:,} paths per cell; paths = sampler runs enumerated; "
                "ratio_to_smallest = seconds / seconds of the first row.",
                _md_table(
                    result["exact_enumeration"],
                    ["vocab", "k", "window", "paths", "outcomes", "seconds", "ratio_to_smallest", "exact_tv", "status"],
                ),
                "## `check` per sampler",
                "`specverify.check(sampler, budget=...)` as the CLI runs it (battery, then the "
                "counterexample search when a distribution finding shows). samples_to_detect: runs the "
                "sequential chi-square detector needed to flag it (- : not flagged by statistics; "
                "exact enumeration may still flag it). `efficient` is the tokens-per-round verdict.",
                _md_table(
                    result["check"],
                    [
                        "sampler",
                        "effect",
                        "budget",
                        "seconds",
                        "seconds_vs_reference",
                        "exact",
                        "efficient",
                        "findings",
                        "exact_tv_max",
                        "samples_to_detect",
                    ],
                ),
                "## Detection power at 30,000 runs (toy chain, 9 cells)",
                "Smallest TV detected with probability >= 1 - false_pass_rate, each test at the stated "
                "false-fail rate (specverify.laws.stats; the handout's 1.5e-5 is measured in stats.py).",
                _md_table(result["power"], ["test", "n", "false_fail_rate", "false_pass_rate", "min_detectable_tv"]),
            ]
        )
        + "\n"
    )


def main(argv=None) -> int:
    from ..battery.budgets import NAMES  # the budget names (standard library only) are --budget's choices
    from ..common.command_line import OneLineParser, parsed
    from ..common.validation import writable_file_argument

    ap = OneLineParser(prog="specverify bench", description="Benchmark the simulator, enumeration and check.")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    ap.add_argument(
        "--budget", choices=list(NAMES), default=None, help="check budget (default: quick with --quick, else standard)"
    )
    ap.add_argument(
        "--markdown", metavar="PATH", type=writable_file_argument, help="also write the markdown report here"
    )
    args, code = parsed(ap.parse_args, argv)
    if args is None:  # --help, or one line of usage error
        return code
    from ..common.files import write_or_report

    result = run_bench(quick=args.quick, budget=args.budget)
    text = to_markdown(result)
    sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n" if args.json else text)
    return write_or_report(args.markdown, text, "specverify.bench: --markdown")


if __name__ == "__main__":
    sys.exit(main())
