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
    if b.scale_beside_exact or not b.engine_vocab:  # else only where the engine-vocabulary case is not enumerated
        entries += [
            {"prefix": 0, "tokens": min(k + 1, 9), "k": k, "vocab": v, "judged": "binned chi-square"}
            for v, k, _ in b.scale_cases
        ]
    return round_reach(entries)


POWER_KINDS = ("fixed", "generated", "swept", "binned", "cross-check")
"""The kinds of sampled round case, each with its own promised TV (``promised_power``)."""


def promised_power(budget) -> dict:
    """The TV each kind of sampled round case sees with probability 0.95 at ``budget``: a fixed
    or generated case the enumerator cannot follow ``detect_tv``, a swept one ``sweep_tv``, an
    engine-scale case's binned chi-square per position ``scale_tv``, the pooled cross-check of
    enumerated cases ``cross_check_tv`` (averaged over its cases). Every case is sized to reach
    its kind's (``round.statistics``, ``round.engine_scale``), so the JSON's ``power`` rows are
    at or below these."""
    b = get_budget(budget)
    tvs = (b.detect_tv, b.detect_tv, b.sweep_tv, b.scale_tv, b.cross_check_tv)
    return dict(zip(POWER_KINDS, tvs))


def rounds_of(runs: int, windows: list[int], speed: Speed) -> float:
    """Subject calls (rounds) ``runs`` runs of windows like ``windows`` take at the measured
    tokens per round (a run of m tokens takes about m / tokens-per-round rounds, at least 1)."""
    per_round = speed.tokens_per_round() or 1.0
    mean_window = sum(windows) / len(windows) if windows else 1.0
    return runs * max(1.0, mean_window / per_round)


class Forecast(str):
    """Words a battery announces before its sampling starts, with the seconds they forecast
    (``seconds``; None at no measured pace): a progress line prints them at once and shows the
    finish they forecast (``surface.progress``)."""

    seconds: float | None = None

    @classmethod
    def of(cls, words: str, seconds: float | None) -> Forecast:
        made = cls(words)
        made.seconds = seconds
        return made


def forecast_words(budget: Budget, runs: int, windows: list[int], speed: Speed, others: dict | None = None) -> Forecast:
    """The forecast a battery prints before its runs start: the subject's pace in the contract's
    rounds, the runs this budget samples, the calls (rounds, ``rounds_of``) and seconds they take
    at that pace, and the same for the other named budgets (``others``: name -> (runs, windows)
    of that budget's sampled cases for this subject)."""
    pace = speed.rounds_per_second()
    if pace is None:
        return Forecast.of(f"forecast: the {budget.name} budget samples {runs:,} runs", None)
    rounds = rounds_of(runs, windows, speed)
    words = (
        f"forecast at about {pace:,.0f} rounds/s: the {budget.name} budget samples {runs:,} runs, about "
        f"{rounds:,.0f} calls, about {rounds / pace:,.0f} s"
    )
    for name, (n, w) in (others or {}).items():
        r = rounds_of(n, w, speed)
        words += f"; {name}: {n:,} runs, about {r:,.0f} calls, {r / pace:,.0f} s"
    return Forecast.of(words, rounds / pace)


def other_budgets(budget: Budget, seed: int, fallback_names: set, every_case_fell_back: bool, planner) -> dict:
    """For each named budget other than ``budget``: (runs, windows) it would sample for this
    subject, taking the cases the enumerator could not follow here (by name; every case when none
    was followed) as those it cannot follow there. ``planner(b, fallback, cross, big)`` gives a
    budget's planned runs (``ChiSquareDetector.planned_for``)."""
    from ...battery.budgets import NAMES
    from .cases import ENGINE_VOCAB_ORIGIN, binned_split, engine_scale_cases, generated_cases
    from .statistics import cross_check_cases

    wide = lambda name: name.startswith(ENGINE_VOCAB_ORIGIN)  # noqa: E731
    engine_fell_back = every_case_fell_back or any(wide(n) for n in fallback_names)
    out = {}
    for name in NAMES:
        if name == budget.name:
            continue
        b = get_budget(name)
        cases = battery(b) + generated_cases(b, seed) + sweep_cases(b, seed) + round_corner_cases(b)
        fallback = [c for c in cases if c.name in fallback_names or (wide(c.name) and engine_fell_back)]
        fallback = cases if every_case_fell_back else fallback
        rest = [c for c in cases if all(c is not f for f in fallback)]
        cross = cross_check_cases(rest, b.stat_cases, seed)
        exact_there = bool(b.engine_vocab) and not engine_fell_back
        fallback, big = binned_split(b, fallback, engine_scale_cases(b, seed), exact_there)
        out[name] = (planner(b, fallback, cross, big), [c.m for c in fallback + cross + big])
    return out


__all__ = [
    "POWER_KINDS",
    "promised_power",
    "Forecast",
    "forecast_words",
    "other_budgets",
    "reach",
    "round_reach",
    "rounds_of",
]
