"""``python -m specverify check TARGET``: is anyone's speculative sampler exact?

TARGET is ``package.module:function`` or ``path/to/file.py:function``, a function with the
handout's signature ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``. The target is
imported and run only in its own process (specverify.runner); this module is the command line
over ``detectors.run_battery`` and ``detectors.find_counterexample``.

Exit codes: 0 exact, 1 not exact (a distribution or contract finding), 2 usage error (one line on
stderr), 3 inconclusive (no finding, but not every case could be judged to the budget's plan),
130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from functools import partial
from typing import Callable

from . import detectors, runner
from .files import json_default
from .validation import seed_argument

EXIT_CODES = {True: 0, False: 1, None: 3}
EXIT_USAGE, EXIT_INTERRUPTED = 2, 130


class UsageError(Exception):
    pass


def load_target(target: str) -> Callable:
    """Import ``module:function`` or ``file.py:function``; UsageError with one clear line.

    Runs in the subject's process: whatever the import prints goes to its capture, an exit at
    import is a usage error, not silence.
    """
    where, name = split_target(target)
    try:
        module = _import_file(where) if where.endswith(".py") else importlib.import_module(where)
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import included
        raise UsageError(f"TARGET {target!r}: cannot import {where!r} ({type(exc).__name__}: {exc})") from None
    fn = getattr(module, name, None)
    if fn is None:
        raise UsageError(f"TARGET {target!r}: {where!r} has no attribute {name!r}")
    if not callable(fn):
        raise UsageError(f"TARGET {target!r}: {name!r} is a {type(fn).__name__}, not callable")
    return fn


def split_target(target: str) -> tuple[str, str]:
    """(module or file, function name), checked in the parent before anything is imported."""
    if ":" not in target:
        raise UsageError(f"TARGET {target!r}: expected 'package.module:function' or 'path/file.py:function'")
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise UsageError(f"TARGET {target!r}: missing module or function name")
    if where.endswith(".py") and not os.path.isfile(where):
        raise UsageError(f"TARGET: no such file {where!r}")
    return where, name


def _import_file(path: str):
    mod_name = "specverify_target_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


def start_target(target: str) -> runner.Runner:
    """The target loaded in its own process; UsageError when it cannot be loaded."""
    split_target(target)
    try:
        return runner.Runner(partial(load_target, target)).start()
    except runner.SubjectFailed as exc:
        raise UsageError(f"TARGET {target!r}: loading it failed: {exc}") from None


def check(subject, target: str = "<sampler>", budget: str = "standard", seed: int = 0,
          counterexample: bool = True) -> dict:
    """The verdict as the JSON object the CLI prints (subject: a callable or a started Runner)."""
    b = detectors.get_budget(budget)
    result = detectors.run_battery(subject, b, seed)
    if counterexample and result.flagged(("distribution",)):
        result.counterexample = detectors.find_counterexample(subject, b, seed)
    return {"target": target, "seed": seed, "coverage": b.coverage(),
            "false_fail_rate": b.false_fail_rate, **result.to_dict()}


VERDICT_WORDS = {True: "EXACT", False: "NOT EXACT", None: "INCONCLUSIVE"}


def human(report: dict) -> str:
    eff = {True: "efficient", False: "NOT efficient", None: "efficiency not established"}[report["efficient"]]
    lines = [f"{report['target']}: {VERDICT_WORDS[report['exact']]}, {eff} "
             f"({len(report['findings'])} finding(s), {report['seconds']:.1f} s, budget "
             f"{report['budget']}: {report['coverage']})"]
    for f in report["findings"]:
        where = f" on {f['case']}" if f["case"] else ""
        lines.append(f"  [{f['kind']}] {f['check']}{where}: {f['message']}")
    for s in report["shortfalls"]:
        lines.append(f"  [inconclusive] {s}")
    ce = report["counterexample"]
    if ce:
        tv = ce.get("exact_tv", ce.get("empirical_tv"))
        lines.append(f"  smallest model ({ce['method']}): vocab {ce['vocab_size']}, k={ce['k']}, "
                     f"window {ce['window']}, {ce['model']} p={ce['p']} q={ce['q']}, TV {tv:.4g}")
        for row in ce["distributions"][:8]:
            lines.append(f"    {row['tokens']}: sampler {row['sampler']:.6f}  target {row['target']:.6f}")
    if report["output"]:
        lines.append("the sampler printed (last lines):")
        lines += [f"  | {line}" for line in report["output"].splitlines()[-8:]]
    lines.append("ran:")
    lines += [f"  {line}" for line in report["ran"]]
    return "\n".join(lines) + "\n"


def parse_args(argv):
    coverage = "; ".join(f"{name}: {b.coverage()}" for name, b in detectors.BUDGETS.items())
    ap = argparse.ArgumentParser(
        prog="python -m specverify check",
        description="Check that a speculative sampler is exact. Exit 0 exact, 1 not exact, "
                    "2 usage error, 3 inconclusive.")
    ap.add_argument("target", metavar="TARGET", help="package.module:function or path/file.py:function")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--seed", type=seed_argument, default=0, help="an integer >= 0")
    ap.add_argument("--budget", choices=list(detectors.BUDGETS), default="standard",
                    help=f"how much to run ({coverage})")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse already printed one line of usage error
        return 0 if exc.code == 0 else EXIT_USAGE
    subject = None
    try:
        subject = start_target(args.target)
        report = check(subject, args.target, args.budget, args.seed)
    except UsageError as exc:
        print(f"specverify check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        runner.kill_all()
        print("specverify check: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if subject is not None:
            subject.close()
    out = json.dumps(report, default=json_default) + "\n" if args.json else human(report)
    sys.stdout.write(out)
    return EXIT_CODES[report["exact"]]
