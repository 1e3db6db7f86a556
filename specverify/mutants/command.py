"""``python -m specverify.mutants``: its command line, parsed before the catalogue, NumPy, SciPy
or polars load (a usage error is one line on stderr and exit 2 within a second); the report
itself is ``report.run``. ``--budget`` is checked against the one budget table
(``specverify.battery.budgets``), ``--executor`` by ``executors.executor_argument`` (nothing started)."""

from __future__ import annotations

import os
import sys

from ..battery.executors import ExecutorUnavailable, preflight
from ..common.command_line import EXIT_USAGE, OneLineParser, parsed
from ..common.validation import positive_int_argument, positive_seconds_argument, seed_argument, writable_file_argument
from ..surface.check_command import add_junit_and_executor, budget_argument, plot_file_argument

FORMATS = ("table", "markdown", "json", "csv")
"""What ``--format`` offers (``mutant_table.render`` writes each)."""


def parse_args(argv):
    """The parsed arguments, or SystemExit after OneLineParser's one-line usage error."""
    ap = OneLineParser(prog="specverify mutants", description="Run the mutant catalogue against the detectors.")
    sub = ap.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="baseline, forced fail, then every mutant and control")
    rep.add_argument(
        "--format", choices=FORMATS, default="table", help="how stdout shows the report (default: a table)"
    )
    rep.add_argument("--out", type=writable_file_argument, help="write the report to this file (atomically) as well")
    rep.add_argument("--mutant", metavar="ID", help="run one mutant (besides baseline and sanity)")
    rep.add_argument("--seed", type=seed_argument, default=0, help="an integer >= 0")
    rep.add_argument(
        "--budget",
        type=budget_argument,
        default="standard",
        metavar="BUDGET",
        help="quick, standard (default), thorough, or tv=X: a campaign that tests every "
        "case of the thorough budget until a TV of X is seen (with --timeout to match)",
    )
    rep.add_argument(
        "--workers",
        type=positive_int_argument,
        default=min(2, os.cpu_count() or 1),
        help="subjects judged at once, one process each (default: 2, or 1 on one core)",
    )
    rep.add_argument(
        "--plot",
        metavar="FILE",
        type=plot_file_argument,
        help="draw which check killed which mutant (a matrix, controls shaded) into FILE (.png, .pdf or .svg)",
    )
    rep.add_argument(
        "--timeout",
        type=positive_seconds_argument,
        default=600.0,
        help="seconds per subject (> 0): a hang guard, never a verdict; the slowest control takes about 170 s on 2 idle cores",
    )
    add_junit_and_executor(
        rep,
        "subject",
        "local (default: --workers processes here), ray (RAY_ADDRESS, or a "
        "local Ray instance of --workers CPUs) or ray://ADDRESS: Ray tasks per "
        "case enumeration and per subject",
    )
    sub.add_parser("list", help="list the catalogue's ids")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    """Parse, then run the report (``report.run``); a usage error is ``EXIT_USAGE`` (2)."""
    args, code = parsed(parse_args, argv)
    if args is None:  # --help, or one line of usage error
        return code
    if args.command == "report":
        try:
            preflight(args.executor)
        except ExecutorUnavailable as exc:
            print(f"specverify.mutants: {exc}", file=sys.stderr)
            return EXIT_USAGE
    from .report import run

    return run(args)


__all__ = ["FORMATS", "main", "parse_args"]
