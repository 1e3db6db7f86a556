"""Statistical tests of one scalar against its exact value, with stated error rates.

Where ``specverify.laws.stats`` compares counts of categorical outcomes with a law, these compare
one number: the mean of a variable bounded in [lower, upper] (round lengths lie in [1, k + 1]),
or a proportion (acceptance counts, P(at least i drafts accepted) = alpha**i). As in ``stats``,
every test takes a ``false_fail_rate`` (the probability of failing a correct implementation),
returns a ``stats.TestResult``, and the mean test comes with its ``min_num_samples_mean`` /
``min_discrepancy_mean`` pair stating its power.

* ``mean_bound_test``: two-sided Hoeffding for a variable bounded in [lower, upper].
* ``binomial_test``: exact two-sided binomial (scipy.stats.binomtest).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..common.validation import DEFAULT_FALSE_FAIL_RATE, check_finite, check_int, check_rate
from .stats import TestResult, hoeffding_radius, smallest_n

# ------------------------------------------------------------------------------ mean bound


def _check_bounds(lower, upper) -> tuple[float, float]:
    lo, hi = check_finite("lower", lower), check_finite("upper", upper)
    if not lo < hi:
        raise ValueError(f"lower, upper: need lower < upper, got {lo!r} and {hi!r}")
    return lo, hi


def mean_bound_test(values, expected_mean, lower, upper, false_fail_rate=DEFAULT_FALSE_FAIL_RATE) -> TestResult:
    """Two-sided Hoeffding test of the mean of a variable bounded in [lower, upper].

    Fails when |mean - expected_mean| > threshold = (upper - lower) sqrt(ln(2/rate) / (2 n)),
    since P(|mean - mu| >= t) <= 2 exp(-2 n t^2 / (upper - lower)^2). A value outside
    [lower, upper] is impossible under the null and fails outright (p_value 0). ``p_value`` is
    the Hoeffding bound at the observed deviation. Example: round lengths lie in [1, k + 1].
    Measured false-fail rate: 0.00075 at nominal 0.05 over 4,000 trials (round lengths,
    alpha 0.8, k = 4, n = 200, seed 15); Hoeffding ignores the variance (1.60^2 here vs the
    worst case 2^2 on [1, 5]), hence conservative.
    """
    rate = check_rate("false_fail_rate", false_fail_rate)
    lo, hi = _check_bounds(lower, upper)
    mu = check_finite("expected_mean", expected_mean)
    if not lo <= mu <= hi:
        raise ValueError(f"expected_mean: {mu!r} lies outside [lower, upper] = [{lo!r}, {hi!r}]")
    try:
        arr = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"values: not numeric ({exc})") from None
    n = int(arr.size)
    if n < 1:
        raise ValueError("values: no samples (n < 1)")
    if not np.all(np.isfinite(arr)):
        raise ValueError("values: contains NaN or inf")
    threshold = hoeffding_radius(n, hi - lo, math.log(2.0 / rate))
    mean = float(arr.mean())
    outside = arr[(arr < lo) | (arr > hi)]
    if outside.size:
        return TestResult(
            "mean-bound",
            False,
            mean,
            threshold,
            0.0,
            n,
            rate,
            f"{outside.size} value(s) outside [{lo:g}, {hi:g}], e.g. {outside[0]:g}",
        )
    deviation = abs(mean - mu)
    p_value = min(1.0, 2.0 * math.exp(-2.0 * n * deviation**2 / (hi - lo) ** 2))
    passed = deviation <= threshold
    detail = (
        f"mean {mean:.5g} vs {mu:.5g}: |diff| {deviation:.3g} {'<=' if passed else '>'} "
        f"{threshold:.3g} (Hoeffding on [{lo:g}, {hi:g}], n = {n})"
    )
    return TestResult("mean-bound", passed, mean, threshold, p_value, n, rate, detail)


def min_discrepancy_mean(n, lower, upper, false_fail_rate, false_pass_rate) -> float:
    """Smallest |true mean - expected_mean| that ``mean_bound_test`` detects w.p. >= 1 - fpr.

    If the true mean is off by d, passing needs the sample mean to move d - t towards the
    expected mean, which one-sided Hoeffding bounds by exp(-2 n (d - t)^2 / w^2); so
    d = w (sqrt(ln(2/ffr) / (2n)) + sqrt(ln(1/fpr) / (2n))), with w = upper - lower.
    """
    n = check_int("n", n, 1)
    lo, hi = _check_bounds(lower, upper)
    ffr = check_rate("false_fail_rate", false_fail_rate)
    fpr = check_rate("false_pass_rate", false_pass_rate)
    return hoeffding_radius(n, hi - lo, math.log(2.0 / ffr)) + hoeffding_radius(n, hi - lo, math.log(1.0 / fpr))


def min_num_samples_mean(discrepancy, lower, upper, false_fail_rate, false_pass_rate) -> int:
    """Smallest n with ``min_discrepancy_mean(n, ...) <= discrepancy`` (units of the values)."""
    d = check_finite("discrepancy", discrepancy)
    if d <= 0:
        raise ValueError(f"discrepancy: must be > 0, got {d!r}")
    _check_bounds(lower, upper)
    check_rate("false_fail_rate", false_fail_rate)
    check_rate("false_pass_rate", false_pass_rate)
    return smallest_n(lambda n: min_discrepancy_mean(n, lower, upper, false_fail_rate, false_pass_rate), d)


# -------------------------------------------------------------------------------- binomial


def binomial_test(successes, trials, expected_p, false_fail_rate=DEFAULT_FALSE_FAIL_RATE) -> TestResult:
    """Exact two-sided binomial test (scipy.stats.binomtest); fails when p_value < rate.

    For acceptance counts such as P(at least i drafts accepted) = alpha**i. ``statistic`` is
    the observed proportion and ``threshold`` the p-value cut-off (= false_fail_rate). The
    exact test is conservative: its false-fail rate is <= the nominal rate for every p.
    Measured false-fail rate: 0.0469 at nominal 0.05 over 20,000 draws (p = 0.64, 400 trials
    each, seed 16); exact rate for that p and n: 0.0479.
    """
    rate = check_rate("false_fail_rate", false_fail_rate)
    trials = check_int("trials", trials, 1)
    successes = check_int("successes", successes, minimum=0)
    if successes > trials:
        raise ValueError(f"successes: {successes} exceeds trials ({trials})")
    p = check_finite("expected_p", expected_p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"expected_p: must lie in [0, 1], got {p!r}")
    p_value = float(stats.binomtest(successes, trials, p, alternative="two-sided").pvalue)
    passed = p_value >= rate
    detail = (
        f"{successes}/{trials} = {successes / trials:.4g} vs {p:.4g}: "
        f"p = {p_value:.3g} {'>=' if passed else '<'} {rate:.3g} (exact binomial)"
    )
    return TestResult("binomial", passed, successes / trials, rate, p_value, trials, rate, detail)
