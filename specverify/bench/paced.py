"""A real-pace sampler: what one verdict costs a subject that takes --round-ms per round.

``specverify bench paced [--round-ms 50] [--budget standard] [--seed 0] [--json]`` runs
``specverify check`` (``surface.api.check``, no counterexample search, the progress lines on
stderr as the command prints them when stderr is not a terminal) on Leviathan et al.'s rule
(arXiv 2211.17192, ``samplers.chain.speculative_step``, tokens by ``rng.choice``) that sleeps
``--round-ms`` milliseconds before each round (``paced_step``: an engine's forward passes, whose
time the machine's load barely changes). It prints, side by side, the subject calls and seconds

- the check forecast: the first forecast, said after the contract and before any enumeration
  (its exact laws' calls, at most: ``round.first_forecast``), and the one said before the
  sampled runs (``round.reach.forecast_words``), after the calls and seconds measured until the
  first was said (the subject's start, the contract's rounds and the forecast's own reckoning);
- the check took: every subject call counted around the subject (one byte appended to a file
  per call, ``calls.count_call``, ``calls.counted_calls``) and the wall seconds of the whole check;
- the calls times the round's pace, and the rest of the wall time: this project's own overhead
  (process start, the forecasts, enumeration and statistics in the parent).

The calls depend on the budget and the seed only; the seconds on the pace, and the overhead on
this machine. At 50 ms a round the standard budget takes minutes: run it when you mean to.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

from .calls import count_call, counted_calls

ROUND_MS_VARIABLE = "SPECVERIFY_BENCH_ROUND_MS"
"""The environment variable holding the milliseconds ``paced_step`` sleeps per round."""

TARGET = "specverify.bench.paced:paced_step"
"""The paced subject's TARGET, imported in the subject's process as a user's file is."""

DEFAULT_ROUND_MS = 50.0


def paced_step(p_fn, q_fn, prefix, k, rng):
    """The reference rule (``samplers.chain.speculative_step``) after sleeping the milliseconds
    ``ROUND_MS_VARIABLE`` holds (50 when unset); counted (``calls.count_call``)."""
    from ..samplers.chain import speculative_step

    count_call()
    time.sleep(float(os.environ.get(ROUND_MS_VARIABLE, DEFAULT_ROUND_MS)) / 1000)
    return speculative_step(p_fn, q_fn, prefix, k, rng)


def forecast_calls(words: str) -> int | None:
    """The subject calls a forecast's words give for its own budget (the first clause): the
    exact laws' "at most about N calls", or the sampled runs' "about N calls"; None if neither."""
    own = words.split(";")[0]
    found = re.search(r"about ([\d,]+) calls", own)
    return int(found.group(1).replace(",", "")) if found else None


def measure(round_ms: float = DEFAULT_ROUND_MS, budget: str = "standard", seed: int = 0, **overrides) -> dict:
    """One check of ``paced_step`` at ``round_ms`` a round: the forecasts heard (their words,
    calls and seconds, and the calls and seconds measured when each was said), the calls and
    wall seconds the check took, its verdict. ``overrides``: budget fields to replace."""
    from ..battery.subject_calls import listening
    from ..surface.api import check

    heard: list[dict] = []
    with counted_calls(**{ROUND_MS_VARIABLE: repr(float(round_ms))}) as calls_so_far:
        t0 = time.perf_counter()

        def hear(words) -> None:
            heard.append(
                {
                    "words": str(words),
                    "calls": forecast_calls(words),
                    "seconds": getattr(words, "seconds", None),
                    "said_after_calls": calls_so_far(),
                    "said_after_s": time.perf_counter() - t0,
                }
            )

        with listening(hear):
            report = check(
                TARGET, budget=budget, seed=seed, counterexample=False, progress="lines", overrides=overrides or None
            )
        seconds = time.perf_counter() - t0
        calls = calls_so_far()
    forecasts = [h for h in heard if h["words"].startswith("forecast")]
    return {
        "round_ms": float(round_ms),
        "budget": budget,
        "seed": seed,
        "forecasts": forecasts,
        "calls": calls,
        "seconds": seconds,
        "exact": report.exact,
    }


def rows(result: dict) -> list[tuple[str, int | None, float | None, str]]:
    """(what, calls, seconds, note) for the table: what was measured until the first forecast
    was said (the subject's start, the contract's rounds, the forecast's own reckoning), each
    forecast, the forecast in all, the check as measured, its calls at the round's pace, and the
    rest (the overhead)."""
    out: list[tuple[str, int | None, float | None, str]] = []
    forecasts = result["forecasts"]
    total_calls: int | None = None
    total_s: float | None = None
    if forecasts:
        first = forecasts[0]
        total_calls, total_s = first["said_after_calls"], first["said_after_s"]
        out.append(
            ("until the first forecast", total_calls, total_s, "measured: start, contract, the forecast's reckoning")
        )
    for i, f in enumerate(forecasts):
        what = "forecast: exact laws" if f["words"].startswith("forecast before enumerating") else "forecast: sampled"
        note = f"at most; said after {f['said_after_calls']:,} calls, {f['said_after_s']:.1f} s" if i == 0 else ""
        out.append((what, f["calls"], f["seconds"], note))
        total_calls = None if total_calls is None or f["calls"] is None else total_calls + f["calls"]
        total_s = None if total_s is None or f["seconds"] is None else total_s + f["seconds"]
    if forecasts:
        out.append(("forecast in all", total_calls, total_s, "until the first forecast, and every forecast"))
    paced = result["calls"] * result["round_ms"] / 1000
    out.append(("measured", result["calls"], result["seconds"], "every subject call; the check's wall time"))
    out.append((f"calls x {result['round_ms']:g} ms", result["calls"], paced, "the subject's own time"))
    out.append(("overhead", None, result["seconds"] - paced, "measured - calls x pace: this project's"))
    return out


def table(result: dict) -> str:
    """The rows as text, after a line naming the subject, the budget, the seed and the verdict."""
    verdict = {True: "EXACT", False: "NOT EXACT", None: "INCONCLUSIVE"}[result["exact"]]
    lines = [
        f"the rule by rng.choice, {result['round_ms']:g} ms a round, budget {result['budget']}, "
        f"seed {result['seed']}: {verdict}",
        f"{'':<24} {'calls':>8} {'seconds':>8}",
    ]
    for what, calls, seconds, note in rows(result):
        shown_calls = "-" if calls is None else f"{calls:,}"
        shown_s = "-" if seconds is None else f"{seconds:.1f}"
        lines.append(f"{what:<24} {shown_calls:>8} {shown_s:>8}   {note}".rstrip())
    return "\n".join(lines)


def _round_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--round-ms: expected milliseconds, got {text!r}") from None
    if not 0 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"--round-ms: {value:g} is outside 0 to 10,000 ms")
    return value


def main(argv=None) -> int:
    from ..battery.budgets import NAMES

    ap = argparse.ArgumentParser(prog="specverify bench paced", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--round-ms", type=_round_ms, default=DEFAULT_ROUND_MS, help="milliseconds each round sleeps (default 50)"
    )
    ap.add_argument("--budget", choices=NAMES, default="standard", help="the check's budget (default standard)")
    ap.add_argument("--seed", type=int, default=0, help="the check's seed (default 0)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    result = measure(args.round_ms, args.budget, args.seed)
    print(json.dumps(result) if args.json else table(result))
    return 0 if result["exact"] is True else 1


if __name__ == "__main__":
    raise SystemExit(main())
