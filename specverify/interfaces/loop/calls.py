"""What every loop check shares: the run's state, the subject's tasks and the records they make.

``LoopCalls`` is the base of the loop checks (``loop.laws``, ``loop.seeds``, ``loop.positions``)
and so of ``LoopBattery``: the enumeration and the sampled runs of a case (the contracts checked
on every outcome), a task a guard stopped (a shortfall, never a verdict on fewer runs), a
finding, a case's coverage entry; ``task`` runs one task under the loop's guards, which watch
progress, never cut it (``task_idle_s``, ``task_limit_s``); ``request_law`` and ``identical_groups`` are the laws and the
groups of requests the checks judge.
"""

from __future__ import annotations

from ...battery.core import BatteryResult, Finding
from ...battery.guards import GUARD_PREFIX, GuardStopped, guard_reason
from ...battery.subject_calls import Battery
from ...laws.requests import sequence_law
from .cases import CORE_KINDS, LoopBudget, LoopCase
from .sweeps import MAX_LAG
from .tasks import (
    contract_problem,
    guard_words,
    loop_enumerate_task,
    loop_sample_task,
    sample_calls,
)


def request_law(case: LoopCase, i: int) -> dict:
    """Request i's exact output law under the target (``laws.requests.sequence_law``)."""
    return sequence_law(case.target, case.requests[i])


def identical_groups(case: LoopCase) -> list[list[int]]:
    """The indices of the case's unseeded requests that share their prompt and params, each
    group of two or more in request order: requests whose outputs must be independent draws of
    one law (a loop that serves them one shared output is not)."""
    groups: list[list[int]] = []
    for i, r in enumerate(case.requests):
        if r.params.seed is not None:
            continue
        same = next((g for g in groups if case.requests[g[0]] == r), None)
        if same is None:
            groups.append([i])
        else:
            same.append(i)
    return [g for g in groups if len(g) > 1]


def identical_pairs(case: LoopCase, every: bool = True) -> list[tuple[int, int]]:
    """The pairs of identical unseeded requests (``identical_groups``) whose joint law is judged:
    every pair of each group (``every``), else the first of each group with every later one.
    Wherever two identical requests sit in the batch and whenever an engine's pool lets them
    start, their outputs must be independent draws (a request admitted into a freed slot that
    inherits the slot's random stream replays its predecessor: NVIDIA/TensorRT-LLM#19487)."""
    out: list[tuple[int, int]] = []
    for g in identical_groups(case):
        out += [(a, b) for n, a in enumerate(g) for b in g[n + 1 :]] if every else [(g[0], b) for b in g[1:]]
    return out


def positions_tests(case: LoopCase) -> int:
    """The tests ``LoopBattery.positions`` makes on a sweep case judged per position: per request
    each position, all positions pooled, and each lag 1..``MAX_LAG``; one per group of identical
    requests (``identical_groups``)."""
    lengths = [r.params.max_tokens for r in case.requests[: 1 if case.seeded else None]]
    return sum(m + 1 + min(max(m - 1, 0), MAX_LAG) for m in lengths) + len(identical_pairs(case, every=False))


