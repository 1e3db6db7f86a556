"""transformers' ``generate(assistant_model=draft, do_sample=True)`` as a loop subject.

``generate(target, draft, requests, k, rng)`` has the loop interface of ``specverify.loop``: the
loop battery (``specverify.interfaces.loop.run_loop_battery``) judges it against the exact law of
target-only sampling (``loop.sequence_law``), with its own statistics when, as here, the
enumerator cannot follow torch's randomness.

The models. ``target`` and ``draft`` must be *last-token* models: their logits after a prefix
depend only on its last token (``LogitTable`` with period 1; checked on prefixes of length 1 to 3,
else a ValueError naming the model). Each becomes a real ``Qwen2ForCausalLM`` computing exactly
that table (``bigram_lm``): one layer whose attention and MLP write nothing (o_proj and down_proj
zero), one-hot embeddings, RMSNorm weight 1/sqrt(hidden), so the final hidden state is the one-hot
of the last token and ``lm_head`` holds the table (float32: logits within 1e-7 of the table). The
model vocabulary has one padding id past the table's width (logit -1e4, never sampled), as real
configs pad theirs; it is ``pad_token_id``, so no generable token is a pad (docs/ADAPTERS.md,
finding 2 of ``check-hf-generate``). The draft must have the target's width.

The boundary (our ``SamplingParams`` -> transformers' ``generate`` kwargs, ``generate_kwargs``):
temperature -> temperature (0: ``do_sample=False``), top_k (None -> 0, which disables
transformers' default 50), top_p, min_p, repetition_penalty -> the same names, logit_bias ->
``sequence_bias`` with single-token keys ``{(t,): b}``, stop_token_ids -> ``eos_token_id``,
max_tokens -> ``max_new_tokens``. frequency_penalty, presence_penalty and allowed_tokens have no
``generate`` counterpart: a ValueError naming the field. The draft proposes k tokens a round
(``num_assistant_tokens=k``, constant schedule, no confidence early stop: ``hf.engine_context``).

Randomness: transformers' assisted generation takes one sequence at a time, so each request is its
own ``generate`` call; torch's global generator is seeded, inside ``torch.random.fork_rng``, from
``rng.integers(2**63)`` (an unseeded request) or from the request's seed, so a seeded request is
the same alone and in any batch, and the caller's torch state is untouched.

``LOOP_SETTINGS`` are the settings ``python -m specverify check-hf-generate --loop`` runs, one loop
battery each (``python -m specverify check specverify.adapters.hf_loop:generate`` would run the
standard loop cases instead, which it refuses: their target depends on the position and some drafts
have other widths, so each run is a contract finding, not a verdict on transformers); ``LOOP_CONTROL`` is transformers' ``assistant_ensemble_weight=0.5`` (biased by design)
under the last setting's params, which must be flagged at the same n. What it finds in transformers
5.24.0 is in docs/ADAPTERS.md. References: Leviathan et al. 2023 (arXiv 2211.17192); transformers'
``GenerationMixin._assisted_decoding`` and ``_get_logits_processor`` (the processing order:
sequence bias, repetition penalty, temperature, top-k, top-p, min-p, as ``processing.process_step``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import stats
from ..battery import POWER_FALSE_PASS_RATE
from ..loop import LogitTable, Request, SamplingParams, check_requests
from ..interfaces.loop import run_loop_battery
from ..interfaces.loop_cases import LoopBudget, LoopCase
from ..models.loading import torch_modules
from . import hf

torch, transformers = torch_modules()

PAD_LOGIT = -1e4
"""The padding id's logit: exp(-1e4) is 0 in float32, so it is never sampled."""
FALSE_FAIL_RATE = stats.DEFAULT_FALSE_FAIL_RATE
FALSE_PASS_RATE = POWER_FALSE_PASS_RATE  # "detects TV >= x": with probability 1 - this


# --------------------------------------------------------------------------- the models


