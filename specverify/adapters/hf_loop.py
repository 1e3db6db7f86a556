"""transformers' ``generate(assistant_model=draft, do_sample=True)`` as a loop subject.

``generate(target, draft, requests, k, rng)`` has the loop interface of ``specverify.laws.requests``: the
loop battery (``specverify.interfaces.loop.battery.run_loop_battery``) judges it against the exact law of
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

Counts: each request's ``Output`` carries no logprobs but its drafted and accepted counts, read from
transformers' own verification rounds (``counting_rounds`` wraps ``_speculative_sampling``, as
``hf_acceptance.recording_rounds`` does; ``round_counts`` cuts each round's block at a stop id as the
reference loop does), so that the battery's tokens-per-pass check compares transformers' tokens per
target pass with the rule's on every declared case (a mean test over the runs). transformers'
greedy path verifies without that function: its requests return no counts.

Randomness: transformers' assisted generation takes one sequence at a time, so each request is its
own ``generate`` call; torch's global generator is seeded, inside ``torch.random.fork_rng``, from
``rng.integers(2**63)`` (an unseeded request) or from the request's seed, so a seeded request is
the same alone and in any batch, and the caller's torch state is untouched.

The cases. transformers' generate runs last-token models of one width only, so ``generate``
declares the cases it can run (``generate.specverify_cases = CASES``: one per ``LOOP_SETTINGS``
entry, the attribute ``interfaces.loop.CASES_ATTRIBUTE``), and ``python -m specverify check
specverify.adapters.hf_loop:generate`` runs exactly those (the report says they are the subject's,
not the standard loop cases, which it refuses: their target depends on the position and some drafts
have other widths). ``check`` (what ``python -m specverify check-hf-generate`` runs) is
``api.check`` of ``generate`` on them at ``budget(n, detect_tv)``, with check's ``Report``, verdict
words and exit codes (every loop check on the declared cases: laws, contracts, tokens per pass,
seeds on the first case), plus the control ``LOOP_CONTROL``: transformers' ``assistant_ensemble_weight=0.5``
(biased by design, ``ensemble_generate``) under the last setting's params, which must come out
NOT EXACT at the same budget, else the report is inconclusive (``Report.require_flagged``). What
it finds in transformers 5.24.0 is in docs/ADAPTERS.md. References: Leviathan et al. 2023 (arXiv 2211.17192); transformers'
``GenerationMixin._assisted_decoding`` and ``_get_logits_processor`` (the processing order:
sequence bias, repetition penalty, temperature, top-k, top-p, min-p, as ``processing.process_step``).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..battery.core import POWER_FALSE_PASS_RATE
from ..interfaces.loop.cases import LoopBudget, LoopCase
from ..laws import stats
from ..laws.requests import LogitTable, Output, Request, SamplingParams, check_requests
from ..models.loading import torch_modules
from . import hf

torch, transformers = torch_modules()
import transformers.generation.utils as hf_generation  # noqa: E402 - after torch_modules(): a missing torch is one clear error

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
                raise ValueError(
                    f"{name}: logits after {prefix} differ from those after ({t},): transformers' "
                    f"generate is checked on last-token models only"
                )
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
        vocab_size=width,
        hidden_size=hidden,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        use_sliding_window=False,
        rms_norm_eps=1e-12,
        pad_token_id=vocab,
        bos_token_id=None,
        eos_token_id=None,
    )
    with hf.single_threaded(), torch.random.fork_rng(devices=[]), torch.no_grad():
        model = transformers.Qwen2ForCausalLM(cfg).eval()
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = torch.zeros(width, hidden)
        emb[torch.arange(width), torch.arange(width)] = 1.0
        model.model.embed_tokens.weight.copy_(emb)
        model.model.norm.weight.fill_(hidden**-0.5)  # RMSNorm of a one-hot: sqrt(hidden) * one-hot
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
    out: dict = {
        "max_new_tokens": params.max_tokens,
        "repetition_penalty": params.repetition_penalty,
        "eos_token_id": list(params.stop_token_ids) or None,
    }
    if params.logit_bias:
        out["sequence_bias"] = {(int(t),): float(b) for t, b in params.logit_bias.items()}
    if params.greedy:
        out["do_sample"] = False
        return out
    out.update(
        do_sample=True,
        temperature=params.temperature,
        top_k=params.top_k or 0,
        top_p=params.top_p,
        min_p=params.min_p if params.min_p > 0 else None,
    )
    return out


@contextmanager
def counting_rounds():
    """Wrap transformers' ``_speculative_sampling`` (looked up in its module at each call) to
    record each verification round's (drafts verified, drafts accepted); the original is put
    back."""
    original = hf_generation._speculative_sampling
    rounds: list[tuple[int, int]] = []

    def counted(candidate_input_ids, candidate_logits, candidate_length, new_logits, *args, **kwargs):
        valid, n_matches = original(
            candidate_input_ids, candidate_logits, candidate_length, new_logits, *args, **kwargs
        )
        rounds.append((int(candidate_length), int(n_matches)))
        return valid, n_matches

    hf_generation._speculative_sampling = counted
    try:
        yield rounds
    finally:
        hf_generation._speculative_sampling = original


def round_counts(tokens, rounds, stops) -> tuple[int, int] | None:
    """(drafted, accepted) of one request from its rounds (drafts verified c, accepted j): each
    round emits j + 1 tokens, cut after a stop id, and accepted counts the drafts emitted (the
    reference loop's ``emit``); a last round that verified no draft (one token left) is not
    recorded. None when the rounds do not account for the tokens (e.g. greedy: no rounds)."""
    pos = drafted = accepted = 0
    for c, j in rounds:
        block = list(tokens[pos : pos + j + 1])
        if not block:
            return None
        cut = next((i + 1 for i, t in enumerate(block) if t in stops), len(block))
        drafted, accepted, pos = drafted + c, accepted + min(j, cut), pos + cut
    return (drafted, accepted) if 0 <= len(tokens) - pos <= 1 and rounds else None


def _one(target_lm, draft_lm, request: Request, k: int, seed: int, extra: dict) -> Output:
    """One ``generate(assistant_model=...)`` call for one request: its new tokens, with the
    drafted and accepted counts of its rounds (``round_counts``; None when they do not add up)."""
    x = torch.tensor([list(request.prompt)])
    with hf.engine_context(draft_lm, k), counting_rounds() as rounds:
        torch.manual_seed(seed)
        out = target_lm.generate(
            input_ids=x,
            attention_mask=torch.ones_like(x),
            assistant_model=draft_lm,
            **generate_kwargs(request.params),
            **extra,
        )
    tokens = tuple(int(t) for t in out[0, x.shape[1] :].tolist())
    counts = round_counts(tokens, rounds, request.params.stop_token_ids)
    return Output(tokens, None, *(counts or (None, None)))


def make_generate(**extra):
    """A loop subject running transformers' assisted generation, ``extra`` added to each call's kwargs."""

    def generate(target, draft, requests, k, rng):
        target_lm, vocab = model_for(target, "target")
        draft_lm, draft_vocab = model_for(draft, "draft")
        if draft_vocab != vocab:
            raise ValueError(
                f"draft: width {draft_vocab} differs from the target's {vocab}; transformers' "
                f"assisted generation is checked on pairs of one width"
            )
        check_requests(requests, vocab)
        out = []
        for r in requests:
            seed = r.params.seed if r.params.seed is not None else int(rng.integers(2**63))
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
NEAR_DRAFT = LogitTable(
    (TARGET.table + np.random.default_rng(5).normal(scale=0.1, size=TARGET.table.shape)).round(3),
    "draft V3 near the target (last token)",
)
"""The target's rows plus noise of scale 0.1: a draft the rule accepts often, so that a draft
processed at another temperature than the request's loses many tokens per pass (transformers'
assistant warpers applied twice propose from T^2: 3.31 tokens per pass where the rule gives 3.88
at T = 0.7, k = 3, max_new_tokens 4, exact for both by enumeration of the NumPy stand-in)."""


@dataclass(frozen=True)
class LoopSetting:
    name: str
    params: SamplingParams
    k: int = 2
    draft: LogitTable = DRAFT

    def case(self) -> LoopCase:
        return LoopCase(self.name, TARGET, self.draft, (Request((0,), self.params),), self.k, kind="declared")


LOOP_SETTINGS = (
    # the sampling settings of hf_generate's tiny-Qwen check (temperature, top-k), and top-p, on
    # the 3-token tables: top-k 2 of 3; the top-p thresholds sit >= 0.02 from any cumulative
    # probability of the processed rows (float32 rounding cannot move a token across them)
    LoopSetting("T=1.0", SamplingParams(max_tokens=3)),
    LoopSetting("T=0.7", SamplingParams(temperature=0.7, max_tokens=3)),
    LoopSetting("top_k=2, T=1.0", SamplingParams(top_k=2, max_tokens=3)),
    LoopSetting("top_p=0.85, T=1.0", SamplingParams(top_p=0.85, max_tokens=3)),
    LoopSetting("T=0.7, top_k=2, top_p=0.9", SamplingParams(temperature=0.7, top_k=2, top_p=0.9, max_tokens=3)),
    LoopSetting("repetition_penalty=1.5", SamplingParams(repetition_penalty=1.5, max_tokens=3)),
    LoopSetting("min_p=0.3", SamplingParams(min_p=0.3, max_tokens=3)),
    LoopSetting("sequence_bias={(0,): 1.0, (2,): -0.8}", SamplingParams(logit_bias={0: 1.0, 2: -0.8}, max_tokens=3)),
    LoopSetting("eos_token_id=2, max_new_tokens=4, k=3", SamplingParams(stop_token_ids=(2,), max_tokens=4), k=3),
    LoopSetting(
        "T=0.7, a draft near the target, max_new_tokens=4, k=3",
        SamplingParams(temperature=0.7, max_tokens=4),
        k=3,
        draft=NEAR_DRAFT,
    ),
    LoopSetting(
        "all: T=1.2, repetition_penalty=1.3, min_p=0.1, sequence_bias={(1,): 0.5}, eos_token_id=2",
        SamplingParams(
            temperature=1.2, repetition_penalty=1.3, min_p=0.1, logit_bias={1: 0.5}, stop_token_ids=(2,), max_tokens=3
        ),
    ),
)
LOOP_CONTROL = LoopSetting("control: assistant_ensemble_weight=0.5 on the last setting", LOOP_SETTINGS[-1].params)

CASES = tuple(s.case() for s in LOOP_SETTINGS)
"""The cases transformers' generate can run (last-token tables of one width): what ``generate``
declares, so that ``python -m specverify check specverify.adapters.hf_loop:generate`` runs these."""
generate.specverify_cases = CASES  # interfaces.loop.CASES_ATTRIBUTE
ensemble_generate.specverify_cases = CASES  # the control: NOT EXACT on them
CONTROL_CLAIM = "assistant_ensemble_weight=0.5 on the last setting, biased by design"
"""About 19% of its runs give an output the target gives probability 0 (57 of 300 measured)."""


def warm_up() -> None:
    """Build the declared cases' models and make one ``generate`` call (one token), at import: the
    first call of a subject would otherwise build them and import transformers' generation
    modules, past ``check``'s 2 s limit on one call (a contract finding, not a verdict)."""
    for case in CASES:
        model_for(case.target, "target"), model_for(case.draft, "draft")
    case = CASES[0]
    generate(case.target, case.draft, [Request((0,), SamplingParams(max_tokens=1))], case.k, np.random.default_rng(0))


