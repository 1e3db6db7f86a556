"""Speculative decoding of real causal LMs with KV caches, and teacher-forced checks of the rule.

One round (Leviathan et al. 2023, arXiv 2211.17192, Algorithm 1; Chen et al. 2023,
arXiv 2302.01318): the draft proposes k tokens one at a time on its own KV cache, the target
scores the k + 1 new positions in one forward, the exact rule accepts a prefix, and both caches
are cropped back to the accepted length (``DynamicCache.crop``) before a residual or bonus token
is appended. The rule itself is not rewritten here: ``verify`` comes from the
reference sampler ``specverify.samplers.chain`` and runs on NumPy float64 copies of the target and
draft distributions after the SAME temperature / top-k / top-p processing of both.

Greedy (temperature 0) accepts while the draft equals the target's argmax
(``specverify.samplers.greedy.greedy_verify``). Batched verification
runs different kernels from one-token decoding, so the two can differ at a near-tie of the
target's top logits (handout, "GPU scale-up"; vLLM issue #4541 reports the same for its
verifier). ``compare_greedy`` finds the first difference and calls it a near-tie only when the
emitted token's target logit is within a stated margin of the maximum; anything else is a real
mismatch.

Leaving the caches uncropped (``crop_caches=False``) keeps the keys and values of rejected drafts:
later tokens attend to text that is not in the output, at shifted positions. That is the
catalogued model-level defect "model/kv-cache-not-cropped" (compare HF transformers issue
#27649 on assisted-generation cache handling); the tests assert that it diverges from
target-only greedy decoding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..common.validation import check_k
from ..laws.processing import check_sampling, process_logits
from ..samplers.chain import LazyRows, verify
from ..samplers.greedy import argmax_token, greedy_verify
from ..samplers.prompt_lookup import check_ngram, lookup_drafts, one_hot
from .loading import torch_modules
from .model_calls import crop_to, forward, logit_width, new_cache, prompt_list, synchronize

DEFECT_ID = "model/kv-cache-not-cropped"


@dataclass
class DecodeStats:
    """Counts of one generation: a pass is one target forward (prefill not counted)."""

    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    rejections: int = 0
    emitted: int = 0
    wall_s: float = 0.0

    @property
    def tokens_per_pass(self) -> float:
        return self.emitted / self.rounds if self.rounds else float("nan")

    @property
    def acceptance_rate(self) -> float:
        """Accepted / verified drafts: the empirical per-position alpha of the i.i.d. model."""
        verified = self.accepted + self.rejections
        return self.accepted / verified if verified else float("nan")

    @property
    def tokens_per_s(self) -> float:
        return self.emitted / self.wall_s if self.wall_s > 0 else float("nan")

    def as_dict(self) -> dict:
        out = dict(self.__dict__)
        out.update(
            tokens_per_pass=self.tokens_per_pass, acceptance_rate=self.acceptance_rate, tokens_per_s=self.tokens_per_s
        )
        return out


@dataclass
class Generation:
    ids: list[int]
    n_prompt: int
    stats: DecodeStats = field(default_factory=DecodeStats)

    @property
    def new_ids(self) -> list[int]:
        return self.ids[self.n_prompt :]


# ---------------------------------------------------------------------------- greedy


def sample_token(logits_row, t, top_k, top_p, rng) -> int:
    """One token from a torch logit row: its argmax at t = 0, else a draw from the processed row."""
    if t == 0:
        return argmax_token(logits_row)
    p = process_logits(logits_row.cpu().numpy(), t, top_k, top_p)
    return int(rng.choice(p.size, p=p))


def finish_ids(ids: list[int], n_prompt: int, n_new: int, eos_token_id) -> list[int]:
    """The ids cut to ``n_new`` new tokens, and after the first ``eos_token_id`` (kept) among them."""
    ids = ids[: n_prompt + n_new]
    if eos_token_id is not None and eos_token_id in ids[n_prompt:]:
        ids = ids[: ids.index(eos_token_id, n_prompt) + 1]
    return ids


# ---------------------------------------------------------------------------- helpers


def as_rng(rng):
    """``rng`` if it is a generator, else ``numpy.random.default_rng(rng)`` (a seed or None)."""
    return rng if hasattr(rng, "random") else np.random.default_rng(rng)


def _check_new_tokens(max_new_tokens) -> int:
    return check_k(max_new_tokens, "max_new_tokens")


# ---------------------------------------------------------------------------- generation


def target_only_generate(
    target,
    input_ids,
    max_new_tokens,
    temperature=0.0,
    top_k=None,
    top_p=None,
    rng=None,
    vocab_size=None,
    eos_token_id=None,
    static_len=None,
) -> Generation:
    """Plain cached decoding with the target: one forward per token, the baseline to beat."""
    torch, _ = torch_modules()
    t, top_k, top_p = check_sampling(temperature, top_k, top_p)
    n_new = _check_new_tokens(max_new_tokens)
    ids = prompt_list(input_ids)
    n_prompt, width, rng = len(ids), logit_width(target, vocab_size), as_rng(rng)
    stats = DecodeStats()
    cache = new_cache(target, static_len)
    with torch.no_grad():
        synchronize(target)
        start = time.perf_counter()
        feed = ids
        while len(ids) - n_prompt < n_new:
            token = sample_token(forward(target, feed, cache, keep=1)[-1, :width], t, top_k, top_p, rng)
            ids.append(token)
            feed = [token]
            stats.rounds += 1
            stats.emitted += 1
            if token == eos_token_id:
                break
        synchronize(target)
        stats.wall_s = time.perf_counter() - start
    return Generation(ids, n_prompt, stats)


class ModelDrafter:
    """Drafts with a draft model on its own KV cache, one cached forward per token.

    Invariant: the cache holds ``length`` positions, a prefix of the accepted ids. After a round
    with no drafting (k = 0) it lags behind; the next ``propose`` feeds the missing ids at once.

    ``min_confidence``: stop drafting after a draft x whose own probability q(x) (at greedy, of
    the draft's softmax at T = 1) is below it, as transformers' ``assistant_confidence_threshold``
    does (default 0.4 there). Still exact: whether position i + 1 is drafted depends only on the
    drafts so far and the draft's own q, never on the target (samplers/adaptive.py's argument).
    """

    def __init__(
        self,
        model,
        width: int,
        static_len: int | None = None,
        crop_cache: bool = True,
        min_confidence: float | None = None,
    ):
        self.model, self.width, self.crop_cache = model, width, crop_cache
        if min_confidence is not None and not 0.0 <= min_confidence <= 1.0:
            raise ValueError(f"min_confidence: must lie in [0, 1], got {min_confidence!r}")
        self.min_confidence = min_confidence
        self.cache = new_cache(model, static_len)
        self.length = 0
        self.steps = 0  # draft forwards so far, for the cost model

    def prefill(self, ids: list[int]) -> None:
        if len(ids) > 1:
            forward(self.model, ids[:-1], self.cache, keep=1)
            self.length = len(ids) - 1

    def propose(self, ids, k, t, top_k, top_p, rng):
        """k drafts and their q vectors (None at greedy: the rule then needs only argmaxes)."""
        drafts, qs = [], []
        feed = ids[self.length :]
        for _ in range(k):
            row = forward(self.model, feed, self.cache, keep=1)[-1, : self.width]
            self.length += len(feed)
            self.steps += 1
            if t == 0:
                x, q = argmax_token(row), None
            else:
                q = process_logits(row.cpu().numpy(), t, top_k, top_p)
                x = int(rng.choice(self.width, p=q))
            drafts.append(x)
            qs.append(q)
            feed = [x]
            if self.min_confidence is not None and self._confidence(row, x, q) < self.min_confidence:
                break
        return drafts, qs

    @staticmethod
    def _confidence(row, x: int, q) -> float:
        """q(x), the draft's probability of its own draft (softmax at T = 1 when greedy)."""
        if q is not None:
            return float(q[x])
        torch, _ = torch_modules()
        return float(torch.softmax(row, dim=-1)[x])

    def accept(self, n_ids: int) -> None:
        """The accepted ids now number ``n_ids``: forget cached positions past n_ids - 1."""
        self.length = min(self.length, n_ids - 1)
        if self.crop_cache:
            crop_to(self.cache, self.length)


