"""What ``python -m specverify.models measure`` and ``train-head`` share: one-line errors and
saving an output file with a fallback.

Exit codes of both commands: 0 done; 2 a usage error or a bad input (a bad option, a model that
cannot be loaded, a head file that is not a head: one line on stderr, before anything long runs
where it can be told up front) or an output file that could not be written (one line on stderr
naming the option; the result is printed first and saved to a fallback file, so nothing computed
is lost; as ``files.write_or_report`` does for every specverify report); 130 interrupted.

Importing this module is cheap (no torch, no polars): the parsers are built and checked before
anything heavy is imported.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from ..common.validation import check_writable_file

FLAGS = {
    "target": "--target",
    "draft": "--draft",
    "target_gguf": "--target-gguf",
    "draft_gguf": "--draft-gguf",
    "device": "--device",
    "head": "--head",
    "n_prompts": "--n-prompts",
    "max_new_tokens": "--max-new-tokens",
    "k": "--k",
    "workload": "--workload",
}
"""Library argument names, as the command line spells them (a message "target: ..." from
``loading`` becomes "--target: ...")."""


def one_line(text: str, limit: int = 1000) -> str:
    """``text`` with every run of whitespace (newlines included) made one space, at most ``limit``
    characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def flagged(message: str) -> str:
    """``message`` with a leading library argument name ("target: ...") as its flag ("--target: ...")."""
    name, sep, rest = message.partition(": ")
    return f"{FLAGS[name]}: {rest}" if sep and name in FLAGS else message


def error(prog: str, message) -> None:
    """One line on stderr: ``PROG: error: MESSAGE``."""
    from ..common.command_line import emit

    emit(f"{prog}: error: {one_line(flagged(str(message)))}\n", sys.stderr)
    sys.stderr.flush()


def suffixed_file_argument(suffixes: tuple[str, ...] | None = None):
    """argparse ``type=`` for an output file: writable (``validation.check_writable_file``) and
    with a suffix (one of ``suffixes`` when given), so a name such as ``myhead`` is refused before
    a long run instead of after it."""

    def parse(text: str) -> str:
        try:
            check_writable_file("file", text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
        suffix = Path(text).suffix
        if not suffix or (suffixes and suffix.lower() not in suffixes):
            wanted = " or ".join(suffixes) if suffixes else "a suffix such as .pt"
            raise argparse.ArgumentTypeError(
                f"{text!r} has {'no suffix' if not suffix else f'the suffix {suffix!r}'}; name the file "
                f"with {wanted} (e.g. {Path(text).stem or 'head'}{(suffixes or ('.pt',))[0]})"
            )
        return text

    return parse


def fallback_path(stem: str, suffix: str) -> str:
    """A new, empty file in the temporary folder (TMPDIR), ``STEM-XXXXXXXX.SUFFIX``."""
    fd, path = tempfile.mkstemp(prefix=f"{stem}-", suffix=suffix)
    os.close(fd)
    return path


def save_or_fall_back(flag: str, path, write, stem: str, suffix: str) -> tuple[str | None, str | None]:
    """``write(path)``; when it raises OSError (a full disk, a folder gone, a permission lost),
    ``write`` again to a fallback file in the temporary folder. Returns (where it was saved or
    None, None) on success, else (the fallback or None, the one-line error naming ``flag``)."""
    try:
        write(path)
        return str(path), None
    except OSError as exc:
        first = f"{flag}: could not write {str(path)!r} ({exc.strerror or exc})"
    fallback = None
    try:
        fallback = fallback_path(stem, suffix)
        write(fallback)
        return fallback, f"{first}; saved to {fallback!r} instead"
    except OSError as exc:
        if fallback and os.path.lexists(fallback):
            try:
                os.unlink(fallback)
            except OSError:
                pass
        return None, (f"{first}, nor a fallback in {tempfile.gettempdir()!r} ({exc.strerror or exc}); nothing saved")
