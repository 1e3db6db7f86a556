"""Two-sample chi-square: are two sets of draws from one law? For laws neither side states.

``two_sample_test(a, b, false_fail_rate)`` compares the outcomes ``a`` (a subject's runs) with
``b`` (a reference's runs, e.g. an engine's own target-only path that the enumerator cannot
follow) by Pearson's chi-square on the 2 x C contingency table of their counts
(``scipy.stats.chi2_contingency`` without Yates' correction), the cells whose pooled expected
count is below ``MIN_EXPECTED`` merged into one cell so that the asymptotic law holds. Under
the null hypothesis (both from one law) the statistic is chi-square with C - 1 degrees of
freedom: the false-fail rate is ``false_fail_rate`` (asymptotically).

Power (``min_detectable_tv``): the statistic's noncentrality is n_eff x sum (r_a - r_b)^2 /
r_bar with n_eff = n_a n_b / (n_a + n_b) and r_bar the pooled law; by Cauchy-Schwarz that sum is
at least (sum |r_a - r_b|)^2 = 4 TV^2, so a TV of sqrt(lambda* / (4 n_eff)) is seen with
probability 1 - ``false_pass_rate`` (lambda*: the noncentrality that gives that power at the
test's level and degrees of freedom, scipy's ``ncx2``), plus the mass of the merged cells (a
difference inside them is invisible). The same bound as ``laws.stats.min_discrepancy_chi_square``
with n_eff in place of n (Cochran 1954, "Some methods for strengthening the common chi-square
tests", Biometrics 10).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

MIN_EXPECTED = 5.0
"""A cell whose expected count (pooled law x the smaller sample) is below this is merged."""


@dataclass(frozen=True)
class TwoSampleResult:
    """The test's outcome: p-value, passed (p >= the false-fail rate), the statistic, its degrees
    of freedom, both sample sizes and the TV it sees with probability 1 - false_pass_rate."""

    p_value: float
    passed: bool
    statistic: float
    df: int
    n_a: int
    n_b: int
    min_detectable_tv: float


def noncentrality_needed(df: int, false_fail_rate: float, false_pass_rate: float) -> float:
    """lambda with P(noncentral chi-square(df, lambda) > its level-``false_fail_rate`` quantile)
    = 1 - ``false_pass_rate``."""
    from scipy.optimize import brentq
    from scipy.stats import chi2, ncx2

    cut = chi2.isf(false_fail_rate, df)
    power = lambda lam: ncx2.sf(cut, df, lam) - (1.0 - false_pass_rate)  # noqa: E731
    hi = 1.0
    while power(hi) < 0:
        hi *= 2.0
    return float(brentq(power, 1e-9, hi))


def merged_counts(a: Counter, b: Counter) -> tuple[list[int], list[int], float]:
    """Both samples' counts over the cells (rare cells merged into the last), and the pooled
    law's mass of the merged cells."""
    n_a, n_b = sum(a.values()), sum(b.values())
    n = n_a + n_b
    small = min(n_a, n_b)
    keys = sorted(set(a) | set(b), key=lambda x: (-(a[x] + b[x]), repr(x)))
    big = [x for x in keys if (a[x] + b[x]) / n * small >= MIN_EXPECTED]
    rest = [x for x in keys if x not in set(big)]
    ca, cb = [a[x] for x in big], [b[x] for x in big]
    merged = sum(a[x] + b[x] for x in rest) / n
    if rest:
        ca.append(sum(a[x] for x in rest))
        cb.append(sum(b[x] for x in rest))
    return ca, cb, merged


def two_sample_test(
    a: Sequence[Hashable], b: Sequence[Hashable], false_fail_rate: float, false_pass_rate: float = 0.05
) -> TwoSampleResult:
    """Pearson's two-sample chi-square of outcomes ``a`` against ``b`` at ``false_fail_rate``
    (module docstring); ValueError naming the argument when either sample is empty or a rate is
    outside (0, 1)."""
    import numpy as np
    from scipy.stats import chi2_contingency

    for name, rate in (("false_fail_rate", false_fail_rate), ("false_pass_rate", false_pass_rate)):
        if not 0 < rate < 1:
            raise ValueError(f"{name}: must lie in (0, 1), got {rate!r}")
    if not a or not b:
        raise ValueError(f"{'a' if not a else 'b'}: empty sample; the test needs draws on both sides")
    ca, cb, merged = merged_counts(Counter(a), Counter(b))
    n_a, n_b = len(a), len(b)
    n_eff = n_a * n_b / (n_a + n_b)
    cells = len(ca)
    if cells < 2:
        return TwoSampleResult(1.0, True, 0.0, 0, n_a, n_b, min(1.0, merged))
    statistic, p, df, _ = chi2_contingency(np.array([ca, cb]), correction=False)
    lam = noncentrality_needed(int(df), false_fail_rate, false_pass_rate)
    tv = min(1.0, merged + math.sqrt(lam / (4.0 * n_eff)))
    return TwoSampleResult(float(p), bool(p >= false_fail_rate), float(statistic), int(df), n_a, n_b, tv)


__all__ = ["MIN_EXPECTED", "TwoSampleResult", "merged_counts", "noncentrality_needed", "two_sample_test"]
