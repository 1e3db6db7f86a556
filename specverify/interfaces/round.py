"""The round interface: the handout's ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``.

One call is one speculative round: 1 to k + 1 token ids, distributed (over the sampler's draws
from ``rng``) exactly as the target p's next tokens. Judged by the round battery
(``specverify.detectors``: contract, exact enumeration, sequential chi-square, tokens per round)
and, on a distribution finding, the smallest counterexample model
(``detectors.find_counterexample``). Rule: Leviathan, Kalman, Matias (arXiv 2211.17192).
"""

from __future__ import annotations

from .. import detectors

NAME = "round"
PARAMETERS = ("p_fn", "q_fn", "prefix", "k", "rng")
ALIASES = {"p_fn": ("p", "target_fn", "p_model"), "q_fn": ("q", "draft_fn", "q_model"),
           "prefix": ("context", "ctx", "tokens", "prompt"), "k": ("gamma", "num_draft_tokens"),
           "rng": ("generator", "random_state", "gen")}


def get_budget(budget):
    """The round section of a budget (a name, or a ``detectors.Budget``)."""
    return detectors.get_budget(budget)


def coverage(budget) -> str:
    return get_budget(budget).coverage()


def run(subject, budget, seed: int, *, deadline=None, stop_on_first: bool = False,
        prefetched: dict | None = None, aim=None, **overrides) -> detectors.BatteryResult:
    return detectors.run_battery(subject, budget, seed, deadline=deadline, stop_on_first=stop_on_first,
                                 prefetched=prefetched, aim=aim, **overrides)


def counterexample(subject, budget, seed: int, result: detectors.BatteryResult, aim=None) -> dict | None:
    """The smallest model that shows a distribution finding (None without one). A finding on the
    engine-scale cases alone (the binned chi-square) is shrunk over vocabularies and k
    (``detectors.shrink_engine_scale``); otherwise the small candidates first
    (``detectors.find_counterexample``), and when none of them shows it (a bug that needs a
    larger vocabulary or k) the drawn case it was found on, described the same way, else the
    engine-scale shrink."""
    flagged = result.flagged(("distribution",))
    if not flagged:
        return None
    names = {f.case for f in flagged}
    big = [c for c in detectors.engine_scale_cases(budget, seed, aim) if c.name in names]
    smallest = lambda cases: min(cases, key=lambda c: (c.model.vocab_size, c.k, c.m))  # noqa: E731
    if big and all(f.check == "binned-chi-square" for f in flagged):
        return detectors.shrink_engine_scale(subject, budget, seed, smallest(big))
    found = detectors.find_counterexample(subject, budget, seed)
    if found is not None:
        return found
    drawn = [c for c in detectors.generated_cases(budget, seed) if c.name in names]
    if drawn:
        return detectors.describe_case(subject, smallest(drawn), budget)
    return detectors.shrink_engine_scale(subject, budget, seed, smallest(big)) if big else None


def units(load, budget, stop_on_first: bool = False) -> list[tuple]:
    """The battery's case enumerations as ``(specverify.units.enumeration_unit, args)`` pairs."""
    from ..units import enumeration_calls, enumeration_unit

    b = get_budget(budget)
    return [(enumeration_unit, (load, b, lengths, i)) for lengths, i in enumeration_calls(b, stop_on_first)]


__all__ = ["ALIASES", "NAME", "PARAMETERS", "counterexample", "coverage", "get_budget", "run", "units"]
