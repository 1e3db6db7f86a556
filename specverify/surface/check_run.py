"""``python -m specverify check TARGET [TARGET ...]``: is anyone's speculative sampler exact?

TARGET is ``package.module:function`` or ``path/to/file.py:function``: a round sampler with the
handout's signature ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``, a generation
loop ``generate(target, draft, requests, k, rng)`` or a batched kernel ``kernel(draft_ids,
draft_probs, target_probs, uniforms)`` (specverify.interfaces: told by the parameter names, or
``--interface``; ``--device cuda`` runs a kernel's tensors on a GPU). The target is
imported and run only in its own process (specverify.battery.runner); this module runs the command line
(``run``; it is parsed by ``specverify.surface.check_command`` before this module loads) over
``specverify.surface.api.check`` (``interfaces.round.run_battery`` and
``interfaces.round_counterexample.find_counterexample``);
``--junit-xml FILE`` writes one JUnit test case per target, ``--executor ray`` runs one Ray task
per target and one per case enumeration (specverify.battery.executors, specverify.interfaces.round.units).

Exit codes: 0 exact, 1 not exact (a distribution or contract finding), 2 usage error (one line on
stderr: a bad TARGET, a target whose signature does not fit its interface), 3 inconclusive (no
finding, but not every case could be judged to the budget's plan), 4 environment error (the
subject cannot run here: no CUDA, a missing package; the line says what to do), 130 interrupted.
Several targets: each is checked, whatever the others are (a TARGET that does not exist is that
target's usage error, its own ``<error>`` in the JUnit XML); the exit code is the worst of their
codes (2 > 4 > 1 > 3 > 0).
"""

from __future__ import annotations

import json
import sys

from .. import interfaces
from ..battery import runner, signals
from ..battery.core import BatteryResult
from ..battery.targets import load_target, split_target, start_target  # noqa: F401 - re-exported
from ..common.command_line import EXIT_ENVIRONMENT, EXIT_USAGE, OneLineParser, emit, is_terminal  # noqa: F401 - re-exported for older callers
from ..common.files import json_default
from ..errors import EnvironmentProblem, UsageError
from . import api
from .campaign_cost import resolve_budget
from .report_text import VERDICT_WORDS, failure_message, human, run_lines  # noqa: F401 - re-exported

EXIT_CODES = {True: 0, False: 1, None: 3}


def check(
    subject,
    target: str = "<sampler>",
    budget: str = "standard",
    seed: int = 0,
    counterexample: bool = True,
    interface: str = "auto",
    prefetched: dict | None = None,
    device: str | None = None,
    aim: interfaces.Aim | None = None,
    fail_fast: bool = False,
    progress: bool | str | None = None,
    time_limit: float | None = None,
    workers: int = 1,
) -> dict:
    """The verdict as the JSON object the CLI prints (subject: a callable, a TARGET string or a
    started Runner; ``fail_fast``, ``progress``, ``time_limit``, ``workers``: ``api.check``'s)."""
    aim = aim or interfaces.Aim()
    return api.check(
        subject,
        budget=budget,
        seed=seed,
        counterexample=counterexample,
        target=target,
        interface=interface,
        prefetched=prefetched,
        device=device,
        vocab=aim.vocab,
        k=aim.ks or None,
        max_tokens=aim.max_tokens,
        fail_fast=fail_fast,
        progress=progress,
        time_limit=time_limit,
        workers=workers,
    ).to_dict()


SEVERITY = {0: 0, 3: 1, 1: 2, 4: 3, 2: 4}  # exact < inconclusive < not exact < environment < usage error


