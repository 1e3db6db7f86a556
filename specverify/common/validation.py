"""Input checks shared by every public function.

Each check raises an error whose message names the argument and the problem, so a caller never
gets a silent wrong answer or a deep NumPy traceback: ``specverify.errors.ArgumentTypeError`` (a
``TypeError``) when the value has the wrong type (a string or a bool for a number, a float for a
count), ``specverify.errors.ArgumentError`` (a ``ValueError``) when it has the right type and a bad
value (out of range, not finite, an unknown budget field). Both are usage errors
(``specverify.errors.UsageError``), and code that catches the built-in exceptions still catches
them. A probability vector is converted by NumPy first: one that does not convert is an
``ArgumentError`` naming it.

Probability vectors must sum to 1 within ``SUM_TOL`` (absolute). The tolerance is loose enough
for a float32 softmax over a 150k vocabulary (rounding error ~1e-6) and tight enough that an
unnormalized residual such as max(0, p - q) (which sums to 1 - alpha) is rejected.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ArgumentError, ArgumentTypeError

if TYPE_CHECKING:
    import numpy as np

SUM_TOL = 1e-5

SHORT_ROW = 8
"""Rows shorter than this are checked with Python floats (the battery's models have a few ids;
NumPy's per-call overhead is most of the check there); same sum, same result."""

DEFAULT_FALSE_FAIL_RATE = 1e-6
"""The false-fail rate of one whole run of a battery (every interface), split over its tests
(``laws.stats.split_budget``): the default of every statistical test in ``laws.stats`` and of
every budget in ``battery.budgets``. It lives here, at the floor, because both import it."""


def check_prob_vector(name: str, v) -> np.ndarray:
    """Return ``v`` as a 1-D float64 array renormalized to sum exactly 1, or raise ArgumentError."""
    import numpy as np  # here, not above: the command lines' argument types load no NumPy

    if type(v) is np.ndarray and v.dtype == np.float64 and v.ndim == 1 and 0 < v.size < SHORT_ROW:
        entries = v.tolist()
        total = sum(entries)  # below 8 entries np.add.reduce adds in this order: the same float
        if math.isfinite(total) and min(entries) >= 0 and abs(total - 1.0) <= SUM_TOL:
            return v / total
    try:
        arr = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"{name}: not a numeric vector ({exc})") from None
    if arr.ndim != 1:
        raise ArgumentError(f"{name}: expected a 1-D probability vector, got shape {arr.shape}")
    if arr.size == 0:
        raise ArgumentError(f"{name}: empty probability vector")
    total = float(np.add.reduce(arr))  # arr.sum() and arr.min() without their wrappers
    # fast path: a finite sum and a non-negative minimum imply every entry is finite and >= 0
    if not (math.isfinite(total) and np.minimum.reduce(arr) >= 0):
        _raise_entry_error(name, arr)
    if abs(total - 1.0) > SUM_TOL:
        raise ArgumentError(f"{name}: sums to {total:.9g}, not 1 (tolerance {SUM_TOL:g})")
    return arr / total


def _raise_entry_error(name: str, arr: np.ndarray):
    import numpy as np

    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ArgumentError(f"{name}: entry {bad} is {arr[bad]} (NaN or inf)")
    if np.any(arr < 0):
        bad = int(np.flatnonzero(arr < 0)[0])
        raise ArgumentError(f"{name}: entry {bad} is negative ({arr[bad]:.3g})")
    raise ArgumentError(f"{name}: the entries overflow when summed (sum is inf)")


