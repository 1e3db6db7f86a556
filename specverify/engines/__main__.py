"""``python -m specverify.engines [--engine NAME ...] [--json] [--budget quick|standard]``."""

from __future__ import annotations

import json
import sys
import time

from . import BUDGET_NAMES, BY_NAME, render_findings, render_table, run


def main(argv=None) -> int:
    from ..common.command_line import OneLineParser, emit, parsed
    from ..common.validation import seed_argument

    ap = OneLineParser(prog="specverify engines", description=__doc__)
    ap.add_argument(
        "--engine", action="append", choices=sorted(BY_NAME), help="one engine (repeatable); all by default"
    )
    ap.add_argument("--budget", default="quick", choices=BUDGET_NAMES)
    ap.add_argument("--seed", type=seed_argument, default=0, help="an integer >= 0")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--offline", action="store_true", help="use the cache only; never download")
    ap.add_argument(
        "--expect", action="store_true", help="exit 1 unless every judged row's verdict matches its expectation"
    )
    ap.add_argument("--render", metavar="JSON", help="print the table from rows saved with --json; run nothing")
    args, code = parsed(ap.parse_args, argv)
    if args is None:  # --help, or one line of usage error
        return code
    t0 = time.perf_counter()
    if args.render:
        try:
            with open(args.render, encoding="utf-8") as fh:
                rows = json.load(fh)
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise ValueError("not a list of rows saved with --json")
            table, findings = render_table(rows), render_findings(rows)
        except (OSError, ValueError, KeyError, TypeError) as exc:  # missing, not JSON, not rows
            why = (
                exc.strerror
                if isinstance(exc, OSError) and exc.strerror
                else f"a row lacks {exc}"
                if isinstance(exc, KeyError)
                else (str(exc).splitlines() or [""])[0]
            )
            emit(f"{ap.prog}: error: --render: cannot read {args.render!r} ({why})\n", sys.stderr)
            return 2
        print(table)
        print("\n" + findings if findings else "")
        return 0

    def progress(row):
        what = row.get("skipped") or f"{row['verdict']} ({row['seconds']} s)"
        print(f"[{row['engine']}] {what}", file=sys.stderr, flush=True)

    rows = run(args.engine, args.budget, args.seed, download=not args.offline, progress=progress)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        print(render_table(rows))
        findings = render_findings(rows)
        if findings:
            print("\n" + findings)
        print(f"\n{len(rows)} rows in {time.perf_counter() - t0:.0f} s (budget {args.budget}, seed {args.seed})")
    if args.expect:
        bad = [r["engine"] for r in rows if "skipped" not in r and not matches(r)]
        if bad:
            print(f"unexpected verdicts: {', '.join(bad)}", file=sys.stderr)
            return 1
    return 0


def matches(row: dict) -> bool:
    """exact rows exact (or inconclusive with no finding), lossy rows not exact, the block
    kernel row flagged against the token-wise rule."""
    if row["expected"] == "exact":
        return row["exact"] is not False
    return row["exact"] is False


if __name__ == "__main__":
    sys.exit(main())
