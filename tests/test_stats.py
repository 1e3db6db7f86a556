"""Test the tests: measured false-fail rates, power at min_discrepancy, round trips, bad input.

A statistical assertion here counts failures over N seeded trials and compares the count with
``max_failures(N, rate) = binom.isf(CHECK_RATE, N, rate)``: if the check under test had exactly
its nominal rate, the assertion would fail with probability <= CHECK_RATE = 1e-6. Seeds are
fixed, so every run is reproducible. Nominal rates are 0.01 / 0.05 so that they are measurable.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from specverify.laws import scalar_tests as ST
from specverify.laws import stats as S
from specverify.laws.chains import toy_chain
from specverify.laws.theory import expected_tokens

CHECK_RATE = 1e-6  # false-fail rate of each statistical assertion in this file


def max_failures(trials: int, rate: float) -> int:
    """Largest failure count compatible with ``rate`` (P(Binomial(trials, rate) > it) <= 1e-6)."""
    return int(sps.binom.isf(CHECK_RATE, trials, rate))


def handout_pairs() -> dict:
    """The handout's 9 cells: P(a, b) = p(a | 0) p(b | a) in the toy chain."""
    m = toy_chain()
    return {(a, b): m.p_fn((0,))[a] * m.p_fn((0, a))[b] for a in range(3) for b in range(3)}


PAIRS = handout_pairs()
SKEWED = dict(enumerate([0.5, 0.3, 0.15, 0.03, 0.01, 0.005, 0.005]))  # pools 4 cells at n = 200


def multinomial_counts(dist: dict, n: int, trials: int, seed: int) -> list[dict]:
    keys = list(dist)
    draws = np.random.default_rng(seed).multinomial(n, list(dist.values()), size=trials)
    return [dict(zip(keys, row)) for row in draws.tolist()]


def half_split_alternative(d: float) -> dict:
    """Least favourable for chi-square: r = p (1 + 2d) on pairs (1, .), of mass 1/2, p (1 - 2d)
    elsewhere; its chi2-divergence is exactly 4 d^2."""
    return {key: p * (1 + 2 * d if key[0] == 1 else 1 - 2 * d) for key, p in PAIRS.items()}


def shift_alternative(d: float) -> dict:
    """Move mass d from the most likely cell (1, 0) to the least likely (0, 0)."""
    r = dict(PAIRS)
    r[(1, 0)] -= d
    r[(0, 0)] += d
    return r


def outside_alternative(d: float) -> dict:
    """Mass d on an outcome the target never produces, e.g. a token pair from a wrong vocabulary."""
    r = {key: p * (1 - d) for key, p in PAIRS.items()}
    r[(3, 3)] = d
    return r


ALTERNATIVES = [half_split_alternative, shift_alternative, outside_alternative]


def failures(test, count_dicts, expected, rate, **kw) -> int:
    return sum(not test(c, expected, rate, **kw).passed for c in count_dicts)


# ------------------------------------------------------------------ false-fail rate, measured


def test_chi_square_false_fail_rate_without_pooling():
    """Measured 0.0088 (35 / 4,000) at nominal 0.01; at most 73 failures allowed."""
    assert len(S.pooled_cells(list(PAIRS.values()), 1000)) == 0
    samples = multinomial_counts(PAIRS, 1000, 4000, seed=11)
    assert failures(S.chi_square_test, samples, PAIRS, 0.01) <= max_failures(4000, 0.01)


@pytest.mark.parametrize("method, seed", [("pearson", 12), ("g-test", 13)])
def test_chi_square_false_fail_rate_with_pooling(method, seed):
    """Expected counts 100, 60, 30, 6, 2, 1, 1: the last four are pooled (4 df -> 3 df).

    Measured at nominal 0.05 over 3,000 trials: Pearson 0.053, G-test 0.048 (asymptotic nulls,
    a little off with small cells); at most 210 failures (0.070) allowed.
    """
    assert sorted(S.pooled_cells(list(SKEWED.values()), 200).tolist()) == [3, 4, 5, 6]
    samples = multinomial_counts(SKEWED, 200, 3000, seed)
    assert S.chi_square_test(samples[0], SKEWED, 0.05, method=method).detail.count("4 pooled")
    fails = failures(S.chi_square_test, samples, SKEWED, 0.05, method=method)
    assert fails <= max_failures(3000, 0.05)


