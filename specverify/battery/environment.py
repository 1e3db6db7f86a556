"""Telling a subject that cannot run here from a subject that is wrong.

A kernel that moves its tensors to ``cuda`` on a machine without CUDA, or a target whose import
needs a package this environment lacks, fails before it has shown anything about its output
law: that is an environment error (exit 4, ``errors.EnvironmentProblem``), never evidence
against exactness, never a killed mutant or a failed assertion. ``environment_problem`` reads
the failure's message (the subject's exception as the runner reports it: ``raised
AssertionError: Torch not compiled with CUDA enabled``) and returns what to do about it, or None
when the failure is the subject's own.

**Which missing module is this machine's fault.** A ``ModuleNotFoundError`` names a module; it
is an environment problem only when one of these holds:

1. its top-level package is one specverify's extras install (``EXTRAS``: torch, transformers,
   accelerate, gguf, ray): ``pip install 'specverify[EXTRA]'`` is the remedy;
2. its top-level package is one an engine's GPU code needs and that installs only where a GPU
   does (``GPU_PACKAGES``: triton, flash_attn, vllm, sglang, ...): a CPU machine lacks it;
3. the import that failed is an installed package's own (the statement sits in site-packages,
   or in specverify): an installed dependency needs a package that is missing here, the way pip
   reports a missing requirement. ``import_site_note`` marks such a message, in the subject's
   process where the traceback is, with ``INSTALLED_IMPORT``;
4. its top-level package is installed here but the submodule is not (a partial install).

Anything else is the subject's own mistake: its code imports a module that is neither beside the
target (the target file's folder is on ``sys.path``, as pytest's rootdir insertion does) nor
installed. Advising ``pip install NAME`` there would point at whatever unrelated package PyPI
has under that name, so loading a TARGET makes it a usage error naming the import's
``file:line`` and statement (``battery.targets``), and a subject that hits it while it runs has
a finding of its own. Like pip's own resolver, the rule trusts installed metadata over names.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import re

from ..errors import EnvironmentProblem, MissingExtra, NoCuda

CUDA_SIGNS = (
    "Torch not compiled with CUDA enabled",
    "Found no NVIDIA driver on your system",
    "No CUDA GPUs are available",
    "no CUDA-capable device is detected",
    "CUDA driver version is insufficient",
    "CUDA driver initialization failed",
    "0 active drivers",  # Triton with no GPU and no TRITON_INTERPRET=1
)
"""Messages torch, the CUDA runtime and Triton give when this machine cannot run CUDA code."""

MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")
"""The message of an import of a package that is not installed."""

INSTALLED_IMPORT = re.compile(r"\[imported by the installed package '([\w.]+)'\]")
"""The note ``import_site_note`` adds when the failed import is an installed package's."""

EXTRAS = {"torch": "models", "transformers": "models", "accelerate": "models", "gguf": "models", "ray": "ray"}
"""Packages specverify's extras install: ``pip install 'specverify[EXTRA]'``."""

GPU_PACKAGES = frozenset({"triton", "flash_attn", "flashinfer", "xformers", "vllm", "sglang", "cupy", "apex"})
"""Packages engines' kernels import that install (or work) only on a machine with a GPU."""

NO_CUDA_ADVICE = (
    "this machine cannot run CUDA code (torch or the driver has no CUDA here): run the check on a "
    "machine with a CUDA GPU, or keep the subject's tensors on the CPU"
)


def missing_package_advice(module: str, needed_by: str | None = None) -> str:
    """What to install for the missing ``module`` (its top-level package); ``needed_by``: the
    installed package whose import needs it."""
    package = module.split(".")[0]
    extra = EXTRAS.get(package)
    if extra:
        return f"the package {package!r} is not installed here: pip install 'specverify[{extra}]' installs it"
    if needed_by:
        return (
            f"the installed package {needed_by!r} needs {package!r}, which is not installed here: "
            f"install it (pip install {package}) where the check runs"
        )
    return f"the package {package!r} is not installed here: install it (pip install {package}) where the check runs"


