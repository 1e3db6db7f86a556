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
  the sampler's random decisions (specverify.laws.exact); a finding when TV > ``EXACT_TV_TOL``.
- ``chi-square``: sampled runs against the exact target at doubling sample sizes; the false-fail
  budget is split Bonferroni over every case and every look.
- ``tokens-per-round``: the mean round length against the exact rule's; a shortfall is an
  efficiency finding.
- ``binned-chi-square``: the engine-scale cases (``engine_scale_cases``: V 4096 to 152,064, k up
  to 8, and the user's ``--vocab`` / ``--k`` / ``--max-tokens``), sampled and judged on every
  window position by a binned chi-square (specverify.laws.scale); a finding there is shrunk over
  vocabularies and k (``shrink_engine_scale``).

Verdict (``BatteryResult.exact``): False on a distribution finding or a contract breach; None
(inconclusive) when no finding was made but a case could not be judged to the budget's plan (out
of time, or a sampler that does not draw from its rng); True otherwise. References are computed
from the parent's own copies of the tables, never from anything the subject touched. On a
distribution finding, ``counterexample`` gives the smallest model that shows it.
Rule: Leviathan, Kalman, Matias (arXiv 2211.17192); bug classes: specverify.mutants.

This module is the parent's side (``RoundBattery``, its prefetched variant, ``run_battery``,
``run_statistics``); the budgets, cases and reference laws are ``round_cases``, what runs in the
subject's process ``round_tasks``, the counterexample search ``round_counterexample``; what
every battery shares is ``specverify.battery``: results (``core``), the subject-side guards
(``guards``), calls under deadlines (``subject_calls``).
Over 500 lines because ``RoundBattery``'s detectors share one run's state (the findings, the
contract's rng threaded through the cases, the cases too slow to judge) and read as one class.
Random streams: ``round_cases.ROUND_STREAMS``.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace

import numpy as np

from ...battery import runner
from ...battery.core import EXACT_TV_TOL, POWER_FALSE_PASS_RATE, BatteryResult, Finding, stopping_kinds
from ...battery.guards import ContractBreach
from ...battery.subject_calls import Battery, OutOfTime, Speed, run_in_subject
from ...laws import exact, scalar_tests, scale, stats
from ..corners import round_corner_cases
from . import cases as round_cases
from .cases import (
    SCALE_STREAMS,
    WIDE_VOCAB,
    Budget,
    Case,
    battery,
    coverage,
    engine_scale_cases,
    expected_round_length,
    generated_cases,
    looks,
    optimum_tokens_per_round,
    round_length_cases,
    round_stream,
    run_blocks,
    sweep_cases,
    target_distribution,
    too_slow,
    tree_optimum_tokens_per_round,
)
from .counterexample import describe_case, find_counterexample, shrink_engine_scale
from .tasks import contract_task, enumerate_task, enumeration_key, round_length_run, sample_guard_s, sample_task

NAME = "round"
PARAMETERS = ("p_fn", "q_fn", "prefix", "k", "rng")
ALIASES = {
    "p_fn": ("p", "target_fn", "p_model"),
    "q_fn": ("q", "draft_fn", "q_model"),
    "prefix": ("context", "ctx", "tokens", "prompt"),
    "k": ("gamma", "num_draft_tokens"),
    "rng": ("generator", "random_state", "gen"),
}
REPLAYED_CALLS = 10


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
    stop_on_first: bool = False,
    prefetched: dict | None = None,
    aim=None,
    workers: int = 1,
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
        **overrides,
    )


def counterexample(subject, budget, seed: int, result: BatteryResult, aim=None) -> dict | None:
    """The smallest model that shows a distribution finding (None without one). A finding on the
    engine-scale cases alone (the binned chi-square) is shrunk over vocabularies and k
    (``round_counterexample.shrink_engine_scale``); otherwise the small candidates first
    (``round_counterexample.find_counterexample``), and when none of them shows it (a bug that
    needs a larger vocabulary or k) the drawn case it was found on, described the same way, else
    the engine-scale shrink."""
    flagged = result.flagged(("distribution",))
    if not flagged:
        return None
    names = {f.case for f in flagged}
    big = [c for c in engine_scale_cases(budget, seed, aim) if c.name in names]
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


