"""``python -m specverify.mutants report``: prove the detectors kill every catalogued mutant and
accuse no correct sampler.

Shaped after mutation-testing tools (mutmut, cosmic-ray): stable ids, a baseline run first (the
reference sampler must pass every detector), a forced-fail sanity check (the detectors must be
able to fail), then every mutant with killed / survived / error / timeout, and a non-zero exit
naming the culprits. Every row comes from ``specverify.interfaces.round.battery.run_battery``: the report only
renders what the one detector battery found.

It is over 550 lines because one run of the report (the subjects over worker processes or Ray, its
progress on a terminal or in a log) is judged and rendered from the same rows: the judging, the four
formats, the JUnit cases and the picture all read one ``Row`` and one ``Status``, and split they
would pass a run's state between modules.
"""

from __future__ import annotations

import difflib
import enum
import json
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from functools import partial

import polars as pl

from .. import interfaces
from ..battery import capture, runner, signals
from ..battery.core import BREAKING_KINDS, BatteryResult
from ..battery.executors import ExecutorUnavailable
from ..common import tables
from ..common.command_line import is_terminal
from ..common.files import write_atomically
from ..common.validation import with_overrides
from ..interfaces.campaign_cost import campaign_table
from ..interfaces.round import cases as round_cases
from ..interfaces.round.units import merge_output, prefetched
from ..samplers.chain import draft, speculative_step
from . import ALL, Mutant, get

BASELINE_ID = "baseline/reference"
SANITY_ID = "sanity/emit-drafts"
# the report's budget: statistics on the handout's toy chain (plus any case the enumerator cannot
# follow) up to 8,000 runs; enumeration up to 40,000 paths per case (beyond: statistics); one
# binned engine-scale case, V = 4096, k = 2, at 1,000 runs (binned TV ~0.17 per position with
# probability 0.95: the binned path runs on every subject; no catalogued round mutant needs it,
# and at k = 8 it cost 7 s more per control, a quarter of the report); the loop and kernel
# batteries run their own standard budgets
REPORT_OVERRIDES = {
    "stat_cases": 1,
    "n_max": 8000,
    "max_paths": 40_000,
    "scale_runs": 1000,
    "scale_cases": ((4096, 2, "residual"),),
}
PROGRESS_EVERY_S = 10.0
"""How often a report whose stderr is not a terminal says how far it got (``PlainProgress``)."""
SHORT_CHECK_NAMES = {"exact-tv": "exact", "chi-square": "chi2", "tokens-per-round": "tokens", "contract": "contract"}


def emit_drafts(p_fn, q_fn, prefix, k, rng):
    """The forced-fail subject: no verification at all. Every detector must flag it."""
    return draft(q_fn, tuple(prefix), k, rng)[0]


class Status(enum.StrEnum):
    KILLED = "killed"  # a mutant flagged as its effect says
    SURVIVED = "survived"  # a mutant no detector flagged
    PASSED = "passed"  # a control (or the baseline) with no finding
    ACCUSED = "accused"  # a control flagged, or a fewer-tokens mutant flagged in distribution
    ERROR = "error"  # specverify raised (a bug of ours)
    TIMEOUT = "timeout"  # the subject's battery ran past --timeout
    ENVIRONMENT = "cannot run here"  # no CUDA, a missing package: neither killed nor survived


@dataclass
class Row:
    id: str
    effect: str
    status: Status
    killed_by: str
    exact_tv: float | None
    chi2_p_value: float | None
    samples_to_detect: int | None
    seconds: float
    description: str
    reference: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in (Status.KILLED, Status.PASSED)


def judge(effect: str, result: BatteryResult) -> tuple[str, str]:
    """Status and a detail line for a subject with the given expected effect; a subject that
    cannot run here (``result.environment``) is neither killed nor passed, whatever it is."""
    if result.environment:
        return Status.ENVIRONMENT, result.environment
    wrong = result.flagged()
    slow = result.flagged(("efficiency",))
    edges = result.flagged(("edge",))
    if effect == "exact":  # negative control: no distribution, contract or edge finding allowed
        return (Status.ACCUSED, (wrong or edges)[0].message) if (wrong or edges) else (Status.PASSED, "")
    if effect == "edge":  # exact in law: killed only by an edge check
        if wrong:
            return Status.ACCUSED, f"exact in law, yet: {wrong[0].message}"
        return (Status.KILLED, edges[0].message) if edges else (Status.SURVIVED, "no edge event reported")
    if effect == "fewer-tokens":  # exact in distribution: killed only by tokens per round
        if wrong:
            return Status.ACCUSED, f"exact in distribution, yet: {wrong[0].message}"
        return (Status.KILLED, slow[0].message) if slow else (Status.SURVIVED, "tokens per round as theory")
    return (Status.KILLED, (wrong or slow)[0].message) if (wrong or slow) else (Status.SURVIVED, "")