def last_token_rows(model, name: str) -> np.ndarray:
    """(vocab, vocab) rows: row t is the model's logits after last token t; ValueError naming the
    model when its logits depend on more than the last token (prefixes of length 1, 2 and 3)."""
    first = np.asarray(model((0,)), dtype=np.float64)
    if first.ndim != 1 or first.size < 2:
        raise ValueError(f"{name}: logits must be a 1-D vector of at least 2 entries, got shape {first.shape}")
    vocab = first.size
    rows = np.array([np.asarray(model((t,)), dtype=np.float64) for t in range(vocab)])
    for t in range(vocab):
        for prefix in ((0, t), (t, t), (1, 0, t)):
            if not np.array_equal(np.asarray(model(prefix), dtype=np.float64), rows[t]):
                raise ValueError(f"{name}: logits after {prefix} differ from those after ({t},): transformers' "
                                 f"generate is checked on last-token models only")
    if not np.isfinite(rows).all():
        raise ValueError(f"{name}: logits must be finite")
    return rows


def bigram_lm(rows: np.ndarray):
    """A ``Qwen2ForCausalLM`` whose logits after any prefix are ``rows[last token]`` (float32),
    with one padding id ``len(rows)`` at logit ``PAD_LOGIT`` (see the module docstring)."""
    vocab = rows.shape[0]
    width = vocab + 1
    hidden = max(8, 2 * ((width + 1) // 2))
    cfg = transformers.Qwen2Config(
        vocab_size=width, hidden_size=hidden, intermediate_size=8, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
        tie_word_embeddings=False, use_sliding_window=False, rms_norm_eps=1e-12,
        pad_token_id=vocab, bos_token_id=None, eos_token_id=None)
    with hf.single_threaded(), torch.random.fork_rng(devices=[]), torch.no_grad():
        model = transformers.Qwen2ForCausalLM(cfg).eval()
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = torch.zeros(width, hidden)
        emb[torch.arange(width), torch.arange(width)] = 1.0
        model.model.embed_tokens.weight.copy_(emb)
        model.model.norm.weight.fill_(hidden ** -0.5)  # RMSNorm of a one-hot: sqrt(hidden) * one-hot
        head = torch.zeros(width, hidden)
        head[:vocab, :vocab] = torch.tensor(rows.T, dtype=torch.float32)
        head[vocab, :width] = PAD_LOGIT
        model.lm_head.weight.copy_(head)
    gc = model.generation_config
    gc.pad_token_id, gc.eos_token_id, gc.bos_token_id = vocab, None, None
    return model


_MODELS: dict = {}


def model_for(fn, name: str):
    """The cached ``bigram_lm`` of a last-token model (keyed by its rows)."""
    rows = last_token_rows(fn, name)
    key = (rows.shape, rows.tobytes())
    if key not in _MODELS:
        if len(_MODELS) > 32:
            _MODELS.clear()
        _MODELS[key] = bigram_lm(rows)
    return _MODELS[key], rows.shape[0]


# --------------------------------------------------------------------------- the boundary


def generate_kwargs(params: SamplingParams) -> dict:
    """transformers' ``generate`` kwargs for one request's params (the mapping in the module
    docstring); ValueError naming a field that ``generate`` has no counterpart for."""
    if params.frequency_penalty != 0:
        raise ValueError("frequency_penalty: transformers' generate has no frequency penalty; use 0")
    if params.presence_penalty != 0:
        raise ValueError("presence_penalty: transformers' generate has no presence penalty; use 0")
    if params.allowed_tokens is not None:
        raise ValueError("allowed_tokens: grammars are not mapped to transformers' generate; use None")
    out: dict = {"max_new_tokens": params.max_tokens, "repetition_penalty": params.repetition_penalty,
                 "eos_token_id": list(params.stop_token_ids) or None}
    if params.logit_bias:
        out["sequence_bias"] = {(int(t),): float(b) for t, b in params.logit_bias.items()}
    if params.greedy:
        out["do_sample"] = False
        return out
    out.update(do_sample=True, temperature=params.temperature, top_k=params.top_k or 0, top_p=params.top_p,
               min_p=params.min_p if params.min_p > 0 else None)
    return out


def _one(target_lm, draft_lm, request: Request, k: int, seed: int, extra: dict) -> list[int]:
    """One ``generate(assistant_model=...)`` call for one request; its new tokens."""
    x = torch.tensor([list(request.prompt)])
    with hf.engine_context(draft_lm, k):
        torch.manual_seed(seed)
        out = target_lm.generate(input_ids=x, attention_mask=torch.ones_like(x), assistant_model=draft_lm,
                                 **generate_kwargs(request.params), **extra)
    return [int(t) for t in out[0, x.shape[1]:].tolist()]


def make_generate(**extra):
    """A loop subject running transformers' assisted generation, ``extra`` added to each call's kwargs."""

    def generate(target, draft, requests, k, rng):
        target_lm, vocab = model_for(target, "target")
        draft_lm, draft_vocab = model_for(draft, "draft")
        if draft_vocab != vocab:
            raise ValueError(f"draft: width {draft_vocab} differs from the target's {vocab}; transformers' "
                             f"assisted generation is checked on pairs of one width")
        check_requests(requests, vocab)
        out = []
        for r in requests:
            seed = r.params.seed if r.params.seed is not None else int(rng.integers(2 ** 63))
            out.append(_one(target_lm, draft_lm, r, int(k), seed, extra))
        return out

    return generate


generate = make_generate()
ensemble_generate = make_generate(assistant_ensemble_weight=hf.ENSEMBLE_WEIGHT)


# --------------------------------------------------------------------------- the settings


def _rows(seed: int, vocab: int, scale: float) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=scale, size=(1, vocab, vocab)).round(3)


TARGET = LogitTable(_rows(21, 3, 1.0), "target V3 (last token)")
DRAFT = LogitTable(_rows(22, 3, 1.0), "draft V3 (last token)")


@dataclass(frozen=True)
class LoopSetting:
    name: str
    params: SamplingParams
    k: int = 2

    def case(self) -> LoopCase:
        return LoopCase(self.name, TARGET, DRAFT, (Request((0,), self.params),), self.k)


LOOP_SETTINGS = (
    LoopSetting("repetition_penalty=1.5", SamplingParams(repetition_penalty=1.5, max_tokens=3)),
    LoopSetting("min_p=0.3", SamplingParams(min_p=0.3, max_tokens=3)),
    LoopSetting("sequence_bias={(0,): 1.0, (2,): -0.8}", SamplingParams(logit_bias={0: 1.0, 2: -0.8}, max_tokens=3)),
    LoopSetting("eos_token_id=2, max_new_tokens=4, k=3", SamplingParams(stop_token_ids=(2,), max_tokens=4), k=3),
    LoopSetting("all: T=1.2, repetition_penalty=1.3, min_p=0.1, sequence_bias={(1,): 0.5}, eos_token_id=2",
                SamplingParams(temperature=1.2, repetition_penalty=1.3, min_p=0.1, logit_bias={1: 0.5},
                               stop_token_ids=(2,), max_tokens=3)),
)
LOOP_CONTROL = LoopSetting("control: assistant_ensemble_weight=0.5 on the last setting", LOOP_SETTINGS[-1].params)


def check_setting(subject, setting: LoopSetting, n: int, seed: int, rate: float, detect_tv: float) -> dict:
    """One loop battery on the setting's case: n runs (the enumerator cannot follow torch), the
    battery's chi-square over whole outputs against the DP law at false-fail ``rate``, and its
    contract checks on every run. The row: verdict ("exact", "finding", "underpowered"), p-value,
    n, the TV the test detects with probability 1 - FALSE_PASS_RATE, findings."""
    budget = LoopBudget("hf-loop", samples=n, statistics_s=3600.0, detect_tv=detect_tv, call_limit_s=20.0,
                        false_fail_rate=rate)
    t0 = time.perf_counter()
    case = setting.case()
    model_for(case.target, "target"), model_for(case.draft, "draft")  # built once; the subject's fork inherits them
    result = run_loop_battery(subject, budget, seed, cases=[case])
    power = result.power[0] if result.power else {}
    d = result.to_dict()
    verdict = {False: "finding", True: "exact", None: "underpowered"}[result.exact]
    return {"setting": setting.name, "k": setting.k, "kwargs": _kwargs_text(setting.params),
            "verdict": verdict, "exact": result.exact, "p_value": result.chi2_p_value_min,
            "n": power.get("runs"), "min_detectable_tv": power.get("min_detectable_tv"),
            "false_fail_rate": rate, "findings": d["findings"], "shortfalls": d["shortfalls"],
            "seconds": round(time.perf_counter() - t0, 2)}


def _kwargs_text(params: SamplingParams) -> dict:
    kw = generate_kwargs(params)
    return {key: (str(v) if key == "sequence_bias" else v) for key, v in kw.items() if v is not None}


def check_loop(n: int = 2000, seed: int = 0, control: bool = True, settings=LOOP_SETTINGS,
               detect_tv: float = 0.15) -> dict:
    """Every setting through the loop battery; the false-fail budget split over the settings."""
    from ..validation import check_int, check_seed

    check_int("n", n, 1)
    check_seed(seed)
    t0 = time.perf_counter()
    rate = stats.split_budget(FALSE_FAIL_RATE, len(settings))
    rows = [check_setting(generate, s, n, seed + i, rate, detect_tv) for i, s in enumerate(settings)]
    ctrl = check_setting(ensemble_generate, LOOP_CONTROL, n, seed + 99, rate, detect_tv) if control else None
    return {
        "target": "transformers generate(assistant_model=draft, do_sample=True) as a loop subject",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "target_model": repr(TARGET), "draft_model": repr(DRAFT), "prompt": [0],
        "exact": (False if any(r["exact"] is False for r in rows)
                  else None if any(r["exact"] is None for r in rows) else True),
        "rows": rows, "control": None if ctrl is None else {**ctrl, "detected": ctrl["exact"] is False},
        "n": n, "seed": seed, "false_fail_rate": FALSE_FAIL_RATE, "false_pass_rate": FALSE_PASS_RATE,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def human(report: dict) -> str:
    verdict = {True: "EXACT", False: "NOT EXACT", None: "INCONCLUSIVE"}[report["exact"]]
    lines = [f"{report['target']} (transformers {report['transformers']}): {verdict} ({report['seconds']} s)"]
    rows = report["rows"] + ([report["control"]] if report["control"] else [])
    for r in rows:
        p = "-" if r["p_value"] is None else f"{r['p_value']:.3g}"
        tv = "-" if r["min_detectable_tv"] is None else f"{r['min_detectable_tv']:.3f}"
        lines.append(f"  {r['setting']} (k={r['k']}): {r['verdict'].upper()}: n={r['n']}, p-value {p} "
                     f"(fails below {r['false_fail_rate']:.3g}), detects TV >= {tv}, {r['seconds']} s")
        lines += [f"    [{f['kind']}] {f['check']}: {f['message']}" for f in r["findings"]]
        lines += [f"    [inconclusive] {s}" for s in r["shortfalls"]]
    if report["control"] is not None and not report["control"]["detected"]:
        lines.append("  warning: the biased control was not detected: this n lacks power")
    return "\n".join(lines) + "\n"


__all__ = ["LOOP_CONTROL", "LOOP_SETTINGS", "LoopSetting", "bigram_lm", "check_loop", "check_setting",
           "ensemble_generate", "generate", "generate_kwargs", "last_token_rows", "make_generate"]
