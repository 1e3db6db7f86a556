"""``specverify engines`` (``python -m specverify.engines``): real engines' own verification code,
judged, one row per engine function. Downloads the pinned wheels without their dependencies into
$SPECVERIFY_ENGINES_DIR (default ~/.cache/specverify-engines) on first use; needs torch (the models
extra). The table (or JSON) goes to stdout, progress to stderr."""

from __future__ import annotations

import json
import os
import sys
import time

from ..errors import EnvironmentProblem, exit_code_of
from .engine_run import run
from .engine_table import (
    BUDGET_NAMES,
    BY_NAME,
    ENGINES,
    check_offline_cache,
    listing,
    missing_torch,
    render_findings,
    render_listing,
    render_table,
)

EPILOG = (
    "exit 0: the rows ran (or --list / --render printed); 1: --expect saw an unexpected verdict; "
    "2: a usage error; 4: the environment cannot run the rows (torch missing: "
    "python -m pip install -e '.[models]'; --offline with no chosen row's wheel cached)"
)


DEFAULT_WORKERS_MAX = 4
"""The most processes a round row uses by default (``--workers``)."""


def default_workers() -> int:
    """This machine's usable cores (``os.sched_getaffinity`` where it exists), 1 to
    ``DEFAULT_WORKERS_MAX``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(DEFAULT_WORKERS_MAX, cores))


def parser():
    """The command's parser; every option has a help line."""
    from ..common.command_line import OneLineParser
    from ..common.validation import seed_argument
    from ..surface.check_command import workers_argument

    ap = OneLineParser(prog="specverify engines", description=__doc__.replace("``", ""), epilog=EPILOG)
    ap.add_argument(
        "--engine",
        action="append",
        choices=sorted(BY_NAME),
        metavar="NAME",
        help=f"run one row (repeatable); all rows by default. NAME: {', '.join(sorted(BY_NAME))}",
    )
    ap.add_argument(
        "--budget",
        default="quick",
        choices=BUDGET_NAMES,
        help="how hard each row is judged: quick (default; the Triton rows a few minutes each) or standard "
        "(the full budgets with engine-scale cases; the Triton rows sweep as far as the CPU interpreter allows, "
        "TRITON_SWEEPS, up to about 10 minutes each); each row prints its reach",
    )
    ap.add_argument("--seed", type=seed_argument, default=0, help="the battery's seed, an integer >= 0 (default 0)")
    ap.add_argument(
        "--workers",
        type=workers_argument,
        default=default_workers(),
        help="processes per round row, sharing its enumerations and sampled runs (the verdict is the same "
        f"with 1 or N; default: this machine's usable cores, up to {DEFAULT_WORKERS_MAX}, here "
        f"{default_workers()}); the kernel rows run in one",
    )
    ap.add_argument("--json", action="store_true", help="print the rows (or, with --list, the list) as JSON")
    ap.add_argument(
        "--offline",
        action="store_true",
        help="use the cache only, never the network: a row whose wheel is not cached is a skip line; "
        "exit 4 when no chosen row's wheel is cached",
    )
    ap.add_argument(
        "--expect", action="store_true", help="exit 1 unless every judged row's verdict matches its expectation"
    )
    ap.add_argument(
        "--list",
        action="store_true",
        help="list the rows (package and pinned version, interface, what each needs, whether its wheel is "
        "cached) and exit; loads and downloads nothing",
    )
    ap.add_argument("--render", metavar="JSON", help="print the table from rows saved with --json; run nothing")
    ap.add_argument(
        "--versions",
        metavar="LIST",
        help="judge the one --engine row at several releases: 'all' (every final release from the row's first "
        "on; pip index versions) or releases separated by commas (e.g. 0.8.5,0.33.0); prints version, "
        "verification files' hash, signature, verdict and power per release (a release whose files are "
        "unchanged reuses the verdict); wheels are cached once",
    )
    return ap


def main(argv=None) -> int:
    """Run the command; its exit code (0, 1 with --expect, EXIT_USAGE, EXIT_ENVIRONMENT)."""
    from ..common.command_line import EXIT_ENVIRONMENT, emit, parsed

    ap = parser()
    args, code = parsed(ap.parse_args, argv)
    if args is None:  # --help, or one line of usage error
        return code
    if args.render:
        return render_saved(ap.prog, args.render)
    chosen = [BY_NAME[n] for n in args.engine] if args.engine else list(ENGINES)
    if args.list:
        rows = listing(chosen)
        print(json.dumps(rows, indent=1) if args.json else render_listing(rows))
        return 0
    if args.versions is not None:
        return run_versions(ap, args, chosen)
    problem = missing_torch(chosen)
    if problem:
        emit(f"{ap.prog}: error: {problem}\n", sys.stderr)
        return EXIT_ENVIRONMENT
    if args.offline:
        try:
            check_offline_cache(chosen)
        except EnvironmentProblem as exc:
            emit(f"{ap.prog}: error: {exc}\n", sys.stderr)
            return exit_code_of(exc)
    return run_and_print(args, chosen)