def is_installed(module: str) -> bool:
    """Whether ``module``'s top-level package can be imported here (found on ``sys.path``)."""
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


SPECVERIFY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""specverify's own package folder: its imports are installed code too."""


def package_of_installed(path: str) -> str | None:
    """The top-level package an installed file belongs to (the folder after ``site-packages`` or
    ``dist-packages``, or specverify), or None when ``path`` is not installed code (the user's own
    file, a sibling of the target)."""
    path = os.path.abspath(path)
    if path.startswith(SPECVERIFY_DIR):
        return "specverify"
    parts = path.split(os.sep)
    for marker in ("site-packages", "dist-packages"):
        if marker in parts[:-1]:
            return os.path.splitext(parts[parts.index(marker) + 1])[0]
    return None


def import_site(exc: BaseException) -> tuple[str, int, str] | None:
    """``(file, line, statement)`` of the import statement that raised ``exc`` (an ImportError):
    the innermost frame of its traceback outside importlib's machinery; None without one."""
    importlib_dir = os.path.dirname(os.path.abspath(importlib.util.__file__)) + os.sep
    site = None
    tb = exc.__traceback__
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if not path.startswith("<") and not os.path.abspath(path).startswith(importlib_dir):
            site = (path, tb.tb_lineno)
        tb = tb.tb_next
    if site is None:
        return None
    path, line = site
    return path, line, linecache.getline(path, line).strip()


def import_site_note(exc: BaseException) -> str:
    """For a ModuleNotFoundError raised by an installed package's import: the note
    ``[imported by the installed package 'NAME']`` (``INSTALLED_IMPORT``) a message carries to
    the parent, where only the message arrives; "" otherwise."""
    if not isinstance(exc, ModuleNotFoundError):
        return ""
    try:
        site = import_site(exc)
        package = package_of_installed(site[0]) if site else None
    except Exception:  # noqa: BLE001 - a subject's hostile traceback: no note, the message stands
        return ""
    return f" [imported by the installed package {package!r}]" if package else ""


def environment_problem(message: str, own_module: str | None = None) -> str | None:
    """Why ``message`` (a subject's failure) is this environment's fault, with what to do; None
    when it is the subject's own failure (the module docstring's rule). A missing module that
    is the target's own module (``own_module`` or a package above it) is a usage error (a
    misspelt TARGET), not this."""
    if is_no_cuda(message):
        return NO_CUDA_ADVICE
    missing = MISSING_MODULE.search(message)
    if not missing:
        return None
    name = missing.group(1)
    if own_module and (own_module == name or own_module.startswith(name + ".")):
        return None
    needed_by = INSTALLED_IMPORT.search(message)
    top = name.split(".")[0]
    if top in EXTRAS or top in GPU_PACKAGES or needed_by or ("." in name and is_installed(name)):
        return missing_package_advice(name, needed_by.group(1) if needed_by else None)
    return None


def is_no_cuda(message: str) -> bool:
    """Whether ``message`` says this machine cannot run CUDA code (``errors.NoCuda``)."""
    return any(sign in message for sign in CUDA_SIGNS)


def environment_error(message: str) -> EnvironmentProblem:
    """The error for an environment problem described by ``message``: ``NoCuda`` when it says
    this machine has no CUDA, ``MissingExtra`` otherwise (a package is missing)."""
    return NoCuda(message) if is_no_cuda(message) else MissingExtra(message)


__all__ = [
    "CUDA_SIGNS",
    "EXTRAS",
    "GPU_PACKAGES",
    "INSTALLED_IMPORT",
    "environment_error",
    "environment_problem",
    "import_site",
    "import_site_note",
    "is_installed",
    "is_no_cuda",
    "missing_package_advice",
    "package_of_installed",
]
