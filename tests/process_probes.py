"""What the hostile-subject tests look for in /proc: processes a subject left behind."""

from pathlib import Path


def processes_with(marker: str) -> list[int]:
    """The pids of processes whose command line holds ``marker`` (zombies included)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids
