"""Loop mutants: generation loops that each differ from the reference loop in one step.

Every entry has the loop interface ``generate(target, draft, requests, k, rng)`` and reads as
"``specverify.samplers.reference_loop.generate`` but X": it is ``loop_with`` with one step (hook) swapped,
or the reference behind a few lines that change what one step sees (the target's context, the batch
it is handed), a few lines each. The loop battery (specverify.interfaces.loop.battery) must kill every mutant; the controls
(effect "exact") are loops that look different but are exact and must pass.

References: public engine issues and PRs (``owner/repo#number``) that report the same class of
defect; the loop's bugs are modelled, not copied from those engines.
"""

from __future__ import annotations

import numpy as np

from ..samplers import reference_loop as ref
from ..samplers.chain import accepts, recover, sample
from .catalogue import Mutant


def _loop(**hooks):
    def generate(target, draft, requests, k, rng):
        return ref.loop_with(target, draft, requests, k, rng, **hooks)

    return generate


# -- processing applied to some rows only --------------------------------------------------------


def _min_p_bonus_only(s, logits, drafts, i, n):
    return ref.processed_row(s, logits, drafts, i, **({} if i == n else {"min_p": 0.0}))


def _bias_bonus_only(s, logits, drafts, i, n):
    return ref.processed_row(s, logits, drafts, i, **({} if i == n else {"logit_bias": {}}))


def _no_penalties_target(s, logits, drafts, i, n):
    return ref.processed_row(s, logits, drafts, i, penalties=False)


def _no_penalties_draft(s, logits, drafts, i, vocab):
    return ref.processed_row(s, ref.fit_width(logits, vocab), drafts, i, penalties=False)


def _penalties_dropped_drafter(s, draft, n, vocab):
    return ref.draft_tokens(s, draft, n, vocab, row=_no_penalties_draft)


def _grammar_first_position_only_target(s, logits, drafts, i, n):
    return ref.processed_row(s, logits, drafts, i, grammar=(i == 0))


def _grammar_first_position_only_draft(s, logits, drafts, i, vocab):
    return ref.processed_row(s, ref.fit_width(logits, vocab), drafts, i, grammar=(i == 0))


# -- state advanced by the wrong tokens -----------------------------------------------------------


def _penalty_once_per_step(s, emitted, drafts, token):
    s.penalty_tokens += emitted[-1:]  # one count per step, not per accepted token
    s.grammar_tokens += emitted


def _penalty_with_rejected(s, emitted, drafts, token):
    s.penalty_tokens += list(drafts) + [int(token)]  # every draft counted, accepted or not
    s.grammar_tokens += emitted


def _grammar_with_rejected(s, emitted, drafts, token):
    s.penalty_tokens += emitted
    s.grammar_tokens += list(drafts) + [int(token)]  # rejected drafts advance the grammar too


# -- stop, max_tokens, counts, logprobs ------------------------------------------------------------


def _no_stop_cut(s, drafts, j, token):
    return list(drafts[:j]) + [int(token)], j


def _bonus_overruns(s, k):
    return max(0, min(k, s.params.max_tokens - len(s.output)))


def _accepted_past_stop(s, drafts, j, token):
    return ref.emit(s, drafts, j, token)[0], j


def _logprob_next_row(i, j):
    return min(i + 1, j)


# -- batches and seeds ----------------------------------------------------------------------------


def _seed_shared(requests, rng):
    rngs, last = [], rng
    for r in requests:  # one generator object shared: batch-mates draw from the seeded stream
        if r.params.seed is not None:
            last = np.random.default_rng(r.params.seed)
        rngs.append(last)
    return rngs


def _uniform_offsets(states, counts):
    step = min(counts)  # every request's offset advanced by the same (smallest) count
    for s in states:
        s.seen += step


# -- vocabulary widths and the ratio ----------------------------------------------------------------


def _padding_drafter(s, draft, n, vocab):
    drafts, qs = [], []
    for i in range(n):
        logits = np.asarray(draft(s.context() + tuple(drafts)), dtype=np.float64)
        full = ref.processed_row(s, logits, drafts, i) if logits.size > vocab else None
        q = ref.draft_row(s, logits, drafts, i, vocab)
        x = int(s.rng.choice(logits.size, p=full)) if full is not None else int(s.rng.choice(vocab, p=q))
        drafts.append(min(x, vocab - 1))  # a padding id drafted, then clamped
        qs.append(q)
    return drafts, qs


def _residual_draft_width(s, ps, qs, drafts, draft):
    pad = max(0, len(np.asarray(draft(s.context()))) - len(ps[0]))
    for i, (x, q) in enumerate(zip(drafts, qs)):
        if not accepts(ps[i], q, x, s.rng):
            p_w = np.concatenate([ps[i], np.full(pad, 1.0 / len(q))])  # padding rows given mass
            return i, recover(p_w / p_w.sum(), np.concatenate([q, np.zeros(pad)]), s.rng)
    return len(drafts), sample(ps[len(drafts)], s.rng)


def _float16_ratio(s, ps, qs, drafts, draft):
    for i, (x, q) in enumerate(zip(drafts, qs)):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = float(np.float16(ps[i][x]) / np.float16(q[x]))  # 0 / 0 = nan when both underflow
        if s.rng.random() >= ratio:  # reject; a nan ratio never rejects
            return i, recover(ps[i], q, s.rng)
    return len(drafts), sample(ps[len(drafts)], s.rng)


# -- batches, seeds, long contexts: bugs the sweeps reach ---------------------------------------------


def coalescing_loop(target, draft, requests, k, rng):
    """Identical unseeded requests (same prompt and params) in one batch are run once and share
    that one output (a prefix-cache or request-dedup shortcut): each is distributed as it should
    be, but the two are not independent."""
    requests = list(requests)
    source = []  # the index of the request whose output each one gets
    for i, r in enumerate(requests):
        twin = next((j for j in source if r.params.seed is None and requests[j] == r), i)
        source.append(twin)
    runs = sorted(set(source))
    outs = dict(zip(runs, ref.generate(target, draft, [requests[i] for i in runs], k, rng)))
    return [outs[j] for j in source]


def _recreated_every_third_round(s, draft, n, vocab):
    if s.params.seed is not None:
        s.round = getattr(s, "round", -1) + 1
        if s.round and s.round % 3 == 0:  # rounds 3, 6, ...: a fresh generator from the seed
            s.rng = np.random.default_rng(s.params.seed)
    return ref.draft_tokens(s, draft, n, vocab)


def sliding_window_loop(target, draft, requests, k, rng):
    """The reference loop with the target shown only the last 16 tokens of each context (a
    sliding-window attention or a KV cache truncated to 16 positions)."""
    return ref.generate(lambda prefix: target(tuple(prefix)[-16:]), draft, requests, k, rng)


def _raw_target_row(s, logits, drafts, i, n):  # the request's params not applied to the target row
    return ref.processed_row(s, logits, drafts, i, temperature=1.0, top_k=None, top_p=1.0, min_p=0.0, logit_bias={})


def _params_first_32_tokens(s, logits, drafts, i, n):  # a 32-slot per-token params buffer
    if len(s.output) + i >= 32:
        return _raw_target_row(s, logits, drafts, i, n)
    return ref.target_row(s, logits, drafts, i, n)


def params_first_32_requests(target, draft, requests, k, rng):
    """A 32-slot sampling-params table: requests from index 32 of a batch on are verified against
    raw target rows (no temperature, top-k / top-p / min-p or logit bias)."""
    late = list(requests)[32:]

    def trow(s, logits, drafts, i, n):
        if any(s.request is r for r in late):
            return _raw_target_row(s, logits, drafts, i, n)
        return ref.target_row(s, logits, drafts, i, n)

    return ref.loop_with(target, draft, requests, k, rng, trow=trow)


# -- controls --------------------------------------------------------------------------------------


def _truncate_at_max_tokens(s, drafts, j, token):
    emitted, acc = ref.emit(s, drafts, j, token)
    emitted = emitted[: s.params.max_tokens - len(s.output)]
    return emitted, min(acc, len(emitted))


def _raw_draft_row(s, logits, drafts, i, vocab):
    z = ref.fit_width(logits, vocab)
    if not np.isfinite(z.max()):
        return np.full(vocab, 1.0 / vocab)
    e = np.exp(z - z.max())
    return e / e.sum()


def _unprocessed_drafter(s, draft, n, vocab):
    return ref.draft_tokens(s, draft, n, vocab, row=_raw_draft_row)


def target_only_loop(target, draft, requests, k, rng):
    return ref.target_only(target, requests, rng)


_R, _S = "real-world", "specverify"


def _m(id, description, effect, fn, reference, source=_R):
    return Mutant(id, description, effect, fn, reference, source, interface="loop")


