"""The mutant report's text from its rows: the human table (fixed-width plain ASCII), markdown,
CSV and JSON (``render``), the summary line, the culprits, and a row as a JUnit case."""

from __future__ import annotations

import json

import polars as pl

from ..common import tables
from .mutant_verdict import BASELINE_ID, SANITY_ID, Row, Status


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
    """The report's verdict line, within 100 characters: the baseline, the forced fail, the mutants
    killed and the controls passed."""
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
        f"{killed}/{len(mutants)} mutants killed, {passed}/{len(controls)} controls passed"
    )


def timing_line(rows: list[Row], workers: int = 1, wall_s: float | None = None) -> str:
    """The report's last line: the seconds the subjects' batteries took, summed over the
    ``workers`` processes that ran them at once (so more than the wall time when workers > 1),
    and the wall time ``wall_s`` when given."""
    judging = sum(r.seconds for r in rows)
    where = "in 1 process" if workers <= 1 else f"summed over {workers} worker processes"
    wall = f"{wall_s:.0f} s wall time, " if wall_s is not None else ""
    return f"{wall}{judging:.0f} s of judging {where}"


def culprits(rows: list[Row]) -> list[Row]:
    return [r for r in rows if not r.ok]


def render(rows: list[Row], fmt: str, seed: int, budget: str, timing: str = "") -> str:
    """The report in ``fmt`` (table, markdown, csv, json): the rows, then ``summary`` and the
    ``timing`` line (``timing_line``; none when empty)."""
    frame = to_frame(rows)
    ending = summary(rows) + (f"\n{timing}" if timing else "")
    if fmt == "json":
        return (
            json.dumps(
                {
                    "seed": seed,
                    "budget": budget,
                    "summary": summary(rows),
                    "timing": timing,
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
        return _markdown(frame) + "\n\n" + ending + "\n"
    return f"{table(rows)}\n{ending}\n"


TABLE_WIDTH = 100
"""The human table's width: the killed_by column wraps to fit it (the catalogue's ids fit whole); an
id is never wrapped, so ids much longer than the catalogue's widen the table past it."""


def table(rows: list[Row], width: int = TABLE_WIDTH) -> str:
    """The human table: id, effect, status, killed_by, exact_tv, seconds, in fixed-width columns
    of plain ASCII. Each id stays whole on its row's first line (``grep ID`` finds it, in a file
    or a pipe as on a terminal); only killed_by wraps onto the next line(s), after ", " and
    never narrower than its longest detector name (``tables.wrap``), so that no name is split."""
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
    return tables.render(heads, cells, width, right={4, 5}, shrink=(3,), min_widths={3: killed_by_least})


def _markdown(frame: pl.DataFrame) -> str:
    def cell(v):
        if v is None:
            return ""
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)


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
