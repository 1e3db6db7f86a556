"""The round interface: the handout's ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``.

One call is one speculative round: 1 to k + 1 token ids, distributed (over the sampler's draws
from ``rng``) exactly as the target p's next tokens. The mutant report, the checker, the
experiments and the benchmarks all judge a round sampler through ``run_battery`` (``run``) and
never re-implement a detector. Detectors, each on the battery's table-driven cases
(``round_cases.Case``), the subject always in its own process (specverify.battery.runner):

- ``contract``: 1 to k + 1 int tokens in range from a list, tuple or array; no exception, no
  exit, no write into the arrays p_fn / q_fn hand out (each call gets fresh copies, compared
  afterwards), every call within ``Budget.call_limit_s``; the same seed replays the same rounds.
- ``exact``: the exact distribution of the first m emitted tokens by enumerating every path of
  the sampler's random decisions (specverify.laws.exact); a finding when TV is above the
  rounding of the subject's working precision (specverify.laws.rounding: 1e-9 at float64).
- ``chi-square``: sampled runs of each case the enumerator cannot follow against the exact target
  at doubling sample sizes, up to the size its promised TV needs; one pooled cross-check of a few
  enumerated cases drawn from the seed (``round.statistics``); the false-fail budget is split
  Bonferroni over every look.
- ``tokens-per-round``: the mean round length against the exact rule's; a shortfall is an
  efficiency finding.
- ``binned-chi-square``: the engine-scale cases (``engine_scale_cases``: V 4096 to 152,064, k up
  to 8, and the user's ``--vocab`` / ``--k`` / ``--max-tokens``), sampled and judged on every
  window position by a binned chi-square (specverify.laws.scale), and the dense
  engine-vocabulary case where the enumerator cannot follow it; standard has no budget
  engine-scale case (thorough's, beside the dense case's exact law: ``binned_cases``); a finding
  there is shrunk over vocabularies and k (``shrink_engine_scale``).

Verdict (``BatteryResult.exact``): False on a distribution finding or a contract breach; None
(inconclusive) when no finding was made but a case could not be judged to the budget's plan (out
of time, or a sampler that does not draw from its rng); True otherwise. References are computed
from the parent's own copies of the tables, never from anything the subject touched. On a
distribution finding, ``counterexample`` gives the smallest model that shows it.
Rule: Leviathan, Kalman, Matias (arXiv 2211.17192); bug classes: specverify.mutants.

This module is the interface (``run``, ``counterexample``, ``units``, the parameters and
aliases detection reads) and ``RoundBattery``, which runs the detectors in order: each detector is
a class of its own part of this package (``round.contract``, ``round.exact``,
``round.statistics``, ``round.engine_scale``, ``round.efficiency``) over the state and the
sampling calls they share (``round.sampling``); the budgets, cases and reference laws are
``round.cases``, what runs in the subject's process ``round.tasks``, the reach and the forecast
``round.reach`` (the enumerations' forecast, said before them, ``round.first_forecast``), the
counterexample search ``round.counterexample``, the corner cases ``round.corners``; what every battery shares (results, the subject-side guards, calls under
deadlines) is ``specverify.battery.core``.
Random streams: ``round_cases.ROUND_STREAMS``.
"""

from __future__ import annotations

import time
from contextlib import ExitStack

from ...battery import runner
from ...battery.core import BatteryResult, stopping_kinds
from ...battery.guards import ContractBreach
from ...battery.subject_calls import OutOfTime, announce, heard, run_in_subject, subject_process
from ...laws import rounding
from . import cases as round_cases
from .cases import (
    ENGINE_VOCAB_ORIGIN,
    Budget,
    Case,
    battery,
    binned_split,
    coverage,
    engine_scale_cases,
    generated_cases,
    round_length_cases,
    sweep_cases,
)
from .contract import REPLAYED_CALLS, ContractDetector
from .corners import round_corner_cases
from .counterexample import describe_case, find_counterexample, shrink_engine_scale
from .efficiency import TokensPerRoundDetector
from .engine_scale import EngineScaleDetector
from .exact import ExactDetector
from .first_forecast import enumeration_calls, first_forecast_words, other_enumerations
from .reach import forecast_words, other_budgets, reach, round_reach
from .sampling import among
from .statistics import ChiSquareDetector, cross_check_cases, planned_runs
from .tasks import enumerate_task, enumeration_key

