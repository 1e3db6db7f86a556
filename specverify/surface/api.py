"""The Python API: ``specverify.check(sampler)`` and ``specverify.assert_exact(sampler)``.

This is what the ``check`` command line (specverify.surface.check_run) and the pytest plugin
(specverify.surface.pytest_plugin) are thin layers over. It imports only what the battery needs (NumPy,
SciPy through specverify.laws.stats); the sampler runs in its own process (specverify.battery.runner).

    import specverify

    report = specverify.check(my_step, budget="quick", seed=0)
    report.exact          # True / False / None (inconclusive)
    report.counterexample # the smallest model that shows a bias, or None
    specverify.assert_exact(my_step)  # AssertionError with the counterexample side by side

``campaign_runs(tv, budget)`` (``interfaces.round_cases``) is the arithmetic of a thorough campaign: how many sampler runs a
battery needs to see a TV of ``tv`` on every case (README, "Scale out").

This module is the dispatch: ``check`` picks the subject's interface and runs its battery,
``Report`` holds the verdict. How a report reads (``human``, ``failure_message`` and their parts)
is ``specverify.surface.report_text``; loading a TARGET (``UsageError``, ``load_target``,
``start_target``) is ``specverify.battery.targets``; the campaign arithmetic (``resolve_budget``,
``campaign_table``, ``duration``, ``measure_runs_per_second``) is ``specverify.surface.campaign_cost``. Every
one of those names is re-exported here (``api.human``, ``api.UsageError``, ...).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from .. import interfaces
from ..battery import runner
from ..battery.core import BatteryResult, Finding
from ..battery.environment import environment_error
from ..battery.subject_calls import listening
from ..battery.targets import load_target, split_target, start_target  # noqa: F401 - re-exported
from ..common.command_line import EXIT_ENVIRONMENT
from ..common.files import json_default
from ..errors import EnvironmentProblem, UsageError
from ..interfaces.round import cases as round_cases
from ..interfaces.round.cases import campaign_budget, campaign_runs  # noqa: F401 - re-exported
from .campaign_cost import campaign_table, duration, measure_runs_per_second, resolve_budget
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

if TYPE_CHECKING:
    from ..interfaces.loop.cases import LoopCase

EXIT_CODES = {True: 0, False: 1, None: 3}
"""The exit code of each verdict (``exact``); an environment error is ``EXIT_ENVIRONMENT``."""


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
    controls: list[dict[str, Any]] = field(default_factory=list)
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
    def counterexample(self) -> dict[str, Any] | None:
        return self.result.counterexample

    @property
    def environment(self) -> str | None:
        """What this environment lacks to run the subject (no CUDA, a missing package), with
        what to do; None when the subject ran. Not a verdict: ``exact`` is then None."""
        return self.result.environment

    @property
    def exit_code(self) -> int:
        """The ``check`` command's exit code: 0 exact, 1 not exact, 3 inconclusive, 4 an
        environment error (``environment``)."""
        return EXIT_ENVIRONMENT if self.environment else EXIT_CODES[self.exact]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``check --json`` prints. ``coverage``: ``summary`` (the budget's plan in
        words), ``reach`` (per dimension, the largest value the cases run reached: what "exact"
        covers) and ``cases`` (every case run, ``battery.coverage_entry``: origin fixed /
        generated / sweep / edge / aimed, its shape, how it was judged, its runs and the TV they
        see)."""
        out = self.result.to_dict()
        cases, reach = out.pop("cases", []), out.pop("reach", {})
        controls = {"controls": self.controls} if self.controls else {}
        return {
            "target": self.target,
            "seed": self.seed,
            "coverage": {"summary": self.coverage, "reach": reach, "cases": cases},
            "false_fail_rate": self.false_fail_rate,
            **out,
            **controls,
        }

    def add_control(
        self, target: str, claim: str, exact: bool | None, findings: list[dict[str, Any]], seconds: float = 0.0
    ) -> None:
        """A control known to be biased (``claim``: how), judged on this report's cases at its
        budget: recorded in ``controls`` (JSON ``"controls"``, only when there is one) and in
        ``ran``; unless it came out NOT EXACT (``exact`` False) this report is inconclusive (a
        shortfall: a run that cannot see a known bias does not show its subject exact)."""
        flagged = exact is False
        self.controls.append(
            {
                "target": target,
                "claim": claim,
                "exact": exact,
                "flagged": flagged,
                "findings": findings,
                "seconds": round(seconds, 2),
            }
        )
        self.result.seconds += seconds
        self.result.ran.append(
            f"control {target} ({claim}): {VERDICT_WORDS[exact]}, {len(findings)} finding(s)"
            + ("" if flagged else ": NOT flagged")
        )
        if not flagged:
            self.result.shortfalls.append(
                f"the control {target} ({claim}) was not flagged at this budget: "
                f"the run lacks the power to see a known bias"
            )

    def require_flagged(self, control: Report, claim: str) -> None:
        """``add_control`` of a control's own ``check`` report (on the same cases, same budget)."""
        self.add_control(
            control.target, claim, control.exact, [f.to_dict() for f in control.findings], control.result.seconds
        )

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), default=json_default, **kwargs)

    def text(self, verbose: bool = False) -> str:
        """The human report ``check`` prints: the verdict first, the counterexample last;
        ``verbose``: the whole listing (``check --verbose``)."""
        return human(self.to_dict(), verbose=verbose)

    def __str__(self) -> str:
        return self.text()


