"""The Python API: ``specverify.check(sampler)`` and ``specverify.assert_exact(sampler)``.

This is what the ``check`` command line (specverify.checker) and the pytest plugin
(specverify.pytest_plugin) are thin layers over. It imports only what the battery needs (NumPy,
SciPy through specverify.stats); the sampler runs in its own process (specverify.runner).

    import specverify

    report = specverify.check(my_step, budget="quick", seed=0)
    report.exact          # True / False / None (inconclusive)
    report.counterexample # the smallest model that shows a bias, or None
    specverify.assert_exact(my_step)  # AssertionError with the counterexample side by side

``campaign_runs(tv, budget)`` (``interfaces.round_cases``) is the arithmetic of a thorough campaign: how many sampler runs a
battery needs to see a TV of ``tv`` on every case (README, "Scale out").
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import os
import sys
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

from . import interfaces, runner
from .battery import BatteryResult, Finding
from .files import json_default
from .interfaces import round_cases, round_tasks
from .interfaces.round_cases import campaign_budget, campaign_runs  # the campaign arithmetic, for the API's callers
from .samplers.chain import speculative_step

VERDICT_WORDS = {True: "EXACT", False: "NOT EXACT", None: "INCONCLUSIVE"}
EXIT_CODES = {True: 0, False: 1, None: 3}


@dataclass
class Report:
    """One sampler's verdict. ``exact``: True (exact), False (a distribution or contract finding),
    None (inconclusive: no finding, but a case could not be judged to the budget's plan)."""

    target: str
    seed: int
    budget: str
    coverage: str
    false_fail_rate: float
    result: BatteryResult = field(repr=False)
    controls: list[dict] = field(default_factory=list)
    """Controls known to be biased, judged beside the subject (``require_flagged``)."""

    @property
    def exact(self) -> bool | None:
        return self.result.exact

    @property
    def efficient(self) -> bool | None:
        return self.result.efficient

    @property
    def findings(self) -> list[Finding]:
        return self.result.findings

    @property
    def counterexample(self) -> dict | None:
        return self.result.counterexample

    @property
    def exit_code(self) -> int:
        """The ``check`` command's exit code: 0 exact, 1 not exact, 3 inconclusive."""
        return EXIT_CODES[self.exact]

    def to_dict(self) -> dict:
        """The JSON object ``check --json`` prints. ``coverage``: ``summary`` (the budget's plan in
        words) and ``cases`` (every case run, ``battery.coverage_entry``: origin fixed /
        generated / edge / aimed, its shape, how it was judged, its runs and the TV they see)."""
        out = self.result.to_dict()
        cases = out.pop("cases", [])
        controls = {"controls": self.controls} if self.controls else {}
        return {"target": self.target, "seed": self.seed,
                "coverage": {"summary": self.coverage, "cases": cases},
                "false_fail_rate": self.false_fail_rate, **out, **controls}

    def add_control(self, target: str, claim: str, exact: bool | None, findings: list[dict],
                    seconds: float = 0.0) -> None:
        """A control known to be biased (``claim``: how), judged on this report's cases at its
        budget: recorded in ``controls`` (JSON ``"controls"``, only when there is one) and in
        ``ran``; unless it came out NOT EXACT (``exact`` False) this report is inconclusive (a
        shortfall: a run that cannot see a known bias does not show its subject exact)."""
        flagged = exact is False
        self.controls.append({"target": target, "claim": claim, "exact": exact, "flagged": flagged,
                              "findings": findings, "seconds": round(seconds, 2)})
        self.result.seconds += seconds
        self.result.ran.append(f"control {target} ({claim}): {VERDICT_WORDS[exact]}, {len(findings)} finding(s)"
                               + ("" if flagged else ": NOT flagged"))
        if not flagged:
            self.result.shortfalls.append(f"the control {target} ({claim}) was not flagged at this budget: "
                                          f"the run lacks the power to see a known bias")

    def require_flagged(self, control: "Report", claim: str) -> None:
        """``add_control`` of a control's own ``check`` report (on the same cases, same budget)."""
        self.add_control(control.target, claim, control.exact, [f.to_dict() for f in control.findings],
                         control.result.seconds)

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), default=json_default, **kwargs)

    def text(self) -> str:
        """The human report ``check`` prints: the verdict first."""
        return human(self.to_dict())

    def __str__(self) -> str:
        return self.text()


