"""The mutant catalogue: speculative samplers that each differ from the reference in one defect.

Every entry is a sampler with the handout's signature ``fn(p_fn, q_fn, prefix, k, rng) ->
list[int]`` that reads as "``specverify.samplers.chain.speculative_step`` but X": it reuses the
reference's helpers (``model_output``, ``draft``, ``accepts``, ``recover``, ``sample``,
``residual``) and changes one thing.
The detectors are judged by which mutants they kill; the negative controls (``CONTROLS``) are
samplers that look wrong but are exact, and must never be flagged.

Effects:
  biased        the output distribution differs from the target's (what the distribution
                detectors must find; some biases are tiny on purpose, e.g. a float16 draft);
  contract      the round breaks the sampler contract (1 to k + 1 ints in range) or raises on
                read-only model outputs;
  fewer-tokens  exact in distribution but fewer tokens per round than theory (no bonus token):
                the distribution detectors must pass it, the tokens-per-round detector must not;
  edge          exact in law, wrong on an edge the law does not weigh (kernels: a float32 grid
                point such as u = 0, a drafted token with q(x) = 0, an empty residual): the
                kernel battery's edge checks must report it, the law checks must pass it;
  exact         negative controls.

All randomness goes through ``rng.choice(n, p=vec)`` and comparisons of ``rng.random()`` with
numbers (``u < t``, ``u > t``, ``u * c < t``), so ``specverify.laws.exact`` can enumerate every entry.
No entry writes into an array a model returned, except ``residual/in-place``, whose whole defect
is that write.

References (``Mutant.reference``): the handout (lab 14, "§5" is its bug table), papers by arXiv id
(Leviathan et al. 2211.17192 and Chen et al. 2302.01318 for the rule; SpecInfer 2305.09781;
Medusa 2401.10774), and public engine issues/PRs in the form ``owner/repo#number``, cited only
where the thread describes the same class of defect. ``None`` means no public report was found.

It is over 600 lines because the catalogue is read as one list: 40 entries (34 mutants, 6 controls)
of a few lines each, every one "the reference but X" built on the same private helpers
(``round_with``, ``_recover``, ``_bonus``, ``_draft_processed``, ``_peeking_drafter``), and the
``MUTANTS`` and ``CONTROLS`` tables that name, classify and cite them sit beside the functions they
list. A module per defect family would make those helpers public and put a table's entries away
from their code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from scipy.stats import entropy

from ..common.validation import check_k, check_same_length
from ..laws.processing import keep_top_k, keep_top_p, temper
from ..samplers import get_sampler
from ..samplers.chain import (
    LazyRows,
    accepts,
    draft,
    model_output,
    recover,
    residual,
    sample,
    speculative_step,
    verify_drafts,
    verify_with,
)
from ..samplers.prompt_lookup import one_hot

EFFECTS = ("biased", "contract", "fewer-tokens", "edge", "exact")
SOURCES = ("handout", "real-world", "specverify")
INTERFACES = (
    "round",
    "loop",
    "kernel",
)  # round: fn(p_fn, q_fn, prefix, k, rng); loop: specverify.laws.requests's generate; kernel: specverify.interfaces.kernel.battery
_ID_PATTERN = re.compile(r"^[a-z0-9-]+/[a-z0-9-]+$")

DRAFT_TEMPERATURE = 0.7  # draft/temperature-draft-only
DRAFT_TOP_K = 2  # draft/top-k-draft-only
DRAFT_TOP_P = 0.65  # draft/top-p-draft-only
PEEK_THRESHOLD = 0.25  # draft-length/*: stop drafting when p(x) of the drafted token is below this
TYPICAL_EPSILON, TYPICAL_DELTA = 0.09, 0.3  # Medusa's posterior_threshold, posterior_alpha


@dataclass(frozen=True)
class Mutant:
    id: str  # "family/defect"
    description: str  # one line
    effect: str  # one of EFFECTS
    fn: Callable
    reference: str | None = None  # handout section, arXiv id or owner/repo#number
    source: str = "specverify"  # one of SOURCES
    interface: str = "round"  # one of INTERFACES: fn is a round sampler or a whole loop (generate)
    own_reference: Callable | None = None  # the engine's own target-only path, passed as the reference

    def __post_init__(self):
        if not _ID_PATTERN.match(self.id):
            raise ValueError(f"id: {self.id!r} is not of the form 'family/defect' ([a-z0-9-])")
        if self.effect not in EFFECTS:
            raise ValueError(f"effect: {self.effect!r} for {self.id} is not one of {EFFECTS}")
        if self.source not in SOURCES:
            raise ValueError(f"source: {self.source!r} for {self.id} is not one of {SOURCES}")
        if self.interface not in INTERFACES:
            raise ValueError(f"interface: {self.interface!r} for {self.id} is not one of {INTERFACES}")
        if not callable(self.fn):
            raise ValueError(f"fn: {self.id} has a non-callable fn")


# ----------------------------------------------------------------------------------------------
# The reference with hooks: each default is the rule's own piece from samplers.chain (accepts,
# recover, sample) and the walk is chain.verify_with, so a mutant that swaps one hook differs from
# speculative_step in exactly that piece. Hooks return lists of tokens, so a mutant can also emit none or two.


def _target_prefix(prefix: tuple, drafts: list, i: int) -> tuple:
    return prefix + tuple(drafts[:i])


def _recover(p, q, x, rng) -> list[int]:
    return [recover(p, q, rng)]


def _bonus(p_fn, prefix: tuple, drafts: list, rng) -> list[int]:
    return [sample(model_output("p_fn", p_fn, prefix + tuple(drafts)), rng)]


def round_with(p_fn, q_fn, prefix, k, rng, *, drafter=draft, target_prefix=_target_prefix,
               accept=accepts, recover=_recover, bonus=_bonus) -> list[int]:  # fmt: skip
    """speculative_step with its steps as parameters (defaults: exactly the reference).

    The walk is ``samplers.chain.verify_with``, the one ``chain.verify`` runs: a mutant changes
    the pieces it is handed (the drafts, the target rows, the test, the token after a rejection
    or after k acceptances), never the walk."""
    k = check_k(k)
    prefix = tuple(prefix)
    drafts, qs = drafter(q_fn, prefix, k, rng)

    def row(i):
        p = model_output("p_fn", p_fn, target_prefix(prefix, drafts, i))
        check_same_length("p_fn output", p, "q_fn output", qs[i])
        return p

    j, tail = verify_with(
        LazyRows(row),
        qs,
        drafts,
        rng,
        accept=accept,
        reject=recover,
        bonus=lambda rng: bonus(p_fn, prefix, drafts, rng),
    )
    return drafts[:j] + tail


def _draft_processed(process: Callable) -> Callable:
    """A drafter that samples from process(q) but reports the unprocessed q for the ratio."""

    def drafter(q_fn, prefix, k, rng):
        drafts, qs = [], []
        for _ in range(k):
            q = model_output("q_fn", q_fn, prefix + tuple(drafts))
            drafts.append(sample(process(q), rng))
            qs.append(q)
        return drafts, qs

    return drafter


def _normalized(v: np.ndarray) -> np.ndarray:
    return v / v.sum()


def _float16(q: np.ndarray) -> np.ndarray:
    return _normalized(q.astype(np.float16).astype(np.float64))


def _greedy_drafter(one_hot_q: bool) -> Callable:
    """Drafts the argmax of q; reports the one-hot vector (exact) or the softmax q (the bug)."""

    def drafter(q_fn, prefix, k, rng):
        drafts, qs = [], []
        for _ in range(k):
            q = model_output("q_fn", q_fn, prefix + tuple(drafts))
            drafts.append(int(np.argmax(q)))
            qs.append(one_hot(drafts[-1], len(q)) if one_hot_q else q)
        return drafts, qs

    return drafter


def _peeking_drafter(p_fn, keep_low: bool) -> Callable:
    """Stops drafting once p(x) of the drafted token is below PEEK_THRESHOLD.

    Keeping that token (keep_low) is exact: whether position i + 1 gets a draft then depends only
    on drafts[: i + 1], which every verification at i + 1 is conditioned on. Dropping it is not:
    a draft survives only where p(x) >= threshold, so the kept drafts are no longer samples of q.
    """

    def drafter(q_fn, prefix, k, rng):
        drafts, qs = draft(q_fn, prefix, 1, rng)
        while True:
            p = model_output("p_fn", p_fn, prefix + tuple(drafts[:-1]))
            if p[drafts[-1]] < PEEK_THRESHOLD:
                return (drafts, qs) if keep_low else (drafts[:-1], qs[:-1])
            if len(drafts) == k:
                return drafts, qs
            more, more_qs = draft(q_fn, prefix + tuple(drafts), 1, rng)
            drafts, qs = drafts + more, qs + more_qs

    return drafter


# ----------------------------------------------------------------------------------------------
# Handout bugs (§5 table and "Common bugs")


def no_bonus_token(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, bonus=lambda p_fn, prefix, drafts, rng: [])


def resample_from_p(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, recover=lambda p, q, x, rng: [sample(p, rng)])


def continue_after_reject(p_fn, q_fn, prefix, k, rng):
    """Replaces a rejected draft by a residual sample and goes on verifying the later drafts."""
    k, prefix = check_k(k), tuple(prefix)
    drafts, qs = draft(q_fn, prefix, k, rng)
    out = []
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))
        out.append(x if accepts(p, q, x, rng) else recover(p, q, rng))
    return out + (_bonus(p_fn, prefix, drafts, rng) if out == drafts else [])


def inverted_ratio(p_fn, q_fn, prefix, k, rng):
    # u < min(1, q/p) written as u * p < q, so p(x) = 0 (ratio infinite) needs no division
    def accept(p, q, x, rng):
        return rng.random() * p[x] < q[x]

    return round_with(p_fn, q_fn, prefix, k, rng, accept=accept)


def greedy_check_while_sampling(p_fn, q_fn, prefix, k, rng):
    """Accepts while the draft is the target's argmax; emits the argmax on mismatch and as bonus."""
    return round_with(
        p_fn, q_fn, prefix, k, rng,
        accept=lambda p, q, x, rng: x == int(np.argmax(p)),
        recover=lambda p, q, x, rng: [int(np.argmax(p))],
        bonus=lambda p_fn, prefix, drafts, rng: [
            int(np.argmax(model_output("p_fn", p_fn, prefix + tuple(drafts))))
        ],
    )  # fmt: skip


