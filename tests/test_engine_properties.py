"""Properties of every exact sampler on Hypothesis-generated models.

- Exact enumeration: the first m emitted tokens (m 1..4, k 1..5, windows past k so that bonus,
  residual and accepted tokens all appear) are distributed as the target's to 1e-9, on i.i.d.,
  first- to third-order and position-dependent table models with zeros.
- Statistics, same kind of cases: chi-square of 20,000 batched runs at false-fail rate 1e-6 per
  example (100 examples under the ci profile: at most 1e-4 for the whole test; derandomized).
- Per position: P(at least i drafts accepted) = alpha^i when acceptance is i.i.d.; the
  residual's normalizer is 1 - alpha; alpha = 1 - TV(p, q).
- Non-i.i.d.: the exact expected tokens per round on a Markov chain equals an independent
  dynamic program, and differs from the formula at the average alpha (handout experiment 2).

`pytest --hypothesis-show-statistics` shows which regimes were exercised (labels from
tests/hypothesis_labels.py: model order, period, zeros, disjoint supports, p == q, k, whether
the window reaches the bonus token, and whether a case fell back from enumeration to
statistics).
"""

import numpy as np
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from hypothesis_labels import label_model

from specverify import acceptance_rate, expected_tokens, get_sampler
from specverify.laws.chains import TableModel, toy_chain
from specverify.laws.exact import (
    NotEnumerable,
    round_length_distribution,
    sampler_distribution,
    sequence_distribution,
    total_variation,
)
from specverify.laws.stats import chi_square_test
from specverify.samplers.batched import simulate_tokens
from specverify.samplers.chain import residual
from specverify.surface import strategies as sst

EXACT_SAMPLERS = [
    "chain",
    "block",
    "tree-iid",
    "tree-without-replacement",
    "adaptive-confidence",
    "prompt-lookup",
    "spectr",
    "canonical-ot",
    "traversal-iid",
    "traversal-without-replacement",
]
MULTI_DRAFT = (
    "tree-iid",
    "tree-without-replacement",
    "spectr",
    "canonical-ot",
    "traversal-iid",
    "traversal-without-replacement",
)


@st.composite
def cases(draw):
    """(model, prefix, k, m): vocab 2..3; k up to 5 on two tokens, up to 3 on three."""
    model = draw(sst.table_models(vocab_size=(2, 3), order=(0, 3), period=(1, 2)))
    k = draw(st.integers(1, 5 if model.vocab_size == 2 else 3))
    m = draw(st.integers(1, 4 if model.vocab_size == 2 else 3))
    prefix = tuple(draw(st.lists(st.integers(0, model.vocab_size - 1), min_size=model.order, max_size=model.order + 1)))
    return model, prefix, k, m


@settings(max_examples=40)
@given(cases(), st.sampled_from(EXACT_SAMPLERS))
def test_every_exact_sampler_matches_the_target_exactly(case, name):
    model, prefix, k, m = case
    if name in MULTI_DRAFT:
        k = min(k, 2)  # a width-2 tree of depth k has 2 + ... + 2^k nodes to enumerate
    label_model(model, k, m)
    event(f"sampler {name}")
    got = sampler_distribution(get_sampler(name), model.p_fn, model.q_fn, prefix, k, m, max_paths=400_000)
    want = sequence_distribution(model.p_fn, prefix, m)
    assert total_variation(got, want) < 1e-9


@given(cases(), sst.seeds())
def test_batched_chain_passes_chi_square(case, seed):
    model, prefix, k, m = case
    label_model(model, k, m)
    tokens = simulate_tokens(model, prefix, k, m, 20_000, np.random.default_rng(seed))
    want = sequence_distribution(model.p_fn, prefix, m)
    result = chi_square_test([tuple(row) for row in tokens.tolist()], want, false_fail_rate=1e-6)
    assert result.passed, result.detail


ENUMERATION_BUDGETS = (2, 100_000)
"""Paths: the checker's 100,000, or 2 (almost every case then refuses), drawn per example so
that both routes are exercised and both labels appear whatever Hypothesis generates."""


def first_m_tokens(sampler, model, prefix, k, m, rng) -> tuple:
    out, ctx = [], tuple(prefix)
    while len(out) < m:
        new = [int(t) for t in sampler(model.p_fn, model.q_fn, ctx, k, rng)]
        out += new
        ctx += tuple(new)
    return tuple(out[:m])