warm_up()

GENERATE_TARGET = f"{__name__}:generate"
ENSEMBLE_TARGET = f"{__name__}:ensemble_generate"


def budget(n: int = 2000, detect_tv: float = 0.15, false_fail_rate: float = FALSE_FAIL_RATE) -> LoopBudget:
    """The loop budget of ``check``: ``n`` runs per case (torch's randomness cannot be enumerated,
    so every case goes to the battery's chi-square over whole outputs, and tokens per pass to
    its mean test), each case required to see TV ``detect_tv`` with probability 0.95 (else the
    verdict is inconclusive), the first case's request seeded with 0..n-1 for its seed law, a
    generous hang guard (a ``generate`` call is ~10-30 ms; 20 s allowed for one; a task stopped
    only when none returned for 50 s), and the counterexample search among the cases at the same n. ``max_paths`` 1: the
    enumerator can follow torch's randomness (``laws.torch_random``), but a case then takes
    minutes and float32 rounding shows as an exact TV of ~1e-7 (a finding at the 1e-9
    tolerance), so every case goes to statistics, whose power is stated."""
    from ..common.validation import check_discrepancy, check_int

    check_int("n", n, 1)
    check_discrepancy("detect_tv", detect_tv)
    return LoopBudget(
        f"hf-generate n={n}, TV {detect_tv:g}",
        max_paths=1,
        samples=n,
        extra_samples=n,
        detect_tv=detect_tv,
        call_limit_s=20.0,
        false_fail_rate=false_fail_rate,
        counterexample_samples=n,
        seed_law_runs=n,
    )


