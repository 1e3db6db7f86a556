"""The errors specverify raises at its users: one small hierarchy, in one place.

Three answers are not verdicts, and each has its own exit code on the command line:

- ``UsageError`` (exit 2): the caller asked for something that cannot be done as asked: a bad
  argument (``ArgumentError``, or ``ArgumentTypeError`` for a wrong type), a TARGET that cannot be
  loaded (``TargetError``), a subject whose signature fits no interface, or an unknown interface
  or budget name (``InterfaceError``). ``from specverify.errors import UsageError`` catches
  every one of them. ``UsageError`` is a ``ValueError`` (and ``ArgumentTypeError`` a
  ``TypeError``) so that code written against the built-in exceptions keeps working.
- ``EnvironmentProblem`` (exit 4): the subject cannot run on this machine (``MissingExtra``: a
  package an extra installs is missing; ``NoCuda``: CUDA code on a machine without CUDA). The
  pytest fixture skips on it, and only on it; JUnit writes ``<skipped>``.
- ``SubjectError``: what a subject did wrong while it ran (raised, hung, exited, broke its
  contract). It is carried in reports as a finding and never raised at a user: a user's broken
  sampler gets a report.

The layout follows Hypothesis's ``hypothesis.errors``: one public module a user imports errors
from, whatever part of the package raised them.
"""

from __future__ import annotations


class SpecverifyError(Exception):
    """The base of every error specverify raises on purpose."""


class UsageError(SpecverifyError, ValueError):
    """The caller's request cannot be carried out as given (exit 2). The message names the
    argument or the target and says what is wrong with it."""


class ArgumentError(UsageError):
    """An argument's value is out of range or unknown; the message names the argument."""


class ArgumentTypeError(UsageError, TypeError):
    """An argument has the wrong type; the message names the argument and the type it got."""


class TargetError(UsageError):
    """A TARGET (``module:function`` or ``file.py:function``) cannot be loaded as a subject."""


class InterfaceError(UsageError):
    """A usage error about a subject's interface or a budget: the interface could not be told from
    the subject, its signature fits none, its name or a budget's is unknown, an interface argument
    is out of range."""


class EnvironmentProblem(SpecverifyError):
    """The subject cannot run in this environment (exit 4); the message says what to install or
    where to run it. Never evidence against exactness."""


class MissingExtra(EnvironmentProblem):
    """A package the subject imports is not installed here (an extra of specverify's, or the
    subject's own dependency)."""


class NoCuda(EnvironmentProblem):
    """The subject runs CUDA code and this machine has no CUDA."""


class SubjectError(SpecverifyError):
    """A subject's own failure while it ran (it raised, hung, exited or broke its interface's
    contract). Reports carry it as a finding; specverify never raises it at a user."""


EXIT_CODES = {
    "exact": 0,
    "not exact": 1,
    "usage": 2,
    "inconclusive": 3,
    "environment": 4,
    "interrupted": 130,
    "terminated": 143,
}
"""The one exit-code table, the same for ``specverify check``, ``mutants report``, ``engines``, the
API's ``Report.exit_code`` and the JUnit writer: a verdict's code (0 exact, 1 not exact, 3
inconclusive), a usage error's (2), an environment error's (4), and a run stopped by Ctrl-C (130,
128 + SIGINT) or SIGTERM (143, 128 + SIGTERM)."""

VERDICTS = {True: "exact", False: "not exact", None: "inconclusive"}
"""A report's ``exact`` (True / False / None) -> its row of ``EXIT_CODES``."""

SEVERITY = ("exact", "inconclusive", "not exact", "environment", "usage")
"""The answers from least to most severe: several targets exit with the worst of their codes
(``worst_exit_code``), so a usage error is never hidden behind a verdict."""


def verdict_exit_code(exact: bool | None, environment: str | None = None) -> int:
    """The exit code of a report: ``EXIT_CODES`` of its verdict (``exact`` True, False, None),
    or the environment error's (4) when the subject could not run here (``environment`` says why)."""
    return EXIT_CODES["environment"] if environment else EXIT_CODES[VERDICTS[exact]]


def exit_code_of(error: BaseException) -> int:
    """The exit code for an error raised at a user: 4 for an environment problem, 2 for a usage
    error; ValueError for anything else (it is not an answer of specverify's)."""
    if isinstance(error, EnvironmentProblem):
        return EXIT_CODES["environment"]
    if isinstance(error, UsageError):
        return EXIT_CODES["usage"]
    raise ValueError(f"error: {type(error).__name__} is not one of specverify.errors' answers")


def worst_exit_code(*codes: int) -> int:
    """The most severe of ``codes`` by ``SEVERITY`` (usage > environment > not exact >
    inconclusive > exact); 0 for none. A code outside the table (130 after Ctrl-C) wins."""
    rank = {EXIT_CODES[name]: i for i, name in enumerate(SEVERITY)}
    return max(codes, key=lambda code: rank.get(code, len(SEVERITY)), default=EXIT_CODES["exact"])


__all__ = [
    "EXIT_CODES",
    "SEVERITY",
    "VERDICTS",
    "ArgumentError",
    "ArgumentTypeError",
    "EnvironmentProblem",
    "InterfaceError",
    "MissingExtra",
    "NoCuda",
    "SpecverifyError",
    "SubjectError",
    "TargetError",
    "UsageError",
    "exit_code_of",
    "verdict_exit_code",
    "worst_exit_code",
]
