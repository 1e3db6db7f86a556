"""The round chi-square detector: every sampled case sized from the TV its budget promises.

Two kinds of sampled case, each sized from its promised TV and its own law (its number of
outcomes), never from a fixed count alone (``sizes``):

- a case the enumerator cannot follow (a *fallback* case): the sequential chi-square against
  its exact target law at doubling sample sizes (``looks``: n_min, 2 n_min, ... up to
  ``n_max``), the last look at the larger of ``n_max``'s and the run count at which the
  chi-square sees the case's promised TV (``Budget.detect_tv`` for a fixed or generated case,
  ``Budget.sweep_tv`` for a swept one) with probability 1 - ``POWER_FALSE_PASS_RATE``;
- the cross-check of the enumerated cases (``cross_check``): the enumeration already gave their
  law exactly; the runs only guard against a subject that behaves differently when it is
  enumerated than when it draws from a real generator. Such a subject differs on whatever case
  it is run on, so one pooled chi-square over ``stat_cases`` enumerated cases drawn from the
  seed, one look, sized to see ``Budget.cross_check_tv`` averaged over them (TV t on each, or
  c t on one of c), replaces a sequential test per case.

The false-fail budget is split Bonferroni over every look of every fallback case (each case has
at most ``len(looks(n_min, n_max)) + 1`` looks) and the cross-check's one test. Each case's power
(the smallest TV it detects) goes to ``result.power``; a sampled case that ends short of its
promised TV (a breach or the time limit cut it) is a shortfall.
"""

from __future__ import annotations

import numpy as np

from ...battery.core import POWER_FALSE_PASS_RATE, Finding
from ...laws import stats
from .cases import Budget, Case, looks, round_stream, target_distribution
from .engine_scale import scale_sizes
from .own_reference import RoundReference


def pooled_law(cases: list[Case], law=target_distribution) -> dict:
    """The cross-check's law: ``(j, window)`` with probability law_j(window) / c over the c
    cases, each run equally often (a product of multinomials; a chi-square against this law with
    c K - 1 degrees of freedom is conservative for it, having fewer)."""
    return {(j, window): w / len(cases) for j, case in enumerate(cases) for window, w in law(case).items()}


CROSS_CHECK_OUTCOMES = 64
"""The most outcomes (windows of positive probability) a case drawn into the cross-check may
have: a chi-square's runs grow with its outcomes (a dense V = 4096 case would need thousands),
while a subject that behaves differently when enumerated does so on small cases too."""


def cross_check_cases(enumerated: list[Case], count: int, seed: int) -> list[Case]:
    """``count`` of the enumerated cases of at most ``CROSS_CHECK_OUTCOMES`` outcomes (all of
    them when fewer), drawn without replacement from ``round_stream(seed, "cross-check", 0)``, in
    the order drawn."""
    enumerated = [c for c in enumerated if len(target_distribution(c)) <= CROSS_CHECK_OUTCOMES]
    if count >= len(enumerated):
        return list(enumerated)
    rng = np.random.default_rng(round_stream(seed, "cross-check", 0))
    return [enumerated[int(i)] for i in rng.choice(len(enumerated), size=count, replace=False)]


def promised_tv(b: Budget, case: Case, swept: set) -> float:
    """The TV budget ``b`` promises on a fallback case: ``sweep_tv`` for a swept one (its name
    in ``swept``), ``detect_tv`` otherwise."""
    return b.sweep_tv if case.name in swept else b.detect_tv


def check_rate(b: Budget, fallback: list, cross: list, false_fail_rate: float) -> float:
    """The false-fail rate of one look: ``false_fail_rate`` split over every look a fallback case
    may take (``len(looks(n_min, n_max)) + 1`` each) and the cross-check's one test."""
    checks = len(fallback) * (len(looks(b.n_min, b.n_max)) + 1) + (1 if cross else 0)
    return stats.split_budget(false_fail_rate, max(checks, 1))


def case_looks(b: Budget, case: Case, swept: set, per_check: float) -> list[int]:
    """The run counts of a fallback case's looks: ``looks(n_min, n_max)`` (a swept case's up to
    ``sweep_runs``, its floor), then, when those do not reach it, one more look at the count at
    which the chi-square at ``per_check`` sees the case's promised TV (``promised_tv``): a budget
    never ends short of its own promise because of its sizing."""
    floor = b.sweep_runs if case.name in swept else b.n_max
    sizes = [n for n in looks(b.n_min, b.n_max) if n <= floor] or [b.n_min]
    need = stats.min_num_samples_chi_square(
        promised_tv(b, case, swept), target_distribution(case), per_check, POWER_FALSE_PASS_RATE
    )
    return sizes if need <= sizes[-1] else sizes + [need]