def check_target(
    target: str,
    budget: str,
    seed: int,
    interface: str = "auto",
    device: str | None = None,
    aim: interfaces.Aim | None = None,
    fail_fast: bool = False,
    time_limit: float | None = None,
    workers: int = 1,
    *units,
) -> tuple[str, object]:
    """("ok", the report's dict), ("usage", the one-line error) or ("environment", what this
    machine lacks to load it): one target, start to end
    (a Ray task; ``aim``: the user's --vocab / --k / --max-tokens; ``fail_fast``: --fail-fast;
    ``time_limit``: --time-limit; ``workers``: --workers;
    ``units``: its enumerations from other tasks, ``target_units``, replayed)."""
    from ..interfaces.round.units import merge_output, prefetched

    try:
        report = check(
            target,  # loaded in its own process by api.check, under the progress line
            target,
            budget,
            seed,
            interface=interface,
            prefetched=prefetched(units) if units else None,
            device=device,
            aim=aim,
            fail_fast=fail_fast,
            progress=None if is_terminal(sys.stderr) else "lines",
            time_limit=time_limit,
            workers=workers,
        )
        if units:
            extra = BatteryResult(output=report["output"], seconds=report["seconds"])
            merge_output(extra, units)
            report["output"], report["seconds"] = extra.output, extra.seconds
        return "ok", report
    except (UsageError, interfaces.InterfaceError) as exc:
        return "usage", str(exc)
    except EnvironmentProblem as exc:
        return "environment", str(exc)


def target_units(target: str, budget: str, interface: str = "auto") -> list[tuple]:
    """The target's enumeration units for the Ray executor (``(enumeration_unit, args)`` pairs;
    none for ``--interface loop``: the loop battery runs whole). With ``auto`` a loop target's
    units find a contract breach nobody asks for: wasted, never used."""
    from functools import partial

    from .. import interfaces

    kind = interfaces.get("round" if interface == "auto" else interface)
    return kind.units(partial(load_target, target), resolve_budget(budget))


def junit_case(target: str, outcome: tuple[str, object]):
    from . import junit

    status, value = outcome
    if status == "usage":
        return junit.Case(target, "specverify.check", 0.0, "error", f"usage error: {value}", str(value))
    if status == "environment":
        return junit.Case(target, "specverify.check", 0.0, "skipped", f"cannot run here: {value}", str(value))
    report = value
    if report.get("environment"):
        why = f"cannot run here: {report['environment']}"
        return junit.Case(target, "specverify.check", report["seconds"], "skipped", why, human(report, verbose=True))
    text = human(report, verbose=True)
    first = report["findings"][0] if report["findings"] else None
    line = f"[{first['kind']}] {first['check']} on {first['case']}: {first['message']}" if first else ""
    if report["exact"] is False:  # each finding once: the verdict, findings and counterexample
        # side by side (failure_message), then what the human report adds: output and checks run
        return junit.Case(
            target,
            "specverify.check",
            report["seconds"],
            "failure",
            line,
            failure_message(report) + "\n" + "\n".join(run_lines(report)) + "\n",
        )
    if report["exact"] is None:
        why = report["shortfalls"][0] if report["shortfalls"] else line or "inconclusive"
        return junit.Case(target, "specverify.check", report["seconds"], "error", f"inconclusive: {why}", text)
    return junit.Case(target, "specverify.check", report["seconds"], "passed", "", text)


def target_sources(target: str) -> list[str]:
    """The files a TARGET's code is read from, found without importing anything: the file of
    ``path/file.py:function``; for ``package.module:function`` the ``module.py`` or
    ``module/__init__.py`` candidates on the working folder and ``sys.path``."""
    import os

    where, _ = split_target(target)
    if where.endswith(".py"):
        return [where]
    parts = where.split(".")
    found = []
    for entry in [os.getcwd(), *sys.path]:
        base = os.path.join(entry or os.getcwd(), *parts)
        found += [c for c in (base + ".py", os.path.join(base, "__init__.py")) if os.path.isfile(c)]
    return found


def check_output_files(args) -> None:
    """UsageError when --junit-xml names a TARGET's own source (the report would overwrite it)."""
    from ..common.validation import same_file

    if not args.junit_xml:
        return
    for target in args.targets:
        if target_problem(target) is None and any(same_file(args.junit_xml, s) for s in target_sources(target)):
            raise UsageError(
                f"--junit-xml: {args.junit_xml!r} is the source of TARGET {target!r}; give the report its own file"
            )