def subject_fn(mutant_id: str):
    """The subject's function: the baseline, the forced fail or a catalogued mutant."""
    return {BASELINE_ID: speculative_step, SANITY_ID: emit_drafts}.get(mutant_id) or get(mutant_id).fn


def interface_of(mutant_id: str) -> str:
    """The interface the subject is judged through (specverify.interfaces)."""
    return "round" if mutant_id in (BASELINE_ID, SANITY_ID) else get(mutant_id).interface


def stops_on_first(effect: str) -> bool | tuple[str, ...]:
    """A mutant's battery stops at its first finding that kills it (an edge mutant: an edge
    finding, or a breaking one, which accuses it anyway; ``battery.stopping_kinds``); controls
    run every case."""
    if effect in ("exact", "fewer-tokens"):
        return False
    return ("edge", *BREAKING_KINDS) if effect == "edge" else True


def run_subject(mutant_id: str, effect: str, budget: str, seed: int, timeout: float, *units) -> tuple:
    """Run one subject in a worker; returns (status, detail, BatteryResult dict or None, seconds).
    ``units``: its enumerations, computed by other workers (specverify.interfaces.round.units; Ray), replayed."""
    fn, kind = subject_fn(mutant_id), interfaces.get(interface_of(mutant_id))
    t0 = time.perf_counter()
    try:
        b, overrides = report_budget(budget)
        if kind.NAME != "round":  # the report's overrides are the round battery's
            overrides = {}
        if units:
            overrides = {**overrides, "prefetched": prefetched(units)}
        result = kind.run(
            fn, b, seed, deadline=time.monotonic() + timeout, stop_on_first=stops_on_first(effect), **overrides
        )
        if units:
            merge_output(result, units)
    except Exception as exc:  # a bug of ours, never the mutant's (the battery catches those)
        return Status.ERROR, f"{type(exc).__name__}: {exc}", None, time.perf_counter() - t0
    if result.timed_out:
        return Status.TIMEOUT, f"the battery on {mutant_id} ran past {timeout:g} s", None, result.seconds
    status, detail = judge(effect, result)
    return status, detail, result.to_dict(), result.seconds


def report_budget(budget: str) -> tuple:
    """(budget, overrides) of one subject's battery: a named budget with the report's overrides,
    or a campaign ``tv=X`` as it is, resolved by the subject's interface (the round's:
    ``specverify.interfaces.campaign_cost.campaign_budget``): every case by statistics up to the
    run count that sees TV X (set --timeout to match: see README, Scale out)."""
    if budget.startswith("tv="):
        return budget, {}
    return budget, REPORT_OVERRIDES


def subject_units(mutant_id: str, effect: str, budget: str) -> list[tuple]:
    """The subject's independent units as ``(unit function, args)`` pairs (specverify.interfaces.round.units;
    none where its interface's battery runs whole)."""
    b, overrides = report_budget(budget)
    kind = interfaces.get(interface_of(mutant_id))
    if kind.NAME == "round":
        b = with_overrides("round", round_cases.get_budget(b), overrides)
    return kind.units(partial(subject_fn, mutant_id), b, stops_on_first(effect))


def make_row(subject: Mutant, outcome: tuple) -> Row:
    status, detail, result, seconds = outcome
    result = result or {}
    checks = sorted({f["check"] for f in result.get("findings", [])})
    return Row(
        id=subject.id,
        effect=subject.effect,
        status=status,
        killed_by=",".join(SHORT_CHECK_NAMES.get(c, c) for c in checks) if status == Status.KILLED else "",
        exact_tv=result.get("exact_tv_max"),
        chi2_p_value=result.get("chi2_p_value_min"),
        samples_to_detect=result.get("samples_to_detect"),
        seconds=round(seconds, 2),
        description=subject.description,
        reference=subject.reference or "",
        detail=detail,
    )


def subjects(only: str | None) -> list[Mutant]:
    baseline = Mutant(BASELINE_ID, "the reference speculative_step", "exact", speculative_step, "arXiv 2211.17192")
    sanity = Mutant(SANITY_ID, "forced fail: emit the drafts unverified", "biased", emit_drafts, "handout §5")
    rest = [get(only)] if only else list(ALL)
    return [baseline, sanity, *rest]


