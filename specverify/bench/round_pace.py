"""How fast the round battery samples a subject: runs per second, side by side in one run.

``specverify bench pace [--runs N] [--json]`` times the battery's own sampling task
(``interfaces.round_tasks.sample_task``: N runs of the handout's toy chain, 2 tokens each, every
call checked) on

- the NumPy reference (``specverify.speculative_step``), one round per call;
- the rule in torch, one round per call (``samplers.torch_reference.one_round_only``: batch-1
  tensors, a generator seeded per call, as an engine's code is wrapped);
- the same torch rule declaring a batch of rounds (``samplers.torch_reference.speculative_step``
  with ``specverify_rounds``: the runs go through it, many rounds per call);

and the battery's sampled runs of one case shared among 1 and 2 processes (``--workers``): the
same runs either way (each block of runs draws from its own stream), in less time where there
are cores to share. Ratios are against the NumPy reference in the same run (these machines are
noisy: compare within a run, never across runs).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def _rate(sampler, case, runs: int, budget) -> float:
    """Runs per second of ``sample_task`` on ``sampler`` (in this process)."""
    from ..interfaces.round.tasks import sample_task

    t0 = time.perf_counter()
    got, breach, _ = sample_task(sampler, case, runs, np.random.default_rng(0), budget)
    if breach or len(got) != runs:
        raise RuntimeError(f"the benchmark's subject broke the contract: {breach}")
    return runs / (time.perf_counter() - t0)


def _shared_rate(sampler, case, runs: int, budget, workers: int) -> tuple[float, list]:
    """Runs per second of the battery's block sampling with ``workers`` processes, and the runs."""
    from ..battery.subject_calls import run_in_subject
    from ..interfaces.round.battery import RoundBattery

    out: dict = {}

    def sample(battery_run) -> None:
        battery_run.workers = workers
        t0 = time.perf_counter()
        out["runs"], _ = battery_run.sample_blocks(case, runs, ("chi-square looks", 0, 0))
        out["seconds"] = time.perf_counter() - t0

    run_in_subject(sampler, lambda handle: RoundBattery(handle, budget, 0, None), sample)
    return runs / out["seconds"], out["runs"]


def measure(runs: int = 2000) -> dict:
    """Every row of the benchmark: subject -> runs per second (and the workers' comparison)."""
    from .. import speculative_step
    from ..interfaces.round import cases as round_cases
    from ..samplers import torch_reference

    case, budget = round_cases.all_cases()[0], round_cases.get_budget("standard")
    _rate(torch_reference.speculative_step, case, 10, budget)  # warm: torch's first calls
    rows = {
        "NumPy reference, one round per call": _rate(speculative_step, case, runs, budget),
        "torch rule, one round per call": _rate(torch_reference.one_round_only, case, runs, budget),
        "torch rule, a batch of rounds per call": _rate(torch_reference.speculative_step, case, runs, budget),
    }
    shared = {n: _shared_rate(torch_reference.one_round_only, case, 4 * runs, budget, n) for n in (1, 2)}
    return {
        "runs": runs,
        "rates": rows,
        "workers": {n: rate for n, (rate, _) in shared.items()},
        "same_runs_with_1_and_2_workers": shared[1][1] == shared[2][1],
    }


def table(result: dict) -> str:
    """The rows as text, each with its ratio to the NumPy reference."""
    base = next(iter(result["rates"].values()))
    lines = [f"{'subject':<42} {'runs/s':>10} {'x NumPy':>8}"]
    for name, rate in result["rates"].items():
        lines.append(f"{name:<42} {rate:>10,.0f} {rate / base:>8.2f}")
    one = result["workers"][1]
    for n, rate in result["workers"].items():
        lines.append(f"{f'torch rule, one round per call, {n} worker(s)':<42} {rate:>10,.0f} {rate / one:>7.2f}x1")
    same = "the same" if result["same_runs_with_1_and_2_workers"] else "DIFFERENT"
    lines.append(f"runs with 1 and 2 workers: {same}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="specverify bench pace", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000, help="runs per subject (default 2000)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    result = measure(max(args.runs, 1))
    print(json.dumps(result) if args.json else table(result))
    return 0 if result["same_runs_with_1_and_2_workers"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