class LookupDrafter:
    """Prompt lookup (``samplers.prompt_lookup.lookup_drafts``): up to k copied tokens, no model.

    The drafts are a function of the accepted ids, so q is one-hot at each draft and the chain
    rule with that q is exact (see ``specverify.samplers.prompt_lookup``).
    """

    def __init__(self, width: int, ngram: int = 2):
        self.width, self.ngram, self.steps = width, check_ngram(ngram), 0

    def prefill(self, ids: list[int]) -> None:
        pass

    def propose(self, ids, k, t, top_k, top_p, rng):
        drafts = [x for x in lookup_drafts(ids, k, self.ngram) if x < self.width]
        return drafts, [None if t == 0 else one_hot(x, self.width) for x in drafts]

    def accept(self, n_ids: int) -> None:
        pass


def verify_rows(rows, drafts, qs, t, top_k, top_p, rng) -> tuple[int, int]:
    """(accepted drafts j, the token emitted after them) from the target's len(drafts) + 1 logit
    rows: ``samplers.greedy.greedy_verify`` at t = 0, else ``samplers.chain.verify`` on the rows
    processed as the drafts' q were. ``speculative_generate`` and ``models.medusa`` call it."""
    if t == 0:
        return greedy_verify(rows, drafts)
    if not drafts:
        return 0, sample_token(rows[0], t, top_k, top_p, rng)
    rows = rows.cpu().numpy()
    return verify(LazyRows(lambda j: process_logits(rows[j], t, top_k, top_p)), qs, drafts, rng)


