"""``python -m specverify.bench.hot_path [--against DIR] [--repeats N] [--json]``: microseconds per
call of the pieces every battery run repeats most, and, with ``--against``, the same pieces of
another checkout (another commit's tree) timed in the same run, with their ratios side by side.

The pieces: one draw (``samplers.chain.sample``) and one model-row check
(``validation.check_prob_vector``) at V = 4 and V = 4096; one round of the reference through the
battery's guard (``interfaces.round_tasks.guarded``: fresh copies, the untouched check, the
contract check) on the handout's toy chain and on the V = 4096, k = 8 engine-scale case; one
reference loop call on the loop battery's first fixed case; one exact enumeration of the reference
on the toy chain (k = 2, m = 3). These are what the test suite and the mutant report spend most of
their CPU on (cProfile of the subject processes: the sampler, the row checks and the guard).

Each side runs this file's ``measure`` in its own process (``PYTHONPATH`` = its tree, so the
other tree needs no copy of this module), alternately, ``--repeats`` times; the figure is the
median of its repeats. The machines this runs on are noisy: read the ratios,
which are timed back to back, not the absolute microseconds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

PIECES = (
    "sample V4",
    "sample V4096",
    "check_prob_vector V4",
    "check_prob_vector V4096",
    "guarded round, toy chain k=2",
    "guarded round, V4096 k=8",
    "reference loop call",
    "exact enumeration, toy chain k=2 m=3",
)


def _per_call_us(fn, seconds: float) -> float:
    """Microseconds per call of fn: the best of 3 timings of a count that lasts about ``seconds``
    (sized from the ten first calls)."""
    timer = timeit.Timer(fn)
    first = timer.timeit(10) / 10
    n = max(1, int(seconds / max(first, 1e-9)))
    return min(timer.repeat(3, n)) / n * 1e6


def _module(*names: str):
    """The first of ``names`` that this process can import: a module's path in this layout,
    then in the flat layout of older checkouts, so that ``--against`` can time either."""
    import importlib

    for name in names[:-1]:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    return importlib.import_module(names[-1])


def measure(seconds: float = 0.3) -> dict:
    """{piece: microseconds per call} of the tree this process imports, each timed for about
    ``seconds`` (three times, the best kept; the enumeration for ``3 * seconds``)."""
    import numpy as np

    from specverify.interfaces.loop.cases import loop_cases
    from specverify.interfaces.round import cases as round_cases
    from specverify.interfaces.round import tasks as round_tasks
    from specverify.samplers.chain import sample, speculative_step

    exact = _module("specverify.laws.exact", "specverify.exact")
    toy_chain = _module("specverify.laws.chains", "specverify.chains").toy_chain
    generate = _module("specverify.samplers.reference_loop", "specverify.samplers.loop").generate
    check_prob_vector = _module("specverify.common.validation", "specverify.validation").check_prob_vector

    rng = np.random.default_rng(0)
    small, wide = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4096))
    toy = toy_chain()
    scale_case = round_cases.engine_scale_cases("thorough", 0)[0]  # V4096 k=8 residual
    guarded_toy = round_tasks.guarded(speculative_step, toy.vocab_size)
    guarded_scale = round_tasks.guarded(speculative_step, scale_case.model.vocab_size)
    loop_case = loop_cases()[0]
    out = {
        "sample V4": _per_call_us(lambda: sample(small, rng), seconds),
        "sample V4096": _per_call_us(lambda: sample(wide, rng), seconds),
        "check_prob_vector V4": _per_call_us(lambda: check_prob_vector("p", small), seconds),
        "check_prob_vector V4096": _per_call_us(lambda: check_prob_vector("p", wide), seconds),
        "guarded round, toy chain k=2": _per_call_us(lambda: guarded_toy(toy.p_fn, toy.q_fn, (0,), 2, rng), seconds),
        "guarded round, V4096 k=8": _per_call_us(
            lambda: guarded_scale(scale_case.model.p_fn, scale_case.model.q_fn, (), 8, rng), seconds
        ),
        "reference loop call": _per_call_us(
            lambda: generate(loop_case.target, loop_case.draft, loop_case.requests, loop_case.k, rng), seconds
        ),
        "exact enumeration, toy chain k=2 m=3": _per_call_us(
            lambda: exact.sampler_distribution(speculative_step, toy.p_fn, toy.q_fn, (0,), 2, 3), 3 * seconds
        ),
    }
    return out


def _measure_in(tree: str) -> dict:
    """``measure()`` of this file, run in a fresh process whose ``specverify`` is ``tree``'s: the
    same pieces timed the same way on both sides, whether or not ``tree`` has this module."""
    code = f"import json, runpy; print(json.dumps(runpy.run_path({__file__!r})['measure']()))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": tree},
        capture_output=True,
        text=True,
        cwd=tree,
        check=False,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"specverify.bench.hot_path: measuring {tree} failed: {last}")
    return json.loads(proc.stdout)


def compare(this: str, other: str | None, repeats: int) -> dict:
    """Medians of ``repeats`` alternating measurements of this tree (and ``other``)."""
    runs: dict[str, list] = {"this": [], "other": []}
    for _ in range(repeats):
        runs["this"].append(_measure_in(this))
        if other:
            runs["other"].append(_measure_in(other))
    result = {}
    for piece in PIECES:
        row = {"this_us": statistics.median(r[piece] for r in runs["this"])}
        if other:
            row["other_us"] = statistics.median(r[piece] for r in runs["other"])
            row["speedup"] = row["other_us"] / row["this_us"]
        result[piece] = row
    return result


def _checked(ap, argv):
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats: must be >= 1")
    if args.against and not (Path(args.against) / "specverify" / "__init__.py").is_file():
        ap.error(f"--against: {args.against} holds no specverify package")
    return args


def main(argv=None) -> int:
    from ..common.command_line import OneLineParser, parsed

    ap = OneLineParser(
        prog="specverify bench hot-path",
        description="Microseconds per call of the battery's hottest pieces, beside another tree's.",
    )
    ap.add_argument("--against", metavar="DIR", help="another checkout whose pieces are timed beside these")
    ap.add_argument("--repeats", type=int, default=3, help="alternating measurements per side (median)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args, code = parsed(lambda argv: _checked(ap, argv), argv)
    if args is None:  # --help, or one line of usage error
        return code
    this = str(Path(__file__).resolve().parents[1])
    result = compare(this, args.against and str(Path(args.against).resolve()), args.repeats)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    header = f"{'piece':40} {'this (us)':>10}" + (f" {'other (us)':>11} {'speedup':>8}" if args.against else "")
    print(header)
    for piece, row in result.items():
        line = f"{piece:40} {row['this_us']:10.1f}"
        if args.against:
            line += f" {row['other_us']:11.1f} {row['speedup']:7.2f}x"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
