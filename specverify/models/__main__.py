"""``python -m specverify.models measure``: predict and measure speculative decoding on a real pair.

Pair selection, first match wins: ``--tiny`` (a random Qwen2 pair, nothing downloaded);
``--target/--draft`` and/or ``--target-gguf/--draft-gguf``; the local GGUF pair named by
SPECVERIFY_REAL_DIR, SPECVERIFY_REAL_TARGET_GGUF and SPECVERIFY_REAL_DRAFT_GGUF; else the
handout's Qwen/Qwen2.5-1.5B-Instruct drafted by Qwen/Qwen2.5-0.5B-Instruct.

Exit codes (``models.cli``): 0 done; 2 a usage error or a bad input, one line on stderr (a bad
option or --out is told before anything is loaded), or --out could not be written (the result
is printed first, then saved to a fallback file named in the one line on stderr); 130
interrupted. Without --json the table shows the main columns; --json and --out hold every field.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..common.command_line import EXIT_INTERRUPTED, EXIT_USAGE, OneLineParser, emit
from ..common.files import json_default
from ..common.validation import check_distinct_files, positive_int_argument, seed_argument, writable_file_argument
from . import loading, measure, measure_report, medusa, medusa_files, medusa_training
from .command_helpers import error, save_or_fall_back
from .head_command import add_train_head_parser, run_train_head

PROG = "specverify models measure"


def build_parser() -> argparse.ArgumentParser:
    """The parser; its usage errors (and its subcommands') are one line on stderr, exit 2."""
    parser = OneLineParser(prog="specverify models")
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="predict alpha, c and speedup, then measure them")
    m.add_argument("--target", help="hub id or local folder of the target")
    m.add_argument("--draft", help="hub id or local folder of the draft")
    m.add_argument("--target-gguf", help="GGUF file of the target (a path, or a name inside --target)")
    m.add_argument("--draft-gguf", help="GGUF file of the draft (a path, or a name inside --draft)")
    m.add_argument("--tiny", action="store_true", help="a tiny random Qwen2 pair (CPU, offline)")
    m.add_argument(
        "--workload",
        choices=[*measure.WORKLOADS, "all"],
        default="all",
        help="which prompts to measure on (built-in lists); all (default): each in turn",
    )
    m.add_argument(
        "--drafter",
        action="append",
        choices=[*measure.DRAFTERS, "all"],
        help="drafters to run besides the draft model at fixed k (repeatable; default: model)",
    )
    m.add_argument(
        "--mode",
        choices=["greedy", "sampled", "all"],
        default="all",
        help=f"greedy, sampled (T = {measure.SAMPLED_T}) or both",
    )
    m.add_argument("--sweep", action="store_true", help="the draft model at every fixed k in 1..K")
    m.add_argument(
        "--head",
        help="a Medusa head for --drafter medusa (from train-head; --tiny trains one in seconds when none is given)",
    )
    m.add_argument(
        "--max-new-tokens", type=positive_int_argument, default=64, help="tokens generated per prompt (default 64)"
    )
    m.add_argument(
        "--k",
        type=positive_int_argument,
        default=4,
        help="drafted tokens per round (the handout's gamma); the most a policy may choose",
    )
    m.add_argument("--n-prompts", type=positive_int_argument, default=5, help="prompts per workload (built-in list)")
    m.add_argument("--seed", type=seed_argument, default=0, help="seed of the sampled runs (an integer >= 0)")
    m.add_argument(
        "--repeats", type=positive_int_argument, default=20, help="timed forwards per cost (medians): c and v(0..K)"
    )
    m.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    m.add_argument("--static-cache", action="store_true", help="decode on StaticCache objects")
    m.add_argument(
        "--compile", action="store_true", help="torch.compile both forwards (CUDA only; pair it with --static-cache)"
    )
    m.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    m.add_argument(
        "--out",
        type=writable_file_argument,
        help="also write the JSON object to this file (atomically, after printing the result)",
    )
    add_train_head_parser(sub)
    return parser


def load_from_args(args) -> loading.ModelPair:
    if args.tiny:
        if any((args.target, args.draft, args.target_gguf, args.draft_gguf)):
            raise ValueError("--tiny: cannot be combined with --target/--draft/--*-gguf")
        torch, _ = loading.torch_modules()
        torch.set_num_threads(1)  # a tiny model is launch-bound; more threads only contend
        return loading.tiny_pair(seed=args.seed)
    chosen = {
        "target": args.target,
        "draft": args.draft,
        "target_gguf": args.target_gguf,
        "draft_gguf": args.draft_gguf,
    }
    if not any(chosen.values()):
        chosen = loading.env_pair() or chosen
    return loading.load_pair(device=args.device, **chosen)


def maybe_compile(pair, args) -> None:
    if not args.compile:
        return
    if pair.device == "cpu":
        raise ValueError("--compile: needs a CUDA device (on CPU it only adds compile time)")
    if not args.static_cache:
        raise ValueError("--compile: use it with --static-cache, or every cache length recompiles")
    torch, _ = loading.torch_modules()
    for model in (pair.target, pair.draft):
        model.forward = torch.compile(model.forward, mode="reduce-overhead", dynamic=False)


