"""The round battery's counterexamples: on a distribution finding, the smallest model that shows it.

``find_counterexample`` tries the small candidates of ``small_cases`` (i.i.d. pairs,
then chains, k from 1 up), exactly where the enumerator follows the sampler (``describe``: the
model's tables, the sampler's and the target's law side by side), else by a chi-square on
``counterexample_samples`` runs; ``describe_case`` describes one drawn case the same way;
``shrink_engine_scale`` shrinks a binned finding at engine scale over vocabularies and k
(``describe_binned``). The search calls the subject through the shared ``battery.Battery`` (its
``call`` under the deadline), as ``interfaces.round.battery.RoundBattery`` does.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ...battery import runner
from ...battery.core import EXACT_TV_TOL
from ...battery.guards import ContractBreach, GuardStopped
from ...battery.seed_tree import stream
from ...battery.subject_calls import Battery, OutOfTime, subject_process
from ...laws import exact, rounding, scale, stats
from ...laws.chains import iid_model, random_model
from .cases import Budget, Case, engine_scale_case, get_budget, scale_stream, target_distribution
from .tasks import enumerate_task, enumeration_idle_s, enumeration_limit_s, guard_outcome, sample_guard_s, sample_task

COUNTEREXAMPLE_MAX_PATHS = 20_000


# --------------------------------------------------------------------------- counterexample candidates

SMALL_PAIRS = [
    ([0.5, 0.5], [0.8, 0.2]),
    ([0.7, 0.3], [0.2, 0.8]),
    ([0.9, 0.1], [0.5, 0.5]),
    ([1.0, 0.0], [0.5, 0.5]),
    ([0.5, 0.3, 0.2], [0.3, 0.3, 0.4]),
    ([0.2, 0.5, 0.3], [0.6, 0.2, 0.2]),
]


SMALL_MODELS_SEED = 0
"""The chains among the counterexample candidates are fixed models, the same whatever the check's
seed: the one with vocabulary v, order o and index i is drawn from the node ``(v, o, i)`` of
``SeedSequence(SMALL_MODELS_SEED)``'s tree (``battery.seed_tree.stream``)."""


def small_models():
    """Candidate models from the smallest up: i.i.d. pairs, then chains that depend on the last
    token, then chains that depend on the position (for wrong-row bugs that i.i.d. models hide)."""
    for p, q in SMALL_PAIRS:
        yield iid_model(p, q, name="iid")
    for v in (2, 3):
        for i in range(3):
            yield random_model(v, 1, 1, stream(SMALL_MODELS_SEED, v, 1, i))
        for i in range(2):
            yield random_model(v, 0, 2, stream(SMALL_MODELS_SEED, v, 0, i))


def small_cases() -> list[Case]:
    """Candidate cases, smallest first: k, then the window m, then the model."""
    return [
        Case("counterexample", model, tuple([1 % model.vocab_size] * max(model.order, 1)), k, m)
        for k in (1, 2, 3)
        for m in range(1, k + 2)
        for model in small_models()
    ]


def find_counterexample(subject, budget: str | Budget = "standard", seed: int = 0, **overrides) -> dict | None:
    """The smallest (k, window, vocabulary, model) on which the subject shows its bias.

    Exact enumeration first (a TV above ``EXACT_TV_TOL``); the candidates the enumerator cannot
    follow then get ``counterexample_samples`` runs each and a chi-square test at a false-fail
    rate of ``false_fail_rate`` split over all candidates (``"method": "statistical"``, with the
    empirical distribution). None when no candidate shows it (or ``counterexample_guard_s``
    stopped a search that hung).
    """
    from ...common.validation import with_overrides

    b = with_overrides("round", get_budget(budget), overrides)
    deadline = time.monotonic() + b.counterexample_guard_s
    try:
        with subject_process(subject) as handle:
            return _search(Battery(handle, b, seed, deadline), small_cases())
    except (OutOfTime, ContractBreach, runner.SubjectFailed):
        return None


def _search(search: Battery, cases: list[Case]) -> dict | None:
    b = search.budget
    unenumerable = []
    for case in cases:
        small = replace(b, max_paths=COUNTEREXAMPLE_MAX_PATHS)
        try:
            status, got = search.call(
                enumerate_task, case, small, seconds=enumeration_limit_s(small), idle=enumeration_idle_s(small)
            )
        except GuardStopped as exc:  # a hang: this candidate is not judged
            status, got = guard_outcome(exc)
        if status == "not-enumerable":
            unenumerable.append(case)
        elif status == "ok":
            want = target_distribution(case)
            tv = exact.total_variation(got, want)
            m = case.model  # rounding alone is no counterexample (laws.rounding)
            if (
                tv > EXACT_TV_TOL
                and not rounding.judge_law(tv, got, want, m.p_fn, m.q_fn, case.prefix, case.k, case.m).exact
            ):
                return describe(case, got, want, tv, "exact", None)
    rng = np.random.default_rng(search.seed)
    per_case = stats.split_budget(b.false_fail_rate, len(cases))
    n = b.counterexample_samples
    for case in unenumerable:
        samples, breach, rng = search.call(sample_task, case, n, rng, b, seconds=sample_guard_s(case, n, b))
        if breach or len(samples) < b.counterexample_samples:
            continue
        want = target_distribution(case)
        if not stats.chi_square_test(samples, want, false_fail_rate=per_case).passed:
            got = stats.empirical_distribution(samples)
            return describe(case, got, want, stats.tv_distance(got, want), "statistical", len(samples))
    return None


