"""The loop battery's checks, the parent's side: ``LoopBattery`` runs the checks ``interfaces.loop``
lists (sequence law, batch isolation, stop / max_tokens, counts, logprobs, seeds, tokens per pass,
the binned chi-square at engine scale) on one subject, through the tasks of ``loop_tasks``,
against the references of ``loop_cases`` (``loop.sequence_law``, the reference loop's tokens per
pass).

A module of its own, not part of ``interfaces/loop.py``: the interface (``run``) and the
counterexample search (``loop_counterexample``) both drive it, and the interface calls the search,
so the search cannot import the interface without an import circle.
"""

from __future__ import annotations

import numpy as np

from ..battery.core import EXACT_TV_TOL, POWER_FALSE_PASS_RATE, Battery, BatteryResult, Finding, stopping_kinds
from ..laws import exact, stats
from ..laws.requests import sequence_law, step_distribution
from .loop_cases import (
    CORE_KINDS,
    SCALE_KINDS,
    LoopBudget,
    LoopCase,
    reference_rates,
    seed_stream,
    tokens_per_pass_rates,
)
from .loop_tasks import contract_problem, loop_enumerate_task, loop_sample_task, loop_seed_law_task, loop_seed_task


def _law(case: LoopCase, i: int) -> dict:
    return sequence_law(case.target, case.requests[i])


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

    def find(self, check, kind, message, case, evidence=None):
        self.result.findings.append(Finding(check, kind, message, case.name, evidence or {}))

    def contracts(self, case: LoopCase, outcomes) -> None:
        seen = set()
        for outcome in outcomes:
            for i, row in enumerate(outcome):
                problem = contract_problem(case, i, row)
                if problem and problem[0] not in seen:
                    seen.add(problem[0])
                    self.find(problem[0], "contract", problem[1], case, {"request": i})

    def enumerate(self, case: LoopCase, ids):
        """The task ``loop_enumerate_task``: at most ``budget.max_paths`` paths, or
        ``budget.extra_max_paths`` for an edge or generated case (past it: statistics)."""
        b = self.budget
        paths = b.max_paths if case.kind in CORE_KINDS else min(b.max_paths, b.extra_max_paths)
        return self.call(
            loop_enumerate_task,
            case,
            tuple(ids),
            paths,
            b.case_enumeration_s,
            seconds=b.case_enumeration_s + b.call_limit_s,
        )

    def law_case(self, case: LoopCase, per_check: float, exact_ok: bool, runs, efficiency: bool = True) -> None:
        """Judge every request of the case: exact law by enumeration (``exact_ok``), else the
        chi-square over whole outputs, its runs drawn from ``runs`` (a ``SeedSequence`` node:
        ``seed_stream(seed, "loop chi-square", i)`` for the battery's case i; a core case,
        ``CORE_KINDS``: ``budget.samples`` runs and its power required, a shortfall below
        ``detect_tv``; an edge or generated case: ``extra_samples`` runs, its power stated);
        contracts on every outcome; tokens per pass when ``efficiency``. Each request's (method,
        law got, law wanted, runs) goes to ``self.laws``."""
        b, r = self.budget, self.result
        self.laws: dict = {}
        ids = tuple(range(len(case.requests)))
        status, value = self.enumerate(case, ids) if exact_ok else ("not-enumerable", "rng replay differed")
        if status == "breach":
            self.find("contract", "contract", value, case)
            return
        if status == "ok":
            self.cover(case, "enumeration", None, None)
            self.contracts(case, value)
            if efficiency:
                self.tokens_per_pass(case, value)
            for i in ids:
                got: dict = {}
                for outcome, w in value.items():
                    got[outcome[i][0]] = got.get(outcome[i][0], 0.0) + w
                want = _law(case, i)
                tv = exact.total_variation(got, want)
                self.laws[i] = ("exact", got, want, None)
                r.exact_tv_max = tv if r.exact_tv_max is None else max(r.exact_tv_max, tv)
                r.ran.append(f"sequence-law: {case.name}: request {i}: exact TV {tv:.3g}")
                if tv <= EXACT_TV_TOL:
                    continue
                check = "sequence-law"
                if len(ids) > 1:
                    s2, alone = self.enumerate(case, (i,))
                    if s2 == "ok":
                        g2: dict = {}
                        for outcome, w in alone.items():
                            g2[outcome[0][0]] = g2.get(outcome[0][0], 0.0) + w
                        if exact.total_variation(g2, want) <= EXACT_TV_TOL:
                            check = "batch-isolation"
                self.find(
                    check,
                    "distribution",
                    f"request {i}: exact law of the output differs from target-only sampling's: TV {tv:.4g}"
                    + (" (exact alone, biased in its batch)" if check == "batch-isolation" else ""),
                    case,
                    {"request": i, "exact_tv": tv, "got": _top(got), "expected": _top(want)},
                )
            return
        r.ran.append(f"sequence-law: {case.name}: not enumerable ({value}); statistics instead")
        rng = np.random.default_rng(runs)
        core = case.kind in CORE_KINDS
        n = b.samples if core else b.extra_samples
        if not n:  # a campaign (tv=X): enough runs for every request's chi-square to see it
            n = max(
                stats.min_num_samples_chi_square(b.detect_tv, _law(case, i), per_check, POWER_FALSE_PASS_RATE)
                for i in ids
            )
        got, breach, _, _ = self.call(
            loop_sample_task,
            case,
            ids,
            n,
            rng,
            b.statistics_s,
            b.call_limit_s,
            seconds=b.statistics_s + 2 * b.call_limit_s,
        )
        if breach:
            self.find("contract", "contract", breach, case)
        self.contracts(case, got)
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
            if test.passed and tv > b.detect_tv and core:  # an edge or generated case: power stated
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
        seen = [row["min_detectable_tv"] for row in r.power if row["case"] == case.name]
        self.cover(case, "chi-square", len(got), max(seen) if seen else None)

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
        mismatches, breach = self.call(
            loop_seed_task,
            case,
            seeds,
            seed_stream(self.seed, "seed replay runs"),
            b.call_limit_s,
            True,
            seconds=4 * len(seeds) * b.call_limit_s + b.call_limit_s,
        )
        if breach:
            self.find("contract", "contract", breach, case)
        r.ran.append(
            f"seeded-reproducibility: {case.name}: {len(mismatches)} mismatches over {len(seeds)} seeds "
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
        rate = b.false_fail_rate if per_check is None else per_check
        rng = np.random.default_rng(seed_stream(self.seed, "seed-law and same-seed runs"))
        seconds = b.statistics_s
        samples, breach = self.call(
            loop_seed_law_task,
            case,
            b.seed_law_runs,
            rng,
            b.call_limit_s,
            seconds,
            seconds=seconds + 2 * b.call_limit_s,
        )
        if breach:
            self.find("contract", "contract", breach, case)
        if not samples:
            return
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

    def scale_case(self, case: LoopCase, per_check: float, seconds: float, rng):
        """An engine-scale or aimed batch (``scale_loop_cases``): ``scale_runs`` runs (within
        ``scale_s``, an aimed batch ``aim_s`` over the aimed ones), contracts on every outcome,
        then each request's tokens at each position (the runs that reached it) against its
        processed row by a binned chi-square (``scale.judge_columns``, at least 20 tokens per
        position) at ``per_check``, within ``seconds``, drawing from ``rng``; returns the rng after.
        Context-free processing: a position's law is the row."""
        from ..laws.scale import binning_words, judge_columns, min_detectable_tv

        b, r = self.budget, self.result
        ids = tuple(range(len(case.requests)))
        got, breach, _, rng = self.call(
            loop_sample_task,
            case,
            ids,
            b.scale_runs,
            rng,
            seconds,
            b.call_limit_s,
            seconds=seconds + 4 * b.call_limit_s,
        )
        if breach:
            self.find("contract", "contract", breach, case)
        before = len(r.findings)
        self.contracts(case, got)
        runs, detect = len(got), []
        for i, req in enumerate(case.requests):
            if len(r.findings) > before or not got:  # ids out of range or past max_tokens: nothing to bin
                break
            row = step_distribution(case.target(req.prompt), req.params, req.prompt, ())
            columns = [[o[i][0][j] for o in got if len(o[i][0]) > j] for j in range(req.params.max_tokens)]
            verdict = judge_columns(columns, row, per_check, min_samples=20)
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
        """The case's ``coverage_entry`` (origin: its kind; an engine-scale batch is generated)."""
        origin = {"scale": "generated"}.get(case.kind, case.kind)
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

    def run(self, cases, stop_on_first: bool) -> BatteryResult:
        r = self.result
        law = [c for c in cases if not c.seeded and c.kind not in SCALE_KINDS]
        big = [c for c in cases if c.kind in SCALE_KINDS]
        aimed = sum(c.kind == "aimed" for c in big)
        scale_rng = np.random.default_rng(seed_stream(self.seed, "engine-scale runs"))
        seed_laws = sum(1 for c in cases if c.seeded) if self.budget.seed_law_runs > 0 else 0
        positions = sum(q.params.max_tokens for c in big for q in c.requests)
        per_check = stats.split_budget(
            self.budget.false_fail_rate, max(1, sum(len(c.requests) for c in law) + seed_laws + positions)
        )
        # replay: the same rng state must give the same outputs, else enumeration would mislead
        exact_ok = True
        first = (law or big)[0]
        got, breach, replayed, _ = self.call(
            loop_sample_task,
            first,
            tuple(range(len(first.requests))),
            3,
            np.random.default_rng(self.seed),
            5.0,
            self.budget.call_limit_s,
            seconds=5.0 + 4 * self.budget.call_limit_s,
        )
        if breach:
            self.find("contract", "contract", breach, first)
            return r
        if not replayed:
            exact_ok = False
            self.find(
                "rng",
                "contract",
                "does not draw from rng: the same rng state replayed different "
                "outputs; enumeration skipped, laws judged by statistics",
                first,
            )
        for i, case in enumerate(cases):
            if stop_on_first and r.flagged(stopping_kinds(stop_on_first)):
                r.ran.append("stopped after the first finding")
                break
            if case.seeded:
                self.seeded_case(case, per_check)
            elif case.kind in SCALE_KINDS:
                seconds = self.budget.aim_s / aimed if case.kind == "aimed" else self.budget.scale_s
                scale_rng = self.scale_case(case, per_check, seconds, scale_rng)
            else:
                self.law_case(case, per_check, exact_ok, seed_stream(self.seed, "loop chi-square", i))
        return r


def _top(dist: dict, limit: int = 12) -> dict:
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:limit]
    return {" ".join(map(str, key)) or "(empty)": round(float(v), 12) for key, v in top}


__all__ = ["LoopBattery"]
