"""Human tables: fixed-width columns of plain text, no frame decorations, within a width.

``render(heads, rows, width)`` lays out string cells: each column as wide as its widest cell
(or head), right-aligned where asked, separated by ``gap`` spaces. When the natural widths do not
fit in ``width``, the ``shrink`` columns (in that order of priority) give up room down to their
``min_widths``, and a cell too long for its column wraps onto the next line(s) (``wrap``): broken
only after a space (", " included) or a "/", so that a hyphenated word stays whole; a single word
longer than the column, and only such a word, is broken (after one of its hyphens where it can
be, else anywhere). A head or a cell may hold "\\n" for lines of its own (a two-line column
head). Lines carry no trailing spaces.

The mutant report's human table (``specverify.mutants.mutant_table.table``) is
``render(heads, cells, width, right={4, 5}, shrink=(3, 0), min_widths={3: W, 0: 9})``, W the
longest single word of its killed_by cells (at least 9).

``counted(n, noun)`` writes a count with its noun in the right number ("1 token", "2 tokens"), for
every human message that counts.
"""

from __future__ import annotations

import re

WIDTH = 100
"""The default width of a human table: every line fits in it."""


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it takes: ``counted(1, "token")`` is "1 token",
    ``counted(3, "token")`` "3 tokens", ``counted(2, "law")`` "2 laws" (``plural``: an irregular
    plural, ``noun + "s"`` by default). Large counts get thousands separators ("4,000 runs")."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


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
    """``text`` in pieces of at most ``width`` characters, each "\\n" starting a new piece. A
    piece ends only after a space (", " included) or a "/": a hyphenated word is never split
    unless it alone is longer than ``width`` (then after its last hyphen that fits, else at
    ``width``). Every character but the spaces at a break is kept, in order."""
    width = max(1, int(width))
    out = []
    for part in str(text).split("\n"):
        out += _wrap_line(part, width)
    return out


def words_of(text: str) -> list[str]:
    """``text`` cut after each space run and each "/": the units ``wrap`` never splits (each
    keeps its trailing spaces or "/")."""
    return [w for w in re.findall(r"[^ /]*(?:/| +|$)", str(text)) if w]


def longest_word(text: str) -> int:
    """The length of the longest unit of ``text`` (``words_of``, trailing spaces aside): the
    narrowest column that ``wrap`` fills without breaking a word."""
    return max((len(w.rstrip()) for w in words_of(text)), default=0)


def _wrap_line(text: str, width: int) -> list[str]:
    pieces, line = [], ""
    for word in words_of(text):
        if line and len(line) + len(word.rstrip()) > width:
            pieces.append(line.rstrip())
            line = ""
        while len(word.rstrip()) > width:
            cut = _cut_of_long_word(word, width)
            pieces.append(word[:cut])
            word = word[cut:]
        line += word
    if line.strip() or not pieces:
        pieces.append(line.rstrip())
    return pieces


def _cut_of_long_word(word: str, width: int) -> int:
    """Where to break a word longer than ``width``: after its last hyphen within ``width``
    characters, else at ``width``."""
    return word.rfind("-", 0, width) + 1 or width
