"""What one row of the engines table is: ``Engine`` (an engine function, how it is loaded, wrapped
and judged) and ``Built`` (what loading it gives: the subject, a probe, how the probe controls
the coins). Plain data; the rows themselves are in the ``*_rows`` modules, one per engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Engine:
    """One row of the table: an engine function, how it is loaded, wrapped and judged."""

    name: str  # --engine NAME
    package: str
    version: str
    function: str
    interface: str  # "kernel" | "round"
    expected: str  # "exact" | "lossy" | "different-rule"
    randomness: str
    build: Callable | None = None  # (download: bool) -> Built; raises loader.Unavailable (a skip line)
    budgets: dict = field(default_factory=dict)  # budget name -> overrides (see judge())
    skip: str | None = None  # a fixed skip line (no wheel here / CUDA only)
    uniform_range: str = "[0, 1)"
    files: tuple[str, ...] = ()  # the files of the wheel the row unpacks (pins)
    needs: tuple[str, ...] = ("torch",)  # what running the row needs here, besides its wheel
    recheck: Callable | None = None  # (engine, download) -> the skip line of a ``skip`` row that looks for its wheel
    since: str = ""  # the first release ``--versions all`` judges ("" : the row has no version table)
    at: Callable | None = None  # (version) -> this row at another release (``--versions``)


@dataclass
class Built:
    """A loaded row: the wrapped subject the battery judges, the probe (None: the row is not
    probed) and how the probe controls the coins, in words."""

    subject: Callable
    probe: Callable | None  # (x, q_row, p_row, coin, n) -> list[(accepted, token)]
    coins: str  # how the probes control the coins
    feeds: str = ""  # what the wrapper feeds the engine's function, checked by its contract
    standins: str = ""  # the engine modules stood in for while loading (wheel_import), in words
    function: Callable | None = None  # the engine's function (its signature goes in the row)
