"""Fetching pinned engine packages and loading their verification modules unmodified.

``fetch(package, version)`` runs ``pip download <package>==<version> --no-deps`` into the cache
(``$SPECVERIFY_ENGINES_DIR``, else ``~/.cache/specverify-engines``) and unpacks only the files an
engine needs from the wheel, under ``src/<package>-<version>/``. Nothing is installed and nothing
is copied into the project. With ``download=False`` (``specverify engines --offline``) only the
cache is read: a package that is not there is a skip line, never a download. ``is_cached`` says
which packages are there without creating or fetching anything (``specverify engines --list``).

``load(name, path, standins)`` imports one file of an unpacked wheel under its real dotted name
(``importlib.util.spec_from_file_location``), without running its packages' ``__init__`` files:
each parent package is an empty module whose ``__path__`` points into the unpacked wheel. The
imports that need CUDA, a server or a whole engine are answered by *stand-ins*: small modules
built by :func:`standin` and documented where each engine declares them. They are inserted in
``sys.modules`` only while the file executes (:func:`installed`), and removed afterwards, so the
process is left as it was apart from the loaded module itself.

Triton kernels run on the CPU under ``TRITON_INTERPRET=1``; :func:`ensure_triton` sets it and, if
``triton`` is not importable, installs it with pip into ``<cache>/site`` (``--no-deps``) and puts
that directory on ``sys.path`` (not with ``install=False``: then a skip line).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

TRITON_VERSION = "3.9.0"
"""The triton the engines environment installs when none is importable (pip, CPU interpreter)."""


class Unavailable(Exception):
    """An engine cannot be fetched or imported here; the message is its one skip line."""


def cache_root() -> Path:
    """``$SPECVERIFY_ENGINES_DIR`` or ``~/.cache/specverify-engines``; not created."""
    return Path(os.environ.get("SPECVERIFY_ENGINES_DIR") or Path.home() / ".cache" / "specverify-engines")


def cache_dir() -> Path:
    """``cache_root()``, created."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    return root


def unpacked_dir(package: str, version: str) -> Path:
    """``<cache>/src/<package>-<version>``: where the files of a release's wheel are unpacked
    (or kept from a remote read); not created."""
    return cache_root() / "src" / f"{package}-{version}"


def cached_wheel(package: str, version: str) -> Path | None:
    """The wheel of ``package==version`` in ``<cache>/dl``, or None; looks only (creates nothing)."""
    dl = cache_root() / "dl"
    stem = package.replace("-", "_").lower()
    found = sorted(p for p in dl.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}-"))
    return found[0] if found else None


def is_cached(package: str, version: str, members: tuple[str, ...] = ()) -> bool:
    """Whether ``fetch(package, version, members, download=False)`` can succeed without the
    network: ``members`` (when given) already unpacked, or the wheel in the cache. Looks only."""
    root = unpacked_dir(package, version)
    unpacked = bool(members) and all((root / m).is_file() for m in members)
    return unpacked or cached_wheel(package, version) is not None


def wheel_file(package: str, version: str, download: bool) -> Path:
    """The cached wheel of ``package==version``; downloaded first (``pip download --no-deps``)
    when it is not cached and ``download`` is true, else Unavailable saying it is not cached."""
    found = cached_wheel(package, version)
    if found is not None:
        return found
    dl = cache_root() / "dl"
    if not download:
        raise Unavailable(
            f"{package}=={version}: not cached (not in the cache {dl}; downloads are off); "
            "run without --offline to download it"
        )
    dl.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        f"{package}=={version}",
        "--no-deps",
        "--only-binary",
        ":all:",
        "-d",
        str(dl),
        "-q",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"{package}=={version}: pip download failed ({exc})") from None
    found = cached_wheel(package, version)
    if proc.returncode != 0 or found is None:
        last = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise Unavailable(f"{package}=={version}: no wheel from the package index ({last})")
    return found