def check(
    n: int = 2000,
    seed: int = 0,
    control: bool = True,
    detect_tv: float = 0.15,
    settings=LOOP_SETTINGS,
    counterexample: bool = True,
    false_fail_rate: float = FALSE_FAIL_RATE,
):
    """``api.check`` of ``generate`` on the settings' cases (by default ``CASES``, which it declares)
    at ``budget(n, detect_tv)``: its
    ``api.Report`` (verdict, JSON, exit code as ``python -m specverify check``'s). With
    ``control``, ``ensemble_generate`` on ``LOOP_CONTROL`` at the same budget, which must come out
    NOT EXACT (``Report.require_flagged``: else the report is inconclusive)."""
    from ..common.validation import check_seed
    from ..surface import api

    check_seed(seed)
    b = budget(n, detect_tv, false_fail_rate)
    for s in settings:  # built once (CASES' at import); every subject's fork inherits them
        model_for(s.case().target, "target"), model_for(s.case().draft, "draft")
    cases = None if tuple(settings) == LOOP_SETTINGS else [s.case() for s in settings]  # None: those it declares
    report = api.check(
        generate, budget=b, seed=seed, cases=cases, target=GENERATE_TARGET, counterexample=counterexample
    )
    if control:
        ctrl = api.check(
            ensemble_generate,
            budget=b,
            seed=seed + 99,
            cases=[LOOP_CONTROL.case()],
            target=ENSEMBLE_TARGET,
            counterexample=False,
        )
        report.require_flagged(ctrl, CONTROL_CLAIM)
    return report


__all__ = [
    "CASES",
    "CONTROL_CLAIM",
    "ENSEMBLE_TARGET",
    "GENERATE_TARGET",
    "LOOP_CONTROL",
    "LOOP_SETTINGS",
    "LoopSetting",
    "NEAR_DRAFT",
    "bigram_lm",
    "budget",
    "check",
    "counting_rounds",
    "ensemble_generate",
    "generate",
    "generate_kwargs",
    "last_token_rows",
    "make_generate",
    "round_counts",
    "warm_up",
]
