"""The loop checks judged per position: a sweep case's sampled runs judged per request at each
position, all positions pooled, each lag 1..``MAX_LAG`` and beside identical requests
(``positions``; a seeded sweep over seeds), and an engine-scale batch's binned chi-square per
position (``scale_case``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ...battery.core import POWER_FALSE_PASS_RATE
from ...laws import stats
from ...laws.requests import lag_pairs
from .calls import identical_pairs
from .cases import LoopCase
from .seeds import SeedChecks
from .sweeps import MAX_LAG

MIN_COLUMN = 20
"""A position of a sampled sweep is judged when at least this many runs reached it."""


def positions_tests(case: LoopCase) -> int:
    """The tests ``LoopBattery.positions`` makes on a sweep case judged per position: per request
    each position, all positions pooled, and each lag 1..``MAX_LAG``; one per pair of identical
    requests (``identical_pairs``: the first of a group with each later one)."""
    lengths = [r.params.max_tokens for r in case.requests[: 1 if case.seeded else None]]
    return sum(m + 1 + min(max(m - 1, 0), MAX_LAG) for m in lengths) + len(identical_pairs(case, every=False))


def _product(row_a: np.ndarray, row_b: np.ndarray) -> dict[tuple[int, ...], float]:
    return {(int(a), int(b)): float(row_a[a] * row_b[b]) for a in np.flatnonzero(row_a) for b in np.flatnonzero(row_b)}


class PositionChecks(SeedChecks):
    """The sweeps judged per position and the engine-scale batches."""

    def sweep_case(self, case: LoopCase, per_check: float, rng):
        """A sweep judged per position (``loop.sweeps.sampled_sweeps``): ``sweep_runs`` runs of the
        batch drawing from ``rng`` (a seeded one: request 0 over seeds 0..``seed_law_runs`` - 1),
        contracts on every outcome, then ``positions``; returns the rng after."""
        b = self.budget
        if case.seeded:
            samples = self.over_seeds(case)
            if samples is not None:
                outcomes = [((tokens, None, None, None),) for tokens in samples]
                self.contracts(replace(case, requests=case.requests[:1]), outcomes)
                self.positions(case, outcomes, per_check)
            return rng
        sampled = self.sample(case, b.sweep_runs, rng)
        if sampled is None:
            return rng
        got, rng, _, _ = sampled
        self.positions(case, got, per_check)
        return rng

    def positions(self, case: LoopCase, got: list, per_check: float) -> None:
        """Each request of a context-free case, over the runs: every position's tokens (reached by
        ``MIN_COLUMN`` runs or more), all positions pooled, and each lag 1..``MAX_LAG``
        (``lag_pairs``) against the processed row, or for pairs its product law; each group of
        identical requests (``identical_pairs``: the first of each group with every later one, position
        by position) against
        the product law too. Chi-squares at ``per_check``; the first failure is a finding:
        ``position-law`` (a position's law), ``joint-law`` (dependent positions or requests), or
        ``seed-law`` for a seeded request. Power (the TV one position's test sees with
        probability 0.95) in ``result.power``."""
        r = self.result
        if not got:
            return
        names = ("seed-law", "seed-law") if case.seeded else ("position-law", "joint-law")
        wanted = [self.wanted_row(case, i) for i in range(len(got[0]))]
        rows = [row for row in wanted if row is not None]
        if len(rows) < len(wanted):
            self.not_enumerable_reference(case)
            return
        tests: list[tuple[str, int, str, Sequence[tuple[int, ...]], dict[tuple[int, ...], float]]] = []
        for i, row in enumerate(rows):
            outs = [o[i][0] for o in got]
            law: dict[tuple[int, ...], float] = {(int(t),): float(row[t]) for t in np.flatnonzero(row)}
            columns: list[list[tuple[int, ...]]] = [
                [(o[j],) for o in outs if len(o) > j] for j in range(case.requests[i].params.max_tokens)
            ]
            tests += [(names[0], i, f"position {j + 1}", c, law) for j, c in enumerate(columns) if len(c) >= MIN_COLUMN]
            tests.append((names[0], i, "all positions pooled", [t for c in columns for t in c], law))
            pairs = _product(row, row)
            for lag in range(1, min(len(columns), MAX_LAG + 1)):
                lagged = [p for o in outs for p in lag_pairs(o, lag)]
                tests.append((names[1], i, f"pairs of positions {lag} apart", lagged, pairs))
        for a, b in identical_pairs(case, every=False):
            both = [t for o in got for t in zip(o[a][0], o[b][0])]
            tests.append(
                (names[1], a, f"beside identical request {b} (position by position)", both, _product(rows[a], rows[b]))
            )
        detect = []
        for check, i, where, samples, law in tests:
            if not samples:
                continue
            test = stats.chi_square_test(samples, law, false_fail_rate=per_check)
            if where == "position 1":
                detect.append(
                    min(stats.min_discrepancy_chi_square(len(samples), law, per_check, POWER_FALSE_PASS_RATE), 1.0)
                )
            if not test.passed:
                p = test.p_value if test.p_value is not None else 0.0
                against = "the product of the processed rows" if len(next(iter(law))) == 2 else "the processed row"
                against += " of the reference" if self.reference is not None else ""
                self.find(
                    check,
                    "distribution",
                    f"request {i}, {where}: {len(samples)} draws differ from target-only sampling's law "
                    f"({against}): p-value {p:.3g} < {per_check:.3g}",
                    case,
                    {"request": i, "where": where, "p_value": p, "samples": len(samples)},
                )
                break
        tv = max(detect) if detect else None
        r.power.append(
            {
                "case": case.name,
                "check": names[0],
                "runs": len(got),
                "min_detectable_tv": tv,
                "false_fail_rate": per_check,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                "kind": case.kind,
                "tests": len(tests),
            }
        )
        r.ran.append(
            f"{names[0]}: {case.name}: {len(tests)} chi-square tests over {len(got)} runs (each position, all "
            f"pooled, lags 1-{MAX_LAG}, identical requests); one position's test detects TV >= "
            f"{tv if tv is None else f'{tv:.3g}'} with probability {1 - POWER_FALSE_PASS_RATE:g}"
        )
        self.cover(case, "chi-square", len(got), tv)

    def scale_case(self, case: LoopCase, per_check: float, rng):
        """An engine-scale or aimed batch (``scale_loop_cases``): ``scale_runs`` runs drawing from
        ``rng``, contracts on every outcome, then each request's tokens at each position (the runs
        that reached it) against its processed row by a binned chi-square (``scale.judge_columns``,
        at least ``MIN_COLUMN`` tokens per position) at ``per_check``; returns the rng after.
        Context-free processing: a position's law is the row."""
        from ...laws.scale import binning_words, judge_columns, min_detectable_tv

        b, r = self.budget, self.result
        before = len(r.findings)
        sampled = self.sample(case, b.scale_runs, rng)
        if sampled is None:
            return rng
        got, rng, _, _ = sampled
        runs, detect = len(got), []
        for i, req in enumerate(case.requests):
            if len(r.findings) > before or not got:  # ids out of range or past max_tokens: nothing to bin
                break
            row = self.wanted_row(case, i)
            if row is None:
                self.not_enumerable_reference(case)
                break
            columns = [[o[i][0][j] for o in got if len(o[i][0]) > j] for j in range(req.params.max_tokens)]
            verdict = judge_columns(columns, row, per_check, min_samples=MIN_COLUMN)
            if verdict is None:
                continue
            words = binning_words(len(verdict.want), case.vocab_size, verdict.n)
            tv = min_detectable_tv(row, len(columns[0]) if columns else 0, per_check, POWER_FALSE_PASS_RATE)
            detect.append(tv)
            r.power.append(
                {
                    "case": case.name,
                    "request": i,
                    "runs": runs,
                    "min_detectable_tv": tv,
                    "false_fail_rate": per_check,
                    "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                    "kind": case.kind,
                    "binned": len(verdict.want),
                }
            )
            r.ran.append(
                f"loop binned chi-square: {case.name}: request {i}: {runs} runs, "
                f"{req.params.max_tokens} position(s); detects a binned TV >= {tv:.3g} at the first "
                f"position with probability {1 - POWER_FALSE_PASS_RATE:g} ({words})"
            )
            if not verdict.passed:
                self.find(
                    "loop-binned-chi-square",
                    "distribution",
                    f"request {i}: token {verdict.position + 1} differs from target-only sampling's law: "
                    f"p-value {verdict.p_value:.3g} < {per_check:.3g}, binned TV {verdict.binned_tv:.3g} "
                    f"({words})",
                    case,
                    {
                        "request": i,
                        "position": verdict.position,
                        "p_value": verdict.p_value,
                        "binned_tv": verdict.binned_tv,
                        "samples": verdict.n,
                    },
                )
                break
        self.cover(case, "binned chi-square", runs, max(detect) if detect else None)
        return rng

    def not_enumerable_reference(self, case: LoopCase) -> None:
        """A case judged per position whose reference row the enumerator cannot follow (one token
        of a request): not judged (a shortfall in those words)."""
        self.stopped(
            case, "not judged: the enumerator cannot follow the reference on one token of its requests (its row)"
        )


__all__ = ["MIN_COLUMN", "PositionChecks", "positions_tests"]
