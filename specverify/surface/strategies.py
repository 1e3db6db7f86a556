"""Hypothesis strategies for speculative-decoding inputs: probability vectors, target/draft
pairs (p, q), table-driven models, sampling configurations and rng seeds.

The generators lean on the regimes where speculative samplers break: zeros in p or q (tokens a
draft can never propose, or the target never emits), one-hot and near-degenerate vectors
(alpha at 0 or 1 to the last bit), tiny entries (ratios p/q of 1e12), and float32-rounded
vectors that sum to 1 only within float32 rounding (DeepSpec issue #31: drafts sampled from a
bf16 distribution but accepted with the float32 one). Everything Hypothesis draws shrinks: a
failure reduces to a small vocabulary, a short table and a seed near 0.

Usage::

    from hypothesis import given
    from specverify import strategies as sst

    @given(sst.pq_pairs(vocab_size=(2, 6), alpha=0.3))
    def test_alpha(pq):
        p, q = pq
        assert abs(np.minimum(p, q).sum() - 0.3) < 1e-9

    @given(sst.table_models(order=(1, 2)), sst.seeds())
    def test_rounds(model, seed):
        rng = np.random.default_rng(seed)
        out = speculative_step(model.p_fn, model.q_fn, (0,), 3, rng)

    # explicit adversarial cases next to the random ones
    @given(sst.adversarial_or_random_pairs())
    def test_pairs(pq): ...

    # the same temperature / top-k / top-p applied to both models
    @given(sst.processed_pair())
    def test_processed(pair):
        p, q, config = pair

Notation: p = target, q = draft, alpha = sum(min(p, q)) (Leviathan et al. 2023,
arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318). Sampling settings must be applied to p
and q identically; transformers made the assistant sample whenever the main model samples for
this reason (huggingface/transformers issue #32867, PR #33534).
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import numpy as np
from hypothesis import strategies as st
from numpy.typing import ArrayLike, NDArray

from ..common.validation import check_alpha, check_prob_vector
from ..laws.chains import TableModel
from ..laws.processing import check_sampling, process_logits
from ..samplers.prompt_lookup import one_hot
from .loop_strategies import LoopSetup, grammars, logit_tables, loop_setups, requests, sampling_params
from .strategy_arguments import DEFAULT_VOCAB_SIZE, IntRange, Vector, int_range, read_only, seeds, vocab_sizes

MAX_TABLE_ROWS = 4096
"""Largest table (V^order * period rows) ``table_models`` agrees to draw."""

NEAR_ONE_GAP = 1e-9
TINY = 1e-12

_REGIMES = ("spread", "one_hot", "near_degenerate", "tiny", "float32")

_IntRange = IntRange
_Vector = Vector
_Pair = tuple[_Vector, _Vector]


# --------------------------------------------------------------------------- probability vectors


def _weights(draw: st.DrawFn, v: int, allow_zeros: bool) -> _Vector:
    """v non-negative weights with a positive sum (all positive unless allow_zeros)."""
    low = 0.0 if allow_zeros else 1e-3
    w = np.array(draw(st.lists(st.floats(low, 1.0, allow_subnormal=False), min_size=v, max_size=v)))
    if w.sum() == 0:
        w[draw(st.integers(0, v - 1))] = 1.0
    return cast("_Vector", w / w.sum())


@st.composite
def _vector_of_size(draw: st.DrawFn, v: int, allow_zeros: bool = True) -> _Vector:
    regimes = [r for r in _REGIMES if allow_zeros or r != "one_hot"]
    regime = draw(st.sampled_from(regimes))
    if v == 1:
        return np.ones(1)
    if regime == "one_hot":
        vec = np.zeros(v)
        vec[draw(st.integers(0, v - 1))] = 1.0
        return vec
    if regime == "near_degenerate":
        top = draw(st.integers(0, v - 1))
        rest = _weights(draw, v - 1, allow_zeros)
        return np.insert(rest * NEAR_ONE_GAP, top, 1.0 - NEAR_ONE_GAP)
    vec = _weights(draw, v, allow_zeros)
    if regime == "tiny":
        n_tiny = draw(st.integers(1, v - 1))
        idx = draw(st.permutations(range(v)))[:n_tiny]
        vec[idx] = TINY
        vec /= vec.sum()
    elif regime == "float32":
        vec32 = vec.astype(np.float32)
        vec = (vec32 / vec32.sum(dtype=np.float32)).astype(np.float64)
    return vec


def prob_vectors(vocab_size: _IntRange = None, *, allow_zeros: bool = True) -> st.SearchStrategy[_Vector]:
    """Probability vectors (float64, 1-D) that pass ``validation.check_prob_vector``.

    ``vocab_size`` is None (sizes ``DEFAULT_VOCAB_SIZE``), an int, or a (min, max) pair.
    Regimes: spread weights (with zeros unless ``allow_zeros=False``), one-hot, near-degenerate
    (one entry 1 - 1e-9), tiny entries (1e-12), and float32-rounded entries renormalized in
    float32, so the float64 sum is 1 only to float32 rounding (within ``SUM_TOL`` = 1e-5).
    """
    return vocab_sizes(vocab_size).flatmap(lambda v: _vector_of_size(v, allow_zeros))


# ---------------------------------------------------------------------------------- (p, q) pairs


@st.composite
def _pair_with_alpha(draw: st.DrawFn, v: int, alpha: float, allow_zeros: bool) -> _Pair:
    """p = c + (1 - alpha) r_p, q = c + (1 - alpha) r_q with sum(c) = alpha and r_p, r_q of
    disjoint supports, so min(p, q) = c exactly and sum(min(p, q)) = alpha to rounding."""
    common = _weights(draw, v, allow_zeros)
    if alpha == 1.0:
        return common, common.copy()
    i = draw(st.integers(0, v - 1))
    j = draw(st.integers(0, v - 2))
    j += j >= i
    owner = np.array(draw(st.lists(st.integers(0, 2), min_size=v, max_size=v)))  # 2: nobody
    owner[i], owner[j] = 0, 1
    rest = _weights(draw, v, allow_zeros=False)
    r_p = np.where(owner == 0, rest, 0.0)
    r_q = np.where(owner == 1, rest, 0.0)
    p = alpha * common + (1.0 - alpha) * r_p / r_p.sum()
    q = alpha * common + (1.0 - alpha) * r_q / r_q.sum()
    return p, q


@st.composite
def _random_pair(draw: st.DrawFn, v: int, allow_zeros: bool) -> _Pair:
    kinds = ["independent", "equal", "mixture"] + (["alpha"] if v > 1 else [])
    kind = draw(st.sampled_from(kinds))
    p = draw(_vector_of_size(v, allow_zeros))
    if kind == "independent":
        return p, draw(_vector_of_size(v, allow_zeros))
    if kind == "equal":
        return p, p.copy()
    if kind == "mixture":
        t = draw(st.floats(0.0, 1.0))
        q = (1.0 - t) * p + t * draw(_vector_of_size(v, allow_zeros))
        return p, q / q.sum()
    low = 0.0 if allow_zeros else 1e-3
    return draw(_pair_with_alpha(v, draw(st.floats(low, 1.0)), allow_zeros))


def pq_pairs(
    vocab_size: _IntRange = None, alpha: float | None = None, *, allow_zeros: bool = True
) -> st.SearchStrategy[_Pair]:
    """(p, q) pairs of float64 probability vectors of one length.

    With ``alpha=None`` the pair is independent, equal, a mixture q = (1 - t) p + t r, or built
    with a random alpha. With ``alpha`` a float in [0, 1], sum(min(p, q)) equals it to 1e-9
    (alpha < 1 needs two tokens, so sizes below 2 are left out of the range; alpha = 0 needs
    zeros).
    """
    if alpha is None:
        return vocab_sizes(vocab_size).flatmap(lambda v: _random_pair(v, allow_zeros))
    a = check_alpha(alpha)
    if a == 0.0 and not allow_zeros:
        raise ValueError("alpha: 0 needs disjoint supports, i.e. zeros; allow_zeros is False")
    lo, hi = int_range(vocab_size, "vocab_size", 1, DEFAULT_VOCAB_SIZE)
    if a < 1.0:
        if hi < 2:
            raise ValueError(f"vocab_size: alpha = {a} < 1 needs at least 2 tokens, got {vocab_size!r}")
        lo = max(lo, 2)
    return st.integers(lo, hi).flatmap(lambda v: _pair_with_alpha(v, a, allow_zeros))


def _pair(p: list[float], q: list[float]) -> _Pair:
    p_array, q_array = read_only(np.array(p, dtype=np.float64), np.array(q, dtype=np.float64))
    return p_array, q_array


ADVERSARIAL_PAIR_NAMES = (
    "p == q",
    "p == q, one-hot",
    "disjoint supports, alpha = 0",
    "disjoint one-hots, alpha = 0",
    "p zero on part of q's support",
    "q zero on part of p's support",
    "near-degenerate, opposite tokens",
    "tiny draft mass where the target is large",
    "vocabulary of one token",
)
"""Names of ``ADVERSARIAL_PAIRS``, in the same order."""

ADVERSARIAL_PAIRS = [
    _pair([0.5, 0.3, 0.2], [0.5, 0.3, 0.2]),
    _pair([0.0, 1.0, 0.0], [0.0, 1.0, 0.0]),
    _pair([0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.3, 0.7]),
    _pair([1.0, 0.0], [0.0, 1.0]),
    _pair([0.6, 0.4, 0.0], [0.2, 0.3, 0.5]),
    _pair([0.2, 0.3, 0.5], [0.6, 0.4, 0.0]),
    _pair([1.0 - NEAR_ONE_GAP, NEAR_ONE_GAP], [NEAR_ONE_GAP, 1.0 - NEAR_ONE_GAP]),
    _pair([0.5, 0.5], [TINY, 1.0 - TINY]),
    _pair([1.0], [1.0]),
]
"""Explicit (p, q) cases (read-only arrays) for ``@example`` or for mixing into a strategy:
alpha = 1, alpha = 0, tokens only the draft proposes (always rejected), tokens only the residual
emits, near-degenerate pairs and a ratio p/q of 5e11."""


def adversarial_or_random_pairs(vocab_size: _IntRange = None, *, allow_zeros: bool = True) -> st.SearchStrategy[_Pair]:
    """``ADVERSARIAL_PAIRS`` that fit ``vocab_size`` (as writable copies) mixed with
    ``pq_pairs(vocab_size)``."""
    lo, hi = int_range(vocab_size, "vocab_size", 1, DEFAULT_VOCAB_SIZE)
    fitting = [
        pq
        for pq in ADVERSARIAL_PAIRS
        if lo <= len(pq[0]) <= hi and (allow_zeros or (np.all(pq[0] > 0) and np.all(pq[1] > 0)))
    ]
    random_pairs = pq_pairs(vocab_size, allow_zeros=allow_zeros)
    if not fitting:
        return random_pairs
    explicit = st.sampled_from(fitting).map(lambda pq: (pq[0].copy(), pq[1].copy()))
    return st.one_of(explicit, random_pairs)


# --------------------------------------------------------------------------- table-driven models


@st.composite
def _table_model(draw: st.DrawFn, v: int, order: int, period: int, allow_zeros: bool) -> TableModel:
    n_ctx = v**order * period
    pool = draw(st.lists(adversarial_or_random_pairs(v, allow_zeros=allow_zeros), min_size=1, max_size=min(n_ctx, 6)))
    rows = draw(st.lists(st.integers(0, len(pool) - 1), min_size=n_ctx, max_size=n_ctx))
    p_table = np.array([pool[r][0] for r in rows])
    q_table = np.array([pool[r][1] for r in rows])
    name = f"hypothesis-table(V={v}, order={order}, period={period})"
    return TableModel(p_table, q_table, order=order, period=period, name=name)


def table_models(
    vocab_size: _IntRange = (2, 4), order: _IntRange = (0, 3), period: _IntRange = (1, 3), *, allow_zeros: bool = True
) -> st.SearchStrategy[TableModel]:
    """``TableModel``s with V^order * period rows; with ``period > 1`` every position modulo
    period has its own target and draft. Rows are drawn from a pool of up to six (p, q) pairs
    (adversarial or random), so small tables shrink to one repeated pair."""
    v_lo, v_hi = int_range(vocab_size, "vocab_size", 1, DEFAULT_VOCAB_SIZE)
    o_lo, o_hi = int_range(order, "order", 0, (0, 3))
    t_lo, t_hi = int_range(period, "period", 1, (1, 3))
    if v_hi**o_hi * t_hi > MAX_TABLE_ROWS:
        raise ValueError(
            f"vocab_size, order, period: up to {v_hi}^{o_hi} * {t_hi} table rows, more than "
            f"MAX_TABLE_ROWS = {MAX_TABLE_ROWS}; draw smaller models"
        )
    return st.tuples(st.integers(v_lo, v_hi), st.integers(o_lo, o_hi), st.integers(t_lo, t_hi)).flatmap(
        lambda vot: _table_model(*vot, allow_zeros)
    )


# --------------------------------------------------------------------- temperature, top-k, top-p


def processing_configs() -> st.SearchStrategy[dict[str, Any]]:
    """dict(temperature, top_k, top_p): temperature 0 (greedy) or in [0.05, 5]; top_k None or
    1..16 (clipped to the vocabulary); top_p None or in [0.05, 1]."""
    return st.fixed_dictionaries(
        {
            "temperature": st.one_of(st.floats(0.05, 5.0), st.just(0.0)),
            "top_k": st.one_of(st.none(), st.integers(1, 16)),
            "top_p": st.one_of(st.none(), st.floats(0.05, 1.0)),
        }
    )


def _check_config(config: object) -> tuple[float, int | None, float | None]:
    """``processing.check_sampling`` on a config dict; errors name ``config`` and the key."""
    if not isinstance(config, dict):
        raise ValueError(f"config: expected a dict, got {type(config).__name__}")
    unknown = set(config) - {"temperature", "top_k", "top_p"}
    if unknown:
        raise ValueError(f"config: unknown keys {sorted(unknown)}")
    try:
        return check_sampling(config.get("temperature", 1.0), config.get("top_k"), config.get("top_p"))
    except ValueError as exc:
        raise ValueError(f"config: {exc}") from None


def _as_logits(values: ArrayLike, kind: str) -> _Vector:
    if kind == "probs":
        with np.errstate(divide="ignore"):
            return cast("_Vector", np.log(check_prob_vector("values", values)))
    if kind != "logits":
        raise ValueError(f"kind: must be 'logits' or 'probs', got {kind!r}")
    z = np.asarray(values, dtype=np.float64)
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"values: expected a non-empty 1-D vector, got shape {z.shape}")
    if np.any(np.isnan(z)) or np.any(z == np.inf):
        raise ValueError("values: logits must not be NaN or +inf")
    if not np.any(np.isfinite(z)):
        raise ValueError("values: every logit is -inf, nothing can be sampled")
    return z


def apply_processing(values: ArrayLike, config: dict[str, Any], *, kind: str = "logits") -> _Vector:
    """Apply temperature, then top-k, then top-p (``processing.process_logits``) to one vector.

    ``kind`` says whether ``values`` are logits (-inf allowed) or probabilities (zeros become
    -inf logits). Temperature 0 is greedy: one-hot at the first argmax. Top-k keeps every token
    whose scaled logit is >= the k-th largest (ties at the boundary are kept, as in transformers'
    TopKLogitsWarper); top-p keeps the smallest most-likely set with mass >= top_p (top_p = 1
    keeps everything).

    The same config must be applied identically to p and q: the acceptance ratio p(x)/q(x) is
    only exact when q is the distribution the draft was actually sampled from and p the one the
    target actually samples from.
    """
    temperature, top_k, top_p = _check_config(config)
    z = _as_logits(values, kind)
    if temperature == 0.0:
        return one_hot(int(np.argmax(z)), z.size)
    return process_logits(z, temperature, top_k, top_p)


class ProcessedPair(NamedTuple):
    p: NDArray[np.float64]
    q: NDArray[np.float64]
    config: dict[str, Any]


@st.composite
def _processed_pair_of_size(draw: st.DrawFn, v: int, config: dict[str, Any] | None) -> ProcessedPair:
    logit = st.floats(-8.0, 8.0, allow_subnormal=False)
    base = np.array(draw(st.lists(logit, min_size=v, max_size=v)))
    noise = np.array(draw(st.lists(st.floats(-1.0, 1.0), min_size=v, max_size=v)))
    spread = draw(st.floats(0.0, 4.0))
    config = draw(processing_configs()) if config is None else config
    p = apply_processing(base, config)
    q = apply_processing(base + spread * noise, config)
    return ProcessedPair(p, q, config)


def processed_pair(
    vocab_size: _IntRange = None, config: dict[str, Any] | None = None
) -> st.SearchStrategy[ProcessedPair]:
    """``ProcessedPair(p, q, config)``: target logits z, draft logits z + s * noise (s in
    [0, 4], so alpha ranges from 1 down to near 0), both turned into probabilities by
    ``apply_processing`` with one config (drawn from ``processing_configs()`` unless given)."""
    if config is not None:
        _check_config(config)
    return vocab_sizes(vocab_size).flatmap(lambda v: _processed_pair_of_size(v, config))


__all__ = [
    "ADVERSARIAL_PAIRS",
    "ADVERSARIAL_PAIR_NAMES",
    "DEFAULT_VOCAB_SIZE",
    "MAX_TABLE_ROWS",
    "ProcessedPair",
    "LoopSetup",
    "adversarial_or_random_pairs",
    "grammars",
    "logit_tables",
    "loop_setups",
    "apply_processing",
    "pq_pairs",
    "prob_vectors",
    "requests",
    "sampling_params",
    "processed_pair",
    "processing_configs",
    "seeds",
    "table_models",
]
