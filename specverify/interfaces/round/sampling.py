"""What every round detector shares: the run's state and the subject's calls that sample.

``RoundSampling`` is the base of each detector class (``round.contract``, ``round.exact``,
``round.statistics``, ``round.engine_scale``, ``round.efficiency``) and so of ``RoundBattery``,
which combines them: it holds one run's state (the cases too slow to judge, the swept cases'
names, the contract's pace, the round-length laws enumerated ahead) and the calls the detectors
make alike: an enumeration's arguments and its call under its guards (``enumeration``), and sampled runs in blocks of ``RUN_BLOCK``,
each block from its own stream (``round_cases.ROUND_STREAMS``), shared among the workers.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...battery import runner
from ...battery.guards import GUARD_PREFIX, ContractBreach, GuardStopped, stopped_by_guard
from ...battery.subject_calls import Battery, OutOfTime, Speed, call_within
from .cases import ENGINE_VOCAB_ORIGIN, Budget, Case, engine_vocab_paths, round_stream, run_blocks, too_slow
from .figures import RoundFigures
from .tasks import (
    enumerate_task,
    enumeration_idle_s,
    enumeration_limit_s,
    guard_outcome,
    sample_guard_s,
    sample_task,
)


def among(case: Case, cases) -> bool:
    """Whether ``case`` is one of ``cases`` (by identity: two cases may share a name)."""
    return any(case is c for c in cases)


class RoundSampling(Battery):
    """One round run's state and its sampling calls (``battery.Battery``'s ``call``, ``now``,
    ``breach`` and ``map_calls``); the detectors subclass it."""

    def __init__(self, subject: runner.Runner, budget: Budget, seed: int, deadline: float | None, aim=None):
        super().__init__(subject, budget, seed, deadline)
        self.aim = aim  # interfaces.Aim: aimed engine-scale cases (engine_scale_cases)
        self.too_slow: list[str] = []  # wide cases whose calls overran their limit (shortfalls)
        self.swept: set[str] = set()  # the names of the swept cases (round_cases.sweep_cases, corners)
        self.speed = Speed()  # the contract's rounds: the forecast's speed (never the verdict's)
        self.lengths_ahead: dict = {}  # round-length laws enumerated ahead (enumerate_ahead)
        self.figures = RoundFigures()  # the round's own figures (tokens_per_round fills them)
        self.result.figures = self.figures

    def enumeration_args(self, case: Case, lengths: bool = False) -> tuple:
        """``enumerate_task``'s arguments for ``case``: a swept case's paths capped at
        ``sweep_max_paths``; ``lengths``: its round-length law rather than its window's."""
        b = self.budget
        paths = replace(b, max_paths=b.sweep_max_paths) if case.name in self.swept and not lengths else b
        if case.name.startswith(ENGINE_VOCAB_ORIGIN):  # its own cap (``engine_vocab_paths``), and a
            # call over V ids the wide cases' hang guard: a slow call there is no hang
            paths = replace(
                b,
                max_paths=min(b.max_paths, engine_vocab_paths(case.model.vocab_size)),
                call_limit_s=max(b.call_limit_s, b.scale_call_limit_s),
            )
        return (case, paths, True) if lengths else (case, paths)

    def enumeration(self, args: tuple, reference=None) -> tuple:
        """``enumerate_task(*args)``'s outcome in the subject's process (or in ``reference``'s, a
        started runner), under an enumeration's guards: killed only when no sampler call has
        returned for ``enumeration_idle_s`` (a hang: ("guard", its words), not judged) or past
        the absolute limit its counts give (``enumeration_limit_s``); never cut while it
        progresses, however slow the machine."""
        b = args[1]
        seconds, idle = enumeration_limit_s(b), enumeration_idle_s(b)
        try:
            if reference is None:
                return self.call(enumerate_task, *args, seconds=seconds, idle=idle)
            return call_within(reference, enumerate_task, args, seconds, self.deadline, self.now, idle)
        except GuardStopped as exc:
            return guard_outcome(exc)

    def enumerations(self, calls: list[tuple]) -> list:
        """``enumeration`` of each of ``calls`` (``enumerate_task``'s arguments), shared among the
        workers (``map_calls``); GuardStopped when a hang stopped one (met again one by one)."""
        limits = [enumeration_limit_s(args[1]) for args in calls]
        idle = max((enumeration_idle_s(args[1]) for args in calls), default=None)
        return self.map_calls([(enumerate_task, args) for args in calls], limits, lambda result: False, idle)

    def sample_blocks(self, case: Case, n: int, where: tuple, budget: Budget | None = None, run=None):
        """n runs of ``case`` in blocks of ``RUN_BLOCK``, block l from
        ``round_stream(seed, *where, l)``; (runs, breach or None). The blocks are independent
        units: the runs are the same however they are shared out. A block whose process was
        killed past its kill limit (``sample_guard_s``: a call that never returned) ends them as
        a call past its limit does, "stopped by a guard" (``sample_task``)."""
        calls, limits = self.block_calls(case, n, where, budget or self.budget, run)
        out: list = []
        try:
            blocks = self.map_calls(calls, limits, stop=lambda result: result[1] is not None)
        except ContractBreach as exc:  # killed, or died: only the kill is a guard's
            if not too_slow(str(exc)):
                raise
            return out, f"{GUARD_PREFIX}{exc}"
        for got, breach, _ in blocks:
            out += got
            self.runs_done += len(got)
            if breach:
                return out, breach
        return out, None

    def runs_ended(self, why: str, case: Case, what: str) -> None:
        """``case``'s sampled runs for ``what`` (a detector's name) ended early (``sample_blocks``):
        a breach is a contract finding; a guard's words (``stopped_by_guard``: a call past its
        limit, a slow call and no evidence of a wrong law) leave the case not judged, a shortfall
        (INCONCLUSIVE), as the loop's guards and the enumerations' report it."""
        if not stopped_by_guard(why):
            self.breach(why, case)
            return
        words = f"{what}: {case.name}: {why}; not judged"
        self.result.shortfalls.append(words)
        self.result.ran.append(words)

    def block_calls(self, case: Case, n: int, where: tuple, b: Budget, run=None) -> tuple[list, list]:
        """The ``sample_task`` calls of n runs of ``case`` in blocks of ``RUN_BLOCK`` (block l
        from ``round_stream(seed, *where, l)``) and each one's guard."""
        purpose, *path = where
        extra = () if run is None else (run,)
        sizes = run_blocks(n)
        calls = [
            (
                sample_task,
                (case, size, np.random.default_rng(round_stream(self.seed, purpose, *path, block)), b, *extra),
            )
            for block, size in enumerate(sizes)
        ]
        return calls, [sample_guard_s(case, size, b) for size in sizes]

    def sample_many(self, requests: list[tuple[Case, int, tuple]]) -> list[tuple[list, str | None]]:
        """``sample_blocks(case, n, where)`` for each request, with every block of every request
        shared among the workers at once (one look of several cases). The runs are the same (each
        block draws from its own stream) and each request's are cut at its first breach, as
        ``sample_blocks`` cuts them; a process that dies, or the time limit, sends it back to one
        request at a time, where the battery meets them in order."""
        if self.workers <= 1 or len(requests) <= 1:
            return [self.sample_blocks(*request) for request in requests]
        calls: list = []
        limits: list = []
        owner: list[int] = []  # the request each call's block belongs to
        for j, (case, n, where) in enumerate(requests):
            more, guards = self.block_calls(case, n, where, self.budget)
            calls += more
            limits += guards
            owner += [j] * len(more)
        try:
            results = self.map_calls(calls, limits, stop=lambda result: False)
        except (ContractBreach, OutOfTime):
            return [self.sample_blocks(*request) for request in requests]
        runs: list[list] = [[] for _ in requests]
        breaches: list[str | None] = [None] * len(requests)
        for j, (got, breach, _) in zip(owner, results):
            if breaches[j] is None:  # a request's blocks after its first breach are dropped
                runs[j] += got
                self.runs_done += len(got)
                breaches[j] = breach
        return list(zip(runs, breaches))


__all__ = ["RoundSampling", "among"]
