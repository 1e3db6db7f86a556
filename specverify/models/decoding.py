"""Speculative decoding of real causal LMs with KV caches, and teacher-forced checks of the rule.

One round (Leviathan et al. 2023, arXiv 2211.17192, Algorithm 1; Chen et al. 2023,
arXiv 2302.01318): the draft proposes k tokens one at a time on its own KV cache, the target
scores the k + 1 new positions in one forward, the exact rule accepts a prefix, and both caches
are cropped back to the accepted length (``DynamicCache.crop``) before a residual or bonus token
is appended. The rule itself is not rewritten here: ``verify`` comes from the
reference sampler ``specverify.samplers.chain`` and runs on NumPy float64 copies of the target and
draft distributions after the SAME temperature / top-k / top-p processing of both.

Greedy (temperature 0) accepts while the draft equals the target's argmax. Batched verification
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

import inspect
import time
from dataclasses import dataclass, field

import numpy as np

from ..processing import check_sampling, process_logits
from ..samplers.chain import LazyRows, verify
from ..validation import check_k
from .loading import torch_modules

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
        out.update(tokens_per_pass=self.tokens_per_pass, acceptance_rate=self.acceptance_rate,
                   tokens_per_s=self.tokens_per_s)
        return out


@dataclass
class Generation:
    ids: list[int]
    n_prompt: int
    stats: DecodeStats = field(default_factory=DecodeStats)

    @property
    def new_ids(self) -> list[int]:
        return self.ids[self.n_prompt:]


# ---------------------------------------------------------------------------- greedy


def greedy_token(logits_row) -> int:
    """Argmax of one row of (float32) logits; ties go to the lowest id, as in torch.argmax."""
    return int(logits_row.argmax())


# ---------------------------------------------------------------------------- caches


def cache_kwarg(model) -> str:
    """transformers >= 5 names the forward's cache argument ``cache``; 4.x ``past_key_values``."""
    params = inspect.signature(type(model).forward).parameters  # the class's: forward may be compiled
    return "cache" if "cache" in params else "past_key_values"


def new_cache(model, static_len: int | None = None):
    """A DynamicCache, or a StaticCache of ``static_len`` positions (for torch.compile on GPU)."""
    _, transformers = torch_modules()
    if static_len is not None:
        return transformers.StaticCache(config=model.config, max_cache_len=static_len)
    try:
        return transformers.DynamicCache(config=model.config)
    except TypeError:  # transformers 4.x: no config argument
        return transformers.DynamicCache()


def cache_length(cache) -> int:
    return int(cache.get_seq_length())


def crop_to(cache, length: int) -> None:
    """Drop cached positions past ``length``.

    ``crop(-n)`` removes n positions in transformers 4.x and 5.x alike; a positive argument means
    'keep this many' in 4.x and is refused in 5.x, and ``crop(0)`` empties a 4.x cache, so only a
    negative count is ever passed.
    """
    extra = cache_length(cache) - length
    if extra < 0:
        raise ValueError(f"length: cache holds {cache_length(cache)} positions, cannot crop to {length}")
    if extra > 0:
        cache.crop(-extra)


def forward(model, token_ids: list[int], cache):
    """Logits (float32, [len(token_ids), width]) of feeding ``token_ids`` after what ``cache`` holds."""
    torch, _ = torch_modules()
    ids = torch.tensor([token_ids], dtype=torch.long, device=model.device)
    out = model(input_ids=ids, use_cache=True, **{cache_kwarg(model): cache})
    return out.logits[0].float()


def _sync(model) -> None:
    torch, _ = torch_modules()
    if model.device.type == "cuda":
        torch.cuda.synchronize(model.device)


def _prompt_list(input_ids) -> list[int]:
    if hasattr(input_ids, "tolist"):
        input_ids = input_ids.tolist()
    if input_ids and isinstance(input_ids[0], list):
        if len(input_ids) != 1:
            raise ValueError(f"input_ids: batch size must be 1, got {len(input_ids)}")
        input_ids = input_ids[0]
    ids = [int(i) for i in input_ids]
    if not ids:
        raise ValueError("input_ids: the prompt must hold at least one token")
    return ids


