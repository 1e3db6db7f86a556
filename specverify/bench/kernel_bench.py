"""``python -m specverify.bench.kernel_bench [--json] [--quick] [--markdown PATH]``: what the kernel
interface buys, measured side by side in one run (ratios first: these machines are noisy).

- **rows per second, TV per minute**: the same rule judged through the round interface (one
  round per sampler call, ``round_tasks.sample_first_tokens`` on the handout's toy chain) and
  through the kernel interface (``kernel_counts_task``: B rows per call, counts only across the
  pipe), each timed for a few seconds back to back; the TV a minute of rows lets the chi-square
  see (power 0.95, false-fail rate 1e-6) from ``stats.min_discrepancy_chi_square``;
- **to TV 1e-3**: the kernel battery's statistics on the every-draft case (9 instances of the
  handout-sized chain), with the budget ``tv=0.001``: the wall time to a stated power of 0.95 at
  TV 1e-3 per instance (false-fail rate 1e-6 for the run);
- **exact law by size**: the wall time of the exact-from-uniforms law (``KernelBattery.exact_case``)
  on one engine-scale instance by vocabulary V and k.

The reference kernel is ``specverify.samplers.reference_kernel.reference_kernel`` (NumPy, vectorized over
the batch). ``--markdown docs/BENCHMARKS_KERNEL.md`` writes the committed report.

The battery, SciPy and the kernel interface are imported by the functions that use them, after
the command line is parsed, so that a usage error is one line, quickly.
"""

from __future__ import annotations

import json
import sys
import time

FALSE_FAIL = 1e-6


def _tv_per_minute(rows_per_s: float, want: dict) -> float:
    from ..battery.core import POWER_FALSE_PASS_RATE
    from ..laws import stats

    return stats.min_discrepancy_chi_square(max(1, int(60 * rows_per_s)), want, FALSE_FAIL, POWER_FALSE_PASS_RATE)


def bench_rates(seconds: float) -> dict:
    """Rows judged per second through each interface, and the TV a minute of them sees."""
    import numpy as np

    from ..interfaces.kernel import cases as kc
    from ..interfaces.kernel.tasks import kernel_counts_task
    from ..interfaces.round import cases as round_cases
    from ..interfaces.round import tasks as round_tasks
    from ..laws import exact
    from ..samplers.chain import speculative_step
    from ..samplers.reference_kernel import reference_generator_kernel

    case = round_cases.reference_case()
    want_round = exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)
    rng = np.random.default_rng(0)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        round_tasks.sample_first_tokens(speculative_step, case, 200, rng)
        n += 200
    round_rate = n / (time.perf_counter() - t0)
    kcase = kc.every_draft_case()
    want_kernel = {f"{j} {y}": v for (j, y), v in kc.rule_law(kcase, 0).items()}
    rows, t0 = 0, time.perf_counter()
    chunk = 1 << 16
    while time.perf_counter() - t0 < seconds:
        status, _ = kernel_counts_task(reference_generator_kernel, kcase, 0, 1 << 18, rows, "numpy", chunk, True)
        assert status == "ok"
        rows += 1 << 18
    kernel_rate = rows / (time.perf_counter() - t0)
    return {
        "round": {
            "rows_per_s": round(round_rate),
            "tv_per_minute": _tv_per_minute(round_rate, want_round),
            "what": f"{case.name}: one round per call, the first {case.m} tokens",
        },
        "kernel": {
            "rows_per_s": round(kernel_rate),
            "tv_per_minute": _tv_per_minute(kernel_rate, {k: v for k, v in want_kernel.items()}),
            "what": f"{kcase.name}, instance 0: {chunk:,} rows per call",
        },
        "ratio": round(kernel_rate / round_rate, 1),
    }


def bench_to_tv(tv: float) -> dict:
    """The kernel battery's statistics on the every-draft case at budget tv=X."""
    from ..interfaces.kernel import battery as kernel
    from ..interfaces.kernel import cases as kc
    from ..samplers.reference_kernel import reference_generator_kernel

    t0 = time.perf_counter()
    result = kernel.run(reference_generator_kernel, f"tv={tv:g}", 0, cases=[kc.every_draft_case()])
    seconds = time.perf_counter() - t0
    return {
        "tv": tv,
        "seconds": round(seconds, 1),
        "exact": result.exact,
        "instances": len(result.power),
        "rows": int(sum(p["runs"] for p in result.power)),
        "worst_power_tv": max(p["min_tv"] for p in result.power),
    }