def no_verification(p_fn, q_fn, prefix, k, rng):
    drafts, _ = draft(q_fn, tuple(prefix), check_k(k), rng)
    return drafts


def off_by_one_target(p_fn, q_fn, prefix, k, rng):
    def target_prefix(prefix, drafts, i):
        return prefix + tuple(drafts[: i + 1])

    return round_with(p_fn, q_fn, prefix, k, rng, target_prefix=target_prefix)


WINDOW = 16  # position/window-16: the target sees only this many trailing tokens


def window_16_target(p_fn, q_fn, prefix, k, rng):
    """The target sees only the last ``WINDOW`` tokens of its context (a sliding window, a cache
    that keeps the last W positions); exact while the context is shorter."""

    def target_prefix(prefix, drafts, i):
        return (prefix + tuple(drafts[:i]))[-WINDOW:]

    def bonus(p_fn, prefix, drafts, rng):
        return _bonus(p_fn, (prefix + tuple(drafts))[-WINDOW:], [], rng)

    return round_with(p_fn, q_fn, prefix, k, rng, target_prefix=target_prefix, bonus=bonus)


def bonus_row_at_k7(p_fn, q_fn, prefix, k, rng):
    """At k = 7 only, the bonus token is read from the last draft's row instead of the row after
    it (a branch specialised for one draft length); exact at every other k."""
    if k != 7:
        return round_with(p_fn, q_fn, prefix, k, rng)
    return round_with(
        p_fn, q_fn, prefix, k, rng, bonus=lambda p_fn, prefix, drafts, rng: _bonus(p_fn, prefix, drafts[:-1], rng)
    )


