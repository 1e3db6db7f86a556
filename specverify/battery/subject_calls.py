"""The parent's side of every battery: the started subject, its calls under their limits and the
battery's deadline, and the result they fill.

Contract: ``Battery`` holds what every battery holds whatever its interface (the subject, the
budget, the seed, the deadline, the ``core.BatteryResult``); every call into the subject's process
goes through ``call_within``, which raises ``OutOfTime`` once the deadline has passed, turns a task
its idle guard stopped (``runner.Stalled``: no subject call returned for a while) into
``guards.GuardStopped`` (not judged, never a finding) and the subject's process dying or overrunning
(``runner.SubjectFailed``) into ``guards.ContractBreach``;
``run_in_subject`` starts the subject, runs a battery and turns a deadline, a death or a breach
that ended it into the result (never an exception); ``subject_process`` hands a battery a started
``runner.Runner``. ``listening`` / ``announce`` carry a battery's forecast to a progress line, and
``Speed`` its pace: neither is ever an input to a verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from . import runner
from .core import BatteryResult, Finding
from .guards import GUARD_PREFIX, ContractBreach, GuardStopped


class OutOfTime(Exception):
    """The battery's deadline passed (``run_battery(deadline=...)``)."""


_LISTENERS: list[Callable[[str], None]] = []


