"""Statistical tests of sampled outcomes against exact probabilities, with stated error rates.

This module knows no sampler. It compares counts of categorical outcomes (token tuples, round
lengths, acceptance counts) with exact expected probabilities. Every test takes a
``false_fail_rate`` (the probability of failing a correct implementation) and comes with a
``min_num_samples_*`` / ``min_discrepancy_*`` pair that states its power: the smallest
discrepancy detected with probability >= 1 - ``false_pass_rate`` at n samples, and the n needed
to detect a given discrepancy. The style follows TensorFlow Probability's
``tensorflow_probability/python/internal/statistical_testing.py`` (assert_true_mean_equal_by_dkwm
paired with min_num_samples_for_dkwm_mean_test / min_discrepancy_of_true_means_detectable_by_dkwm)
and ``scipy.stats``. Discrepancies are total-variation (TV) distances throughout; for speculative
decoding TV(p, q) = 1 - alpha (Leviathan et al., arXiv 2211.17192; Chen et al., 2302.01318).

Tests and their bounds
----------------------
* ``chi_square_test``: Pearson's chi-square or the G-test (scipy.stats.power_divergence),
  asymptotic chi-square null; cells with expected count < 5 pooled. Power from the noncentral
  chi-square with the least favourable alternative at a given TV (chi2-divergence >= 4 TV^2).
* ``tv_bound_test``: distribution-free. Bretagnolle-Huber-Carol in the form of Weissman et al.
  (2003, HPL-2003-97, Thm 2.1): P(||p_hat - p||_1 >= eps) <= (2^K - 2) exp(-n eps^2 / 2), or
  McDiarmid on E[TV] <= sqrt((K - 1) / n) / 2, whichever threshold is smaller.

The tests of one scalar (the mean of a bounded variable, a proportion) are
``specverify.laws.scalar_tests``.

How these compare with the handout's fixed TV < 0.015 test, with the figures: docs/STATISTICS.md.

Error budget: a run that performs m checks gives each ``split_budget(total, m)`` (Bonferroni),
so the probability that any check fails a correct implementation is at most ``total``.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from ..common.validation import DEFAULT_FALSE_FAIL_RATE as DEFAULT_FALSE_FAIL_RATE  # re-exported: the suite's default
from ..common.validation import check_discrepancy, check_int, check_rate

PROB_SUM_TOL = 1e-9  # expected-probability dicts must sum to 1 within this (absolute)
MIN_EXPECTED_COUNT = 5.0  # chi-square cells below this expected count are pooled
_MAX_N = 10**15  # search cap for min_num_samples_*


@dataclass(frozen=True)
class TestResult:
    """Outcome of one statistical check. ``threshold`` is documented by each test."""

    __test__ = False  # not a pytest test class, despite the name

    name: str
    passed: bool
    statistic: float
    threshold: float
    p_value: float | None
    n: int
    false_fail_rate: float
    detail: str = ""


# ----------------------------------------------------------------------------- input checks


def check_probability_dict(name: str, probs) -> dict:
    """Return ``probs`` as {outcome: float} after checking it is a distribution.

    Values must be finite, >= 0 and sum to 1 within ``PROB_SUM_TOL``; zero entries are kept.
    """
    if not isinstance(probs, Mapping):
        kind = type(probs).__name__
        raise ValueError(f"{name}: must be a dict {{outcome: probability}}, got {kind}")
    if not probs:
        raise ValueError(f"{name}: empty distribution")
    out = {}
    for key, value in probs.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{name}: probability of {key!r} is not a real number ({value!r})")
        v = float(value)
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"{name}: probability of {key!r} is {v!r}; must be finite and >= 0")
        out[key] = v
    total = math.fsum(out.values())
    if abs(total - 1.0) > PROB_SUM_TOL:
        raise ValueError(f"{name}: probabilities sum to {total!r}, not 1 (tolerance {PROB_SUM_TOL:g})")
    return out


def _counts(name: str, samples_or_counts) -> dict:
    """A dict {outcome: count} from either such a dict or a sequence of hashable outcomes."""
    if isinstance(samples_or_counts, Mapping):
        counts = {}
        for key, c in samples_or_counts.items():
            ok = isinstance(c, numbers.Integral) or (isinstance(c, numbers.Real) and float(c).is_integer())
            if isinstance(c, bool) or not ok:
                raise ValueError(f"{name}: count of {key!r} is not an integer ({c!r})")
            if c < 0:
                raise ValueError(f"{name}: count of {key!r} is negative ({c})")
            counts[key] = int(c)
    else:
        if isinstance(samples_or_counts, (str, bytes)):
            raise ValueError(f"{name}: expected outcomes or a dict of counts, got a string")
        if isinstance(samples_or_counts, np.ndarray):  # rows of a 2-D array become tuples
            samples_or_counts = [tuple(row) if isinstance(row, list) else row for row in samples_or_counts.tolist()]
        try:
            counts = dict(Counter(samples_or_counts))
        except TypeError as exc:
            raise ValueError(f"{name}: outcomes must be hashable, e.g. tuples ({exc})") from None
    if sum(counts.values()) < 1:
        raise ValueError(f"{name}: no samples (n < 1)")
    return counts


# ------------------------------------------------------------------------------- distances


def split_budget(total_false_fail_rate: float, n_checks: int) -> float:
    """Bonferroni: each of ``n_checks`` checks gets ``total / n_checks``, so that by the union
    bound the probability that any check fails a correct implementation is <= ``total``."""
    total = check_rate("total_false_fail_rate", total_false_fail_rate)
    return total / check_int("n_checks", n_checks, 1)


def empirical_distribution(samples) -> dict:
    """{outcome: relative frequency} of a non-empty sequence of hashable outcomes."""
    if isinstance(samples, Mapping):
        raise ValueError("samples: expected a sequence of outcomes, got a dict (counts?)")
    counts = _counts("samples", samples)
    n = sum(counts.values())
    return {key: c / n for key, c in counts.items()}


def total_variation(a: Mapping, b: Mapping) -> float:
    """0.5 * sum |a(x) - b(x)| over the union of keys (a missing key has probability 0); no
    input checks, for callers whose dicts are distributions by construction (specverify.laws.exact)."""
    return 0.5 * math.fsum(abs(a.get(x, 0.0) - b.get(x, 0.0)) for x in a.keys() | b.keys())


def tv_distance(a: dict, b: dict) -> float:
    """``total_variation`` of two checked probability dicts."""
    return total_variation(check_probability_dict("a", a), check_probability_dict("b", b))


def _split_support(counts: dict, expected: dict):
    """(outcomes with p > 0, their probabilities, their counts, observed outcomes with p = 0)."""
    support = [k for k, v in expected.items() if v > 0]
    probs = np.array([expected[k] for k in support])
    observed = np.array([counts.get(k, 0) for k in support], dtype=np.int64)
    impossible = [k for k, c in counts.items() if c > 0 and expected.get(k, 0.0) == 0.0]
    return support, probs / probs.sum(), observed, impossible


def _impossible_result(name, counts, impossible, threshold, rate, statistic=math.inf):
    n = sum(counts.values())
    shown = ", ".join(f"{k!r} x{counts[k]}" for k in impossible[:5])
    more = f" and {len(impossible) - 5} more" if len(impossible) > 5 else ""
    return TestResult(
        name,
        False,
        statistic,
        threshold,
        0.0,
        n,
        rate,
        f"observed outcome(s) with expected probability 0: {shown}{more}",
    )


# ------------------------------------------------------------------------------ chi-square


def pooled_cells(probs, n: int) -> np.ndarray:
    """Indices of the cells merged into one pooled cell for a chi-square test at n samples.

    All cells with expected count n*p < 5 are pooled; while the pooled cell's expected count is
    still < 5, the smallest remaining cell joins it. Empty when no cell is below 5.
    """
    expected = n * np.asarray(probs, dtype=np.float64)
    order = np.argsort(expected, kind="stable")
    j = int(np.sum(expected < MIN_EXPECTED_COUNT))
    if j == 0:
        return order[:0]
    cumulative = np.cumsum(expected[order])
    while j < len(order) and cumulative[j - 1] < MIN_EXPECTED_COUNT:
        j += 1
    return order[:j]


def _pool(values: np.ndarray, pooled: np.ndarray) -> np.ndarray:
    if len(pooled) == 0:
        return values
    keep = np.ones(len(values), dtype=bool)
    keep[pooled] = False
    return np.append(values[keep], values[pooled].sum())


_LAMBDA = {"pearson": "pearson", "g-test": "log-likelihood"}


def chi_square_test(
    samples_or_counts,
    expected: dict,
    false_fail_rate=DEFAULT_FALSE_FAIL_RATE,
    method: str = "pearson",
) -> TestResult:
    """Pearson chi-square (``method="pearson"``) or G-test (``"g-test"``) of counts vs ``expected``.

    Cells with expected count < 5 are pooled (``pooled_cells``). An observed outcome whose
    expected probability is 0 (or that is absent from ``expected``) fails outright with
    p_value 0. Fails when p_value < false_fail_rate; ``threshold`` is the equivalent critical
    value chi2.isf(false_fail_rate, df) of the statistic. With df = 0 (everything pooled) no
    test is possible and the result passes with p_value 1 and says so in ``detail``.

    The p-value is asymptotic (scipy.stats.power_divergence): with small expected counts
    Pearson's tail far below 1e-3 is not guaranteed; ``tv_bound_test`` is the exact-rate option.
    Measured false-fail rate (tests/test_stats.py): Pearson 0.0088 at nominal 0.01 over 4,000
    trials (9 cells, n = 1,000, seed 11); with pooling (7 cells, 4 pooled, n = 200) Pearson
    0.053 (seed 12) and G-test 0.048 (seed 13) at nominal 0.05 over 3,000 trials each.
    """
    if method not in _LAMBDA:
        raise ValueError(f"method: must be one of {sorted(_LAMBDA)}, got {method!r}")
    rate = check_rate("false_fail_rate", false_fail_rate)
    counts = _counts("samples_or_counts", samples_or_counts)
    expected = check_probability_dict("expected", expected)
    n = sum(counts.values())
    name = "chi-square" if method == "pearson" else "g-test"
    _, probs, observed, impossible = _split_support(counts, expected)
    pooled = pooled_cells(probs, n)
    f_obs = _pool(observed.astype(np.float64), pooled)
    f_exp = _pool(n * probs, pooled)
    df = len(f_obs) - 1
    threshold = float(special.chdtri(df, rate)) if df > 0 else math.inf  # chi2.isf(rate, df)
    if impossible:
        return _impossible_result(name, counts, impossible, threshold, rate)
    if df == 0:
        return TestResult(
            name, True, 0.0, threshold, 1.0, n, rate, f"no test possible: all {len(probs)} cells pooled at n = {n}"
        )
    stat, p_value = stats.power_divergence(f_obs, f_exp, lambda_=_LAMBDA[method])
    stat, p_value = float(stat), float(p_value)
    passed = p_value >= rate
    detail = (
        f"{name} {stat:.4g} on {df} df ({len(probs)} cells, {len(pooled)} pooled), "
        f"p = {p_value:.3g} {'>=' if passed else '<'} {rate:.3g}, n = {n}"
    )
    return TestResult(name, passed, stat, threshold, p_value, n, rate, detail)


@functools.lru_cache(maxsize=1024)
@functools.lru_cache(maxsize=4096)
def _noncentrality_needed(df: int, false_fail_rate: float, false_pass_rate: float) -> float:
    """Smallest noncentrality lambda with P(ncx2(df, lambda) > chi2.isf(ffr, df)) >= 1 - fpr
    (memoized: a sample size's search asks it again and again with the same arguments)."""
    critical = stats.chi2.isf(false_fail_rate, df)

    def log_miss_excess(lam):  # log P(miss) - log(fpr); decreasing in lambda
        return math.log(max(stats.ncx2.cdf(critical, df, lam), 1e-300)) - math.log(false_pass_rate)

    if stats.chi2.cdf(critical, df) <= false_pass_rate:
        return 0.0
    hi = 1.0
    while log_miss_excess(hi) > 0:
        hi *= 2.0
    return float(optimize.brentq(log_miss_excess, 0.0, hi, xtol=1e-10, rtol=1e-12))


def min_discrepancy_chi_square(n, expected: dict, false_fail_rate, false_pass_rate) -> float:
    """Smallest TV from ``expected`` that ``chi_square_test`` detects w.p. >= 1 - false_pass_rate.

    A conservative bound, valid for every alternative r at that TV (asymptotic noncentral
    chi-square power), the sum of three terms:

    * ln(1/fpr) / n: if r puts mass m >= ln(1/fpr)/n outside the support, some sample lands
      there (outright fail) except with probability (1 - m)^n <= fpr. Otherwise, given no such
      sample, the in-support samples come from a distribution at TV >= d - m from ``expected``.
    * the pooled cells' probability P: moving mass inside the pooled cell is invisible, so the
      pooled-partition TV is >= d - m - P.
    * sqrt(lambda* / (4 n)): the noncentrality of the test on the pooled partition is
      n * chi2-divergence(r || p) (Pearson) or about 2 n KL (G-test), both >= 4 n TV^2
      (Cauchy-Schwarz: (sum |r - p|)^2 <= sum (r - p)^2 / p; Pinsker). So small divergence is
      impossible at large TV, and the least favourable alternative has divergence exactly 4 TV^2
      (r = p (1 +- 2 TV) on two halves of mass 1/2). lambda* is the noncentrality giving power
      1 - fpr, computed with df = (support cells - 1): by Das Gupta & Perlman (1974, JASA 69)
      power falls with df at fixed lambda, so pooling (fewer df) only helps.

    Every term is non-increasing in n, so the result is monotone and ``min_num_samples`` is
    its exact inverse. A value above 1 means no alternative is guaranteed to be detected.
    """
    n = check_int("n", n, 1)
    expected = check_probability_dict("expected", expected)
    ffr = check_rate("false_fail_rate", false_fail_rate)
    fpr = check_rate("false_pass_rate", false_pass_rate)
    probs = np.array([v for v in expected.values() if v > 0])
    probs = probs / probs.sum()
    outside = math.log(1.0 / fpr) / n
    if len(probs) == 1:
        return outside
    pooled_mass = float(probs[pooled_cells(probs, n)].sum())
    lam = _noncentrality_needed(len(probs) - 1, ffr, fpr)
    return outside + pooled_mass + math.sqrt(lam / (4.0 * n))


def min_num_samples_chi_square(discrepancy, expected: dict, false_fail_rate, false_pass_rate) -> int:
    """Smallest n at which ``min_discrepancy_chi_square(n, ...) <= discrepancy`` (TV)."""
    d = check_discrepancy("discrepancy", discrepancy)
    expected = check_probability_dict("expected", expected)
    check_rate("false_fail_rate", false_fail_rate)
    check_rate("false_pass_rate", false_pass_rate)
    return smallest_n(lambda n: min_discrepancy_chi_square(n, expected, false_fail_rate, false_pass_rate), d)


def smallest_n(min_discrepancy_at, discrepancy: float) -> int:
    """Smallest integer n >= 1 with min_discrepancy_at(n) <= discrepancy (non-increasing in n)."""
    if min_discrepancy_at(1) <= discrepancy:
        return 1
    hi = 2
    while min_discrepancy_at(hi) > discrepancy:
        hi *= 2
        if hi > _MAX_N:
            raise ValueError(f"discrepancy: {discrepancy!r} needs more than {_MAX_N:g} samples")
    lo = hi // 2  # invariant: fails at lo, holds at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if min_discrepancy_at(mid) <= discrepancy:
            hi = mid
        else:
            lo = mid
    return hi


# ------------------------------------------------------------------------- TV bound test


def _log_subsets(n_cells: int) -> float:
    """log(2^K - 2): the number of non-trivial subsets A in the union bound over p_hat(A) - p(A)."""
    return n_cells * math.log(2.0) + math.log1p(-(2.0 ** (1 - n_cells)))


def _tv_bounds(n: int, n_cells: int, rate: float) -> tuple[float, float]:
    """(Weissman/BHC threshold, McDiarmid threshold), each with P(TV >= t) <= rate."""
    log_r = math.log(1.0 / rate)
    bhc = math.sqrt((_log_subsets(n_cells) + log_r) / (2.0 * n))
    mcdiarmid = 0.5 * math.sqrt((n_cells - 1) / n) + math.sqrt(log_r / (2.0 * n))
    return bhc, mcdiarmid


def tv_threshold(n: int, n_cells: int, false_fail_rate) -> float:
    """A TV level t with P(TV(p_hat, p) >= t) <= false_fail_rate for any p on n_cells cells.

    The smaller of two distribution-free bounds (the choice depends on n, K and the rate only,
    never on data, so the smaller one is still a valid threshold):

    * Weissman et al. (2003) / Bretagnolle-Huber-Carol: TV >= t iff p_hat(A) - p(A) >= t for
      some of the 2^K - 2 non-trivial subsets A, each bounded by Hoeffding exp(-2 n t^2):
      t = sqrt((ln(2^K - 2) + ln(1/rate)) / (2 n)). Tighter for K below about 700.
    * McDiarmid: TV changes by <= 1/n per sample and E[TV] <= sqrt((K - 1) / n) / 2:
      t = sqrt((K - 1) / n) / 2 + sqrt(ln(1/rate) / (2 n)). Tighter for large K.

    With one cell p_hat = p always and the threshold is 0.
    """
    n = check_int("n", n, 1)
    n_cells = check_int("n_cells", n_cells, 1)
    rate = check_rate("false_fail_rate", false_fail_rate)
    if n_cells == 1:
        return 0.0
    return min(_tv_bounds(n, n_cells, rate))


def _tv_p_value(tv: float, n: int, n_cells: int, rate: float) -> float:
    """Conservative p-value from the bound that ``tv_threshold`` picked for (n, K, rate)."""
    bhc, mcdiarmid = _tv_bounds(n, n_cells, rate)
    if bhc <= mcdiarmid:
        log_p = _log_subsets(n_cells) - 2.0 * n * tv * tv
    else:
        excess = tv - 0.5 * math.sqrt((n_cells - 1) / n)
        log_p = -2.0 * n * excess * excess if excess > 0 else 0.0
    return math.exp(min(log_p, 0.0))


def tv_bound_test(samples_or_counts, expected: dict, false_fail_rate=DEFAULT_FALSE_FAIL_RATE) -> TestResult:
    """Distribution-free: fails when TV(empirical, expected) > ``tv_threshold(n, K, rate)``.

    K = number of outcomes with positive expected probability. No "anything else" cell is
    needed for the false-fail rate: under the null no sample falls outside the support. An
    observed outcome outside the support fails outright (p_value 0), which only adds power.
    ``threshold`` is the TV level; ``p_value`` is the chosen bound evaluated at the observed TV.
    Measured false-fail rate: 0.001 at nominal 0.05 over 6,000 trials (9 cells, n = 1,000,
    seed 14): distribution-free, hence conservative (threshold 0.068; the exact TV's 95%
    quantile is 0.051 there).
    """
    rate = check_rate("false_fail_rate", false_fail_rate)
    counts = _counts("samples_or_counts", samples_or_counts)
    expected = check_probability_dict("expected", expected)
    n = sum(counts.values())
    support, probs, observed, impossible = _split_support(counts, expected)
    n_cells = len(support)
    threshold = tv_threshold(n, n_cells, rate)
    outside = sum(counts[key] for key in impossible)
    tv = 0.5 * (float(np.abs(observed / n - probs).sum()) + outside / n)
    if impossible:
        return _impossible_result("tv-bound", counts, impossible, threshold, rate, tv)
    p_value = _tv_p_value(tv, n, n_cells, rate) if n_cells > 1 else 1.0
    passed = tv <= threshold
    detail = (
        f"TV {tv:.4g} {'<=' if passed else '>'} {threshold:.4g} "
        f"(distribution-free, {n_cells} cells, n = {n}, false-fail rate {rate:.3g})"
    )
    return TestResult("tv-bound", passed, tv, threshold, p_value, n, rate, detail)


def min_discrepancy_tv(n, n_cells, false_fail_rate, false_pass_rate) -> float:
    """Smallest TV that ``tv_bound_test`` detects with probability >= 1 - false_pass_rate.

    Let r be the true distribution at TV d from p and A = {x : r(x) > p(x)} (outcomes outside
    the support included), so d = r(A) - p(A). Then TV(p_hat, p) >= p_hat(A) - p(A)
    = d + (p_hat(A) - r(A)), and one-sided Hoeffding gives
    P(p_hat(A) - r(A) <= -(d - t)) <= exp(-2 n (d - t)^2). So every alternative at
    d = tv_threshold(n, K, ffr) + sqrt(ln(1/fpr) / (2 n)) fails w.p. >= 1 - fpr.
    Distribution-free; proportional to 1/sqrt(n). Values above 1 mean nothing is guaranteed.
    """
    n = check_int("n", n, 1)
    fpr = check_rate("false_pass_rate", false_pass_rate)
    shortfall = hoeffding_radius(n, 1.0, math.log(1.0 / fpr))  # of p_hat(A) below r(A)
    return tv_threshold(n, n_cells, false_fail_rate) + shortfall


def min_num_samples_tv(discrepancy, n_cells, false_fail_rate, false_pass_rate) -> int:
    """Smallest n at which ``min_discrepancy_tv(n, ...) <= discrepancy``."""
    d = check_discrepancy("discrepancy", discrepancy)
    check_int("n_cells", n_cells, 1)
    check_rate("false_fail_rate", false_fail_rate)
    check_rate("false_pass_rate", false_pass_rate)
    return smallest_n(lambda n: min_discrepancy_tv(n, n_cells, false_fail_rate, false_pass_rate), d)


def hoeffding_radius(n: int, width: float, log_inverse_rate: float) -> float:
    """Hoeffding's deviation for the mean of n values in an interval of ``width``: the t with
    exp(-2 n t^2 / width^2) = exp(-log_inverse_rate)."""
    return width * math.sqrt(log_inverse_rate / (2.0 * n))
