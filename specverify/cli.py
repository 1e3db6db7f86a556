"""The ``specverify`` command (``python -m specverify`` is the same): one subcommand per job.

    specverify check TARGET ...        is a sampler, generation loop or kernel exact?
    specverify mutants report          the mutant report: every catalogued bug found, every control passed
    specverify engines                 the serving engines' own verification code, judged
    specverify bench [kernel|...]      benchmarks that print ratios side by side
    specverify experiments NAME|all    the handout's experiments, figures and tables
    specverify models measure|...      real draft/target pairs: predicted vs measured speedup

Each subcommand's module is imported only when it is named, so ``specverify --help`` and a usage
error answer before NumPy, SciPy or torch load.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .common.command_line import dispatch, exit_with

PROG = "specverify"

COMMANDS = {
    "check": ("specverify.surface.check_command", "is a speculative sampler, generation loop or kernel exact?"),
    "check-hf-generate": (
        "specverify.adapters.hf_command",
        "is a Hugging Face model.generate(assistant_model=...) set-up exact?",
    ),
    "mutants": ("specverify.mutants.command", "the mutant report: every catalogued bug found, every control passed"),
    "engines": ("specverify.engines.__main__", "the serving engines' own verification code, judged"),
    "bench": ("specverify.bench.__main__", "benchmarks: the suite, the kernel interface, the hot path, samplers"),
    "experiments": ("specverify.experiments", "the handout's experiments: figures and tables"),
    "models": ("specverify.models.__main__", "real draft/target pairs: measure speedup, train a Medusa head"),
}
"""Subcommand -> (the module whose ``main(argv)`` runs it, its one line in ``--help``)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand ``argv`` names (``sys.argv[1:]``); its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    return dispatch(PROG, "Checks that speculative-decoding samplers are exact.", COMMANDS, argv)


def run() -> None:
    """The console script: exit with ``main``'s code (``exit_with``)."""
    exit_with(main())


__all__ = ["COMMANDS", "main", "run"]
