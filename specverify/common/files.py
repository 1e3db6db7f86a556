"""Writing reports: every file specverify writes goes through ``atomic_path``, so a reader never
sees a half-written report (temporary file in the same folder, then ``os.replace``).

The writer replaces regular files only: a device (``/dev/full``), a FIFO, a socket or a folder at
the path is an error (``NotARegularFile``, an OSError) that leaves it as it was. A symbolic link is
written through: the link stays and its target gets the new content, atomically (the temporary
file goes beside the target, then is renamed onto it)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path


class NotARegularFile(OSError):
    """The path names a device, a FIFO, a socket or a folder: specverify never replaces those."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def destination(path) -> Path:
    """Where writing ``path`` lands: the path with every symbolic link resolved (a link is written
    through). NotARegularFile when something other than a regular file is there."""
    real = Path(os.path.realpath(os.fspath(path)))
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return real
    except NotADirectoryError:
        return real  # a component is a file: creating the temporary file reports it
    if not stat.S_ISREG(mode):
        what = _kind(mode)
        raise NotARegularFile(errno.EINVAL, f"{what}, not a regular file: left as it is", os.fspath(path))
    return real


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path`` (beside its target when it is a symbolic link);
    rename it over that file when the body succeeds. NotARegularFile (before anything is written)
    when a device, a FIFO, a socket or a folder is there."""
    path = destination(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; a report is an ordinary file
        destination(path)  # still a regular file (or nothing): checked again just before renaming
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    """The process's umask (read without changing it where /proc allows)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path, text: str) -> None:
    """``text`` as UTF-8 (a lone surrogate, from a sampler's message or a file name, is written as
    its backslash escape rather than failing the write)."""
    data = text.encode("utf-8", "backslashreplace")
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_or_report(path, text: str, what: str) -> int:
    """Write ``text`` atomically when ``path`` is given: 0, or the usage error's exit code (2,
    ``errors.EXIT_CODES``) with one line on stderr when the write fails (the caller has already
    printed the result, so nothing computed is lost)."""
    if not path:
        return 0
    try:
        write_atomically(path, text)
    except OSError as exc:
        import sys

        print(
            f"{what}: could not write {str(path)!r} ({exc.strerror or exc}); the result is printed above",
            file=sys.stderr,
        )
        from ..errors import EXIT_CODES

        return EXIT_CODES["usage"]
    return 0


def json_default(x):
    """``json.dumps(default=...)`` for NumPy scalars and arrays."""
    import numpy as np  # here, not above: checking a report's path loads no NumPy

    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serializable: {type(x).__name__}")
