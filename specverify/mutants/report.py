"""``python -m specverify.mutants report``: prove the detectors kill every catalogued mutant and
accuse no correct sampler.

Shaped after mutation-testing tools (mutmut, cosmic-ray): stable ids, a baseline run first (the
reference sampler must pass every detector), a forced-fail sanity check (the detectors must be
able to fail), then every mutant with killed / survived / error / timeout, and a non-zero exit
naming the culprits. Every row comes from ``specverify.interfaces.round.battery.run_battery``: the report only
renders what the one detector battery found.

Here: the subjects (the baseline, the forced fail, the catalogue), one subject's battery
(``run_subject``), all of them over worker processes or Ray (``run_all``) and the command
(``run``). A row and its verdict are ``mutant_verdict``'s, the progress ``mutant_progress``'s, the
report's text ``mutant_table``'s.
"""

from __future__ import annotations

import difflib
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial

from .. import interfaces
from ..battery import capture, runner, signals
from ..battery.core import BREAKING_KINDS
from ..battery.executors import ExecutorUnavailable
from ..common.files import write_atomically
from ..common.validation import with_overrides
from ..errors import EXIT_CODES
from ..interfaces.campaign_cost import campaign_table
from ..interfaces.round import cases as round_cases
from ..interfaces.round.units import merge_output, prefetched
from ..samplers.chain import draft, speculative_step
from . import ALL, Mutant, get
from .mutant_progress import PlainProgress, RayProgress, completed, progress_mode_for, progress_mode_of, with_progress
from .mutant_table import culprits, junit_case, render, timing_line
from .mutant_verdict import BASELINE_ID, SANITY_ID, SHORT_CHECK_NAMES, Row, Status, judge

# the report's budget: the cross-check of one enumerated case drawn from the seed, and any case
# the enumerator cannot follow to 8,000 runs (more where its TV needs them); enumeration up to 40,000 paths per case (beyond: statistics); one
# binned engine-scale case, V = 4096, k = 2, at 1,000 runs (binned TV ~0.17 per position with
# probability 0.95: the binned path runs on every subject; no catalogued round mutant needs it,
# and at k = 8 it cost 7 s more per control, a quarter of the report); the loop and kernel
# batteries run their own standard budgets
REPORT_OVERRIDES = {
    "stat_cases": 1,
    "n_max": 8000,
    "max_paths": 40_000,
    "scale_runs": 1000,
    "scale_tv": 0.2,  # 1,000 runs see ~0.17: the floor decides, as before
    "sweep_tv": 0.2,  # a swept case the enumerator cannot follow: its 1,000 runs see ~0.17
    "scale_cases": ((4096, 2, "residual"),),
}


def emit_drafts(p_fn, q_fn, prefix, k, rng):
    """The forced-fail subject: no verification at all. Every detector must flag it."""
    return draft(q_fn, tuple(prefix), k, rng)[0]


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
        own = None if mutant_id in (BASELINE_ID, SANITY_ID) else get(mutant_id).own_reference
        if own is not None:  # judged against the engine's own target-only path
            overrides = {**overrides, "reference": own}
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


def leave_ctrl_c_to_the_parent() -> None:
    """A worker process's start: ignore SIGINT. Ctrl-C on a terminal reaches every process of the
    foreground group; the parent alone answers it (one line, exit 130) and kills the workers,
    which would otherwise each print a ``Process ForkProcess-N:`` traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """The local executor of ``run_all``: ``workers`` processes that leave Ctrl-C to the parent."""
    return ProcessPoolExecutor(workers, initializer=leave_ctrl_c_to_the_parent)


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

        bar = {"bar": RayProgress, "lines": PlainProgress}[progress](len(args)) if progress else None
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
        outcomes = [run_subject(*a) for a in with_progress(args, progress, total=len(args))]
    else:
        # controls and the baseline run every case in full: start them first so that the two
        # workers finish together
        order = sorted(range(len(args)), key=lambda i: args[i][1] not in ("exact", "fewer-tokens"))
        pool = worker_pool(workers)
        try:
            futures = {i: pool.submit(run_subject, *args[i]) for i in order}
            lines = PlainProgress(len(args)) if progress == "lines" else None
            waiting = completed(futures.values(), on_wait=lines.tick if lines else None)
            for _ in with_progress(waiting, progress, total=len(args), lines=lines):
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
        return EXIT_CODES["usage"]
    if args.command == "list":
        for m in ALL:
            print(f"{m.id:48s} {m.effect:13s} {m.description}")
        return 0
    if args.mutant and args.mutant not in {m.id for m in ALL}:
        print(f"specverify.mutants: {unknown_mutant_line(args.mutant, [m.id for m in ALL])}", file=sys.stderr)
        return EXIT_CODES["usage"]
    progress = progress_mode_for(sys.stderr)
    items = subjects(args.mutant)
    start = time.monotonic()
    try:
        with signals.sigterm_as_interrupt():
            rows = run_all(items, args.budget, args.seed, args.timeout, args.workers, progress, args.executor)
    except ExecutorUnavailable as exc:
        print(f"specverify.mutants: {exc}", file=sys.stderr)
        return EXIT_CODES["usage"]
    except KeyboardInterrupt as stop:
        runner.kill_all()
        how, code = signals.how_stopped(stop)
        print(f"specverify.mutants: {how}; workers stopped", file=sys.stderr)
        return code
    workers = min(args.workers, len(items)) if args.executor != "local" or args.workers > 1 else 1
    text = render(rows, args.format, args.seed, args.budget, timing_line(rows, workers, time.monotonic() - start))
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
            return EXIT_CODES["usage"]
    if getattr(args, "plot", None):
        from ..surface.plots import mutant_kills_figure

        try:
            mutant_kills_figure(rows, args.plot, checks=list(SHORT_CHECK_NAMES.values()))
        except (OSError, ValueError) as exc:
            print(f"specverify.mutants: --plot: could not draw {args.plot!r} ({exc})", file=sys.stderr)
            return EXIT_CODES["usage"]
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