# ----------------------------------------------------------------------------------------------
# The uniform


def uniform_stuck_at_zero(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng,
                  accept=lambda p, q, x, rng: 0.0 < min(1.0, p[x] / q[x]))  # fmt: skip


def uniform_shared_across_positions(p_fn, q_fn, prefix, k, rng):
    shared = []

    def accept(p, q, x, rng):
        if not shared:
            shared.append(rng.random())
        return shared[0] < min(1.0, p[x] / q[x])

    return round_with(p_fn, q_fn, prefix, k, rng, accept=accept)


def uniform_reused_for_residual(p_fn, q_fn, prefix, k, rng):
    """The acceptance uniform u is reused as the inverse-CDF draw of the residual token."""
    last = []

    def accept(p, q, x, rng):
        last[:] = [rng.random()]
        return last[0] < min(1.0, p[x] / q[x])

    def recover(p, q, x, rng):
        r = residual(p, q)
        cdf = np.cumsum(r)
        for token in np.flatnonzero(r)[:-1]:
            if last[0] < cdf[token]:
                return [int(token)]
        return [int(np.flatnonzero(r)[-1])]

    return round_with(p_fn, q_fn, prefix, k, rng, accept=accept, recover=recover)


def compare_greater(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng,
                  accept=lambda p, q, x, rng: rng.random() > min(1.0, p[x] / q[x]))  # fmt: skip


