"""Human tables: fixed-width columns of plain text, no frame decorations, within a width.

``render(heads, rows, width)`` lays out string cells: each column as wide as its widest cell
(or head), right-aligned where asked, separated by ``gap`` spaces. When the natural widths do not
fit in ``width``, the ``shrink`` columns (in that order of priority) give up room down to their
``min_widths``, and a cell too long for its column wraps onto the next line(s), broken after
"/", "-", ", " or a space where it can be, else anywhere. A head or a cell may hold "\\n" for
lines of its own (a two-line column head). Lines carry no trailing spaces.

The mutant report's human table (``specverify.mutants.report.table``) is
``render(heads, cells, width, right={4, 5}, shrink=(3, 0), min_widths={3: 9, 0: 9})``.
"""

from __future__ import annotations

import re

WIDTH = 100
"""The default width of a human table: every line fits in it."""


def render(
    heads, rows, width: int = WIDTH, right=(), shrink=(), min_widths=None, gap: int = 2, rule: bool = True
) -> str:
    """``rows`` (sequences of strings, one per head) under ``heads``, in fixed-width columns;
    a line of dashes under the heads when ``rule``. ``right``: the indices of right-aligned
    columns. ``shrink``: indices of the columns that may be narrowed (and wrapped) to fit
    ``width``, the first narrowed first; ``min_widths``: {index: the least width} (default: the
    widest line of the head). Columns not in ``shrink`` keep their natural width, so a table of
    very wide fixed cells can still exceed ``width``."""
    heads = [str(h) for h in heads]
    cells = [[str(c) for c in row] for row in rows]
    for i, row in enumerate(cells):
        if len(row) != len(heads):
            raise ValueError(f"rows: row {i} has {len(row)} cells for {len(heads)} heads")
    min_widths = dict(min_widths or {})
    natural = [max([_longest(h)] + [_longest(row[i]) for row in cells]) for i, h in enumerate(heads)]
    widths = list(natural)
    shrink = [i for i in dict.fromkeys(shrink)]
    if shrink:
        least = {i: min_widths.get(i, _longest(heads[i])) for i in shrink}
        fixed = sum(w for i, w in enumerate(natural) if i not in least) + gap * (len(heads) - 1)
        room = max(width - fixed, sum(least.values()))
        given = 0
        for n, i in enumerate(shrink):
            rest = sum(natural[j] for j in shrink[n + 1 :])
            widths[i] = max(1, min(natural[i], max(least[i], room - given - rest)))
            given += widths[i]
    right = set(right)
    lines = []
    body = [heads, *([["-" * w for w in widths]] if rule else []), *cells]
    for values in body:
        wrapped = [wrap(v, w) for v, w in zip(values, widths)]
        for k in range(max(map(len, wrapped))):
            parts = [(piece[k] if k < len(piece) else "") for piece in wrapped]
            parts = [p.rjust(w) if i in right else p.ljust(w) for i, (p, w) in enumerate(zip(parts, widths))]
            lines.append((" " * gap).join(parts).rstrip())
    return "\n".join(lines)


def _longest(text: str) -> int:
    return max(len(line) for line in text.split("\n"))


def wrap(text: str, width: int) -> list[str]:
    """``text`` in pieces of at most ``width`` characters, broken after "/", "-", ", " or a space
    where it can be, else anywhere; each "\\n" starts a new piece."""
    width = max(1, int(width))
    out = []
    for part in str(text).split("\n"):
        out += _wrap_line(part, width)
    return out


def _wrap_line(text: str, width: int) -> list[str]:
    pieces, line = [], ""
    for token in re.findall(r"[^/\-, ]*(?:[/\-]|, ?| |$)", text):
        if not token:
            continue
        if line and len(line) + len(token.rstrip()) > width:
            pieces.append(line.rstrip())
            line = ""
        while len(token.rstrip()) > width:
            pieces.append(token[:width])
            token = token[width:]
        line += token
    if line.strip() or not pieces:
        pieces.append(line.rstrip())
    return pieces
