"""The loop battery's checks, the parent's side: ``LoopBattery`` runs the checks ``interfaces.loop``
lists (sequence law, joint law, batch isolation, stop / max_tokens, counts, logprobs, seeds, tokens
per pass, the sweeps judged per position, the binned chi-square at engine scale) on one subject,
through the tasks of ``loop.tasks``, against the references of ``loop.reference``
(``laws.requests.sequence_law``, the reference loop's tokens per pass).

Every check runs on whatever cases it is given, the battery's own or a subject's declared ones
alike: a case the enumerator cannot follow gets the same checks by statistics (its law, the
joint law of its identical requests, tokens per pass by a mean test, the contracts on every run).
Sample sizes are the budget's counts; a task a guard stops (a hang: ``loop.calls.LoopCalls.task``)
leaves its case not judged (a shortfall in the guard's words), never judged on fewer runs.

A module of its own, not part of ``interfaces/loop/battery.py``: the interface (``run``) and the
counterexample search (``loop.counterexample``) both drive it, and the interface calls the search,
so the search cannot import the interface without an import circle. The checks are parts of
their own over one run's state (``loop.calls``): the laws (``loop.laws``), the seeds
(``loop.seeds``), the checks per position (``loop.positions``); the false-fail split here counts
every test they make.
"""

from __future__ import annotations

import numpy as np

from ...battery.core import BatteryResult, stopping_kinds
from ...battery.guards import GuardStopped, guard_reason
from ...laws import stats
from .calls import identical_pairs
from .cases import SCALE_KINDS, seed_stream
from .consecutive import ConsecutiveChecks
from .laws import LawChecks
from .mechanism_cases import CONSECUTIVE, CONTINUOUS
from .own_reference import ReferenceBroken
from .positions import PositionChecks, positions_tests
from .tasks import guard_words, loop_sample_task, sample_calls


class LoopBattery(LawChecks, PositionChecks, ConsecutiveChecks):
    """One run of every loop check on one subject (the parent's side): the replay check first
    (enumeration needs it), then each case by its kind: judged per position (``PositionChecks``:
    sweeps, engine-scale batches), seeded (``SeedChecks``), across two consecutive calls
    (``ConsecutiveChecks``), else by its laws (``LawChecks``);
    the false-fail rate split over every test those checks make (``split``)."""

    def split(self, cases) -> float:
        """The per-check false-fail rate: the budget's split (Bonferroni) over every request of
        every case judged by its law (and each group of identical requests there), each seed-law
        check, each position of an engine-scale batch and each test of a sweep judged per
        position (``positions_tests``)."""
        law = [c for c in cases if not c.seeded and not c.positions and c.kind not in SCALE_KINDS]
        count = sum(len(c.requests) + len(identical_pairs(c)) for c in law)
        count += sum(1 for c in cases if c.seeded and not c.positions) if self.budget.seed_law_runs > 0 else 0
        count += sum(q.params.max_tokens for c in cases if c.kind in SCALE_KINDS for q in c.requests)
        count += sum(positions_tests(c) for c in cases if c.positions)
        return stats.split_budget(self.budget.false_fail_rate, max(1, count))

    def replays(self, cases) -> bool | None:
        """Whether the loop replays the same outputs from the same rng state (3 runs of the first
        case with requests, then 3 replays): enumeration needs it. None after a breach, or when
        a guard stopped them (a loop that hangs on its first case: nothing judged, said here)."""
        first = next((c for c in cases if c.requests and not c.seeded), None)
        if first is None:
            return True
        b = self.budget
        ids = tuple(range(len(first.requests)))
        rng = np.random.default_rng(self.seed)
        try:
            got, breach, replayed, _, stopped = self.task(
                loop_sample_task, first, ids, 3, rng, b.call_limit_s, calls=sample_calls(3)
            )
            done: int | None = len(got)
        except GuardStopped as exc:
            breach, replayed, stopped, done = None, True, guard_reason(exc), None
        if breach:
            self.find("contract", "contract", breach, first)
            return None
        if stopped:
            self.stopped(first, guard_words("the replay check", done, 3, "runs", stopped))
            self.result.ran.append("replay check: stopped by a guard; the remaining cases not judged")
            return None
        if not replayed:
            self.find(
                "rng",
                "contract",
                "does not draw from rng: the same rng state replayed different "
                "outputs; enumeration skipped, laws judged by statistics",
                first,
            )
        return bool(replayed)

    def run(self, cases, stop_on_first: bool | tuple[str, ...]) -> BatteryResult:
        """Every case in order; a broken reference (``own_reference.ReferenceBroken``) ends the
        run, its finding and shortfall recorded (never a verdict on the subject)."""
        try:
            return self.run_cases(cases, stop_on_first)
        except ReferenceBroken:
            self.result.ran.append("reference: broken; the remaining cases not judged")
            return self.result

    def run_cases(self, cases, stop_on_first: bool | tuple[str, ...]) -> BatteryResult:
        r = self.result
        per_check = self.split(cases)
        exact_ok = self.replays(cases)
        if exact_ok is None:
            return r
        scale_rng = np.random.default_rng(seed_stream(self.seed, "engine-scale runs"))
        for i, case in enumerate(cases):
            if stop_on_first and r.flagged(stopping_kinds(stop_on_first)):
                r.ran.append("stopped after the first finding")
                break
            if case.positions:
                scale_rng = self.sweep_case(case, per_check, scale_rng)
            elif case.seeded:
                self.seeded_case(case, per_check)
            elif case.kind in SCALE_KINDS:
                scale_rng = self.scale_case(case, per_check, scale_rng)
            elif case.sweep == CONSECUTIVE:
                self.consecutive_case(case, per_check)
            elif case.sweep == CONTINUOUS:
                self.result.ran.append(f"sequence-law: {case.name}: by statistics (more requests than enumerated)")
                self.sampled_laws(case, per_check, seed_stream(self.seed, "loop chi-square", i), efficiency=False)
            else:
                self.law_case(case, per_check, exact_ok, seed_stream(self.seed, "loop chi-square", i))
        return r


__all__ = ["LoopBattery"]
