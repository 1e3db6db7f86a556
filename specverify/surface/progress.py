"""``check``'s progress on stderr while it runs: a status line redrawn on a terminal
(``StatusLine``, rich) or plain periodic lines for logs and pipes (``ProgressLines``).

A forecast (words said with the seconds they forecast: a battery's, before its sampling starts)
is printed at once as a line of its own, on a terminal or not, and every progress line after it
ends with the finish it forecasts (``eta_words``: "ETA 04:35:12", local time).

Both write through their own duplicate of stderr's descriptor or from a thread of the parent
only: a subject forked meanwhile never meets a lock they hold.
"""

from __future__ import annotations

import sys

from ..common.command_line import emit, is_terminal, own_stderr

PROGRESS_LINE_SECONDS = 10.0
"""How often ``progress="lines"`` repeats the stage that is running, with the time elapsed."""


def eta_words(finish: float | None) -> str:
    """`` ETA HH:MM:SS`` (local time) of a forecast finish (a ``time.time()`` value), or nothing."""
    import time

    return "" if finish is None else f", ETA {time.strftime('%H:%M:%S', time.localtime(finish))}"


def finish_of(seconds) -> float | None:
    """The wall-clock finish (``time.time()``) of a forecast of ``seconds`` from now; None for
    words that forecast nothing (``seconds`` False) or no pace (None)."""
    import time

    return None if seconds is False or seconds is None else time.time() + float(seconds)


class ProgressLines:
    """``progress="lines"``: a plain line on stderr every ``PROGRESS_LINE_SECONDS``, the stage
    running and the time elapsed (for logs and pipes, where a status line cannot be redrawn;
    a check shorter than that prints nothing), from a daemon thread that ``stop`` ends. The
    thread writes through its own stream on a duplicate of stderr's descriptor (``own_stderr``):
    a subject forked while it writes never inherits a held lock of ``sys.stderr``."""

    def __init__(self, target: str):
        import threading

        self.words, self.started, self.done = f"checking {target}", 0.0, threading.Event()
        self.finish: float | None = None  # the forecast's finish (``finish_of``), once said
        self.thread = threading.Thread(target=self._repeat, name="specverify-progress", daemon=True)
        self.stream, self.owned = own_stderr()

    def _line(self) -> None:
        import time

        elapsed = time.monotonic() - self.started
        emit(f"specverify: {self.words} ({elapsed:.0f} s{eta_words(self.finish)})\n", self.stream)
        self.stream.flush()

    def _repeat(self) -> None:
        while not self.done.wait(PROGRESS_LINE_SECONDS):
            self._line()

    def start(self) -> None:
        import time

        self.started = time.monotonic()
        self.thread.start()

    def say(self, words: str, seconds=False) -> None:
        """The stage running now; with ``seconds`` (a forecast; None: at no measured pace) the
        words are printed at once and later lines show their finish."""
        self.words = words
        if seconds is not False:
            self.finish = finish_of(seconds)
            emit(f"specverify: {words}\n", self.stream)
            self.stream.flush()

    def stop(self) -> None:
        self.done.set()
        if self.thread.is_alive():
            self.thread.join()
        if self.owned:
            self.stream.close()
            self.owned = False


class StatusLine:
    """``check``'s status line on stderr: a spinner, the target and what runs, the time elapsed
    (rich, erased when done). Enabled None: only when stderr is a terminal; "lines": plain
    periodic lines (``ProgressLines``) wherever stderr goes. It writes through its own duplicate of
    stderr's descriptor, so a subject forked meanwhile never meets a lock it holds."""

    def __init__(self, target: str, enabled: bool | str | None):
        self.bar = self.stream = None
        self.owned = False
        self.finish: float | None = None  # the forecast's finish (``finish_of``), once said
        self.lines = ProgressLines(target) if enabled == "lines" else None
        if self.lines is not None:
            return
        if enabled is None:
            enabled = is_terminal(sys.stderr)
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.table import Column

        self.stream, self.owned = own_stderr()
        text = TextColumn(
            "specverify: {task.description}",
            markup=False,
            table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"),
        )
        self.bar = Progress(
            SpinnerColumn(),
            TimeElapsedColumn(),
            text,
            expand=True,
            transient=True,
            console=Console(file=self.stream),
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task = self.bar.add_task(f"checking {target}", total=None)

    def start(self) -> None:
        if self.lines is not None:
            self.lines.start()
        if self.bar is not None:
            self.bar.start()

    def say(self, words: str, seconds=False) -> None:
        """The stage running now; with ``seconds`` a forecast (``ProgressLines.say``): printed
        at once above the status line, whose words then end with its finish."""
        if self.lines is not None:
            self.lines.say(words, seconds)
        if self.bar is not None:
            if seconds is not False:
                self.finish = finish_of(seconds)
                self.bar.console.print(f"specverify: {words}", markup=False, highlight=False)
            self.bar.update(self.task, description=words + eta_words(self.finish))

    def stop(self) -> None:
        if self.lines is not None:
            self.lines.stop()
        if self.bar is not None:
            try:
                self.bar.stop()
            finally:
                self.bar = None
                if self.owned:
                    assert self.stream is not None, "an owned stream is open until stop"
                    self.stream.close()


__all__ = ["PROGRESS_LINE_SECONDS", "ProgressLines", "StatusLine", "eta_words", "finish_of"]
