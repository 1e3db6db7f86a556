"""Predict, then measure, speculative decoding on a real draft/target pair (handout "GPU scale-up").

1. Costs: ``costs.measure_step_costs`` times, on the first prompt's context, the target's and the
   draft's cached single steps (c = draft / target) and the target's forward over k + 1 positions
   (v(k), in target steps; on a CPU it is far from 1).
2. Predict: the target writes answers to code, chat and edit prompts (target-only, the
   reference); both models are teacher-forced over that text to get alpha
   (``alpha_per_position``); ``theory.speedup_with_costs`` gives E[tokens] / (k c + v(k)).
3. Measure, side by side in one run, per workload and mode (greedy, T = 0.7): every drafter in
   ``DRAFTERS`` (the draft model with k chosen by the cost model, adaptive k, prompt lookup,
   ...), the draft model at fixed k (all k in 1..K with ``sweep``), target-only decoding and HF
   transformers' assisted generation (``target.generate(..., assistant_model=draft)``, k drafts
   a round, constant schedule). Greedy outputs are compared with target-only (``compare_greedy``).
   Predictions use the ks the rounds actually ran, so measured / predicted tests the cost model.

At batch 1 in eager PyTorch small models are launch-bound, so c can sit far above the parameter
ratio; ``static_cache`` + ``compile`` (GPU only) cut that overhead.

Every drafter's row (a draft model, adaptive k, prompt lookup, a tree, a Medusa head,
transformers' own assisted generation) is measured here under one ``Setting``, side by side from
one run; ``measure_report`` prints the rows (the human table, JSON).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..common.validation import check_k
from ..laws import theory
from . import decoding, medusa, model_calls, tree_decoding
from .costs import KPolicy, StepCosts, measure_step_costs
from .loading import prompt_ids, torch_modules
from .unavailable import mode_label, unavailable_reason, unavailable_row

SAMPLED_T = 0.7
WORKLOADS = ("code", "chat", "edit")
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
EDIT_PROMPTS = [  # the answer repeats most of the prompt: where prompt lookup shines
    "Rename the variable `xs` to `values` and return the whole function:\n\ndef mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs)",
    "Add a `verbose` parameter that prints each item, and return the whole function:\n\ndef total_price(items, tax):\n    subtotal = sum(item.price for item in items)\n    return subtotal * (1 + tax)",
    "Replace the for loop with a while loop and return the whole function:\n\ndef countdown(n):\n    out = []\n    for i in range(n, 0, -1):\n        out.append(i)\n    return out",
    "Make this function return None instead of raising on an empty list, and return the whole function:\n\ndef largest(numbers):\n    best = numbers[0]\n    for n in numbers[1:]:\n        if n > best:\n            best = n\n    return best",
    "Rename the class `Box` to `Container` and return the whole code:\n\nclass Box:\n    def __init__(self, items):\n        self.items = list(items)\n\n    def add(self, item):\n        self.items.append(item)\n\n    def size(self):\n        return len(self.items)",
    "Change the default greeting to 'Hi' and return the whole function:\n\ndef greet(name, greeting='Hello'):\n    message = f'{greeting}, {name}!'\n    print(message)\n    return message",
]
PROMPTS = {"code": CODE_PROMPTS, "chat": CHAT_PROMPTS, "edit": EDIT_PROMPTS}
REQUIRED_FIELDS = (
    "workload",
    "mode",
    "drafter",
    "k",
    "v_k",
    "target_only_tokens_per_s",
    "vs_hf_assisted",
    "alpha_predicted",
    "alpha_measured",
    "c",
    "tokens_per_pass_predicted",
    "tokens_per_pass_measured",
    "speedup_predicted",
    "speedup_measured",
    "tokens_per_s",
    "hf_assisted_tokens_per_s",
    "greedy_identical",
    "near_ties",
)


def select_prompts(workload: str, n_prompts: int) -> list[str]:
    if workload not in PROMPTS:
        raise ValueError(f"workload: expected one of {sorted(PROMPTS)}, got {workload!r}")
    n = check_k(n_prompts, "n_prompts")
    if n > len(PROMPTS[workload]):
        raise ValueError(f"n_prompts: at most {len(PROMPTS[workload])} built-in {workload} prompts, got {n}")
    return PROMPTS[workload][:n]


def hf_assisted_tokens_per_s(
    pair, prompts: list[list[int]], k: int, max_new_tokens: int, temperature: float
) -> float | None:
    """Tokens/s of ``target.generate(assistant_model=draft)`` with k drafts per round, or None."""
    torch, _ = torch_modules()
    cfg = pair.draft.generation_config
    saved = (getattr(cfg, "num_assistant_tokens", None), getattr(cfg, "num_assistant_tokens_schedule", None))
    cfg.num_assistant_tokens, cfg.num_assistant_tokens_schedule = k, "constant"
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False}
    )
    pad = pair.eos_token_id if pair.eos_token_id is not None else 0
    emitted, wall = 0, 0.0
    try:
        for ids in prompts:
            x = torch.tensor([ids], device=pair.target.device)
            model_calls.synchronize(pair.target)
            start = time.perf_counter()
            with torch.no_grad():
                out = pair.target.generate(
                    input_ids=x,
                    attention_mask=torch.ones_like(x),
                    assistant_model=pair.draft,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=pad,
                    eos_token_id=pair.eos_token_id,
                    **sampling,
                )
            model_calls.synchronize(pair.target)
            wall += time.perf_counter() - start
            emitted += out.shape[1] - len(ids)
    except (ValueError, TypeError, RuntimeError, NotImplementedError) as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        print(f"note: HF assisted generation failed, reported as null: {message}", file=sys.stderr)
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


@dataclass
class Setting:
    """What every drafter of one (workload, mode) shares: prompts, references, costs, prediction."""

    pair: object
    workload: str
    prompts: list
    temperature: float
    k: int
    max_new_tokens: int
    costs: StepCosts
    seed: int = 0
    static_len: int | None = None
    head: object = None
    ref: list = field(default_factory=list)
    alpha_predicted: float = float("nan")

    @property
    def common(self) -> dict:
        return {
            "vocab_size": self.pair.vocab_size,
            "eos_token_id": self.pair.eos_token_id,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
        }


@dataclass
class Run:
    """One drafter's generations, the k it used per round, and whether drafting had a model cost."""

    gens: list
    ks: list
    draft_free: bool = False
    alpha_predicted: float | None = None
    tree_nodes: int | None = None  # drafts verified per target pass, for a tree
    head: bool = False  # drafted by a head on the target (its cost is not in c)