INTERFACES = ("auto", *interfaces.NAMES)


def interface_of(fn) -> str:
    """The interface ``fn`` is written for (``interfaces.detect``): "round" for the handout's
    ``(p_fn, q_fn, prefix, k, rng)``, "loop" for ``generate(target, draft, requests, k, rng)``,
    "kernel" for ``kernel(draft_ids, draft_probs, target_probs, uniforms)``; UsageError naming
    ``--interface`` when the parameter names do not tell."""
    try:
        return interfaces.detect(fn)
    except interfaces.InterfaceError as exc:
        raise UsageError(str(exc)) from None


def _interface_task(subject) -> tuple[str, str]:
    """In the subject's process: ("ok", its interface) or ("usage", why it cannot be told)."""
    try:
        return "ok", interfaces.detect(subject)
    except interfaces.InterfaceError as exc:
        return "usage", str(exc)


def _declared_task(subject, name: str) -> tuple[str, object]:
    """In the subject's process: ("ok", the cases it declares or None) or ("usage", why they are
    not cases), by interface ``name``'s ``subject_cases``."""
    try:
        return "ok", interfaces.get(name).subject_cases(subject)
    except interfaces.InterfaceError as exc:
        return "usage", str(exc)


def declared_cases(kind, subject, cases):
    """The cases ``check`` runs instead of the interface's standard ones: ``cases`` (the caller's)
    or those the subject declares (``kind.subject_cases``, read where the subject lives); None
    when neither. UsageError when the interface takes no declared cases or they are not cases."""
    try:
        if cases is not None:
            if not hasattr(kind, "declared_cases"):
                raise UsageError(f"cases: the {kind.NAME} interface runs its own cases only")
            return kind.declared_cases(cases)
        if not hasattr(kind, "subject_cases"):
            return None
        if isinstance(subject, runner.Runner):
            status, value = subject.call(_declared_task, kind.NAME, limit=10.0)
            if status == "usage":
                raise UsageError(value)
            return value
        return kind.subject_cases(subject)
    except interfaces.InterfaceError as exc:
        raise UsageError(str(exc)) from None


