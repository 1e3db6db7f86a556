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


EXIT_CODES = {"exact": 0, "not exact": 1, "usage": 2, "inconclusive": 3, "environment": 4}
"""The one exit-code table: a verdict's code, a usage error's (2) and an environment error's (4),
the same for ``specverify check``, ``mutants report`` and ``engines``."""


def exit_code_of(error: BaseException) -> int:
    """The exit code for an error raised at a user: 4 for an environment problem, 2 for a usage
    error; ValueError for anything else (it is not an answer of specverify's)."""
    if isinstance(error, EnvironmentProblem):
        return EXIT_CODES["environment"]
    if isinstance(error, UsageError):
        return EXIT_CODES["usage"]
    raise ValueError(f"error: {type(error).__name__} is not one of specverify.errors' answers")


__all__ = [
    "EXIT_CODES",
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
]
