"""``python -m specverify check TARGET [TARGET ...]``: is anyone's speculative sampler exact?

TARGET is ``package.module:function`` or ``path/to/file.py:function``: a round sampler with the
handout's signature ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``, a generation
loop ``generate(target, draft, requests, k, rng)`` or a batched kernel ``kernel(draft_ids,
draft_probs, target_probs, uniforms)`` (specverify.interfaces: told by the parameter names, or
``--interface``; ``--device cuda`` runs a kernel's tensors on a GPU). The target is
imported and run only in its own process (specverify.battery.runner). This module runs the
parsed command line (``run`` of a ``request.CheckCommand``; ``specverify.surface.check_command``
parses it before this module loads): each TARGET is ``api.run`` of the command's one
``CheckRequest``; ``--junit-xml FILE`` writes one JUnit test case per target, ``--executor ray``
runs one Ray task per target and one per unit of its interface (``Interface.units``: the round
battery's case enumerations; specverify.battery.executors).

Exit codes (``specverify.errors.EXIT_CODES``): 0 exact, 1 not exact (a distribution or contract
finding), 2 usage error (one line on stderr: a bad TARGET, a target whose signature does not fit
its interface), 3 inconclusive (no finding, but not every case could be judged to the budget's
plan), 4 environment error (the subject cannot run here: no CUDA, a missing package; the line
says what to do), 130 interrupted. Several targets: each is checked, whatever the others are (a
TARGET that does not exist is that target's usage error, its own ``<error>`` in the JUnit XML);
the exit code is the worst of their codes (``errors.worst_exit_code``: 2 > 4 > 1 > 3 > 0).
"""

from __future__ import annotations

import json
import sys
from functools import partial

from .. import interfaces
from ..battery import runner, signals
from ..battery.targets import load_target, split_target
from ..common.command_line import emit, is_terminal
from ..common.files import json_default
from ..errors import EXIT_CODES, EnvironmentProblem, UsageError, exit_code_of, verdict_exit_code, worst_exit_code
from . import api
from .report_text import failure_message, human, run_lines
from .request import CheckCommand, CheckRequest


def check_target(target: str, request: CheckRequest, *units: dict) -> tuple[str, object]:
    """("ok", the report's dict), ("usage", the one-line error) or ("environment", what this
    machine lacks to load it): one target, start to end, as ``request`` asks (a Ray task;
    ``units``: the results of its interface's units from other tasks, replayed). The target is
    loaded in its own process by ``api.run``, under the progress line (plain lines when stderr
    is not a terminal)."""
    progress = None if is_terminal(sys.stderr) else "lines"
    try:
        report = api.run(target, request.but(target=target, units=units, progress=progress))
    except (UsageError, EnvironmentProblem) as exc:
        return ("usage" if exit_code_of(exc) == EXIT_CODES["usage"] else "environment"), str(exc)
    return "ok", report.to_dict()


def target_units(target: str, request: CheckRequest) -> list[tuple]:
    """The target's units for the Ray executor (``(unit function, args)`` pairs) by its
    interface's ``units`` (none where the battery runs whole). With ``auto`` the target's
    interface is told only where it loads, so every interface's units are made: those of
    another interface are never used."""
    names = interfaces.NAMES if request.interface == "auto" else (request.interface,)
    load = partial(load_target, target)
    out = []
    for kind in map(interfaces.get, names):
        out += kind.units(load, kind.budget(request.budget, request.overrides), request.fail_fast)
    return out


def junit_case(target: str, outcome: tuple[str, object]):
    from . import junit

    status, value = outcome
    if status == "usage":
        return junit.Case(target, "specverify.check", 0.0, "error", f"usage error: {value}", str(value))
    if status == "environment":
        return junit.Case(target, "specverify.check", 0.0, "skipped", f"cannot run here: {value}", str(value))
    assert isinstance(value, dict), "an ok outcome carries its report as a dict"
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


def check_output_files(command: CheckCommand) -> None:
    """ArgumentError when --junit-xml names a TARGET's own source (the report would overwrite it)."""
    from ..common.validation import same_file
    from ..errors import ArgumentError

    if not command.junit_xml:
        return
    for target in command.targets:
        if target_problem(target) is None and any(same_file(command.junit_xml, s) for s in target_sources(target)):
            raise ArgumentError(
                f"--junit-xml: {command.junit_xml!r} is the source of TARGET {target!r}; give the report its own file"
            )


