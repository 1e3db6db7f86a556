"""Loading a TARGET: ``package.module:function`` or ``path/file.py:function``, in its own process.

``split_target`` checks the string in the parent before anything is imported; ``start_target``
starts a ``runner.Runner`` whose child imports it (``load_target``), so whatever the import
prints, raises or exits with stays in the subject's process and comes back as one
``UsageError`` line (the ``check`` command's exit 2), or, when the import needs a package this
environment lacks, one ``EnvironmentProblem`` line (exit 4). ``UsageError`` is also what ``api.check``
raises for any other usage mistake (an interface that cannot be told, declared cases that are
not cases, a device for a subject that is not a kernel).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from functools import partial

from ..errors import EnvironmentProblem, TargetError
from . import runner
from .environment import environment_problem


def load_target(target: str) -> Callable:
    """Import ``module:function`` or ``file.py:function``; UsageError with one clear line.

    Runs in the subject's process: whatever the import prints goes to its capture, an exit at
    import is a usage error, not silence.
    """
    where, name = split_target(target)
    try:
        module = _import_file(where) if where.endswith(".py") else importlib.import_module(where)
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import included
        why = f"{type(exc).__name__}: {exc}"
        advice = environment_problem(why, own_module=None if where.endswith(".py") else where)
        if advice:
            raise EnvironmentProblem(f"TARGET {target!r}: cannot import {where!r}: {advice} ({why})") from None
        raise TargetError(f"TARGET {target!r}: cannot import {where!r} ({why})") from None
    fn = getattr(module, name, None)
    if fn is None:
        raise TargetError(f"TARGET {target!r}: {where!r} has no attribute {name!r}")
    if not callable(fn):
        raise TargetError(f"TARGET {target!r}: {name!r} is a {type(fn).__name__}, not callable")
    if isinstance(fn, type):
        raise TargetError(f"TARGET {target!r}: {name!r} is a class, not a function; name the function to check")
    return fn


def split_target(target: str) -> tuple[str, str]:
    """(module or file, function name), checked in the parent before anything is imported."""
    if ":" not in target:
        raise TargetError(f"TARGET {target!r}: expected 'package.module:function' or 'path/file.py:function'")
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise TargetError(f"TARGET {target!r}: missing module or function name")
    if where.endswith(".py") and not os.path.isfile(where):
        raise TargetError(f"TARGET: no such file {where!r}")
    return where, name


def _import_file(path: str):
    mod_name = "specverify_target_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


def start_target(target: str, start_method: str | None = None) -> runner.Runner:
    """The target loaded in its own process (forked, or ``start_method="spawn"``); UsageError
    when it cannot be loaded."""
    split_target(target)
    try:
        return runner.Runner(partial(load_target, target), start_method=start_method).start()
    except runner.SubjectFailed as exc:
        raise TargetError(f"TARGET {target!r}: loading it failed: {exc}") from None
