"""The round chi-square detector: sampled runs of each case against its exact target law at
doubling sample sizes (``looks``), the false-fail budget split Bonferroni over every case and
every look; each case's power (the smallest TV it detects) goes to ``result.power``, and a case
statistics alone judges that cannot see the budget's ``detect_tv`` is a shortfall.
"""

from __future__ import annotations

from ...battery.core import POWER_FALSE_PASS_RATE, Finding
from ...laws import stats
from .cases import Case, looks, target_distribution
from .own_reference import RoundReference
from .sampling import among


class ChiSquareDetector(RoundReference):
    """The sequential chi-square on the cases the enumerator could not follow, and a cross
    check on enumerated ones."""

    def statistics(self, cases, fallback, false_fail_rate: float) -> None:
        """Chi-square at doubling sample sizes (``looks``: n_min, 2 n_min, ... n_max), breadth
        first (every live case at n before any at 2n); each look is one check of the Bonferroni
        split. A case leaves at its first failing look; the others run every look (to
        ``n_max`` for a case statistics alone judges, to ``cross_check_n_max`` for an enumerated
        one, whose law the enumeration already gave), so each case's run count is fixed by the
        budget and the seed. The runs case i adds at look j
        come in blocks of ``RUN_BLOCK``, block l drawn from its own stream,
        ``round_stream(seed, "chi-square looks", i, j, l)``: the same whatever other cases are
        live, and whichever process draws them."""
        b, r = self.budget, self.result
        if not cases:  # stat_cases=0 and every case enumerated: the laws are had, nothing to sample
            r.ran.append("chi-square: no case to sample (every case enumerated, stat_cases=0)")
            return
        sizes = looks(b.n_min, b.n_max)
        per_check = stats.split_budget(false_fail_rate, len(cases) * len(sizes))
        live: dict[int, list] = {i: [] for i in range(len(cases))}
        last_p: dict = {}
        last = {i: self.last_look(c, fallback, sizes) for i, c in enumerate(cases)}
        for look, n in enumerate(sizes):
            wanted = [i for i in live if n <= last[i]]
            requests = [(cases[i], n - len(live[i]), ("chi-square looks", i, look)) for i in wanted]
            fetched = dict(zip(wanted, self.sample_many(requests)))
            for i in list(live):
                case, samples = cases[i], live[i]
                if n > last[i]:
                    self.judged(case, samples, last_p[i], per_check, self.judged_only_here(case, fallback), "passed")
                    del live[i]
                    continue
                got, breach = fetched[i]
                samples += got
                if breach:
                    self.breach(breach, case)
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
                    tv = stats.tv_distance(stats.empirical_distribution(samples), want)
                    r.samples_to_detect = (
                        len(samples) if r.samples_to_detect is None else min(r.samples_to_detect, len(samples))
                    )
                    r.findings.append(
                        Finding(
                            "chi-square",
                            "distribution",
                            f"sampled distribution differs from "
                            f"{'the reference' if self.reference is not None else 'the target'}'s: chi-square p-value "
                            f"{p:.3g} < {per_check:.3g} after {len(samples)} runs, empirical TV {tv:.3g} "
                            f"({test.detail})",
                            case.name,
                            {"p_value": p, "samples": len(samples), "empirical_tv": tv},
                        )
                    )
                    del live[i]
        for i in live:
            self.judged(cases[i], live[i], last_p[i], per_check, self.judged_only_here(cases[i], fallback), "passed")

    def last_look(self, case: Case, fallback, sizes: list[int]) -> int:
        """The run count a case's chi-square ends at: ``n_max`` for a case statistics alone
        judges, ``sweep_runs`` for a swept one (one of many points of a sweep: its power stated,
        not required), ``cross_check_n_max`` for an enumerated one (its law already known)."""
        b = self.budget
        if not among(case, fallback):
            want = b.cross_check_n_max
        elif case.name in self.swept:
            want = b.sweep_runs
        else:
            return sizes[-1]
        return max([n for n in sizes if n <= want], default=sizes[0])

    def judged_only_here(self, case: Case, fallback) -> bool:
        """Whether statistics alone judge ``case`` to the budget's ``detect_tv`` (a swept case
        the enumerator cannot follow states its power, not the budget's)."""
        return among(case, fallback) and case.name not in self.swept

    def planned_runs(self, stat: list, fallback: list, big: list) -> int:
        """The runs the budget plans for the chi-square's cases (every look, to ``last_look``)
        and the engine-scale cases: what a run without findings samples (tokens per round,
        sampled only where the enumerator cannot follow, comes on top)."""
        sizes = looks(self.budget.n_min, self.budget.n_max)
        return sum(self.last_look(c, fallback, sizes) for c in stat) + len(big) * self.budget.scale_runs

    def judged(self, case, samples, p, per_check, judged_only_here: bool, how: str) -> None:
        """Record a case the chi-square passed: its power, and a shortfall when statistics alone
        judges it and cannot see the budget's ``detect_tv``."""
        tv = min(
            stats.min_discrepancy_chi_square(len(samples), target_distribution(case), per_check, POWER_FALSE_PASS_RATE),
            1.0,
        )
        self.result.power.append(
            {
                "case": case.name,
                "runs": len(samples),
                "min_detectable_tv": tv,
                "false_fail_rate": per_check,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
            }
        )
        line = (
            f"chi-square: {case.name}: {how} at n={len(samples)} (p-value {p:.3g}); detects TV "
            f">= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}"
        )
        self.result.ran.append(line)
        if judged_only_here and tv > self.budget.detect_tv:
            self.result.shortfalls.append(f"{line}, not the budget's {self.budget.detect_tv:g}")


__all__ = ["ChiSquareDetector"]