def units(load, budget, stop_on_first: bool = False) -> list[tuple]:
    """The battery's case enumerations as ``(specverify.interfaces.round.units.enumeration_unit, args)`` pairs."""
    from .units import enumeration_calls, enumeration_unit

    b = get_budget(budget)
    return [(enumeration_unit, (load, b, lengths, i)) for lengths, i in enumeration_calls(b, stop_on_first)]


# --------------------------------------------------------------------------- the battery run


def _among(case: Case, cases) -> bool:
    return any(case is c for c in cases)


def round_reach(cases: list[dict]) -> dict:
    """The box the round cases run reached, per dimension (what "exact" covers): the longest
    context (prefix and window), the largest k and window, the largest vocabulary judged by its
    exact law and by the binned chi-square."""

    def largest(key, judged=None):
        return max((c[key] for c in cases if judged is None or c["judged"] == judged), default=0)

    reach = {
        "context": max((c["prefix"] + c["tokens"] for c in cases), default=0),
        "k": largest("k"),
        "window": largest("tokens"),
        "exact V": largest("vocab", "enumeration"),
        "sampled V": largest("vocab", "chi-square"),
        "binned V": largest("vocab", "binned chi-square"),
    }
    return {name: value for name, value in reach.items() if value}


def reach(budget) -> dict:
    """The box a budget's round cases reach, per dimension (``round_reach`` of its fixed, swept,
    engine-vocabulary and engine-scale cases; the drawn cases stay inside it): what a run of a
    subject the enumerator follows reports."""
    b = get_budget(budget)
    entries = [
        {"prefix": len(c.prefix), "tokens": c.m, "k": c.k, "vocab": c.model.vocab_size, "judged": "enumeration"}
        for c in battery(b) + sweep_cases(b, 0) + round_corner_cases(b)
    ]
    if b.engine_vocab:
        entries.append({"prefix": 0, "tokens": 1, "k": 1, "vocab": b.engine_vocab, "judged": "enumeration"})
    entries += [
        {"prefix": 0, "tokens": min(k + 1, 9), "k": k, "vocab": v, "judged": "binned chi-square"}
        for v, k, _ in b.scale_cases
    ]
    return round_reach(entries)


def forecast_words(budget: Budget, runs: int, windows: list[int], speed: Speed) -> str:
    """The forecast a progress line shows before the runs start: the subject's pace in the
    contract's rounds, the runs the budget needs and about how long they take at that pace."""
    pace = speed.rounds_per_second()
    if pace is None or not runs:
        return f"the {budget.name} budget needs {runs:,} runs"
    per_round = speed.tokens_per_round()
    mean_window = sum(windows) / len(windows) if windows else 1.0
    rounds = runs * max(1.0, mean_window / per_round)
    return (
        f"about {pace:,.0f} rounds/s: the {budget.name} budget needs {runs:,} runs "
        f"(about {rounds:,.0f} rounds), about {rounds / pace:,.0f} s"
    )


def _table(dist: dict, limit: int = 16) -> dict:
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:limit]
    return {" ".join(map(str, key)): round(float(v), 12) for key, v in top}


