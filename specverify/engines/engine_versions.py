"""A verdict per release: one row judged at several releases of its engine
(``specverify engines --engine NAME --versions 0.8.5,0.10.2,...`` or ``--versions all``).

Each release's wheel is fetched once into the cache (``loader.wheel_file``); the row at that
release is the row's ``Engine.at(version)``, loaded and judged as any row (``engine_run``). Its
verification files (the row's ``files``, read from the wheel) are hashed (:func:`files_digest`):
a release whose files hash as an earlier judged release's reuses that verdict and says so
(``reused_from``), since the same files give the same verdict. ``--versions all`` is every final
release on the package index from the row's first (``Engine.since``) on (:func:`releases`:
``pip index versions``; with downloads off, the releases whose wheels are cached).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable

from . import loader
from .engine_row import Engine
from .engine_run import run_engine, unjudged_row


def version_key(version: str) -> tuple:
    """A sort key for a release string (``packaging.version`` when it parses, else its digits)."""
    try:
        from packaging.version import Version

        return (0, Version(version))
    except Exception:  # noqa: BLE001 - not PEP 440: order by its numbers
        return (1, tuple(int(n) for n in re.findall(r"\d+", version)))


def is_final(version: str) -> bool:
    """A final release (no pre-, dev- or post-release part, no local part)."""
    return re.fullmatch(r"\d+(\.\d+)*", version) is not None


def index_versions(package: str) -> list[str]:
    """The releases the package index lists for ``package`` (``pip index versions``); Unavailable
    (one line) when pip cannot say."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", package]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise loader.Unavailable(f"{package}: pip index versions failed ({exc})") from None
    found = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not found:
        last = (proc.stderr.strip().splitlines() or ["no listing"])[-1]
        raise loader.Unavailable(f"{package}: the package index lists no releases ({last})")
    return [v.strip() for v in found.group(1).split(",") if v.strip()]


def cached_versions(package: str) -> list[str]:
    """The releases of ``package`` whose wheels are in the cache."""
    stem = package.replace("-", "_").lower()
    return [p.name.split("-")[1] for p in (loader.cache_root() / "dl").glob(f"{stem}-*.whl")]


def releases(package: str, since: str, download: bool = True) -> list[str]:
    """Every final release of ``package`` from ``since`` on, oldest first (the index's listing, or
    the cached wheels' when ``download`` is off)."""
    listed = index_versions(package) if download else cached_versions(package)
    floor = version_key(since)
    return sorted({v for v in listed if is_final(v) and version_key(v) >= floor}, key=version_key)


def chosen_versions(engine: Engine, text: str, download: bool = True) -> list[str]:
    """The releases ``--versions TEXT`` names for ``engine``: ``all`` (:func:`releases` from
    ``engine.since``) or a comma-separated list, in the order given; ValueError (naming the
    argument) when the row has no version table or the list is empty."""
    if engine.at is None or not engine.since:
        raise ValueError(f"--versions: row {engine.name} is judged at one release only ({engine.version})")
    if text.strip() == "all":
        return releases(engine.package, engine.since, download)
    versions = [v.strip() for v in text.split(",") if v.strip()]
    if not versions:
        raise ValueError("--versions: give 'all' or releases separated by commas, e.g. 0.8.5,0.33.0")
    return versions


def files_digest(package: str, version: str, files: tuple[str, ...], download: bool = True) -> str:
    """The first 12 hex digits of SHA-256 over the row's ``files`` as the wheel of
    ``package==version`` holds them (a file the wheel lacks counts as absent)."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(loader.wheel_file(package, version, download)) as z:
        names = set(z.namelist())
        for member in files:
            digest.update(member.encode() + b"\0")
            digest.update(z.read(member) if member in names else b"<absent>")
    return digest.hexdigest()[:12]


def version_rows(
    engine: Engine,
    versions: list[str],
    budget: str = "quick",
    seed: int = 0,
    download: bool = True,
    stage: Callable | None = None,
    progress: Callable | None = None,
) -> list[dict]:
    """One row per release in ``versions`` (module docstring): judged, or reused from an earlier
    release whose files hash the same (``reused_from``), or a skip / error line."""
    rows: list[dict] = []
    judged: dict[str, dict] = {}
    for version in versions:
        at = engine.at(version)
        try:
            digest = files_digest(at.package, version, at.files, download)
        except loader.Unavailable as exc:
            row = run_engine_line(at, budget, f"{at.name}: {exc}")
        else:
            earlier = judged.get(digest)
            if earlier is not None:
                row = {
                    **earlier,
                    "version": version,
                    "reused_from": earlier["version"],
                    "note": f"verification files unchanged since {earlier['version']}: its verdict reused",
                }
            else:
                row = run_engine(at, budget, seed, download, stage)
                if "skipped" not in row and "error" not in row:
                    judged[digest] = row
            row["files_hash"] = digest
        row["command"] = versions_command(engine, versions, budget)
        if progress:
            progress(row)
        rows.append(row)
    return rows


def run_engine_line(engine: Engine, budget: str, why: str) -> dict:
    """A skip row for a release that cannot be fetched."""
    return {**unjudged_row(engine), "verdict": "skipped", "skipped": why}


def versions_command(engine: Engine, versions: list[str], budget: str) -> str:
    return f"specverify engines --engine {engine.name} --versions {','.join(versions)} --budget {budget}"


def render_versions(rows: list[dict]) -> str:
    """The version table in markdown: release, files' hash, signature, verdict, power, note."""
    lines = [
        "| version | verification files (sha256) | signature | verdict | power | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        note = r.get("note") or r.get("skipped") or r.get("error") or ""
        cells = (
            r["version"],
            f"`{r['files_hash']}`" if r.get("files_hash") else "",
            f"`{r['signature']}`" if r.get("signature") else "",
            r.get("verdict") or "",
            r.get("power") or "",
            note,
        )
        lines.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)