def _spec(setting: Setting, draft, k: int, policy=None, rng_offset: int = 1) -> list:
    return _run_all(
        decoding.speculative_generate,
        setting.prompts,
        target=setting.pair.target,
        draft=draft,
        k=k,
        policy=policy,
        static_len=setting.static_len,
        rng=np.random.default_rng(setting.seed + rng_offset),
        **setting.common,
    )


def run_model(setting: Setting) -> Run:
    """The draft model, k in 0..K chosen by the cost model from the predicted alpha, re-chosen
    every round as the running alpha estimate moves (costs as measured before generation)."""
    policy = KPolicy(setting.costs, alpha0=setting.alpha_predicted)
    return Run(
        _spec(setting, setting.pair.draft, setting.k, policy), policy.chosen, alpha_predicted=setting.alpha_predicted
    )


def run_fixed(setting: Setting, k: int) -> Run:
    """The draft model at a fixed k (the handout's loop; what the sweep and HF compare)."""
    gens = _spec(setting, setting.pair.draft, k)
    return Run(gens, [k] * sum(g.stats.rounds for g in gens), alpha_predicted=setting.alpha_predicted)


def run_adaptive(setting: Setting) -> Run:
    """The draft model, k from running estimates of alpha AND of the step costs, from a flat
    prior alpha0 = 0.5 (no prediction used): ``KPolicy(learn_costs=True)``."""
    policy = KPolicy(setting.costs, alpha0=0.5, learn_costs=True)
    return Run(_spec(setting, setting.pair.draft, setting.k, policy), policy.chosen)


def run_prompt_lookup(setting: Setting) -> Run:
    """Prompt lookup (no draft model; drafts free), k in 0..K from running alpha and the costs."""
    policy = KPolicy(setting.costs, alpha0=0.5, draft_free=True)
    drafter = decoding.LookupDrafter(setting.pair.vocab_size)
    return Run(_spec(setting, drafter, setting.k, policy), policy.chosen, draft_free=True)