def accept_with_p(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, accept=lambda p, q, x, rng: rng.random() < p[x])


# ----------------------------------------------------------------------------------------------
# The q in the ratio is not the distribution the draft was sampled from


def temperature_draft_only(p_fn, q_fn, prefix, k, rng):
    return round_with(
        p_fn, q_fn, prefix, k, rng, drafter=_draft_processed(partial(temper, temperature=DRAFT_TEMPERATURE))
    )


def top_k_draft_only(p_fn, q_fn, prefix, k, rng):
    return round_with(
        p_fn, q_fn, prefix, k, rng, drafter=_draft_processed(partial(keep_top_k, top_k=DRAFT_TOP_K, keep_ties=False))
    )


def top_p_draft_only(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, drafter=_draft_processed(partial(keep_top_p, top_p=DRAFT_TOP_P)))


def greedy_draft_softmax_q(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, drafter=_greedy_drafter(one_hot_q=False))


def low_precision_draft(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, drafter=_draft_processed(_float16))


# ----------------------------------------------------------------------------------------------
# The residual


def residual_not_clipped(p_fn, q_fn, prefix, k, rng):
    def recover(p, q, x, rng):
        return [sample(_normalized(np.abs(p - q)), rng)]

    return round_with(p_fn, q_fn, prefix, k, rng, recover=recover)


def residual_softmax(p_fn, q_fn, prefix, k, rng):
    """softmax(max(0, p - q)) instead of max(0, p - q) / sum: every token keeps some mass."""

    def recover(p, q, x, rng):
        e = np.exp(np.maximum(p - q, 0.0))
        return [sample(e / e.sum(), rng)]

    return round_with(p_fn, q_fn, prefix, k, rng, recover=recover)


