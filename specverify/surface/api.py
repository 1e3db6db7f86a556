"""The Python API: ``specverify.check(sampler)`` and ``specverify.assert_exact(sampler)``.

    import specverify

    report = specverify.check(my_step, budget="quick", seed=0)
    report.exact          # True / False / None (inconclusive)
    report.counterexample # the smallest model that shows a bias, or None
    specverify.assert_exact(my_step)  # AssertionError with the counterexample side by side

One way in: ``check`` turns its keywords into one ``request.CheckRequest`` (checked once, by the
same checkers as the ``check`` command line's options) and ``run`` carries a request out; the
command line's targets (``check_run``) and the pytest plugin go through ``run`` too. ``run``
takes the subject's interface from the registry (``interfaces.get``, an
``interfaces.protocol.Interface``: this module names no interface), which resolves the budget
once, runs its battery and finds the counterexample. ``Report`` holds the verdict; its exit code
is ``specverify.errors.EXIT_CODES``'. Errors raised here are ``specverify.errors``' only.

It imports only what the battery needs (NumPy, SciPy through specverify.laws.stats); the sampler
runs in its own process (specverify.battery.runner). Re-exported here: how a report reads
(``human``, ``failure_message`` and their parts: ``specverify.surface.report_text``), loading a
TARGET (``load_target``, ``start_target``: ``specverify.battery.targets``) and the campaign
arithmetic (``campaign_runs``, ``campaign_table``, ``duration``, ``measure_runs_per_second``:
``specverify.interfaces.campaign_cost``; README, "Scale out").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from .. import interfaces
from ..battery import runner
from ..battery.core import BatteryResult
from ..battery.environment import environment_error
from ..battery.subject_calls import listening
from ..battery.targets import load_target, split_target, start_target  # noqa: F401 - re-exported
from ..errors import ArgumentTypeError, EnvironmentProblem, InterfaceError, UsageError
from ..interfaces.campaign_cost import (  # noqa: F401 - re-exported
    campaign_budget,
    campaign_runs,
    campaign_table,
    duration,
    measure_runs_per_second,
)
from ..laws.precision import stated
from .progress import StatusLine
from .report_text import (
    VERDICT_WORDS,
    counterexample_lines,
    coverage_words,
    failure_message,
    finding_lines,
    human,
    loop_model_lines,
)
from .request import INTERFACE_CHOICES, CheckRequest, check_flag
from .verdict import Report

if TYPE_CHECKING:
    from ..interfaces.protocol import Interface


# --------------------------------------------------------------------------- the way in


def check(
    sampler: str | runner.Runner | Callable[..., Any],
    *,
    budget: Any = "standard",
    seed: int = 0,
    interface: str | Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    counterexample: bool = True,
    target: str | None = None,
    device: str | None = None,
    progress: bool | str | None = None,
    vocab: int | None = None,
    k: int | str | list[int] | tuple[int, ...] | None = None,
    max_tokens: int | None = None,
    fail_fast: bool = False,
    cases: Iterable[Any] | None = None,
    time_limit: float | None = None,
    workers: int = 1,
    overrides: Mapping[str, Any] | None = None,
    precision: str | None = None,
    reference: str | runner.Runner | Callable[..., Any] | None = None,
) -> Report:
    """Run the detector battery on ``sampler`` and return its ``Report``: the keywords become one
    ``request.CheckRequest`` (each checked by ``request.FIELD_CHECKS``, as the ``check`` command
    line's options are), which ``run`` carries out.

    ``sampler``: a function with the handout's signature ``(p_fn, q_fn, prefix, k, rng) ->
    list[int]``, a TARGET string (``package.module:function`` or ``path/file.py:function``,
    imported only in the subject's process), or a started ``runner.Runner``. ``interface``:
    "round", "loop" (``generate(target, draft, requests, k, rng)``, judged by the loop battery),
    "kernel", None / "auto" (by the function's parameter names, ``interfaces.detect``), or an
    adapter applied to ``sampler`` first (``interface(sampler)`` must return a function of the
    handout's). ``budget``: a name of ``battery.budgets.NAMES``, ``tv=X``, or a budget object of
    one interface (a round ``Budget``, a ``LoopBudget``, a ``KernelBudget``); the subject's
    interface resolves it (``Interface.budget``) with ``overrides`` (fields of its budget to
    replace, e.g. ``{"n_max": 8000}``, each checked against that budget). ``counterexample``:
    search for the smallest model that shows a finding (the interface's ``counterexample``).

    Never raises for a broken sampler (its breaches are findings). Raises only errors of
    ``specverify.errors``: a bad argument is an ``ArgumentError`` or ``ArgumentTypeError``, an
    unknown interface or budget name, a signature that does not fit the interface, a bad aim or
    bad declared cases an ``InterfaceError``, a TARGET that cannot be loaded a ``TargetError``:
    every one a ``UsageError``. A TARGET whose import needs a package this environment lacks,
    or a device this machine lacks, raises ``EnvironmentProblem``; a subject that fails for want
    of something this machine lacks (CUDA) is a report whose ``environment`` says so, ``exact``
    None. ``device``: "cuda" / "cuda:N" runs a kernel's tensors on that device, in a spawned
    subject process (CUDA cannot start in a forked one). ``progress``: a status line on stderr
    (the target, what runs, the time elapsed); None (default): only when stderr is a terminal;
    "lines": a plain line on stderr every 10 s (what ``specverify check`` prints when stderr is
    not a terminal).

    ``vocab``, ``k`` and ``max_tokens`` aim the check at an engine's configuration
    (``interfaces.aim``: ``vocab`` 2 to 2^20, ``k`` an int, "A..B", "A,B,C" or a list of ints
    from 1 to 16, ``max_tokens`` 0 to 64): every interface adds generated cases at it, besides its
    budget's own (the report's ``coverage.cases`` lists them with ``"origin": "aimed"``).

    ``fail_fast``: stop at the first finding that makes the verdict NOT EXACT (as pytest's
    ``-x``): the same verdict on a sampler that is not exact, sooner, the cases after it not run
    (the coverage says so); on an exact sampler it changes nothing. ``cases``: the cases to run
    instead of the interface's standard ones (the loop interface: a sequence of ``LoopCase``;
    a loop subject may declare them itself, its ``specverify_cases`` attribute); the coverage
    says so (``"origin": "declared"``), the counterexample is searched among them, and aiming
    is a usage error with them. ``time_limit``: seconds after which the battery stops (None: no
    limit); the budget, never the clock, decides every run count, and a battery the limit stops
    says after how many of its planned runs and is INCONCLUSIVE unless a finding came first.
    ``workers``: processes of a round subject that share its enumerations and sampled runs (1
    to 256; the report is the same with any number); the loop and kernel batteries run in one.

    ``precision``: the working precision to judge exact laws at (float64, float32, float16,
    bfloat16; ``specverify.laws.rounding``); None (default): as observed while the enumerator
    follows the subject. An exact TV within the rounding of that precision (the token-wise rule
    carried out in it, on the same case) is exact at that rounding, and the report says so.

    ``reference``: the engine's own target-only path (a function of the subject's interface, or a
    TARGET string loaded like the subject, in a process of its own; it may ignore the draft and k):
    every law is judged against it instead of this project's target-only definition, exactly where
    the enumerator follows both sides, else by a two-sample chi-square (loop and round interfaces;
    docs/LOOP.md, "Your own reference"). Where it differs from the project's definition, the
    report's ``ran`` says so (information, not a finding); a reference that raises, hangs or
    returns junk is a finding on the reference and the verdict INCONCLUSIVE, never NOT EXACT.
    """
    name = target if target is not None else name_of(sampler)  # named before adapting
    sampler, interface = adapted(sampler, interface)
    request = CheckRequest.of(
        budget=budget,
        seed=seed,
        interface=interface,
        overrides=overrides,
        aim=interfaces.aim(vocab=vocab, k=k, max_tokens=max_tokens),
        cases=cases,
        device=device,
        counterexample=counterexample,
        fail_fast=fail_fast,
        time_limit=time_limit,
        workers=workers,
        progress=progress,
        target=name,
        precision=precision,
        reference=reference,
    )
    return run(sampler, request)


def name_of(sampler: object) -> str:
    """The name a report gives ``sampler``: a TARGET string as it is, ``module:qualname`` of a
    function, ``<sampler>`` when it has none (a started Runner)."""
    if isinstance(sampler, str):
        return sampler
    name = getattr(sampler, "__qualname__", None) or getattr(sampler, "__name__", None)
    module = getattr(sampler, "__module__", None)
    if isinstance(sampler, runner.Runner) or not isinstance(name, str):
        return "<sampler>"
    return f"{module}:{name}" if isinstance(module, str) else name


def adapted(sampler: object, interface: object) -> tuple[Any, str | None]:
    """(the sampler to check, the interface to check it as): ``sampler`` and ``interface`` as
    given, or with an adapter (a callable ``interface``) applied to a callable sampler and the
    handout's interface (``interfaces.HANDOUT``). ArgumentTypeError when the sampler is none of
    a callable, a TARGET string or a Runner, or an adapter is given a TARGET string or a Runner."""
    if not (isinstance(sampler, (str, runner.Runner)) or callable(sampler)):
        raise ArgumentTypeError(
            f"sampler: expected a callable, a TARGET string or a Runner, got {type(sampler).__name__}"
        )
    if interface is None or isinstance(interface, str):
        return sampler, interface
    if not callable(interface):
        raise ArgumentTypeError(
            f"interface: must be one of {', '.join(INTERFACE_CHOICES)} or an adapter (a callable), got {interface!r}"
        )
    if isinstance(sampler, (str, runner.Runner)):
        raise ArgumentTypeError("interface: give a callable sampler, not a TARGET string or a Runner, to adapt it")
    return interface(sampler), interfaces.HANDOUT  # an adapter returns a function of the handout's


def run(sampler: str | runner.Runner | Callable[..., Any], request: CheckRequest) -> Report:
    """Carry out ``request`` on ``sampler``: the one way in, for ``check``, the ``check`` command
    line's targets (``check_run``) and the pytest plugin. The subject's interface (the request's,
    or told from its parameter names) resolves the budget once, runs its battery and, when asked,
    looks for the smallest counterexample."""
    target = request.target or name_of(sampler)
    with ExitStack() as stack:
        status_line = stack.enter_context(showing_progress(target, request.progress))
        subject = stack.enter_context(started(sampler, request.device, status_line, target))
        kind = interface_for(subject, request.interface, target)
        reference = stack.enter_context(started_reference(kind, request, status_line))
        budget = kind.budget(request.budget, request.overrides)
        declared = declared_cases(kind, subject, request)
        coverage = coverage_summary(kind, budget, declared, request)
        result = battery_result(kind, subject, budget, declared, request, f"checking {target}", status_line, reference)
    return Report(
        target=target,
        seed=request.seed,
        budget=budget.name,
        coverage=coverage,
        false_fail_rate=budget.false_fail_rate,
        result=result,
    )


@contextmanager
def showing_progress(target: str, progress: bool | str | None) -> Iterator[StatusLine]:
    """The status line of a check of ``target`` (``progress``: ``check``'s), started and stopped."""
    status_line = StatusLine(target, progress)
    status_line.start()
    try:
        yield status_line
    finally:
        status_line.stop()


@contextmanager
def started(
    sampler: str | runner.Runner | Callable[..., Any], device: str | None, status_line: StatusLine, target: str
) -> Iterator[runner.Runner | Callable[..., Any]]:
    """The subject: a TARGET string loaded in a process of its own (spawned for a device other
    than the CPU: CUDA cannot start in a forked one), closed afterwards; a callable or a Runner
    as it is."""
    if not isinstance(sampler, str):
        yield sampler
        return
    status_line.say(f"loading {target}")
    own = start_target(sampler, "spawn" if device not in (None, "cpu") else None)
    try:
        yield own
    finally:
        own.close()


REFERENCE_INTERFACES = ("loop", "round")
"""The interfaces that judge a subject against a reference of its own (``check(reference=...)``)."""


@contextmanager
def started_reference(
    kind: Interface, request: CheckRequest, status_line: StatusLine
) -> Iterator[runner.Runner | Callable[..., Any] | None]:
    """The request's reference, loaded as the subject is (a TARGET in a process of its own,
    closed afterwards; a callable or a Runner as it is), its signature checked against the
    subject's interface; None without one. InterfaceError naming ``reference`` for an interface
    that takes none or a signature that does not fit."""
    if request.reference is None:
        yield None
        return
    if kind.NAME not in REFERENCE_INTERFACES:
        raise InterfaceError(
            f"reference: the {kind.NAME} interface takes no reference (the {' and '.join(REFERENCE_INTERFACES)} do)"
        )
    name = request.reference if isinstance(request.reference, str) else name_of(request.reference)
    with started(request.reference, request.device, status_line, f"the reference {name}") as reference:
        mismatch = in_subject(reference, signature_task, kind.NAME)
        if mismatch:
            raise InterfaceError(f"reference {name!r}: {mismatch}")
        yield reference


def answered(subject: Callable[..., Any], task: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """In the subject's process: ("ok", ``task(subject, *args)``) or ("usage", the usage error's words)."""
    try:
        return "ok", task(subject, *args)
    except UsageError as exc:
        return "usage", str(exc)


def in_subject(subject: runner.Runner | Callable[..., Any], task: Callable[..., Any], *args: Any) -> Any:
    """``task(subject, *args)`` where the subject lives (its own process for a Runner: what the
    subject defines is read there); a usage error there is an InterfaceError here."""
    if not isinstance(subject, runner.Runner):
        return task(subject, *args)
    status, value = subject.call(answered, task, *args, limit=10.0)
    if status == "usage":
        raise InterfaceError(value)
    return value


def detected_task(subject: Callable[..., Any]) -> str:
    return interfaces.detect(subject)


def signature_task(subject: Callable[..., Any], name: str) -> str | None:
    return interfaces.signature_problem(subject, name)


def subject_cases_task(subject: Callable[..., Any], name: str) -> tuple[Any, ...] | None:
    return interfaces.get(name).subject_cases(subject)


def interface_for(subject: runner.Runner | Callable[..., Any], name: str, target: str) -> Interface:
    """The interface the subject is checked as (``name``, or for "auto" told from its parameter
    names); InterfaceError when it cannot be told or the subject cannot be called as that
    interface calls it (with the signature expected)."""
    if name == "auto":
        name = in_subject(subject, detected_task)
    kind = interfaces.get(name)
    mismatch = in_subject(subject, signature_task, kind.NAME)
    if mismatch:
        raise InterfaceError(f"TARGET {target!r}: {mismatch}")
    return kind


def declared_cases(
    kind: Interface, subject: runner.Runner | Callable[..., Any], request: CheckRequest
) -> tuple[Any, ...] | None:
    """The cases the check runs instead of the interface's standard ones: the request's (the
    caller's) or those the subject declares (read where the subject lives); None when neither.
    InterfaceError when the interface takes no declared cases, they are not cases, or the request
    also aims the standard cases."""
    if request.cases is not None:
        declared: tuple[Any, ...] | None = kind.declared_cases(request.cases)
    else:
        declared = in_subject(subject, subject_cases_task, kind.NAME)
    if declared is not None and request.aim:
        raise InterfaceError(
            f"vocab, k, max_tokens aim the standard cases; the {len(declared)} declared case(s) run as declared"
        )
    return declared


def coverage_summary(kind: Interface, budget: Any, declared: tuple[Any, ...] | None, request: CheckRequest) -> str:
    """The report's ``coverage`` summary: what the interface's budget (or the declared cases)
    covers, the aim, and fail-fast."""
    if declared is None:
        words = kind.coverage(budget)
    else:
        words = kind.declared_coverage(budget, declared, request.cases is None)
    if request.aim:
        words += f"; aimed at {request.aim.words()}"
    if request.fail_fast:
        words += "; fail-fast: stops at its first finding that breaks exactness"
    if request.reference is not None:
        name = request.reference if isinstance(request.reference, str) else name_of(request.reference)
        words += f"; judged against the reference {name} (its own target-only path), not this project's definition"
    return words


def battery_result(
    kind: Interface,
    subject: runner.Runner | Callable[..., Any],
    budget: Any,
    declared: tuple[Any, ...] | None,
    request: CheckRequest,
    doing: str,
    status_line: StatusLine,
    reference: runner.Runner | Callable[..., Any] | None = None,
) -> BatteryResult:
    """The interface's battery run on the subject at the resolved ``budget`` (on the request's
    device, which the interface checks), then, when asked and the subject could run, the
    smallest counterexample; both against ``reference`` when given (``started_reference``)."""
    against: dict[str, Any] = {} if reference is None else {"reference": reference}
    doing = f"{doing}: {kind.NAME} battery, budget {budget.name}"
    status_line.say(doing)
    deadline = None if request.time_limit is None else time.monotonic() + request.time_limit
    with (
        listening(lambda words: status_line.say(f"{doing}: {words}", getattr(words, "seconds", False))),
        stated(request.precision),
    ):
        result = kind.run(
            subject,
            budget,
            request.seed,
            deadline=deadline,
            stop_on_first=request.fail_fast,
            aim=request.aim or None,
            cases=declared,
            device=request.device,
            units=request.units,
            workers=request.workers,
            **against,
        )
    if request.counterexample and not result.environment:
        status_line.say(f"{doing}: looking for the smallest counterexample")
        with stated(request.precision):  # rounding alone is no counterexample (laws.rounding)
            result.counterexample = kind.counterexample(
                subject, budget, request.seed, result, aim=request.aim or None, cases=declared, **against
            )
    return result


def assert_exact(
    sampler: str | runner.Runner | Callable[..., Any],
    *,
    budget: Any = "standard",
    seed: int = 0,
    interface: str | Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    allow_inconclusive: bool = False,
    target: str | None = None,
    vocab: int | None = None,
    k: int | str | list[int] | tuple[int, ...] | None = None,
    max_tokens: int | None = None,
    progress: bool | str | None = None,
    precision: str | None = None,
    reference: str | runner.Runner | Callable[..., Any] | None = None,
) -> Report:
    """``check`` the sampler; AssertionError unless it is exact (and, unless
    ``allow_inconclusive``, conclusively so). A subject that cannot run here raises
    ``EnvironmentProblem`` instead (no CUDA, a missing package: not evidence about exactness),
    and a usage mistake ``UsageError``. The message puts the verdict first, then each
    finding, then the smallest counterexample side by side (tokens: sampler vs target). Returns
    the report when the assertion holds. ``vocab``, ``k``, ``max_tokens``, ``progress``,
    ``precision``, ``reference``: as ``check``'s."""
    __tracebackhide__ = True  # a failing test's traceback ends at its own call, not here
    allow_inconclusive = check_flag("allow_inconclusive")(allow_inconclusive)
    report = check(
        sampler,
        budget=budget,
        seed=seed,
        interface=interface,
        target=target,
        vocab=vocab,
        k=k,
        max_tokens=max_tokens,
        progress=progress,
        precision=precision,
        reference=reference,
    )
    if report.environment:
        raise environment_error(f"{report.target}: cannot run here: {report.environment}")
    if report.exact is False or (report.exact is None and not allow_inconclusive):
        raise AssertionError(failure_message(report))
    return report


__all__ = [
    "EnvironmentProblem",
    "REFERENCE_INTERFACES",
    "VERDICT_WORDS",
    "Report",
    "UsageError",
    "assert_exact",
    "adapted",
    "campaign_budget",
    "campaign_runs",
    "campaign_table",
    "check",
    "counterexample_lines",
    "coverage_words",
    "duration",
    "failure_message",
    "finding_lines",
    "human",
    "load_target",
    "loop_model_lines",
    "measure_runs_per_second",
    "name_of",
    "run",
    "split_target",
    "start_target",
    "started_reference",
]