def test_tv_bound_false_fail_rate():
    """Measured 6 / 6,000 at nominal 0.05 (distribution-free, so conservative)."""
    samples = multinomial_counts(PAIRS, 1000, 6000, seed=14)
    assert failures(S.tv_bound_test, samples, PAIRS, 0.05) <= max_failures(6000, 0.05)


def round_length_distribution(alpha: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Round length L = accepted drafts + 1 under i.i.d. acceptance: P(L >= i + 1) = alpha^i."""
    lengths = np.arange(1, k + 2)
    probs = np.array([alpha**i * (1 - alpha) for i in range(k)] + [alpha**k])
    return lengths, probs


def test_mean_bound_false_fail_rate():
    """Round lengths at alpha 0.8, k = 4 (mean 3.3616): measured 3 / 4,000 at nominal 0.05."""
    lengths, probs = round_length_distribution(0.8, 4)
    assert math.isclose(float(lengths @ probs), expected_tokens(0.8, 4))
    values = np.random.default_rng(15).choice(lengths, p=probs, size=(4000, 200))
    mu = expected_tokens(0.8, 4)
    fails = sum(not ST.mean_bound_test(v, mu, 1, 5, 0.05).passed for v in values)
    assert fails <= max_failures(4000, 0.05)


def test_binomial_false_fail_rate_exact_and_measured():
    """P(at least 2 of 4 drafts accepted) = 0.8^2 over 400 rounds, nominal 0.05.

    Exact: sum of Binomial(400, 0.64) pmf over the failing counts = 0.0479 <= 0.05 (the exact
    test never exceeds its rate). Measured over 20,000 draws (seed 16): 0.0469.
    """
    trials, p = 400, 0.8**2
    fails_at = np.array([not ST.binomial_test(s, trials, p, 0.05).passed for s in range(trials + 1)])
    exact_rate = float(sps.binom.pmf(np.arange(trials + 1), trials, p)[fails_at].sum())
    assert exact_rate <= 0.05
    draws = np.random.default_rng(16).binomial(trials, p, size=20_000)
    assert int(fails_at[draws].sum()) <= max_failures(20_000, 0.05)


# --------------------------------------------------- design: n = min_num_samples(d), both rates


def test_chi_square_design_exact_passes():
    """At n = min_num_samples_chi_square(0.1, PAIRS, 0.01, 0.05) the exact distribution passes:
    n = 792; measured failure rate 0.012 at nominal 0.01 over 1,500 trials (seed 21)."""
    n = S.min_num_samples_chi_square(0.1, PAIRS, 0.01, 0.05)
    assert S.min_discrepancy_chi_square(n, PAIRS, 0.01, 0.05) <= 0.1
    exact = multinomial_counts(PAIRS, n, 1500, seed=21)
    assert failures(S.chi_square_test, exact, PAIRS, 0.01) <= max_failures(1500, 0.01)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_chi_square_design_alternatives_fail(alternative):
    """At the same n every alternative at TV 0.1 fails w.p. >= 0.95: measured miss rates over
    1,000 trials (seed 22): half split 0.031 (the least favourable case, so the bound is
    nearly tight), shift 0, outside 0."""
    n = S.min_num_samples_chi_square(0.1, PAIRS, 0.01, 0.05)
    wrong = alternative(0.1)
    assert math.isclose(S.tv_distance(wrong, PAIRS), 0.1)
    biased = multinomial_counts(wrong, n, 1000, seed=22)
    misses = 1000 - failures(S.chi_square_test, biased, PAIRS, 0.01)
    assert misses <= max_failures(1000, 0.05)


def test_chi_square_power_is_near_its_bound_for_the_least_favourable_alternative():
    """The bound is not vacuous: at 0.6 of min_discrepancy the half split is mostly missed.

    Measured miss rate 0.59 over 500 trials (seed 23); asserting > 0.05 + margin shows the
    worst case really is that hard, so min_discrepancy cannot be much smaller.
    """
    n = 2000
    d = 0.6 * S.min_discrepancy_chi_square(n, PAIRS, 0.01, 0.05)
    biased = multinomial_counts(half_split_alternative(d), n, 500, seed=23)
    misses = 500 - failures(S.chi_square_test, biased, PAIRS, 0.01)
    assert misses > max_failures(500, 0.05)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_tv_bound_design(alternative):
    """At n = min_num_samples_tv(0.1, 9, 0.01, 0.05) = 1,262: exact passes (0 / 2,000 failures,
    seed 24); alternatives at TV 0.1 fail (misses over 2,000, seed 25: half split 0.005,
    shift 0, outside 0)."""
    n = S.min_num_samples_tv(0.1, len(PAIRS), 0.01, 0.05)
    exact = multinomial_counts(PAIRS, n, 2000, seed=24)
    assert failures(S.tv_bound_test, exact, PAIRS, 0.01) <= max_failures(2000, 0.01)
    biased = multinomial_counts(alternative(0.1), n, 2000, seed=25)
    assert 2000 - failures(S.tv_bound_test, biased, PAIRS, 0.01) <= max_failures(2000, 0.05)


@pytest.mark.parametrize("sign", [+1, -1])
def test_mean_bound_design(sign):
    """At n = min_num_samples_mean(0.5, 1, 5, 0.01, 0.05) round lengths at the exact mean pass
    (n = 521; 0 / 2,000 failures) and a two-point law on {1, 5} (the largest variance) whose
    mean is off by +-0.5 fails (misses 0.005 and 0.009 of 2,000), seeds 26 and 27."""
    mu = expected_tokens(0.8, 4)
    n = ST.min_num_samples_mean(0.5, 1, 5, 0.01, 0.05)
    rng = np.random.default_rng(26 if sign > 0 else 27)
    lengths, probs = round_length_distribution(0.8, 4)
    exact = rng.choice(lengths, p=probs, size=(2000, n))
    fails = sum(not ST.mean_bound_test(v, mu, 1, 5, 0.01).passed for v in exact)
    assert fails <= max_failures(2000, 0.01)
    upper_share = (mu + sign * 0.5 - 1) / 4
    wrong = np.where(rng.random((2000, n)) < upper_share, 5, 1)
    misses = sum(ST.mean_bound_test(v, mu, 1, 5, 0.01).passed for v in wrong)
    assert misses <= max_failures(2000, 0.05)


# ------------------------------------------------------ round trips and monotonicity (exact)

rates = st.floats(1e-9, 0.4)
tvs = st.floats(1e-3, 1.0)


@given(d=tvs, cells=st.integers(1, 60), ffr=rates, fpr=rates)
def test_tv_round_trip_and_monotone(d, cells, ffr, fpr):
    n = S.min_num_samples_tv(d, cells, ffr, fpr)
    assert S.min_discrepancy_tv(n, cells, ffr, fpr) <= d
    assert n == 1 or S.min_discrepancy_tv(n - 1, cells, ffr, fpr) > d
    assert S.min_num_samples_tv(d / 2, cells, ffr, fpr) >= n
    assert S.min_num_samples_tv(d, cells + 1, ffr, fpr) >= n
    assert S.min_num_samples_tv(d, cells, ffr / 2, fpr) >= n
    assert S.min_num_samples_tv(d, cells, ffr, fpr / 2) >= n
    assert S.min_discrepancy_tv(2 * n, cells, ffr, fpr) <= S.min_discrepancy_tv(n, cells, ffr, fpr)


distributions = st.lists(st.floats(1e-3, 1.0), min_size=1, max_size=12).map(
    lambda w: {i: x / math.fsum(w) for i, x in enumerate(w)}
)


@given(d=tvs, expected=distributions, ffr=rates, fpr=rates)
def test_chi_square_round_trip_and_monotone(d, expected, ffr, fpr):
    n = S.min_num_samples_chi_square(d, expected, ffr, fpr)
    md = S.min_discrepancy_chi_square
    assert md(n, expected, ffr, fpr) <= d
    assert n == 1 or md(n - 1, expected, ffr, fpr) > d
    assert S.min_num_samples_chi_square(d / 2, expected, ffr, fpr) >= n
    assert S.min_num_samples_chi_square(d, expected, ffr / 2, fpr) >= n
    assert S.min_num_samples_chi_square(d, expected, ffr, fpr / 2) >= n
    for m in (n + 1, 2 * n, 10 * n):  # pooling shrinks with n, so no jump back up
        assert md(m, expected, ffr, fpr) <= md(n, expected, ffr, fpr)


@given(d=st.floats(1e-3, 10.0), width=st.floats(0.5, 20.0), ffr=rates, fpr=rates)
def test_mean_round_trip_and_monotone(d, width, ffr, fpr):
    n = ST.min_num_samples_mean(d, 1.0, 1.0 + width, ffr, fpr)
    assert ST.min_discrepancy_mean(n, 1.0, 1.0 + width, ffr, fpr) <= d
    assert n == 1 or ST.min_discrepancy_mean(n - 1, 1.0, 1.0 + width, ffr, fpr) > d
    assert ST.min_num_samples_mean(d, 1.0, 2.0 + width, ffr, fpr) >= n
    assert ST.min_num_samples_mean(d / 2, 1.0, 1.0 + width, ffr, fpr) >= n


def test_chi_square_min_discrepancy_exceeds_the_pooled_mass():
    """Mass moved inside the pooled cell is invisible, so the bound must include it."""
    pooled_mass = sum(SKEWED[i] for i in S.pooled_cells(list(SKEWED.values()), 200))
    assert pooled_mass == pytest.approx(0.05)
    assert S.min_discrepancy_chi_square(200, SKEWED, 0.01, 0.05) > pooled_mass
    shuffled = dict(SKEWED)
    shuffled[3], shuffled[4] = 0.005, 0.035  # TV 0.025 from SKEWED, all inside the pool
    assert S.chi_square_test({i: round(200 * p) for i, p in shuffled.items()}, SKEWED, 0.01).passed


# -------------------------------------------------------------- the module docstring's figures


def test_module_docstring_figures():
    assert round(S.tv_threshold(30000, 9, 1e-6), 4) == 0.0183
    assert round(S.min_discrepancy_tv(30000, 9, 1e-6, 1e-6), 4) == 0.0335
    assert round(S.min_discrepancy_chi_square(30000, PAIRS, 1e-6, 1e-6), 4) == 0.0319
    assert round(S.min_discrepancy_chi_square(30000, PAIRS, 1.5e-5, 1e-6), 4) == 0.0303
    assert round(0.015 + math.sqrt(math.log(1e6) / 60000), 4) == 0.0302
    assert S.min_num_samples_chi_square(0.0302, PAIRS, 1e-6, 1e-6) == 33333
    assert S.min_num_samples_tv(0.0302, 9, 1e-6, 1e-6) == 36815
    assert S.min_num_samples_chi_square(0.17, PAIRS, 1e-6, 1e-6) == 1181
    assert S.min_num_samples_tv(0.17, 9, 1e-6, 1e-6) == 1162


# --------------------------------------------------------------------------- plain behaviour


def test_zero_probability_outcome_fails_outright():
    counts = {key: 100 for key in PAIRS} | {(3, 3): 1}
    for expected in (PAIRS, PAIRS | {(3, 3): 0.0}):
        for test in (S.chi_square_test, S.tv_bound_test):
            result = test(counts, expected)
            assert not result.passed and result.p_value == 0.0
            assert "(3, 3)" in result.detail


def test_chi_square_agrees_with_scipy_and_accepts_samples_or_counts():
    rng = np.random.default_rng(31)
    idx = rng.choice(9, p=list(PAIRS.values()), size=3000)
    keys = list(PAIRS)
    samples = [keys[i] for i in idx]
    from_samples = S.chi_square_test(samples, PAIRS, 0.01)
    from_array = S.chi_square_test(np.array(samples), PAIRS, 0.01)
    counts = np.bincount(idx, minlength=9)
    from_counts = S.chi_square_test(dict(zip(keys, counts)), PAIRS, 0.01)
    ref = sps.chisquare(counts, 3000 * np.array(list(PAIRS.values())))
    assert from_samples == from_array == from_counts
    assert from_counts.statistic == pytest.approx(ref.statistic)
    assert from_counts.p_value == pytest.approx(ref.pvalue)
    assert from_counts.threshold == pytest.approx(sps.chi2.isf(0.01, 8))
    assert from_counts.n == 3000 and from_counts.name == "chi-square"


def test_chi_square_with_everything_pooled_says_so():
    result = S.chi_square_test({0: 1, 1: 1}, {0: 0.5, 1: 0.5})
    assert result.passed and result.p_value == 1.0 and "pooled" in result.detail


def test_tv_bound_reports_the_empirical_tv():
    result = S.tv_bound_test({0: 60, 1: 40}, {0: 0.5, 1: 0.5}, 0.01)
    assert result.statistic == pytest.approx(0.1)
    assert result.threshold == pytest.approx(S.tv_threshold(100, 2, 0.01))
    assert result.passed == (0.1 <= result.threshold)


def test_binomial_matches_scipy():
    result = ST.binomial_test(30, 100, 0.5, 0.01)
    assert result.p_value == pytest.approx(sps.binomtest(30, 100, 0.5).pvalue)
    assert not result.passed and result.statistic == 0.3 and result.threshold == 0.01


def test_mean_bound_value_outside_bounds_fails_outright():
    result = ST.mean_bound_test([1, 2, 3, 7], 2.0, 1, 5)
    assert not result.passed and result.p_value == 0.0 and "outside" in result.detail


def test_distances_and_budget():
    assert S.empirical_distribution([(0, 1), (0, 1), (2,), (0, 1)]) == {(0, 1): 0.75, (2,): 0.25}
    assert S.tv_distance({0: 0.5, 1: 0.5}, {1: 0.5, 2: 0.5}) == pytest.approx(0.5)
    assert S.tv_distance(PAIRS, PAIRS) == 0.0
    assert S.split_budget(1e-6, 4) == pytest.approx(2.5e-7)


BAD_INPUT = [
    (lambda: S.split_budget(0.0, 3), "total_false_fail_rate"),
    (lambda: S.split_budget(1e-6, 0), "n_checks"),
    (lambda: S.empirical_distribution([]), "samples"),
    (lambda: S.empirical_distribution([[0, 1]]), "hashable"),
    (lambda: S.tv_distance({0: 0.5}, {0: 1.0}), "a: probabilities sum"),
    (lambda: S.tv_distance({0: 1.0}, {0: -0.5, 1: 1.5}), "b: probability of 0"),
    (lambda: S.chi_square_test({0: -1, 1: 5}, {0: 0.5, 1: 0.5}), "count of 0 is negative"),
    (lambda: S.chi_square_test({0: 1.5}, {0: 1.0}), "not an integer"),
    (lambda: S.chi_square_test({0: 0, 1: 0}, {0: 0.5, 1: 0.5}), "n < 1"),
    (lambda: S.chi_square_test({0: 5}, {0: 0.5, 1: 0.4}), "expected: probabilities sum"),
    (lambda: S.chi_square_test({0: 5}, {0: 1.0}, 1.0), "false_fail_rate"),
    (lambda: S.chi_square_test({0: 5}, {0: 1.0}, method="exact"), "method"),
    (lambda: S.tv_bound_test("abc", {"a": 1.0}), "string"),
    (lambda: S.tv_threshold(0, 9, 0.01), "n: must be >= 1"),
    (lambda: S.tv_threshold(10, 0, 0.01), "n_cells"),
    (lambda: S.min_num_samples_tv(0.0, 9, 0.01, 0.05), "discrepancy"),
    (lambda: S.min_discrepancy_tv(10, 9, 0.01, 0.0), "false_pass_rate"),
    (lambda: S.min_num_samples_chi_square(1.5, PAIRS, 0.01, 0.05), "discrepancy"),
    (lambda: S.min_discrepancy_chi_square(10, {0: 2.0}, 0.01, 0.05), "expected"),
    (lambda: ST.mean_bound_test([], 2.0, 1, 5), "values"),
    (lambda: ST.mean_bound_test([1.0, float("nan")], 2.0, 1, 5), "values"),
    (lambda: ST.mean_bound_test([2.0], 7.0, 1, 5), "expected_mean"),
    (lambda: ST.mean_bound_test([2.0], 2.0, 5, 1), "lower, upper"),
    (lambda: ST.min_num_samples_mean(-0.1, 1, 5, 0.01, 0.05), "discrepancy"),
    (lambda: ST.min_discrepancy_mean(0, 1, 5, 0.01, 0.05), "n: must be >= 1"),
    (lambda: ST.binomial_test(5, 4, 0.5), "successes"),
    (lambda: ST.binomial_test(-1, 4, 0.5), "successes"),
    (lambda: ST.binomial_test(1, 0, 0.5), "trials"),
    (lambda: ST.binomial_test(1, 4, 1.2), "expected_p"),
    (lambda: ST.binomial_test(1, 4, 0.5, -0.1), "false_fail_rate"),
]


@pytest.mark.parametrize("call, message", BAD_INPUT)
def test_bad_input_raises_value_error_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        call()