def check_same_length(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ArgumentError(f"{name_a} and {name_b} have different lengths ({a.shape[0]} and {b.shape[0]})")


def check_k(k, name: str = "k") -> int:
    """k (the handout's gamma) must be an integer >= 1; bools and floats such as 2.0 are refused."""
    if type(k) is not int and (isinstance(k, bool) or not isinstance(k, numbers.Integral)):
        raise ArgumentTypeError(f"{name}: must be an integer >= 1, got {k!r} of type {type(k).__name__}")
    if k < 1:
        raise ArgumentError(f"{name}: must be >= 1, got {k}")
    return int(k)


def check_alpha(alpha, name: str = "alpha") -> float:
    a = _real(alpha, name)
    if not 0.0 <= a <= 1.0:
        raise ArgumentError(f"{name}: must lie in [0, 1], got {a!r}")
    return a


def check_cost_ratio(c, name: str = "cost_ratio") -> float:
    v = _real(c, name)
    if v < 0:
        raise ArgumentError(f"{name}: must be >= 0 (draft step time / target step time), got {v!r}")
    return v


def _real(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ArgumentTypeError(f"{name}: must be a real number, got {x!r} of type {type(x).__name__}")
    v = float(x)
    if not math.isfinite(v):
        raise ArgumentError(f"{name}: must be finite, got {v!r}")
    return v


def check_rate(name: str, x) -> float:
    """A probability strictly between 0 and 1 (a false-fail or false-pass rate)."""
    v = _number(name, x, "a probability strictly between 0 and 1")
    if not 0.0 < v < 1.0:
        raise ArgumentError(f"{name}: must be a probability strictly between 0 and 1, got {x!r}")
    return v


def check_discrepancy(name: str, d) -> float:
    """A total-variation distance in (0, 1]."""
    v = _number(name, d, "a total-variation distance in (0, 1]")
    if not 0.0 < v <= 1.0:
        raise ArgumentError(f"{name}: must be a total-variation distance in (0, 1], got {d!r}")
    return v


def check_finite(name: str, x) -> float:
    """A finite real number."""
    v = _number(name, x, "a finite real number")
    if not math.isfinite(v):
        raise ArgumentError(f"{name}: must be a finite real number, got {x!r}")
    return v


def _number(name: str, x, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ArgumentTypeError(f"{name}: must be {what}, got {x!r} of type {type(x).__name__}")
    return float(x)


def check_positive_real(name: str, x) -> float:
    """A finite real number > 0 (a timeout, a time budget)."""
    v = _real(x, name)
    if v <= 0:
        raise ArgumentError(f"{name}: must be > 0, got {v!r}")
    return v


def check_int(name: str, x, minimum: int = 0) -> int:
    """An integer >= ``minimum`` (a seed, a count); ArgumentTypeError for bools, floats and strings."""
    if type(x) is not int and (isinstance(x, bool) or not isinstance(x, numbers.Integral)):
        raise ArgumentTypeError(f"{name}: must be an integer >= {minimum}, got {x!r} of type {type(x).__name__}")
    if x < minimum:
        raise ArgumentError(f"{name}: must be >= {minimum}, got {x}")
    return int(x)


def check_seed(x, name: str = "seed") -> int:
    """A seed for ``numpy.random.default_rng``: an integer >= 0."""
    return check_int(name, x, 0)


MAX_WORKERS = 256
"""The most processes one subject's sampled runs may be shared among (``check_workers``)."""


def check_workers(x, name: str = "workers") -> int:
    """A number of worker processes for one subject: an integer from 1 to ``MAX_WORKERS``."""
    n = check_int(name, x, 1)
    if n > MAX_WORKERS:
        raise ArgumentError(f"{name}: must be <= {MAX_WORKERS}, got {n}")
    return n


def check_writable_file(name: str, path) -> str:
    """``path`` as a string, when a file can be created in its folder (checked before a long run).

    A device, a FIFO, a socket or a folder at ``path`` is refused (the writer never replaces
    them); a symbolic link is checked at its target, where the report will be written."""
    import os
    import tempfile

    from .files import NotARegularFile, destination

    try:
        real = destination(path)
    except NotARegularFile as exc:
        raise ArgumentError(
            f"{name}: {os.fspath(path)!r} is {exc.strerror.split(', ')[0]}, not a regular "
            f"file (specverify writes reports to regular files only)"
        ) from None
    folder = os.fspath(real.parent)
    if not os.path.isdir(folder):
        raise ArgumentError(f"{name}: folder {folder!r} does not exist")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".specverify-probe-"):
            pass
    except OSError as exc:
        raise ArgumentError(f"{name}: cannot write into {folder!r} ({exc.strerror})") from None
    return os.fspath(path)


def same_file(a, b) -> bool:
    """Whether two paths name the same file once links and relative parts are resolved (both
    written by one command would leave only one of the reports)."""
    import os

    if os.path.realpath(os.fspath(a)) == os.path.realpath(os.fspath(b)):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_distinct_files(**paths) -> None:
    """ArgumentError when two of the named output files are one file, e.g.
    ``check_distinct_files(out=args.out, junit_xml=args.junit_xml)`` (None: not asked for)."""
    import os

    given = [(k, v) for k, v in paths.items() if v]
    for i, (name_a, a) in enumerate(given):
        for name_b, b in given[i + 1 :]:
            if same_file(a, b):
                flag = lambda n: "--" + n.replace("_", "-")  # noqa: E731
                raise ArgumentError(
                    f"{flag(name_a)} and {flag(name_b)}: both name {os.fspath(b)!r}; give each report its own file"
                )


def _argument(convert, check):
    """An argparse ``type=``: the text converted, then checked; a failure is a usage error (exit 2)."""
    import argparse

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {convert.__name__}: {text!r}") from None
        try:
            return check(value)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None

    return parse


seed_argument = _argument(int, check_seed)
positive_seconds_argument = _argument(float, lambda x: check_positive_real("seconds", x))
positive_int_argument = _argument(int, lambda x: check_int("count", x, 1))
count_argument = _argument(int, lambda x: check_int("count", x, 0))
tv_argument = _argument(float, lambda x: check_discrepancy("tv", x))
writable_file_argument = _argument(str, lambda x: check_writable_file("file", x))


RATE_FIELDS = ("false_fail_rate",)
"""Budget fields that are probabilities strictly between 0 and 1."""

TV_FIELDS = ("detect_tv", "detect_tv_large")
"""Budget fields that are total-variation distances in (0, 1]."""


def check_overrides(what: str, budget, overrides: dict) -> dict:
    """``overrides`` of the dataclass ``budget`` (the ``what`` budget: "round", "loop",
    "kernel"), checked at the boundary so a battery never runs on a value it cannot honour: an
    unknown field is an ArgumentError naming it and the fields there are; a field whose value is a
    bool must get a bool, an int an integer >= 0, a float a finite number > 0 (rates in (0, 1),
    TVs in (0, 1]); a wrong type is an ArgumentTypeError, a bad value an ArgumentError. Other fields (names,
    tuples, devices) pass as given. Returns the overrides unchanged."""
    import dataclasses

    fields = {f.name for f in dataclasses.fields(budget)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ArgumentError(
            f"overrides: the {what} budget has no field(s) {', '.join(unknown)} "
            f"(its fields: {', '.join(sorted(fields))})"
        )
    for name, value in overrides.items():
        default, label = getattr(budget, name), f"{name} (a {what} budget field)"
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ArgumentTypeError(f"{label}: must be True or False, got {value!r}")
        elif isinstance(default, numbers.Integral):
            check_int(label, value, 0)
        elif isinstance(default, float):
            if name in RATE_FIELDS:
                check_rate(label, value)
            elif name in TV_FIELDS:
                check_discrepancy(label, value)
            else:
                check_positive_real(label, value)
    return overrides


Section = TypeVar("Section")
"""A budget dataclass of one interface (``with_overrides`` returns one of the same class)."""


def with_overrides(what: str, budget: Section, overrides: dict[str, Any]) -> Section:
    """``budget`` with ``overrides`` (checked by ``check_overrides``) replacing its fields; the
    budget itself when there are none."""
    import dataclasses

    return dataclasses.replace(budget, **check_overrides(what, budget, overrides)) if overrides else budget