def _width(model, vocab_size):
    width = model.config.vocab_size
    if vocab_size is None:
        return width
    if not 1 <= vocab_size <= width:
        raise ValueError(f"vocab_size: must lie in 1..{width} (the model's logit width), got {vocab_size}")
    return int(vocab_size)


def _rng(rng):
    return rng if hasattr(rng, "random") else np.random.default_rng(rng)


def _check_new_tokens(max_new_tokens) -> int:
    return check_k(max_new_tokens, "max_new_tokens")


# ---------------------------------------------------------------------------- generation


def target_only_generate(target, input_ids, max_new_tokens, temperature=0.0, top_k=None,
                         top_p=None, rng=None, vocab_size=None, eos_token_id=None,
                         static_len=None) -> Generation:
    """Plain cached decoding with the target: one forward per token, the baseline to beat."""
    torch, _ = torch_modules()
    t, top_k, top_p = check_sampling(temperature, top_k, top_p)
    n_new = _check_new_tokens(max_new_tokens)
    ids = _prompt_list(input_ids)
    n_prompt, width, rng = len(ids), _width(target, vocab_size), _rng(rng)
    stats = DecodeStats()
    cache = new_cache(target, static_len)
    with torch.no_grad():
        _sync(target)
        start = time.perf_counter()
        feed = ids
        while len(ids) - n_prompt < n_new:
            row = forward(target, feed, cache)[-1, :width]
            token = greedy_token(row) if t == 0 else int(
                rng.choice(width, p=process_logits(row.cpu().numpy(), t, top_k, top_p)))
            ids.append(token)
            feed = [token]
            stats.rounds += 1
            stats.emitted += 1
            if token == eos_token_id:
                break
        _sync(target)
        stats.wall_s = time.perf_counter() - start
    return Generation(ids, n_prompt, stats)


def _draft_round(draft, ids, d_len, d_cache, k, width, t, top_k, top_p, rng):
    """k drafts from the draft model: the tokens, their q vectors (None at greedy), new d_len."""
    drafts, qs = [], []
    feed = ids[d_len:]
    for _ in range(k):
        row = forward(draft, feed, d_cache)[-1, :width]
        d_len += len(feed)
        if t == 0:
            x, q = greedy_token(row), None
        else:
            q = process_logits(row.cpu().numpy(), t, top_k, top_p)
            x = int(rng.choice(width, p=q))
        drafts.append(x)
        qs.append(q)
        feed = [x]
    return drafts, qs, d_len


def _verify(rows, drafts, qs, t, top_k, top_p, rng) -> tuple[int, int]:
    """(accepted drafts j, the token emitted after them) from the target's k + 1 logit rows."""
    if t == 0:
        for j, x in enumerate(drafts):
            best = greedy_token(rows[j])
            if x != best:
                return j, best
        return len(drafts), greedy_token(rows[len(drafts)])
    rows = rows.cpu().numpy()
    return verify(LazyRows(lambda j: process_logits(rows[j], t, top_k, top_p)), qs, drafts, rng)


def speculative_generate(target, draft, input_ids, k, max_new_tokens, temperature=0.0,
                         top_k=None, top_p=None, rng=None, crop_caches=True, vocab_size=None,
                         eos_token_id=None, static_len=None) -> Generation:
    """Draft-target decoding with both KV caches; the output is distributed as the target's.

    Invariant between rounds: the target cache holds every token but the last, the draft cache
    a prefix of that (it lacks the last draft after a fully accepted round). ``crop_caches=False``
    is the defect "model/kv-cache-not-cropped": the bookkeeping stays right but rejected drafts
    stay in the caches.
    """
    torch, _ = torch_modules()
    k = check_k(k)
    t, top_k, top_p = check_sampling(temperature, top_k, top_p)
    n_new = _check_new_tokens(max_new_tokens)
    ids = _prompt_list(input_ids)
    n_prompt, rng = len(ids), _rng(rng)
    width = min(_width(target, vocab_size), _width(draft, vocab_size))
    stats = DecodeStats()
    t_cache, d_cache = new_cache(target, static_len), new_cache(draft, static_len)
    with torch.no_grad():
        _sync(target)
        start = time.perf_counter()
        t_len = d_len = 0
        if len(ids) > 1:
            forward(target, ids[:-1], t_cache)
            forward(draft, ids[:-1], d_cache)
            t_len = d_len = len(ids) - 1
        while len(ids) - n_prompt < n_new and (eos_token_id is None or eos_token_id not in ids[n_prompt:]):
            drafts, qs, d_len = _draft_round(draft, ids, d_len, d_cache, k, width, t, top_k, top_p, rng)
            rows = forward(target, ids[t_len:] + drafts, t_cache)[-(k + 1):, :width]
            j, token = _verify(rows, drafts, qs, t, top_k, top_p, rng)
            ids += drafts[:j] + [token]
            t_len, d_len = len(ids) - 1, min(d_len, len(ids) - 1)
            if crop_caches:
                crop_to(t_cache, t_len)
                crop_to(d_cache, d_len)
            stats.rounds += 1
            stats.drafted += k
            stats.accepted += j
            stats.rejections += j < k
            stats.emitted += j + 1
        _sync(target)
        stats.wall_s = time.perf_counter() - start
    ids = ids[: n_prompt + n_new]
    if eos_token_id is not None and eos_token_id in ids[n_prompt:]:
        ids = ids[: ids.index(eos_token_id, n_prompt) + 1]
    return Generation(ids, n_prompt, stats)