def residual_unnormalized(p_fn, q_fn, prefix, k, rng):
    """Inverse CDF over the unnormalized max(0, p - q) with u ~ U(0, 1): the missing mass alpha
    falls through to the last vocabulary entry."""

    def recover(p, q, x, rng):
        u, cdf = rng.random(), np.cumsum(np.maximum(p - q, 0.0))
        for token in range(len(p) - 1):
            if u < cdf[token]:
                return [token]
        return [len(p) - 1]

    return round_with(p_fn, q_fn, prefix, k, rng, recover=recover)


def residual_swapped(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng,
                  recover=lambda p, q, x, rng: [sample(residual(q, p), rng)])  # fmt: skip


def residual_drafted_token_only(p_fn, q_fn, prefix, k, rng):
    """Subtracts q only at the drafted token: norm(max(0, p - q(x) e_x))."""

    def recover(p, q, x, rng):
        return [sample(residual(p, q[x] * one_hot(x, len(p))), rng)]

    return round_with(p_fn, q_fn, prefix, k, rng, recover=recover)


def residual_in_place(p_fn, q_fn, prefix, k, rng):
    """Builds the residual inside the array p_fn returned (p -= q): raises on read-only model
    outputs, and silently corrupts a model that caches and reuses its output arrays."""
    k, prefix = check_k(k), tuple(prefix)
    drafts, qs = draft(q_fn, prefix, k, rng)
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = p_fn(prefix + tuple(drafts[:i]))  # the model's own array, not model_output's copy
        if not accepts(p, q, x, rng):
            p -= q
            np.maximum(p, 0.0, out=p)
            p /= p.sum()
            return drafts[:i] + [sample(p, rng)]
    return drafts + _bonus(p_fn, prefix, drafts, rng)


def residual_next_position_p(p_fn, q_fn, prefix, k, rng):
    """Gathers the recovery row one position late from the k + 1 target rows of the pass."""
    k, prefix = check_k(k), tuple(prefix)
    drafts, qs = draft(q_fn, prefix, k, rng)
    ps = [model_output("p_fn", p_fn, prefix + tuple(drafts[:i])) for i in range(k + 1)]
    for i, (x, q) in enumerate(zip(drafts, qs)):
        if not accepts(ps[i], q, x, rng):
            return drafts[:i] + [sample(residual(ps[i + 1], q), rng)]
    return drafts + [sample(ps[k], rng)]


# ----------------------------------------------------------------------------------------------
# The bonus token


def bonus_wrong_position(p_fn, q_fn, prefix, k, rng):
    def bonus(p_fn, prefix, drafts, rng):
        return _bonus(p_fn, prefix, drafts[:-1], rng)

    return round_with(p_fn, q_fn, prefix, k, rng, bonus=bonus)


def bonus_after_rejection(p_fn, q_fn, prefix, k, rng):
    """Also appends the bonus row's sample (conditioned on all k drafts) after a rejection."""
    k, prefix = check_k(k), tuple(prefix)
    drafts, qs = draft(q_fn, prefix, k, rng)
    out = verify_drafts(p_fn, prefix, drafts, qs, rng)
    return out + (_bonus(p_fn, prefix, drafts, rng) if len(out) <= k else [])


# ----------------------------------------------------------------------------------------------
# Multi-candidate verification, draft-length policies, lossy acceptance


def peek_target_drop_draft(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, drafter=_peeking_drafter(p_fn, keep_low=False))


def typical_acceptance(p_fn, q_fn, prefix, k, rng):
    """Medusa's rule: accept x when p(x) > min(eps, delta * exp(-H(p))); else emit a sample of p."""

    def accept(p, q, x, rng):
        return p[x] > min(TYPICAL_EPSILON, TYPICAL_DELTA * np.exp(-entropy(p)))

    return round_with(p_fn, q_fn, prefix, k, rng, accept=accept,
                  recover=lambda p, q, x, rng: [sample(p, rng)])  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Contract breaches


