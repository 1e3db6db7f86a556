"""``python -m specverify check TARGET``: is anyone's speculative sampler exact?

TARGET is ``package.module:function`` or ``path/to/file.py:function``, a function with the
handout's signature ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``. The checker runs
the detector battery of specverify.detectors on it (exact enumeration where it can follow the
sampler, calibrated statistics elsewhere, tokens per round against theory, the contract), then
looks for the smallest model on which a distribution finding shows.

Exit codes: 0 no finding, 1 at least one finding, 2 usage error (one line on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
from typing import Callable

import numpy as np

from . import detectors, exact, stats
from .chains import TableModel, iid_model, random_model
from .files import json_default

BUDGETS = detectors.BUDGETS


class UsageError(Exception):
    pass


def load_target(target: str) -> Callable:
    """Import ``module:function`` or ``file.py:function``; UsageError with one clear line."""
    if ":" not in target:
        raise UsageError(f"TARGET {target!r}: expected 'package.module:function' or 'path/file.py:function'")
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise UsageError(f"TARGET {target!r}: missing module or function name")
    try:
        module = _import_file(where) if where.endswith(".py") else importlib.import_module(where)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"TARGET {target!r}: cannot import {where!r} ({type(exc).__name__}: {exc})") from None
    fn = getattr(module, name, None)
    if fn is None:
        raise UsageError(f"TARGET {target!r}: {where!r} has no attribute {name!r}")
    if not callable(fn):
        raise UsageError(f"TARGET {target!r}: {name!r} is a {type(fn).__name__}, not callable")
    return fn


def _import_file(path: str):
    if not os.path.isfile(path):
        raise UsageError(f"TARGET: no such file {path!r}")
    mod_name = "specverify_target_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- counterexamples

SMALL_PAIRS = [
    ([0.5, 0.5], [0.8, 0.2]),
    ([0.7, 0.3], [0.2, 0.8]),
    ([0.9, 0.1], [0.5, 0.5]),
    ([1.0, 0.0], [0.5, 0.5]),
    ([0.5, 0.3, 0.2], [0.3, 0.3, 0.4]),
    ([0.2, 0.5, 0.3], [0.6, 0.2, 0.2]),
]


def small_models():
    """Candidate models from the smallest up: i.i.d. pairs, then chains that depend on the last
    token, then chains that depend on the position (for wrong-row bugs that i.i.d. models hide)."""
    for p, q in SMALL_PAIRS:
        yield iid_model(p, q, name="iid")
    for v in (2, 3):
        for seed in range(3):
            yield random_model(v, 1, 1, 100 + seed)
        for seed in range(2):
            yield random_model(v, 0, 2, 200 + seed)


def _prefix_for(model: TableModel) -> tuple:
    return tuple([1 % model.vocab_size] * max(model.order, 1))


def small_cases():
    """Candidate cases, smallest first: k, then the window m, then the model."""
    for k in (1, 2, 3):
        for m in range(1, k + 2):
            for model in small_models():
                yield detectors.Case("counterexample", model, _prefix_for(model), k, m)


COUNTEREXAMPLE_SAMPLES = 2000
"""Runs per candidate when the sampler cannot be enumerated (statistical search)."""


def find_counterexample(sampler, time_budget: float = 15.0, seed: int = 0) -> dict | None:
    """The smallest (k, window, vocabulary, model) on which the sampler shows its bias.

    Exact enumeration first (exact TV above the tolerance). For a sampler the enumerator cannot
    follow (e.g. one drawing from torch's RNG), the same candidates, smallest first, get a
    chi-square test of ``COUNTEREXAMPLE_SAMPLES`` runs each, at a false-fail rate of 1e-6 split
    over all candidates; the result then says ``"method": "statistical"`` and shows the empirical
    distribution, not an exact one.
    """
    deadline = time.perf_counter() + time_budget
    cases = list(small_cases())
    unenumerable = []
    for case in cases:
        if time.perf_counter() > deadline:
            return None
        try:
            with detectors.time_limit(2.0, "counterexample search", exact.NotEnumerable):
                got, want = detectors.exact_case(sampler, case, 20_000)
        except exact.NotEnumerable:
            unenumerable.append(case)
            continue
        except detectors.ContractBreach:
            continue
        tv = exact.total_variation(got, want)
        if tv > detectors.EXACT_TV_TOL:
            return describe(case, got, want, tv, "exact")
    return statistical_counterexample(sampler, unenumerable, len(cases), deadline, seed)


def statistical_counterexample(sampler, cases, n_candidates: int, deadline: float,
                               seed: int) -> dict | None:
    rng = np.random.default_rng(seed)
    per_case = stats.split_budget(detectors.DEFAULT_FALSE_FAIL_RATE, n_candidates)
    for case in cases:
        if time.perf_counter() > deadline:
            return None
        want = exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)
        try:
            with detectors.time_limit(max(5.0, deadline - time.perf_counter()), "sampling"):
                samples = detectors.sample_first_tokens(sampler, case, COUNTEREXAMPLE_SAMPLES, rng)
        except detectors.ContractBreach:
            continue
        if not stats.chi_square_test(samples, want, false_fail_rate=per_case).passed:
            got = stats.empirical_distribution(samples)
            return describe(case, got, want, stats.tv_distance(got, want), "statistical")
    return None


def describe(case: detectors.Case, got: dict, want: dict, tv: float, method: str) -> dict:
    m = case.model
    return {
        "method": method, "vocab_size": m.vocab_size, "k": case.k, "window": case.m,
        "prefix": list(case.prefix), "model": m.name, "order": m.order, "period": m.period,
        "p": m.p_table.round(6).tolist(), "q": m.q_table.round(6).tolist(),
        ("exact_tv" if method == "exact" else "empirical_tv"): tv,
        "samples": None if method == "exact" else COUNTEREXAMPLE_SAMPLES,
        "distributions": [
            {"tokens": list(key), "sampler": round(float(got.get(key, 0.0)), 9),
             "target": round(float(want.get(key, 0.0)), 9)}
            for key in sorted(set(got) | set(want))
        ],
    }


# --------------------------------------------------------------------------- the check


def check(sampler, target: str = "<sampler>", budget: str = "standard", seed: int = 0,
          counterexample: bool = True) -> dict:
    """The verdict as the JSON object the CLI prints."""
    result = detectors.run_battery(sampler, budget=budget, seed=seed)
    findings = [f.to_dict() for f in result.findings]
    if counterexample and any(f["kind"] == "distribution" for f in findings):
        ce = find_counterexample(sampler, seed=seed)
        for f in findings:
            if f["kind"] == "distribution":
                f["counterexample"] = ce
                if ce is None:
                    f["counterexample_note"] = "no small model shows it (exactly, or at 2,000 sampled runs for a sampler the enumerator cannot follow); see the case"
                break
    return {
        "target": target, "exact": result.exact, "efficient": result.efficient,
        "findings": findings, "budget": budget, "seed": seed,
        "exact_tv_max": result.exact_tv, "chi2_p_value_min": result.chi2_p_value,
        "samples_to_detect": result.samples_to_detect,
        "mean_tokens_per_round": {k: {"measured": a, "expected": b}
                                  for k, (a, b) in result.mean_tokens.items()},
        "false_fail_rate": detectors.DEFAULT_FALSE_FAIL_RATE,
        "ran": result.ran, "seconds": round(result.seconds, 2),
    }


def human(report: dict) -> str:
    verdict = "EXACT" if report["exact"] else "NOT EXACT"
    eff = {True: "efficient", False: "NOT efficient", None: "efficiency not measured"}[report["efficient"]]
    lines = [f"{report['target']}: {verdict}, {eff} "
             f"({len(report['findings'])} finding(s), {report['seconds']} s, budget {report['budget']})"]
    for f in report["findings"]:
        lines.append(f"  [{f['kind']}] {f['check']} on {f.get('case')}: {f['message']}")
        ce = f.get("counterexample")
        if ce:
            tv = ce.get("exact_tv", ce.get("empirical_tv"))
            lines.append(f"    smallest model ({ce['method']}): vocab {ce['vocab_size']}, k={ce['k']}, "
                         f"window {ce['window']}, {ce['model']} p={ce['p']} q={ce['q']}, TV {tv:.4g}")
            for row in ce["distributions"][:8]:
                lines.append(f"      {row['tokens']}: sampler {row['sampler']:.6f}  target {row['target']:.6f}")
    lines.append("ran:")
    lines += [f"  {line}" for line in report["ran"]]
    return "\n".join(lines) + "\n"


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m specverify check",
                                 description="Check that a speculative sampler is exact.")
    ap.add_argument("target", metavar="TARGET", help="package.module:function or path/file.py:function")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", choices=BUDGETS, default="standard")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse already printed one line of usage error
        return 0 if exc.code == 0 else 2
    try:
        sampler = load_target(args.target)
    except UsageError as exc:
        print(f"specverify check: {exc}", file=sys.stderr)
        return 2
    report = check(sampler, args.target, args.budget, args.seed)
    out = json.dumps(report, default=json_default) + "\n" if args.json else human(report)
    sys.stdout.write(out)
    return 0 if not report["findings"] else 1
