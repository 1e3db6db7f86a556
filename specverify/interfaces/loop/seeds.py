"""The loop checks on seeded requests: a seeded request replays its outputs alone, in a batch and
beside the same seed (``seeded-reproducibility``), and its outputs over seeds are draws of its law
(``seed-law``).
"""

from __future__ import annotations

import numpy as np

from ...battery.core import POWER_FALSE_PASS_RATE
from ...battery.guards import GuardStopped, guard_reason
from ...laws import stats
from ...laws.two_sample import two_sample_test
from .cases import LoopCase, seed_stream
from .own_reference import ReferenceCalls
from .tasks import guard_words, loop_seed_law_task, loop_seed_task, seed_calls


class SeedChecks(ReferenceCalls):
    """The seeded case: seeds by replay and by law."""

    def seeded_case(self, case: LoopCase, per_check: float | None = None) -> None:
        """Seeds, by replay and by law. ``seeded-reproducibility`` (contract): request 0 seeded with
        s gives the same tokens alone and beside unseeded requests, and requests 0 and 1 both
        seeded with s in one batch each give what they give alone (``budget.seeds`` seeds).
        ``seed-law`` (distribution): request 0 alone, seeded with 0..n-1 (n =
        ``budget.seed_law_runs``), must follow its exact law (``loop.sequence_law``): the
        battery's chi-square at ``per_check`` (default: the budget's whole false-fail rate), its
        power (the TV it detects with probability 0.95) in ``result.power`` with ``"check":
        "seed-law"``; a loop that re-seeds every round, or ignores the target when seeded, replays
        perfectly and fails here. Its power is stated, never a shortfall: the request's law is
        also judged, unseeded, by enumeration."""
        b, r = self.budget, self.result
        self.laws = {}
        seeds = list(range(b.seeds))
        runs = seed_stream(self.seed, "seed replay runs")
        try:
            mismatches, breach, done, stopped = self.task(
                loop_seed_task, case, seeds, runs, b.call_limit_s, True, calls=seed_calls(case, len(seeds), True)
            )
        except GuardStopped as exc:
            self.stopped(case, guard_words("seeded replays", None, len(seeds), "seeds", guard_reason(exc)))
            return
        if breach:
            self.find("contract", "contract", breach, case)
        elif stopped:
            self.stopped(case, guard_words("seeded replays", done, len(seeds), "seeds", stopped))
            return
        r.ran.append(
            f"seeded-reproducibility: {case.name}: {len(mismatches)} mismatches over {done} seeds "
            f"(alone vs batched, same-seed pairs)"
        )
        for kind in ("batched", "same seed"):
            first = next((m for m in mismatches if m["kind"] == kind), None)
            if first is None:
                continue
            what = (
                "a seeded request's tokens differ alone and in a batch"
                if kind == "batched"
                else "two requests with the same seed in one batch do not each give what they give alone"
            )
            self.find(
                "seeded-reproducibility",
                "contract",
                f"{what} (seed {first['seed']}, request {first['request']}: {first['alone']} alone, "
                f"{first['batched']} batched)",
                case,
                {"request": first["request"], "mismatches": [m for m in mismatches if m["kind"] == kind][:5]},
            )
        if breach or b.seed_law_runs <= 0:
            return
        samples = self.over_seeds(case)
        if samples:
            self.seed_law(case, samples, b.false_fail_rate if per_check is None else per_check)

    def over_seeds(self, case: LoopCase) -> list | None:
        """Request 0's tokens alone, seeded with 0..``seed_law_runs`` - 1 (``loop_seed_law_task``);
        None when a breach or a guard ended them (reported here)."""
        b = self.budget
        rng = np.random.default_rng(seed_stream(self.seed, "seed-law and same-seed runs"))
        what, n = "seeds judged by their law", b.seed_law_runs
        try:
            samples, breach, stopped = self.task(loop_seed_law_task, case, n, rng, b.call_limit_s, calls=n)
        except GuardStopped as exc:
            self.stopped(case, guard_words(what, None, n, "seeds", guard_reason(exc)))
            return None
        if breach:
            self.find("contract", "contract", breach, case)
        if stopped:
            self.stopped(case, guard_words(what, len(samples), n, "seeds", stopped))
            return None
        return samples

    def seed_law(self, case: LoopCase, samples: list, rate: float) -> None:
        r = self.result
        want = self.wanted(case, 0, (0,))
        if want is None:  # the reference cannot be enumerated: as many of its runs, a two-sample test
            self.seed_law_two_sample(case, samples, rate)
            return
        self.laws[0] = ("statistical", stats.empirical_distribution(samples), want, len(samples))
        test = stats.chi_square_test(samples, want, false_fail_rate=rate)
        p = test.p_value if test.p_value is not None else 0.0
        r.chi2_p_value_min = p if r.chi2_p_value_min is None else min(r.chi2_p_value_min, p)
        tv = min(stats.min_discrepancy_chi_square(len(samples), want, rate, POWER_FALSE_PASS_RATE), 1.0)
        r.power.append(
            {
                "case": case.name,
                "request": 0,
                "check": "seed-law",
                "runs": len(samples),
                "seeds": f"0..{len(samples) - 1}",
                "min_detectable_tv": tv,
                "false_fail_rate": rate,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
            }
        )
        self.cover(case, "chi-square", len(samples), tv)
        r.ran.append(
            f"seed-law: {case.name}: request 0 over seeds 0..{len(samples) - 1}: p-value {p:.3g}; "
            f"detects TV >= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}"
        )
        if not test.passed:
            self.find(
                "seed-law",
                "distribution",
                f"request 0: its outputs over seeds 0..{len(samples) - 1} do not follow "
                f"{'the reference' if self.reference is not None else 'target-only sampling'}'s law: p-value {p:.3g} < {rate:.3g}",
                case,
                {
                    "request": 0,
                    "p_value": p,
                    "seeds": len(samples),
                    "empirical_tv": stats.tv_distance(self.laws[0][1], want),
                },
            )

    def seed_law_two_sample(self, case: LoopCase, samples: list, rate: float) -> None:
        """``seed-law`` against runs of a reference the enumerator cannot follow (request 0 alone,
        unseeded, as many runs as seeds): the two-sample chi-square at ``rate``."""
        runs = [o[0] for o in self.reference_runs(case, (0,), len(samples), purpose=1)]
        test = two_sample_test(samples, runs, rate, POWER_FALSE_PASS_RATE)
        self.two_sample_power(case, 0, test, rate)
        self.cover(case, "chi-square", len(samples), test.min_detectable_tv)
        self.result.ran.append(
            f"seed-law: {case.name}: request 0 over seeds 0..{len(samples) - 1} against {len(runs)} runs of the "
            f"reference: two-sample p-value {test.p_value:.3g}; detects TV >= {test.min_detectable_tv:.3g}"
        )
        if not test.passed:
            self.find(
                "seed-law",
                "distribution",
                f"request 0: its outputs over seeds 0..{len(samples) - 1} differ from the reference's runs: "
                f"two-sample p-value {test.p_value:.3g} < {rate:.3g}",
                case,
                {"request": 0, "p_value": test.p_value, "seeds": len(samples)},
            )


__all__ = ["SeedChecks"]
