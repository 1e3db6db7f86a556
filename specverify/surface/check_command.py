"""``python -m specverify check``: its command line, parsed into one checked request
(``request.CheckCommand``: the TARGETs, one ``CheckRequest``, the outputs, the executor) before
NumPy, SciPy or the battery load (a usage error is one line on stderr and exit 2 within a
second); the check itself is ``check_run.run`` (the targets, the executor, the reports).

Each option that fills a field of ``CheckRequest`` is checked by that field's checker
(``request.option_type``: the same words as the API's ``check`` keyword); the budget names and
``tv=X`` come from the one budget table (``specverify.battery.budgets``, standard library only);
what each budget covers (its cases) is loaded only for ``--help``.
"""

from __future__ import annotations

import argparse
import sys

from .. import interfaces
from ..battery import budgets
from ..battery.executors import ExecutorUnavailable, executor_argument, preflight
from ..common.command_line import OneLineParser, emit, parsed
from ..common.validation import writable_file_argument
from ..errors import EXIT_CODES
from ..laws.precision import PRECISIONS
from .request import INTERFACE_CHOICES, CheckCommand, CheckRequest, option_type

BUDGET_WORDS = ", ".join([*budgets.NAMES, "tv=X"])


def budget_argument(text: str) -> str:
    """argparse ``type=`` for --budget: a named budget, or tv=X (a campaign that sees TV X),
    checked by ``budgets.check_budget`` (the request's checker; nothing built)."""
    try:
        budgets.check_budget(text)
    except ValueError as exc:
        if budgets.is_campaign(text):  # tv=X with a bad X: the range X may take
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {BUDGET_WORDS})") from None
    return text


def aim_argument(name: str):
    """argparse ``type=`` for --vocab, --k and --max-tokens (``interfaces.aim``'s checks)."""

    def parse(text: str):
        try:
            aimed = interfaces.aim(**{name: text})
        except interfaces.InterfaceError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
        return {"vocab": aimed.vocab, "k": aimed.ks, "max_tokens": aimed.max_tokens}[name]

    parse.__name__ = name
    return parse


def budget_help() -> str:
    """--budget's help: what each named budget covers (the cases of the handout's interface,
    ``interfaces.HANDOUT``: loaded here)."""
    handout = interfaces.get(interfaces.HANDOUT)
    coverage = "; ".join(f"{name}: {handout.coverage(handout.budget(name))}" for name in budgets.NAMES)
    return (
        f"how much to run ({coverage}; tv=X: every case by statistics until a TV "
        f"of X is seen, see specverify.surface.api.campaign_runs)"
    )