def extra_bonus_token(p_fn, q_fn, prefix, k, rng):
    """Samples the bonus row twice when all k drafts are accepted: k + 2 tokens."""

    def bonus(p_fn, prefix, drafts, rng):
        return 2 * _bonus(p_fn, prefix, drafts, rng)

    return round_with(p_fn, q_fn, prefix, k, rng, bonus=bonus)


def float_array(p_fn, q_fn, prefix, k, rng):
    return np.asarray(speculative_step(p_fn, q_fn, prefix, k, rng), dtype=np.float64)


def placeholder_padding(p_fn, q_fn, prefix, k, rng):
    """Returns the engine's fixed-shape row: k + 1 slots, -1 after the last emitted token."""
    out = speculative_step(p_fn, q_fn, prefix, k, rng)
    return out + [-1] * (check_k(k) + 1 - len(out))


def no_correction_token(p_fn, q_fn, prefix, k, rng):
    """Returns only the accepted drafts: an empty round when the first draft is rejected."""
    return round_with(p_fn, q_fn, prefix, k, rng, recover=lambda p, q, x, rng: [])


# ----------------------------------------------------------------------------------------------
# Negative controls: they look wrong and are exact


def match_target_sample(p_fn, q_fn, prefix, k, rng):
    """Accepts x ~ q only if an independent y ~ p equals it; on a mismatch emits y and stops.
    P(z) = q(z) p(z) + p(z) (1 - q(z)) = p(z)."""

    def accept_or_keep_y(p, q, x, rng):
        y = sample(p, rng)
        if y != x:
            mismatch.append(y)
        return y == x

    mismatch = []
    return round_with(p_fn, q_fn, prefix, k, rng, accept=accept_or_keep_y,
                  recover=lambda p, q, x, rng: [mismatch[-1]])  # fmt: skip


def unknown_draft_probs(p_fn, q_fn, prefix, k, rng):
    """No draft probabilities: accept with p(x), on rejection sample p with x removed. This is
    the reference rule for q = one-hot(x), exact for drafts from any proposal."""

    def as_one_hot(p, q, x):
        return one_hot(x, len(p))

    return round_with(
        p_fn, q_fn, prefix, k, rng,
        accept=lambda p, q, x, rng: accepts(p, as_one_hot(p, q, x), x, rng),
        recover=lambda p, q, x, rng: _recover(p, as_one_hot(p, q, x), x, rng),
    )  # fmt: skip


def greedy_draft_one_hot_q(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, drafter=_greedy_drafter(one_hot_q=True))


def product_form_acceptance(p_fn, q_fn, prefix, k, rng):
    def accept(p, q, x, rng):
        return rng.random() * q[x] < p[x]

    return round_with(p_fn, q_fn, prefix, k, rng, accept=accept)


def peek_target_keep_draft(p_fn, q_fn, prefix, k, rng):
    return round_with(p_fn, q_fn, prefix, k, rng, drafter=_peeking_drafter(p_fn, keep_low=True))


# ----------------------------------------------------------------------------------------------
# The catalogue

_H, _R, _S = "handout", "real-world", "specverify"
_LEVIATHAN = "arXiv 2211.17192"

