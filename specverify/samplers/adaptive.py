"""Adaptive draft length: stop drafting on low draft confidence, or pick k from running estimates.

(a) ``confidence_step``, in the spirit of SpecDec++ (Huang et al., arXiv 2405.19715), which
    stops drafting when a head on the draft model predicts a likely rejection. Here the
    prediction is the draft's own confidence: after the first draft, drafting stops as soon as
    max(q) at the next position falls below ``threshold`` (at least 1 draft, at most k). The
    drafts are then verified with the single-chain rule, and a bonus token from p follows when
    all of them are accepted.
    Why it stays exact: whether position i + 1 is drafted is a function of q at the prefix plus
    the drafts x_1..x_i, i.e. of tokens that are already accepted when position i + 1 is
    verified. At every position the emitted token is therefore either a standard rejection
    sample (drafted) or a plain sample from p (bonus), both distributed as p. A rule that looks
    at p(x_{i+1}), the target's verdict on the next draft, is not of this kind and is biased
    (mutant ``adaptive/stop-peeks-at-target`` in specverify/mutants/multi_draft.py).

(b) ``AdaptiveK``: before each round, k = theory.best_k(alpha_hat, c_hat, max_k) from running
    estimates (the handout's "adaptive gamma" stretch goal; cf. the dynamic speculation lookahead
    of Mamou et al., arXiv 2405.04304). alpha_hat is an exponential moving average of the
    accept/reject outcome of every verified draft (the i.i.d.-acceptance model of
    Leviathan et al., arXiv 2211.17192); c_hat is the cost ratio given at construction and
    updated by ``observe_cost`` when the engine measures step times. The round itself is the
    reference chain round, and k is fixed before the round from past rounds only, so every round
    is exact whatever k it picked.

``verify_drafts`` is the chain rule's verification loop for drafts drawn elsewhere (it is what
``speculative_step`` in chain.py does after drafting); prompt lookup reuses it.
"""

from __future__ import annotations

import functools
import numbers
from collections import OrderedDict
from collections.abc import Sequence

from ..common.validation import check_alpha, check_cost_ratio, check_k
from ..laws.arrays import DistFn, Vector
from ..laws.theory import best_k
from .chain import Rng, model_output, sample, speculative_step, verify_drafts
from .registry import register


def check_threshold(threshold: object) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
        raise ValueError(f"threshold: must be a number in [0, 1], got {threshold!r}")
    if not 0.0 <= float(threshold) <= 1.0:
        raise ValueError(f"threshold: must lie in [0, 1], got {threshold!r}")
    return float(threshold)


def confidence_drafts(
    q_fn: DistFn, prefix: tuple[int, ...], k: int, rng: Rng, threshold: float
) -> tuple[list[int], list[Vector]]:
    """Draft from q until k drafts or until max(q) at the next position is below threshold."""
    drafts: list[int] = []
    qs: list[Vector] = []
    for i in range(k):
        q = model_output("q_fn", q_fn, prefix + tuple(drafts))
        if i > 0 and q.max() < threshold:
            break
        drafts.append(sample(q, rng))
        qs.append(q)
    return drafts, qs


def confidence_step(
    p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng, *, threshold: float = 0.5
) -> list[int]:
    """One round that drafts 1 to k tokens, stopping early when the draft is unsure."""
    max_k, bar = check_k(k), check_threshold(threshold)
    start = tuple(prefix)
    drafts, qs = confidence_drafts(q_fn, start, max_k, rng, bar)
    return verify_drafts(p_fn, start, drafts, qs, rng)


class AdaptiveK:
    """A chain sampler that picks k each round with ``theory.best_k`` from running estimates.

    Stateful. The estimates travel with the sequence: after a round from prefix P that emitted
    T, the updated estimates are stored under P + T, and the next call from P + T starts from
    them; a prefix this instance did not produce starts from the prior (``alpha0``,
    ``cost_ratio``). This keeps k a function of the sequence's own past rounds, so the instance
    can serve several sequences at once, and replaying a round from the same prefix (as the
    exact enumerator does) makes the same choice of k. At most ``max_sequences`` states are
    kept (least recently used dropped). The ``k`` argument of ``__call__`` is the largest k
    allowed.
    """

    def __init__(
        self,
        alpha0: float = 0.7,
        cost_ratio: float = 0.05,
        smoothing: object = 0.1,  # a number in (0, 1], checked here
        max_sequences: int = 4096,
    ) -> None:
        self.alpha0 = check_alpha(alpha0, "alpha0")
        self.cost_ratio = check_cost_ratio(cost_ratio)
        if isinstance(smoothing, bool) or not isinstance(smoothing, numbers.Real):
            raise ValueError(f"smoothing: must be a number in (0, 1], got {smoothing!r}")
        if not 0.0 < float(smoothing) <= 1.0:
            raise ValueError(f"smoothing: must lie in (0, 1], got {smoothing!r}")
        self.smoothing = float(smoothing)
        self.max_sequences = check_k(max_sequences, "max_sequences")
        self._states: OrderedDict[tuple[int, ...], tuple[float, float]] = OrderedDict()

    def estimates(self, prefix: Sequence[int]) -> tuple[float, float]:
        """(alpha_hat, c_hat) a round from ``prefix`` would use."""
        return self._states.get(tuple(prefix), (self.alpha0, self.cost_ratio))

    def choose_k(self, prefix: Sequence[int], max_k: int) -> int:
        alpha_hat, c_hat = self.estimates(prefix)
        return best_k(alpha_hat, c_hat, max_k=max_k)

    def observe_cost(self, prefix: Sequence[int], cost_ratio: float) -> None:
        """Fold a measured draft/target step-time ratio into the sequence's estimate at prefix."""
        alpha_hat, c_hat = self.estimates(prefix)
        c = check_cost_ratio(cost_ratio)
        self._store(tuple(prefix), alpha_hat, c_hat + self.smoothing * (c - c_hat))

    def __call__(self, p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng) -> list[int]:
        max_k = check_k(k)
        start = tuple(prefix)
        alpha_hat, c_hat = self.estimates(start)
        k_round = best_k(alpha_hat, c_hat, max_k=max_k)
        tokens = speculative_step(p_fn, q_fn, start, k_round, rng)
        accepted = len(tokens) - 1
        rejected = 1 if accepted < k_round else 0
        outcomes = [1.0] * accepted + [0.0] * rejected
        for hit in outcomes:  # EMA over every verified draft
            alpha_hat += self.smoothing * (hit - alpha_hat)
        self._store(start + tuple(tokens), alpha_hat, c_hat)
        return tokens

    def _store(self, key: tuple[int, ...], alpha_hat: float, c_hat: float) -> None:
        self._states[key] = (alpha_hat, c_hat)
        self._states.move_to_end(key)
        while len(self._states) > self.max_sequences:
            self._states.popitem(last=False)


register("adaptive-confidence", functools.partial(confidence_step, threshold=0.5))
register("adaptive-k", AdaptiveK())
