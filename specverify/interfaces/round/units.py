"""The battery's independent units, for executors that spread one subject over several workers.

A round subject's battery (specverify.interfaces.round.battery) makes two kinds of calls into the subject's
process:

- **enumerations** (``enumerate_task``: one case's exact distribution, or its round-length
  distribution for tokens per round). They draw no random numbers (every random decision is
  enumerated) and depend only on the subject and the case: independent of each other and of
  everything else the battery does. One unit per case: ``enumeration_unit`` runs it in its own
  subject process (``runner.Runner``: an exit, a crash or a hang is a finding, never a dead
  worker) and returns the outcome with the seconds it took.
- **seeded calls**: the contract's rounds (the root stream, ``default_rng(seed)``, threaded
  through the cases in order), the sequential chi-square, the engine-scale runs and sampled
  tokens per round (``round_cases.ROUND_STREAMS``: one stream per block of ``RUN_BLOCK`` runs,
  ``round_stream(seed, "chi-square looks", i, j, l)`` and the like). A block's draws depend only
  on the subject, the case, the look, the block and the seed: each block is an independent unit
  by its numbers. They still run in order, in one task (``run_battery(prefetched=...)``), as in
  the local executor: which looks run at all (a case leaves at its first failing look) is
  decided as the run goes.

``run_battery(prefetched=units)`` then replays the battery with the enumerations served from the
units (``interfaces.round``'s prefetched battery): the same code takes the same decisions on the same
values (stop at the first finding, the guards and the time limit, charged with the seconds each
unit took), so verdicts and findings are those of the local run for the same seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...battery import capture, runner
from ...battery.core import BatteryResult
from . import cases as round_cases
from . import tasks as round_tasks


def enumeration_calls(
    budget: round_cases.Budget, stop_on_first: bool | tuple[str, ...] = False
) -> list[tuple[bool, int]]:
    """The enumerations worth a unit, as ``(lengths, case index)``: those the battery asks for
    unless the contract fails. Every case of the budget (``all_cases()``), or with
    ``stop_on_first`` only the first (a mutant's first finding ends enumeration, usually on
    case one: units for the later cases would mostly be thrown away, so the battery enumerates
    them itself, in order, when it gets there), and the tokens-per-round cases
    (``round_length_cases()``)."""
    cases = budget.cases[:1] if stop_on_first else budget.cases
    return [(False, i) for i in cases] + [(True, i) for i in range(len(round_cases.round_length_cases()))]


def _case(lengths: bool, index: int) -> round_cases.Case:
    return (round_cases.round_length_cases() if lengths else round_cases.all_cases())[index]


def enumeration_unit(load: Callable[[], Callable], budget: round_cases.Budget, lengths: bool, index: int) -> dict:
    """One enumeration in a fresh subject process (``load`` runs there and returns the subject):
    ``{"key", "outcome", "seconds", "output"}``, ``outcome`` ("ok", the battery task's own
    result: ok / not-enumerable / breach / guard, a hang its idle guard stopped), ("failed", how
    the process ended: killed at the limit, exited, crashed), ("error", a traceback of ours) or
    ("load-failed", why: left for the battery's own start to report). The guards are the
    battery's own (``round_tasks.enumeration_limit_s``, ``enumeration_idle_s``). Never raises for
    a broken subject."""
    case = _case(lengths, index)
    unit = {"key": round_tasks.enumeration_key(case, budget, lengths), "seconds": 0.0, "output": ""}
    handle = runner.Runner(load)
    try:
        try:
            handle.start()
        except Exception as exc:  # noqa: BLE001 - an import error, a death while loading
            unit["outcome"] = ("load-failed", f"{type(exc).__name__}: {exc}")
            return unit
        t0 = time.monotonic()
        try:
            unit["outcome"] = (
                "ok",
                handle.call(
                    round_tasks.enumerate_task,
                    case,
                    budget,
                    lengths,
                    limit=round_tasks.enumeration_limit_s(budget),
                    idle=round_tasks.enumeration_idle_s(budget),
                ),
            )
        except runner.Stalled as exc:  # a hang: not enumerated, as in the battery's own process
            unit["outcome"] = ("ok", round_tasks.guard_outcome(exc))
        except runner.SubjectFailed as exc:
            unit["outcome"] = ("failed", str(exc))
        except runner.RunnerError as exc:
            unit["outcome"] = ("error", str(exc))
        unit["seconds"] = time.monotonic() - t0
    finally:
        unit["output"] = handle.output_excerpt()
        handle.close()
    return unit


def prefetched(units) -> dict:
    """``run_battery``'s ``prefetched=`` from units' results: those whose subject loaded."""
    return {u["key"]: u for u in units if u["outcome"][0] != "load-failed"}


def merge_output(result: BatteryResult, units) -> None:
    """Add what the subject printed in the units' processes to the result's output (excerpt);
    the units' seconds to its seconds (detector time, discarded units included)."""
    parts = [result.output, *(u["output"] for u in units)]
    text = "".join(p for p in parts if p)
    n = capture.OUTPUT_EXCERPT_CHARS
    if len(text) > n:
        text = f"{text[: n // 2]}\n[... {len(text) - n} characters ...]\n{text[-(n // 2) :]}"
    result.output = text
    result.seconds += sum(u["seconds"] for u in units)


__all__ = ["enumeration_calls", "enumeration_unit", "merge_output", "prefetched"]
