"""The round engine-scale detector: the engine-scale cases (``round.cases.engine_scale_cases``: V
4096 to 152,064, k up to 8, and the user's aimed ones), sampled and judged on every window position
by a binned chi-square (specverify.laws.scale); a finding there is shrunk over vocabularies and k
(``round.counterexample.shrink_engine_scale``).
"""

from __future__ import annotations

from dataclasses import replace

from ...battery.core import POWER_FALSE_PASS_RATE, Finding
from ...battery.guards import ContractBreach
from ...laws import scale, stats
from .cases import SCALE_STREAMS, Budget, too_slow
from .sampling import RoundSampling


def scale_sizes(b: Budget, cases, false_fail_rate: float) -> list[int]:
    """Each engine-scale case's run count under budget ``b``: ``scale_runs``, raised to the fewest
    runs at which every position's binned chi-square (at ``false_fail_rate`` split over every
    position of every case) sees ``scale_tv`` with probability 1 - POWER_FALSE_PASS_RATE."""
    if not cases:
        return []
    per_check = stats.split_budget(false_fail_rate, sum(c.m for c in cases))
    need = []
    for case in cases:
        p = case.model.p_table[0]
        sees = lambda n, p=p: scale.min_detectable_tv(p, n, per_check, POWER_FALSE_PASS_RATE)  # noqa: E731
        need.append(b.scale_runs if sees(b.scale_runs) <= b.scale_tv else stats.smallest_n(sees, b.scale_tv))
    return need


class EngineScaleDetector(RoundSampling):
    """The binned chi-square on the engine-scale cases."""

    def engine_scale(self, cases, false_fail_rate: float) -> None:
        """Each engine-scale case (``engine_scale_cases``): ``scale_sizes`` runs of its first m
        tokens (case i's blocks from ``round_stream(seed, "engine scale", 1, i, block)``, the
        engine-scale runs' node of ``SCALE_STREAMS``), then a binned chi-square per position
        against p (``scale.judge_positions``), the false-fail rate split over every position of
        every case. A case whose calls overrun ``scale_call_limit_s`` is not judged there (a
        shortfall); a case whose runs end short of ``scale_tv`` (a breach cut them) is a shortfall."""
        b, r = self.budget, self.result
        if not cases:
            return
        per_check = stats.split_budget(false_fail_rate, sum(c.m for c in cases))
        wide = replace(b, call_limit_s=max(b.call_limit_s, b.scale_call_limit_s))
        node = SCALE_STREAMS.index("engine-scale runs")
        for i, (case, size) in enumerate(zip(cases, scale_sizes(b, cases, false_fail_rate))):
            try:
                runs, breach = self.sample_blocks(case, size, ("engine scale", node, i), wide)
            except ContractBreach as exc:  # its process died (killed past the limit, or exited)
                runs, breach = [], str(exc)
            if breach and too_slow(breach):
                r.shortfalls.append(f"engine scale: {case.name}: {breach}; not judged at this vocabulary")
                r.ran.append(f"binned chi-square: {case.name}: too slow ({breach})")
                continue
            if breach:
                self.breach(breach, case)
                continue
            p, n = case.model.p_table[0], len(runs)
            verdict = scale.judge_positions(runs, p, case.m, per_check)
            words = scale.binning_words(len(verdict.want), case.model.vocab_size, n)
            if not verdict.passed:
                r.findings.append(
                    Finding(
                        "binned-chi-square",
                        "distribution",
                        f"token {verdict.position + 1} of the window differs from the target's law: chi-square "
                        f"p-value {verdict.p_value:.3g} < {per_check:.3g}, binned TV {verdict.binned_tv:.3g} ({words})",
                        case.name,
                        {
                            "position": verdict.position,
                            "p_value": verdict.p_value,
                            "samples": n,
                            "binned_tv": verdict.binned_tv,
                            "bins": len(verdict.want),
                        },
                    )
                )
            tv = scale.min_detectable_tv(p, n, per_check, POWER_FALSE_PASS_RATE)
            r.power.append(
                {
                    "case": case.name,
                    "runs": n,
                    "min_detectable_tv": tv,
                    "false_fail_rate": per_check,
                    "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                    "binned": len(verdict.want),
                }
            )
            r.ran.append(
                f"binned chi-square: {case.name}: {n} runs, {case.m} position(s); detects a binned "
                f"TV >= {tv:.3g} per position with probability {1 - POWER_FALSE_PASS_RATE:g} ({words})"
            )
            if tv > b.scale_tv:
                r.shortfalls.append(
                    f"engine scale: {case.name}: {n} runs see only a binned TV of {tv:.3g}, not the budget's {b.scale_tv:g}"
                )


__all__ = ["EngineScaleDetector", "scale_sizes"]
