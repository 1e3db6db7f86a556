"""The capture file: where the subject's stdout and stderr go, and the excerpt reports show.

What the child prints never reaches the parent's process: its file descriptors 1 and 2 (so C-level
output too) go to a capture file (``redirect_output``, in the subject's process before the subject
loads), Python's streams as UTF-8 whatever the locale; ``excerpt`` reads its head and tail.

The capture file is deleted by ``close``, when the runner is collected, and at interpreter exit (a
``weakref.finalize``), so a crash or Ctrl-C leaves no ``specverify-subject-*.log`` either; a
host killed outright (SIGKILL, or SIGTERM where no handler is installed: a pytest run stopped by
``timeout``) runs no finalizer, so the next process to make a capture file deletes those whose
maker is gone (``remove_orphan_captures``).
"""

from __future__ import annotations

import os
import sys
import tempfile

from .process_tree import process_gone

OUTPUT_EXCERPT_CHARS = 2000
"""How much of the subject's captured stdout/stderr reports show (its head and its tail)."""


def new_capture_file() -> str:
    """A new, empty capture file of this process (``capture_prefix``); the orphans of killed
    makers are removed first (``remove_orphan_captures``)."""
    remove_orphan_captures()
    fd, path = tempfile.mkstemp(prefix=capture_prefix(os.getpid()), suffix=".log")
    os.close(fd)
    return path


def redirect_output(capture_path: str) -> None:
    """In the subject's process: file descriptors 1 and 2 append to ``capture_path``, and Python's
    streams write to them as UTF-8 (``utf8_streams``)."""
    fd = os.open(capture_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    utf8_streams()


def excerpt(capture_path: str | None, chars: int = OUTPUT_EXCERPT_CHARS) -> str:
    """What the subject printed (stdout and stderr together): the first and the last
    ``chars // 2`` characters when there is more; "" without a file."""
    if capture_path is None:
        return ""
    try:
        with open(capture_path, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    if len(text) <= chars:
        return text
    return f"{text[: chars // 2]}\n[... {len(text) - chars} characters ...]\n{text[-(chars // 2) :]}"


def utf8_streams() -> None:
    """Python's stdout and stderr as UTF-8 on file descriptors 1 and 2 (the capture file), line
    buffered: a print of "é" works under LC_ALL=C, and what was printed is there when read."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        try:
            setattr(sys, name, open(fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False))
        except (OSError, ValueError):
            pass


def flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the subject may have replaced or closed them
            pass


def capture_prefix(pid: int) -> str:
    """The name every capture file made by process ``pid`` starts with (in ``tempfile.gettempdir()``)."""
    return f"specverify-subject-{pid}-"


def remove_captures_of(pid: int) -> list[str]:
    """Delete the capture files process ``pid`` made and could not delete itself (it was killed
    with SIGKILL, which runs no finalizer); returns their paths. For a parent that kills its
    worker processes (the mutant report on Ctrl-C)."""
    folder, prefix = tempfile.gettempdir(), capture_prefix(pid)
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".log")]
    except OSError:
        return removed
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
            removed.append(os.path.join(folder, name))
        except OSError:
            pass
    return removed


_SWEPT: set[int] = set()
"""The processes that have swept the capture folder for orphans (``remove_orphan_captures``)."""


def remove_orphan_captures() -> list[str]:
    """Delete the capture files whose maker is no longer running (a host killed by SIGKILL or a
    default SIGTERM, e.g. a pytest run stopped by ``timeout``, which runs no finalizer); returns
    their paths. Done once per process, when it makes its first capture file: what one killed run
    leaves, the next one removes. A maker that cannot be asked (another user's process) counts as
    running; a file that cannot be deleted is left."""
    if os.getpid() in _SWEPT:
        return []
    _SWEPT.add(os.getpid())
    folder, head = tempfile.gettempdir(), capture_prefix(0)[:-2]  # "specverify-subject-"
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    makers = {
        int(pid)
        for pid in (n[len(head) :].split("-", 1)[0] for n in names if n.startswith(head) and n.endswith(".log"))
        if pid.isdigit()
    }
    removed = []
    for pid in sorted(makers):
        if process_gone(pid):
            removed += remove_captures_of(pid)
    return removed


__all__ = [
    "OUTPUT_EXCERPT_CHARS",
    "capture_prefix",
    "excerpt",
    "flush_streams",
    "new_capture_file",
    "redirect_output",
    "remove_captures_of",
    "remove_orphan_captures",
    "utf8_streams",
]