def _drafter(draft, width, static_len, crop_caches):
    if hasattr(draft, "propose"):
        return draft
    return ModelDrafter(draft, width, static_len, crop_caches)


def speculative_generate(
    target,
    draft,
    input_ids,
    k,
    max_new_tokens,
    temperature=0.0,
    top_k=None,
    top_p=None,
    rng=None,
    crop_caches=True,
    vocab_size=None,
    eos_token_id=None,
    static_len=None,
    policy=None,
) -> Generation:
    """Draft-target decoding with both KV caches; the output is distributed as the target's.

    ``draft`` is a draft model or a drafter (``ModelDrafter``, ``LookupDrafter``: anything with
    ``prefill``, ``propose``, ``accept``). ``k`` is the drafts per round, or with ``policy`` (a
    ``specverify.models.costs.KPolicy``) the most it may choose; the policy picks each round's k
    in 0..k from past rounds only (k = 0: a plain target step), so every round stays exact.

    Invariant between rounds: the target cache holds every token but the last, the draft cache
    a prefix of that (it lacks the last draft after a fully accepted round). ``crop_caches=False``
    is the defect "model/kv-cache-not-cropped": the bookkeeping stays right but rejected drafts
    stay in the caches.
    """
    torch, _ = torch_modules()
    k = check_k(k)
    t, top_k, top_p = check_sampling(temperature, top_k, top_p)
    n_new = _check_new_tokens(max_new_tokens)
    ids = prompt_list(input_ids)
    n_prompt, rng = len(ids), as_rng(rng)
    width = logit_width(target, vocab_size)
    if not hasattr(draft, "propose"):
        width = min(width, logit_width(draft, vocab_size))
    drafter = _drafter(draft, width, static_len, crop_caches)
    stats = DecodeStats()
    t_cache = new_cache(target, static_len)
    with torch.no_grad():
        synchronize(target)
        start = time.perf_counter()
        t_len = 0
        if len(ids) > 1:
            forward(target, ids[:-1], t_cache, keep=1)
            t_len = len(ids) - 1
        drafter.prefill(ids)
        while len(ids) - n_prompt < n_new and (eos_token_id is None or eos_token_id not in ids[n_prompt:]):
            k_round = k if policy is None else policy.choose(k)
            tick = time.perf_counter()
            drafts, qs = drafter.propose(ids, k_round, t, top_k, top_p, rng) if k_round else ([], [])
            synchronize(target)
            tock = time.perf_counter()
            rows = forward(target, ids[t_len:] + drafts, t_cache, keep=len(drafts) + 1)[:, :width]
            j, token = verify_rows(rows, drafts, qs, t, top_k, top_p, rng)
            synchronize(target)
            if policy is not None:
                policy.observe(len(drafts), j, draft_s=tock - tick, verify_s=time.perf_counter() - tock)
            ids += drafts[:j] + [token]
            t_len = len(ids) - 1
            if crop_caches:
                crop_to(t_cache, t_len)
            drafter.accept(len(ids))
            stats.rounds += 1
            stats.drafted += len(drafts)
            stats.accepted += j
            stats.rejections += j < len(drafts)
            stats.emitted += j + 1
        synchronize(target)
        stats.wall_s = time.perf_counter() - start
    return Generation(finish_ids(ids, n_prompt, n_new, eos_token_id), n_prompt, stats)