def run_all(
    items: list[Mutant],
    budget: str,
    seed: int,
    timeout: float,
    workers: int,
    progress: bool | str | None,
    executor: str = "local",
) -> list[Row]:
    """Every subject's battery: here (``workers`` 1), on local worker processes, or on Ray
    (``executor`` ray or ray://ADDRESS; specverify.battery.executors): one task per case enumeration
    (``subject_units``), then one per subject that runs ``run_subject`` as a local worker does,
    with those enumerations replayed, so the same seed gives the same verdicts. ``progress`` on
    stderr: "bar" (or True) rich's transient bar, "lines" plain lines (``PlainProgress``), None
    (or False) nothing."""
    args = [(m.id, m.effect, budget, seed, timeout) for m in items]
    progress = progress_mode_of(progress)
    if executor != "local":
        from ..battery.executors import ray_map

        bar = {"bar": _ray_progress, "lines": PlainProgress}[progress](len(args)) if progress else None
        try:
            outcomes = ray_map(
                run_subject,
                args,
                executor,
                num_cpus=workers,
                on_done=bar.advance if bar else None,
                units=[subject_units(m.id, m.effect, budget) for m in items],
            )
        finally:
            if bar:
                bar.stop()
    elif workers <= 1:
        outcomes = [run_subject(*a) for a in _progress(args, progress, total=len(args))]
    else:
        # controls and the baseline run every case in full: start them first so that the two
        # workers finish together
        order = sorted(range(len(args)), key=lambda i: args[i][1] not in ("exact", "fewer-tokens"))
        pool = ProcessPoolExecutor(workers)
        try:
            futures = {i: pool.submit(run_subject, *args[i]) for i in order}
            lines = PlainProgress(len(args)) if progress == "lines" else None
            waiting = _completed(futures.values(), on_wait=lines.tick if lines else None)
            for _ in _progress(waiting, progress, total=len(args), lines=lines):
                pass
            outcomes = [futures[i].result() for i in range(len(args))]
        except KeyboardInterrupt:
            for process in list(getattr(pool, "_processes", {}).values()):
                process.kill()  # their subjects' processes die with them (runner)
                process.join(2)
                capture.remove_captures_of(process.pid)  # a killed worker deletes nothing itself
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
    return [make_row(m, o) for m, o in zip(items, outcomes)]


def _completed(futures, poll_s: float = 0.1, on_wait=None):
    """Yield futures as they finish, waking every ``poll_s`` so that Ctrl-C is seen at once (and
    calling ``on_wait()``, when given, at each wake)."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=poll_s, return_when=FIRST_COMPLETED)
        if on_wait is not None:
            on_wait()
        yield from done


def progress_mode_of(progress: bool | str | None) -> str | None:
    """The progress mode ``run_all`` shows: "bar", "lines" or None (True is "bar", False None)."""
    if progress is True:
        return "bar"
    if progress in (None, False):
        return None
    if progress not in ("bar", "lines"):
        raise ValueError(f"progress: must be bar, lines or None, got {progress!r}")
    return progress


def progress_mode_for(stream) -> str:
    """ "bar" (rich's, redrawn in place) on a terminal; "lines" (plain, one per ~10 s) where
    ``stream`` is a file or a pipe, which a redrawn bar would fill with escape codes."""
    return "bar" if is_terminal(stream) else "lines"


def _progress(items, mode: str | None, total: int | None = None, lines=None):
    """``items`` as they come, showing ``mode``'s progress: rich's transient bar ("bar"),
    plain lines ("lines": ``lines``, or a new ``PlainProgress``, advanced after each item), or
    none."""
    if mode == "bar":
        from rich.progress import track

        yield from track(items, description="mutants", total=total, transient=True, console=_stderr_console())
    elif mode == "lines":
        lines = lines or PlainProgress(total if total is not None else len(items))
        for item in items:
            yield item
            lines.advance()
    else:
        yield from items


class PlainProgress:
    """Progress where stderr is not a terminal (a log file, a pipe, CI): a plain line
    ``mutants: DONE/TOTAL done, S s`` on ``stream`` (default stderr) once at least ``every_s``
    seconds (default ``PROGRESS_EVERY_S``) passed since the start or the last line, checked when a
    subject finishes (``advance``) and while waiting (``tick``); when every subject is done, a
    last line, if any line came before (a short report stays silent). stdout is left to the
    report."""

    def __init__(self, total: int, every_s: float | None = None, stream=None, clock=time.monotonic):
        self.total, self.done, self.lines = total, 0, 0
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.stream, self.clock = stream, clock
        self.start = self.last = clock()

    def advance(self) -> None:
        """One more subject done: a line when it is time, or when it was the last and lines came before."""
        self.done += 1
        if self.done >= self.total and self.lines:
            self.say()
        else:
            self.tick()

    def tick(self) -> None:
        """A line if ``every_s`` seconds passed since the last one (or the start)."""
        if self.clock() - self.last >= self.every_s:
            self.say()

    def say(self) -> None:
        now = self.clock()
        print(
            f"mutants: {self.done}/{self.total} done, {now - self.start:.0f} s",
            file=self.stream or sys.stderr,
            flush=True,
        )
        self.last, self.lines = now, self.lines + 1

    def stop(self) -> None:
        """Nothing to clear (the lines stay): ``_ray_progress``'s interface."""


class _ray_progress:
    def __init__(self, total: int):
        from rich.progress import Progress

        self.progress = Progress(console=_stderr_console(), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("mutants (ray)", total=total)

    def advance(self) -> None:
        self.progress.advance(self.task)

    def stop(self) -> None:
        self.progress.stop()


def _stderr_console():
    from rich.console import Console

    return Console(file=sys.stderr)


def to_frame(rows: list[Row]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                k: getattr(r, k)
                for k in (
                    "id",
                    "effect",
                    "status",
                    "killed_by",
                    "exact_tv",
                    "chi2_p_value",
                    "samples_to_detect",
                    "seconds",
                )
            }
            for r in rows
        ],
        schema_overrides={"exact_tv": pl.Float64, "chi2_p_value": pl.Float64, "samples_to_detect": pl.Int64},
    )


