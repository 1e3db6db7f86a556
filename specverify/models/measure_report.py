"""What ``specverify models measure`` writes from its rows: a polars table of every field
(``table``), the human text (``human_report``: the pair, c, a fixed-width table of
``HUMAN_COLUMNS`` and its legend) and JSON (``json_safe``: NaN and inf as null;
``write_json_atomic``)."""

from __future__ import annotations

import json

import numpy as np

from ..common.files import json_default, write_atomically


def table(rows: list[dict]):
    """The rows as a polars DataFrame of 17 columns (floats to 3 decimals)."""
    import polars as pl

    cols = [
        "workload",
        "mode",
        "drafter",
        "k",
        "alpha_predicted",
        "alpha_measured",
        "c",
        "v_k",
        "tokens_per_pass_predicted",
        "tokens_per_pass_measured",
        "speedup_predicted",
        "speedup_measured",
        "tokens_per_s",
        "target_only_tokens_per_s",
        "hf_assisted_tokens_per_s",
        "vs_hf_assisted",
        "greedy_identical",
    ]
    return pl.DataFrame([{c: r.get(c) for c in cols} for r in rows]).with_columns(pl.col(pl.Float64).round(3))


HUMAN_COLUMNS = (  # (head, field, format): what the human table shows; --json has every field
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("drafter", "drafter", "{}"),
    ("k", "k", "{}"),
    ("alpha\npred", "alpha_predicted", "{:.3f}"),
    ("alpha\nmeas", "alpha_measured", "{:.3f}"),
    ("tok/\npass", "tokens_per_pass_measured", "{:.2f}"),
    ("speedup\npred", "speedup_predicted", "{:.2f}"),
    ("speedup\nmeas", "speedup_measured", "{:.2f}"),
    ("tok/s", "tokens_per_s", "{:.1f}"),
    ("vs HF\nassist", "vs_hf_assisted", "{:.2f}"),
    ("greedy\nsame", "greedy_identical", "{}"),
)


HUMAN_LEGEND = (
    "k: the drafts per round most used; alpha: acceptance rate, pred(icted) from the teacher-forced "
    "target and draft, meas(ured) in the run; tok/pass: tokens per target pass (measured); speedup: "
    "over target-only decoding; vs HF assist: tokens/s over HF assisted generation; greedy same: "
    "greedy output identical to target-only's. Every field (c, v_k, k_mean, near ties, ...): --json."
)


def _cell(value, fmt: str) -> str:
    if value is None or (isinstance(value, (float, np.floating)) and not np.isfinite(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    return fmt.format(value)


def human_table(rows: list[dict], width: int = 100) -> str:
    """The rows as a fixed-width text table (``specverify.common.tables.render``) of the columns in
    ``HUMAN_COLUMNS``, every line within ``width``: numbers right-aligned, the drafter and
    workload columns wrapped when they would not fit; an empty cell is a missing value. c, the
    same for every row drafted by the draft model, goes in ``human_report``'s heading."""
    from ..common.tables import render

    heads = [h for h, _, _ in HUMAN_COLUMNS]
    cells = [[_cell(r.get(f), fmt) for _, f, fmt in HUMAN_COLUMNS] for r in rows]
    right = set(range(3, len(HUMAN_COLUMNS) - 1))
    return render(heads, cells, width, right=right, shrink=(2, 0), min_widths={2: 7, 0: 4}, gap=2)


def human_report(result: dict, width: int = 100) -> str:
    """What ``measure`` prints without --json: the pair, c, the table, the legend; every line
    within ``width``."""
    import textwrap

    rows = result["rows"]
    cs = sorted({r["c"] for r in rows if r.get("drafter", "").startswith("model") and r.get("c") is not None})
    lines = [f"pair: {result['pair']} on {result['device']} ({result['dtype']})"]
    if cs:
        lines.append(f"c (draft step / target step): {', '.join(f'{c:.3f}' for c in cs)}")
    lines += [human_table(rows, width), HUMAN_LEGEND]
    return "\n".join(
        part
        for text in lines
        for part in ([text] if "\n" in text else textwrap.wrap(text, width, break_on_hyphens=False) or [""])
    )


def json_safe(obj):
    """NaN and inf become null (JSON has no such numbers); NumPy scalars become Python ones."""
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    return obj


def write_json_atomic(path, obj) -> None:
    """Write JSON to a temp file in the same folder, then os.replace it over ``path``."""
    write_atomically(path, json.dumps(json_safe(obj), indent=2, default=json_default))
