"""The loop battery's checks, the parent's side: ``LoopBattery`` runs the checks ``interfaces.loop``
lists (sequence law, joint law, batch isolation, stop / max_tokens, counts, logprobs, seeds, tokens
per pass, the sweeps judged per position, the binned chi-square at engine scale) on one subject,
through the tasks of ``loop_tasks``, against the references of ``loop_cases``
(``loop.sequence_law``, the reference loop's tokens per pass).

Every check runs on whatever cases it is given, the battery's own or a subject's declared ones
alike: a case the enumerator cannot follow gets the same checks by statistics (its law, the
joint law of its identical requests, tokens per pass by a mean test, the contracts on every run).
Sample sizes are the budget's counts; a task its hang guard stops leaves its case not judged (a
shortfall in the guard's words), never judged on fewer runs.

A module of its own, not part of ``interfaces/loop/battery.py``: the interface (``run``) and the
counterexample search (``loop_counterexample``) both drive it, and the interface calls the search,
so the search cannot import the interface without an import circle.

It is over 700 lines because one ``LoopBattery`` holds every loop check, exact and sampled, on
every kind of case (law cases, seeds, sweeps per position, engine scale), and the per-check
false-fail split (``split``) must count every test those checks make; split across modules, the
split, the guards' shortfalls and the result they fill would become shared state.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ...battery.core import EXACT_TV_TOL, POWER_FALSE_PASS_RATE, Battery, BatteryResult, Finding, stopping_kinds
from ...laws import exact, stats
from ...laws.requests import independence_tv, lag_pairs, sequence_law, step_distribution
from .cases import CORE_KINDS, SCALE_KINDS, LoopBudget, LoopCase, seed_stream
from .reference import reference_rates, tokens_per_pass_rates, tokens_per_pass_test
from .sweeps import MAX_LAG
from .tasks import (
    contract_problem,
    guard_words,
    loop_enumerate_task,
    loop_sample_task,
    loop_seed_law_task,
    loop_seed_task,
)

MIN_COLUMN = 20
"""A position of a sampled sweep is judged when at least this many runs reached it."""


def _law(case: LoopCase, i: int) -> dict:
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


def positions_tests(case: LoopCase) -> int:
    """The tests ``LoopBattery.positions`` makes on a sweep case judged per position: per request
    each position, all positions pooled, and each lag 1..``MAX_LAG``; one per group of identical
    requests (``identical_groups``)."""
    lengths = [r.params.max_tokens for r in case.requests[: 1 if case.seeded else None]]
    return sum(m + 1 + min(max(m - 1, 0), MAX_LAG) for m in lengths) + len(identical_groups(case))


def _pair_law(joint: dict, i: int, j: int) -> dict:
    out: dict = {}
    for outcome, w in joint.items():
        key = (outcome[i], outcome[j])
        out[key] = out.get(key, 0.0) + w
    return out


def _product(row_a: np.ndarray, row_b: np.ndarray) -> dict:
    return {(int(a), int(b)): float(row_a[a] * row_b[b]) for a in np.flatnonzero(row_a) for b in np.flatnonzero(row_b)}


class LoopBattery(Battery):
    """One run of every loop check on one subject (the parent's side); ``battery.Battery``'s
    ``call``: killed past its limit, a death a ContractBreach, the deadline OutOfTime.
    ``laws``: each request's (method, law got, law wanted, runs) of the case judged last."""

    def __init__(self, subject, budget: LoopBudget, seed: int, deadline: float | None):
        super().__init__(subject, budget, seed, deadline)
        self.laws: dict = {}

    def restart(self) -> None:
        """A fresh result and laws: the counterexample search judges each candidate alone."""
        self.result, self.laws = BatteryResult(budget=self.budget.name), {}

    @property
    def task_limit(self) -> float:
        """Seconds after which a task is killed: its guard (``guard_s``), then time for the call
        in flight and the replays to end; a task that outlives it hangs (a contract finding)."""
        return self.budget.guard_s + 5 * self.budget.call_limit_s + 5.0

    def find(self, check, kind, message, case, evidence=None):
        self.result.findings.append(Finding(check, kind, message, case.name, evidence or {}))

    def stopped(self, case: LoopCase, words: str) -> None:
        """A task its hang guard stopped: the case is not judged (a shortfall: inconclusive)."""
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
        ``budget.extra_max_paths`` for an edge, generated or sweep case (past it: statistics)."""
        b = self.budget
        paths = b.max_paths if case.kind in CORE_KINDS else min(b.max_paths, b.extra_max_paths)
        return self.call(loop_enumerate_task, case, tuple(ids), paths, b.guard_s, seconds=self.task_limit)

    def sample(self, case: LoopCase, n: int, rng) -> tuple:
        """n runs of the whole case (``loop_sample_task``), contracts checked on each; (outcomes,
        rng after, replayed), or None when a breach or the guard ended them (reported here)."""
        b = self.budget
        ids = tuple(range(len(case.requests)))
        got, breach, replayed, rng, stopped = self.call(
            loop_sample_task, case, ids, n, rng, b.guard_s, b.call_limit_s, seconds=self.task_limit
        )
        if breach:
            self.find("contract", "contract", breach, case)
        self.contracts(case, got)
        if stopped:
            self.stopped(case, guard_words("its runs", len(got), n, "runs", b.guard_s))
            return None
        return got, rng, replayed, bool(breach)

    def law_case(self, case: LoopCase, per_check: float, exact_ok: bool, runs, efficiency: bool = True) -> None:
        """Judge every request of the case: exact law by enumeration (``exact_ok``), else the
        chi-square over whole outputs, its runs drawn from ``runs`` (a ``SeedSequence`` node:
        ``seed_stream(seed, "loop chi-square", i)`` for the battery's case i; a core case,
        ``CORE_KINDS``: ``budget.samples`` runs and its power required, a shortfall below
        ``detect_tv``; an edge or generated case: ``extra_samples`` runs, a sweep ``sweep_runs``,
        its power stated); the joint law of its requests; contracts on every outcome; tokens per pass when
        ``efficiency``. Each request's (method, law got, law wanted, runs) goes to ``self.laws``."""
        r = self.result
        self.laws = {}
        status, value = self.enumerate(case, range(len(case.requests))) if exact_ok else ("no", "rng replay differed")
        if status == "breach":
            self.find("contract", "contract", value, case)
        elif status == "guard":
            self.stopped(case, value)
        elif status == "ok":
            self.exact_laws(case, value, efficiency)
        else:
            r.ran.append(f"sequence-law: {case.name}: not enumerable ({value}); statistics instead")
            self.sampled_laws(case, per_check, runs, efficiency)

    def exact_laws(self, case: LoopCase, law: dict, efficiency: bool) -> None:
        """The enumerated joint law: each request's output law against the DP (``sequence-law``,
        or ``batch-isolation`` when exact alone), the requests' joint law against the product of
        theirs (``joint-law``), contracts on every outcome, tokens per pass."""
        r = self.result
        self.cover(case, "enumeration", None, None)
        self.contracts(case, law)
        if efficiency:
            self.tokens_per_pass(case, law)
        ids = tuple(range(len(case.requests)))
        for i in ids:
            got: dict = {}
            for outcome, w in law.items():
                got[outcome[i][0]] = got.get(outcome[i][0], 0.0) + w
            want = _law(case, i)
            tv = exact.total_variation(got, want)
            self.laws[i] = ("exact", got, want, None)
            r.exact_tv_max = tv if r.exact_tv_max is None else max(r.exact_tv_max, tv)
            r.ran.append(f"sequence-law: {case.name}: request {i}: exact TV {tv:.3g}")
            if tv <= EXACT_TV_TOL:
                continue
            check = "batch-isolation" if len(ids) > 1 and self.exact_alone(case, i, want) else "sequence-law"
            self.find(
                check,
                "distribution",
                f"request {i}: exact law of the output differs from target-only sampling's: TV {tv:.4g}"
                + (" (exact alone, biased in its batch)" if check == "batch-isolation" else ""),
                case,
                {"request": i, "exact_tv": tv, "got": _top(got), "expected": _top(want)},
            )
        if len(ids) > 1:
            self.exact_joint(case, law)

    def exact_alone(self, case: LoopCase, i: int, want: dict) -> bool:
        status, alone = self.enumerate(case, (i,))
        if status != "ok":
            return False
        got: dict = {}
        for outcome, w in alone.items():
            got[outcome[0][0]] = got.get(outcome[0][0], 0.0) + w
        return exact.total_variation(got, want) <= EXACT_TV_TOL

    def exact_joint(self, case: LoopCase, law: dict) -> None:
        """``joint-law`` (distribution): the batch's enumerated joint law of outputs against the
        product of its requests' laws (``independence_tv``); TV > ``EXACT_TV_TOL`` is a finding
        naming the most dependent pair of requests. Exact: no false fail, any dependence seen."""
        r = self.result
        joint: dict = {}
        for outcome, w in law.items():
            key = tuple(row[0] for row in outcome)
            joint[key] = joint.get(key, 0.0) + w
        tv = independence_tv(joint)
        r.exact_tv_max = tv if r.exact_tv_max is None else max(r.exact_tv_max, tv)
        r.ran.append(f"joint-law: {case.name}: exact TV {tv:.3g} from the product of the requests' laws")
        if tv <= EXACT_TV_TOL:
            return
        n = len(case.requests)
        worst, i, j = max((independence_tv(_pair_law(joint, i, j)), i, j) for i in range(n) for j in range(i + 1, n))
        same = " (identical requests)" if case.requests[i] == case.requests[j] else ""
        self.find(
            "joint-law",
            "distribution",
            f"requests {i} and {j}{same} are not independent in one batch: exact TV {worst:.4g} between "
            f"their joint law and the product of their laws (the whole batch's: {tv:.4g})",
            case,
            {"request": i, "pair": [i, j], "exact_tv": worst},
        )

    def sampled_laws(self, case: LoopCase, per_check: float, runs, efficiency: bool) -> None:
        """The statistical branch of ``law_case``: each request's chi-square over whole outputs,
        each group of identical requests' joint law, tokens per pass by a mean test."""
        b, r = self.budget, self.result
        ids = tuple(range(len(case.requests)))
        core = case.kind in CORE_KINDS
        n = b.samples if core else b.sweep_runs if case.kind == "sweep" else b.extra_samples
        if not n:  # a campaign (tv=X): enough runs for every request's chi-square to see it
            n = max(
                stats.min_num_samples_chi_square(b.detect_tv, _law(case, i), per_check, POWER_FALSE_PASS_RATE)
                for i in ids
            )
        sampled = self.sample(case, n, np.random.default_rng(runs))
        if sampled is None:
            return
        got, _, _, breach = sampled
        for i in ids:
            samples = [o[i][0] for o in got]
            if not samples:
                continue
            want = _law(case, i)
            self.laws[i] = ("statistical", stats.empirical_distribution(samples), want, len(samples))
            test = stats.chi_square_test(samples, want, false_fail_rate=per_check)
            p = test.p_value if test.p_value is not None else 0.0
            r.chi2_p_value_min = p if r.chi2_p_value_min is None else min(r.chi2_p_value_min, p)
            tv = min(stats.min_discrepancy_chi_square(len(samples), want, per_check, POWER_FALSE_PASS_RATE), 1.0)
            r.power.append(
                {
                    "case": case.name,
                    "request": i,
                    "runs": len(samples),
                    "min_detectable_tv": tv,
                    "false_fail_rate": per_check,
                    "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                    **({} if core else {"kind": case.kind}),
                }
            )
            line = (
                f"loop-chi-square: {case.name}: request {i}: p-value {p:.3g} after {len(samples)} runs; "
                f"detects TV >= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}"
            )
            r.ran.append(line)
            if test.passed and tv > b.detect_tv and core:  # an edge, generated or sweep case: power stated
                r.shortfalls.append(f"{line}, not the budget's {b.detect_tv:g}")
            if not test.passed:
                r.samples_to_detect = len(samples)
                self.find(
                    "loop-chi-square",
                    "distribution",
                    f"request {i}: sampled outputs differ from target-only sampling's: p-value {p:.3g} "
                    f"< {per_check:.3g} after {len(samples)} runs",
                    case,
                    {"request": i, "p_value": p},
                )
        self.sampled_joint(case, got, per_check)
        if efficiency and not breach:
            self.tokens_per_pass_sampled(case, got, per_check)
        seen = [row["min_detectable_tv"] for row in r.power if row["case"] == case.name and "request" in row]
        self.cover(case, "chi-square", len(got), max(seen) if seen else None)

    def sampled_joint(self, case: LoopCase, got: list, per_check: float) -> None:
        """``joint-law`` by statistics: for each group of identical unseeded requests
        (``identical_groups``), the first two's outputs over the runs against the product of
        their laws, a chi-square at ``per_check`` (its power, the TV it sees with probability
        0.95, in ``result.power`` with ``"check": "joint-law"``). A loop that serves both one
        output puts all its mass on equal pairs: TV 1 - sum of the law's squares from it."""
        r = self.result
        for group in identical_groups(case):
            a, b = group[:2]
            law = _law(case, a)
            want = {(x, y): pa * pb for x, pa in law.items() for y, pb in law.items()}
            samples = [(o[a][0], o[b][0]) for o in got]
            test = stats.chi_square_test(samples, want, false_fail_rate=per_check)
            p = test.p_value if test.p_value is not None else 0.0
            tv = min(stats.min_discrepancy_chi_square(len(samples), want, per_check, POWER_FALSE_PASS_RATE), 1.0)
            r.power.append(
                {
                    "case": case.name,
                    "request": a,
                    "check": "joint-law",
                    "pair": [a, b],
                    "runs": len(samples),
                    "min_detectable_tv": tv,
                    "false_fail_rate": per_check,
                    "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                }
            )
            r.ran.append(
                f"joint-law: {case.name}: identical requests {a} and {b}: p-value {p:.3g} after {len(samples)} "
                f"runs; detects TV >= {tv:.3g} from independence with probability {1 - POWER_FALSE_PASS_RATE:g}"
            )
            if not test.passed:
                self.find(
                    "joint-law",
                    "distribution",
                    f"identical requests {a} and {b} are not independent in one batch: p-value {p:.3g} < "
                    f"{per_check:.3g} after {len(samples)} runs ({sum(x == y for x, y in samples)} equal outputs)",
                    case,
                    {"request": a, "pair": [a, b], "p_value": p},
                )

    def tokens_per_pass(self, case: LoopCase, law: dict) -> None:
        """Per request, exact mean tokens per target pass (tokens / (tokens - accepted): every round
        but one cut by a stop inside its accepted block ends with one token not drafted) against the
        reference loop's; only a shortfall is a finding (efficiency). Skipped without counts."""
        if any(row[3] is None for outcome in law for row in outcome):
            self.result.ran.append(f"tokens-per-pass: {case.name}: no counts returned; skipped")
            return
        want = reference_rates(case)
        for i, (got, ref) in enumerate(zip(tokens_per_pass_rates(law, len(case.requests)), want)):
            self.result.ran.append(f"tokens-per-pass: {case.name}: request {i}: {got:.4f} vs {ref:.4f}")
            self.result.mean_tokens_per_round[f"{case.name}: request {i}"] = (got, ref)  # so efficient is decided
            if got < ref - 1e-9:
                self.find(
                    "tokens-per-pass",
                    "efficiency",
                    f"request {i}: {got:.4f} tokens per target pass, the reference loop gives {ref:.4f}",
                    case,
                    {"request": i, "measured": got, "expected": ref},
                )

    def tokens_per_pass_sampled(self, case: LoopCase, got: list, rate: float) -> None:
        """Per request, tokens per target pass over the runs against the reference loop's exact
        rate on the case (``tokens_per_pass_test``: a one-sided mean test at ``rate``, the
        per-check rate of the law tests, so the efficiency verdict has its own false-fail rate of
        at most the budget's; the shortfall it sees with probability 0.95 stated in ``ran``); only
        a shortfall is a finding (efficiency). Skipped without counts, or where the reference
        drafts every token."""
        r = self.result
        if not got or any(row[3] is None for outcome in got for row in outcome):
            r.ran.append(f"tokens-per-pass: {case.name}: no counts returned; skipped")
            return
        for i, ref in enumerate(reference_rates(case)):
            tokens = [len(o[i][0]) for o in got]
            passes = [t - min(max(o[i][3], 0), t) for t, o in zip(tokens, got)]
            if not math.isfinite(ref) or sum(passes) == 0:
                continue
            test = tokens_per_pass_test(tokens, passes, ref, rate, POWER_FALSE_PASS_RATE)
            got_rate, n = test["measured"], test["runs"]
            r.mean_tokens_per_round[f"{case.name}: request {i}"] = (got_rate, ref)  # so efficient is decided
            r.ran.append(
                f"tokens-per-pass: {case.name}: request {i}: {got_rate:.4f} vs {ref:.4f} over {n} runs (one-sided "
                f"p-value {test['p_value']:.3g}, false-fail rate {rate:.3g}); detects a shortfall >= "
                f"{test['detects']:.3g} tokens per pass with probability {1 - POWER_FALSE_PASS_RATE:g} "
                f"(normal approximation)"
            )
            if not test["passed"]:
                self.find(
                    "tokens-per-pass",
                    "efficiency",
                    f"request {i}: {got_rate:.4f} tokens per target pass over {n} runs, the reference loop "
                    f"gives {ref:.4f} (one-sided p-value {test['p_value']:.3g} < {rate:.3g})",
                    case,
                    {"request": i, "measured": got_rate, "expected": ref, "p_value": test["p_value"], "runs": n},
                )

    def seeded_case(self, case: LoopCase, per_check: float | None = None) -> None:
        """Seeds, by replay and by law. ``seeded-reproducibility`` (contract): request 0 seeded with
        s gives the same tokens alone and beside unseeded requests, and requests 0 and 1 both
        seeded with s in one batch each give what they give alone (``budget.seeds`` seeds).
        ``seed-law`` (distribution): request 0 alone, seeded with 0..n-1 (n =
        ``budget.seed_law_runs``), must follow its exact law (``loop.sequence_law``): the
        battery's chi-square at ``per_check`` (default: the budget's whole false-fail rate), its
        power (the TV it detects with probability 0.95) in ``result.power`` with ``"check":
        "seed-law"``; a loop that re-seeds every round, or ignores the target when seeded, replays
        perfectly and fails here. Its power is stated, never a shortfall: the request's law is
        also judged, unseeded, by enumeration."""
        b, r = self.budget, self.result
        self.laws = {}
        seeds = list(range(b.seeds))
        mismatches, breach, done = self.call(
            loop_seed_task,
            case,
            seeds,
            seed_stream(self.seed, "seed replay runs"),
            b.call_limit_s,
            True,
            b.guard_s,
            seconds=self.task_limit,
        )
        if breach:
            self.find("contract", "contract", breach, case)
        elif done < len(seeds):
            self.stopped(case, guard_words("seeded replays", done, len(seeds), "seeds", b.guard_s))
            return
        r.ran.append(
            f"seeded-reproducibility: {case.name}: {len(mismatches)} mismatches over {done} seeds "
            f"(alone vs batched, same-seed pairs)"
        )
        for kind in ("batched", "same seed"):
            first = next((m for m in mismatches if m["kind"] == kind), None)
            if first is None:
                continue
            what = (
                "a seeded request's tokens differ alone and in a batch"
                if kind == "batched"
                else "two requests with the same seed in one batch do not each give what they give alone"
            )
            self.find(
                "seeded-reproducibility",
                "contract",
                f"{what} (seed {first['seed']}, request {first['request']}: {first['alone']} alone, "
                f"{first['batched']} batched)",
                case,
                {"request": first["request"], "mismatches": [m for m in mismatches if m["kind"] == kind][:5]},
            )
        if breach or b.seed_law_runs <= 0:
            return
        samples = self.over_seeds(case)
        if samples:
            self.seed_law(case, samples, b.false_fail_rate if per_check is None else per_check)

    def over_seeds(self, case: LoopCase) -> list | None:
        """Request 0's tokens alone, seeded with 0..``seed_law_runs`` - 1 (``loop_seed_law_task``);
        None when a breach or the guard ended them (reported here)."""
        b = self.budget
        rng = np.random.default_rng(seed_stream(self.seed, "seed-law and same-seed runs"))
        samples, breach, stopped = self.call(
            loop_seed_law_task, case, b.seed_law_runs, rng, b.call_limit_s, b.guard_s, seconds=self.task_limit
        )
        if breach:
            self.find("contract", "contract", breach, case)
        if stopped:
            self.stopped(
                case, guard_words("seeds judged by their law", len(samples), b.seed_law_runs, "seeds", b.guard_s)
            )
            return None
        return samples

    def seed_law(self, case: LoopCase, samples: list, rate: float) -> None:
        r = self.result
        want = _law(case, 0)
        self.laws[0] = ("statistical", stats.empirical_distribution(samples), want, len(samples))
        test = stats.chi_square_test(samples, want, false_fail_rate=rate)
        p = test.p_value if test.p_value is not None else 0.0
        r.chi2_p_value_min = p if r.chi2_p_value_min is None else min(r.chi2_p_value_min, p)
        tv = min(stats.min_discrepancy_chi_square(len(samples), want, rate, POWER_FALSE_PASS_RATE), 1.0)
        r.power.append(
            {
                "case": case.name,
                "request": 0,
                "check": "seed-law",
                "runs": len(samples),
                "seeds": f"0..{len(samples) - 1}",
                "min_detectable_tv": tv,
                "false_fail_rate": rate,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
            }
        )
        self.cover(case, "chi-square", len(samples), tv)
        r.ran.append(
            f"seed-law: {case.name}: request 0 over seeds 0..{len(samples) - 1}: p-value {p:.3g}; "
            f"detects TV >= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}"
        )
        if not test.passed:
            self.find(
                "seed-law",
                "distribution",
                f"request 0: its outputs over seeds 0..{len(samples) - 1} do not follow target-only "
                f"sampling's law: p-value {p:.3g} < {rate:.3g}",
                case,
                {
                    "request": 0,
                    "p_value": p,
                    "seeds": len(samples),
                    "empirical_tv": stats.tv_distance(self.laws[0][1], want),
                },
            )

    def sweep_case(self, case: LoopCase, per_check: float, rng):
        """A sweep judged per position (``loop_cases.sampled_sweeps``): ``sweep_runs`` runs of the
        batch drawing from ``rng`` (a seeded one: request 0 over seeds 0..``seed_law_runs`` - 1),
        contracts on every outcome, then ``positions``; returns the rng after."""
        b = self.budget
        if case.seeded:
            samples = self.over_seeds(case)
            if samples is not None:
                outcomes = [((tokens, None, None, None),) for tokens in samples]
                self.contracts(replace(case, requests=case.requests[:1]), outcomes)
                self.positions(case, outcomes, per_check)
            return rng
        sampled = self.sample(case, b.sweep_runs, rng)
        if sampled is None:
            return rng
        got, rng, _, _ = sampled
        self.positions(case, got, per_check)
        return rng

    def positions(self, case: LoopCase, got: list, per_check: float) -> None:
        """Each request of a context-free case, over the runs: every position's tokens (reached by
        ``MIN_COLUMN`` runs or more), all positions pooled, and each lag 1..``MAX_LAG``
        (``lag_pairs``) against the processed row, or for pairs its product law; each group of
        identical requests (``identical_groups``: the first two, position by position) against
        the product law too. Chi-squares at ``per_check``; the first failure is a finding:
        ``position-law`` (a position's law), ``joint-law`` (dependent positions or requests), or
        ``seed-law`` for a seeded request. Power (the TV one position's test sees with
        probability 0.95) in ``result.power``."""
        r = self.result
        if not got:
            return
        names = ("seed-law", "seed-law") if case.seeded else ("position-law", "joint-law")
        rows = [step_distribution(case.target(q.prompt), q.params, q.prompt, ()) for q in case.requests[: len(got[0])]]
        tests = []
        for i, row in enumerate(rows):
            outs = [o[i][0] for o in got]
            law = {(int(t),): float(row[t]) for t in np.flatnonzero(row)}
            columns = [[(o[j],) for o in outs if len(o) > j] for j in range(case.requests[i].params.max_tokens)]
            tests += [(names[0], i, f"position {j + 1}", c, law) for j, c in enumerate(columns) if len(c) >= MIN_COLUMN]
            tests.append((names[0], i, "all positions pooled", [t for c in columns for t in c], law))
            pairs = _product(row, row)
            for lag in range(1, min(len(columns), MAX_LAG + 1)):
                samples = [p for o in outs for p in lag_pairs(o, lag)]
                tests.append((names[1], i, f"pairs of positions {lag} apart", samples, pairs))
        for a, b in (g[:2] for g in identical_groups(case)):
            both = [t for o in got for t in zip(o[a][0], o[b][0])]
            tests.append(
                (names[1], a, f"beside identical request {b} (position by position)", both, _product(rows[a], rows[b]))
            )
        detect = []
        for check, i, where, samples, law in tests:
            if not samples:
                continue
            test = stats.chi_square_test(samples, law, false_fail_rate=per_check)
            if where == "position 1":
                detect.append(
                    min(stats.min_discrepancy_chi_square(len(samples), law, per_check, POWER_FALSE_PASS_RATE), 1.0)
                )
            if not test.passed:
                p = test.p_value if test.p_value is not None else 0.0
                against = "the product of the processed rows" if len(next(iter(law))) == 2 else "the processed row"
                self.find(
                    check,
                    "distribution",
                    f"request {i}, {where}: {len(samples)} draws differ from target-only sampling's law "
                    f"({against}): p-value {p:.3g} < {per_check:.3g}",
                    case,
                    {"request": i, "where": where, "p_value": p, "samples": len(samples)},
                )
                break
        tv = max(detect) if detect else None
        r.power.append(
            {
                "case": case.name,
                "check": names[0],
                "runs": len(got),
                "min_detectable_tv": tv,
                "false_fail_rate": per_check,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                "kind": case.kind,
                "tests": len(tests),
            }
        )
        r.ran.append(
            f"{names[0]}: {case.name}: {len(tests)} chi-square tests over {len(got)} runs (each position, all "
            f"pooled, lags 1-{MAX_LAG}, identical requests); one position's test detects TV >= "
            f"{tv if tv is None else f'{tv:.3g}'} with probability {1 - POWER_FALSE_PASS_RATE:g}"
        )
        self.cover(case, "chi-square", len(got), tv)

    def scale_case(self, case: LoopCase, per_check: float, rng):
        """An engine-scale or aimed batch (``scale_loop_cases``): ``scale_runs`` runs drawing from
        ``rng``, contracts on every outcome, then each request's tokens at each position (the runs
        that reached it) against its processed row by a binned chi-square (``scale.judge_columns``,
        at least ``MIN_COLUMN`` tokens per position) at ``per_check``; returns the rng after.
        Context-free processing: a position's law is the row."""
        from ...laws.scale import binning_words, judge_columns, min_detectable_tv

        b, r = self.budget, self.result
        before = len(r.findings)
        sampled = self.sample(case, b.scale_runs, rng)
        if sampled is None:
            return rng
        got, rng, _, _ = sampled
        runs, detect = len(got), []
        for i, req in enumerate(case.requests):
            if len(r.findings) > before or not got:  # ids out of range or past max_tokens: nothing to bin
                break
            row = step_distribution(case.target(req.prompt), req.params, req.prompt, ())
            columns = [[o[i][0][j] for o in got if len(o[i][0]) > j] for j in range(req.params.max_tokens)]
            verdict = judge_columns(columns, row, per_check, min_samples=MIN_COLUMN)
            if verdict is None:
                continue
            words = binning_words(len(verdict.want), case.vocab_size, verdict.n)
            tv = min_detectable_tv(row, len(columns[0]) if columns else 0, per_check, POWER_FALSE_PASS_RATE)
            detect.append(tv)
            r.power.append(
                {
                    "case": case.name,
                    "request": i,
                    "runs": runs,
                    "min_detectable_tv": tv,
                    "false_fail_rate": per_check,
                    "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                    "kind": case.kind,
                    "binned": len(verdict.want),
                }
            )
            r.ran.append(
                f"loop binned chi-square: {case.name}: request {i}: {runs} runs, "
                f"{req.params.max_tokens} position(s); detects a binned TV >= {tv:.3g} at the first "
                f"position with probability {1 - POWER_FALSE_PASS_RATE:g} ({words})"
            )
            if not verdict.passed:
                self.find(
                    "loop-binned-chi-square",
                    "distribution",
                    f"request {i}: token {verdict.position + 1} differs from target-only sampling's law: "
                    f"p-value {verdict.p_value:.3g} < {per_check:.3g}, binned TV {verdict.binned_tv:.3g} "
                    f"({words})",
                    case,
                    {
                        "request": i,
                        "position": verdict.position,
                        "p_value": verdict.p_value,
                        "binned_tv": verdict.binned_tv,
                        "samples": verdict.n,
                    },
                )
                break
        self.cover(case, "binned chi-square", runs, max(detect) if detect else None)
        return rng

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

    def split(self, cases) -> float:
        """The per-check false-fail rate: the budget's split (Bonferroni) over every request of
        every case judged by its law (and each group of identical requests there), each seed-law
        check, each position of an engine-scale batch and each test of a sweep judged per
        position (``positions_tests``)."""
        law = [c for c in cases if not c.seeded and not c.positions and c.kind not in SCALE_KINDS]
        count = sum(len(c.requests) + len(identical_groups(c)) for c in law)
        count += sum(1 for c in cases if c.seeded and not c.positions) if self.budget.seed_law_runs > 0 else 0
        count += sum(q.params.max_tokens for c in cases if c.kind in SCALE_KINDS for q in c.requests)
        count += sum(positions_tests(c) for c in cases if c.positions)
        return stats.split_budget(self.budget.false_fail_rate, max(1, count))

    def replays(self, cases) -> bool | None:
        """Whether the loop replays the same outputs from the same rng state (3 runs of the first
        case with requests, then 3 replays): enumeration needs it. None after a breach."""
        first = next((c for c in cases if c.requests and not c.seeded), None)
        if first is None:
            return True
        b = self.budget
        ids = tuple(range(len(first.requests)))
        rng = np.random.default_rng(self.seed)
        got, breach, replayed, _, _ = self.call(
            loop_sample_task, first, ids, 3, rng, b.guard_s, b.call_limit_s, seconds=self.task_limit
        )
        if breach:
            self.find("contract", "contract", breach, first)
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

    def run(self, cases, stop_on_first: bool) -> BatteryResult:
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
            else:
                self.law_case(case, per_check, exact_ok, seed_stream(self.seed, "loop chi-square", i))
        return r


def _top(dist: dict, limit: int = 12) -> dict:
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:limit]
    return {" ".join(map(str, key)) or "(empty)": round(float(v), 12) for key, v in top}


__all__ = ["MIN_COLUMN", "LoopBattery", "identical_groups", "positions_tests"]
