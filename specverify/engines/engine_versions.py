"""A verdict per release: one row judged at several releases of its engine
(``specverify engines --engine NAME --versions 0.8.5,0.10.2,...`` or ``--versions all``).

Each release's wheel is fetched once into the cache (``loader.wheel_file``); the row at that
release is the row's ``Engine.at(version)``, loaded and judged as any row (``engine_run``). Its
verification files (the row's ``files``, read from the wheel) are hashed (:func:`files_digest`):
a release whose files hash as an earlier judged release's reuses that verdict and says so
(``reused_from``), since the same files give the same verdict. ``--versions all`` is every final
release on the package index from the row's first (``Engine.since``) on (:func:`releases`:
``pip index versions``, less the releases whose every file the index marks yanked; with downloads
off, the releases whose wheels are cached).

A release whose wheel is not cached is hashed without downloading it (:func:`remote_members`):
the verification files are read from the index's wheel by HTTP range requests (the zip's central
directory, then each file's bytes: a few requests and kilobytes, not a 400 MB wheel) and kept
under ``<cache>/src/<package>-<version>/``, where the loader unpacks the same files; the whole
wheel is downloaded only for a release that is judged (or when range requests fail). The wheel
read is the one ``pip download`` takes here (:func:`pip_choice`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable

from . import loader
from .engine_row import Engine
from .engine_run import cpu_seconds, run_engine, unjudged_row


def version_key(version: str) -> tuple:
    """A sort key for a release string (``packaging.version`` when it parses, else its digits)."""
    try:
        from packaging.version import Version

        return (0, Version(version))
    except Exception:  # noqa: BLE001 - not PEP 440: order by its numbers
        return (1, tuple(int(n) for n in re.findall(r"\d+", version)))


def is_final(version: str) -> bool:
    """A release people install by default: no pre- or dev-release part, no local part (a
    post-release such as 0.8.5.post1 counts: it is a fix of a final release, and pip picks it)."""
    return re.fullmatch(r"\d+(\.\d+)*(\.post\d+)?", version) is not None


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
    yanked = yanked_versions(package) if download else set()
    floor = version_key(since)
    chosen = {v for v in listed if is_final(v) and v not in yanked and version_key(v) >= floor}
    return sorted(chosen, key=version_key)


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
    return digest_of(files, verification_files(package, version, files, download))


def verification_files(package: str, version: str, files: tuple[str, ...], download: bool = True) -> dict:
    """The row's ``files`` in the wheel of ``package==version`` (member -> bytes, None when the
    wheel lacks it): from the cached wheel, else the files already kept from it, else read
    remotely (:func:`remote_members`), else from the whole wheel downloaded (module docstring)."""
    wheel = loader.cached_wheel(package, version)
    if wheel is None:
        kept = kept_members(package, version, files)
        if kept is not None:
            return kept
        if download:
            try:
                found = remote_members(package, version, files)
            except loader.Unavailable:
                found = None
            if found is not None:
                keep_members(package, version, found)
                return found
        wheel = loader.wheel_file(package, version, download)
    return zip_members(wheel, files)


def digest_of(files: tuple[str, ...], contents: dict) -> str:
    """:func:`files_digest` over ``contents`` (member -> bytes, None when the wheel lacks it)."""
    digest = hashlib.sha256()
    for member in files:
        data = contents.get(member)
        digest.update(member.encode() + b"\0")
        digest.update(b"<absent>" if data is None else data)
    return digest.hexdigest()[:12]


def kept_members(package: str, version: str, files: tuple[str, ...]) -> dict | None:
    """``files`` as kept by an earlier remote read of this release (None unless all are kept)."""
    root = loader.unpacked_dir(package, version)
    if not all((root / m).is_file() for m in files):
        return None
    return {m: (root / m).read_bytes() for m in files}


def keep_members(package: str, version: str, contents: dict) -> None:
    """Keep the files read remotely (those the wheel has) where the loader unpacks them."""
    root = loader.unpacked_dir(package, version)
    for member, data in contents.items():
        if data is not None:
            path = root / member
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


class RangeFile(io.RawIOBase):
    """A read-only, seekable file of ``size`` bytes whose reads are ``read_range(start, stop)``
    calls (bytes ``start`` to ``stop - 1``): a remote wheel for :class:`zipfile.ZipFile`, which
    seeks to the central directory at the end and then to each file it reads."""

    def __init__(self, read_range: Callable[[int, int], bytes], size: int):
        super().__init__()
        self.read_range, self.size, self.pos, self.requests = read_range, size, 0, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = max(0, (0, self.pos, self.size)[whence] + offset)
        return self.pos

    def readinto(self, buffer) -> int:
        stop = min(self.pos + len(buffer), self.size)
        if stop <= self.pos:
            return 0
        data = self.read_range(self.pos, stop)
        self.requests += 1
        if len(data) != stop - self.pos:
            raise loader.Unavailable(f"range read gave {len(data)} bytes for {stop - self.pos}")
        buffer[: len(data)] = data
        self.pos = stop
        return len(data)


def range_reader(read_range: Callable[[int, int], bytes], size: int) -> io.BufferedReader:
    """A :class:`RangeFile` read through a 64 KiB buffer, so that a zip's central directory and
    each member cost a request or two."""
    return io.BufferedReader(RangeFile(read_range, size), 1 << 16)


def zip_members(file, members: tuple[str, ...]) -> dict:
    """``members`` of the zip ``file`` (a path or a seekable binary file; member -> bytes, None
    when absent)."""
    with zipfile.ZipFile(file) as z:
        names = set(z.namelist())
        return {m: z.read(m) if m in names else None for m in members}


INDEX_JSON = "https://pypi.org/pypi/{package}/json"
"""The package index's JSON API (its per-release files, with their addresses and yanked flags)."""


