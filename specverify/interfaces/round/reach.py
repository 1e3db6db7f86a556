"""The box a round run reaches and the forecast its progress line shows.

``round_reach``: the reach of the cases a run judged (per dimension: context, k, window, and the
vocabularies judged by the exact law, the chi-square and the binned chi-square); ``reach``: the
box a budget's cases reach before any run; ``forecast_words``: the runs a budget needs and about
how long they take at the subject's measured pace.
"""

from __future__ import annotations

from ...battery.subject_calls import Speed
from .cases import Budget, battery, get_budget, sweep_cases
from .corners import round_corner_cases


def round_reach(cases: list[dict]) -> dict:
    """The box the round cases run reached, per dimension (what "exact" covers): the longest
    context (prefix and window), the largest k and window, the largest vocabulary judged by its
    exact law and by the binned chi-square."""

    def largest(key, judged=None):
        return max((c[key] for c in cases if judged is None or c["judged"] == judged), default=0)

    reach = {
        "context": max((c["prefix"] + c["tokens"] for c in cases), default=0),
        "k": largest("k"),
        "window": largest("tokens"),
        "exact V": largest("vocab", "enumeration"),
        "sampled V": largest("vocab", "chi-square"),
        "binned V": largest("vocab", "binned chi-square"),
    }
    return {name: value for name, value in reach.items() if value}


def reach(budget) -> dict:
    """The box a budget's round cases reach, per dimension (``round_reach`` of its fixed, swept,
    engine-vocabulary and engine-scale cases; the drawn cases stay inside it): what a run of a
    subject the enumerator follows reports."""
    b = get_budget(budget)
    entries = [
        {"prefix": len(c.prefix), "tokens": c.m, "k": c.k, "vocab": c.model.vocab_size, "judged": "enumeration"}
        for c in battery(b) + sweep_cases(b, 0) + round_corner_cases(b)
    ]
    if b.engine_vocab:
        entries.append({"prefix": 0, "tokens": 1, "k": 1, "vocab": b.engine_vocab, "judged": "enumeration"})
    entries += [
        {"prefix": 0, "tokens": min(k + 1, 9), "k": k, "vocab": v, "judged": "binned chi-square"}
        for v, k, _ in b.scale_cases
    ]
    return round_reach(entries)


def forecast_words(budget: Budget, runs: int, windows: list[int], speed: Speed) -> str:
    """The forecast a progress line shows before the runs start: the subject's pace in the
    contract's rounds, the runs the budget needs and about how long they take at that pace."""
    pace = speed.rounds_per_second()
    if pace is None or not runs:
        return f"the {budget.name} budget needs {runs:,} runs"
    per_round = speed.tokens_per_round()
    mean_window = sum(windows) / len(windows) if windows else 1.0
    rounds = runs * max(1.0, mean_window / per_round)
    return (
        f"about {pace:,.0f} rounds/s: the {budget.name} budget needs {runs:,} runs "
        f"(about {rounds:,.0f} rounds), about {rounds / pace:,.0f} s"
    )


__all__ = ["forecast_words", "reach", "round_reach"]