NAME = "round"
PARAMETERS = ("p_fn", "q_fn", "prefix", "k", "rng")
ALIASES = {
    "p_fn": ("p", "target_fn", "p_model"),
    "q_fn": ("q", "draft_fn", "q_model"),
    "prefix": ("context", "ctx", "tokens", "prompt"),
    "k": ("gamma", "num_draft_tokens"),
    "rng": ("generator", "random_state", "gen"),
}


def get_budget(budget):
    """The round section of a budget (``round_cases.get_budget``: a name, ``tv=X``, a
    ``round_cases.Budget`` as it is, another interface's budget by its name)."""
    return round_cases.get_budget(budget)


def run(
    subject,
    budget,
    seed: int,
    *,
    deadline=None,
    stop_on_first: bool | tuple[str, ...] = False,
    prefetched: dict | None = None,
    aim=None,
    workers: int = 1,
    reference=None,
    **overrides,
) -> BatteryResult:
    return run_battery(
        subject,
        budget,
        seed,
        deadline=deadline,
        stop_on_first=stop_on_first,
        prefetched=prefetched,
        aim=aim,
        workers=workers,
        reference=reference,
        **overrides,
    )


def counterexample(subject, budget, seed: int, result: BatteryResult, aim=None, reference=None) -> dict | None:
    """The smallest model that shows a distribution finding (None without one). A finding on the
    engine-scale cases alone (the binned chi-square; the dense engine-vocabulary case's too, where
    the enumerator could not follow it) is shrunk over vocabularies and k
    (``round_counterexample.shrink_engine_scale``); otherwise the small candidates first
    (``round_counterexample.find_counterexample``), and when none of them shows it (a bug that
    needs a larger vocabulary or k) the drawn case it was found on, described the same way, else
    the engine-scale shrink. With a ``reference`` none is searched (the candidates are judged
    against the target's law, not the reference's): None."""
    flagged = result.flagged(("distribution",))
    if not flagged or reference is not None:
        return None
    names = {f.case for f in flagged}
    binned = {f.case for f in flagged if f.check == "binned-chi-square"}
    dense = [c for c in generated_cases(budget, seed) if c.name.startswith(ENGINE_VOCAB_ORIGIN)]
    # the budget's and the aimed engine-scale cases, and the dense engine-vocabulary case where it
    # was judged binned (the enumerator could not follow it): each shrinks like an engine-scale case
    big = [c for c in engine_scale_cases(budget, seed, aim) if c.name in names] + [c for c in dense if c.name in binned]
    smallest = lambda cases: min(cases, key=lambda c: (c.model.vocab_size, c.k, c.m))  # noqa: E731
    if big and all(f.check == "binned-chi-square" for f in flagged):
        return shrink_engine_scale(subject, budget, seed, smallest(big))
    found = find_counterexample(subject, budget, seed)
    if found is not None:
        return found
    drawn = [c for c in generated_cases(budget, seed) if c.name in names]
    if drawn:
        return describe_case(subject, smallest(drawn), budget)
    return shrink_engine_scale(subject, budget, seed, smallest(big)) if big else None


def units(load, budget, stop_on_first: bool | tuple[str, ...] = False) -> list[tuple]:
    """The battery's case enumerations as ``(specverify.interfaces.round.units.enumeration_unit, args)`` pairs."""
    from .units import enumeration_calls, enumeration_unit

    b = get_budget(budget)
    return [(enumeration_unit, (load, b, lengths, i)) for lengths, i in enumeration_calls(b, stop_on_first)]


