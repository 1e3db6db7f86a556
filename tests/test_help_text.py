"""Every option of every command says what it does: ``--help`` of each command (and of each
subcommand of ``mutants``, ``models``, ``bench`` and ``experiments``) is run in-process with
argparse's ``add_argument`` watched, and every option added without a help text is named."""

import argparse
import contextlib
import io

import pytest

from specverify import cli
from specverify.bench.__main__ import COMMANDS as BENCH_COMMANDS

COMMAND_LINES = [
    ["check"],
    ["check-hf-generate"],
    ["mutants"],
    ["mutants", "report"],
    ["mutants", "list"],
    ["engines"],
    ["experiments"],
    ["models"],
    ["models", "measure"],
    ["models", "train-head"],
    *[["bench", name] for name in BENCH_COMMANDS],
]


def options_without_help(argv: list[str], monkeypatch) -> list[str]:
    """The options ``specverify ARGV --help`` adds with no help text (positional arguments and
    subcommand choices aside)."""
    silent: list[str] = []
    add = argparse._ActionsContainer.add_argument

    def watched(self, *args, **kwargs):
        action = add(self, *args, **kwargs)
        if action.option_strings and not action.help and action.help is not argparse.SUPPRESS:
            silent.append("/".join(action.option_strings))
        return action

    monkeypatch.setattr(argparse._ActionsContainer, "add_argument", watched)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = cli.main([*argv, "--help"])
        except SystemExit as stop:
            code = stop.code
    assert code in (0, None), (argv, out.getvalue())
    assert "usage:" in out.getvalue(), argv
    return silent


@pytest.mark.parametrize("argv", COMMAND_LINES, ids=" ".join)
def test_every_option_has_a_help_text(argv, monkeypatch):
    if argv[0] in ("models", "check-hf-generate"):
        pytest.importorskip("torch")
    assert options_without_help(argv, monkeypatch) == []


def test_the_watch_sees_an_option_without_help(monkeypatch):
    silent: list[str] = []
    add = argparse._ActionsContainer.add_argument

    def watched(self, *args, **kwargs):
        action = add(self, *args, **kwargs)
        if action.option_strings and not action.help:
            silent.append("/".join(action.option_strings))
        return action

    monkeypatch.setattr(argparse._ActionsContainer, "add_argument", watched)
    parser = argparse.ArgumentParser()
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--loud", action="store_true", help="say more")
    assert silent == ["--quiet"]


def help_text(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main([*argv, "--help"])
        except SystemExit:
            pass
    return out.getvalue()


@pytest.mark.parametrize("argv", COMMAND_LINES, ids=" ".join)
def test_help_reads_as_plain_text(argv):
    """A docstring's reST markup (``name``) does not reach a terminal's help text."""
    if argv[0] in ("models", "check-hf-generate"):
        pytest.importorskip("torch")
    text = help_text(argv)
    assert "usage:" in text and "``" not in text, text
