"""The strategies generate what they promise: valid vectors, exact alphas, well-formed models,
processing that keeps p and q valid. ``hypothesis.event`` labels the regimes reached (see them
with ``pytest --hypothesis-show-statistics``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, event, given, settings
from hypothesis import find as _find
from hypothesis import strategies as st
from hypothesis_labels import label_model

from specverify.common.validation import check_prob_vector
from specverify.surface import strategies as sst


def _label_vector(v: np.ndarray) -> None:
    event(f"vocab size {v.size}")
    if v.size > 1 and np.count_nonzero(v) == 1:
        event("one-hot")
    elif np.any(v == 0):
        event("has zeros")
    if v.max() >= 1 - 2e-9 and v.size > 1 and np.count_nonzero(v) > 1:
        event("near-degenerate")
    if 0 < v[v > 0].min() < 1e-11:
        event("tiny entry")


def find(strategy, condition):
    """hypothesis.find without shrinking: we only need an example, not the simplest one."""
    return _find(strategy, condition, settings=settings(phases=[Phase.generate], database=None))


def _alpha(p, q) -> float:
    return float(np.minimum(p, q).sum())


# -- probability vectors -----------------------------------------------------------------------


@given(sst.prob_vectors())
def test_prob_vectors_pass_validation(v):
    _label_vector(v)
    assert v.dtype == np.float64 and v.ndim == 1
    check_prob_vector("v", v)
    assert 1 <= v.size <= sst.DEFAULT_VOCAB_SIZE[1]


@given(sst.prob_vectors(vocab_size=(3, 5), allow_zeros=False))
def test_prob_vectors_without_zeros_are_positive(v):
    _label_vector(v)
    assert 3 <= v.size <= 5
    assert np.all(v > 0)
    check_prob_vector("v", v)


@given(sst.prob_vectors(vocab_size=4))
def test_prob_vectors_fixed_size(v):
    assert v.size == 4


def test_prob_vectors_reach_every_regime():
    strat = sst.prob_vectors(vocab_size=(3, 6))
    assert np.count_nonzero(find(strat, lambda v: np.count_nonzero(v) == 1)) == 1
    near = find(strat, lambda v: v.max() >= 1 - 2e-9 and np.count_nonzero(v) > 1)
    assert abs(near.max() - (1 - 1e-9)) < 1e-15
    tiny = find(strat, lambda v: np.any((v > 0) & (v < 1e-11)))
    assert tiny[tiny > 0].min() < 1e-11
    f32 = find(strat, lambda v: np.all(v.astype(np.float32) == v) and v.sum() != 1.0)
    assert abs(f32.sum() - 1.0) < 1e-5


@pytest.mark.parametrize("bad", [0, -1, (3, 2), (0, 3), 2.5, "3", (1, 2, 3), True])
def test_prob_vectors_rejects_bad_vocab_size(bad):
    with pytest.raises(ValueError, match="vocab_size"):
        sst.prob_vectors(vocab_size=bad).example()


# -- pairs -------------------------------------------------------------------------------------


@given(st.data(), st.floats(0.0, 1.0))
def test_pq_pairs_hit_the_requested_alpha(data, alpha):
    p, q = data.draw(sst.pq_pairs(vocab_size=(1, 8), alpha=alpha))
    event("alpha 0" if alpha == 0 else "alpha 1" if alpha == 1 else "alpha in (0, 1)")
    check_prob_vector("p", p)
    check_prob_vector("q", q)
    assert p.shape == q.shape
    assert abs(_alpha(p, q) - alpha) < 1e-9


@given(sst.pq_pairs(alpha=0.5, allow_zeros=False))
def test_pq_pairs_without_zeros_are_positive(pq):
    p, q = pq
    assert np.all(p > 0) and np.all(q > 0)
    assert abs(_alpha(p, q) - 0.5) < 1e-9


@given(sst.pq_pairs(vocab_size=(2, 6)))
def test_pq_pairs_are_valid_pairs(pq):
    p, q = pq
    a = _alpha(p, q)
    event("alpha 0" if a < 1e-12 else "alpha 1" if a > 1 - 1e-12 else "alpha in (0, 1)")
    check_prob_vector("p", p)
    check_prob_vector("q", q)
    assert p.shape == q.shape and 2 <= p.size <= 6


def test_pq_pairs_refuses_impossible_requests():
    with pytest.raises(ValueError, match="alpha"):
        sst.pq_pairs(alpha=1.5)
    with pytest.raises(ValueError, match="alpha"):
        sst.pq_pairs(alpha=0.0, allow_zeros=False)
    with pytest.raises(ValueError, match="vocab_size"):
        sst.pq_pairs(vocab_size=1, alpha=0.5)


def test_adversarial_pairs_cover_the_named_cases():
    assert len(sst.ADVERSARIAL_PAIRS) == len(sst.ADVERSARIAL_PAIR_NAMES)
    for p, q in sst.ADVERSARIAL_PAIRS:
        check_prob_vector("p", p)
        check_prob_vector("q", q)
        assert p.shape == q.shape
        assert not p.flags.writeable and not q.flags.writeable
    pairs = sst.ADVERSARIAL_PAIRS
    assert any(np.array_equal(p, q) for p, q in pairs)
    assert any(_alpha(p, q) == 0.0 for p, q in pairs)
    assert any(np.any((p == 0) & (q > 0)) for p, q in pairs)  # p zero on part of q's support
    assert any(np.any((q == 0) & (p > 0)) for p, q in pairs)  # q zero on part of p's support


def test_adversarial_or_random_pairs_mixes_both_in():
    strat = sst.adversarial_or_random_pairs(vocab_size=(2, 4))
    explicit = {(tuple(p), tuple(q)) for p, q in sst.ADVERSARIAL_PAIRS if 2 <= len(p) <= 4}
    found = find(strat, lambda pq: (tuple(pq[0]), tuple(pq[1])) in explicit)
    assert found[0].flags.writeable  # a copy, not the shared constant
    find(strat, lambda pq: (tuple(pq[0]), tuple(pq[1])) not in explicit)


@given(sst.adversarial_or_random_pairs(vocab_size=3, allow_zeros=False))
def test_adversarial_or_random_pairs_respects_arguments(pq):
    p, q = pq
    assert p.size == q.size == 3
    assert np.all(p > 0) and np.all(q > 0)


# -- table models ------------------------------------------------------------------------------


@given(sst.table_models())
def test_table_models_have_the_right_shape(model):
    v, order, period = model.vocab_size, model.order, model.period
    event(f"order {order}, period {period}")
    label_model(model)  # no sampler runs here: order, period and zeros only
    assert 2 <= v <= 4 and 0 <= order <= 3 and 1 <= period <= 3
    assert model.p_table.shape == model.q_table.shape == (v**order * period, v)
    for table in (model.p_table, model.q_table):
        assert not table.flags.writeable
        with pytest.raises(ValueError):
            table[0, 0] = 0.5
        assert np.allclose(table.sum(axis=1), 1.0, atol=1e-12)


@given(sst.table_models(vocab_size=3, order=(2, 2), period=(2, 2), allow_zeros=False))
def test_table_models_respect_arguments(model):
    assert (model.vocab_size, model.order, model.period) == (3, 2, 2)
    assert np.all(model.p_table > 0) and np.all(model.q_table > 0)


def test_table_models_can_be_position_dependent():
    model = find(
        sst.table_models(order=(0, 0), period=(2, 2)),
        lambda m: not np.array_equal(m.p_fn(()), m.p_fn((0,))),
    )
    assert model.period == 2


def test_table_models_refuses_huge_tables():
    with pytest.raises(ValueError, match="MAX_TABLE_ROWS"):
        sst.table_models(vocab_size=(2, 50), order=(0, 3))


# -- processing --------------------------------------------------------------------------------


@given(sst.processed_pair(vocab_size=(1, 12)))
def test_processed_pairs_are_valid(pair):
    p, q, config = pair
    event(f"temperature {'0 (greedy)' if config['temperature'] == 0 else '> 0'}")
    event(f"top_k {'set' if config['top_k'] else 'unset'}")
    event(f"top_p {'set' if config['top_p'] else 'unset'}")
    check_prob_vector("p", p)
    check_prob_vector("q", q)
    assert p.shape == q.shape


@given(sst.prob_vectors(vocab_size=(1, 10)), sst.processing_configs())
def test_processing_is_identical_for_identical_inputs(v, config):
    """Applied to p == q the results are equal, bit for bit, and a valid probability vector."""
    out_p = sst.apply_processing(v, config, kind="probs")
    out_q = sst.apply_processing(v.copy(), config, kind="probs")
    assert np.array_equal(out_p, out_q)
    check_prob_vector("out", out_p)
    assert np.all(out_p[v == 0] == 0)  # processing never revives an impossible token


@given(st.lists(st.floats(-10, 10), min_size=1, max_size=12, unique=True), st.integers(1, 16))
def test_top_k_keeps_exactly_k_tokens(logits, k):
    out = sst.apply_processing(logits, {"temperature": 1.0, "top_k": k, "top_p": None})
    kept = np.flatnonzero(out)
    assert kept.size == min(k, len(logits))  # distinct logits: no ties at the boundary
    assert set(kept) == set(np.argsort(logits)[::-1][: min(k, len(logits))])


def test_top_k_keeps_ties_at_the_boundary():
    out = sst.apply_processing([1.0, 2.0, 2.0, 0.0], {"top_k": 2})
    assert np.count_nonzero(out) == 2
    out = sst.apply_processing([3.0, 2.0, 2.0, 0.0], {"top_k": 2})
    assert np.count_nonzero(out) == 3  # both tokens tied with the 2nd largest stay


@given(sst.prob_vectors(vocab_size=(1, 10)), st.floats(0.05, 0.999))
def test_top_p_keeps_the_smallest_set_reaching_top_p(v, top_p):
    out = sst.apply_processing(v, {"top_p": top_p}, kind="probs")
    kept = out > 0
    mass = v[kept].sum()
    assert mass >= top_p - 1e-12
    assert mass - v[kept].min() < top_p + 1e-12  # dropping the least likely kept token falls short
    assert np.allclose(out[kept], v[kept] / mass, rtol=1e-9, atol=0)


@given(sst.prob_vectors(vocab_size=(1, 10), allow_zeros=False))
def test_temperature_one_without_truncation_is_the_identity(v):
    out = sst.apply_processing(v, {"temperature": 1.0, "top_k": None, "top_p": None}, kind="probs")
    assert np.allclose(out, v / v.sum(), rtol=1e-9, atol=1e-300)


def test_temperature_zero_is_greedy():
    out = sst.apply_processing([0.1, 3.0, 3.0, -1.0], {"temperature": 0.0})
    assert out.tolist() == [0.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "config",
    [
        {"temperature": -1.0},
        {"temperature": float("nan")},
        {"top_k": 0},
        {"top_k": 2.0},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"temp": 1.0},
        [("temperature", 1.0)],
    ],
)
def test_apply_processing_rejects_bad_configs(config):
    with pytest.raises(ValueError, match="config"):
        sst.apply_processing([0.0, 1.0], config)


@pytest.mark.parametrize(
    "values, kind, match",
    [
        ([float("nan"), 0.0], "logits", "values"),
        ([-np.inf, -np.inf], "logits", "values"),
        ([0.5, 0.6], "probs", "values"),
        ([0.5, 0.5], "log-probs", "kind"),
    ],
)
def test_apply_processing_rejects_bad_values(values, kind, match):
    with pytest.raises(ValueError, match=match):
        sst.apply_processing(values, {}, kind=kind)


# -- seeds -------------------------------------------------------------------------------------


@given(sst.seeds())
def test_seeds_make_reproducible_generators(seed):
    assert 0 <= seed < 2**32
    a = np.random.default_rng(seed).random(3)
    assert np.array_equal(a, np.random.default_rng(seed).random(3))