def outcome_code(outcome: tuple[str, object]) -> int:
    """A target's exit code (``errors.EXIT_CODES``): its usage or environment error's, or its
    report's (``errors.verdict_exit_code``)."""
    status, value = outcome
    if status in ("usage", "environment"):
        return EXIT_CODES[status]
    assert isinstance(value, dict)
    return verdict_exit_code(value["exact"], value.get("environment"))


def report_outcomes(command: CheckCommand, outcomes: list) -> int:
    """Print each finished target's report (stdout) or usage error (stderr) and write the JUnit
    XML for them; the worst exit code."""
    for status, value in outcomes:
        if status in ("usage", "environment"):
            emit(f"specverify check: {value}\n", sys.stderr)
        else:
            emit(
                json.dumps(value, default=json_default) + "\n"
                if command.json
                else human(value, verbose=command.verbose)
            )
    code = worst_exit_code(*map(outcome_code, outcomes))
    sys.stdout.flush()
    if command.plot and outcomes and outcomes[0][0] == "ok":
        code = worst_exit_code(code, draw_counterexample(command.plot, outcomes[0][1]))
    if command.junit_xml:
        from . import junit

        cases = [junit_case(t, o) for t, o in zip(command.targets, outcomes)]
        written = junit.write(command.junit_xml, "specverify.check", cases, "specverify check: --junit-xml")
        code = worst_exit_code(code, written)
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
        return EXIT_CODES["usage"]
    emit(f"specverify check: the counterexample drawn in {path}\n", sys.stderr)
    return 0


def run(command: CheckCommand) -> int:
    """Check every TARGET of the parsed command line (``check_command.parse_args``), report
    each and return the worst exit code; Ctrl-C or SIGTERM reports the finished ones first."""
    outcomes: list = []  # the finished targets' outcomes: reported even when Ctrl-C stops the rest
    with signals.sigterm_as_interrupt():
        return check_all(command, outcomes)


def target_problem(target: str) -> str | None:
    """Why the TARGET string cannot name a function (``split_target``: no ``:``, no such file),
    read before anything is imported; None when it may."""
    try:
        split_target(target)
    except UsageError as exc:
        return str(exc)
    return None


def check_all(command: CheckCommand, outcomes: list) -> int:
    """Check the command's targets into ``outcomes`` (each TARGET string read first; one that
    cannot name a function is that target's usage error), here one after another or on Ray;
    report them (``report_outcomes``)."""
    from ..battery.executors import ExecutorUnavailable

    try:
        problems = [target_problem(t) for t in command.targets]  # every TARGET string, before anything runs
        check_output_files(command)
        good = [t for t, problem in zip(command.targets, problems) if problem is None]
        if command.executor == "local":
            for target, problem in zip(command.targets, problems):
                outcomes.append(("usage", problem) if problem else check_target(target, command.request))
        else:
            done = iter(on_ray(command, good))
            outcomes[:] = [("usage", problem) if problem else next(done) for problem in problems]
    except UsageError as exc:
        emit(f"specverify check: {exc}\n", sys.stderr)
        return EXIT_CODES["usage"]
    except KeyboardInterrupt as stop:
        runner.kill_all()
        if outcomes:
            report_outcomes(command, outcomes)
        done_words = f" after {len(outcomes)} of {len(command.targets)} targets" if len(command.targets) > 1 else ""
        how, code = signals.how_stopped(stop)
        print(f"specverify check: {how}{done_words}", file=sys.stderr)
        return code
    except ExecutorUnavailable as exc:  # Ray could not start
        print(f"specverify check: {exc}", file=sys.stderr)
        return EXIT_CODES["usage"]
    return report_outcomes(command, outcomes)


def on_ray(command: CheckCommand, targets: list[str]) -> list:
    """``check_target`` of each of ``targets`` as a Ray task, after its units (``target_units``)."""
    from ..battery.executors import ray_map

    if not targets:
        return []
    calls = [(t, command.request) for t in targets]
    return ray_map(check_target, calls, command.executor, units=[target_units(t, command.request) for t in targets])


__all__ = [
    "check_all",
    "check_output_files",
    "check_target",
    "draw_counterexample",
    "junit_case",
    "on_ray",
    "outcome_code",
    "report_outcomes",
    "run",
    "target_problem",
    "target_sources",
    "target_units",
]