def check(sampler, *, budget: str | round_cases.Budget = "standard", seed: int = 0,
          interface: str | Callable | None = None, counterexample: bool = True,
          target: str | None = None, prefetched: dict | None = None, device: str | None = None,
          progress: bool | None = None, vocab: int | None = None, k=None,
          max_tokens: int | None = None, fail_fast: bool = False, cases=None) -> Report:
    """Run the detector battery on ``sampler`` and return its ``Report``.

    ``sampler``: a function with the handout's signature ``(p_fn, q_fn, prefix, k, rng) ->
    list[int]``, a TARGET string (``package.module:function`` or ``path/file.py:function``,
    imported only in the subject's process), or a started ``runner.Runner``. ``interface``:
    "round", "loop" (``generate(target, draft, requests, k, rng)``, judged by the loop battery),
    None / "auto" (by the function's parameter names), or an adapter applied to ``sampler``
    first (``interface(sampler)`` must return a function of the handout's). ``budget``: a name of
    ``round_cases.BUDGETS`` or a ``round_cases.Budget``. ``counterexample``: search for the smallest
    model that shows a distribution finding (a loop subject: the smallest request and model that
    show its law or contract finding, ``interfaces.loop_counterexample.find_loop_counterexample``).
    Never raises for a broken sampler (its breaches are findings); a TARGET that cannot be loaded
    raises ``UsageError``.
    ``prefetched``: the round battery's enumerations computed elsewhere (specverify.units; the Ray
    executor), replayed. ``device``: "cuda" / "cuda:N" runs a kernel (``interface="kernel"``,
    ``kernel(draft_ids, draft_probs, target_probs, uniforms)``) on torch tensors on that device,
    in a spawned subject process (CUDA cannot start in a forked one). ``progress``: a status line
    on stderr (the target, what runs, the time elapsed) while it runs; None (default): only when
    stderr is a terminal, so nothing is added to piped or captured output.

    ``vocab``, ``k`` and ``max_tokens`` aim the check at an engine's configuration
    (``interfaces.aim``: ``vocab`` 2 to 2^20, ``k`` an int, "A..B", "A,B,C" or a list of ints
    from 1 to 16, ``max_tokens`` 0 to 64): every interface adds generated cases at it, besides its
    budget's own (the report's ``coverage.cases`` lists them with ``"origin": "aimed"``).

    ``fail_fast``: the battery stops at its first finding that makes the verdict NOT EXACT (a
    distribution or contract finding, ``battery.BREAKING_KINDS``), as pytest's ``-x`` stops at
    the first failure: the same verdict on a sampler that is not exact, sooner, with the cases
    after that finding not run (the coverage says so); on an exact sampler it changes nothing.

    ``cases``: the cases to run instead of the interface's standard ones, for a subject that can
    run only some shapes (the loop interface: a sequence of ``LoopCase``); a loop subject may
    declare them itself (its ``specverify_cases`` attribute, ``interfaces.loop.CASES_ATTRIBUTE``),
    used when ``cases`` is None. The report's coverage then says the cases came from the subject
    and are not the standard coverage (``"origin": "declared"``), and the counterexample is
    searched among them; aiming (``vocab``, ``k``, ``max_tokens``) is a usage error with them.
    """
    if not isinstance(fail_fast, bool):
        raise TypeError(f"fail_fast: must be True or False, got {fail_fast!r}")
    try:
        aim = interfaces.aim(vocab=vocab, k=k, max_tokens=max_tokens)
    except interfaces.InterfaceError as exc:
        raise ValueError(str(exc)) from None
    # a name, tv=X or a round Budget; an interface's own budget object (a LoopBudget, a
    # KernelBudget) is passed to that interface as it is
    b = resolve_budget(budget) if isinstance(budget, (str, round_cases.Budget)) else budget
    own = None
    if target is None and not isinstance(sampler, (str, runner.Runner)):  # named before adapting
        name = getattr(sampler, "__qualname__", None) or getattr(sampler, "__name__", None)
        module = getattr(sampler, "__module__", None)
        target = f"{module}:{name}" if module and name else name or "<sampler>"
    named = interface if isinstance(interface, str) or interface is None else None
    if (named is not None and named not in INTERFACES) or (named is None and interface is not None
                                                           and not callable(interface)):
        words = f"{', '.join(INTERFACES)} or an adapter (a callable), got {interface!r}"
        raise (ValueError if named is not None else TypeError)(f"interface: must be one of {words}")
    if isinstance(sampler, str):
        if named is None and interface is not None:
            raise TypeError("interface: give a callable sampler, not a TARGET string, to adapt it")
        target = target or sampler
        subject = own = start_target(sampler, "spawn" if device not in (None, "cpu") else None)
    elif isinstance(sampler, runner.Runner):
        subject = sampler
    else:
        if named is None and interface is not None:
            sampler, named = interface(sampler), "round"  # an adapter returns a round sampler
        if not callable(sampler):
            raise TypeError(f"sampler: expected a callable, a TARGET string or a Runner, got "
                            f"{type(sampler).__name__}")
        subject = sampler
    if target is None:
        target = "<sampler>"
    status_line = None
    try:
        status_line = _Progress(target, progress)
        status_line.start()
        if named in (None, "auto"):
            if isinstance(subject, runner.Runner):
                status, named = subject.call(_interface_task, limit=10.0)
                if status == "usage":
                    raise UsageError(named)
            else:
                named = interface_of(subject)
        kind = interfaces.get(named)
        declared = declared_cases(kind, subject, cases)
        coverage = kind.coverage(b) if declared is None else kind.declared_coverage(b, declared, cases is None)
        extra = {} if declared is None else {"cases": declared}
        if declared is not None and aim:
            raise UsageError(f"vocab, k, max_tokens aim the standard cases; the {len(declared)} declared "
                             f"case(s) run as declared")
        if device is not None:
            if kind.NAME != "kernel":
                raise UsageError(f"device: only kernels run on a device; this subject is judged as a {kind.NAME}")
            try:
                extra["device"] = kind.check_device(device)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        status_line.say(f"checking {target}: {kind.NAME} battery, budget {b.name}")
        if aim:
            extra["aim"] = aim
            coverage += f"; aimed at {aim.words()}"
        if fail_fast:
            coverage += "; fail-fast: stops at its first finding that breaks exactness"
        result = kind.run(subject, b, seed, prefetched=prefetched, stop_on_first=fail_fast, **extra)
        if counterexample:
            status_line.say(f"checking {target}: looking for the smallest counterexample")
            more = {} if declared is None else {"cases": declared}
            result.counterexample = kind.counterexample(subject, b, seed, result, aim=aim, **more)
    finally:
        if status_line is not None:
            status_line.stop()
        if own is not None:
            own.close()
    return Report(target=target, seed=seed, budget=b.name, coverage=coverage,
                  false_fail_rate=b.false_fail_rate, result=result)


