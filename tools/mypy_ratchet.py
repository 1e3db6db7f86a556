"""The type-check ratchet: mypy's errors per file may only fall.

Runs mypy with ``pyproject.toml``'s ``[tool.mypy]`` (its ``files``: the package root's command and
lazy names, ``battery/``, ``interfaces/``, ``laws/``, ``samplers/``, ``surface/``), counts the
errors of each file, and compares the counts with ``mypy-baseline.json`` (file -> count, the files
that still have errors). It exits 1 when

- a file has more errors than its baseline, or a file that is not in the baseline has any (a new
  error: fix it; the message lists each);
- a file has fewer errors than its baseline (the baseline is lowered by hand or with ``--update``,
  so that a fixed error cannot come back unseen: the ratchet only turns down);
- the baseline names a module held to strict mode (a ``[[tool.mypy.overrides]]`` entry of
  pyproject.toml with ``disallow_untyped_defs = true``): those are held at zero, never excused.

``--update`` writes the baseline down to the current counts, refusing when a count rose.
``--reset`` writes the current counts whatever they are, but for the strict modules, whose errors
still fail (after a merge that moved or split modules; the diff of mypy-baseline.json shows what
was accepted).

Exit status: 0 the counts match, 1 they do not, 2 mypy itself failed (a crash or a config error).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "mypy-baseline.json"
PYPROJECT = ROOT / "pyproject.toml"
ERROR_LINE = re.compile(r"^(?P<file>[^:\s][^:]*\.pyi?):\d+(?::\d+)?: error: ")


def run_mypy() -> tuple[list[str], int]:
    """mypy's report lines and exit status, run in this process on pyproject.toml's configuration."""
    from mypy import api

    os.chdir(ROOT)  # pyproject's `files` and the baseline's paths are relative to the repository root
    stdout, stderr, status = api.run(["--config-file", str(PYPROJECT), "--no-pretty", "--no-error-summary"])
    if stderr.strip():
        print(stderr, file=sys.stderr, end="")
    return stdout.splitlines(), status


def count_errors(lines: list[str]) -> dict[str, int]:
    """File (as mypy names it, relative to the repository root) -> its number of errors; notes do not count."""
    counts: Counter[str] = Counter()
    for line in lines:
        match = ERROR_LINE.match(line)
        if match:
            counts[Path(match["file"]).as_posix()] += 1
    return dict(sorted(counts.items()))


def strict_files() -> set[str]:
    """The files of the modules that pyproject.toml holds to strict mode (``disallow_untyped_defs = true``)."""
    config = tomllib.loads(PYPROJECT.read_text())
    files = set()
    for override in config["tool"]["mypy"].get("overrides", []):
        if not override.get("disallow_untyped_defs"):
            continue
        modules = override["module"]
        for module in [modules] if isinstance(modules, str) else modules:
            path = ROOT / Path(*module.split("."))
            files.add((path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).relative_to(ROOT).as_posix())
    return files


def compare(counts: dict[str, int], baseline: dict[str, int], strict: set[str]) -> tuple[list[str], list[str]]:
    """(rises, falls): one line per file whose count is above / below what the baseline allows
    (absent from the baseline, or held to strict mode: 0)."""
    rises, falls = [], []
    for file in sorted(set(counts) | set(baseline)):
        now, allowed = counts.get(file, 0), 0 if file in strict else baseline.get(file, 0)
        held = " (held to strict mode: zero)" if file in strict else ""
        if now > allowed:
            rises.append(f"  {file}: {now} errors, baseline {allowed}{held}")
        elif now < allowed:
            falls.append(f"  {file}: {now} errors, baseline {allowed}")
    return rises, falls


def write_baseline(counts: dict[str, int], strict: set[str]) -> dict[str, int]:
    """Writes the counts of the files not held to strict mode; returns what it wrote."""
    written = {file: count for file, count in sorted(counts.items()) if file not in strict}
    BASELINE.write_text(json.dumps(written, indent=2) + "\n")
    return written


def error_lines(lines: list[str], report: list[str]) -> list[str]:
    """mypy's error lines of the files a report names."""
    files = {line.strip().split(": ")[0] for line in report}
    return [line for line in lines if (match := ERROR_LINE.match(line)) and match["file"] in files]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--update", action="store_true", help="lower the baseline to the current counts (refused when one rose)"
    )
    mode.add_argument("--reset", action="store_true", help="write the current counts as the baseline, rises included")
    args = parser.parse_args(argv)

    lines, status = run_mypy()
    counts = count_errors(lines)
    if status not in (0, 1) or (status == 1 and not counts):
        print("\n".join(lines))
        print(f"mypy failed (exit {status}) before reporting errors: see above", file=sys.stderr)
        return 2
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    strict = strict_files()
    if args.reset:
        written = write_baseline(counts, strict)
        print(
            f"mypy-baseline.json written: {sum(written.values())} errors in {len(written)} files (was {sum(baseline.values())})"
        )
        baseline = written
    rises, falls = compare(counts, baseline, strict)
    total, allowed = sum(counts.values()), sum(baseline.values())
    if rises:
        print(*error_lines(lines, rises), sep="\n")
        print(
            f"\nmypy errors rose ({total} now, the baseline allows {allowed}); fix the errors above, in:",
            *rises,
            sep="\n",
        )
        return 1
    excused = sorted(strict & set(baseline))
    if args.update and (falls or excused):
        written = write_baseline(counts, strict)
        print(f"mypy-baseline.json lowered: {sum(written.values())} errors in {len(written)} files (was {allowed})")
        return 0
    if excused:
        print(
            "mypy-baseline.json names modules held to strict mode, which have no errors to excuse; remove:",
            *excused,
            sep="\n  ",
        )
        return 1
    if falls:
        print(f"mypy errors fell ({total} now, the baseline allows {allowed}): lower the baseline with", end=" ")
        print("`python tools/mypy_ratchet.py --update` and commit mypy-baseline.json:", *falls, sep="\n")
        return 1
    print(
        f"mypy ratchet: {total} errors in {len(counts)} files, as mypy-baseline.json allows; {len(strict)} modules strict and clean"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
