"""What each swept dimension costs: seconds per dimension of the NumPy references, side by side in
one run.

``specverify bench sweep-cost [--budget B] [--json]`` runs, for each interface's NumPy reference
(the round's ``specverify.speculative_step``, the loop's ``samplers.reference_loop.generate``,
the kernel's ``samplers.reference_kernel.reference_kernel``), the budget's sweep cases of one
dimension at a time through the interface's own battery (each run in its own subject process, as
``specverify check`` runs it), and prints the wall seconds of each beside a baseline run without
the sweeps (the process, the contract and whatever the battery runs on every subject):

- round: the battery on its first fixed case alone with only the context sweep, then only the k
  sweep (``round_cases.sweep_cases``), and neither (the baseline); no drawn, wide or engine-scale
  cases (the corner, which needs both sweeps on, is its run less theirs);
- loop: the battery on the sweep cases of each dimension (``loop.sweeps.SWEEP_DIMENSIONS``), the
  baseline on the first fixed case;
- kernel: the battery on the cases of each sweep (``kernel.sweeps.SWEEPS``: batch rows, every k,
  dense V, binned V), the baseline on the first fixed case.

With a budget that has them (``thorough``), the pairwise corners (``interfaces.corners``, each interface's ``corners`` part) are one
more row per interface. The seconds are this machine's, under its load: compare within a run.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace


def _seconds(run) -> float:
    """Wall seconds of ``run()``; a run that is not exact is the benchmark's error."""
    t0 = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - t0
    if result.exact is not True:
        raise RuntimeError(f"a reference was not judged exact: {result.findings or result.shortfalls}")
    return seconds


def round_rows(budget: str) -> list[tuple[str, int, float]]:
    """(dimension, cases, seconds) of the round reference: the baseline, each sweep, the corner."""
    from .. import speculative_step
    from ..interfaces.round import cases as round_cases
    from ..interfaces.round import corners as round_corners
    from ..interfaces.round.battery import run_battery

    full = round_cases.get_budget(budget)
    base = replace(full, cases=full.cases[:1], generated=0, engine_vocab=0, scale_cases=(), stat_cases=1)
    none = replace(base, sweep_context=0, sweep_k=0, sweep_corners=False)
    only = {
        "baseline (one fixed case)": none,
        "context": replace(none, sweep_context=full.sweep_context),
        "k": replace(none, sweep_k=full.sweep_k),
    }
    if round_corners.round_corner_cases(full):
        only["corner context x k"] = replace(base, sweep_corners=True)
    rows = []
    for name, b in only.items():
        count = (
            len(round_corners.round_corner_cases(b))
            if name.startswith("corner")
            else len(round_cases.sweep_cases(b, 0))
        )
        count = count or len(b.cases)  # the baseline: its one fixed case
        rows.append((name, count, _seconds(lambda b=b: run_battery(speculative_step, b, 0))))
    if len(rows) == 4:  # the corner needs both sweeps on: its own share is its run less theirs
        name, count, seconds = rows[3]
        rows[3] = (name, count, seconds - rows[1][2] - rows[2][2] + rows[0][2])
    return rows


def loop_rows(budget: str) -> list[tuple[str, int, float]]:
    """(dimension, cases, seconds) of the loop reference: the baseline, each sweep, the corners."""
    from ..interfaces.loop import corners as loop_corners
    from ..interfaces.loop.battery import run_loop_battery
    from ..interfaces.loop.cases import loop_cases
    from ..interfaces.loop.sweeps import SWEEP_DIMENSIONS, sweep_loop_cases
    from ..samplers.reference_loop import generate

    sweeps = sweep_loop_cases(budget)
    groups = {"baseline (one fixed case)": [loop_cases()[0]]}
    for dimension in SWEEP_DIMENSIONS:
        groups[dimension] = [c for c in sweeps if c.sweep == dimension]
    groups["corners context x rounds / max_tokens / batch"] = loop_corners.loop_corner_cases(budget)
    return [
        (name, len(cases), _seconds(lambda cases=cases: run_loop_battery(generate, budget, 0, cases=cases)))
        for name, cases in groups.items()
        if cases
    ]


def kernel_rows(budget: str) -> list[tuple[str, int, float]]:
    """(dimension, cases, seconds) of the kernel reference: the baseline, each sweep, the corners."""
    from ..interfaces.kernel import battery as kernel
    from ..interfaces.kernel import cases as kc
    from ..interfaces.kernel import corners as kernel_corners
    from ..interfaces.kernel import sweeps as kernel_sweeps
    from ..samplers.reference_kernel import reference_kernel

    b = kernel.get_budget(budget)
    sweeps = kernel_sweeps.sweep_cases(b)
    groups = {"baseline (one fixed case)": [kc.every_draft_case()]}
    for prefix, name in zip(kernel_sweeps.SWEEPS, ("batch", "k", "dense V", "binned V")):
        groups[name] = [c for c in sweeps if c.name.startswith(prefix)]
    groups["corners k x batch, binned V x k"] = kernel_corners.kernel_corner_cases(b)
    return [
        (name, len(cases), _seconds(lambda cases=cases: kernel.run(reference_kernel, b, 0, cases=cases)))
        for name, cases in groups.items()
        if cases
    ]


def measure(budget: str = "standard") -> dict:
    """{interface: [(dimension, cases, seconds), ...]} at ``budget``, in one run."""
    return {"round": round_rows(budget), "loop": loop_rows(budget), "kernel": kernel_rows(budget)}


def table(result: dict) -> str:
    """The rows as a Markdown table: interface, dimension, cases, seconds."""
    lines = ["| interface | dimension | cases | seconds |", "|---|---|---|---|"]
    for interface, rows in result.items():
        lines += [f"| {interface} | {name} | {count} | {seconds:.1f} |" for name, count, seconds in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    from ..battery.budgets import NAMES

    ap = argparse.ArgumentParser(prog="specverify bench sweep-cost", description=__doc__.splitlines()[0])
    ap.add_argument("--budget", choices=NAMES, default="standard", help="the budget (default standard)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    result = measure(args.budget)
    print(json.dumps(result) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