def bench_exact(sizes) -> list[dict]:
    """Wall time of the exact law on one instance of V, k (plus the battery's contract call)."""
    from ..interfaces.kernel import battery as kernel
    from ..interfaces.kernel import cases as kc
    from ..samplers.reference_kernel import reference_kernel

    out = []
    for V, k in sizes:
        case = kc.dense_case(V, k, n=1, seed=V + k)
        t0 = time.perf_counter()
        result = kernel.run(reference_kernel, "standard", 0, cases=[case])
        out.append(
            {
                "vocab": V,
                "k": k,
                "seconds": round(time.perf_counter() - t0, 2),
                "exact": result.exact,
                "exact_tv": result.exact_tv_max,
                "tolerance": kernel.tolerance(case),
            }
        )
    return out


def run_bench(quick: bool = False) -> dict:
    from .suite import machine

    t0 = time.perf_counter()
    # dense rows: the scan probes every cumulative sum, and each probe is a row of (2k + 1) V
    # floats, so the time grows as k V^2; 8192 with k = 8 is the largest size run here
    sizes = (
        [(1000, 1), (1000, 8), (4096, 8)]
        if quick
        else [(1000, 1), (1000, 2), (1000, 4), (1000, 8), (4096, 1), (4096, 4), (4096, 8), (8192, 8)]
    )
    result = {
        "machine": machine(),
        "rates": bench_rates(2.0 if quick else 5.0),
        "to_tv": bench_to_tv(1e-2 if quick else 1e-3),
        "exact_by_size": bench_exact(sizes),
    }
    result["seconds"] = round(time.perf_counter() - t0, 1)
    return result


def to_markdown(r: dict) -> str:
    m, rates, tv = r["machine"], r["rates"], r["to_tv"]
    lines = [
        "# Kernel interface benchmarks",
        "",
        f"Measured {m['date']} on {m['nproc']} CPU(s), {m['cpu_model']}; Python {m['python']}, NumPy "
        f"{m['numpy']}. Whole run: {r['seconds']} s. Regenerate: `python -m specverify.bench.kernel_bench "
        f"--markdown docs/BENCHMARKS_KERNEL.md`.",
        "",
        "## Rows judged per second: round interface vs kernel interface (same rule, back to back)",
        "",
        "| interface | what | rows/s | TV seen per minute (power 0.95, false-fail 1e-6) |",
        "|---|---|---|---|",
    ]
    for name in ("round", "kernel"):
        x = rates[name]
        lines.append(f"| {name} | {x['what']} | {x['rows_per_s']:,} | {x['tv_per_minute']:.3g} |")
    lines += [
        "",
        f"Kernel / round: **{rates['ratio']}x** rows per second.",
        "",
        f"## To TV {tv['tv']:g}",
        "",
        f"`kernel.run(reference_generator_kernel, 'tv={tv['tv']:g}', cases=[every_draft_case()])`: "
        f"{tv['instances']} instances, {tv['rows']:,} rows in all, **{tv['seconds']} s**; every instance "
        f"sees TV {tv['worst_power_tv']:.3g} or less with probability 0.95 (verdict: "
        f"{tv['exact']}).",
        "",
        "## Exact law from uniforms, by vocabulary and k (one instance, reference kernel)",
        "",
        "| V | k | seconds | exact | exact TV | tolerance |",
        "|---|---|---|---|---|---|",
    ]
    for x in r["exact_by_size"]:
        lines.append(
            f"| {x['vocab']} | {x['k']} | {x['seconds']} | {x['exact']} | {x['exact_tv']:.2g} | {x['tolerance']:.2g} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from ..common.command_line import OneLineParser, parsed
    from ..common.validation import writable_file_argument

    ap = OneLineParser(
        prog="specverify bench kernel", description=" ".join(__doc__.split("\n\n")[0].split()).replace("``", "")
    )
    ap.add_argument("--json", action="store_true", help="print the measurements as one JSON object")
    ap.add_argument("--quick", action="store_true", help="fewer sizes, TV 1e-2 instead of 1e-3")
    ap.add_argument(
        "--markdown",
        type=writable_file_argument,
        metavar="PATH",
        help="also write the tables as Markdown (docs/BENCHMARKS_KERNEL.md), atomically",
    )
    args, code = parsed(ap.parse_args, argv)
    if args is None:  # --help, or one line of usage error
        return code
    from ..common.files import write_or_report

    result = run_bench(args.quick)
    text = json.dumps(result, indent=1, default=str) if args.json else to_markdown(result)
    print(text)
    if args.markdown:
        return write_or_report(args.markdown, to_markdown(result), "specverify.bench.kernel_bench")
    return 0


if __name__ == "__main__":
    sys.exit(main())