MUTANTS: tuple[Mutant, ...] = (
    # handout
    Mutant("bonus/no-bonus-token", "no bonus token after k accepted drafts (exact in "
           "distribution; a negative control for the distribution detectors only)",
           "fewer-tokens", no_bonus_token, "handout §5; ohdearquant/lattice#509", _H),
    Mutant("rejection/resample-from-p", "on rejection resample from p instead of the residual",
           "biased", resample_from_p, "handout §5; ShopeeLLM/Spec-RL#14", _H),
    Mutant("rejection/continue-after-reject", "keep verifying later drafts after a rejection",
           "biased", continue_after_reject, "handout §5", _H),
    Mutant("ratio/inverted", "accept with min(1, q(x)/p(x)) instead of min(1, p(x)/q(x))",
           "biased", inverted_ratio, "handout §5", _H),
    Mutant("verify/greedy-argmax", "accept while the draft equals the target's argmax, at "
           "temperature > 0", "biased", greedy_check_while_sampling,
           "handout §4-5; lablup/mlxcel#902", _H),
    Mutant("verify/no-verification", "emit the k drafts unverified", "biased", no_verification,
           "handout §5", _H),
    Mutant("position/off-by-one-target", "target for draft i is p_fn(prefix + drafts[:i+1])",
           "biased", off_by_one_target, "handout, Common bugs; mlx-node/mlx-node#11", _H),
    Mutant("position/window-16", "the target sees only the last 16 tokens of its context (a "
           "sliding window): exact on shorter contexts", "biased", window_16_target, None, _S),
    Mutant("bonus/wrong-row-at-k7", "at k = 7 only, the bonus token is sampled from the last "
           "draft's row: exact at every other k", "biased", bonus_row_at_k7, _LEVIATHAN, _S),
    # the uniform
    Mutant("uniform/stuck-at-zero", "the acceptance uniform is always 0: every draft with "
           "p(x) > 0 is accepted", "biased", uniform_stuck_at_zero, None, _S),
    Mutant("uniform/shared-across-positions", "one uniform per round compared at every "
           "position", "biased", uniform_shared_across_positions, None, _S),
    Mutant("uniform/reused-for-residual", "the acceptance uniform is reused to sample the "
           "residual token (inverse CDF)", "biased", uniform_reused_for_residual,
           "vllm-project/vllm-ascend#16370", _R),
    Mutant("uniform/compare-greater", "accept when u > min(1, p/q): acceptance probability "
           "1 - ratio", "biased", compare_greater, None, _S),
    Mutant("ratio/accept-with-p", "accept with probability p(x) while the residual still "
           "subtracts q", "biased", accept_with_p, None, _S),
    # q is not the distribution the draft came from
    Mutant("draft/temperature-draft-only", f"draft sampled from q^(1/{DRAFT_TEMPERATURE}) "
           "renormalized, ratio uses q", "biased", temperature_draft_only,
           "handout §4; vllm-project/vllm#10198", _R),
    Mutant("draft/top-k-draft-only", f"draft sampled from the top-{DRAFT_TOP_K} of q "
           "renormalized, ratio uses the full q", "biased", top_k_draft_only,
           "huggingface/transformers#47932", _R),
    Mutant("draft/top-p-draft-only", f"draft sampled from the top-p={DRAFT_TOP_P} nucleus of q, "
           "ratio uses the full q", "biased", top_p_draft_only,
           "huggingface/transformers#47932", _R),
    Mutant("draft/greedy-softmax-q", "drafter takes argmax(q) but the ratio uses its softmax q",
           "biased", greedy_draft_softmax_q,
           "huggingface/transformers#32867; jaymody/speculative-sampling#3", _R),
    Mutant("draft/low-precision", "draft sampled from q rounded to float16, ratio uses the "
           "float64 q (tiny bias: only exact enumeration sees it)", "biased",
           low_precision_draft, "deepseek-ai/DeepSpec#31", _R),
    # the residual
    Mutant("residual/not-clipped", "residual norm(|p - q|): negative differences kept as mass",
           "biased", residual_not_clipped, None, _S),
    Mutant("residual/softmax-normalized", "residual softmax(max(0, p - q)) instead of "
           "max(0, p - q) / sum", "biased", residual_softmax,
           "huggingface/transformers#28508", _R),
    Mutant("residual/unnormalized", "inverse CDF over the unnormalized max(0, p - q); the "
           "missing mass lands on the last token", "biased", residual_unnormalized, None, _S),
    Mutant("residual/swapped", "residual norm(max(0, q - p))", "biased", residual_swapped,
           None, _S),
    Mutant("residual/drafted-token-only", "residual subtracts q only at the drafted token",
           "biased", residual_drafted_token_only, "xLLM-AI/xllm#2175", _R),
    Mutant("residual/in-place", "residual built in place in the array p_fn returned; raises "
           "on read-only outputs, corrupts caching models", "contract", residual_in_place,
           "vllm-project/vllm-ascend#9772", _R),
    Mutant("residual/next-position-p", "recovery uses the target row of the next position",
           "biased", residual_next_position_p, None, _S),
    # the bonus token
    Mutant("bonus/wrong-position", "bonus sampled from p_fn(prefix + drafts[:-1])", "biased",
           bonus_wrong_position, None, _S),
    Mutant("bonus/after-rejection", "bonus row also sampled after a rejection", "biased",
           bonus_after_rejection, None, _S),
    # multi-candidate, draft length, lossy acceptance
    Mutant("draft-length/peek-target-drop", f"stop drafting when p(x) < {PEEK_THRESHOLD} and "
           "drop that draft: kept drafts are not samples of q", "biased", peek_target_drop_draft,
           None, _S),
    Mutant("verify/typical-acceptance", f"Medusa typical acceptance, p(x) > min("
           f"{TYPICAL_EPSILON}, {TYPICAL_DELTA} exp(-H(p))); lossy by design", "biased",
           typical_acceptance, "arXiv 2401.10774; vllm-project/vllm#5131", _R),
    # contract
    Mutant("contract/extra-bonus-token", "bonus row sampled twice: k + 2 tokens", "contract",
           extra_bonus_token, None, _S),
    Mutant("contract/float-array", "returns a NumPy float array instead of a list of ints",
           "contract", float_array, None, _S),
    Mutant("contract/placeholder-padding", "returns k + 1 slots padded with -1 placeholders",
           "contract", placeholder_padding, "vllm-project/vllm#46533", _R),
    Mutant("contract/no-correction-token", "drops the token sampled after a rejection: empty "
           "round when the first draft is rejected", "contract", no_correction_token, None, _S),
)  # fmt: skip

