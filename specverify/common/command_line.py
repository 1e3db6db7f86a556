"""What every command line of specverify shares, and nothing heavier: a parser whose usage
errors are one line (``OneLineParser``), output that survives any stream encoding (``emit``),
names for the exit codes of ``specverify.errors.EXIT_CODES``, and the dispatch of a command with
subcommands (``dispatch``: ``specverify`` and ``specverify bench``). Importing it loads only the
standard library, so a usage error of any ``python -m specverify...`` command comes before SciPy,
torch or the battery load."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import EXIT_CODES

EXIT_USAGE = EXIT_CODES["usage"]
"""A usage error: a bad argument, named on one line of stderr (``specverify.errors.EXIT_CODES``)."""
EXIT_ENVIRONMENT = EXIT_CODES["environment"]
"""An environment error: the subject cannot run here (no CUDA, a missing extra or package); the
message says what to install or where to run it. Not evidence about exactness."""
EXIT_INTERRUPTED = EXIT_CODES["interrupted"]
"""Stopped by Ctrl-C (SIGINT)."""
EXIT_TERMINATED = EXIT_CODES["terminated"]
"""Stopped by SIGTERM (``battery.signals.Terminated``)."""


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


def own_stderr():
    """A text stream on a duplicate of stderr's descriptor, or stderr itself when it has none (a
    test's capture); (stream, whether it is ours to close). A thread that writes progress through
    it never holds a lock of ``sys.stderr`` that a subject forked meanwhile would inherit."""
    import io
    import os

    try:
        fd = os.dup(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return sys.stderr, False
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    return os.fdopen(fd, "w", encoding=encoding, errors="backslashreplace"), True


def is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (False when it cannot say: replaced, closed, None)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class DefaultsShown(argparse.HelpFormatter):
    """Help that shows each option's default: `` (default: X)`` after the text of an option that
    takes a value and has a default (not None), unless the text already says its default. As
    argparse's ``ArgumentDefaultsHelpFormatter``, without its "(default: None)" and
    "(default: False)" on options that have none, and without saying a default twice."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.nargs == 0 or "default" in text:
            return text
        if action.default is None or action.default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"


def has_shown_default(action: argparse.Action) -> bool:
    """Whether ``action`` has a default ``DefaultsShown`` shows (an option that takes a value)."""
    return bool(action.option_strings) and action.nargs != 0 and action.default not in (None, argparse.SUPPRESS)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr, ``PROG: error: MESSAGE``, and
    exit 2 (argparse's own prints the whole usage block first; ``--help`` still prints it). Its
    subparsers are OneLineParsers too (argparse makes them of the parser's own class). Its help
    shows every option's default (``DefaultsShown``)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsShown)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        emit(f"{self.prog}: error: {message}\n", sys.stderr)
        sys.stderr.flush()
        raise SystemExit(EXIT_USAGE)


Parsed = TypeVar("Parsed")
"""What a command's parser returns (an ``argparse.Namespace``, or a command's own record)."""


def parsed(parse: Callable[[Any], Parsed], argv: Any) -> tuple[Parsed | None, int]:
    """``(parse(argv), 0)``, or ``(None, exit code)`` when parsing stopped: 0 after ``--help``,
    ``EXIT_USAGE`` after a usage error (``OneLineParser`` has printed its one line). ``parse``:
    a parser's ``parse_args`` or a module's ``parse_args(argv)``. Every command's ``main`` starts
    with it: ``args, code = parsed(parse_args, argv)``, then ``if args is None: return code``."""
    try:
        return parse(argv), 0
    except SystemExit as exc:
        return None, 0 if exc.code in (0, None) else EXIT_USAGE


def exit_with(code: int) -> None:
    """End the process with ``code``. After Ctrl-C (``EXIT_INTERRUPTED``) a process pool's workers
    are dead, so the exit skips joining its threads (``os._exit``) once the output is flushed."""
    if code == EXIT_INTERRUPTED:
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def command_usage(prog: str, what: str, commands: dict, default: str | None = None) -> str:
    """The ``--help`` text of a command with subcommands: one line per subcommand (``commands``:
    name -> (module, one line)), and which one runs when none is named (``default``)."""
    width = max(map(len, commands))
    lines = [f"usage: {prog} {{{','.join(commands)}}} ...", "", what, "", "commands:"]
    lines += [f"  {name:<{width}}  {line}" for name, (_, line) in commands.items()]
    if default:
        lines += ["", f"{prog} [OPTIONS]: the {default} command's options, without its name"]
    lines += ["", f"{prog} COMMAND --help: that command's options"]
    return "\n".join(lines) + "\n"


def dispatch(prog: str, what: str, commands: dict, argv, default: str | None = None) -> int:
    """Run the subcommand ``argv[0]`` names: ``main(argv[1:])`` of its module (imported only now,
    so a usage error costs no heavy import), and return its exit code. ``--help`` prints
    ``command_usage``; no name, or an option first, runs ``default`` with the whole ``argv``
    (a usage error when there is none); an unknown name is a one-line usage error, exit 2."""
    import importlib

    argv = list(argv)
    if argv and argv[0] in ("-h", "--help", "help"):
        emit(command_usage(prog, what, commands, default))
        return 0
    if argv and argv[0] in commands:
        name, rest = argv[0], argv[1:]
    elif default and (not argv or argv[0].startswith("-")):
        name, rest = default, argv
    else:
        got = repr(argv[0]) if argv else "nothing"
        emit(f"{prog}: error: expected a command ({', '.join(commands)}; --help lists them), got {got}\n", sys.stderr)
        return EXIT_USAGE
    return importlib.import_module(commands[name][0]).main(rest)


__all__ = [
    "EXIT_ENVIRONMENT",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "DefaultsShown",
    "OneLineParser",
    "command_usage",
    "dispatch",
    "emit",
    "exit_with",
    "has_shown_default",
    "parsed",
]
