"""The round exact detector: the exact law of each case's first m emitted tokens, by enumerating
every path of the sampler's random decisions (specverify.laws.exact, run in the subject's process
by ``round.tasks.enumerate_task``), against the target's; a finding when TV is above the rounding of the subject's working
precision (``specverify.laws.rounding``: ``EXACT_TV_TOL``, 1e-9, at float64).
A case the enumerator cannot follow goes to the chi-square (``round.statistics``).
"""

from __future__ import annotations

from ...battery.core import Finding, stopping_kinds
from ...battery.guards import ContractBreach, GuardStopped
from ...battery.subject_calls import Battery, OutOfTime
from ...laws import exact, rounding
from .cases import Case, round_length_cases
from .own_reference import RoundReference


def top_table(dist: dict, limit: int = 16) -> dict:
    """A law's ``limit`` likeliest outcomes, as a finding's evidence shows them."""
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:limit]
    return {" ".join(map(str, key)): round(float(v), 12) for key, v in top}


class ExactDetector(RoundReference):
    """Exact TV per case, the enumerations one by one or shared among the workers."""

    def exact(self, cases, stop_on_first: bool | tuple[str, ...]) -> list[Case]:
        """Exact TV per case; returns the cases left to statistics."""
        r = self.result
        if any(f.check == "rng" for f in r.findings):
            r.ran.append("exact: skipped (the sampler does not draw from rng)")
            return list(cases)
        fallback = []
        outcomes = self.enumerate_ahead(cases, stop_on_first)
        for i, case in enumerate(cases):
            if stop_on_first and r.flagged(stopping_kinds(stop_on_first)):
                r.ran.append("exact: stopped after the first finding")
                break
            if outcomes is not None:
                status, value = outcomes[i]
            else:
                status, value = self.enumeration(self.enumeration_args(case))
            if status == "guard":
                r.ran.append(f"exact: {case.name}: {value}; statistics instead")
                r.shortfalls.append(f"exact: {case.name}: {value}")
                fallback.append(case)
                continue
            if status == "breach":
                self.breach(value, case)
                continue
            if status == "not-enumerable":
                r.ran.append(f"exact: {case.name}: not enumerable ({value}); statistics instead")
                fallback.append(case)
                continue
            want = self.wanted(case)
            if want is None:  # a reference that cannot be enumerated here, or broken (said)
                continue
            tv = exact.total_variation(value, want)
            r.exact_tv_max = tv if r.exact_tv_max is None else max(r.exact_tv_max, tv)
            r.ran.append(f"exact: {case.name}: TV {tv:.3g}")
            m = case.model
            judged = rounding.judge_law(tv, value, want, m.p_fn, m.q_fn, case.prefix, case.k, case.m)
            rounding.tally(r.rounding, judged)  # one policy: laws.rounding
            if not judged.exact:
                r.findings.append(
                    Finding(
                        "exact-tv",
                        "distribution",
                        judged.words()
                        if self.reference is None
                        else judged.words().replace("the target's", "the reference's (your own target-only round)"),
                        case.name,
                        {"exact_tv": tv, **judged.evidence(), "got": top_table(value), "expected": top_table(want)},
                    )
                )
        return fallback

    def enumerate_ahead(self, cases, stop_on_first: bool | tuple[str, ...]) -> list | None:
        """With several workers, every case's enumeration, and the tokens-per-round cases'
        round-length laws (kept in ``self.lengths_ahead`` for ``tokens_per_round``), shared among
        the subject's processes (``map_calls``), in the cases' order; None (enumerate one by one,
        here) with one worker, with ``stop_on_first`` (the first finding ends enumeration) or
        when enumerations are served from elsewhere. An enumeration draws nothing from the
        battery's streams and reads no state another leaves (a ``SubrunMemo`` only saves time),
        so each outcome is the one the single process gets (a process that dies, or the time
        limit, sends the battery back to one by one, where it meets them in order); the longest, a round-length law
        of up to 2k + 1 draws, go first so that the processes end together."""
        if self.workers <= 1 or stop_on_first or type(self).call is not Battery.call:
            return None
        lengths = round_length_cases()
        calls = [self.enumeration_args(c, True) for c in lengths]
        calls += [self.enumeration_args(c) for c in cases]
        try:
            out = self.enumerations(calls)
        except (ContractBreach, OutOfTime, GuardStopped):  # a death, a hang or the time limit: one by one
            return None
        self.lengths_ahead = {c.name: outcome for c, outcome in zip(lengths, out)}
        return out[len(lengths) :]


__all__ = ["ExactDetector", "top_table"]
