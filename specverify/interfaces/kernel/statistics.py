"""The kernel's statistics at kernel speed: the sequential chi-square on (accepted, token) per
instance (generator kernels, or where the factorization of the exact scans failed), and the
pairwise test that rows of a batch of identical rows are independent draws of the rule's law.
"""

from __future__ import annotations

from ...battery.core import POWER_FALSE_PASS_RATE, Finding
from ...battery.guards import ContractBreach
from ...laws import stats
from . import cases as kc
from .calls import KernelCalls
from .plan import bin_law, detect_tv_for, kernel_stream, planned_looks, statistical_law
from .tasks import kernel_counts_task, kernel_pairs_task

PAIR_SHARE = 4
"""The pairwise test's false-fail rate is the budget's over PAIR_SHARE, split over its offsets
(the statistics take half: the two stay within the budget's)."""


class KernelStatistics(KernelCalls):
    """The chi-square per instance and the batch pairs."""

    def statistics(self, case: kc.KernelCase, insts: list, uniforms: bool = False) -> None:
        """The sequential chi-square on each instance: looks at n_min, 2 n_min, ... rows, until
        a look fails, or the power reaches the budget's ``detect_tv``, or ``n_max``; every look
        draws from its own node, ``kernel_stream(seed, "statistics", case, instance, look)``.
        On the dense and binned sweeps the tokens are counted by id range where the law has many
        (``plan.statistical_law``: the rule's law and the counts binned alike, the TV reported
        between the binned laws)."""
        b_ = self.budget
        for b in insts:
            law, bins = statistical_law(case, b)
            want = {f"{j} {y}": v for (j, y), v in law.items()}
            detect = detect_tv_for(case, b_)
            sizes, per_check = planned_looks(want, b_, max(1, self.stat_checks), detect)
            counts: dict = {}
            done, result = 0, None
            for look, n in enumerate(sizes):
                chunks = -(-(n - done) // self.chunk_rows(case))
                node = kernel_stream(self.seed, "statistics", self.case_index, b, look)
                got = self.call(
                    kernel_counts_task,
                    case,
                    b,
                    n - done,
                    node,
                    self.arrays,
                    self.chunk_rows(case),
                    self.generator,
                    self.budget.device,
                    seconds=self.budget.call_limit_s * chunks,
                )
                if got[0] == "breach":
                    raise ContractBreach(got[1])
                for (j, y), c in bin_law(got[1], bins).items():
                    counts[f"{j} {y}"] = counts.get(f"{j} {y}", 0) + c
                self.runs_done += n - done  # the planned rows (``plan.planned_rows``)
                done = n
                result = stats.chi_square_test(counts, want, false_fail_rate=per_check)
                if (
                    not result.passed
                    or stats.min_discrepancy_chi_square(done, want, per_check, POWER_FALSE_PASS_RATE) <= detect
                ):
                    break
            power = stats.min_discrepancy_chi_square(done, want, per_check, POWER_FALSE_PASS_RATE)
            self.result.power.append({"case": f"{case.name}: {case.labels[b]}", "runs": done, "min_tv": power})
            r = self.result
            assert result is not None, "planned_looks plans at least one look"
            assert result.p_value is not None, "a chi-square test always has its p-value"
            r.chi2_p_value_min = min(r.chi2_p_value_min if r.chi2_p_value_min is not None else 1.0, result.p_value)
            got = {tuple(map(int, key.split())): c / done for key, c in counts.items()}
            if not result.passed:
                r.samples_to_detect = done if r.samples_to_detect is None else min(r.samples_to_detect, done)
            elif power > detect:
                r.shortfalls.append(
                    f"{case.name}: {case.labels[b]}: {done} rows see TV {power:.3g}, not the budget's {detect:g}"
                )
            self.judge_law(case, b, got, "statistical", done, biased=not result.passed, want=law)
            binned = "" if bins is None else f", tokens in {len(bins)} id ranges"
            self.result.ran.append(
                f"statistics: {case.name}: {case.labels[b]}: {done:,} rows{binned}, "
                f"sees TV {power:.3g} (false-fail {per_check:.2g} per look)"
            )

    def pairs(self, case) -> None:
        """Rows are independent: ``pair_calls`` batches of the largest batch size of identical rows
        (instance 0) and the disjoint pairs (r, r + t) at each offset t (1 and the batch tiles,
        32, 64, ... up to half the batch);
        the joint law of a pair's (accepted, token) against the product of the rule's (a chi-square,
        its false-fail rate the budget's over ``PAIR_SHARE`` split over the offsets): a distribution
        finding where rows are not independent draws of the rule's law."""
        B, calls, V = max(case.batches), self.budget.pair_calls, case.vocab_size
        offsets = (1, *(2**j for j in range(5, B.bit_length()) if 2**j <= B // 2))  # 1, 32, 64, ..., B / 2
        node = kernel_stream(self.seed, "batch pairs")
        got = self.call(
            kernel_pairs_task,
            case,
            0,
            B,
            calls,
            node,
            self.arrays,
            self.generator,
            self.budget.device,
            offsets,
            seconds=self.budget.call_limit_s * calls,
        )
        if got[0] == "breach":
            raise ContractBreach(got[1])
        self.runs_done += B * calls
        law = {j * (V + 1) + y: v for (j, y), v in kc.rule_law(case, 0).items()}
        want = {f"{a} {b}": pa * pb for a, pa in law.items() for b, pb in law.items()}
        per_check = stats.split_budget(self.budget.false_fail_rate / PAIR_SHARE, len(offsets))
        seen = []
        for t in offsets:
            counts = {f"{a} {b}": n for (a, b), n in got[1][t].items()}
            n = sum(counts.values())
            test = stats.chi_square_test(counts, want, false_fail_rate=per_check)
            seen.append(stats.min_discrepancy_chi_square(n, want, per_check, POWER_FALSE_PASS_RATE))
            if not test.passed:
                tv = 0.5 * sum(abs(counts.get(key, 0) / n - want.get(key, 0.0)) for key in set(counts) | set(want))
                self.result.findings.append(
                    Finding(
                        "batch-pairs",
                        "distribution",
                        f"{case.labels[0]}: rows r and r + {t} of batches of {B} identical rows are not "
                        f"independent draws of the rule's law (joint TV {tv:.3g} from the product of the "
                        f"rule's over {n:,} pairs; {test.detail})",
                        case.name,
                        {"instance": 0, "tv": tv},
                    )
                )
        self.result.ran.append(
            f"batch pairs: {case.name}: {calls} batches of {B} identical rows, pairs at offsets "
            f"{', '.join(map(str, offsets))}: each sees joint TV {max(seen):.3g} (power "
            f"{1 - POWER_FALSE_PASS_RATE:g}, false-fail {per_check:.2g} per offset)"
        )


__all__ = ["PAIR_SHARE", "KernelStatistics"]
