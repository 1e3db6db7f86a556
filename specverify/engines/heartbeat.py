"""The engines table's progress on stderr, so that a run of minutes is never silent.

``RowProgress`` is given the number of rows; ``run(..., stage=progress.stage,
progress=progress.finished)`` calls it. It writes a line when a row starts, one per stage of the
row (loading, judging, probing, replay), and the row's verdict (or skip line) when it ends, each
prefixed ``specverify engines: [i/n] NAME:``. While a stage is silent, a background thread adds a
``still ...`` line every ``interval`` seconds (``HEARTBEAT_S``), so stderr is never quiet for
longer than that. On a terminal the current stage is a rich status line (spinner, seconds
elapsed) instead of the ``still`` lines.

It writes through its own duplicate of stderr's descriptor, as ``api.check``'s status line does:
the battery forks subject processes, and a child must never meet a lock that this thread holds.
stdout is left to the table or the JSON.
"""

from __future__ import annotations

import sys
import threading
import time

from ..common.command_line import is_terminal, own_stderr

HEARTBEAT_S = 10.0
"""The longest silence on stderr while a row runs (plain lines, not a terminal)."""

PREFIX = "specverify engines"


def skip_reason(row: dict) -> str:
    """A row's skip line without the row's name in front (the progress line names it already)."""
    text = row["skipped"]
    for name in (row["engine"], row["engine"].split("-")[0]):
        if text.startswith(f"{name}: "):
            return text[len(name) + 2 :]
    return text


class RowProgress:
    """Progress lines for ``total`` rows. ``stage(name, words)``: a row starts (a new name, or
    the same name after ``finished``) or enters a stage; ``finished(row)``: its verdict or skip
    line. ``close()`` stops the heartbeat; also a context manager. ``terminal`` None: a rich
    status line exactly when stderr is a terminal."""

    def __init__(self, total: int, interval: float | None = None, terminal: bool | None = None):
        self.total, self.index = total, 0
        self.interval = HEARTBEAT_S if interval is None else interval
        self.stream, self.owned = own_stderr()
        self.lock = threading.Lock()
        self.name = self.words = None  # the running row and its stage; None between rows
        self.stage_t0 = self.last_line = time.monotonic()
        self.status = self.start_status() if (is_terminal(sys.stderr) if terminal is None else terminal) else None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.beat, name="specverify-engines-heartbeat", daemon=True)
        self.thread.start()

    # -------------------------------------------------------------- what run() calls

    def stage(self, name: str, words: str) -> None:
        """Row ``name`` enters the stage ``words`` (its first stage: the row starts)."""
        with self.lock:
            if name != self.name:
                self.begin_row(name)
            self.words, self.stage_t0 = words, time.monotonic()
            self.write(f"{self.where()}{words}")
            self.refresh_status()

    def finished(self, row: dict) -> None:
        """Row ``row`` ended: its verdict and seconds, or its skip line."""
        with self.lock:
            if row["engine"] != self.name:
                self.begin_row(row["engine"])
            if "skipped" in row:
                what = f"skipped: {skip_reason(row)}"
            elif "error" in row:
                what = row["error"]
            else:
                took = f"reused from {row['reused_from']}" if row.get("reused_from") else f"{row.get('seconds')} s"
                release = f"{row['package']} {row['version']}: " if "files_hash" in row else ""  # --versions
                what = f"{release}{row['verdict']} ({took})"
            self.write(f"{self.where()}{what}")
            self.name = self.words = None
            self.refresh_status()

    def close(self) -> None:
        """Stop the heartbeat and the status line; close the duplicate stream."""
        self.stop.set()
        self.thread.join(timeout=5)
        if self.status is not None:
            self.status.stop()
        if self.owned:
            self.stream.close()
        else:
            self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -------------------------------------------------------------- inside

    def begin_row(self, name: str) -> None:
        """The next row, ``name``, is the running one."""
        self.index += 1
        self.name = name

    def where(self) -> str:
        """The line prefix naming the running row: ``specverify engines: [i/n] NAME: ``."""
        return f"{PREFIX}: [{self.index}/{self.total}] {self.name}: "

    def write(self, line: str) -> None:
        """One line on stderr (printed above the status line on a terminal)."""
        if self.status is not None:
            self.status.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            self.stream.write(line + "\n")
            self.stream.flush()
        self.last_line = time.monotonic()

    def still(self) -> str:
        """The current stage and its seconds so far."""
        return f"{self.where()}still {self.words} ({time.monotonic() - self.stage_t0:.0f} s)"

    def refresh_status(self) -> None:
        """The terminal's status line: the running stage and its seconds, or the rows done."""
        if self.status is None:
            return
        if self.name is None or self.words is None:
            text = f"{PREFIX}: {self.index}/{self.total} rows done"
        else:
            text = f"{self.where()}{self.words} ({time.monotonic() - self.stage_t0:.0f} s)"
        self.status.update(self.task, description=text)

    def beat(self) -> None:
        """The heartbeat thread: a ``still`` line after ``interval`` s of silence while a row
        runs (plain), or the status line's text refreshed every second (terminal)."""
        tick = min(1.0, self.interval / 4)
        while not self.stop.wait(tick):
            with self.lock:
                if self.status is not None:
                    self.refresh_status()
                elif self.name is not None and self.words is not None:
                    if time.monotonic() - self.last_line >= self.interval:
                        self.write(self.still())

    def start_status(self):
        """A rich status line (a spinner and the current stage) on the terminal; it leaves
        sys.stdout and sys.stderr alone (no redirection) and is erased when closed."""
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn

        status = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            transient=True,
            console=Console(file=self.stream),
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task = status.add_task(f"{PREFIX}: starting", total=None)
        status.start()
        return status


__all__ = ["HEARTBEAT_S", "RowProgress"]
