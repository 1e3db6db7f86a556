"""Pictures of a report, for people: the counterexample of a ``check`` report and the matrix of
which check killed which mutant.

- ``counterexample_figure(report, path)`` (``check --plot FILE``): the smallest counterexample's
  two laws side by side, the target's and the subject's, as grouped bars, the largest differences
  first (per token for a round subject, per output sequence for a loop subject, per bin of ids
  for a binned engine-scale one); the TV and a p-value in the title.
- ``mutant_kills_figure(rows, path)`` (``mutants report --plot FILE``): subjects as rows, checks
  as columns, a filled cell where that check found that mutant, each row's outcome at its right;
  the rows that passed (the baseline and the controls) shaded green.

What a picture says is decided by the pure functions ``counterexample_bars`` and
``kills_matrix``; the drawing functions only lay them out. Both read plain data: ``report`` is
``api.Report.to_dict()`` (what ``check --json`` prints); ``rows`` are any objects with the
fields ``id``, ``status`` and ``killed_by`` of ``specverify.mutants.mutant_verdict.Row`` (this layer
cannot import the mutants, which sit above it). matplotlib loads inside the drawing functions and
only through its object API (``Figure`` and ``FigureCanvasAgg``, no pyplot state), so importing
this module stays light. Every file is written through ``common.files.atomic_path`` (a temporary
file beside it, then ``os.replace``); its format is the path's suffix: .png, .pdf or .svg.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.files import atomic_path
from .report_text import VERDICT_WORDS

FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}
"""The suffixes a picture may have, and the format each one is written in."""

TOP_OUTCOMES = 20
"""How many outcomes a counterexample picture shows at most: those that differ most."""

PASSING_OUTCOMES = ("killed", "passed")
"""A mutant report row's statuses that are as they should be (``Row.ok``)."""

TARGET_COLOUR, SUBJECT_COLOUR, FOUND_COLOUR = "#4c72b0", "#dd8452", "#1f3b5c"
PASSED_COLOUR, EMPTY_COLOUR, WRONG_COLOUR = "#d4edd4", "#ffffff", "#b22222"


def figure_format(path) -> str:
    """The format ``path``'s suffix names (case-insensitive): "png", "pdf" or "svg".
    ValueError naming ``path`` for any other suffix, or none."""
    suffix = Path(os.fspath(path)).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(
            f"cannot write a picture to {os.fspath(path)!r}: the path's suffix must be one of "
            f"{', '.join(FORMATS)} (it names the format)"
        )
    return FORMATS[suffix]


# ---- the counterexample ------------------------------------------------------------------------


@dataclass(frozen=True)
class CounterexampleBars:
    """What a counterexample picture shows: one group of bars per outcome (``labels``), the
    target's probability and the subject's, the largest |subject - target| first; ``left_out``
    outcomes of the law did not make the cut."""

    labels: list[str]
    target: list[float]
    subject: list[float]
    title: str
    axis_label: str
    left_out: int


def counterexample_bars(report: dict[str, Any], top: int = TOP_OUTCOMES) -> CounterexampleBars:
    """The bars of ``report``'s counterexample: its ``distributions`` rows sorted by
    |sampler - target| descending (ties keep the report's order), the first ``top`` of them.
    ValueError when ``report`` holds no counterexample (an exact report, an inconclusive one, or a
    finding without a smallest model) or when its counterexample has no per-outcome law (an
    engine-scale batch that failed a binned check on the whole batch)."""
    ce = report.get("counterexample")
    if not ce:
        raise ValueError(no_counterexample_message(report))
    rows = ce.get("distributions") or []
    if not rows:
        raise ValueError(
            f"the counterexample in report has no per-outcome law to plot (method {ce.get('method')}, "
            f"vocab {ce.get('vocab_size')}): read it in the text report"
        )
    kept = largest_differences_first(rows)[:top]
    return CounterexampleBars(
        labels=[outcome_label(r["tokens"]) for r in kept],
        target=[float(r["target"]) for r in kept],
        subject=[float(r["sampler"]) for r in kept],
        title=counterexample_title(report),
        axis_label=outcome_axis_label(ce),
        left_out=len(rows) - len(kept),
    )


