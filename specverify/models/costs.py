"""What a round really costs on this machine, and the k that pays: the measured cost model.

The handout's speedup E[tokens] / (k c + 1) prices the target's verification of k + 1 positions
at one target step. That is the memory-bound GPU regime; on a CPU a forward over k + 1 positions
can cost several steps, and then the formula over-predicts (by 2.6x for the 0.5B/1.5B pair on a 2-core CPU:
docs/REAL_MODELS.md). So
the costs are measured, in seconds, on the context the generation will actually see:

- ``target_step_s``: the median of cached single-token target forwards (the unit);
- ``draft_step_s``: the same for the draft model (c = draft_step_s / target_step_s);
- ``verify_s[k]``: the median of cached target forwards over k + 1 new positions (v(k) =
  verify_s[k] / target_step_s, v(0) = 1);
- the prefill of a prompt by each model, per prompt token: a generation of n tokens pays it
  once, and the draft model's prefill is a cost target-only decoding does not have.

``theory.speedup_with_costs`` turns (alpha, k, c, v(k)) into a speedup, and ``KPolicy`` picks k
in 0..K before every round from a running alpha estimate, exactly as an engine that switches
speculation off when it cannot pay (vLLM's ``speculative_disable_by_batch_size``, SGLang's
"disable when not beneficial"; cf. the dynamic speculation lookahead of Mamou et al.,
arXiv 2405.04304). The choice depends on past rounds only, so each round is exact whatever k it
picked (see ``specverify.samplers.adaptive``, whose ``AdaptiveK`` is the same policy on the
round interface with v = 1).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from ..common.validation import check_alpha, check_k
from ..laws import theory
from . import model_calls
from .loading import torch_modules


@dataclass
class StepCosts:
    """Measured seconds: target and draft single steps, target forwards over k + 1 positions."""

    target_step_s: float
    draft_step_s: float
    verify_s: tuple[float, ...]  # verify_s[k] for k = 0..K; verify_s[0] is a single step
    prefill_target_s_per_token: float = 0.0  # a prompt's prefill, per prompt token
    prefill_draft_s_per_token: float = 0.0

    @property
    def c(self) -> float:
        return self.draft_step_s / self.target_step_s

    @property
    def v(self) -> tuple[float, ...]:
        """v(k) in target steps, k = 0..K."""
        return tuple(s / self.target_step_s for s in self.verify_s)

    def speedup(self, alpha: float, k: int, draft_free: bool = False) -> float:
        """Modelled speedup of k drafts per round (``draft_free``: no draft model, c = 0)."""
        c = 0.0 if draft_free else self.c
        return theory.speedup_with_costs(alpha, k, c, self.v[k])

    def best_k(self, alpha: float, max_k: int | None = None, draft_free: bool = False) -> int:
        v = self.v if max_k is None else self.v[: check_k(max_k, "max_k") + 1]
        return theory.best_k_with_costs(alpha, 0.0 if draft_free else self.c, v)

    def prefill_steps(self, n_tokens: int, draft: bool = True) -> float:
        """Prefill of an n-token prompt, by the target (and the draft), in target steps."""
        per_token = self.prefill_target_s_per_token + (self.prefill_draft_s_per_token if draft else 0.0)
        return n_tokens * per_token / self.target_step_s

    def as_dict(self) -> dict:
        return {
            "target_step_s": self.target_step_s,
            "draft_step_s": self.draft_step_s,
            "c": self.c,
            "v": list(self.v),
            "prefill_target_s_per_token": self.prefill_target_s_per_token,
            "prefill_draft_s_per_token": self.prefill_draft_s_per_token,
        }


def _timed_forward_s(model, cache, base: int, feed: list[int]) -> float:
    """Seconds of one cached forward of ``feed``, after which the cache is cropped back to ``base``."""
    model_calls.synchronize(model)
    start = time.perf_counter()
    model_calls.forward(model, feed, cache, keep=len(feed))
    model_calls.synchronize(model)
    elapsed = time.perf_counter() - start
    model_calls.crop_to(cache, base)
    return elapsed


def measure_step_costs(target, draft, ids: list[int], max_k: int, repeats: int = 20, warmup: int = 2) -> StepCosts:
    """Time single steps of both models and target forwards over 2..max_k + 1 positions after ``ids``.

    The forwards are interleaved (each repeat times every size once, so load on a shared machine
    hits them alike) and each cost is a median. A forward over more positions cannot be cheaper
    than one over fewer, so v is made non-decreasing (a running maximum) against timing noise.
    ``draft`` may be None (a drafter without a model): its step then costs 0.
    """
    torch, _ = torch_modules()
    max_k = check_k(max_k, "max_k")
    repeats = check_k(repeats, "repeats")
    models = [target] + ([] if draft is None else [draft])
    caches = [model_calls.new_cache(m) for m in models]
    sizes = [(0, n) for n in range(1, max_k + 2)] + ([(1, 1)] if draft is not None else [])
    times = {size: [] for size in sizes}
    with torch.no_grad():
        for model, cache in zip(models, caches):
            model_calls.forward(model, ids, cache, keep=1)
        base = model_calls.cache_length(caches[0])
        for i in range(warmup + repeats):
            for which, n in sizes:
                elapsed = _timed_forward_s(models[which], caches[which], base, [ids[-1]] * n)
                if i >= warmup:
                    times[(which, n)].append(elapsed)
    verify = np.maximum.accumulate([statistics.median(times[(0, n)]) for n in range(1, max_k + 2)])
    draft_s = 0.0 if draft is None else statistics.median(times[(1, 1)])
    prefill = [_prefill_s(m, ids) / len(ids) for m in models]
    return StepCosts(
        float(verify[0]), draft_s, tuple(float(v) for v in verify), prefill[0], prefill[1] if draft is not None else 0.0
    )


def _prefill_s(model, ids: list[int], repeats: int = 3) -> float:
    """Median seconds of prefilling ``ids`` into an empty cache (last logit row only)."""
    torch, _ = torch_modules()
    times = []
    with torch.no_grad():
        for i in range(repeats + 1):  # the first is a warm-up
            cache = model_calls.new_cache(model)
            model_calls.synchronize(model)
            start = time.perf_counter()
            model_calls.forward(model, ids, cache, keep=1)
            model_calls.synchronize(model)
            if i:
                times.append(time.perf_counter() - start)
    return statistics.median(times)


@dataclass
class KPolicy:
    """Chooses each round's k in 0..K from the measured costs and a running estimate of alpha.

    alpha_hat starts at ``alpha0`` (the predicted alpha, or a prior) and moves by ``smoothing``
    towards each verified draft's outcome (1 accepted, 0 rejected: the i.i.d. acceptance model of
    Leviathan et al., arXiv 2211.17192). With ``learn_costs`` the draft-step and verification
    times are running averages too, updated from every round's timings. When the best k is 0,
    every ``probe_every``-th round drafts anyway (at the best k >= 1) so that alpha_hat can
    still change. ``draft_free`` prices drafts at 0 (prompt lookup). ``chosen`` records the ks.
    """

    costs: StepCosts
    alpha0: float = 0.7
    smoothing: float = 0.1
    probe_every: int = 16
    learn_costs: bool = False
    draft_free: bool = False
    chosen: list = field(default_factory=list)

    def __post_init__(self):
        self.alpha_hat = check_alpha(self.alpha0, "alpha0")
        if not 0.0 < self.smoothing <= 1.0:
            raise ValueError(f"smoothing: must lie in (0, 1], got {self.smoothing!r}")
        self.probe_every = check_k(self.probe_every, "probe_every")
        self._idle = 0
        self._draft_s = self.costs.draft_step_s
        self._verify_s = list(self.costs.verify_s)

    def current_costs(self) -> StepCosts:
        return StepCosts(self._verify_s[0], self._draft_s, tuple(self._verify_s))

    def choose(self, max_k: int) -> int:
        max_k = min(check_k(max_k, "max_k"), len(self._verify_s) - 1)
        k = self.current_costs().best_k(self.alpha_hat, max_k, self.draft_free)
        if k == 0:
            self._idle += 1
            if self._idle >= self.probe_every:
                self._idle = 0
                v = self.current_costs()
                k = max(range(1, max_k + 1), key=lambda j: v.speedup(self.alpha_hat, j, self.draft_free))
        self.chosen.append(k)
        return k

    def observe(self, drafted: int, accepted: int, draft_s: float, verify_s: float) -> None:
        """Fold one round's outcome (and, with ``learn_costs``, its timings) into the estimates."""
        rejected = 1 if accepted < drafted else 0
        for hit in [1.0] * accepted + [0.0] * rejected:
            self.alpha_hat += self.smoothing * (hit - self.alpha_hat)
        if not self.learn_costs:
            return
        if drafted and draft_s > 0 and not self.draft_free:
            self._draft_s += self.smoothing * (draft_s / drafted - self._draft_s)
        if drafted < len(self._verify_s):
            self._verify_s[drafted] += self.smoothing * (verify_s - self._verify_s[drafted])
