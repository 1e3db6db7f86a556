"""Hypothesis properties of one round of speculative_step on i.i.d. p and q.

Regimes are labelled with event() so `pytest --hypothesis-show-statistics` shows which were hit:
all accepted (the round reached the bonus token), rejected at position i, p == q, disjoint
supports, zeros in p or q, k.
"""

import numpy as np
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from hypothesis_labels import label_zeros

from specverify import speculative_step


@st.composite
def pq_and_k(draw):
    """p, q on 2..5 tokens, with the regimes p == q and disjoint supports drawn on purpose."""
    v = draw(st.integers(2, 5))
    weights = st.lists(st.integers(0, 10), min_size=v, max_size=v)
    p = np.array(draw(weights), float)
    p[draw(st.integers(0, v - 1))] += 1
    regime = draw(st.sampled_from(["random", "equal", "disjoint"]))
    if regime == "equal":
        q = p.copy()
    elif regime == "disjoint":
        cut = draw(st.integers(1, v - 1))
        p[cut:], q = 0.0, np.r_[np.zeros(cut), np.ones(v - cut)]
        p[0] += p.sum() == 0
    else:
        q = np.array(draw(weights), float)
        q[draw(st.integers(0, v - 1))] += 1
    return p / p.sum(), q / q.sum(), draw(st.integers(1, 5)), draw(st.integers(0, 2**32 - 1))


def run(p, q, k, seed):
    return speculative_step(lambda _: p, lambda _: q, (0,), k, np.random.default_rng(seed))


def label(p, q, out, k):
    if np.array_equal(p, q):
        event("p == q")
    if np.minimum(p, q).sum() == 0:
        event("disjoint supports")
    label_zeros(p, q)
    event(f"k {k}")
    event("all accepted: reached the bonus token" if len(out) == k + 1 else f"rejected at position {len(out) - 1}")


@given(pq_and_k())
@example((np.array([0.5, 0.5]), np.array([0.5, 0.5]), 3, 0))
@example((np.array([1.0, 0.0]), np.array([0.0, 1.0]), 2, 0))
def test_round_contract_and_regimes(case):
    p, q, k, seed = case
    out = run(p, q, k, seed)
    label(p, q, out, k)
    assert 1 <= len(out) <= k + 1
    assert all(isinstance(t, int) and 0 <= t < len(p) for t in out)
    # every token but the last was an accepted draft, so it lies in the support of both p and q
    assert all(p[t] > 0 and q[t] > 0 for t in out[:-1])
    assert p[out[-1]] > 0  # the last token (residual or bonus) is always in p's support
    if np.array_equal(p, q):
        assert len(out) == k + 1  # ratio 1: every draft is accepted
    if np.minimum(p, q).sum() == 0:
        assert len(out) == 1  # ratio 0: the first draft is always rejected


@given(pq_and_k())
def test_same_seed_same_round(case):
    p, q, k, seed = case
    assert run(p, q, k, seed) == run(p, q, k, seed)


@given(pq_and_k())
def test_inputs_are_not_written(case):
    p, q, k, seed = case
    p_ro, q_ro = p.copy(), q.copy()
    p_ro.setflags(write=False)
    q_ro.setflags(write=False)
    run(p_ro, q_ro, k, seed)  # a write would raise on the read-only arrays
    assert np.array_equal(p_ro, p) and np.array_equal(q_ro, q)


@st.composite
def prob_vectors(draw):
    """A probability vector over 1..5000 ids: Dirichlet weights (spiky to flat), some entries
    zero, rounded through float32 and renormalized as an engine's softmax would be, or not."""
    v = draw(st.sampled_from([1, 2, 3, 7, 50, 4096, 5000]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p = rng.dirichlet(np.full(v, draw(st.sampled_from([0.05, 0.5, 5.0]))))
    if v > 1 and draw(st.booleans()):
        p[rng.random(v) < 0.3] = 0.0
        p[int(rng.integers(v))] += 1e-3
    if draw(st.booleans()):
        p = p.astype(np.float32).astype(np.float64)
    return p / p.sum()


@given(prob_vectors(), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 1e-12, 3e-9, 1e-8, 1e-3]))
def test_sample_draws_what_rng_choice_draws_number_for_number(p, seed, off):
    """``chain.sample`` takes the inverse CDF itself instead of ``Generator.choice``: the same
    tokens and the same generator state afterwards, on vectors that sum to 1 and on vectors off
    by up to choice's tolerance (the fallback) or past it (the same ValueError)."""
    from specverify.samplers.chain import sample

    p = p * (1 + off)
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(20):
        try:
            want = int(theirs.choice(len(p), p=p))
        except ValueError as exc:
            with pytest.raises(ValueError, match=str(exc)):
                sample(p, ours)
            return
        assert sample(p, ours) == want
    assert ours.random() == theirs.random()
