"""The mutant report's progress on stderr while its subjects run: rich's transient bar on a
terminal, plain ``mutants: DONE/TOTAL done, S s`` lines elsewhere (a log, a pipe, CI), nothing
when asked; stdout is left to the report."""

from __future__ import annotations

import sys
import time
from concurrent.futures import FIRST_COMPLETED, wait

from ..common.command_line import is_terminal

PROGRESS_EVERY_S = 10.0
"""How often a report whose stderr is not a terminal says how far it got (``PlainProgress``)."""


def completed(futures, poll_s: float = 0.1, on_wait=None):
    """Yield futures as they finish, waking every ``poll_s`` so that Ctrl-C is seen at once (and
    calling ``on_wait()``, when given, at each wake)."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=poll_s, return_when=FIRST_COMPLETED)
        if on_wait is not None:
            on_wait()
        yield from done


def progress_mode_of(progress: bool | str | None) -> str | None:
    """The progress mode ``run_all`` shows: "bar", "lines" or None (True is "bar", False None)."""
    if progress is True:
        return "bar"
    if progress in (None, False):
        return None
    if progress not in ("bar", "lines"):
        raise ValueError(f"progress: must be bar, lines or None, got {progress!r}")
    return progress


def progress_mode_for(stream) -> str:
    """ "bar" (rich's, redrawn in place) on a terminal; "lines" (plain, one per ~10 s) where
    ``stream`` is a file or a pipe, which a redrawn bar would fill with escape codes."""
    return "bar" if is_terminal(stream) else "lines"


def with_progress(items, mode: str | None, total: int | None = None, lines=None):
    """``items`` as they come, showing ``mode``'s progress: rich's transient bar ("bar"),
    plain lines ("lines": ``lines``, or a new ``PlainProgress``, advanced after each item), or
    none."""
    if mode == "bar":
        from rich.progress import track

        yield from track(items, description="mutants", total=total, transient=True, console=_stderr_console())
    elif mode == "lines":
        lines = lines or PlainProgress(total if total is not None else len(items))
        for item in items:
            yield item
            lines.advance()
    else:
        yield from items


class PlainProgress:
    """Progress where stderr is not a terminal (a log file, a pipe, CI): a plain line
    ``mutants: DONE/TOTAL done, S s`` on ``stream`` (default stderr) once at least ``every_s``
    seconds (default ``PROGRESS_EVERY_S``) passed since the start or the last line, checked when a
    subject finishes (``advance``) and while waiting (``tick``); when every subject is done, a
    last line, if any line came before (a short report stays silent). stdout is left to the
    report."""

    def __init__(self, total: int, every_s: float | None = None, stream=None, clock=time.monotonic):
        self.total, self.done, self.lines = total, 0, 0
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.stream, self.clock = stream, clock
        self.start = self.last = clock()

    def advance(self) -> None:
        """One more subject done: a line when it is time, or when it was the last and lines came before."""
        self.done += 1
        if self.done >= self.total and self.lines:
            self.say()
        else:
            self.tick()

    def tick(self) -> None:
        """A line if ``every_s`` seconds passed since the last one (or the start)."""
        if self.clock() - self.last >= self.every_s:
            self.say()

    def say(self) -> None:
        now = self.clock()
        print(
            f"mutants: {self.done}/{self.total} done, {now - self.start:.0f} s",
            file=self.stream or sys.stderr,
            flush=True,
        )
        self.last, self.lines = now, self.lines + 1

    def stop(self) -> None:
        """Nothing to clear (the lines stay): ``RayProgress``'s interface."""


class RayProgress:
    def __init__(self, total: int):
        from rich.progress import Progress

        self.progress = Progress(console=_stderr_console(), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("mutants (ray)", total=total)

    def advance(self) -> None:
        self.progress.advance(self.task)

    def stop(self) -> None:
        self.progress.stop()


def _stderr_console():
    from rich.console import Console

    return Console(file=sys.stderr)