def tiny_head(pair, seed: int):
    """A Medusa head for the tiny pair, trained in seconds on 256 positions of its own text."""
    data = medusa_training.collect_training_data(
        pair.target,
        pair.tokenizer,
        medusa_training.TRAIN_PROMPTS,
        256,
        max_new_tokens=32,
        seed=seed,
        vocab_size=pair.vocab_size,
    )
    head = medusa.head_for(pair.target, seed=seed, target_name=pair.name)
    medusa_training.train_head(head, pair.target, data, epochs=2, seed=seed)
    return head


def choose_drafters(args, pair) -> tuple[list[str], object]:
    """The drafters to run and the Medusa head (or None). ``all`` leaves medusa out, with a note on
    stderr, when there is no head and the pair is not the tiny one (training takes minutes)."""
    asked = args.drafter or ["model"]
    drafters = list(measure.DRAFTERS) if "all" in asked else list(dict.fromkeys(asked))
    if "medusa" not in drafters:
        return drafters, None
    if args.head:
        return drafters, medusa_files.load_head(args.head, pair.target, name="--head")
    if args.tiny:
        return drafters, tiny_head(pair, args.seed)
    if "all" in asked:
        print(
            "note: --drafter all without --head: medusa left out (train a head with "
            "python -m specverify.models train-head)",
            file=sys.stderr,
        )
        return [d for d in drafters if d != "medusa"], None
    raise ValueError("--drafter medusa: needs --head HEAD.pt (python -m specverify.models train-head)")


def check_inputs(args) -> None:
    """What can be told before anything is loaded: counts, --head, and --out not being --head."""
    for name in ("max_new_tokens", "k", "n_prompts", "repeats"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(args, name)}")
    for workload in measure.WORKLOADS if args.workload == "all" else (args.workload,):
        measure.select_prompts(workload, args.n_prompts)  # "n_prompts: at most N built-in ..."
    device = args.device
    if (
        device is not None
        and device not in ("cpu", "cuda")
        and not (device.startswith("cuda:") and device[5:].isdigit())
    ):
        raise ValueError(f"--device: expected cpu, cuda or cuda:N, got {device!r}")
    if args.head is not None:
        if not os.path.isfile(args.head):
            what = "is a folder" if os.path.isdir(args.head) else "does not exist"
            raise ValueError(f"--head: {args.head!r} {what}; give a head file saved by train-head")
        check_distinct_files(out=args.out, head=args.head)
    if not args.tiny:
        for name in ("target", "draft"):
            loading.check_source(f"--{name}", getattr(args, name))


def run_measure(args) -> dict:
    check_inputs(args)
    pair = load_from_args(args)
    maybe_compile(pair, args)
    workloads = measure.WORKLOADS if args.workload == "all" else (args.workload,)
    drafters, head = choose_drafters(args, pair)
    modes = {"greedy": (0.0,), "sampled": (measure.SAMPLED_T,), "all": (0.0, measure.SAMPLED_T)}
    rows = measure.measure(
        pair,
        workloads,
        k=args.k,
        max_new_tokens=args.max_new_tokens,
        n_prompts=args.n_prompts,
        seed=args.seed,
        repeats=args.repeats,
        static_cache=args.static_cache,
        drafters=drafters,
        modes=modes[args.mode],
        sweep=args.sweep,
        head=head,
    )
    return {
        "pair": pair.name,
        "device": pair.device,
        "dtype": str(pair.dtype),
        "vocab_size": pair.vocab_size,
        "max_new_tokens": args.max_new_tokens,
        "rows": rows,
    }


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "train-head":
        return run_train_head(args)
    try:
        result = run_measure(args)
    except (ValueError, RuntimeError, ImportError, OSError) as exc:  # loading.LoadError included
        error(PROG, exc)  # "target: ..." from loading is printed as "--target: ..."
        return EXIT_USAGE
    except KeyboardInterrupt:
        error(PROG, "interrupted")
        return EXIT_INTERRUPTED
    # print first: a failing --out (a full disk) must not lose the measurement
    emit(
        (
            json.dumps(measure_report.json_safe(result), default=json_default)
            if args.json
            else measure_report.human_report(result)
        )
        + "\n"
    )  # emit: a path that LC_ALL=C cannot encode is escaped
    sys.stdout.flush()
    if not args.out:
        return 0
    saved, problem = save_or_fall_back(
        "--out", args.out, lambda path: measure_report.write_json_atomic(path, result), "specverify-measure", ".json"
    )
    if problem:
        error(PROG, problem if args.json or saved else f"{problem}; the JSON object follows on stdout")
        if not (args.json or saved):  # the table alone leaves fields out: print them all
            print(json.dumps(measure_report.json_safe(result), default=json_default))
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
