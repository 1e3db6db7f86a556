"""``python -m specverify check-hf-generate``: its command line, parsed before torch and
transformers load (a usage error is one line within a second, not after ten seconds of imports);
the check itself is ``hf_generate.check_generate`` or, with ``--loop``, ``hf_loop.check_loop``."""

from __future__ import annotations

import json
import sys

from ..cli import EXIT_USAGE, OneLineParser
from ..validation import count_argument, positive_int_argument, seed_argument

def parse_args(argv):
    ap = OneLineParser(prog="python -m specverify check-hf-generate",
                       description="Check transformers' assisted generation end to end.")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--n", type=positive_int_argument, default=2000,
                    help="generations per setting and control (default 2000)")
    ap.add_argument("--seed", type=seed_argument, default=0)
    ap.add_argument("--n-acceptance", type=count_argument, default=100,
                    help="generations per setting for acceptance, each of hf_generate.ACCEPTANCE_NEW_TOKENS "
                         "(24) tokens (default 100)")
    ap.add_argument("--no-control", action="store_true", help="skip the biased control setting")
    ap.add_argument("--loop", action="store_true",
                    help="instead, run generate as a loop subject through the loop battery (repetition_penalty, "
                         "min_p, sequence_bias, eos_token_id, max_new_tokens: specverify.adapters.hf_loop); "
                         "--n is then the runs per setting")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # OneLineParser printed the usage error (one line)
        return 0 if exc.code in (0, None) else EXIT_USAGE
    if args.loop:
        from . import hf_loop

        report = hf_loop.check_loop(args.n, args.seed, control=not args.no_control)
        sys.stdout.write(json.dumps(report) + "\n" if args.json else hf_loop.human(report))
        return {True: 0, False: 1, None: 3}[report["exact"]]
    from .hf_generate import check_generate, human

    report = check_generate(args.n, args.seed, args.n_acceptance, control=not args.no_control)
    sys.stdout.write(json.dumps(report) + "\n" if args.json else human(report))
    return 0 if not report["findings"] else 1


__all__ = ["main", "parse_args"]
