"""The loop checks on a case's laws: each request's output law against the target's
(``sequence-law``, ``batch-isolation`` when exact alone), the requests' joint law against the
product of theirs (``joint-law``), exactly by enumeration where the enumerator follows the loop,
else by the chi-square over whole outputs; and tokens per target pass against the reference
loop's (``loop.reference``), exact or by a one-sided mean test.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...battery.core import EXACT_TV_TOL, POWER_FALSE_PASS_RATE
from ...laws import exact, rounding, stats
from ...laws.requests import independence_tv
from ...laws.two_sample import two_sample_test
from .calls import identical_pairs, request_law
from .cases import CORE_KINDS, LoopCase
from .own_reference import ReferenceCalls
from .reference import reference_rates, tokens_per_pass_rates, tokens_per_pass_test
from .semantics import both_truncations, difference_words, named_difference


def _pair_law(joint: dict, i: int, j: int) -> dict:
    out: dict = {}
    for outcome, w in joint.items():
        key = (outcome[i], outcome[j])
        out[key] = out.get(key, 0.0) + w
    return out


def _top(dist: dict, limit: int = 12) -> dict:
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:limit]
    return {" ".join(map(str, key)) or "(empty)": round(float(v), 12) for key, v in top}


class LawChecks(ReferenceCalls):
    """A case judged by its laws (``law_case``) and its tokens per pass."""

    def law_case(self, case: LoopCase, per_check: float, exact_ok: bool, runs, efficiency: bool = True) -> None:
        """Judge every request of the case: exact law by enumeration (``exact_ok``), else the
        chi-square over whole outputs, its runs drawn from ``runs`` (a ``SeedSequence`` node:
        ``seed_stream(seed, "loop chi-square", i)`` for the battery's case i; a core case,
        ``CORE_KINDS``: ``budget.samples`` runs, more where a request's law needs more to see
        ``detect_tv`` (its power required: the budget never ends short of it by its sizing); an edge or generated case: ``extra_samples`` runs, a sweep ``sweep_runs``,
        its power stated); the joint law of its requests; contracts on every outcome; tokens per pass when
        ``efficiency``. Each request's (method, law got, law wanted, runs) goes to ``self.laws``."""
        r = self.result
        self.laws = {}
        self.per_check = per_check
        value: Any  # the laws enumerated, a breach, the guard's words or why not enumerable
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
            want = self.wanted(case, i)
            if want is None:  # the reference cannot be enumerated: its runs against this exact law
                self.sampled_reference_against(case, i, got)
                continue
            tv = exact.total_variation(got, want)
            self.laws[i] = ("exact", got, want, None)
            r.exact_tv_max = tv if r.exact_tv_max is None else max(r.exact_tv_max, tv)
            r.ran.append(f"sequence-law: {case.name}: request {i}: exact TV {tv:.3g}")
            if tv <= rounding.stated_allowance(case.k, case.vocab_size, rounding.longest_window(got)):
                continue  # laws.rounding: at float64 (the default) EXACT_TV_TOL
            check = "batch-isolation" if len(ids) > 1 and self.exact_alone(case, i, want) else "sequence-law"
            self.find(
                check,
                "distribution",
                f"request {i}: exact law of the output differs from {self.against()}: TV {tv:.4g}"
                + (" (exact alone, biased in its batch)" if check == "batch-isolation" else "")
                + self.semantics_words(case, i, got),
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
        if tv <= rounding.stated_allowance(case.k, case.vocab_size, rounding.longest_window(joint)):
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
        if core or not n:  # a core case (or a campaign's, tv=X): raised until every request sees detect_tv
            n = max(
                n,
                *(
                    stats.min_num_samples_chi_square(
                        b.detect_tv, request_law(case, i), per_check, POWER_FALSE_PASS_RATE
                    )
                    for i in ids
                ),
            )
        sampled = self.sample(case, n, np.random.default_rng(runs))
        if sampled is None:
            return
        got, _, _, breach = sampled
        for i in ids:
            samples = [o[i][0] for o in got]
            if not samples:
                continue
            want = self.wanted(case, i)
            if want is None:  # neither side enumerable: a two-sample test against the reference's runs
                self.two_sample_against(case, i, samples)
                continue
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
                    f"request {i}: sampled outputs differ from {self.against()}: p-value {p:.3g} "
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
        (``identical_pairs``: every pair of each group, wherever they sit and whenever they start), the
        pair's outputs over the runs against the product of
        their laws, a chi-square at ``per_check`` (its power, the TV it sees with probability
        0.95, in ``result.power`` with ``"check": "joint-law"``). A loop that serves both one
        output puts all its mass on equal pairs: TV 1 - sum of the law's squares from it."""
        r = self.result
        for a, b in identical_pairs(case):
            law = self.wanted(case, a)
            if law is None:
                r.ran.append(f"joint-law: {case.name}: identical requests {a} and {b}: not judged (no exact law)")
                continue
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

    def against(self) -> str:
        """What the laws are judged against, in a finding's words."""
        if self.reference is None:
            return "target-only sampling's"
        return "the reference's (your own target-only path)"

    def semantics_words(self, case: LoopCase, i: int, got: dict) -> str:
        """Without a reference, where the request sets both truncations and the loop's law is
        that of another known semantics (``loop.semantics``): "; the loop's law is target-only
        sampling that applies top-p before top-k ...". Empty otherwise."""
        req = case.requests[i]
        if self.reference is not None or not both_truncations(req.params):
            return ""
        words = named_difference(case.target, req, got)
        return "" if words is None else "; " + difference_words(words)

    def sampled_reference_against(self, case: LoopCase, i: int, got: dict) -> None:
        """Request i's exact law ``got`` (the subject enumerated) against runs of the reference,
        which the enumerator cannot follow: the battery's chi-square of the reference's runs
        against ``got`` at the per-check rate (a difference either way is a finding)."""
        b, r = self.budget, self.result
        n = b.samples or b.extra_samples or 2000
        runs = [o[i] for o in self.reference_runs(case, tuple(range(len(case.requests))), n)]
        test = stats.chi_square_test(runs, got, false_fail_rate=self.per_check)
        p = test.p_value if test.p_value is not None else 0.0
        tv = min(stats.min_discrepancy_chi_square(len(runs), got, self.per_check, POWER_FALSE_PASS_RATE), 1.0)
        self.laws[i] = ("statistical", got, stats.empirical_distribution(runs), len(runs))
        r.power.append(
            {
                "case": case.name,
                "request": i,
                "against": "reference",
                "reference_runs": len(runs),
                "min_detectable_tv": tv,
                "false_fail_rate": self.per_check,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
            }
        )
        r.ran.append(
            f"sequence-law: {case.name}: request {i}: exact law against {len(runs)} runs of the reference "
            f"(not enumerable): p-value {p:.3g}; detects TV >= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}"
        )
        if not test.passed:
            self.find(
                "sequence-law",
                "distribution",
                f"request {i}: exact law of the output differs from the reference's runs: p-value {p:.3g} < "
                f"{self.per_check:.3g} after {len(runs)} runs of the reference",
                case,
                {"request": i, "p_value": p},
            )

    def two_sample_against(self, case: LoopCase, i: int, samples: list) -> None:
        """Request i's runs against as many runs of the reference (neither enumerable): the
        two-sample chi-square (``laws.two_sample``) at the per-check rate, its power stated."""
        r = self.result
        runs = [o[i] for o in self.reference_runs(case, tuple(range(len(case.requests))), len(samples))]
        test = two_sample_test(samples, runs, self.per_check, POWER_FALSE_PASS_RATE)
        self.laws[i] = (
            "statistical",
            stats.empirical_distribution(samples),
            stats.empirical_distribution(runs),
            len(samples),
        )
        self.two_sample_power(case, i, test, self.per_check)
        r.ran.append(
            f"loop-two-sample: {case.name}: request {i}: p-value {test.p_value:.3g} after {test.n_a} runs and "
            f"{test.n_b} of the reference; detects TV >= {test.min_detectable_tv:.3g} with probability "
            f"{1 - POWER_FALSE_PASS_RATE:g}"
        )
        if not test.passed:
            self.find(
                "loop-two-sample",
                "distribution",
                f"request {i}: sampled outputs differ from the reference's (your own target-only path): two-sample "
                f"p-value {test.p_value:.3g} < {self.per_check:.3g} after {test.n_a} and {test.n_b} runs",
                case,
                {"request": i, "p_value": test.p_value},
            )

    def tokens_per_pass(self, case: LoopCase, law: dict) -> None:
        """Per request, exact mean tokens per target pass (tokens / (tokens - accepted): every round
        but one cut by a stop inside its accepted block ends with one token not drafted) against the
        reference loop's; only a shortfall is a finding (efficiency). Skipped without counts."""
        if any(row[3] is None for outcome in law for row in outcome):
            self.result.ran.append(f"tokens-per-pass: {case.name}: no counts returned; skipped")
            return
        if not self.rate_comparable(case):
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
        if not self.rate_comparable(case):
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


__all__ = ["LawChecks"]