def no_counterexample_message(report: dict[str, Any]) -> str:
    """Why ``report`` has nothing to plot, with its verdict."""
    verdict = VERDICT_WORDS.get(report.get("exact"), "INCONCLUSIVE")
    why = {
        "EXACT": "",
        "NOT EXACT": " (its findings show no output law that differs, or no smallest model was found in time)",
        "INCONCLUSIVE": " (no finding)",
    }[verdict]
    return f"no counterexample to plot in report: the verdict is {verdict}{why}"


def largest_differences_first(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (``{"tokens", "sampler", "target"}``) by |sampler - target|, largest first; a
    stable sort, so equal differences keep their order."""
    return sorted(rows, key=lambda r: -abs(float(r["sampler"]) - float(r["target"])))


def outcome_label(tokens: Sequence[Any]) -> str:
    """An outcome's label: its tokens (or a bin's label) separated by spaces."""
    return " ".join(map(str, tokens))


def counterexample_title(report: dict[str, Any]) -> str:
    """Three lines (four for a loop counterexample): the subject and its verdict; the smallest
    model; the request whose output law is drawn; its TV and a p-value."""
    ce = report["counterexample"]
    verdict = VERDICT_WORDS.get(report.get("exact"), "INCONCLUSIVE")
    model = (
        f"smallest counterexample ({ce.get('method')}): vocab {ce.get('vocab_size')}, k={ce.get('k')}, "
        f"window {ce.get('window')}, {ce.get('model')}"
    )
    lines = [f"{report.get('target')}: {verdict}", model]
    if "requests" in ce:  # a loop counterexample: the request drawn and the finding it shows
        i = int(ce.get("request", 0))
        request = ce["requests"][i] if i < len(ce["requests"]) else {}
        lines.append(
            f"request {i}: prompt {request.get('prompt')}, {params_words(request.get('params'))}; "
            f"shows {ce.get('check')}"
        )
    return "\n".join([*lines, evidence_words(report)])


def evidence_words(report: dict[str, Any]) -> str:
    """The counterexample's TV ("exact TV" when its law was enumerated, else "empirical TV" over
    its runs) and a p-value: the counterexample's own when it has one (a binned or a statistical
    finding), else the battery's smallest chi-square p-value (``chi2_p_value_min``), so named;
    none when neither is there."""
    ce = report["counterexample"]
    if ce.get("exact_tv") is not None:
        words = f"exact TV {ce['exact_tv']:.4g}"
    else:
        runs = f" over {ce['samples']} runs" if ce.get("samples") else ""
        words = f"empirical TV {float(ce.get('empirical_tv') or 0.0):.4g}{runs}"
    own = ce.get("p_value", (ce.get("evidence") or {}).get("p_value"))
    if own is not None:
        return f"{words}, p-value {own:.3g}"
    battery = report.get("chi2_p_value_min")
    if battery is not None:
        return f"{words}; battery's smallest chi-square p-value {battery:.3g}"
    return words


def outcome_axis_label(ce: dict[str, Any]) -> str:
    """What one group of bars is: a token, a window of tokens, a request's output sequence (a
    loop counterexample) or a bin of ids (a binned one)."""
    if ce.get("method") == "binned":
        return f"bin of token ids at position {ce.get('position')}"
    if "requests" in ce:
        return f"output sequence of request {int(ce.get('request', 0))}"
    if ce.get("window") == 1:
        return "output token"
    return f"output tokens (a window of {ce.get('window')})"


def cut_words(shown: int, total: int) -> str:
    """How many of the law's outcomes show."""
    if shown < total:
        return f"the {shown} largest differences of {total} outcomes, largest first"
    return f"all {total} outcomes, largest difference first"


def params_words(params: Any) -> str:
    """A request's sampling parameters as ``name=value`` pairs."""
    if isinstance(params, dict):
        return ", ".join(f"{k}={v}" for k, v in params.items()) or "default params"
    return str(params)