def summary(rows: list[Row]) -> str:
    """The report's last line, within 100 characters: the baseline, the forced fail, the mutants
    killed and the controls passed, and the seconds the subjects' batteries took together."""
    by_id = {r.id: r for r in rows}
    rest = [r for r in rows if r.id not in (BASELINE_ID, SANITY_ID)]
    mutants = [r for r in rest if r.effect != "exact"]
    controls = [r for r in rest if r.effect == "exact"]
    killed = sum(r.status == Status.KILLED for r in mutants)
    passed = sum(r.status == Status.PASSED for r in controls)
    base, sanity = by_id[BASELINE_ID], by_id[SANITY_ID]
    return (
        f"baseline {'passed' if base.status == Status.PASSED else 'FAILED'}, forced-fail "
        f"{'detected' if sanity.status == Status.KILLED else 'NOT DETECTED'}; "
        f"{killed}/{len(mutants)} mutants killed, {passed}/{len(controls)} controls passed; "
        f"{sum(r.seconds for r in rows):.0f} s judging"
    )


def culprits(rows: list[Row]) -> list[Row]:
    return [r for r in rows if not r.ok]


def render(rows: list[Row], fmt: str, seed: int, budget: str) -> str:
    frame = to_frame(rows)
    if fmt == "json":
        return (
            json.dumps(
                {
                    "seed": seed,
                    "budget": budget,
                    "summary": summary(rows),
                    "ok": not culprits(rows),
                    "rows": [r.__dict__ for r in rows],
                },
                indent=2,
            )
            + "\n"
        )
    if fmt == "csv":
        return frame.write_csv()
    if fmt == "markdown":
        return _markdown(frame) + "\n\n" + summary(rows) + "\n"
    return f"{table(rows)}\n{summary(rows)}\n"


TABLE_WIDTH = 100
"""The human table's width: every line of ``--format table`` fits in it (the summary line aside)."""


def table(rows: list[Row], width: int = TABLE_WIDTH) -> str:
    """The human table: id, effect, status, killed_by, exact_tv, seconds, in fixed-width columns
    of plain ASCII; a cell too long for its column wraps onto the next line(s) (``tables.wrap``:
    ids at "/", killed_by after ", "; a hyphenated word whole). The id and killed_by columns share
    what the others leave of ``width``; killed_by is never narrower than its longest detector
    name, so that no detector's name is split."""
    heads = ("id", "effect", "status", "killed_by", "exact_tv", "seconds")
    cells = [
        (
            r.id,
            r.effect,
            str(r.status),
            r.killed_by.replace(",", ", "),
            "" if r.exact_tv is None else f"{r.exact_tv:.3g}",
            f"{r.seconds:.1f}",
        )
        for r in rows
    ]
    killed_by_least = max([9] + [tables.longest_word(c[3]) for c in cells])
    return tables.render(heads, cells, width, right={4, 5}, shrink=(3, 0), min_widths={3: killed_by_least, 0: 9})