def describe_case(subject, case: Case, budget: str | Budget = "standard") -> dict | None:
    """``describe`` of one case, enumerated in the subject's process (None if it cannot be)."""
    b = get_budget(budget)
    try:
        with subject_process(subject) as handle:
            status, got = handle.call(enumerate_task, case, b, limit=enumeration_limit_s(b), idle=enumeration_idle_s(b))
    except (runner.SubjectFailed, runner.RunnerError):
        return None
    if status != "ok":
        return None
    want = target_distribution(case)
    return describe(case, got, want, exact.total_variation(got, want), "exact", None)


def describe(case: Case, got: dict, want: dict, tv: float, method: str, samples: int | None) -> dict:
    m = case.model
    return {
        "method": method,
        "vocab_size": m.vocab_size,
        "k": case.k,
        "window": case.m,
        "prefix": list(case.prefix),
        "model": m.name,
        "order": m.order,
        "period": m.period,
        "p": m.p_table.round(6).tolist(),
        "q": m.q_table.round(6).tolist(),
        ("exact_tv" if method == "exact" else "empirical_tv"): tv,
        "samples": samples,
        "distributions": [
            {
                "tokens": list(key),
                "sampler": round(float(got.get(key, 0.0)), 9),
                "target": round(float(want.get(key, 0.0)), 9),
            }
            for key in sorted(set(got) | set(want))
        ],
    }


def shrink_engine_scale(subject, budget: str | Budget, seed: int, case: Case) -> dict | None:
    """The smallest engine-scale case that still shows a binned finding of ``case``: the shapes of
    ``scale.shrink_shapes`` (V one past each tile / id-type boundary below the case's, k = 1 before
    the case's k), each a fresh ``engine_scale_case`` of the case's side drawn from
    ``scale_stream(seed, "shrink cases")``, given ``counterexample_samples`` runs and the binned
    chi-square at the false-fail rate split over every candidate position; the case itself is the
    last candidate. None when none shows it (or ``counterexample_guard_s`` stopped a search that
    hung)."""
    b = get_budget(budget)
    side = scale.side_of(case.model) or "residual"
    shapes = scale.shrink_shapes(case.model.vocab_size, case.k, scale.side_of(case.model))
    shrink = scale_stream(seed, "shrink cases")
    candidates = [
        engine_scale_case(v, k, min(k + 1, case.m), side, "shrunk", np.random.default_rng(stream(shrink, i)), seed)
        for i, (v, k) in enumerate(shapes)
    ]
    candidates[-1] = case
    per_check = stats.split_budget(b.false_fail_rate, sum(c.m for c in candidates))
    deadline = time.monotonic() + b.counterexample_guard_s
    rng = np.random.default_rng(scale_stream(seed, "shrink runs"))
    n = b.counterexample_samples
    try:
        with subject_process(subject) as handle:
            search = Battery(handle, b, seed, deadline)
            for cand in candidates:
                runs, breach, rng = search.call(sample_task, cand, n, rng, b, seconds=sample_guard_s(cand, n, b))
                if breach or len(runs) < b.counterexample_samples:
                    continue
                verdict = scale.judge_positions(runs, cand.model.p_table[0], cand.m, per_check)
                if not verdict.passed:
                    return describe_binned(cand, verdict)
    except (OutOfTime, ContractBreach, runner.SubjectFailed):
        return None
    return None


def describe_binned(case: Case, verdict) -> dict:
    """``describe``'s shape for a binned finding (``scale.PositionVerdict``): the case, the
    heaviest ids of p and q (rows too wide to print whole), the position and the bins that differ
    most."""
    m = case.model
    return {
        "method": "binned",
        "vocab_size": m.vocab_size,
        "k": case.k,
        "window": case.m,
        "prefix": [],
        "model": m.name,
        "order": 0,
        "period": 1,
        "position": verdict.position,
        "p": scale.heaviest(m.p_table[0]),
        "q": scale.heaviest(m.q_table[0]),
        "empirical_tv": verdict.binned_tv,
        "p_value": verdict.p_value,
        "samples": verdict.n,
        "bins": len(verdict.want),
        "distributions": scale.binned_rows(verdict),
    }


__all__ = [
    "COUNTEREXAMPLE_MAX_PATHS",
    "describe",
    "describe_binned",
    "describe_case",
    "find_counterexample",
    "shrink_engine_scale",
]