def counterexample_figure(report: dict[str, Any], path, top: int = TOP_OUTCOMES) -> Path:
    """Draw ``report``'s counterexample (``counterexample_bars``) to ``path`` and return it:
    horizontal grouped bars, the target's and the subject's probability of each outcome, the
    largest difference at the top, each group's difference written beside it. ValueError, with
    nothing written, for a suffix other than .png / .pdf / .svg (naming ``path``) or a report
    without a counterexample to plot (an EXACT report: "no counterexample to plot in report: the
    verdict is EXACT")."""
    fmt = figure_format(path)
    bars = counterexample_bars(report, top)
    fig = new_figure(width=8.0, height=2.2 + 0.34 * len(bars.labels))
    draw_bars(fig.add_subplot(), bars)
    return save(fig, path, fmt)


def draw_bars(ax, bars: CounterexampleBars) -> None:
    """Lay ``bars`` out on ``ax``: one row per outcome, the first at the top."""
    n = len(bars.labels)
    ys = range(n)
    ax.barh([y - 0.2 for y in ys], bars.target, height=0.4, color=TARGET_COLOUR, label="target")
    ax.barh([y + 0.2 for y in ys], bars.subject, height=0.4, color=SUBJECT_COLOUR, label="subject (sampler)")
    top = max([*bars.target, *bars.subject, 1e-12])
    for y, t, s in zip(ys, bars.target, bars.subject, strict=True):
        ax.text(max(t, s) + 0.01 * top, y, f"{s - t:+.4f}", va="center", fontsize=7, color="#333333")
    ax.set_yticks(list(ys), bars.labels, fontsize=8 if n <= 12 else 7, family="monospace")
    ax.set_ylim(n - 0.5, -0.5)  # the largest difference at the top
    ax.set_xlim(0, top * 1.15)
    ax.set_xlabel(f"probability ({cut_words(n, n + bars.left_out)})", fontsize=8)
    ax.set_ylabel(bars.axis_label, fontsize=8)
    ax.set_title(bars.title, fontsize=9, loc="left")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="best", fontsize=8)


# ---- the mutants' kills ------------------------------------------------------------------------


@dataclass(frozen=True)
class KillsMatrix:
    """Which check found which mutant: ``found[i][j]`` when check ``checks[j]`` is in row ``i``'s
    ``killed_by``; ``outcomes[i]`` its status ("killed", "passed", "survived", ...) and ``ok[i]``
    whether that is as it should be (killed or passed)."""

    ids: list[str]
    checks: list[str]
    found: list[list[bool]]
    outcomes: list[str]
    ok: list[bool]

    def tally(self) -> str:
        """How many rows have each outcome, most common first: "killed 90, passed 6"."""
        return ", ".join(f"{outcome} {n}" for outcome, n in Counter(self.outcomes).most_common())


def kills_matrix(rows: Iterable[Any], checks: Sequence[str] | None = None) -> KillsMatrix:
    """The matrix of ``rows`` (objects with ``id``, ``status`` and ``killed_by``: the mutant
    report's comma-separated short check names, empty unless the row was killed), in their order.
    Columns: ``checks`` in that order (the mutant report passes its ``SHORT_CHECK_NAMES``'
    values), then every other check some row names, in order of first appearance; a column
    stays even when no row names it."""
    rows = list(rows)
    named = [killers(r) for r in rows]
    columns = list(dict.fromkeys([*(checks or ()), *(c for names in named for c in names)]))
    outcomes = [status_word(r.status) for r in rows]
    return KillsMatrix(
        ids=[str(r.id) for r in rows],
        checks=columns,
        found=[[c in names for c in columns] for names in named],
        outcomes=outcomes,
        ok=[o in PASSING_OUTCOMES for o in outcomes],
    )


def killers(row: Any) -> list[str]:
    """The checks in ``row.killed_by`` ("exact,chi2"), without blanks."""
    return [c.strip() for c in (row.killed_by or "").split(",") if c.strip()]