INTERFACES = ("auto", *interfaces.NAMES)


def interface_of(fn: Callable[..., Any]) -> str:
    """The interface ``fn`` is written for (``interfaces.detect``): "round" for the handout's
    ``(p_fn, q_fn, prefix, k, rng)``, "loop" for ``generate(target, draft, requests, k, rng)``,
    "kernel" for ``kernel(draft_ids, draft_probs, target_probs, uniforms)``; UsageError naming
    ``--interface`` when the parameter names do not tell."""
    try:
        return interfaces.detect(fn)
    except interfaces.InterfaceError as exc:
        raise UsageError(str(exc)) from None


def _interface_task(subject: Callable[..., Any]) -> tuple[str, str]:
    """In the subject's process: ("ok", its interface) or ("usage", why it cannot be told)."""
    try:
        return "ok", interfaces.detect(subject)
    except interfaces.InterfaceError as exc:
        return "usage", str(exc)


def _signature_task(subject: Callable[..., Any], name: str) -> str | None:
    """In the subject's process: why it cannot be called as interface ``name`` calls it, or None."""
    return interfaces.signature_problem(subject, name)


def _declared_task(subject: Callable[..., Any], name: str) -> tuple[str, object]:
    """In the subject's process: ("ok", the cases it declares or None) or ("usage", why they are
    not cases), by interface ``name``'s ``subject_cases``."""
    try:
        return "ok", interfaces.get(name).subject_cases(subject)
    except interfaces.InterfaceError as exc:
        return "usage", str(exc)


def declared_cases(
    kind: ModuleType, subject: runner.Runner | Callable[..., Any], cases: Iterable[LoopCase] | None
) -> tuple[LoopCase, ...] | None:
    """The cases ``check`` runs instead of the interface's standard ones: ``cases`` (the caller's)
    or those the subject declares (``kind.subject_cases``, read where the subject lives); None
    when neither. UsageError when the interface takes no declared cases or they are not cases."""
    try:
        if cases is not None:
            if not hasattr(kind, "declared_cases"):
                raise UsageError(f"cases: the {kind.NAME} interface runs its own cases only")
            return cast("tuple[LoopCase, ...]", kind.declared_cases(cases))
        if not hasattr(kind, "subject_cases"):
            return None
        if isinstance(subject, runner.Runner):
            status, value = subject.call(_declared_task, kind.NAME, limit=10.0)
            if status == "usage":
                raise UsageError(value)
            return cast("tuple[LoopCase, ...] | None", value)
        return cast("tuple[LoopCase, ...] | None", kind.subject_cases(subject))
    except interfaces.InterfaceError as exc:
        raise UsageError(str(exc)) from None


