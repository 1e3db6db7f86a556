"""What every command line of specverify shares, and nothing heavier: a parser whose usage
errors are one line (``OneLineParser``), output that survives any stream encoding (``emit``) and
the usage exit code. Importing it loads only the standard library, so a usage error of any
``python -m specverify...`` command comes before SciPy, torch or the battery load."""

from __future__ import annotations

import argparse
import sys

EXIT_USAGE = 2
"""A usage error: a bad argument, named on one line of stderr."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (SIGINT)."""
EXIT_TERMINATED = 143
"""Stopped by SIGTERM (``runner.Terminated``)."""


def emit(text: str, stream=None) -> None:
    """Write ``text`` to ``stream`` (stdout) whatever its encoding: what it cannot encode (a lone
    surrogate in a message, "é" under LC_ALL=C) is written as a backslash escape."""
    stream = stream if stream is not None else sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text = text.encode(encoding, "backslashreplace").decode(encoding, "replace")
    except LookupError:
        text = text.encode("ascii", "backslashreplace").decode("ascii")
    stream.write(text)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr, ``PROG: error: MESSAGE``, and
    exit 2 (argparse's own prints the whole usage block first; ``--help`` still prints it). Its
    subparsers are OneLineParsers too (argparse makes them of the parser's own class)."""

    def error(self, message: str):
        emit(f"{self.prog}: error: {message}\n", sys.stderr)
        sys.stderr.flush()
        raise SystemExit(EXIT_USAGE)


def parsed(parse, argv) -> tuple[argparse.Namespace | None, int]:
    """``(parse(argv), 0)``, or ``(None, exit code)`` when parsing stopped: 0 after ``--help``,
    ``EXIT_USAGE`` after a usage error (``OneLineParser`` has printed its one line). ``parse``:
    a parser's ``parse_args`` or a module's ``parse_args(argv)``. Every command's ``main`` starts
    with it: ``args, code = parsed(parse_args, argv)``, then ``if args is None: return code``."""
    try:
        return parse(argv), 0
    except SystemExit as exc:
        return None, 0 if exc.code in (0, None) else EXIT_USAGE


__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "EXIT_USAGE", "OneLineParser", "emit", "parsed"]