class _Progress:
    """``check``'s status line on stderr: a spinner, the target and what runs, the time elapsed
    (rich, erased when done). Enabled None: only when stderr is a terminal. It writes through its
    own duplicate of stderr's descriptor, so a subject forked meanwhile never meets a lock it holds."""

    def __init__(self, target: str, enabled: bool | None):
        self.bar = self.stream = None
        if enabled is None:
            try:
                enabled = sys.stderr is not None and sys.stderr.isatty()
            except (AttributeError, ValueError, OSError):  # replaced, closed
                enabled = False
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.table import Column

        try:
            self.stream = os.fdopen(os.dup(sys.stderr.fileno()), "w", encoding=sys.stderr.encoding or "utf-8",
                                    errors="backslashreplace")
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # no descriptor: stderr itself
            self.stream = None
        text = TextColumn("specverify: {task.description}", markup=False,
                          table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"))
        self.bar = Progress(SpinnerColumn(), TimeElapsedColumn(), text, expand=True, transient=True,
                            console=Console(file=self.stream or sys.stderr),
                            redirect_stdout=False, redirect_stderr=False)
        self.task = self.bar.add_task(f"checking {target}", total=None)

    def start(self) -> None:
        if self.bar is not None:
            self.bar.start()

    def say(self, words: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=words)

    def stop(self) -> None:
        if self.bar is not None:
            try:
                self.bar.stop()
            finally:
                self.bar = None
                if self.stream is not None:
                    self.stream.close()


def assert_exact(sampler, *, budget: str | round_cases.Budget = "standard", seed: int = 0,
                 interface: Callable | None = None, allow_inconclusive: bool = False,
                 target: str | None = None, vocab: int | None = None, k=None,
                 max_tokens: int | None = None, progress: bool | None = None) -> Report:
    """``check`` the sampler; AssertionError unless it is exact (and, unless
    ``allow_inconclusive``, conclusively so). The message puts the verdict first, then each
    finding, then the smallest counterexample side by side (tokens: sampler vs target). Returns
    the report when the assertion holds. ``vocab``, ``k``, ``max_tokens``, ``progress``: as
    ``check``'s."""
    __tracebackhide__ = True  # a failing test's traceback ends at its own call, not here
    report = check(sampler, budget=budget, seed=seed, interface=interface, target=target, vocab=vocab, k=k,
                   max_tokens=max_tokens, progress=progress)
    if report.exact is False or (report.exact is None and not allow_inconclusive):
        raise AssertionError(failure_message(report))
    return report


def failure_message(report: Report | dict) -> str:
    """The verdict, every finding and shortfall, and the smallest counterexample side by side
    (of a Report or of its ``to_dict()``)."""
    d = report.to_dict() if isinstance(report, Report) else report
    lines = [f"{d['target']}: {VERDICT_WORDS[d['exact']]} (seed {d['seed']}, budget {d['budget']}, "
             f"false-fail rate {d['false_fail_rate']:g})"]
    lines += finding_lines(d)
    ce = d["counterexample"]
    if ce:
        lines += counterexample_lines(ce)
    return "\n".join(lines)


def finding_lines(report: dict) -> list[str]:
    """One line per finding, then one per reason the verdict is inconclusive."""
    lines = []
    for f in report["findings"]:
        where = f" on {f['case']}" if f["case"] else ""
        lines.append(f"  [{f['kind']}] {f['check']}{where}: {f['message']}")
    return lines + [f"  [inconclusive] {s}" for s in report["shortfalls"]]


def counterexample_lines(ce: dict, rows: int = 16) -> list[str]:
    """The smallest model and its distributions side by side, the largest differences first."""
    tv = ce.get("exact_tv", ce.get("empirical_tv"))
    lines = [f"  smallest counterexample ({ce['method']}): vocab {ce['vocab_size']}, k={ce['k']}, "
             f"window {ce['window']} token(s), prefix {ce['prefix']}, model {ce['model']}, TV {tv:.4g}"]
    if "requests" in ce:  # a loop counterexample: p and q are logit tables; the requests and what they show
        lines += loop_model_lines(ce, "    ")
        lines += [f"    request {j}: prompt {r['prompt']}, params {r['params']}" for j, r in enumerate(ce["requests"])]
        lines.append(f"    shows [{ce['kind']}] {ce['check']}: {ce['message']}")
    else:
        lines += [f"    p = {ce['p']}", f"    q = {ce['q']}"]
    lines.append(f"    {'tokens':>12}  {'sampler':>10}  {'target':>10}  {'difference':>11}")
    dist = sorted(ce["distributions"], key=lambda r: -abs(r["sampler"] - r["target"]))
    for r in dist[:rows]:
        lines.append(f"    {' '.join(map(str, r['tokens'])):>12}  {r['sampler']:>10.6f}  "
                     f"{r['target']:>10.6f}  {r['sampler'] - r['target']:>+11.6f}")
    if len(dist) > rows:
        lines.append(f"    ... {len(dist) - rows} more sequence(s)")
    return lines


def loop_model_lines(ce: dict, indent: str) -> list[str]:
    """A loop counterexample's models, one row per context: the target's and the draft's raw
    logits (a table row is chosen by the position modulo the table's period and the last token),
    then, where given, the processed target distribution p of the request's first output token."""
    lines = []
    if ce.get("method") == "binned":  # an engine-scale batch: the heaviest ids of its rows
        return [f"{indent}processed target p (heaviest ids) = {ce.get('p')}",
                f"{indent}draft q (heaviest ids) = {ce.get('q')}"]
    for words, key in (("target logits", "p"), ("draft logits", "q")):
        table = ce.get(key)
        if not isinstance(table, list) or not table or not isinstance(table[0], list):
            lines.append(f"{indent}{words} = {table}")
            continue
        lines.append(f"{indent}{words} (row: position mod {len(table)}, last token):")
        for j, rows in enumerate(table):
            for last, row in enumerate(rows if isinstance(rows[0], list) else [rows]):
                lines.append(f"{indent}  [{j}, {last}]: " + " ".join(f"{x:.4g}" for x in row))
    if ce.get("processed_p"):
        lines.append(f"{indent}processed p of request {ce.get('request', 0)}'s first token: "
                     + " ".join(f"{x:.4g}" for x in ce["processed_p"]))
    return lines


def coverage_words(coverage) -> str:
    """The budget's plan and how many cases ran, by origin and by how they were judged."""
    if isinstance(coverage, str):
        return coverage
    from collections import Counter

    cases = coverage.get("cases", [])
    if not cases:
        return coverage["summary"]
    words = ", ".join(f"{n} {o}" for o, n in Counter(c["origin"] for c in cases).items())
    judged = ", ".join(f"{n} by {j}" for j, n in Counter(c["judged"] for c in cases).items())
    return f"{coverage['summary']}; ran {len(cases)} cases ({words}; {judged})"


def human(report: dict) -> str:
    """The ``check`` command's human report of ``Report.to_dict()``: the verdict first."""
    eff = {True: "efficient", False: "NOT efficient", None: "efficiency not established"}[report["efficient"]]
    lines = [f"{report['target']}: {VERDICT_WORDS[report['exact']]}, {eff} "
             f"({len(report['findings'])} finding(s), {report['seconds']:.1f} s, budget "
             f"{report['budget']}: {coverage_words(report['coverage'])})"]
    lines += finding_lines(report)
    for c in report.get("controls", []):
        lines.append(f"  control {c['target']} ({c['claim']}): {VERDICT_WORDS[c['exact']]}"
                     f"{'' if c['flagged'] else ' (must be NOT EXACT)'}, {len(c['findings'])} finding(s)")
    ce = report["counterexample"]
    if ce:
        tv = ce.get("exact_tv", ce.get("empirical_tv"))
        if "requests" in ce:
            lines.append(f"  smallest model ({ce['method']}): vocab {ce['vocab_size']}, k={ce['k']}, "
                         f"window {ce['window']}, {ce['model']}, TV {tv:.4g}")
            lines += loop_model_lines(ce, "    ")
            lines.append(f"    requests {ce['requests']}; shows [{ce['kind']}] {ce['check']}: {ce['message']}")
        else:
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


# --------------------------------------------------------------------------- loading a TARGET


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


def start_target(target: str, start_method: str | None = None) -> runner.Runner:
    """The target loaded in its own process (forked, or ``start_method="spawn"``); UsageError
    when it cannot be loaded."""
    split_target(target)
    try:
        return runner.Runner(partial(load_target, target), start_method=start_method).start()
    except runner.SubjectFailed as exc:
        raise UsageError(f"TARGET {target!r}: loading it failed: {exc}") from None


# --------------------------------------------------------------------------- campaign arithmetic


def resolve_budget(budget: str | round_cases.Budget) -> round_cases.Budget:
    """The round section of a name of ``budgets.NAMES``, of ``tv=X`` (a campaign that sees TV X)
    or a round Budget as it is (``budgets.section``; an unknown name is its InterfaceError, a
    ValueError naming ``budget``)."""
    return round_cases.get_budget(budget)


def campaign_table(tv: float = 1e-3, budget: str = "thorough", subjects: int | None = None,
                   runs_per_second: float | None = None, cores: int = 2) -> str:
    """The README's campaign line: N subjects x M cases at TV ``tv`` = R runs, and the hours they
    take on one ``cores``-core machine and on W one-core workers, at ``runs_per_second`` per core
    (measured on the reference sampler when None). Subjects default to the mutant report's."""
    if subjects is None:
        from .mutants import ALL

        subjects = len(ALL) + 2  # the catalogue, the baseline and the forced fail
    c = campaign_runs(tv, budget)
    rate = runs_per_second or measure_runs_per_second()
    total = subjects * c["runs"]
    core_hours = total / rate / 3600
    return (f"{subjects} subjects x {c['cases']} cases at TV {tv:g} = {total:.3g} runs "
            f"({c['runs']:.3g} per subject: {c['looks']} looks, the last at {c['n_max']:,} runs per "
            f"case; per-check false-fail rate {c['per_check_false_fail_rate']:.2g}). At {rate:,.0f} "
            f"runs per core-second: {duration(core_hours / cores)} on one {cores}-core machine, "
            f"about {duration(core_hours)} / W on W one-core workers (W up to {subjects}: one task "
            f"per subject; {duration(core_hours / subjects)} per subject)")


def duration(hours: float) -> str:
    """A time in the unit that reads best: "1,290 hours", "2.5 hours", "12 minutes", "40 s"
    (never "0 hours")."""
    if hours >= 10:
        return f"{hours:,.0f} hours"
    if hours >= 1:
        return f"{hours:.1f} hours"
    if hours * 60 >= 1:
        return f"{hours * 60:.0f} minutes"
    return f"{hours * 3600:.2g} s"


def measure_runs_per_second(seconds: float = 2.0) -> float:
    """Runs of the reference sampler per CPU-second (process time, so a loaded machine does not
    lower it), on the thorough budget's cases, through the battery's guard, in this process."""
    import time

    import numpy as np

    cases = round_cases.battery("thorough")
    rng = np.random.default_rng(0)
    n, t0 = 0, time.process_time()
    while time.process_time() - t0 < seconds:
        for case in cases:
            round_tasks.sample_first_tokens(speculative_step, case, 20, rng)
            n += 20
    return n / (time.process_time() - t0)


__all__ = ["Report", "assert_exact", "campaign_budget", "campaign_runs", "campaign_table", "check", "failure_message"]