CONTROLS: tuple[Mutant, ...] = (
    Mutant("control/match-target-sample", "accept x only if an independent y ~ p equals it, "
           "else emit y", "exact", match_target_sample,
           "ml-explore/mlx-lm#1709; FasterDecoding/REST#5", _R),
    Mutant("control/unknown-draft-probs", "accept with p(x); on rejection sample p without x",
           "exact", unknown_draft_probs, "vllm-project/vllm#41258", _R),
    Mutant("control/greedy-draft-one-hot-q", "argmax drafter whose q is the one-hot vector of "
           "its argmax", "exact", greedy_draft_one_hot_q, "handout §4; vllm-project/vllm#40651",
           _R),
    Mutant("control/product-form-acceptance", "the reference rule written as u * q(x) < p(x)",
           "exact", product_form_acceptance, _LEVIATHAN, _S),
    Mutant("control/peek-target-keep-draft", f"stop drafting after a draft with p(x) < "
           f"{PEEK_THRESHOLD}, keeping it", "exact", peek_target_keep_draft, None, _S),
    Mutant("control/multi-candidate-iid", "SpecInfer multi-candidate rule on 2 i.i.d. samples "
           "of q (the registered tree-iid sampler)", "exact", get_sampler("tree-iid"),
           "arXiv 2305.09781", _S),
)  # fmt: skip


def get(id: str) -> Mutant:
    """The mutant or control with this id; ValueError listing the known ids otherwise."""
    for mutant in MUTANTS + CONTROLS:
        if mutant.id == id:
            return mutant
    known = ", ".join(m.id for m in MUTANTS + CONTROLS)
    raise ValueError(f"id: no mutant called {id!r} (known: {known})")


__all__ = ["CONTROLS", "EFFECTS", "MUTANTS", "Mutant", "SOURCES", "get"]