class RoundBattery(ContractDetector, ExactDetector, ChiSquareDetector, EngineScaleDetector, TokensPerRoundDetector):
    """One run of every detector on one subject (the parent's side; ``battery.Battery``'s
    ``call``, ``now`` and ``breach``): the contract, exact TV, the chi-square, the engine-scale
    binned chi-square, tokens per round, in that order (``run``)."""

    # -- all -----------------------------------------------------------------------------------
    def run(self, stop_on_first: bool | tuple[str, ...]) -> BatteryResult:
        b, r = self.budget, self.result
        fixed, drawn = battery(b), generated_cases(b, self.seed)
        swept = sweep_cases(b, self.seed) + round_corner_cases(b)
        big = engine_scale_cases(b, self.seed, self.aim)
        cases = fixed + drawn + swept
        self.swept = {c.name for c in swept}
        # the false-fail rate: half for the chi-square on whole windows, a quarter for the
        # engine-scale cases' binned one, a quarter for tokens per round
        half = b.false_fail_rate / 2
        if not self.contract(cases):
            r.ran.append("contract: breached; exact, statistical and tokens-per-round detectors skipped")
            return r
        cases = [c for c in cases if c.name not in self.too_slow]
        if heard():  # before any enumeration: its calls at the contract's pace (round.first_forecast)
            announce(self.first_forecast(cases))
        drawn = [c for c in drawn if c.name not in self.too_slow]
        swept = [c for c in swept if c.name not in self.too_slow]
        fallback = self.exact(cases, stop_on_first)
        enumerated = [c for c in cases if all(c is not f for f in fallback)]
        engine_exact = any(c.name.startswith(ENGINE_VOCAB_ORIGIN) for c in enumerated)
        fallback, big = binned_split(b, fallback, big, engine_exact)
        cross = cross_check_cases(enumerated, b.stat_cases, self.seed)
        runs = self.planned_runs(fallback, cross, big, half)
        self.plan(runs, self.forecast(runs, fallback, cross, big, cases, half))
        self.statistics(fallback, cross, half)
        if (
            big
            and not r.flagged(("distribution",))
            and not (stop_on_first and r.flagged(stopping_kinds(stop_on_first)))
        ):
            # with a distribution finding already the verdict stands without them
            self.engine_scale(big, half / 2)
        elif big:
            r.ran.append("engine scale: skipped (a finding on the cases before)")
        if stop_on_first and r.flagged(stopping_kinds(stop_on_first)):
            # fail-fast: the verdict stands; tokens per round could only add an efficiency finding
            r.ran.append("tokens per round: skipped (fail-fast: a finding that decides the verdict came first)")
        elif not r.flagged(("contract",)):
            self.tokens_per_round(round_length_cases(), half / 2)
        self.cover_cases(fixed, drawn, swept, big, fallback)
        r.reach = round_reach(r.cases)
        if r.rounding:
            r.ran.append(f"rounding: {rounding.summary_words(r.rounding)}")
        return r

    def forecast(self, runs: int, fallback, cross, big, cases, half: float):
        """The forecast printed before sampling starts (``round.reach.forecast_words``): this
        budget's runs, calls and seconds at the contract's measured pace, and the other named
        budgets' for this subject (``other_budgets``; only while a progress line listens)."""
        b = self.budget
        others = {}
        if heard():  # made only for a progress line: the other budgets' cases take seconds to size
            names = {c.name for c in fallback}
            every = bool(fallback) and len(fallback) == len(cases)

            def planner(other, f, c, g):
                swept = {x.name for x in sweep_cases(other, self.seed) + round_corner_cases(other)}
                return planned_runs(other, f, c, g, swept, half)

            others = other_budgets(b, self.seed, names, every, planner)
        return forecast_words(b, runs, [c.m for c in fallback + cross + big], self.speed, others)

    def first_forecast(self, cases):
        """The enumerations' calls and seconds, this budget's and the others' (``round.first_forecast``)."""
        b, seed = self.budget, self.seed

        def case_lists(other):
            swept = sweep_cases(other, seed) + round_corner_cases(other)
            return battery(other) + generated_cases(other, seed) + swept, {c.name for c in swept}

        others = other_enumerations(b, seed, case_lists)
        calls = enumeration_calls(b, cases, self.swept)
        return first_forecast_words(b, calls, self.speed.rounds_per_second(), others)

    def cover_cases(self, fixed, drawn, swept, big, fallback) -> None:
        """One ``coverage_entry`` per case run, in the order run."""
        runs = {row["case"]: row for row in self.result.power}
        for origin, cases in (("fixed", fixed), ("generated", drawn), ("sweep", swept)):
            for case in (c for c in cases if not among(c, big)):
                sampled = runs.get(case.name)
                judged = "chi-square" if among(case, fallback) else "enumeration"
                self.result.cover(
                    name=case.name,
                    origin=origin,
                    vocab=case.model.vocab_size,
                    k=case.k,
                    tokens=case.m,
                    judged=judged,
                    runs=sampled and sampled["runs"],
                    detect_tv=sampled and sampled["min_detectable_tv"],
                    prefix=len(case.prefix),
                    order=case.model.order,
                )
        for case in big:
            sampled = runs.get(case.name)
            if sampled is None:  # stopped before it (a finding, the deadline)
                continue
            self.result.cover(
                name=case.name,
                origin="aimed" if case.name.startswith("aimed") else "generated",
                vocab=case.model.vocab_size,
                k=case.k,
                tokens=case.m,
                judged="binned chi-square",
                runs=sampled["runs"],
                detect_tv=sampled["min_detectable_tv"],
                bins=sampled["binned"],
                prefix=0,
                order=0,
            )