def fetch(package: str, version: str, members: tuple[str, ...], download: bool = True) -> Path:
    """The directory holding ``members`` (paths inside the wheel) of ``package==version``,
    downloading the wheel (no dependencies) and unpacking just those files the first time.
    ``download`` False: the cache only, never the network (Unavailable when not cached)."""
    root = unpacked_dir(package, version)
    if all((root / m).is_file() for m in members):
        return root
    wheel = wheel_file(package, version, download)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        missing = [m for m in members if m not in names]
        if missing:
            raise Unavailable(f"{package}=={version}: the wheel has no {', '.join(missing)}")
        for m in members:
            z.extract(m, root)
    return root


def standin(name: str, doc: str, **attrs) -> types.ModuleType:
    """A stand-in module ``name``: ``doc`` says what it replaces and why; ``attrs`` are its only
    contents. Marked with ``__specverify_standin__ = True``."""
    mod = types.ModuleType(name, doc)
    mod.__specverify_standin__ = True
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


def package_standins(dotted: str, root: Path) -> dict[str, types.ModuleType]:
    """Empty parent packages of module ``dotted`` whose ``__path__`` points under ``root`` (the
    unpacked wheel), so that the file imports under its real name without any ``__init__``."""
    parts = dotted.split(".")[:-1]
    out = {}
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        out[name] = standin(
            name, f"parent package of {dotted} (no __init__ executed)", __path__=[str(root.joinpath(*parts[:i]))]
        )
    return out


@contextlib.contextmanager
def installed(modules: dict[str, types.ModuleType]):
    """``modules`` in ``sys.modules`` for the body only; what was there before is restored."""
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


def load(
    dotted: str, root: Path, standins: dict[str, types.ModuleType] | None = None, keep: tuple[str, ...] = ()
) -> types.ModuleType:
    """Execute ``root/<dotted as a path>.py`` as module ``dotted`` with ``standins`` (and its
    parent packages) in ``sys.modules`` while it runs. Modules named in ``keep`` (already loaded
    siblings it imports) are inserted too. Unavailable (one line) when the file fails to import."""
    path = root.joinpath(*dotted.split(".")).with_suffix(".py")
    if not path.is_file():
        raise Unavailable(f"{dotted}: {path} is missing")
    mods = {**package_standins(dotted, root), **(standins or {})}
    spec = importlib.util.spec_from_file_location(dotted, path)
    module = importlib.util.module_from_spec(spec)
    with installed({**mods, dotted: module}):
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is a skip line
            raise Unavailable(
                f"{dotted} ({path.name}) does not import here: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None
    return module


def ensure_triton(install: bool = True) -> str:
    """Set ``TRITON_INTERPRET=1`` and make ``triton`` importable; its version. Installs
    ``triton==TRITON_VERSION`` (no deps) into ``<cache>/site`` if needed and ``install``; with
    ``install`` False, Unavailable (one line) when triton is not importable."""
    os.environ["TRITON_INTERPRET"] = "1"
    site = cache_root() / "site"
    if site.is_dir() and str(site) not in sys.path:
        sys.path.append(str(site))
    try:
        import triton  # noqa: F401
    except ImportError:
        if not install:
            raise Unavailable(
                "triton is not installed (needed for the Triton kernels) and installing it is off; "
                f"run without --offline to install triton=={TRITON_VERSION} into the cache"
            ) from None
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(cache_dir() / "site"),
            f"triton=={TRITON_VERSION}",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"triton=={TRITON_VERSION}: pip install failed ({exc})") from None
        if proc.returncode != 0:
            raise Unavailable(
                f"triton=={TRITON_VERSION}: pip install failed ({(proc.stderr.strip().splitlines() or ['?'])[-1]})"
            ) from None
        if str(site) not in sys.path:
            sys.path.append(str(site))
        importlib.invalidate_caches()
        try:
            import triton  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"triton does not import after installing it: {exc}") from None
    return importlib.import_module("triton").__version__