class HelpAfter(argparse.Action):
    """``-h/--help``: ``fill()`` completes the help texts that cost imports, then the help is
    printed and the parser exits 0, as argparse's own help does."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.fill = lambda: None

    def __call__(self, parser, namespace, values, option_string=None):
        self.fill()
        parser.print_help()
        parser.exit()


def parse_args(argv):
    """The command line as one ``CheckCommand``; SystemExit (after one line on stderr) for a
    usage error."""
    ap = OneLineParser(
        prog="specverify check",
        add_help=False,
        description="Check that speculative samplers are exact. Exit 0 exact, 1 not exact, "
        "2 usage error, 3 inconclusive, 4 environment error: the subject cannot run here "
        "(several targets: the worst of them).",
    )
    show_help = ap.add_argument("-h", "--help", action=HelpAfter, help="show this help message and exit")
    ap.add_argument(
        "targets", metavar="TARGET", nargs="+", help="package.module:function or path/file.py:function (one or more)"
    )
    ap.add_argument(
        "--json", action="store_true", help="print one JSON object (one line per target when there are several)"
    )
    ap.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="the whole report: every finding whole and each check that ran (the default report is "
        "short: verdict, reach, power, one line per finding, the counterexample last; --json has everything)",
    )
    ap.add_argument("--seed", type=option_type("seed", int), default=0, help="an integer >= 0")
    budget = ap.add_argument(
        "--budget",
        type=budget_argument,
        default="standard",
        metavar="BUDGET",
        help=f"how much to run ({BUDGET_WORDS}; --help says what each covers)",
    )
    assert isinstance(show_help, HelpAfter), "add_argument returns the action its class made"
    show_help.fill = lambda: setattr(budget, "help", budget_help())
    ap.add_argument(
        "--interface",
        choices=INTERFACE_CHOICES,
        default="auto",
        help="round: the handout's speculative_step(p_fn, q_fn, prefix, k, rng); loop: "
        "generate(target, draft, requests, k, rng); kernel: kernel(draft_ids, "
        "draft_probs, target_probs, uniforms); auto (default): by the function's "
        "parameter names",
    )
    ap.add_argument(
        "--device",
        default=None,
        metavar="DEVICE",
        help="cpu (default) or cuda / cuda:N: a kernel's tensors on that device (torch; "
        "the subject's process is spawned, not forked)",
    )
    ap.add_argument(
        "--vocab",
        type=aim_argument("vocab"),
        default=None,
        metavar="V",
        help="aim the check at an engine's vocabulary size (2 to 2^20): generated cases at "
        "V besides the budget's (binned chi-square per position)",
    )
    ap.add_argument(
        "--k",
        type=aim_argument("k"),
        default=None,
        metavar="K",
        help="the draft lengths to reach: K, A..B or A,B,C (each 1 to 16): one aimed case per k",
    )
    ap.add_argument(
        "--max-tokens",
        type=aim_argument("max_tokens"),
        default=None,
        metavar="N",
        help="the longest output an aimed loop request asks for, and the window an aimed round case judges (0 to 64)",
    )
    ap.add_argument(
        "--time-limit",
        type=option_type("time_limit", float),
        default=None,
        metavar="SECONDS",
        help="stop each TARGET's battery after SECONDS (off by default): the budget, not the clock, "
        "decides every run count; a battery this stops says after how many of its planned runs, and "
        "its verdict is INCONCLUSIVE unless a finding came first",
    )
    ap.add_argument(
        "--workers",
        type=option_type("workers", int),
        default=1,
        metavar="N",
        help="processes of a round subject that share its enumerations and sampled runs (default 1; "
        "the report is the same with any N: each block of runs draws from its own stream, and an "
        "enumeration draws nothing)",
    )
    ap.add_argument(
        "--precision",
        type=option_type("precision"),
        default=None,
        metavar="{" + ",".join(PRECISIONS) + "}",
        help="the working precision to judge exact laws at (default: as observed while the enumerator "
        "follows the subject): an exact TV within the rounding of the token-wise rule carried out in it, "
        "on the same case, is exact at that rounding (docs/CHECK.md, Rounding)",
    )
    ap.add_argument(
        "--reference",
        type=option_type("reference"),
        default=None,
        metavar="TARGET",
        help="the engine's own target-only path (module:function or file.py:function, the subject's "
        "interface; it may ignore the draft and k): judge the subject against it instead of this project's "
        "target-only definition, and report where the two differ (loop and round; docs/LOOP.md)",
    )
    ap.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop each TARGET's battery at its first finding that makes it NOT EXACT (as pytest -x): "
        "the same verdict sooner, the cases after that finding not run",
    )
    ap.add_argument(
        "--plot",
        metavar="FILE",
        type=plot_file_argument,
        help="draw the counterexample's two laws side by side (the target's and the subject's, the "
        "largest differences first, TV and p-value in the title) into FILE (.png, .pdf or .svg); one TARGET",
    )
    add_junit_and_executor(
        ap,
        "target",
        "local (default: one target after another here), ray (RAY_ADDRESS or a "
        "local Ray instance) or ray://ADDRESS: Ray tasks per target and per case "
        "enumeration",
    )
    return command(ap.parse_args(argv), ap)


def command(args: argparse.Namespace, ap: argparse.ArgumentParser) -> CheckCommand:
    """The parsed options as one request (each field checked by its option's ``type=``);
    ``--plot`` with several TARGETs is a usage error of the parser (one line, exit 2)."""
    if args.plot and len(args.targets) > 1:
        ap.error(f"--plot: draws one TARGET's counterexample; got {len(args.targets)} targets")
    request = CheckRequest(
        budget=args.budget,
        seed=args.seed,
        interface=args.interface,
        aim=interfaces.Aim(args.vocab, args.k or (), args.max_tokens),
        device=args.device,
        fail_fast=args.fail_fast,
        time_limit=args.time_limit,
        workers=args.workers,
        precision=args.precision,
        reference=args.reference,
    )
    return CheckCommand(
        targets=tuple(args.targets),
        request=request,
        json=args.json,
        plot=args.plot,
        junit_xml=args.junit_xml,
        executor=args.executor,
        verbose=args.verbose,
    )


workers_argument = option_type("workers", int)
"""argparse ``type=`` for ``--workers N`` (``check``'s and ``engines``'): 1 to ``validation.MAX_WORKERS``."""


def plot_file_argument(text: str) -> str:
    """``--plot FILE``: a writable file whose suffix names a format the figure can take."""
    from .plots import figure_format

    path = writable_file_argument(text)
    try:
        figure_format(path)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return path


def add_junit_and_executor(ap, each: str, executor_help: str) -> None:
    """``--junit-xml FILE`` (one test case per ``each``, written atomically; the folder checked
    now) and ``--executor`` (local, ray or ray://ADDRESS, checked by
    ``executors.executor_argument``), as ``check`` and ``mutants report`` take them."""
    ap.add_argument(
        "--junit-xml",
        metavar="FILE",
        type=writable_file_argument,
        help=f"also write JUnit XML: one test case per {each} (atomically)",
    )
    ap.add_argument("--executor", type=executor_argument, default="local", help=executor_help)


def main(argv=None) -> int:
    """Parse, then check every TARGET (``check_run.run``); the exit code."""
    request, code = parsed(parse_args, argv)
    if request is None:  # --help, or one line of usage error
        return code
    try:
        preflight(request.executor)
    except ExecutorUnavailable as exc:
        emit(f"specverify check: {exc}\n", sys.stderr)
        return EXIT_CODES["usage"]
    from .check_run import run

    return run(request)


__all__ = [
    "BUDGET_WORDS",
    "HelpAfter",
    "add_junit_and_executor",
    "aim_argument",
    "budget_argument",
    "budget_help",
    "command",
    "main",
    "parse_args",
    "workers_argument",
]