def cross_check_runs(b: Budget, cross: list[Case], per_check: float) -> int:
    """Runs of the pooled cross-check: the fewest, a multiple of the case count, at which the
    chi-square at ``per_check`` sees ``cross_check_tv`` on ``pooled_law``."""
    need = stats.min_num_samples_chi_square(b.cross_check_tv, pooled_law(cross), per_check, POWER_FALSE_PASS_RATE)
    return -(-need // len(cross)) * len(cross)


def planned_runs(
    b: Budget, fallback: list, cross: list, big: list, swept: set, false_fail_rate: float, schedules=None
) -> int:
    """The runs budget ``b`` plans: every fallback case to its last look, the cross-check, and
    the engine-scale cases (``scale_sizes`` at half of ``false_fail_rate``, as the battery
    splits it); what a run without findings samples (tokens per round, sampled only where the
    enumerator cannot follow, comes on top)."""
    per_check = check_rate(b, fallback, cross, false_fail_rate)
    schedules = {} if schedules is None else schedules  # id(case) -> its looks, kept for the run
    for c in fallback:
        schedules[id(c)] = case_looks(b, c, swept, per_check)
    runs = sum(schedules[id(c)][-1] for c in fallback)
    runs += cross_check_runs(b, cross, per_check) if cross else 0
    return runs + sum(scale_sizes(b, big, false_fail_rate / 2))


class ChiSquareDetector(RoundReference):
    """The sequential chi-square on the cases the enumerator could not follow, and the pooled
    cross-check of enumerated ones."""

    # -- sizes ---------------------------------------------------------------------------------
    def promised_tv(self, case: Case) -> float:
        return promised_tv(self.budget, case, self.swept)

    def planned_runs(self, fallback: list, cross: list, big: list, false_fail_rate: float) -> int:
        """``planned_runs`` of this run's budget; each fallback case's looks kept for ``sequential``."""
        self.schedules: dict = {}
        return planned_runs(self.budget, fallback, cross, big, self.swept, false_fail_rate, self.schedules)

    # -- the tests -----------------------------------------------------------------------------
    def statistics(self, fallback: list, cross: list, false_fail_rate: float) -> None:
        """The sequential chi-square on ``fallback`` (``sequential``), then the pooled
        cross-check of ``cross`` (``cross_check``), at one split of ``false_fail_rate``."""
        r = self.result
        if not fallback and not cross:  # stat_cases=0 and every case enumerated: nothing to sample
            r.ran.append("chi-square: no case to sample (every case enumerated, stat_cases=0)")
            return
        per_check = check_rate(self.budget, fallback, cross, false_fail_rate)
        self.sequential(fallback, per_check)
        if self.reference is not None:  # only cases whose reference law is had (the others are said)
            cross = [c for c in cross if self.wanted(c) is not None]
        if cross:
            self.cross_check(cross, per_check)

    def sequential(self, cases: list, per_check: float) -> None:
        """Chi-square at each case's looks (``case_looks``), breadth first (every live case's
        look j before any case's look j + 1). A case leaves at its first failing look; the others
        run every look, so each case's run count is fixed by the budget, the seed and its law.
        The runs case i adds at look j come in blocks of ``RUN_BLOCK``, block l drawn from its own
        stream, ``round_stream(seed, "chi-square looks", i, j, l)``: the same whatever other
        cases are live, and whichever process draws them."""
        r = self.result
        kept = getattr(self, "schedules", {})  # planned_runs' looks, at the same per_check
        schedule = {
            i: kept.get(id(c)) or case_looks(self.budget, c, self.swept, per_check) for i, c in enumerate(cases)
        }
        live: dict[int, list] = {i: [] for i in range(len(cases))}
        last_p: dict = {}
        for look in range(max((len(s) for s in schedule.values()), default=0)):
            wanted = [i for i in live if look < len(schedule[i])]
            requests = [(cases[i], schedule[i][look] - len(live[i]), ("chi-square looks", i, look)) for i in wanted]
            for i, (got, breach) in zip(wanted, self.sample_many(requests)):
                case, samples = cases[i], live[i]
                samples += got
                if breach:
                    self.runs_ended(breach, case, "chi-square")
                    del live[i]
                    continue
                want = self.wanted(case)
                if want is None:  # a reference that cannot be enumerated here, or broken (said)
                    del live[i]
                    continue
                test = stats.chi_square_test(samples, want, false_fail_rate=per_check)
                p = last_p[i] = test.p_value if test.p_value is not None else 0.0
                r.chi2_p_value_min = p if r.chi2_p_value_min is None else min(r.chi2_p_value_min, p)
                if not test.passed:
                    self.found(case, samples, want, p, per_check, test.detail)
                    del live[i]
                elif look == len(schedule[i]) - 1:
                    self.judged(case, samples, p, per_check, "passed")
                    del live[i]

    def found(self, case: Case, samples: list, want: dict, p: float, per_check: float, detail: str) -> None:
        """A case whose sampled runs differ from ``want``: a chi-square finding."""
        r = self.result
        tv = stats.tv_distance(stats.empirical_distribution(samples), want)
        r.samples_to_detect = len(samples) if r.samples_to_detect is None else min(r.samples_to_detect, len(samples))
        r.findings.append(
            Finding(
                "chi-square",
                "distribution",
                f"sampled distribution differs from {'the reference' if self.reference is not None else 'the target'}'s: "
                f"chi-square p-value "
                f"{p:.3g} < {per_check:.3g} after {len(samples)} runs, empirical TV {tv:.3g} ({detail})",
                case.name,
                {"p_value": p, "samples": len(samples), "empirical_tv": tv},
            )
        )

    def cross_check(self, cross: list, per_check: float) -> None:
        """One pooled chi-square over the enumerated cases ``cross`` (``cross_check_runs`` runs,
        shared equally; case j's blocks from ``round_stream(seed, "cross-check", 1, j, l)``)
        against ``pooled_law``: a subject whose sampled law differs from its enumerated one by
        ``cross_check_tv`` averaged over them is found w.p. 1 - ``POWER_FALSE_PASS_RATE``. On a
        finding, the case named is the one whose runs are furthest from its law."""
        b, r = self.budget, self.result
        each = cross_check_runs(b, cross, per_check) // len(cross)
        fetched = self.sample_many([(case, each, ("cross-check", 1, j)) for j, case in enumerate(cross)])
        pooled: list = []
        for j, (case, (got, breach)) in enumerate(zip(cross, fetched)):
            if breach:
                self.runs_ended(breach, case, "cross-check")
                return
            pooled += [(j, window) for window in got]
        want = pooled_law(cross, self.wanted)
        test = stats.chi_square_test(pooled, want, false_fail_rate=per_check)
        p = test.p_value if test.p_value is not None else 0.0
        r.chi2_p_value_min = p if r.chi2_p_value_min is None else min(r.chi2_p_value_min, p)
        names = ", ".join(c.name for c in cross)
        if not test.passed:
            worst = max(
                range(len(cross)),
                key=lambda j: stats.tv_distance(
                    stats.empirical_distribution([w for i, w in pooled if i == j]), self.wanted(cross[j]) or {}
                ),
            )
            runs = [w for i, w in pooled if i == worst]
            self.found(cross[worst], runs, self.wanted(cross[worst]) or {}, p, per_check, f"pooled with {names}")
            return
        tv = min(stats.min_discrepancy_chi_square(len(pooled), want, per_check, POWER_FALSE_PASS_RATE), 1.0)
        r.power.append(
            {
                "case": f"cross-check of {len(cross)} enumerated case(s)",
                "cases": [c.name for c in cross],
                "runs": len(pooled),
                "min_detectable_tv": tv,
                "false_fail_rate": per_check,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                "kind": "cross-check",
            }
        )
        line = (
            f"cross-check: {len(pooled)} runs pooled over {names} (their laws enumerated): p-value {p:.3g}; "
            f"sees a subject that behaves differently when enumerated by TV >= {tv:.3g} on average over "
            f"them with probability {1 - POWER_FALSE_PASS_RATE:g}"
        )
        r.ran.append(line)
        if tv > b.cross_check_tv:
            r.shortfalls.append(f"{line}, not the budget's {b.cross_check_tv:g}")

    def judged(self, case, samples, p, per_check, how: str) -> None:
        """Record a fallback case the chi-square passed: its power, and a shortfall when it does
        not see its promised TV (``promised_tv``)."""
        tv = min(
            stats.min_discrepancy_chi_square(
                len(samples), self.wanted(case) or target_distribution(case), per_check, POWER_FALSE_PASS_RATE
            ),
            1.0,
        )
        self.result.power.append(
            {
                "case": case.name,
                "runs": len(samples),
                "min_detectable_tv": tv,
                "false_fail_rate": per_check,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                **({"kind": "sweep"} if case.name in self.swept else {}),
            }
        )
        line = (
            f"chi-square: {case.name}: {how} at n={len(samples)} (p-value {p:.3g}); detects TV "
            f">= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}"
        )
        self.result.ran.append(line)
        if tv > self.promised_tv(case):
            self.result.shortfalls.append(f"{line}, not the budget's {self.promised_tv(case):g}")


__all__ = [
    "CROSS_CHECK_OUTCOMES",
    "ChiSquareDetector",
    "case_looks",
    "check_rate",
    "cross_check_cases",
    "cross_check_runs",
    "planned_runs",
    "pooled_law",
    "promised_tv",
]