def check(
    sampler: str | runner.Runner | Callable[..., Any],
    *,
    budget: str | round_cases.Budget = "standard",
    seed: int = 0,
    interface: str | Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    counterexample: bool = True,
    target: str | None = None,
    prefetched: dict[tuple[Any, ...], dict[str, Any]] | None = None,
    device: str | None = None,
    progress: bool | str | None = None,
    vocab: int | None = None,
    k: int | str | list[int] | tuple[int, ...] | None = None,
    max_tokens: int | None = None,
    fail_fast: bool = False,
    cases: Iterable[LoopCase] | None = None,
    time_limit: float | None = None,
    workers: int = 1,
) -> Report:
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
    raises ``UsageError``, one whose import needs a package this environment lacks
    ``EnvironmentProblem``, and a sampler whose signature does not fit its interface
    ``UsageError`` (with the signature expected). A subject that fails for want of something
    this machine lacks (CUDA) is a report whose ``environment`` says so, ``exact`` None.
    ``prefetched``: the round battery's enumerations computed elsewhere (specverify.interfaces.round.units; the Ray
    executor), replayed. ``device``: "cuda" / "cuda:N" runs a kernel (``interface="kernel"``,
    ``kernel(draft_ids, draft_probs, target_probs, uniforms)``) on torch tensors on that device,
    in a spawned subject process (CUDA cannot start in a forked one). ``progress``: a status line
    on stderr (the target, what runs, the time elapsed) while it runs; None (default): only when
    stderr is a terminal, so nothing is added to piped or captured output; "lines": a plain line
    on stderr every 10 s, the stage and the time elapsed (what ``specverify check`` prints when
    stderr is not a terminal).

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

    ``time_limit``: seconds after which the battery stops (None, the default: no limit). The
    budget, never the clock, decides every case's run count, so a check's verdict and findings
    are the same on any machine at any load; a battery the limit stops reports so ("stopped by
    the time limit after N of M runs") and is INCONCLUSIVE unless a finding came first.

    ``workers``: how many processes of a round subject share its enumerations and sampled runs
    (1 to 256; the runs come in blocks, each from its own stream, and an enumeration draws
    nothing, so the report is the same with 1 or N); the loop and kernel batteries run in one
    process.
    """
    if not isinstance(fail_fast, bool):
        raise TypeError(f"fail_fast: must be True or False, got {fail_fast!r}")
    if time_limit is not None and (
        isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not 0 < time_limit < float("inf")
    ):
        raise ValueError(f"time_limit: must be a number of seconds > 0 or None, got {time_limit!r}")
    from ..common.validation import check_workers

    workers = check_workers(workers)
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
    if (named is not None and named not in INTERFACES) or (
        named is None and interface is not None and not callable(interface)
    ):
        words = f"{', '.join(INTERFACES)} or an adapter (a callable), got {interface!r}"
        raise (ValueError if named is not None else TypeError)(f"interface: must be one of {words}")
    subject: runner.Runner | Callable[..., Any]
    if isinstance(sampler, str):
        if named is None and interface is not None:
            raise TypeError("interface: give a callable sampler, not a TARGET string, to adapt it")
        target = target or sampler
    elif not isinstance(sampler, runner.Runner):
        if interface is not None and not isinstance(interface, str):  # an adapter (named is None)
            sampler, named = interface(sampler), "round"  # an adapter returns a round sampler
        if not callable(sampler):
            raise TypeError(f"sampler: expected a callable, a TARGET string or a Runner, got {type(sampler).__name__}")
    if target is None:
        target = "<sampler>"
    status_line = None
    try:
        status_line = StatusLine(target, progress)
        status_line.start()
        if isinstance(sampler, str):
            status_line.say(f"loading {target}")
            subject = own = start_target(sampler, "spawn" if device not in (None, "cpu") else None)
        else:
            subject = sampler
        if named in (None, "auto"):
            if isinstance(subject, runner.Runner):
                status, named = subject.call(_interface_task, limit=10.0)
                if status == "usage":
                    raise UsageError(named)
            else:
                named = interface_of(subject)
        kind = interfaces.get(named)
        mismatch = (
            subject.call(_signature_task, kind.NAME, limit=10.0)
            if isinstance(subject, runner.Runner)
            else interfaces.signature_problem(subject, kind.NAME)
        )
        if mismatch:
            raise UsageError(f"TARGET {target!r}: {mismatch}")
        declared = declared_cases(kind, subject, cases)
        coverage = kind.coverage(b) if declared is None else kind.declared_coverage(b, declared, cases is None)
        extra: dict[str, Any] = {} if declared is None else {"cases": declared}
        if declared is not None and aim:
            raise UsageError(
                f"vocab, k, max_tokens aim the standard cases; the {len(declared)} declared case(s) run as declared"
            )
        if device is not None:
            if kind.NAME != "kernel":
                raise UsageError(f"device: only kernels run on a device; this subject is judged as a {kind.NAME}")
            try:
                extra["device"] = kind.check_device(device)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        doing = f"checking {target}: {kind.NAME} battery, budget {b.name}"
        status_line.say(doing)
        if aim:
            extra["aim"] = aim
            coverage += f"; aimed at {aim.words()}"
        if fail_fast:
            coverage += "; fail-fast: stops at its first finding that breaks exactness"
        if time_limit is not None:
            extra["deadline"] = time.monotonic() + time_limit
        if workers > 1 and kind.NAME == "round":
            extra["workers"] = workers
        with listening(lambda words: status_line.say(f"{doing}: {words}")):
            result = kind.run(subject, b, seed, prefetched=prefetched, stop_on_first=fail_fast, **extra)
        if counterexample and not result.environment:
            status_line.say(f"checking {target}: looking for the smallest counterexample")
            more = {} if declared is None else {"cases": declared}
            result.counterexample = kind.counterexample(subject, b, seed, result, aim=aim, **more)
    finally:
        if status_line is not None:
            status_line.stop()
        if own is not None:
            own.close()
    return Report(
        target=target, seed=seed, budget=b.name, coverage=coverage, false_fail_rate=b.false_fail_rate, result=result
    )


def assert_exact(
    sampler: str | runner.Runner | Callable[..., Any],
    *,
    budget: str | round_cases.Budget = "standard",
    seed: int = 0,
    interface: str | Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    allow_inconclusive: bool = False,
    target: str | None = None,
    vocab: int | None = None,
    k: int | str | list[int] | tuple[int, ...] | None = None,
    max_tokens: int | None = None,
    progress: bool | str | None = None,
) -> Report:
    """``check`` the sampler; AssertionError unless it is exact (and, unless
    ``allow_inconclusive``, conclusively so). A subject that cannot run here raises
    ``EnvironmentProblem`` instead (no CUDA, a missing package: not evidence about exactness),
    and a usage mistake ``UsageError``. The message puts the verdict first, then each
    finding, then the smallest counterexample side by side (tokens: sampler vs target). Returns
    the report when the assertion holds. ``vocab``, ``k``, ``max_tokens``, ``progress``: as
    ``check``'s."""
    __tracebackhide__ = True  # a failing test's traceback ends at its own call, not here
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
    )
    if report.environment:
        raise environment_error(f"{report.target}: cannot run here: {report.environment}")
    if report.exact is False or (report.exact is None and not allow_inconclusive):
        raise AssertionError(failure_message(report))
    return report


__all__ = [
    "EXIT_ENVIRONMENT",
    "EnvironmentProblem",
    "VERDICT_WORDS",
    "Report",
    "UsageError",
    "assert_exact",
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
    "resolve_budget",
    "split_target",
    "start_target",
]