# ---------------------------------------------------------------------------- greedy comparison


def teacher_forced_logits(model, ids, vocab_size=None) -> np.ndarray:
    """float32 logits [len(ids), width] of one uncached forward; row i predicts ids[i + 1]."""
    torch, _ = torch_modules()
    ids = _prompt_list(ids)
    width = _width(model, vocab_size)
    with torch.no_grad():
        x = torch.tensor([ids], dtype=torch.long, device=model.device)
        return model(input_ids=x).logits[0, :, :width].float().cpu().numpy()


def compare_greedy(spec_ids, ref_ids, target_logits, n_prompt=0, rel_margin=1e-3,
                   abs_margin=1e-3) -> dict:
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
        return {"kind": kind, "position": None if kind == "identical" else min(len(spec), len(ref)),
                "gap": None, "margin": None}
    row = logits[first - 1]
    top = float(row.max())
    gap = top - float(row[spec[first]])
    margin = max(abs_margin, rel_margin * abs(top))
    kind = "near-tie" if gap <= margin else "mismatch"
    return {"kind": kind, "position": first, "gap": gap, "margin": margin,
            "spec_token": spec[first], "ref_token": ref[first]}


# ---------------------------------------------------------------------------- teacher forcing


def teacher_forced_pairs(target, draft, ids, n_prompt, temperature=1.0, top_k=None, top_p=None,
                         vocab_size=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(p, q) float64 vectors, identically processed, at each generated position of ``ids``."""
    if not 1 <= n_prompt < len(_prompt_list(ids)):
        raise ValueError(f"n_prompt: must lie in 1..len(ids) - 1, got {n_prompt}")
    width = min(_width(target, vocab_size), _width(draft, vocab_size))
    p_rows = teacher_forced_logits(target, ids, width)[n_prompt - 1:-1]
    q_rows = teacher_forced_logits(draft, ids, width)[n_prompt - 1:-1]
    return [(process_logits(p, temperature, top_k, top_p), process_logits(q, temperature, top_k, top_p))
            for p, q in zip(p_rows, q_rows)]


def alpha_per_position(target, draft, ids, n_prompt, temperature=1.0, top_k=None, top_p=None,
                       vocab_size=None) -> np.ndarray:
    """sum_x min(p_t(x), q_t(x)) at each generated position of ``ids`` (the handout's function).

    At temperature 0 the acceptance is an indicator: 1.0 where the draft's argmax equals the
    target's, else 0.0.
    """
    t, _, _ = check_sampling(temperature, top_k, top_p)
    if t == 0:
        width = min(_width(target, vocab_size), _width(draft, vocab_size))
        p_rows = teacher_forced_logits(target, ids, width)[n_prompt - 1:-1]
        q_rows = teacher_forced_logits(draft, ids, width)[n_prompt - 1:-1]
        return (p_rows.argmax(-1) == q_rows.argmax(-1)).astype(np.float64)
    pairs = teacher_forced_pairs(target, draft, ids, n_prompt, t, top_k, top_p, vocab_size)
    return np.array([np.minimum(p, q).sum() for p, q in pairs])