LOOP_MUTANTS: tuple[Mutant, ...] = (
    _m("loop-minp/bonus-only", "min-p applied to the bonus row only, not to the rows that verify "
       "drafts", "biased", _loop(trow=_min_p_bonus_only), "vllm-project/vllm#42744"),
    _m("loop-bias/bonus-only", "logit bias applied to the bonus row only", "biased",
       _loop(trow=_bias_bonus_only), "vllm-project/vllm#42744"),
    _m("loop-penalty/dropped-when-speculating", "repetition / frequency / presence penalties not "
       "applied to draft or target rows when speculating", "biased",
       _loop(trow=_no_penalties_target, drafter=_penalties_dropped_drafter), "vllm-project/vllm#18902"),
    _m("loop-penalty/counted-once-per-step", "penalty counts updated once per step (the round's "
       "last token) instead of per accepted token", "biased", _loop(update=_penalty_once_per_step),
       "sgl-project/sglang#33643"),
    _m("loop-penalty/rejected-drafts-counted", "penalty state includes the rejected drafts",
       "biased", _loop(update=_penalty_with_rejected), "vllm-project/vllm#33251"),
    _m("loop-grammar/drafts-unmasked", "grammar mask applied at the round's first position only, "
       "not to the rows of later drafts", "biased",
       _loop(trow=_grammar_first_position_only_target,
             drafter=lambda s, d, n, v: ref.draft_tokens(s, d, n, v, row=_grammar_first_position_only_draft)),
       "vllm-project/vllm#34241"),
    _m("loop-grammar/advanced-by-rejected", "grammar advanced by every draft, rejected ones too",
       "biased", _loop(update=_grammar_with_rejected), "vllm-project/vllm#36138"),
    _m("loop-stop/tokens-after-stop", "accepted drafts after a stop token are emitted",
       "contract", _loop(cut=_no_stop_cut),
       "huggingface/transformers#47912; ggml-org/llama.cpp#28049"),
    _m("loop-max-tokens/bonus-overrun", "k drafts whenever k tokens remain: the bonus token "
       "overruns max_tokens", "contract", _loop(drafts_for=_bonus_overruns), "sgl-project/sglang#31599"),
    _m("loop-seed/consumed-by-batch-mates", "unseeded batch-mates draw from a seeded request's "
       "generator", "contract", _loop(rngs=_seed_shared), "vllm-project/vllm#6038"),
    _m("loop-logprobs/wrong-row", "logprob of an emitted token read from the next position's row",
       "contract", _loop(lp_row=_logprob_next_row), "ggml-org/llama.cpp#27972"),
    _m("loop-batch/uniform-offsets", "ragged batch: every request's offset advanced by the "
       "smallest count emitted in the round", "biased", _loop(offsets=_uniform_offsets),
       "Blaizzy/mlx-vlm#1155"),
    _m("loop-vocab/draft-padding-probability", "drafts sampled over the draft's padding rows too "
       "(clamped into the vocabulary); the ratio uses the fitted q", "biased",
       _loop(drafter=_padding_drafter), "vllm-project/vllm#10913"),
    _m("loop-vocab/residual-out-of-range", "residual over the draft's padded width with the "
       "padding rows given mass: a recovered id at or past the vocabulary", "contract",
       _loop(verifier=_residual_draft_width), "vLLM's out-of-range recovered-token regression (no "
       "public thread found)", _S),
    _m("loop-ratio/float16-underflow", "acceptance ratio in float16: 0 / 0 = nan when p(x) and q(x) "
       "underflow, and a nan ratio is an unconditional accept", "biased",
       _loop(verifier=_float16_ratio), "lablup/mlxcel#992"),
    _m("loop-counts/accepted-past-stop", "acceptance counted for the drafts past a stop token",
       "contract", _loop(cut=_accepted_past_stop), "vllm-project/vllm#56101"),
    _m("loop-batch/coalesces-identical-requests", "identical unseeded requests in one batch share one "
       "output (each alone is exact; together they are not independent)", "biased", coalescing_loop,
       "UKGovernmentBEIS/inspect_ai#2580", _S),
    _m("loop-seed/recreated-every-third-round", "a seeded request's generator re-created from its seed "
       "every third round: from round three on it repeats its first rounds", "biased",
       _loop(drafter=_recreated_every_third_round), "NVIDIA/TensorRT-LLM#17599", _S),
    _m("loop-context/sliding-window-16", "the target shown only the last 16 tokens of the context "
       "(a sliding window or a truncated KV cache)", "biased", sliding_window_loop,
       "huggingface/transformers#48280", _S),
    _m("loop-max-tokens/params-first-32-tokens", "the request's params applied to its first 32 "
       "tokens only (a 32-slot buffer): raw target rows from the 33rd token on", "biased",
       _loop(trow=_params_first_32_tokens), "a fixed-size per-token params buffer (no public thread "
       "found)", _S),
    _m("loop-batch/params-first-32-requests", "a 32-slot sampling-params table: requests from index "
       "32 of a batch on are verified against raw target rows", "biased", params_first_32_requests,
       "a fixed-size per-request params table (no public thread found)", _S),
)  # fmt: skip

LOOP_CONTROLS: tuple[Mutant, ...] = (
    _m("loop-control/reference", "the reference speculative loop", "exact", ref.generate,
       "arXiv 2211.17192", _S),
    _m("loop-control/target-only", "target-only decoding with the same params (no drafts)",
       "exact", target_only_loop, None, _S),
    _m("loop-control/truncate-at-max-tokens", "k drafts whenever k tokens remain, the output cut "
       "at max_tokens", "exact", _loop(drafts_for=_bonus_overruns, cut=_truncate_at_max_tokens),
       None, _S),
    _m("loop-control/unprocessed-draft", "drafts from the draft's raw softmax (no params) with that "
       "q in the ratio: any q keeps the rule exact", "exact", _loop(drafter=_unprocessed_drafter),
       "arXiv 2211.17192", _S),
)  # fmt: skip

__all__ = ["LOOP_CONTROLS", "LOOP_MUTANTS"]
