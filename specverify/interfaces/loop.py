"""The loop interface: a whole generation loop ``generate(target, draft, requests, k, rng) ->
list[Output]`` (``specverify.loop``: SamplingParams, Request, Output).

Judged by the loop battery (``specverify.loop_battery``: each request's sequence law, batch
isolation, stop / max_tokens, counts, logprobs, seeded replay) and, on a law or contract
finding, the smallest request and model that show it (``find_loop_counterexample``).
"""

from __future__ import annotations

from .. import detectors

NAME = "loop"
PARAMETERS = ("target", "draft", "requests", "k", "rng")
ALIASES = {"target": ("target_model", "model", "p_model"), "draft": ("draft_model", "drafter", "q_model"),
           "requests": ("reqs", "batch", "prompts"), "k": ("gamma", "num_draft_tokens"),
           "rng": ("generator", "random_state", "gen")}


def get_budget(budget):
    """The loop section of a budget: ``LOOP_BUDGETS`` by the budget's name, ``tv=X`` (every
    request the enumerator cannot follow sampled until it sees TV X:
    ``loop_battery.campaign_loop_budget``), a ``LoopBudget`` as it is."""
    from ..loop_battery import LOOP_BUDGETS, get_loop_budget

    name = getattr(budget, "name", budget)
    if (not hasattr(budget, "seeds") and isinstance(name, str) and name not in LOOP_BUDGETS
            and not name.startswith("tv=")):
        from . import InterfaceError

        raise InterfaceError(f"budget: the loop interface has the budgets {', '.join(LOOP_BUDGETS)} "
                             f"or tv=X, got {name!r}")
    return get_loop_budget(budget)


def coverage(budget) -> str:
    return get_budget(budget).coverage()


def run(subject, budget, seed: int, *, deadline=None, stop_on_first: bool = False,
        prefetched: dict | None = None, aim=None, **overrides) -> detectors.BatteryResult:
    from ..loop_battery import run_loop_battery

    return run_loop_battery(subject, get_budget(budget), seed, deadline=deadline,
                            stop_on_first=stop_on_first, aim=aim, **overrides)


def counterexample(subject, budget, seed: int, result: detectors.BatteryResult, aim=None) -> dict | None:
    """The smallest request and model that show a law or contract finding (None without one)."""
    from ..loop_battery import counterexample_checks, find_loop_counterexample, scale_loop_cases, shrink_binned_loop

    checks = counterexample_checks(result)
    if not checks:
        return None
    if checks == {"loop-binned-chi-square"}:  # only an engine-scale batch shows it: shrunk from it
        finding = next(f for f in result.flagged(("distribution",)) if f.check == "loop-binned-chi-square")
        case = next((c for c in scale_loop_cases(budget, seed, aim) if c.name == finding.case), None)
        return shrink_binned_loop(subject, budget, seed, case, finding) if case is not None else None
    exact_ok = not any(f.check == "rng" for f in result.findings)
    return find_loop_counterexample(subject, get_budget(budget), seed, checks, exact_ok)


def units(load, budget, stop_on_first: bool = False) -> list[tuple]:
    """None: the loop battery runs whole."""
    return []


__all__ = ["ALIASES", "NAME", "PARAMETERS", "counterexample", "coverage", "get_budget", "run", "units"]
