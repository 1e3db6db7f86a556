"""``specverify bench [suite|kernel|hot-path|samplers|pace|sweep-cost|determinism|calls|paced] ...`` (``python -m specverify.bench``):
the benchmarks, each printing its ratios side by side in one run. Without a name, the suite."""

from __future__ import annotations

import sys

from ..common.command_line import dispatch, exit_with

COMMANDS = {
    "suite": ("specverify.bench.suite", "how fast the suite is: batched draws, enumeration, check, power"),
    "kernel": ("specverify.bench.kernel_bench", "what the kernel interface buys over the round interface"),
    "hot-path": ("specverify.bench.hot_path", "microseconds per call of the hot path, against another checkout"),
    "samplers": ("specverify.bench.compare_samplers", "tokens per round and modelled speedup of the samplers"),
    "pace": ("specverify.bench.round_pace", "runs per second: NumPy, torch one round per call, torch batched, workers"),
    "sweep-cost": ("specverify.bench.sweep_cost", "seconds per swept dimension of each interface's NumPy reference"),
    "determinism": ("specverify.bench.determinism", "one check idle and beside busy processes: the same JSON"),
    "calls": ("specverify.bench.calls", "subject calls per verdict: the rule by rng.choice, by inverse CDF, in torch"),
    "paced": (
        "specverify.bench.paced",
        "a real-pace sampler (--round-ms per round): calls and seconds forecast vs taken",
    ),
}
"""Benchmark -> (its module, its one line in ``--help``)."""


def main(argv=None) -> int:
    """Run the benchmark ``argv`` names (the suite when none is named); its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    return dispatch(
        "specverify bench", "Benchmarks that print ratios side by side in one run.", COMMANDS, argv, default="suite"
    )


if __name__ == "__main__":
    exit_with(main())
