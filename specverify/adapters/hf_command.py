"""``python -m specverify check-hf-generate``: transformers' assisted ``generate`` judged by ``check``.

A front end of ``specverify.surface.api.check``, nothing more: ``hf_loop.check`` runs ``api.check`` on
``hf_loop.generate`` (``generate(assistant_model=draft, do_sample=True)`` as a loop subject) on the
cases it declares (``hf_loop.LOOP_SETTINGS``), ``--n`` runs each, with transformers'
``assistant_ensemble_weight=0.5`` as the control that must come out NOT EXACT (else the report is
inconclusive); ``--tiny-qwen`` adds the end-to-end checks on the tiny random Qwen2 pair
(``hf_generate.add_to_report``: the prefix-tree chi-square, the engine's processed rows against
ours, the acceptance z-test) as findings of the same report. What it prints is ``check``'s report
(``api.Report.text()``, or ``--json``: ``Report.to_json()``), ``--junit-xml`` is ``check``'s
JUnit, the exit code is ``check``'s (``specverify.errors.EXIT_CODES``): 0 exact, 1 not exact, 2 usage error,
3 inconclusive.

The command line is parsed before torch and transformers load: a usage error is one line within
a second, not after ten seconds of imports.
"""

from __future__ import annotations

import sys

from ..common.command_line import OneLineParser, emit, parsed
from ..common.validation import (
    count_argument,
    positive_int_argument,
    seed_argument,
    tv_argument,
    writable_file_argument,
)


def parse_args(argv):
    ap = OneLineParser(
        prog="specverify check-hf-generate",
        description="Check transformers' assisted generation as a loop subject (python -m specverify "
        "check's report and exit codes: 0 exact, 1 not exact, 2 usage error, 3 inconclusive).",
    )
    ap.add_argument("--json", action="store_true", help="print check's report as one JSON object")
    ap.add_argument(
        "--n",
        type=positive_int_argument,
        default=2000,
        help="runs per case and for the control (default 2000); with --tiny-qwen also the "
        "generations per tiny-Qwen setting",
    )
    ap.add_argument("--seed", type=seed_argument, default=0, help="the check's seed (an integer >= 0)")
    ap.add_argument(
        "--detect-tv",
        type=tv_argument,
        default=0.15,
        metavar="TV",
        help="the TV every case must see with probability 0.95, else the verdict is inconclusive "
        "(default 0.15; n = 2000 sees 0.09-0.12)",
    )
    ap.add_argument(
        "--no-control",
        action="store_true",
        help="skip the control (assistant_ensemble_weight=0.5, which must be flagged)",
    )
    ap.add_argument(
        "--tiny-qwen",
        action="store_true",
        help="also check generate end to end on the tiny random Qwen2 pair (specverify.adapters."
        "hf_generate: exact law of 3 new tokens, processed rows, acceptance), findings in the "
        "same report",
    )
    ap.add_argument(
        "--n-acceptance",
        type=count_argument,
        default=100,
        help="with --tiny-qwen: generations per setting for acceptance, each of "
        "hf_settings.ACCEPTANCE_NEW_TOKENS (24) tokens (default 100)",
    )
    ap.add_argument(
        "--junit-xml", metavar="FILE", type=writable_file_argument, help="also write check's JUnit XML (one test case)"
    )
    ap.add_argument(
        "--loop", action="store_true", help="accepted for older command lines: the loop subject is what runs"
    )
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args, code = parsed(parse_args, argv)
    if args is None:  # --help, or one line of usage error
        return code
    from . import hf_loop

    rate = hf_loop.FALSE_FAIL_RATE / (2 if args.tiny_qwen else 1)  # the 1e-6 split over both checks
    report = hf_loop.check(
        args.n, args.seed, control=not args.no_control, detect_tv=args.detect_tv, false_fail_rate=rate
    )
    if args.tiny_qwen:
        from .hf_generate import add_to_report

        add_to_report(report, args.n, args.seed, args.n_acceptance, control=not args.no_control, false_fail_rate=rate)
    emit(report.to_json() + "\n" if args.json else report.text())
    sys.stdout.flush()
    code = report.exit_code
    if args.junit_xml:
        from ..errors import worst_exit_code
        from ..surface import junit
        from ..surface.check_run import junit_case

        case = junit_case(report.target, ("ok", report.to_dict()))
        written = junit.write(
            args.junit_xml, "specverify.check-hf-generate", [case], "specverify check-hf-generate: --junit-xml"
        )
        code = worst_exit_code(code, written)
    return code


__all__ = ["main", "parse_args"]
