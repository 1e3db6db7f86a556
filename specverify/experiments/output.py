"""Where an experiment's figure and tables go: one PNG, one markdown page and one CSV per table.

Matplotlib runs on the Agg backend (no display); PNGs are written at ``DPI`` so that each stays
well under 150 KB. Tables are polars DataFrames: the CSV keeps full precision, the markdown
shows floats to a few significant digits (polars' MARKDOWN table formatting).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)
import polars as pl  # noqa: E402

from ..common.files import atomic_path, write_atomically  # noqa: E402

DPI = 100
DEFAULT_OUT = Path("docs/figures")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass
class Table:
    """A table, its file suffix ("" for the experiment's main CSV) and its markdown float format."""

    frame: pl.DataFrame
    suffix: str = ""
    float_format: str = "{:.4g}"
    title: str = ""
    shown: pl.DataFrame | None = None  # the rows the markdown shows (default: all)


@dataclass
class ExperimentOutput:
    name: str
    png: Path
    markdown: Path
    csv: list[Path]
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    seconds: float = 0.0

    def describe(self) -> str:
        files = ", ".join(str(p) for p in [self.png, self.markdown, *self.csv])
        return f"{self.name}: wrote {files} ({self.seconds:.1f} s)"


def check_out_dir(out_dir) -> Path:
    """The output folder as a Path, created if missing; ValueError if it is not a folder."""
    if not isinstance(out_dir, (str, os.PathLike)):
        raise ValueError(f"out_dir: expected a path, got {type(out_dir).__name__}")
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(f"out_dir: {path} exists and is not a directory")
    path.mkdir(parents=True, exist_ok=True)
    return path


def figure(ncols: int = 1, size=(7.5, 4.8), **kwargs):
    """A new figure with ``ncols`` axes side by side."""
    fig, axes = plt.subplots(1, ncols, figsize=size, **kwargs)
    return fig, axes


def markdown_table(frame: pl.DataFrame, float_format: str = "{:.4g}") -> str:
    """The frame as a GitHub markdown table, floats formatted with ``float_format``."""
    shown = frame.with_columns(
        pl.col(name).map_elements(float_format.format, return_dtype=pl.String)
        for name, dtype in frame.schema.items()
        if dtype.is_float()
    )
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=-1,
        tbl_cols=-1,
        fmt_str_lengths=1000,
        tbl_width_chars=30_000,
    ):
        return str(shown)


def write_outputs(
    out_dir, name: str, title: str, caption: str, fig, tables: list[Table], seconds: float = 0.0
) -> ExperimentOutput:
    """Write ``name``.png, ``name``.md and ``name``[-suffix].csv for each table; close fig."""
    out = check_out_dir(out_dir)
    png = out / f"{name}.png"
    with atomic_path(png) as tmp:
        fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format="png")
    plt.close(fig)
    csvs, frames, sections = [], {}, []
    for table in tables:
        stem = name + (f"-{table.suffix}" if table.suffix else "")
        path = out / f"{stem}.csv"
        with atomic_path(path) as tmp:
            table.frame.write_csv(tmp)
        csvs.append(path)
        frames[table.suffix or name] = table.frame
        heading = f"### {table.title}\n\n" if table.title else ""
        shown = table.frame if table.shown is None else table.shown
        sections.append(f"{heading}{markdown_table(shown, table.float_format)}\n\nCSV: [{path.name}]({path.name})\n")
    md = out / f"{name}.md"
    write_atomically(
        md,
        f"# {title}\n\n![{title}]({png.name})\n\n{caption.strip()}\n\n"
        + "\n".join(sections)
        + "\nRegenerate: `python -m specverify.experiments "
        + name
        + "`.\n",
    )
    return ExperimentOutput(name, png, md, csvs, frames, seconds)
