"""Telling a subject that cannot run here from a subject that is wrong.

A kernel that moves its tensors to ``cuda`` on a machine without CUDA, or a target whose import
needs a package this environment lacks, fails before it has shown anything about its output
law: that is an environment error (exit ``EXIT_ENVIRONMENT``, 4), never evidence against
exactness, never a killed mutant or a failed assertion. ``environment_problem`` reads the
failure's message (the subject's exception as the runner reports it: ``raised AssertionError:
Torch not compiled with CUDA enabled``) and returns what to do about it, or None when the failure
is the subject's own. ``EnvironmentProblem`` is the exception that carries it out of the check.
"""

from __future__ import annotations

import re

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

EXTRAS = {"torch": "models", "transformers": "models", "accelerate": "models", "gguf": "models", "ray": "ray"}
"""Packages specverify's extras install: ``pip install 'specverify[EXTRA]'``."""


def missing_package_advice(module: str) -> str:
    """What to install for the missing ``module`` (its top-level package)."""
    package = module.split(".")[0]
    extra = EXTRAS.get(package)
    if extra:
        return f"the package {package!r} is not installed here: pip install 'specverify[{extra}]' installs it"
    return f"the package {package!r} is not installed here: install it (pip install {package}) where the check runs"


def environment_problem(message: str, own_module: str | None = None) -> str | None:
    """Why ``message`` (a subject's failure) is this environment's fault, with what to do; None
    when it is the subject's own failure. A missing module that is the target's own module
    (``own_module`` or a package above it) is a usage error (a misspelt TARGET), not this."""
    if any(sign in message for sign in CUDA_SIGNS):
        return (
            "this machine cannot run CUDA code (torch or the driver has no CUDA here): run the check on a "
            "machine with a CUDA GPU, or keep the subject's tensors on the CPU"
        )
    missing = MISSING_MODULE.search(message)
    if missing:
        name = missing.group(1)
        if own_module and (own_module == name or own_module.startswith(name + ".")):
            return None
        return missing_package_advice(name)
    return None


__all__ = ["CUDA_SIGNS", "environment_problem", "missing_package_advice"]