@contextmanager
def listening(listener: Callable[[str], None]):
    """Within the block, ``listener(words)`` hears every ``announce``: what a battery is about to
    do (a forecast of its runs), for a progress line; never part of a result."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


def heard() -> bool:
    """Whether anyone listens (``listening``): words that cost time to make (the other budgets'
    forecasts) are made only then."""
    return bool(_LISTENERS)


def announce(words: str) -> None:
    """Tell the listeners (``listening``) ``words``; a listener that fails is dropped silently."""
    for listener in list(_LISTENERS):
        try:
            listener(words)
        except Exception:  # noqa: BLE001 - progress never breaks a check
            _LISTENERS.remove(listener)


class Speed:
    """Rounds and the seconds they took (a battery's first calls): the pace of a forecast,
    never an input to a verdict."""

    def __init__(self) -> None:
        self.rounds, self.tokens, self.seconds = 0, 0, 0.0

    def add(self, rounds: list, seconds: float) -> None:
        self.rounds += len(rounds)
        self.tokens += sum(len(r) for r in rounds)
        self.seconds += seconds

    def rounds_per_second(self) -> float | None:
        return self.rounds / self.seconds if self.rounds and self.seconds > 0 else None

    def tokens_per_round(self) -> float:
        return self.tokens / self.rounds if self.rounds else 1.0


class Battery:
    """What every battery holds on the parent's side, whatever its interface: the started
    subject (a ``runner.Runner``), the budget (a dataclass with a ``name``), the seed, the
    deadline (a ``time.monotonic()`` value or None) and the ``BatteryResult`` it fills.
    ``call`` runs one task in the subject's process under its limit and the deadline;
    ``breach`` records a contract finding (``run_in_subject`` calls it when the subject died
    or broke the interface mid-stage). Subclasses (``interfaces.round.RoundBattery``,
    ``interfaces.loop_checks.LoopBattery``, ``interfaces.kernel.KernelBattery``) add the checks."""

    def __init__(self, subject: runner.Runner, budget, seed: int, deadline: float | None):
        self.subject, self.budget, self.seed, self.deadline = subject, budget, seed, deadline
        self.result = BatteryResult(budget=budget.name)
        self.runs_done: int = 0  # sampled runs so far
        self.runs_planned: int | None = None  # the budget's plan
        self.workers = 1  # processes that share independent calls (``map_calls``): the subject's and clones
        self._clones: list[runner.Runner] = []

    def map_calls(
        self, calls: list[tuple], seconds: list[float], stop: Callable[[Any], bool], idle: float | None = None
    ) -> list:
        """``[task(subject, *args) for task, args in calls]`` in order, each within its
        ``seconds`` (and with ``idle``, its progress guard: ``call``), shared among ``workers`` processes of the subject (the subject's own and
        clones loaded the same way, started on first use, closed by ``close``). The calls must
        be independent (each draws from its own stream); the results are cut after the first
        for which ``stop`` is true, so they are the same as one process calling them in order
        and stopping there. One process: exactly that."""
        if self.workers <= 1 or len(calls) <= 1:
            out = []
            for (task, args), limit in zip(calls, seconds):
                out.append(self.call(task, *args, seconds=limit, idle=idle))
                if stop(out[-1]):
                    break
            return out
        return self._map_in_parallel(calls, seconds, stop, idle)

    def _map_in_parallel(self, calls, seconds, stop, idle) -> list:
        import threading

        handles = [self.subject, *self._started_clones()]
        results: dict[int, tuple[bool, object]] = {}
        lock, next_call, cut = threading.Lock(), [0], [len(calls)]

        def work(handle) -> None:
            while True:
                with lock:
                    i = next_call[0]
                    if i >= cut[0]:
                        return
                    next_call[0] += 1
                task, args = calls[i]
                try:
                    value = call_within(handle, task, args, seconds[i], self.deadline, self.now, idle)
                    done = (True, value)
                except BaseException as exc:  # noqa: BLE001 - re-raised in order below
                    done = (False, exc)
                with lock:
                    results[i] = done
                    if not done[0] or stop(done[1]):
                        cut[0] = min(cut[0], i + 1)

        threads = [threading.Thread(target=work, args=(h,), daemon=True) for h in handles]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out = []
        for i in range(cut[0]):
            ok, value = results[i]
            if not ok:
                assert isinstance(value, BaseException), "a failed call's value is what it raised"
                raise value
            out.append(value)
        return out

    def _started_clones(self) -> list[runner.Runner]:
        """``workers - 1`` more processes of the subject, loaded as its own was."""
        while len(self._clones) < self.workers - 1:
            clone = self.subject.clone()
            self._clones.append(clone)
            clone.start()
        return self._clones

    def close(self) -> None:
        """End the clones ``map_calls`` started (the subject's own process is its owner's)."""
        clones, self._clones = self._clones, []
        for clone in clones:
            clone.close()

    def plan(self, runs: int, words: str = "") -> None:
        """Record the runs the budget plans from here on (the run count a time limit is
        reported against) and announce them with ``words`` (the forecast) to the listeners."""
        self.runs_planned = self.runs_done + runs
        if words:
            announce(words)

    def stopped_words(self) -> str:
        """What a time limit stopped, in those words: after how many of the planned runs."""
        if self.runs_planned:
            return f"stopped by the time limit after {self.runs_done:,} of {self.runs_planned:,} runs"
        return "stopped by the time limit before the planned runs"

    def call(self, task, *args, seconds: float, idle: float | None = None):
        """The task in the subject's process, killed past ``seconds`` (or the deadline), or with
        ``idle`` once no subject call has returned for that long (GuardStopped: ``call_within``)."""
        return call_within(self.subject, task, args, seconds, self.deadline, self.now, idle)

    def now(self) -> float:
        """The battery's clock (``time.monotonic``; a battery that served some calls from
        elsewhere adds the time they took there)."""
        return time.monotonic()

    def breach(self, message: str, case=None) -> None:
        """A contract finding on ``case`` (a case with a ``name``, a name, or None)."""
        self.result.findings.append(Finding("contract", "contract", message, getattr(case, "name", case)))


def call_within(
    subject: runner.Runner,
    task,
    args: tuple,
    seconds: float,
    deadline: float | None,
    now: Callable[[], float],
    idle: float | None = None,
):
    """``task(subject, *args)`` in the subject's process, killed past ``seconds`` or the battery's
    ``deadline`` (on the clock ``now``), or with ``idle`` once no subject call has returned for
    ``idle`` s (``runner.Runner.call``): OutOfTime once the deadline has passed, GuardStopped
    (its words start "stopped by a guard") when the idle guard stopped a hang, ContractBreach when
    the subject's process failed otherwise. Every battery's calls go through here."""
    limit = seconds
    if deadline is not None:
        limit = min(limit, deadline - now())
        if limit <= 0:
            raise OutOfTime()
    try:
        return subject.call(task, *args, limit=limit, idle=idle)
    except runner.SubjectFailed as exc:
        if deadline is not None and now() >= deadline:
            raise OutOfTime() from None
        if isinstance(exc, runner.Stalled):
            raise GuardStopped(f"{GUARD_PREFIX}{exc}") from None
        raise ContractBreach(str(exc)) from None


def run_in_subject(subject, battery_for: Callable, run: Callable) -> BatteryResult:
    """Start the subject's process (unless ``subject`` is a started Runner), ``run`` the battery
    ``battery_for(runner)`` makes, and turn a deadline, a death or a breach that ended it into the
    result; the subject's output and the seconds taken are recorded."""
    t0 = time.perf_counter()
    own = not isinstance(subject, runner.Runner)
    handle = runner.Runner.for_callable(subject) if own else subject
    battery_run = battery_for(handle)
    try:
        if own:
            handle.start()
        run(battery_run)
    except OutOfTime:
        battery_run.result.timed_out = True
        battery_run.result.ran.append(battery_run.stopped_words())
        battery_run.result.shortfalls.append(battery_run.stopped_words())
    except (runner.SubjectFailed, ContractBreach) as exc:  # it died loading, or mid-stage
        battery_run.breach(str(exc), None)
        battery_run.result.ran.append("contract: breached; the remaining detectors skipped")
    finally:
        battery_run.close()
        battery_run.result.output = handle.output_excerpt()
        if own:
            handle.close()
    battery_run.result.seconds = time.perf_counter() - t0
    return battery_run.result


@contextmanager
def subject_process(subject):
    """``subject`` as a started ``runner.Runner``: itself when it is one (left running), else a
    process of its own for the callable, closed on leaving (also when starting it failed)."""
    if isinstance(subject, runner.Runner):
        yield subject
        return
    handle = runner.Runner.for_callable(subject)
    try:
        handle.start()
        yield handle
    finally:
        handle.close()
