"""Predict, then measure, speculative decoding on a real draft/target pair (handout "GPU scale-up").

1. Predict: the target writes answers to code and chat prompts; both models are teacher-forced
   over that text to get alpha per workload (``alpha_per_position``); c is timed over cached
   single-token decode steps of each model; ``specverify.theory`` turns (alpha, k, c) into tokens
   per pass, speedup and the best k (Leviathan et al. 2023, arXiv 2211.17192, eq. 1 and §3.4).
2. Measure: the KV-cached speculative loop (``decoding.speculative_generate``) against
   target-only decoding, greedy and at T = 0.7, plus HF transformers' assisted generation
   (``target.generate(..., assistant_model=draft)``) at the same k with a constant schedule.

At batch 1 in eager PyTorch small models are launch-bound, so c can sit far above the parameter
ratio; ``static_cache`` + ``compile`` (GPU only) cut that overhead.
"""

from __future__ import annotations

import json
import time

import numpy as np
import polars as pl

from .. import theory
from ..files import json_default, write_atomically
from ..validation import check_k
from . import decoding
from .loading import torch_modules

SAMPLED_T = 0.7
WORKLOADS = ("code", "chat")
CODE_PROMPTS = [
    "Add type hints to this function:\n\ndef scale(values, factor):\n    return [v * factor for v in values]",
    "Add type hints to this function:\n\ndef merge(a, b):\n    out = dict(a)\n    out.update(b)\n    return out",
    "Add a docstring to this function:\n\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))",
    "Rewrite this loop as a list comprehension:\n\nsquares = []\nfor i in range(10):\n    squares.append(i * i)",
    "Add type hints to this function:\n\ndef count_words(text):\n    counts = {}\n    for w in text.split():\n        counts[w] = counts.get(w, 0) + 1\n    return counts",
    "Fix the bug in this function:\n\ndef mean(xs):\n    return sum(xs) / len(xs) if xs else sum(xs) / 0",
    "Add error handling to this function:\n\ndef read_config(path):\n    with open(path) as f:\n        return json.load(f)",
    "Add type hints to this function:\n\ndef first(items, default=None):\n    for item in items:\n        return item\n    return default",
]
CHAT_PROMPTS = [
    "What are some good ways to spend a rainy weekend?",
    "Explain why the sky is blue to a ten-year-old.",
    "Write a short poem about autumn leaves.",
    "What should I pack for a three-day hiking trip?",
    "Give me three tips for learning a new language.",
    "Describe your ideal breakfast.",
    "How do I make a good first impression at a new job?",
    "Tell me a short story about a lighthouse keeper.",
]
PROMPTS = {"code": CODE_PROMPTS, "chat": CHAT_PROMPTS}
REQUIRED_FIELDS = (
    "workload", "mode", "k", "alpha_predicted", "alpha_measured", "c", "tokens_per_pass_predicted",
    "tokens_per_pass_measured", "speedup_predicted", "speedup_measured", "tokens_per_s",
    "hf_assisted_tokens_per_s", "greedy_identical", "near_ties",
)


def prompt_ids(tokenizer, text: str) -> list[int]:
    """Token ids of a user turn, through the chat template when the tokenizer has one."""
    if getattr(tokenizer, "chat_template", None):
        out = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                            add_generation_prompt=True, tokenize=True)
        out = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
        return [int(i) for i in out]
    return [int(i) for i in tokenizer.encode(text)]


def select_prompts(workload: str, n_prompts: int) -> list[str]:
    if workload not in PROMPTS:
        raise ValueError(f"workload: expected one of {sorted(PROMPTS)}, got {workload!r}")
    n = check_k(n_prompts, "n_prompts")
    if n > len(PROMPTS[workload]):
        raise ValueError(f"n_prompts: at most {len(PROMPTS[workload])} built-in {workload} prompts, got {n}")
    return PROMPTS[workload][:n]