def run_tree(setting: Setting) -> Run:
    """Tree drafts (``models.tree``, shape "spine", width 2: every node of the draft's greedy or
    sampled chain also carries one sibling), verified in one target forward with a tree mask. Its
    depth is the cost model's k at the predicted alpha, at least 1 (each node adds a row to the
    target's forward, which is not free on a CPU)."""
    depth = max(1, setting.costs.best_k(setting.alpha_predicted, setting.k))
    gens = _run_all(
        tree_decoding.tree_generate,
        setting.prompts,
        target=setting.pair.target,
        draft=setting.pair.draft,
        k=depth,
        width=2,
        shape="spine",
        rng=np.random.default_rng(setting.seed + 1),
        **setting.common,
    )
    return Run(gens, [depth] * sum(g.stats.rounds for g in gens), tree_nodes=2 * depth)


def run_medusa(setting: Setting) -> Run:
    """The target's own Medusa-style t + 2 head (``models.medusa``) as a one-token drafter: k = 1,
    no draft model. Needs ``setting.head`` (``measure --head``, trained by ``train-head``)."""
    if setting.head is None:
        raise ValueError("--drafter medusa: needs a head (--head HEAD.pt, from python -m specverify.models train-head)")
    gens = _run_all(
        medusa.medusa_generate,
        setting.prompts,
        target=setting.pair.target,
        head=setting.head,
        rng=np.random.default_rng(setting.seed + 1),
        **setting.common,
    )
    return Run(gens, [1] * sum(g.stats.rounds for g in gens), head=True)


DRAFTERS = {
    "model": run_model,
    "adaptive": run_adaptive,
    "prompt-lookup": run_prompt_lookup,
    "tree": run_tree,
    "medusa": run_medusa,
}


def _prediction(setting: Setting, run: Run) -> dict:
    """Tokens per pass and speedup the cost model predicts, at the predicted alpha and the ks the
    rounds ran. Speedup = (target-only time) / (speculative time), both in target steps and both
    with their prefills: sum_i (P_t(n_i) + N_i) / sum_i (P_t(n_i) + P_d(n_i) + N_i / E * C), with
    n_i the prompt length, N_i the tokens target-only emitted, E and C the mean tokens and cost
    (k c + v(k)) of a round over the ks run."""
    if run.alpha_predicted is None or not run.ks:
        return {"tokens_per_pass_predicted": None, "speedup_predicted": None, "speedup_predicted_decode_only": None}
    costs = setting.costs
    c = 0.0 if run.draft_free else costs.c
    tokens = float(np.mean([1.0 if k == 0 else theory.expected_tokens(run.alpha_predicted, k) for k in run.ks]))
    cost = float(np.mean([k * c + costs.v[k] for k in run.ks]))
    lengths = [len(p) for p in setting.prompts]
    emitted = [max(1, len(g.new_ids)) for g in setting.ref]
    target_only = sum(costs.prefill_steps(n, draft=False) + m for n, m in zip(lengths, emitted))
    spec = sum(costs.prefill_steps(n, draft=not run.draft_free) + m / tokens * cost for n, m in zip(lengths, emitted))
    return {
        "tokens_per_pass_predicted": tokens,
        "speedup_predicted": target_only / spec,
        "speedup_predicted_decode_only": tokens / cost,
    }


def drafter_row(setting: Setting, name: str, run: Run, hf_tps, ref_tps) -> dict:
    gens = run.gens
    accepted = sum(g.stats.accepted for g in gens)
    verified = accepted + sum(g.stats.rejections for g in gens)
    rounds = sum(g.stats.rounds for g in gens)
    tps = _tokens_per_s(gens)
    ks = np.bincount(run.ks) if run.ks else np.zeros(1)
    k_mode = int(ks.argmax())
    row = {
        "workload": setting.workload,
        "mode": mode_label(setting.temperature),
        "drafter": name,
        "k": k_mode,
        "k_mean": float(np.mean(run.ks)) if run.ks else None,
        "alpha_predicted": run.alpha_predicted,
        "alpha_measured": accepted / verified if verified else float("nan"),
        "c": None if run.head else 0.0 if run.draft_free else setting.costs.c,
        "v_k": None if run.tree_nodes else setting.costs.v[min(k_mode, len(setting.costs.v) - 1)],
        "tree_nodes": run.tree_nodes,
        "tokens_per_pass_measured": sum(g.stats.emitted for g in gens) / rounds,
        "speedup_measured": tps / ref_tps,
        "tokens_per_s": tps,
        "target_only_tokens_per_s": ref_tps,
        "hf_assisted_tokens_per_s": hf_tps,
        "vs_hf_assisted": tps / hf_tps if hf_tps else None,
        "greedy_identical": None,
        "near_ties": None,
        "real_mismatches": None,
        "n_prompts": len(setting.prompts),
    }
    row.update(_prediction(setting, run))
    if setting.temperature == 0:
        pair = setting.pair
        rel = 1e-3 if pair.dtype is None or "float32" in str(pair.dtype) else 2**-6
        verdicts = _greedy_verdicts(pair, gens, setting.ref, rel)
        row["greedy_identical"] = all(v["kind"] == "identical" for v in verdicts)
        row["near_ties"] = sum(v["kind"] == "near-tie" for v in verdicts)
        row["real_mismatches"] = sum(v["kind"] == "mismatch" for v in verdicts)
    return row