class _PrefetchedBattery(RoundBattery):
    """A battery whose enumerations were computed elsewhere, each in its own subject process
    (specverify.interfaces.round.units: one Ray task per case), and are replayed here in the battery's order.

    ``prefetched`` maps ``enumeration_key`` to ``{"outcome": ("ok", value) | ("failed", why)
    | ("error", traceback), "seconds": s}``. An enumeration is a deterministic function of the
    subject and the case (no rng: every random decision is enumerated), so its result is the
    one the subject's own process would have returned. Every other call (contract, the
    sequential chi-square's looks, sampled tokens per round: everything that draws from the
    seeded streams) runs live, in order, as in ``RoundBattery`` (a look's draws come from its
    own stream, ``round_cases.ROUND_STREAMS``, so a look could be served the same way). The
    clock (``now``) is charged the seconds each served call took where it ran, so the guards and
    the time limit decide as they would have in one process; results the run never asks for
    (cases after ``stop_on_first``'s first finding) are discarded, as the local run never
    computes them.
    """

    def __init__(self, subject, budget: Budget, seed: int, deadline: float | None, prefetched: dict, aim=None):
        super().__init__(subject, budget, seed, deadline, aim)
        self.prefetched, self.charged = prefetched, 0.0

    def now(self) -> float:
        return time.monotonic() + self.charged

    def call(self, task, *args, seconds: float, idle: float | None = None):
        if task is not enumerate_task:
            return super().call(task, *args, seconds=seconds, idle=idle)
        case, budget, *rest = args
        unit = self.prefetched.get(enumeration_key(case, budget, bool(rest and rest[0])))
        if unit is None:  # not prefetched (or not for these limits): run it here
            return super().call(task, *args, seconds=seconds, idle=idle)
        return self._serve(unit, seconds)

    def _serve(self, unit: dict, seconds: float):
        """The prefetched outcome, as ``RoundBattery.call`` would have returned or raised it."""
        limit = seconds
        if self.deadline is not None:
            limit = min(limit, self.deadline - self.now())
            if limit <= 0:
                raise OutOfTime()
        status, value = unit["outcome"]
        if unit["seconds"] > limit + runner.KILL_MARGIN_S:  # killed here at the limit
            status, value = (
                "failed",
                f"a call did not return within {limit + runner.KILL_MARGIN_S:g} s; its process was killed",
            )
            self.charged += limit + runner.KILL_MARGIN_S
        else:
            self.charged += unit["seconds"]
        if status == "ok":
            return value
        if status == "error":
            raise runner.RunnerError(f"enumerate_task failed in the subject's process:\n{value}")
        if self.deadline is not None and self.now() >= self.deadline:
            raise OutOfTime()
        raise ContractBreach(value)