@functools.lru_cache(maxsize=8)
def index_files(package: str) -> dict:
    """Release -> the index's files for it (PyPI JSON API; addresses made absolute);
    Unavailable (one line) when the index cannot be read."""
    url = INDEX_JSON.format(package=package)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            listing = json.load(response)
    except (OSError, ValueError) as exc:
        raise loader.Unavailable(f"{package}: cannot read the index's listing {url} ({exc})") from None
    return {
        version: [{**f, "url": urllib.parse.urljoin(url, f["url"])} for f in files]
        for version, files in listing.get("releases", {}).items()
    }


def yanked_versions(package: str) -> set[str]:
    """The releases whose every file the index marks yanked (none when the listing cannot be read:
    pip then decides, as it would installing)."""
    try:
        files = index_files(package)
    except loader.Unavailable:
        return set()
    return {v for v, fs in files.items() if fs and all(f.get("yanked") for f in fs)}


def pip_choice(files: list[dict]) -> dict | None:
    """The wheel ``pip download`` takes here from a release's ``files``: not yanked, a tag this
    interpreter supports, the most preferred tag first (``packaging.tags.sys_tags`` order), then
    the highest build number; None when no wheel fits."""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    rank = {str(tag): i for i, tag in enumerate(sys_tags())}
    best, best_key = None, None
    for f in files:
        if f.get("yanked") or not f["filename"].endswith(".whl"):
            continue
        try:
            _, _, build, tags = parse_wheel_filename(f["filename"])
        except InvalidWheelFilename:
            continue
        supported = [rank[str(t)] for t in tags if str(t) in rank]
        if supported:
            key = (-min(supported), build)
            if best_key is None or key > best_key:
                best, best_key = f, key
    return best


