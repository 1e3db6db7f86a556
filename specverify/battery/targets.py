"""Loading a TARGET: ``package.module:function`` or ``path/file.py:function``, in its own process.

``split_target`` checks the string in the parent before anything is imported; ``start_target``
starts a ``runner.Runner`` whose child imports it (``load_target``), so whatever the import
prints, raises or exits with stays in the subject's process and comes back as one
``UsageError`` line (the ``check`` command's exit 2), or, when the import needs a package this
environment lacks, one ``EnvironmentProblem`` line (exit 4: ``environment``'s rule says which
missing module is the machine's fault). ``UsageError`` is also what ``api.check``
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

from ..errors import TargetError
from . import runner
from .environment import environment_error, environment_problem, import_site, import_site_note
from .guards import with_article


def load_target(target: str) -> Callable:
    """Import ``module:function`` or ``file.py:function``; UsageError with one clear line.

    Runs in the subject's process: whatever the import prints goes to its capture, an exit at
    import is a usage error, not silence. A file's folder goes to the front of ``sys.path`` first
    (``_import_file``), so the file imports the modules beside it as it does under pytest. A
    missing module is an environment problem (``MissingExtra``, exit 4) only under
    ``environment``'s rule (an extra's package, or an installed package's own import); one the
    subject's own code imports and that is neither beside it nor installed is a ``TargetError``
    (exit 2) naming the import's file, line and statement.
    """
    where, name = split_target(target)
    own_module = None if where.endswith(".py") else where
    try:
        module = _import_file(where) if where.endswith(".py") else importlib.import_module(where)
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import included
        raise import_failure(target, where, own_module, exc) from None
    fn = getattr(module, name, None)
    if fn is None:
        raise TargetError(f"TARGET {target!r}: {where!r} has no attribute {name!r}")
    if not callable(fn):
        raise TargetError(f"TARGET {target!r}: {name!r} is {with_article(type(fn).__name__)}, not callable")
    if isinstance(fn, type):
        raise TargetError(f"TARGET {target!r}: {name!r} is a class, not a function; name the function to check")
    return fn


def import_failure(target: str, where: str, own_module: str | None, exc: BaseException) -> Exception:
    """The error for ``exc``, raised importing ``where``: an environment problem (``environment``'s
    rule), a TargetError naming the subject's own import of a module found nowhere, or a
    TargetError with the exception."""
    why = f"{type(exc).__name__}: {exc}"
    advice = environment_problem(why + import_site_note(exc), own_module=own_module)
    if advice:
        return environment_error(f"TARGET {target!r}: cannot import {where!r}: {advice} ({why})")
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    site = import_site(exc) if isinstance(exc, ModuleNotFoundError) else None
    if site and missing and not is_target_itself(missing, own_module):
        path, line, statement = site
        return TargetError(
            f"TARGET {target!r}: {shown_path(path)}:{line}: {statement!r}: no module named {missing!r} "
            f"beside {os.path.basename(path)} nor installed here (a typo, or a file that is missing?)"
        )
    return TargetError(f"TARGET {target!r}: cannot import {where!r} ({why})")


def shown_path(path: str) -> str:
    """``path`` relative to the working folder when it lies below it, else absolute."""
    relative = os.path.relpath(path)
    return os.path.abspath(path) if relative.startswith("..") else relative


def is_target_itself(module: str, own_module: str | None) -> bool:
    """Whether the missing ``module`` is the TARGET's module or a package above it (a misspelt
    TARGET, said as such, not an import line of the subject's)."""
    if not own_module:
        return False
    return own_module == module or own_module.startswith(module + ".")


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
    """Import the file at ``path`` as a module, its folder first on ``sys.path`` (as pytest's
    rootdir insertion: ``from mine import leviathan`` finds ``mine.py`` beside it)."""
    folder = os.path.dirname(os.path.abspath(path))
    if sys.path[:1] != [folder]:
        sys.path.insert(0, folder)
    mod_name = "specverify_target_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec is not None and spec.loader is not None, "a .py path (split_target's rule) has a source loader"
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