def report_outcomes(args, targets, outcomes) -> int:
    """Print each finished target's report (stdout) or usage error (stderr) and write the JUnit
    XML for them; the worst exit code."""
    code = 0
    for status, value in outcomes:
        if status in ("usage", "environment"):
            emit(f"specverify check: {value}\n", sys.stderr)
            this = EXIT_USAGE if status == "usage" else EXIT_ENVIRONMENT
        else:
            out = (
                json.dumps(value, default=json_default) + "\n"
                if args.json
                else human(value, verbose=getattr(args, "verbose", False))
            )
            emit(out)
            this = EXIT_ENVIRONMENT if value.get("environment") else EXIT_CODES[value["exact"]]
        code = max(code, this, key=SEVERITY.__getitem__)
    sys.stdout.flush()
    if getattr(args, "plot", None) and outcomes and outcomes[0][0] == "ok":
        code = max(code, draw_counterexample(args.plot, outcomes[0][1]), key=SEVERITY.__getitem__)
    if args.junit_xml:
        from . import junit

        cases = [junit_case(t, o) for t, o in zip(targets, outcomes)]
        written = junit.write(args.junit_xml, "specverify.check", cases, "specverify check: --junit-xml")
        code = max(code, written, key=SEVERITY.__getitem__)
    return code


def draw_counterexample(path: str, report: dict) -> int:
    """``--plot FILE``: the report's counterexample drawn into ``path`` (``plots``), said on
    stderr; a report with nothing to draw (an exact one) is said and leaves the exit code as
    it is; a file that cannot be written is a usage error."""
    from .plots import counterexample_figure

    try:
        counterexample_figure(report, path)
    except ValueError as exc:
        emit(f"specverify check: --plot: nothing drawn: {exc}\n", sys.stderr)
        return 0
    except OSError as exc:
        emit(f"specverify check: --plot: cannot write {path!r}: {exc.strerror or exc}\n", sys.stderr)
        return EXIT_USAGE
    emit(f"specverify check: the counterexample drawn in {path}\n", sys.stderr)
    return 0


def run(args) -> int:
    """Check every TARGET of the parsed command line (``check_command.parse_args``), report
    each and return the worst exit code; Ctrl-C or SIGTERM reports the finished ones first."""
    outcomes = []  # the finished targets' outcomes: reported even when Ctrl-C stops the rest
    with signals.sigterm_as_interrupt():
        return _check_all(args, outcomes)


def target_problem(target: str) -> str | None:
    """Why the TARGET string cannot name a function (``split_target``: no ``:``, no such file),
    read before anything is imported; None when it may."""
    try:
        split_target(target)
    except UsageError as exc:
        return str(exc)
    return None


def _check_all(args, outcomes: list) -> int:
    try:
        problems = [target_problem(t) for t in args.targets]  # every TARGET string, before anything runs
        check_output_files(args)
        if getattr(args, "plot", None) and len(args.targets) > 1:
            raise UsageError(f"--plot: draws one TARGET's counterexample; got {len(args.targets)} targets")
        aim = interfaces.Aim(args.vocab, args.k or (), args.max_tokens)
        good = [t for t, problem in zip(args.targets, problems) if problem is None]
        calls = [
            (
                t,
                args.budget,
                args.seed,
                args.interface,
                args.device,
                aim,
                args.fail_fast,
                getattr(args, "time_limit", None),
                getattr(args, "workers", 1),
            )
            for t in good
        ]
        if args.executor == "local":
            for target, problem in zip(args.targets, problems):
                outcomes.append(("usage", problem) if problem else check_target(*calls[good.index(target)]))
        else:
            from ..battery.executors import ray_map

            done = iter(
                ray_map(
                    check_target,
                    calls,
                    args.executor,
                    units=[target_units(t, args.budget, args.interface) for t in good],
                )
                if calls
                else []
            )
            outcomes[:] = [("usage", problem) if problem else next(done) for problem in problems]
    except UsageError as exc:
        emit(f"specverify check: {exc}\n", sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as stop:
        runner.kill_all()
        if outcomes:
            report_outcomes(args, args.targets, outcomes)
        done = f" after {len(outcomes)} of {len(args.targets)} targets" if len(args.targets) > 1 else ""
        how, code = signals.how_stopped(stop)
        print(f"specverify check: {how}{done}", file=sys.stderr)
        return code
    except Exception as exc:  # noqa: BLE001 - ExecutorUnavailable, or Ray could not start
        from ..battery.executors import ExecutorUnavailable

        if not isinstance(exc, ExecutorUnavailable):
            raise
        print(f"specverify check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return report_outcomes(args, args.targets, outcomes)
