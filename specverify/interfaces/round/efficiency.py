"""The round tokens-per-round detector: the mean round length against the exact rule's, exact
where the enumerator follows the sampler, else sampled; a shortfall is an efficiency finding. Next
to each case's figure go the optimum over exact chain rules and over width-2 trees
(``round.figures.RoundFigures``), information beside ``efficient``, never a finding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...battery.core import POWER_FALSE_PASS_RATE, Finding
from ...laws import rounding, scalar_tests, stats
from .cases import expected_round_length, optimum_tokens_per_round, tree_optimum_tokens_per_round
from .sampling import RoundSampling
from .tasks import round_length_run


class TokensPerRoundDetector(RoundSampling):
    """Tokens per round on ``round_length_cases``."""

    def tokens_per_round(self, cases, false_fail_rate: float) -> None:
        """Mean tokens per round against the exact rule's: exact where enumerable, else sampled
        (case i's runs from ``round_stream(seed, "tokens per round", i)``).

        Only a shortfall is an efficiency finding: an exact single-chain sampler cannot beat the
        rule (the maximal coupling of q and p at every position), while an exact multi-draft
        sampler legitimately does, with more draft tokens; an excess is noted in ``ran``.
        """
        b, r = self.budget, self.result
        per_check = stats.split_budget(false_fail_rate, len(cases))
        skip_exact = any(f.check == "rng" for f in r.findings)
        value: Any  # the enumeration's law of lengths, its breach or its guard's words
        got: float
        for i, case in enumerate(cases):
            want = expected_round_length(case)
            status, value = "not-enumerable", None
            if not skip_exact and case.name in self.lengths_ahead:
                status, value = self.lengths_ahead[case.name]
            elif not skip_exact:
                status, value = self.enumeration(self.enumeration_args(case, True))
            if status == "ok":
                got = sum(length * w for length, w in value.items())
                differs, how = abs(got - want) > rounding.mean_gap_allowed(value, case.k), "exact"
            elif status == "breach":
                self.breach(value, case)
                continue
            else:
                if status == "guard":
                    r.shortfalls.append(f"tokens per round: {case.name}: {value}")
                lengths, breach = self.sample_blocks(
                    case, b.round_length_runs, ("tokens per round", i), run=round_length_run
                )
                if breach:
                    self.runs_ended(breach, case, "tokens per round")
                    continue
                test = scalar_tests.mean_bound_test(lengths, want, 1, case.k + 1, false_fail_rate=per_check)
                got, differs, how = float(np.mean(lengths)), not test.passed, f"sampled n={len(lengths)}"
                power = scalar_tests.min_discrepancy_mean(len(lengths), 1, case.k + 1, per_check, POWER_FALSE_PASS_RATE)
                if not differs and power > b.detect_tokens:
                    r.shortfalls.append(
                        f"tokens per round: {case.name}: {len(lengths)} rounds see a shortfall of "
                        f"{power:.3g} tokens, not the budget's {b.detect_tokens:g}"
                    )
            r.mean_tokens_per_round[case.name] = (got, want)
            self.figures.optimum_tokens_per_round[case.name] = optimum_tokens_per_round(case)
            self.figures.tree_optimum_tokens_per_round[case.name] = tree_optimum_tokens_per_round(case)
            r.ran.append(
                f"tokens per round: {case.name}: {got:.4f} vs {want:.4f} ({how})"
                + (" (more than one chain of k drafts gives)" if differs and got > want else "")
            )
            if differs and got < want:
                r.findings.append(
                    Finding(
                        "tokens-per-round",
                        "efficiency",
                        f"mean tokens per round {got:.4f}, the exact rule gives {want:.4f} ({how})",
                        case.name,
                        {"measured": got, "expected": want},
                    )
                )


__all__ = ["TokensPerRoundDetector"]