def run_battery(
    subject,
    budget: str | Budget = "standard",
    seed: int = 0,
    *,
    stop_on_first: bool | tuple[str, ...] = False,
    deadline: float | None = None,
    prefetched: dict | None = None,
    aim=None,
    workers: int = 1,
    reference=None,
    **overrides,
) -> BatteryResult:
    """Every detector on every case of the budget. Never raises for a broken subject.

    ``subject``: a callable (handed to its process by fork) or a started ``runner.Runner``.
    ``overrides`` replace fields of the budget (e.g. ``n_max=8000``); ``deadline`` (a
    ``time.monotonic()`` value: a time limit, a guard) ends the run with ``timed_out`` set and
    says after how many of the planned runs (``Battery.stopped_words``); ``stop_on_first`` stops
    enumeration at the first biased case (enough to kill a mutant). ``prefetched``: enumerations
    computed elsewhere (specverify.interfaces.round.units, the Ray executor), replayed by ``_PrefetchedBattery``:
    the same result as without them. ``aim``: an ``interfaces.Aim`` (the user's --vocab, --k,
    --max-tokens): aimed engine-scale cases besides the budget's (``engine_scale_cases``).
    ``workers``: processes of the subject that share the sampled runs' blocks and, without
    ``stop_on_first``, the enumerations (``Battery.map_calls``, ``RoundBattery.enumerate_ahead``);
    the result is the same with 1 or N. ``reference``: the engine's own target-only round (a
    callable or a started ``runner.Runner``): every case's law is its (``round.own_reference``).
    """
    from ...common.validation import check_seed, check_workers, with_overrides

    seed = check_seed(seed)
    workers = check_workers(workers)
    b = get_budget(budget)
    b = with_overrides("round", b, overrides)

    with ExitStack() as stack:
        own = None if reference is None else stack.enter_context(subject_process(reference))

        def make(handle):
            if prefetched is None:
                battery_run = RoundBattery(handle, b, seed, deadline, aim)
            else:
                battery_run = _PrefetchedBattery(handle, b, seed, deadline, prefetched, aim)
            battery_run.workers = workers
            battery_run.reference = own
            return battery_run

        return run_in_subject(subject, make, lambda battery_run: battery_run.run(stop_on_first))


def run_statistics(
    subject, cases: list[Case], seed: int = 0, budget: str | Budget = "standard", **overrides
) -> BatteryResult:
    """The chi-square detector alone on ``cases`` (the budget's whole false-fail rate)."""
    from ...common.validation import with_overrides

    b = get_budget(budget)
    b = with_overrides("round", b, overrides)
    return run_in_subject(
        subject,
        lambda handle: RoundBattery(handle, b, seed, None),
        lambda run: run.statistics(cases, [], b.false_fail_rate),
    )


__all__ = [
    "ALIASES",
    "NAME",
    "PARAMETERS",
    "REPLAYED_CALLS",
    "RoundBattery",
    "counterexample",
    "coverage",
    "get_budget",
    "reach",
    "round_reach",
    "run",
    "run_battery",
    "run_statistics",
    "units",
]
