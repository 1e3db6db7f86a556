"""Every option of every command says what it does and what it is when not given: ``--help`` of
each command (and of each subcommand of ``mutants``, ``models``, ``bench`` and ``experiments``) is
run in-process with argparse's ``add_argument`` watched; every option added without a help text
is named, and so is every option with a default whose help does not show it."""

import argparse
import contextlib
import io

import pytest

from specverify import cli
from specverify.bench.__main__ import COMMANDS as BENCH_COMMANDS
from specverify.common.command_line import OneLineParser, has_shown_default

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


def help_and_defaulted_options(argv: list[str], monkeypatch) -> tuple[str, list[argparse.Action]]:
    """``specverify ARGV --help``'s text, and the options with a default (``has_shown_default``)
    of the parser that printed it, when it is one of specverify's own (``OneLineParser``, whose
    help shows defaults; a command printing its own usage has none)."""
    printed: list[argparse.ArgumentParser] = []
    format_help = argparse.ArgumentParser.format_help

    def watched(self):
        printed.append(self)
        return format_help(self)

    monkeypatch.setattr(argparse.ArgumentParser, "format_help", watched)
    monkeypatch.setenv("COLUMNS", "1000")  # long lines: an option's help on as few lines as can be
    text = help_text(argv)
    parsers = [p for p in printed if isinstance(p, OneLineParser)]
    return text, [a for p in parsers for a in p._actions if has_shown_default(a)]


def help_text(argv: list[str]) -> str:
    """``specverify ARGV --help``'s text."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main([*argv, "--help"])
        except SystemExit:
            pass
    return out.getvalue()


def option_blocks(text: str) -> dict[str, str]:
    """Each option's help in ``text``, by each of its option strings: its line and the lines
    below it that are indented further (argparse starts a long option's help below it)."""
    blocks: dict[str, str] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("  -"):
            current = [line]
            for spelling in line.split("  ", 2)[1].split(", "):
                blocks[spelling.split()[0]] = current  # the same list: later lines join it
        elif current and line.startswith("    "):
            current.append(line)
        else:
            current = []
    return {opt: " ".join(" ".join(lines).split()) for opt, lines in blocks.items()}


@pytest.mark.parametrize("argv", COMMAND_LINES, ids=" ".join)
def test_every_option_with_a_default_shows_it(argv, monkeypatch):
    if argv[0] in ("models", "check-hf-generate"):
        pytest.importorskip("torch")
    text, defaulted = help_and_defaulted_options(argv, monkeypatch)
    blocks = option_blocks(text)
    shown = [a for a in defaulted if a.help is not argparse.SUPPRESS]
    hidden = [a.option_strings[0] for a in shown if "default" not in blocks[a.option_strings[-1]]]
    assert hidden == [], text


def test_check_help_shows_the_default_budget_and_seed(monkeypatch):
    text, _ = help_and_defaulted_options(["check"], monkeypatch)
    blocks = option_blocks(text)
    assert blocks["--budget"].endswith("(default: standard)"), blocks["--budget"]
    assert blocks["--seed"].endswith("(default: 0)"), blocks["--seed"]


@pytest.mark.parametrize("argv", COMMAND_LINES, ids=" ".join)
def test_help_reads_as_plain_text(argv):
    """A docstring's reST markup (``name``) does not reach a terminal's help text."""
    if argv[0] in ("models", "check-hf-generate"):
        pytest.importorskip("torch")
    text = help_text(argv)
    assert "usage:" in text and "``" not in text, text