class RoundBattery(Battery):
    """One run of every detector on one subject (the parent's side; ``battery.Battery``'s
    ``call``, ``now`` and ``breach``)."""

    def __init__(self, subject: runner.Runner, budget: Budget, seed: int, deadline: float | None, aim=None):
        super().__init__(subject, budget, seed, deadline)
        self.aim = aim  # interfaces.Aim: aimed engine-scale cases (engine_scale_cases)
        self.too_slow: list[str] = []  # wide cases whose calls overran their limit (shortfalls)
        self.swept: set[str] = set()  # the names of the swept cases (round_cases.sweep_cases, corners)
        self.speed = Speed()  # the contract's rounds: the forecast's speed (never the verdict's)
        self.lengths_ahead: dict = {}  # round-length laws enumerated ahead (enumerate_ahead)

    # -- contract ------------------------------------------------------------------------------
    def contract_rounds(self, case, rng) -> tuple[dict, object]:
        """``contract_task``'s rounds for ``case``: its first call alone, under one call's limit
        (a call that hangs where the in-process alarm cannot reach it, in C or swallowing the
        alarm, is killed after one call's limit, not the whole contract's), then the rest."""
        b = self.budget
        first, rng = self.call(contract_task, case, b, rng, 1, seconds=2 * b.call_limit_s)
        if first["breach"] or b.contract_calls <= 1:
            return first, rng
        rest, rng = self.call(
            contract_task, case, b, rng, b.contract_calls - 1, seconds=b.contract_calls * b.call_limit_s
        )
        rounds = first["rounds"] + rest["rounds"]
        return {"breach": rest["breach"], "rounds": rounds, "seconds": first["seconds"] + rest["seconds"]}, rng

    def contract(self, cases) -> bool:
        """True when the interface held (False: a breach, recorded). Each case's first rounds
        are replayed from the same rng state: a different replay means the subject does not
        draw (only) from its rng."""
        b, rng = self.budget, np.random.default_rng(self.seed)
        unreproducible = []
        for case in cases:
            start = copy.deepcopy(rng)
            try:
                out, rng = self.contract_rounds(case, rng)
                self.speed.add(out["rounds"], out["seconds"])
                if not out["breach"]:
                    n = min(len(out["rounds"]), REPLAYED_CALLS)
                    replay, _ = self.call(contract_task, case, b, start, n, seconds=(n + 1) * b.call_limit_s)
                    out["breach"] = replay["breach"]
                    if replay["rounds"] != out["rounds"][:n]:
                        unreproducible.append(case.name)
            except ContractBreach as exc:
                out = {"breach": str(exc)}
            if out["breach"] and too_slow(out["breach"]) and case.model.vocab_size >= WIDE_VOCAB:
                self.too_slow.append(case.name)  # a sampler slow at a wide vocabulary: not judged there
                self.result.shortfalls.append(f"contract: {case.name}: {out['breach']}; not judged at this vocabulary")
                continue
            if out["breach"]:
                self.breach(out["breach"], case)
                return False
        if unreproducible:
            self.result.findings.append(
                Finding(
                    "rng",
                    "contract",
                    "does not draw from rng: not reproducible (the same seed replayed different rounds); "
                    "enumeration skipped, distribution judged by statistics",
                    unreproducible[0],
                    {"cases": unreproducible},
                )
            )
        self.result.ran.append(
            f"contract: up to {b.contract_calls} rounds on each of {len(cases)} "
            f"cases, {REPLAYED_CALLS} replayed, fresh copies of the tables, "
            f"{b.call_limit_s:g} s per call"
        )
        return True

    # -- exact ---------------------------------------------------------------------------------
    def exact(self, cases, stop_on_first: bool) -> list[Case]:
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
                status, value = self.call(enumerate_task, *self.enumeration_args(case), seconds=self.enumeration_s())
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
            want = target_distribution(case)
            tv = exact.total_variation(value, want)
            r.exact_tv_max = tv if r.exact_tv_max is None else max(r.exact_tv_max, tv)
            r.ran.append(f"exact: {case.name}: TV {tv:.3g}")
            if tv > EXACT_TV_TOL:
                r.findings.append(
                    Finding(
                        "exact-tv",
                        "distribution",
                        f"exact output distribution differs from the target's: TV {tv:.4g}",
                        case.name,
                        {"exact_tv": tv, "got": _table(value), "expected": _table(want)},
                    )
                )
        return fallback

    def enumeration_args(self, case: Case, lengths: bool = False) -> tuple:
        """``enumerate_task``'s arguments for ``case``: a swept case's paths capped at
        ``sweep_max_paths``; ``lengths``: its round-length law rather than its window's."""
        b = self.budget
        paths = replace(b, max_paths=b.sweep_max_paths) if case.name in self.swept and not lengths else b
        return (case, paths, True) if lengths else (case, paths)

    def enumeration_s(self) -> float:
        """One enumeration's guard: ``enumeration_guard_s`` plus one call's limit."""
        return self.budget.enumeration_guard_s + self.budget.call_limit_s

    def enumerate_ahead(self, cases, stop_on_first: bool) -> list | None:
        """With several workers, every case's enumeration, and the tokens-per-round cases'
        round-length laws (kept in ``self.lengths_ahead`` for ``tokens_per_round``), shared among
        the subject's processes (``map_calls``), in the cases' order; None (enumerate one by one,
        here) with one worker, with ``stop_on_first`` (the first finding ends enumeration) or
        when enumerations are served from elsewhere. An enumeration draws nothing from the
        battery's streams and reads no state another leaves (a ``SubrunMemo`` only saves time),
        so each outcome is the one the single process gets (a process that dies, or the time
        limit, sends the battery back to one by one, where it meets them in order); the longest, a round-length law
        of up to 2k + 1 draws, go first so that the processes end together."""
        if self.workers <= 1 or stop_on_first or type(self).call is not RoundBattery.call:
            return None
        lengths = round_length_cases()
        calls = [(enumerate_task, self.enumeration_args(c, True)) for c in lengths]
        calls += [(enumerate_task, self.enumeration_args(c)) for c in cases]
        try:
            out = self.map_calls(calls, [self.enumeration_s()] * len(calls), stop=lambda result: False)
        except (ContractBreach, OutOfTime):  # a process died or time ran out: one by one, as one process meets it
            return None
        self.lengths_ahead = {c.name: outcome for c, outcome in zip(lengths, out)}
        return out[len(lengths) :]

    # -- statistics ----------------------------------------------------------------------------
    def statistics(self, cases, fallback, false_fail_rate: float) -> None:
        """Chi-square at doubling sample sizes (``looks``: n_min, 2 n_min, ... n_max), breadth
        first (every live case at n before any at 2n); each look is one check of the Bonferroni
        split. A case leaves at its first failing look; the others run every look (to
        ``n_max`` for a case statistics alone judges, to ``cross_check_n_max`` for an enumerated
        one, whose law the enumeration already gave), so each case's run count is fixed by the
        budget and the seed. The runs case i adds at look j
        come in blocks of ``RUN_BLOCK``, block l drawn from its own stream,
        ``round_stream(seed, "chi-square looks", i, j, l)``: the same whatever other cases are
        live, and whichever process draws them."""
        b, r = self.budget, self.result
        if not cases:  # stat_cases=0 and every case enumerated: the laws are had, nothing to sample
            r.ran.append("chi-square: no case to sample (every case enumerated, stat_cases=0)")
            return
        sizes = looks(b.n_min, b.n_max)
        per_check = stats.split_budget(false_fail_rate, len(cases) * len(sizes))
        live = {i: [] for i in range(len(cases))}
        last_p: dict = {}
        last = {i: self.last_look(c, fallback, sizes) for i, c in enumerate(cases)}
        for look, n in enumerate(sizes):
            wanted = [i for i in live if n <= last[i]]
            requests = [(cases[i], n - len(live[i]), ("chi-square looks", i, look)) for i in wanted]
            fetched = dict(zip(wanted, self.sample_many(requests)))
            for i in list(live):
                case, samples = cases[i], live[i]
                if n > last[i]:
                    self._judged(case, samples, last_p[i], per_check, self.judged_only_here(case, fallback), "passed")
                    del live[i]
                    continue
                got, breach = fetched[i]
                samples += got
                if breach:
                    self.breach(breach, case)
                    del live[i]
                    continue
                want = target_distribution(case)
                test = stats.chi_square_test(samples, want, false_fail_rate=per_check)
                p = last_p[i] = test.p_value if test.p_value is not None else 0.0
                r.chi2_p_value_min = p if r.chi2_p_value_min is None else min(r.chi2_p_value_min, p)
                if not test.passed:
                    tv = stats.tv_distance(stats.empirical_distribution(samples), want)
                    r.samples_to_detect = (
                        len(samples) if r.samples_to_detect is None else min(r.samples_to_detect, len(samples))
                    )
                    r.findings.append(
                        Finding(
                            "chi-square",
                            "distribution",
                            f"sampled distribution differs from the target's: chi-square p-value "
                            f"{p:.3g} < {per_check:.3g} after {len(samples)} runs, empirical TV {tv:.3g} "
                            f"({test.detail})",
                            case.name,
                            {"p_value": p, "samples": len(samples), "empirical_tv": tv},
                        )
                    )
                    del live[i]
        for i in live:
            self._judged(cases[i], live[i], last_p[i], per_check, self.judged_only_here(cases[i], fallback), "passed")

    def last_look(self, case: Case, fallback, sizes: list[int]) -> int:
        """The run count a case's chi-square ends at: ``n_max`` for a case statistics alone
        judges, ``sweep_runs`` for a swept one (one of many points of a sweep: its power stated,
        not required), ``cross_check_n_max`` for an enumerated one (its law already known)."""
        b = self.budget
        if not _among(case, fallback):
            want = b.cross_check_n_max
        elif case.name in self.swept:
            want = b.sweep_runs
        else:
            return sizes[-1]
        return max([n for n in sizes if n <= want], default=sizes[0])

    def judged_only_here(self, case: Case, fallback) -> bool:
        """Whether statistics alone judge ``case`` to the budget's ``detect_tv`` (a swept case
        the enumerator cannot follow states its power, not the budget's)."""
        return _among(case, fallback) and case.name not in self.swept

    def planned_runs(self, stat: list, fallback: list, big: list) -> int:
        """The runs the budget plans for the chi-square's cases (every look, to ``last_look``)
        and the engine-scale cases: what a run without findings samples (tokens per round,
        sampled only where the enumerator cannot follow, comes on top)."""
        sizes = looks(self.budget.n_min, self.budget.n_max)
        return sum(self.last_look(c, fallback, sizes) for c in stat) + len(big) * self.budget.scale_runs

    def sample_blocks(self, case: Case, n: int, where: tuple, budget: Budget | None = None, run=None):
        """n runs of ``case`` in blocks of ``RUN_BLOCK``, block l from
        ``round_stream(seed, *where, l)``; (runs, breach or None). The blocks are independent
        units: the runs are the same however they are shared out."""
        calls, limits = self.block_calls(case, n, where, budget or self.budget, run)
        out: list = []
        for got, breach, _ in self.map_calls(calls, limits, stop=lambda result: result[1] is not None):
            out += got
            self.runs_done += len(got)
            if breach:
                return out, breach
        return out, None

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

    def _judged(self, case, samples, p, per_check, judged_only_here: bool, how: str) -> None:
        """Record a case the chi-square passed: its power, and a shortfall when statistics alone
        judges it and cannot see the budget's ``detect_tv``."""
        tv = min(
            stats.min_discrepancy_chi_square(len(samples), target_distribution(case), per_check, POWER_FALSE_PASS_RATE),
            1.0,
        )
        self.result.power.append(
            {
                "case": case.name,
                "runs": len(samples),
                "min_detectable_tv": tv,
                "false_fail_rate": per_check,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
            }
        )
        line = (
            f"chi-square: {case.name}: {how} at n={len(samples)} (p-value {p:.3g}); detects TV "
            f">= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}"
        )
        self.result.ran.append(line)
        if judged_only_here and tv > self.budget.detect_tv:
            self.result.shortfalls.append(f"{line}, not the budget's {self.budget.detect_tv:g}")

    # -- engine scale --------------------------------------------------------------------------
    def engine_scale(self, cases, false_fail_rate: float) -> None:
        """Each engine-scale case (``engine_scale_cases``): ``scale_runs`` runs of its first m
        tokens (case i's blocks from ``round_stream(seed, "engine scale", 1, i, block)``, the
        engine-scale runs' node of ``SCALE_STREAMS``), then a binned chi-square per position
        against p (``scale.judge_positions``), the false-fail rate split over every position of
        every case. A case whose calls overrun ``scale_call_limit_s`` is not judged there (a
        shortfall); a case whose runs see no binned TV below 0.5 is a shortfall."""
        b, r = self.budget, self.result
        if not cases:
            return
        per_check = stats.split_budget(false_fail_rate, sum(c.m for c in cases))
        wide = replace(b, call_limit_s=max(b.call_limit_s, b.scale_call_limit_s))
        node = SCALE_STREAMS.index("engine-scale runs")
        for i, case in enumerate(cases):
            try:
                runs, breach = self.sample_blocks(case, b.scale_runs, ("engine scale", node, i), wide)
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
            if tv > 0.5:
                r.shortfalls.append(f"engine scale: {case.name}: {n} runs see only a binned TV of {tv:.3g}")

    # -- tokens per round ----------------------------------------------------------------------
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
        for i, case in enumerate(cases):
            want = expected_round_length(case)
            status, value = "not-enumerable", None
            if not skip_exact and case.name in self.lengths_ahead:
                status, value = self.lengths_ahead[case.name]
            elif not skip_exact:
                status, value = self.call(
                    enumerate_task, *self.enumeration_args(case, True), seconds=self.enumeration_s()
                )
            if status == "ok":
                got = sum(length * w for length, w in value.items())
                differs, how = abs(got - want) > 1e-9, "exact"
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
                    self.breach(breach, case)
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
            r.optimum_tokens_per_round[case.name] = optimum_tokens_per_round(case)
            r.tree_optimum_tokens_per_round[case.name] = tree_optimum_tokens_per_round(case)
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

    # -- all -----------------------------------------------------------------------------------
    def run(self, stop_on_first: bool) -> BatteryResult:
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
        drawn = [c for c in drawn if c.name not in self.too_slow]
        swept = [c for c in swept if c.name not in self.too_slow]
        fallback = self.exact(cases, stop_on_first)
        enumerated = [c for c in cases if all(c is not f for f in fallback)]
        stat = fallback + enumerated[: max(0, b.stat_cases - len(fallback))]
        runs = self.planned_runs(stat, fallback, big)
        self.plan(runs, forecast_words(b, runs, [c.m for c in stat + big], self.speed))
        self.statistics(stat, fallback, half)
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
        return r

    def cover_cases(self, fixed, drawn, swept, big, fallback) -> None:
        """One ``coverage_entry`` per case run, in the order run."""
        runs = {row["case"]: row for row in self.result.power}
        for origin, cases in (("fixed", fixed), ("generated", drawn), ("sweep", swept)):
            for case in cases:
                sampled = runs.get(case.name)
                judged = "chi-square" if _among(case, fallback) else "enumeration"
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

    def call(self, task, *args, seconds: float):
        if task is not enumerate_task:
            return super().call(task, *args, seconds=seconds)
        case, budget, *rest = args
        unit = self.prefetched.get(enumeration_key(case, budget, bool(rest and rest[0])))
        if unit is None:  # not prefetched (or not for these limits): run it here
            return super().call(task, *args, seconds=seconds)
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
    stop_on_first: bool = False,
    deadline: float | None = None,
    prefetched: dict | None = None,
    aim=None,
    workers: int = 1,
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
    the result is the same with 1 or N.
    """
    from ...common.validation import check_seed, check_workers, with_overrides

    seed = check_seed(seed)
    workers = check_workers(workers)
    b = get_budget(budget)
    b = with_overrides("round", b, overrides)

    def make(handle):
        if prefetched is None:
            battery_run = RoundBattery(handle, b, seed, deadline, aim)
        else:
            battery_run = _PrefetchedBattery(handle, b, seed, deadline, prefetched, aim)
        battery_run.workers = workers
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
        lambda run: run.statistics(cases, cases, b.false_fail_rate),
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