@settings(max_examples=40)
@given(cases(), sst.seeds(), st.sampled_from(ENUMERATION_BUDGETS))
@example((TableModel([[0.6, 0.4]], [[0.3, 0.7]], order=0), (), 5, 4), 0, 2)  # > 2 paths
def test_enumeration_or_statistics_as_the_checker_does(case, seed, max_paths):
    """The checker's route on generated models: exact enumeration within a path budget and,
    when it refuses (NotEnumerable), a chi-square test of 2,000 sampled runs instead (false-fail
    rate 1e-6 per example)."""
    model, prefix, k, m = case
    label_model(model, k, m)
    sampler = get_sampler("chain")
    want = sequence_distribution(model.p_fn, prefix, m)
    try:
        got = sampler_distribution(sampler, model.p_fn, model.q_fn, prefix, k, m, max_paths=max_paths)
    except NotEnumerable:
        event("fell back from enumeration to statistics")
        rng = np.random.default_rng(seed)
        runs = [first_m_tokens(sampler, model, prefix, k, m, rng) for _ in range(2000)]
        result = chi_square_test(runs, want, false_fail_rate=1e-6)
        assert result.passed, result.detail
        return
    event("enumerated exactly")
    assert total_variation(got, want) < 1e-9


@given(sst.adversarial_or_random_pairs(vocab_size=(1, 5)), st.integers(1, 5))
def test_acceptance_is_geometric_when_iid(pq, k):
    p, q = pq
    alpha = acceptance_rate(p, q)
    event("alpha == 1" if alpha == 1 else "alpha == 0" if alpha == 0 else "0 < alpha < 1")
    dist = round_length_distribution(get_sampler("chain"), lambda _: p, lambda _: q, (), k)
    for i in range(k + 1):  # at least i drafts accepted <=> the round emits at least i + 1 tokens
        tail = sum(w for n, w in dist.items() if n >= i + 1)
        assert tail == pytest.approx(alpha**i, abs=1e-9)
    mean = sum(n * w for n, w in dist.items())
    assert mean == pytest.approx(expected_tokens(min(alpha, 1.0), k), abs=1e-9)


@given(sst.adversarial_or_random_pairs(vocab_size=(1, 6)))
def test_residual_normalizer_and_alpha_is_one_minus_tv(pq):
    p, q = (v / v.sum() for v in pq)  # float32-rounded pairs sum to 1 only within 1e-7
    alpha = acceptance_rate(p, q)
    assert np.maximum(p - q, 0).sum() == pytest.approx(1 - alpha, abs=1e-12)
    assert alpha == pytest.approx(1 - 0.5 * np.abs(p - q).sum(), abs=1e-12)
    if alpha < 1 - 1e-12:
        r = residual(p, q)
        assert r.sum() == pytest.approx(1) and np.all(r[p <= q] == 0)


def dp_expected_tokens(model, prefix, k):
    """1 + sum_i P(the first i drafts are all accepted), by a forward pass over contexts: an
    accepted draft x at context c has probability min(p_c(x), q_c(x))."""
    mass = {tuple(prefix): 1.0}
    total = 1.0
    for _ in range(k):
        nxt = {}
        for ctx, w in mass.items():
            both = np.minimum(model.p_fn(ctx), model.q_fn(ctx))
            for x in np.flatnonzero(both):
                key = ctx + (int(x),)
                nxt[key] = nxt.get(key, 0.0) + w * both[x]
        mass = nxt
        total += sum(mass.values())
    return total


@pytest.mark.parametrize("k", range(1, 7))
def test_non_iid_expected_tokens_exact_vs_dp_vs_formula(k):
    model = toy_chain()
    dist = round_length_distribution(get_sampler("chain"), model.p_fn, model.q_fn, (0,), k)
    exact_mean = sum(n * w for n, w in dist.items())
    assert exact_mean == pytest.approx(dp_expected_tokens(model, (0,), k), abs=1e-12)
    if k >= 2:  # beyond one draft the chain's context-dependent alpha departs from the formula
        assert abs(exact_mean - expected_tokens(float(model.alphas().mean()), k)) > 1e-3