def _markdown(frame: pl.DataFrame) -> str:
    def cell(v):
        if v is None:
            return ""
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)


def run(args) -> int:
    """The report for parsed arguments (``command.parse_args``): the exit code."""
    from ..common.validation import check_distinct_files

    try:
        check_distinct_files(
            out=getattr(args, "out", None),
            junit_xml=getattr(args, "junit_xml", None),
            plot=getattr(args, "plot", None),
        )
    except ValueError as exc:
        print(f"specverify.mutants: {exc}", file=sys.stderr)
        return 2
    if args.command == "list":
        for m in ALL:
            print(f"{m.id:48s} {m.effect:13s} {m.description}")
        return 0
    if args.mutant and args.mutant not in {m.id for m in ALL}:
        print(f"specverify.mutants: {unknown_mutant_line(args.mutant, [m.id for m in ALL])}", file=sys.stderr)
        return 2
    progress = progress_mode_for(sys.stderr)
    try:
        with signals.sigterm_as_interrupt():
            rows = run_all(
                subjects(args.mutant), args.budget, args.seed, args.timeout, args.workers, progress, args.executor
            )
    except ExecutorUnavailable as exc:
        print(f"specverify.mutants: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        runner.kill_all()
        how, code = signals.how_stopped(stop)
        print(f"specverify.mutants: {how}; workers stopped", file=sys.stderr)
        return code
    text = render(rows, args.format, args.seed, args.budget)
    sys.stdout.write(text)
    bad = culprits(rows)
    for r in bad:
        print(f"culprit: {r.id} ({r.effect}) {r.status}: {r.detail}", file=sys.stderr)
    if args.out:
        try:
            write_atomically(args.out, text)
        except OSError as exc:
            print(
                f"specverify.mutants: --out: could not write {args.out!r} ({exc.strerror}); "
                f"the report is printed above",
                file=sys.stderr,
            )
            return 2
    if getattr(args, "plot", None):
        from ..surface.plots import mutant_kills_figure

        try:
            mutant_kills_figure(rows, args.plot, checks=list(SHORT_CHECK_NAMES.values()))
        except (OSError, ValueError) as exc:
            print(f"specverify.mutants: --plot: could not draw {args.plot!r} ({exc})", file=sys.stderr)
            return 2
    if args.junit_xml:
        from ..surface import junit

        written = junit.write(
            args.junit_xml, "specverify.mutants", [junit_case(r) for r in rows], "specverify.mutants: --junit-xml"
        )
        if written:
            return written
    return 1 if bad else 0


def unknown_mutant_line(given: str, known: list[str]) -> str:
    """One short line for a ``--mutant`` that names no catalogued subject: the id, the closest
    known ids (``difflib.get_close_matches``, at most 3) and where the whole list is."""
    close = difflib.get_close_matches(given, known, n=3)
    hint = f"; closest: {', '.join(close)}" if close else ""
    return f"--mutant: no mutant with id {given!r}{hint}; every id: specverify mutants list"


def campaign_line(tv: float = 1e-3, budget: str = "thorough", runs_per_second: float | None = None) -> str:
    """The campaign line of this report's subjects (the catalogue, the baseline and the forced
    fail) at TV ``tv``: ``interfaces.campaign_cost.campaign_table``."""
    return campaign_table(len(ALL) + 2, tv, budget, runs_per_second)


def junit_case(row: Row):
    """A killed mutant or a passed control is a passing test case; a survivor or an accused
    control a failure carrying the finding (or its absence); an error or a timeout an error."""
    from ..surface import junit

    line = f"{row.status}: {row.detail}" if row.detail else str(row.status)
    text = (
        f"{row.id} ({row.effect}): {row.status}; {row.description}"
        + (f" [{row.reference}]" if row.reference else "")
        + (f"\n{row.detail}" if row.detail else "")
    )
    outcome = "passed" if row.ok else ("error" if row.status in (Status.ERROR, Status.TIMEOUT) else "failure")
    if row.status == Status.ENVIRONMENT:
        outcome = "skipped"
    if row.status == Status.SURVIVED:
        line = f"survived: no detector flagged this {row.effect} mutant" + (f" ({row.detail})" if row.detail else "")
    return junit.Case(row.id, f"specverify.mutants.{row.effect}", row.seconds, outcome, line, text)
