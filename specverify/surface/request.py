"""One check, asked once: the request ``api.check`` runs, validated in one place.

``CheckRequest`` holds everything a check of one subject needs besides the subject: the budget
(a name, ``tv=X`` or a budget object: resolved later, once, by the interface that runs it), the
seed, the interface (``auto`` or a name of ``interfaces.NAMES``), overrides of the budget's
fields, the aim (``--vocab``, ``--k``, ``--max-tokens``), declared cases, the device, the
counterexample search, fail-fast, the time limit, the workers, the progress line and the
stated working precision (``laws.precision``; None: as observed).
``CheckRequest.of(**given)`` checks every field given by its checker in ``FIELD_CHECKS``, the
same checkers the ``check`` command line's options run (``check_command``: each option's
``type=`` is ``option_type(field)``), so the API and the command line refuse the same values
with the same words, and nothing below re-checks them. A bad value is a usage error of
``specverify.errors`` naming the argument (``ArgumentError``, ``ArgumentTypeError``, or
``InterfaceError`` for an interface or budget name).

``CheckCommand`` is the ``check`` command line's request: its TARGETs, one ``CheckRequest`` for
each of them, where the reports go (``--json``, ``--plot``, ``--junit-xml``) and the executor.

Standard library only (the budget names come from ``battery.budgets``, the aim from the
interface registry's light part): a command line checks its arguments before NumPy loads.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .. import interfaces
from ..battery import budgets
from ..common.validation import check_seed, check_workers
from ..errors import ArgumentError, ArgumentTypeError, UsageError
from ..laws.precision import check_precision

INTERFACE_CHOICES = ("auto", *interfaces.NAMES)
"""What ``interface`` may name: ``auto`` (told from the subject's parameter names) or an interface."""

PROGRESS_CHOICES = (None, True, False, "lines")


def check_interface(value: Any) -> str:
    """``auto`` or a name of ``interfaces.NAMES`` (None: ``auto``); InterfaceError naming
    ``interface`` otherwise (an adapter, a callable, is applied by ``api.check`` before this)."""
    if value is None:
        return "auto"
    if not isinstance(value, str) or value not in INTERFACE_CHOICES:
        raise interfaces.InterfaceError(
            f"interface: must be one of {', '.join(INTERFACE_CHOICES)} or an adapter (a callable), got {value!r}"
        )
    return value


def check_flag(name: str) -> Callable[[Any], bool]:
    """A checker of a True / False argument called ``name``."""

    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise ArgumentTypeError(f"{name}: must be True or False, got {value!r}")
        return value

    return check


def check_time_limit(value: Any) -> float | None:
    """None (no limit) or a number of seconds > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ArgumentError(f"time_limit: must be a number of seconds > 0 or None, got {value!r}")
    return float(value)


def check_overrides(value: Any) -> dict[str, Any]:
    """A mapping of budget field names to values (None: none). The fields and their values are
    checked against the budget of the interface that runs the check (its ``budget``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ArgumentTypeError(f"overrides: expected a mapping of budget field names to values, got {value!r}")
    return dict(value)


def check_device(value: Any) -> str | None:
    """None or a device name (the interface says whether its subjects run there)."""
    if value is not None and not isinstance(value, str):
        raise ArgumentTypeError(f"device: expected cpu, cuda or cuda:N, got {value!r}")
    return value


def check_progress(value: Any) -> bool | str | None:
    """None (a status line when stderr is a terminal), True, False or "lines"."""
    if value not in PROGRESS_CHOICES or (value is not None and not isinstance(value, (bool, str))):
        raise ArgumentError(f"progress: must be None, True, False or 'lines', got {value!r}")
    return value


def check_cases(value: Any) -> tuple[Any, ...] | None:
    """None or a sequence of cases (each checked by the interface: ``declared_cases``)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ArgumentTypeError(f"cases: expected a sequence of cases, got {type(value).__name__}")
    return tuple(value)


def check_aim(value: Any) -> interfaces.Aim:
    """An ``interfaces.Aim`` (built and checked by ``interfaces.aim``: vocab, k, max_tokens)."""
    if not isinstance(value, interfaces.Aim):
        raise ArgumentTypeError(
            f"aim: expected an interfaces.Aim (interfaces.aim(vocab=, k=, max_tokens=)), got {value!r}"
        )
    return value


def check_stated_precision(value: Any) -> str | None:
    """None (judge exact laws at the precision observed) or a name of ``laws.precision.PRECISIONS``."""
    return None if value is None else check_precision("precision", value)


def check_reference(value: Any) -> Any:
    """None, a TARGET string (``package.module:function`` or ``path/file.py:function``: loaded
    like the subject, in a process of its own) or a callable (a started ``runner.Runner`` too):
    the engine's own target-only path, with the subject's interface, that the subject is judged
    against instead of this project's definition."""
    if value is None or callable(value) or hasattr(value, "call"):
        return value
    if not isinstance(value, str):
        raise ArgumentTypeError(
            f"reference: expected a TARGET string (module:function or file.py:function) or a function, got {value!r}"
        )
    where, _, name = value.rpartition(":")
    if not where or not name:
        raise ArgumentError(f"reference: expected 'package.module:function' or 'path/file.py:function', got {value!r}")
    return value


def check_target(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ArgumentTypeError(f"target: expected a name (a string), got {value!r}")
    return value


FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "budget": budgets.check_budget,
    "seed": check_seed,
    "interface": check_interface,
    "overrides": check_overrides,
    "aim": check_aim,
    "cases": check_cases,
    "device": check_device,
    "counterexample": check_flag("counterexample"),
    "fail_fast": check_flag("fail_fast"),
    "time_limit": check_time_limit,
    "workers": check_workers,
    "progress": check_progress,
    "target": check_target,
    "precision": check_stated_precision,
    "reference": check_reference,
}
"""Each field of ``CheckRequest`` -> its checker (the value as the request keeps it, or a usage
error naming the argument). ``units`` is the executor's, never a user's: not checked."""


@dataclass(frozen=True)
class CheckRequest:
    """A check of one subject, every field checked (build it with ``CheckRequest.of``)."""

    budget: Any = "standard"
    """A name of ``battery.budgets.NAMES``, ``tv=X``, or a budget object of one interface."""
    seed: int = 0
    interface: str = "auto"
    overrides: dict[str, Any] = field(default_factory=dict)
    """Fields of the interface's budget to replace (``n_max=8000``)."""
    aim: interfaces.Aim = interfaces.Aim()
    cases: tuple[Any, ...] | None = None
    device: str | None = None
    counterexample: bool = True
    fail_fast: bool = False
    time_limit: float | None = None
    workers: int = 1
    progress: bool | str | None = None
    precision: str | None = None
    """The working precision to judge exact laws at (``laws.rounding``); None: as observed."""
    reference: Any = None
    """The engine's own target-only path the subject is judged against (``check_reference``);
    None: this project's definition."""
    target: str | None = None
    """The name the report gives the subject (None: the TARGET string or the function's name)."""
    units: tuple[dict[str, Any], ...] = ()
    """The finished results of the interface's units (the Ray executor's), replayed."""

    @classmethod
    def of(cls, **given: Any) -> CheckRequest:
        """The request with ``given`` fields, each checked by ``FIELD_CHECKS`` (a usage error of
        ``specverify.errors`` naming it otherwise); the others at their defaults."""
        unknown = sorted(set(given) - {f.name for f in fields(cls)})
        if unknown:
            raise ArgumentError(f"{unknown[0]}: not an argument of a check")
        return cls(
            **{name: FIELD_CHECKS[name](value) if name in FIELD_CHECKS else value for name, value in given.items()}
        )

    def but(self, **changes: Any) -> CheckRequest:
        """This request with ``changes`` (values already checked: a target's name, its units)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class CheckCommand:
    """The ``check`` command line, parsed and checked: its TARGETs (each checked by
    ``CheckRequest``'s fields in ``request``), where the reports go, and the executor."""

    targets: tuple[str, ...]
    request: CheckRequest
    json: bool = False
    plot: str | None = None
    junit_xml: str | None = None
    executor: str = "local"
    verbose: bool = False
    """The whole report (``--verbose``); the default is the short one."""


def option_type(name: str, convert: Callable[[str], Any] = str) -> Callable[[str], Any]:
    """argparse ``type=`` for the option of ``CheckRequest`` field ``name``: the text converted
    (``convert``), then checked by ``FIELD_CHECKS[name]``; a usage error is argparse's one line
    naming the option, with the checker's words."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {getattr(convert, '__name__', 'valid')}: {text!r}") from None
        try:
            return FIELD_CHECKS[name](value)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None

    parse.__name__ = name
    return parse


__all__ = [
    "FIELD_CHECKS",
    "INTERFACE_CHOICES",
    "CheckCommand",
    "CheckRequest",
    "check_aim",
    "check_cases",
    "check_device",
    "check_flag",
    "check_interface",
    "check_overrides",
    "check_progress",
    "check_reference",
    "check_stated_precision",
    "check_target",
    "check_time_limit",
    "option_type",
]
