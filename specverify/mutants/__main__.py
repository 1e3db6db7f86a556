"""``python -m specverify.mutants``: ``specverify mutants`` (``command.main``)."""

from ..common.command_line import exit_with
from .command import main

if __name__ == "__main__":
    exit_with(main())