# ---------------------------------------------------------------------------- greedy comparison


def teacher_forced_logits(model, ids, vocab_size=None) -> np.ndarray:
    """float32 logits [len(ids), width] of one uncached forward; row i predicts ids[i + 1]."""
    torch, _ = torch_modules()
    ids = prompt_list(ids)
    width = logit_width(model, vocab_size)
    with torch.no_grad():
        x = torch.tensor([ids], dtype=torch.long, device=model.device)
        return model(input_ids=x).logits[0, :, :width].float().cpu().numpy()


def compare_greedy(spec_ids, ref_ids, target_logits, n_prompt=0, rel_margin=1e-3, abs_margin=1e-3) -> dict:
    """Classify the first difference between speculative and target-only greedy output.

    ``target_logits[i]`` are the target's logits after ``ref_ids[: i + 1]`` (``teacher_forced_
    logits(target, ref_ids)``); before the first difference the prefixes agree, so that row is
    the target's view of the disputed position. It is a near-tie only when the speculative token's
    logit is within max(abs_margin, rel_margin * |top logit|) of the top logit; otherwise, or
    when one output is merely shorter, it is a real mismatch. Defaults suit fp32; in bf16
    rounding moves logits by ~2^-8 relative, so use rel_margin=2**-6 there.
    """
    spec, ref = [int(i) for i in spec_ids], [int(i) for i in ref_ids]
    logits = np.asarray(target_logits)
    first = next((i for i in range(n_prompt, min(len(spec), len(ref))) if spec[i] != ref[i]), None)
    if first is None:
        kind = "identical" if len(spec) == len(ref) else "mismatch"
        return {
            "kind": kind,
            "position": None if kind == "identical" else min(len(spec), len(ref)),
            "gap": None,
            "margin": None,
        }
    row = logits[first - 1]
    top = float(row.max())
    gap = top - float(row[spec[first]])
    margin = max(abs_margin, rel_margin * abs(top))
    kind = "near-tie" if gap <= margin else "mismatch"
    return {
        "kind": kind,
        "position": first,
        "gap": gap,
        "margin": margin,
        "spec_token": spec[first],
        "ref_token": ref[first],
    }


# ---------------------------------------------------------------------------- teacher forcing


def teacher_forced_pairs(
    target, draft, ids, n_prompt, temperature=1.0, top_k=None, top_p=None, vocab_size=None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(p, q) float64 vectors, identically processed, at each generated position of ``ids``."""
    if not 1 <= n_prompt < len(prompt_list(ids)):
        raise ValueError(f"n_prompt: must lie in 1..len(ids) - 1, got {n_prompt}")
    width = min(logit_width(target, vocab_size), logit_width(draft, vocab_size))
    p_rows = teacher_forced_logits(target, ids, width)[n_prompt - 1 : -1]
    q_rows = teacher_forced_logits(draft, ids, width)[n_prompt - 1 : -1]
    return [
        (process_logits(p, temperature, top_k, top_p), process_logits(q, temperature, top_k, top_p))
        for p, q in zip(p_rows, q_rows)
    ]


def alpha_per_position(
    target, draft, ids, n_prompt, temperature=1.0, top_k=None, top_p=None, vocab_size=None
) -> np.ndarray:
    """sum_x min(p_t(x), q_t(x)) at each generated position of ``ids`` (the handout's function).

    At temperature 0 the acceptance is an indicator: 1.0 where the draft's argmax equals the
    target's, else 0.0.
    """
    t, _, _ = check_sampling(temperature, top_k, top_p)
    if t == 0:
        width = min(logit_width(target, vocab_size), logit_width(draft, vocab_size))
        p_rows = teacher_forced_logits(target, ids, width)[n_prompt - 1 : -1]
        q_rows = teacher_forced_logits(draft, ids, width)[n_prompt - 1 : -1]
        return (p_rows.argmax(-1) == q_rows.argmax(-1)).astype(np.float64)
    pairs = teacher_forced_pairs(target, draft, ids, n_prompt, t, top_k, top_p, vocab_size)
    return np.array([np.minimum(p, q).sum() for p, q in pairs])