def time_decode_step(model, ids: list[int], n_steps: int = 100, warmup: int = 5) -> float:
    """Mean seconds of one cached single-token forward after a prefill of ``ids``."""
    torch, _ = torch_modules()
    cache = decoding.new_cache(model)
    with torch.no_grad():
        decoding.forward(model, ids, cache)
        token = ids[-1]
        for _ in range(warmup):
            decoding.forward(model, [token], cache)
        decoding._sync(model)
        start = time.perf_counter()
        for _ in range(n_steps):
            decoding.forward(model, [token], cache)
        decoding._sync(model)
    return (time.perf_counter() - start) / n_steps


def cost_ratio(pair, ids: list[int], n_steps: int = 100) -> dict:
    """c = draft step time / target step time, each the mean of ``n_steps`` cached steps."""
    t_step = time_decode_step(pair.target, ids, n_steps)
    d_step = time_decode_step(pair.draft, ids, n_steps)
    return {"c": d_step / t_step, "target_step_s": t_step, "draft_step_s": d_step}


def hf_assisted_tokens_per_s(pair, prompts: list[list[int]], k: int, max_new_tokens: int,
                             temperature: float) -> float | None:
    """Tokens/s of ``target.generate(assistant_model=draft)`` with k drafts per round, or None."""
    torch, _ = torch_modules()
    cfg = pair.draft.generation_config
    saved = (getattr(cfg, "num_assistant_tokens", None), getattr(cfg, "num_assistant_tokens_schedule", None))
    cfg.num_assistant_tokens, cfg.num_assistant_tokens_schedule = k, "constant"
    sampling = ({"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
                if temperature > 0 else {"do_sample": False})
    pad = pair.eos_token_id if pair.eos_token_id is not None else 0
    emitted, wall = 0, 0.0
    try:
        for ids in prompts:
            x = torch.tensor([ids], device=pair.target.device)
            decoding._sync(pair.target)
            start = time.perf_counter()
            with torch.no_grad():
                out = pair.target.generate(input_ids=x, attention_mask=torch.ones_like(x),
                                           assistant_model=pair.draft, max_new_tokens=max_new_tokens,
                                           pad_token_id=pad, eos_token_id=pair.eos_token_id, **sampling)
            decoding._sync(pair.target)
            wall += time.perf_counter() - start
            emitted += out.shape[1] - len(ids)
    except (ValueError, TypeError, RuntimeError, NotImplementedError) as exc:
        print(f"HF assisted generation failed, reported as null: {type(exc).__name__}: {exc}")
        return None
    finally:
        cfg.num_assistant_tokens, cfg.num_assistant_tokens_schedule = saved
    return emitted / wall if wall > 0 else None


def _run_all(fn, prompts, **kwargs) -> list:
    return [fn(input_ids=ids, **kwargs) for ids in prompts]


def _tokens_per_s(gens) -> float:
    wall = sum(g.stats.wall_s for g in gens)
    return sum(len(g.new_ids) for g in gens) / wall if wall > 0 else float("nan")


def _greedy_verdicts(pair, spec, ref, rel_margin) -> list[dict]:
    verdicts = []
    for s, r in zip(spec, ref):
        if s.ids == r.ids:
            verdicts.append({"kind": "identical"})
            continue
        logits = decoding.teacher_forced_logits(pair.target, r.ids, pair.vocab_size)
        verdicts.append(decoding.compare_greedy(s.ids, r.ids, logits, r.n_prompt, rel_margin=rel_margin))
    return verdicts


def measure_mode(pair, workload, prompts, k, max_new_tokens, temperature, c, seed=0,
                 static_len=None) -> dict:
    """One row: predicted vs measured alpha, tokens per pass and speedup for one decoding mode."""
    common = {"vocab_size": pair.vocab_size, "eos_token_id": pair.eos_token_id,
              "max_new_tokens": max_new_tokens, "temperature": temperature, "static_len": static_len}
    ref = _run_all(decoding.target_only_generate, prompts, target=pair.target,
                   rng=np.random.default_rng(seed), **common)
    alphas = np.concatenate([
        decoding.alpha_per_position(pair.target, pair.draft, g.ids, g.n_prompt, temperature,
                                    vocab_size=pair.vocab_size)
        for g in ref if len(g.new_ids) > 0])
    alpha_pred = float(alphas.mean())
    spec = _run_all(decoding.speculative_generate, prompts, target=pair.target, draft=pair.draft,
                    k=k, rng=np.random.default_rng(seed + 1), **common)
    accepted = sum(g.stats.accepted for g in spec)
    verified = accepted + sum(g.stats.rejections for g in spec)
    rounds = sum(g.stats.rounds for g in spec)
    tps, ref_tps = _tokens_per_s(spec), _tokens_per_s(ref)
    row = {
        "workload": workload,
        "mode": "greedy" if temperature == 0 else f"T={temperature:g}",
        "k": k,
        "alpha_predicted": alpha_pred,
        "alpha_measured": accepted / verified if verified else float("nan"),
        "c": c,
        "best_k_predicted": theory.best_k(alpha_pred, c),
        "tokens_per_pass_predicted": theory.expected_tokens(alpha_pred, k),
        "tokens_per_pass_measured": sum(g.stats.emitted for g in spec) / rounds,
        "speedup_predicted": theory.expected_speedup(alpha_pred, k, c),
        "speedup_measured": tps / ref_tps,
        "tokens_per_s": tps,
        "target_only_tokens_per_s": ref_tps,
        "hf_assisted_tokens_per_s": hf_assisted_tokens_per_s(pair, prompts, k, max_new_tokens, temperature),
        "greedy_identical": None,
        "near_ties": None,
        "real_mismatches": None,
        "n_prompts": len(prompts),
    }
    if temperature == 0:
        rel = 1e-3 if pair.dtype is None or "float32" in str(pair.dtype) else 2**-6
        verdicts = _greedy_verdicts(pair, spec, ref, rel)
        row["greedy_identical"] = all(v["kind"] == "identical" for v in verdicts)
        row["near_ties"] = sum(v["kind"] == "near-tie" for v in verdicts)
        row["real_mismatches"] = sum(v["kind"] == "mismatch" for v in verdicts)
    return row


def measure(pair, workloads=WORKLOADS, k: int = 4, max_new_tokens: int = 64, n_prompts: int = 5,
            seed: int = 0, c_steps: int = 100, static_cache: bool = False) -> list[dict]:
    """Rows for each workload x (greedy, T = 0.7); c is timed once per pair on the first prompt.

    ``static_cache`` decodes on StaticCache objects sized for the longest prompt plus
    ``max_new_tokens + k + 1`` (what torch.compile needs to avoid recompiling every step).
    """
    k = check_k(k)
    texts = {w: select_prompts(w, n_prompts) for w in workloads}
    ids = {w: [prompt_ids(pair.tokenizer, t) for t in texts[w]] for w in workloads}
    first = ids[workloads[0]][0]
    longest = max(len(x) for w in workloads for x in ids[w])
    static_len = longest + max_new_tokens + k + 1 if static_cache else None
    for _ in range(2):  # warm-up (and, with torch.compile, compilation) outside every timing
        decoding.speculative_generate(pair.target, pair.draft, first, k, 2 * k + 2,
                                      vocab_size=pair.vocab_size, static_len=static_len)
    c = cost_ratio(pair, first, c_steps)["c"]
    rows = []
    for w in workloads:
        for temperature in (0.0, SAMPLED_T):
            rows.append(measure_mode(pair, w, ids[w], k, max_new_tokens, temperature, c, seed,
                                     static_len))
    return rows


def table(rows: list[dict]) -> pl.DataFrame:
    cols = ["workload", "mode", "k", "alpha_predicted", "alpha_measured", "c", "best_k_predicted",
            "tokens_per_pass_predicted", "tokens_per_pass_measured", "speedup_predicted",
            "speedup_measured", "tokens_per_s", "hf_assisted_tokens_per_s", "greedy_identical",
            "near_ties"]
    return pl.DataFrame([{c: r.get(c) for c in cols} for r in rows]).with_columns(
        pl.col(pl.Float64).round(3))


def json_safe(obj):
    """NaN and inf become null (JSON has no such numbers); NumPy scalars become Python ones."""
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    return obj


def write_json_atomic(path, obj) -> None:
    """Write JSON to a temp file in the same folder, then os.replace it over ``path``."""
    write_atomically(path, json.dumps(json_safe(obj), indent=2, default=json_default))
