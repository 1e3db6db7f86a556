"""``python -m specverify.models train-head``: collect the target's own text, train a Medusa-style
t + 2 head on it, evaluate it held out, save it (``models.medusa`` is the head, its training and
``medusa_generate``; this module is only the command over them).

``add_train_head_parser`` builds the parser (torch is imported only when the command runs),
``train_head_command`` does the work and returns its figures as a dict,
``run_train_head`` prints them (``--json``: one JSON object) and maps errors to exit codes
(``models.cli``: 0 done, 2 a bad input or an --out that could not be written, 130 interrupted).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

from ..common.command_line import EXIT_INTERRUPTED, EXIT_USAGE
from ..common.validation import positive_int_argument, same_file, seed_argument
from . import decoding, loading
from .command_helpers import error, save_or_fall_back, suffixed_file_argument
from .loading import torch_modules
from .medusa import head_for, medusa_generate
from .medusa_files import json_default, save_head
from .medusa_training import HELD_OUT_PROMPTS, TRAIN_PROMPTS, collect_training_data, evaluate_head, train_head


def add_train_head_parser(subparsers) -> argparse.ArgumentParser:
    """``train-head``: collect target-generated text, train a head, evaluate it held out, save it."""
    p = subparsers.add_parser("train-head", help="train a Medusa-style t+2 head on the target's own text")
    p.add_argument("--tiny", action="store_true", help="the tiny random Qwen2 target (CPU, offline)")
    p.add_argument("--target", help="hub id or local folder of the target")
    p.add_argument("--target-gguf", help="GGUF file of the target (a path, or a name inside --target)")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    p.add_argument(
        "--out",
        type=suffixed_file_argument(),
        required=True,
        help="where to save the head (a file name with a suffix: HEAD.pt; checked before training)",
    )
    p.add_argument("--positions", type=positive_int_argument, default=2000, help="training positions")
    p.add_argument("--epochs", type=positive_int_argument, default=3, help="passes over the training positions")
    p.add_argument("--seed", type=seed_argument, default=0, help="seed of the text, the split and the head's init")
    p.add_argument("--eval-positions", type=positive_int_argument, default=256, help="held-out positions")
    p.add_argument("--max-new-tokens", type=positive_int_argument, default=64, help="tokens per rollout")
    p.add_argument("--temperature", type=float, default=0.7, help="temperature of the training text (0: greedy)")
    p.add_argument("--lr", type=float, default=1e-3, help="the optimizer's learning rate (default 1e-3)")
    p.add_argument("--top-k-targets", type=positive_int_argument, default=64, help="ids kept of each p_{t+2}")
    p.add_argument(
        "--generate-prompts",
        type=int,
        default=2,
        help="held-out prompts decoded greedily with medusa_generate and target-only (0: skip)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _load_target(args):
    torch, _ = torch_modules()
    if args.tiny:
        if args.target or args.target_gguf:
            raise ValueError("--tiny: cannot be combined with --target/--target-gguf")
        torch.set_num_threads(1)  # a tiny model is launch-bound; more threads only contend
        pair = loading.tiny_pair(seed=0)
        return pair.target, pair.tokenizer, pair.vocab_size, pair.name
    target, gguf = args.target, args.target_gguf
    if not (target or gguf):
        folder, name = os.environ.get(loading.ENV_DIR), os.environ.get(loading.ENV_TARGET_GGUF)
        if not (folder and name):
            raise ValueError(
                f"--target: give --tiny, --target/--target-gguf, or set {loading.ENV_DIR} and {loading.ENV_TARGET_GGUF}"
            )
        target, gguf = folder, name
    tokenizer = loading.load_tokenizer(target, gguf_file=gguf, role="target tokenizer")
    model = loading.load_model(target, gguf_file=gguf, device=args.device, role="target")
    vocab = len(tokenizer)
    if vocab > model.config.vocab_size:
        raise ValueError(f"target: config.vocab_size {model.config.vocab_size} < tokenizer {vocab}")
    return model, tokenizer, vocab, str(gguf or target)


def train_head_command(args) -> dict:
    """What ``train-head`` does, as a dict of figures (also used by the tests)."""
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise ValueError(f"--temperature: must be a finite number >= 0, got {args.temperature}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise ValueError(f"--lr: must be a finite number > 0, got {args.lr}")
    if args.generate_prompts < 0:
        raise ValueError(f"--generate-prompts: must be >= 0, got {args.generate_prompts}")
    given = [
        args.target_gguf,
        os.path.join(args.target, args.target_gguf) if args.target and args.target_gguf else None,
    ]
    if any(g and same_file(args.out, g) for g in given):
        raise ValueError(f"--out: {args.out!r} is the target's GGUF file; give the head its own file")
    start = time.perf_counter()

    def say(what):  # progress on stderr: the real target takes minutes per phase
        print(f"[train-head {time.perf_counter() - start:7.1f} s] {what}", file=sys.stderr, flush=True)

    target, tokenizer, vocab, name = _load_target(args)
    load_s = time.perf_counter() - start
    say(f"loaded {name}")
    eos = getattr(tokenizer, "eos_token_id", None)
    common = {
        "vocab_size": vocab,
        "eos_token_id": eos,
        "max_new_tokens": args.max_new_tokens,
        "progress": lambda n, total: say(f"collected {n}/{total} positions"),
    }
    train = collect_training_data(
        target,
        tokenizer,
        TRAIN_PROMPTS,
        args.positions,
        temperature=args.temperature,
        top_k_targets=args.top_k_targets,
        seed=args.seed,
        **common,
    )
    held = collect_training_data(
        target,
        tokenizer,
        HELD_OUT_PROMPTS,
        args.eval_positions,
        temperature=args.temperature,
        top_k_targets=None,
        seed=args.seed + 1,
        **common,
    )
    head = head_for(target, target_name=name)
    untrained = evaluate_head(head, target, held)
    say(f"untrained head: held-out top-1 {untrained['top1']:.3f}, alpha {untrained['alpha']}")
    history = train_head(head, target, train, epochs=args.epochs, lr=args.lr, seed=args.seed)
    trained = evaluate_head(head, target, held)
    say(f"trained head ({history['wall_s']:.1f} s): held-out top-1 {trained['top1']:.3f}, alpha {trained['alpha']}")
    head.meta.update(train_temperature=args.temperature, top_k_targets=args.top_k_targets)
    saved, write_error = save_or_fall_back(
        "--out", args.out, lambda path: save_head(head, path), "specverify-head", Path(args.out).suffix or ".pt"
    )
    say(f"saved {saved}" if saved else "the head was not saved")
    result = {
        "target": name,
        "out": saved,
        "load_s": load_s,
        "train_positions": len(train),
        "train_sequences": train.n_sequences,
        "collect_train_s": train.wall_s,
        "train_target_mass": train.target_mass,
        "eval_positions": len(held),
        "collect_eval_s": held.wall_s,
        **history,
        "untrained": untrained,
        "trained": trained,
    }
    gens = []
    for text in HELD_OUT_PROMPTS[: args.generate_prompts]:
        prompt = loading.prompt_ids(tokenizer, text)
        ref = decoding.target_only_generate(target, prompt, 32, vocab_size=vocab, eos_token_id=eos)
        med = medusa_generate(target, head, prompt, 32, vocab_size=vocab, eos_token_id=eos)
        gens.append((ref, med))
    if gens:
        result["greedy_generation"] = {
            "prompts": len(gens),
            "max_new_tokens": 32,
            "identical": sum(r.ids == m.ids for r, m in gens),
            "verdicts": [
                {"kind": "identical"}
                if r.ids == m.ids
                else decoding.compare_greedy(
                    m.ids, r.ids, decoding.teacher_forced_logits(target, r.ids, vocab), r.n_prompt
                )
                for r, m in gens
            ],
            "tokens_per_pass": sum(m.stats.emitted for _, m in gens) / sum(m.stats.rounds for _, m in gens),
            "acceptance_rate": sum(m.stats.accepted for _, m in gens) / max(1, sum(m.stats.drafted for _, m in gens)),
            "medusa_tokens_per_s": sum(len(m.new_ids) for _, m in gens) / sum(m.stats.wall_s for _, m in gens),
            "target_only_tokens_per_s": sum(len(r.new_ids) for r, _ in gens) / sum(r.stats.wall_s for r, _ in gens),
        }
    result["total_s"] = time.perf_counter() - start
    if write_error:
        result["out_error"] = write_error
    return result


PROG = "specverify models train-head"


def run_train_head(args) -> int:
    """Entry point of ``python -m specverify.models train-head``: 0; 2 with one error line on
    stderr for a bad input, or when --out could not be written (the figures are printed first
    and the head saved to a fallback file named in that line); 130 interrupted."""
    try:
        result = train_head_command(args)
    except (ValueError, RuntimeError, ImportError, OSError) as exc:
        error(PROG, exc)
        return EXIT_USAGE
    except KeyboardInterrupt:
        error(PROG, "interrupted")
        return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps(result, default=json_default))
    else:
        u, tr = result["untrained"], result["trained"]
        print(
            f"target: {result['target']}; {result['train_positions']} training positions "
            f"({result['collect_train_s']:.1f} s to generate), {result['eval_positions']} held out"
        )
        print(
            f"loss (KL to p_t+2): {result['loss_before']:.4f} -> {result['loss_per_epoch'][-1]:.4f} "
            f"in {result['wall_s']:.1f} s"
        )
        for label, r in (("untrained", u), ("trained", tr)):
            alphas = ", ".join(f"T={t:g} {a:.3f}" for t, a in r["alpha"].items())
            print(f"{label:>9}: held-out top-1 {r['top1']:.3f}, alpha {alphas}")
        if "greedy_generation" in result:
            g = result["greedy_generation"]
            kinds = ", ".join(v["kind"] for v in g["verdicts"])
            print(
                f"greedy medusa_generate: {g['tokens_per_pass']:.2f} tokens/pass, acceptance "
                f"{g['acceptance_rate']:.3f}, {g['medusa_tokens_per_s']:.2f} tokens/s vs target-only "
                f"{g['target_only_tokens_per_s']:.2f}; vs target-only: {kinds}"
            )
        print(
            f"saved {result['out']} ({result['total_s']:.1f} s in all)"
            if result["out"]
            else f"not saved ({result['total_s']:.1f} s in all)"
        )
    sys.stdout.flush()
    if "out_error" in result:
        error(PROG, result["out_error"])
        return EXIT_USAGE
    return 0