class LoopCalls(Battery):
    """One loop run's state and its calls (``battery.Battery``'s ``call``: killed past its limit,
    a death a ContractBreach, the deadline OutOfTime). ``laws``: each request's (method, law got,
    law wanted, runs) of the case judged last."""

    def __init__(self, subject, budget: LoopBudget, seed: int, deadline: float | None):
        super().__init__(subject, budget, seed, deadline)
        self.laws: dict = {}

    def restart(self) -> None:
        """A fresh result and laws: the counterexample search judges each candidate alone."""
        self.result, self.laws = BatteryResult(budget=self.budget.name), {}

    def task_idle_s(self) -> float:
        """The idle guard of every loop task: it is stopped (not judged) only when no loop call
        has returned for one call's limit plus ``budget.task_idle_s`` (a hang no signal
        interrupts: in C, a blocking read), never while its calls return, however slow."""
        return self.budget.call_limit_s + self.budget.task_idle_s

    def task_limit_s(self, calls: int) -> float:
        """The absolute kill limit of a task of at most ``calls`` loop calls, from its counts:
        every call at its limit, and the idle guard's wait once more (a backstop; the idle
        guard is the one that stops a hang)."""
        return max(calls, 1) * self.budget.call_limit_s + self.task_idle_s()

    def task(self, task, *args, calls: int):
        """``task(subject, *args)`` in the subject's process (``Battery.call``: the deadline
        OutOfTime, a death ContractBreach) under the loop's guards: GuardStopped (its words
        start "stopped by a guard") when no loop call returned for ``task_idle_s``, a task of at
        most ``calls`` loop calls killed past ``task_limit_s(calls)``."""
        return self.call(task, *args, seconds=self.task_limit_s(calls), idle=self.task_idle_s())

    def find(self, check, kind, message, case, evidence=None):
        self.result.findings.append(Finding(check, kind, message, case.name, evidence or {}))

    def stopped(self, case: LoopCase, words: str) -> None:
        """A task a guard stopped: the case is not judged (a shortfall: inconclusive)."""
        self.result.shortfalls.append(f"{case.name}: {words}")
        self.result.ran.append(f"{case.name}: {words}")

    def contracts(self, case: LoopCase, outcomes) -> None:
        seen: set = set()
        rows: dict = {}  # processed rows shared by the outcomes (contract_problem)
        for outcome in outcomes:
            for i, row in enumerate(outcome):
                problem = contract_problem(case, i, row, rows)
                if problem and problem[0] not in seen:
                    seen.add(problem[0])
                    self.find(problem[0], "contract", problem[1], case, {"request": i})

    def enumerate(self, case: LoopCase, ids):
        """The task ``loop_enumerate_task``: at most ``budget.max_paths`` paths, or
        ``budget.extra_max_paths`` for an edge, generated or sweep case (past it: statistics);
        ("guard", words) when a guard stopped it (not judged)."""
        b = self.budget
        paths = b.max_paths if case.kind in CORE_KINDS else min(b.max_paths, b.extra_max_paths)
        try:
            return self.task(loop_enumerate_task, case, tuple(ids), paths, b.call_limit_s, calls=paths)
        except GuardStopped as exc:
            return "guard", f"{GUARD_PREFIX}exact enumeration: {guard_reason(exc)}; not judged"

    def sample(self, case: LoopCase, n: int, rng) -> tuple | None:
        """n runs of the whole case (``loop_sample_task``), contracts checked on each; (outcomes,
        rng after, replayed), or None when a breach or a guard ended them (reported here)."""
        b = self.budget
        ids = tuple(range(len(case.requests)))
        try:
            got, breach, replayed, rng, stopped = self.task(
                loop_sample_task, case, ids, n, rng, b.call_limit_s, calls=sample_calls(n)
            )
        except GuardStopped as exc:
            self.stopped(case, guard_words("its runs", None, n, "runs", guard_reason(exc)))
            return None
        if breach:
            self.find("contract", "contract", breach, case)
        self.contracts(case, got)
        if stopped:
            self.stopped(case, guard_words("its runs", len(got), n, "runs", stopped))
            return None
        return got, rng, replayed, bool(breach)

    def cover(self, case: LoopCase, judged: str, runs: int | None, detect_tv: float | None) -> None:
        """The case's ``coverage_entry`` (origin: its kind; an engine-scale batch is generated, a
        sweep an edge reached on purpose)."""
        origin = {"scale": "generated", "sweep": "edge"}.get(case.kind, case.kind)
        self.result.cover(
            name=case.name,
            origin=origin,
            vocab=case.vocab_size,
            k=case.k,
            tokens=max((q.params.max_tokens for q in case.requests), default=0),
            judged=judged,
            runs=runs,
            detect_tv=detect_tv,
            requests=len(case.requests),
            prompts=[len(q.prompt) for q in case.requests],
            seeded=case.seeded,
        )


__all__ = ["LoopCalls", "identical_groups", "identical_pairs", "request_law"]