def run_and_print(args, chosen: list) -> int:
    """Run the chosen rows (progress on stderr), print the table or JSON on stdout; the exit code."""
    from .heartbeat import RowProgress

    t0 = time.perf_counter()
    with RowProgress(len(chosen)) as progress:
        rows = run(
            [e.name for e in chosen],
            args.budget,
            args.seed,
            download=not args.offline,
            progress=progress.finished,
            stage=progress.stage,
            workers=args.workers,
        )
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        print(render_table(rows))
        findings = render_findings(rows)
        if findings:
            print("\n" + findings)
        print(f"\n{len(rows)} rows in {time.perf_counter() - t0:.0f} s (budget {args.budget}, seed {args.seed})")
    if args.expect:
        bad = [r["engine"] for r in rows if "skipped" not in r and ("error" in r or not matches(r))]
        if bad:
            print(f"unexpected verdicts: {', '.join(bad)}", file=sys.stderr)
            return 1
    return 0


def run_versions(ap, args, chosen: list) -> int:
    """``--versions``: the one chosen row at each release (``engine_versions``), as a version
    table or JSON; EXIT_USAGE (one line) unless exactly one --engine row with a version table."""
    from ..common.command_line import EXIT_ENVIRONMENT, EXIT_USAGE, emit
    from . import loader
    from .engine_versions import chosen_versions, render_versions, version_rows
    from .heartbeat import RowProgress

    if not args.engine or len(args.engine) != 1:
        emit(f"{ap.prog}: error: --versions: name exactly one row with --engine\n", sys.stderr)
        return EXIT_USAGE
    engine = chosen[0]
    try:
        versions = chosen_versions(engine, args.versions, download=not args.offline)
    except ValueError as exc:
        emit(f"{ap.prog}: error: {exc}\n", sys.stderr)
        return EXIT_USAGE
    except loader.Unavailable as exc:
        emit(f"{ap.prog}: error: --versions: {exc}\n", sys.stderr)
        return EXIT_ENVIRONMENT
    problem = missing_torch(chosen)
    if problem:
        emit(f"{ap.prog}: error: {problem}\n", sys.stderr)
        return EXIT_ENVIRONMENT
    t0 = time.perf_counter()
    with RowProgress(len(versions)) as progress:
        rows = version_rows(
            engine, versions, args.budget, args.seed, not args.offline, progress.stage, progress.finished
        )
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        print(render_versions(rows))
        print(f"\n{len(rows)} releases in {time.perf_counter() - t0:.0f} s (budget {args.budget}, seed {args.seed})")
    return 0


def render_saved(prog: str, path: str) -> int:
    """``--render``: print the table from rows saved with ``--json``; 0, or EXIT_USAGE with one
    line when the file is missing, not JSON, or not rows."""
    from ..common.command_line import EXIT_USAGE, emit

    try:
        with open(path, encoding="utf-8") as fh:
            rows = json.load(fh)
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError("not a list of rows saved with --json")
        if rows and any("files_hash" in r for r in rows):  # saved with --versions: the version table
            from .engine_versions import render_versions

            table, findings = render_versions(rows), ""
        else:
            table, findings = render_table(rows), render_findings(rows)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # missing, not JSON, not rows
        why = (
            exc.strerror
            if isinstance(exc, OSError) and exc.strerror
            else f"a row lacks {exc}"
            if isinstance(exc, KeyError)
            else (str(exc).splitlines() or [""])[0]
        )
        emit(f"{prog}: error: --render: cannot read {path!r} ({why})\n", sys.stderr)
        return EXIT_USAGE
    print(table)
    print("\n" + findings if findings else "")
    return 0


def matches(row: dict) -> bool:
    """exact rows exact (or inconclusive with no finding), lossy rows not exact, the block
    kernel row flagged against the token-wise rule."""
    if row["expected"] == "exact":
        return row["exact"] is not False
    return row["exact"] is False


if __name__ == "__main__":
    sys.exit(main())