def status_word(status: Any) -> str:
    """A status as its word: an enum's value ("killed"), else its text."""
    return str(getattr(status, "value", status))


def mutant_kills_figure(rows: Iterable[Any], path, checks: Sequence[str] | None = None) -> Path:
    """Draw ``kills_matrix(rows, checks)`` to ``path`` and return it: one row per subject (tall:
    ~0.14 inch a row, small type past 40 rows, so ~100 rows read), a dark cell where that column's
    check found the mutant, rows that passed (the baseline, the controls) shaded green, each row's
    outcome at its right (red when it is not killed or passed). ValueError naming ``path`` for a
    suffix other than .png / .pdf / .svg, or when there are no rows; nothing is written then."""
    fmt = figure_format(path)
    matrix = kills_matrix(rows, checks)
    if not matrix.ids:
        raise ValueError(f"no mutant report rows to plot to {os.fspath(path)!r}")
    n = len(matrix.ids)
    fig = new_figure(width=4.0 + 0.45 * len(matrix.checks), height=1.6 + 0.14 * n)
    draw_matrix(fig.add_subplot(), matrix, fontsize=6 if n > 40 else 8)
    return save(fig, path, fmt)


def cell_colours(matrix: KillsMatrix) -> list[list[str]]:
    """Each cell's colour: found, else the row's shade (passed rows green, others white)."""
    return [
        [FOUND_COLOUR if hit else PASSED_COLOUR if outcome == "passed" else EMPTY_COLOUR for hit in row]
        for row, outcome in zip(matrix.found, matrix.outcomes, strict=True)
    ]


def draw_matrix(ax, matrix: KillsMatrix, fontsize: float) -> None:
    """Lay ``matrix`` out on ``ax``: checks along the top, subjects down the left, outcomes on the
    right."""
    from matplotlib.colors import to_rgb
    from matplotlib.transforms import blended_transform_factory

    n, m = len(matrix.ids), len(matrix.checks)
    image = [[to_rgb(c) for c in row] for row in cell_colours(matrix)]
    if m:
        ax.imshow(image, aspect="auto", interpolation="nearest")
    ax.set_xlim(-0.5, max(m, 1) - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xticks(range(m), matrix.checks, fontsize=fontsize + 1)
    ax.xaxis.tick_top()
    ax.set_yticks(range(n), matrix.ids, fontsize=fontsize, family="monospace")
    ax.set_xticks([x - 0.5 for x in range(1, m)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, n)], minor=True)
    ax.grid(which="minor", color="#bbbbbb", linewidth=0.4)
    ax.tick_params(which="minor", length=0)
    right = blended_transform_factory(ax.transAxes, ax.transData)
    ax.text(1.02, -0.9, "outcome", transform=right, fontsize=fontsize + 1, va="bottom")
    for y, (outcome, ok) in enumerate(zip(matrix.outcomes, matrix.ok, strict=True)):
        ax.text(
            1.02,
            y,
            outcome if ok else outcome.upper(),
            transform=right,
            va="center",
            fontsize=fontsize,
            color="#2e7d32" if ok else WRONG_COLOUR,
            fontweight="normal" if ok else "bold",
        )
    ax.set_title(
        f"which check found which mutant\n(dark cell: found; green row: passed)\n{matrix.tally()}",
        fontsize=fontsize + 3,
        loc="left",
        pad=18,
    )


# ---- figures and files ---------------------------------------------------------------------------


def new_figure(width: float, height: float):
    """A matplotlib ``Figure`` on an Agg canvas (no pyplot state), laid out with constraints."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig, path, fmt: str) -> Path:
    """Write ``fig`` to ``path`` in ``fmt`` atomically (``atomic_path``) and return ``path``."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=150)
    return Path(os.fspath(path))


__all__ = [
    "FORMATS",
    "TOP_OUTCOMES",
    "CounterexampleBars",
    "KillsMatrix",
    "counterexample_bars",
    "counterexample_figure",
    "figure_format",
    "kills_matrix",
    "mutant_kills_figure",
]