def predicted_alpha(pair, ref, temperature) -> float:
    """Mean teacher-forced alpha over the target-only outputs (the i.i.d. model's alpha)."""
    alphas = np.concatenate(
        [
            decoding.alpha_per_position(
                pair.target, pair.draft, g.ids, g.n_prompt, temperature, vocab_size=pair.vocab_size
            )
            for g in ref
            if len(g.new_ids) > 0
        ]
    )
    return float(alphas.mean())


def measure_setting(setting: Setting, drafters, sweep: bool = False) -> list[dict]:
    """Rows for one (workload, mode): every drafter, side by side with target-only and HF assisted;
    a drafter that cannot run here (``unavailable.unavailable_reason``) gets a row saying why."""
    pair = setting.pair
    setting.ref = _run_all(
        decoding.target_only_generate,
        setting.prompts,
        target=pair.target,
        rng=np.random.default_rng(setting.seed),
        static_len=setting.static_len,
        **setting.common,
    )
    setting.alpha_predicted = predicted_alpha(pair, setting.ref, setting.temperature)
    ref_tps = _tokens_per_s(setting.ref)
    hf_tps = hf_assisted_tokens_per_s(pair, setting.prompts, setting.k, setting.max_new_tokens, setting.temperature)
    rows = [
        unavailable_row(setting, name, reason, REQUIRED_FIELDS)
        if (reason := unavailable_reason(setting, name))
        else drafter_row(setting, name, DRAFTERS[name](setting), hf_tps, ref_tps)
        for name in drafters
    ]
    for k in range(1, setting.k + 1) if sweep else [setting.k]:
        rows.append(drafter_row(setting, f"model k={k}", run_fixed(setting, k), hf_tps, ref_tps))
    return rows


def measure(
    pair,
    workloads=WORKLOADS,
    k: int = 4,
    max_new_tokens: int = 64,
    n_prompts: int = 5,
    seed: int = 0,
    repeats: int = 20,
    static_cache: bool = False,
    drafters=("model",),
    modes=(0.0, SAMPLED_T),
    sweep: bool = False,
    head=None,
) -> list[dict]:
    """Rows for each workload x mode x drafter, plus the draft model at fixed k = ``k`` (or at
    every k in 1..``k`` with ``sweep``); the step costs are timed once per pair on the first prompt.

    ``static_cache`` decodes on StaticCache objects sized for the longest prompt plus
    ``max_new_tokens + k + 1`` (what torch.compile needs to avoid recompiling every step).
    """
    k = check_k(k)
    unknown = sorted(set(drafters) - set(DRAFTERS))
    if unknown:
        raise ValueError(f"drafters: unknown {unknown}; expected some of {sorted(DRAFTERS)}")
    texts = {w: select_prompts(w, n_prompts) for w in workloads}
    ids = {w: [prompt_ids(pair.tokenizer, t) for t in texts[w]] for w in workloads}
    first = ids[workloads[0]][0]
    longest = max(len(x) for w in workloads for x in ids[w])
    static_len = longest + max_new_tokens + k + 1 if static_cache else None
    for _ in range(2):  # warm-up (and, with torch.compile, compilation) outside every timing
        decoding.speculative_generate(
            pair.target, pair.draft, first, k, 2 * k + 2, vocab_size=pair.vocab_size, static_len=static_len
        )
    costs = measure_step_costs(pair.target, pair.draft, first, k, repeats)
    rows = []
    for w in workloads:
        for temperature in modes:
            setting = Setting(pair, w, ids[w], temperature, k, max_new_tokens, costs, seed, static_len, head)
            rows.extend(measure_setting(setting, drafters, sweep))
    return rows
