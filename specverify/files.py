"""Writing reports: every file specverify writes goes through ``atomic_path``, so a reader never
sees a half-written report (temporary file in the same folder, then ``os.replace``)."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; rename it over ``path`` when the body succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; a report is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
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
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_or_report(path, text: str, what: str) -> int:
    """Write ``text`` atomically when ``path`` is given: 0, or 2 with one line on stderr when the
    write fails (the caller has already printed the result, so nothing computed is lost)."""
    if not path:
        return 0
    try:
        write_atomically(path, text)
    except OSError as exc:
        import sys

        print(f"{what}: could not write {str(path)!r} ({exc.strerror}); the result is printed above",
              file=sys.stderr)
        return 2
    return 0


def json_default(x):
    """``json.dumps(default=...)`` for NumPy scalars and arrays."""
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serializable: {type(x).__name__}")