def http_range(url: str) -> Callable[[int, int], bytes]:
    """``read_range(start, stop)`` over ``url`` by HTTP Range requests (Unavailable when the
    server answers anything but the partial content asked for)."""

    def read_range(start: int, stop: int) -> bytes:
        request = urllib.request.Request(url, headers={"Range": f"bytes={start}-{stop - 1}"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                if response.status != 206:
                    raise loader.Unavailable(f"{url}: no range requests (HTTP {response.status})")
                return response.read()
        except OSError as exc:
            raise loader.Unavailable(f"{url}: range read failed ({exc})") from None

    return read_range


def remote_members(package: str, version: str, members: tuple[str, ...]) -> dict | None:
    """``members`` of the wheel ``pip download`` would take for ``package==version``, read by
    range requests (:class:`RangeFile`; module docstring); None when the index lists no such
    wheel; Unavailable when the reads fail (the caller then downloads the whole wheel)."""
    chosen = pip_choice(index_files(package).get(version, []))
    if chosen is None:
        return None
    try:
        return zip_members(range_reader(http_range(chosen["url"]), int(chosen["size"])), members)
    except (zipfile.BadZipFile, OSError, KeyError) as exc:
        raise loader.Unavailable(f"{package}=={version}: cannot read {chosen['filename']} remotely ({exc})") from None


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
    release whose files hash the same (``reused_from``; its ``seconds`` and ``cpu_seconds`` are
    the hashing's, not the earlier judgement's), or a skip / error line (a skip when the wheel
    has none of the row's files: :func:`absent_words`). Each row's ``command``
    judges that release alone."""
    rows: list[dict] = []
    judged: dict[str, dict] = {}
    for version in versions:
        at = engine.at(version)
        t0, cpu0 = time.perf_counter(), cpu_seconds()
        try:
            contents = verification_files(at.package, version, at.files, download)
        except loader.Unavailable as exc:
            row = run_engine_line(at, budget, f"{at.name}: {exc}")
        else:
            digest = digest_of(at.files, contents)
            earlier = judged.get(digest)
            if all(data is None for data in contents.values()):
                row = run_engine_line(at, budget, absent_words(at, version))
            elif earlier is not None:
                row = {
                    **earlier,
                    "version": version,
                    "reused_from": earlier["version"],
                    "note": f"verification files unchanged since {earlier['version']}: its verdict reused",
                    "seconds": round(time.perf_counter() - t0, 1),  # hashing only: nothing was judged
                    "cpu_seconds": round(cpu_seconds() - cpu0, 1),
                    "load_seconds": 0.0,
                }
            else:
                row = run_engine(at, budget, seed, download, stage)
                if "skipped" not in row and "error" not in row:
                    judged[digest] = row
            row["files_hash"] = digest
        row["command"] = versions_command(engine, [version], budget)
        if progress:
            progress(row)
        rows.append(row)
    return rows


def absent_words(engine: Engine, version: str) -> str:
    """The skip line of a release whose wheel has none of the row's verification files (the code
    the row judges is not in that release: moved or removed upstream)."""
    return (
        f"{engine.name}: {engine.package} {version}: the wheel has no {', '.join(engine.files)} "
        "(the row's verification files: not in this release)"
    )


def run_engine_line(engine: Engine, budget: str, why: str) -> dict:
    """A skip row for a release that cannot be fetched."""
    return {**unjudged_row(engine), "verdict": "skipped", "skipped": why}


def versions_command(engine: Engine, versions: list[str], budget: str) -> str:
    return f"specverify engines --engine {engine.name} --versions {','.join(versions)} --budget {budget}"


def render_versions(rows: list[dict]) -> str:
    """The version table in markdown: release, files' hash, signature (in full where it changed
    from the release above, ``same`` where not), verdict, power, note."""
    lines = [
        "| version | verification files (sha256) | signature (where it changed) | verdict | power | note |",
        "|---|---|---|---|---|---|",
    ]
    previous = None
    for r in rows:
        note = r.get("note") or r.get("skipped") or r.get("error") or ""
        signature = r.get("signature") or ""
        shown = "same" if signature and signature == previous else f"`{signature}`" if signature else ""
        previous = signature or previous
        cells = (
            r["version"],
            f"`{r['files_hash']}`" if r.get("files_hash") else "",
            shown,
            r.get("verdict") or "",
            r.get("power") or "",
            note,
        )
        lines.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)
