"""Formulas: the handout's section 3 table, its worked figures, and Hypothesis properties."""

import math

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from specverify import best_k, break_even_cost, expected_speedup, expected_tokens

# k, tokens and speedup at alpha 0.6, tokens and speedup at alpha 0.8 (c = 0.05), handout §3.
HANDOUT_TABLE = [
    (1, 1.60, 1.52, 1.80, 1.71),
    (2, 1.96, 1.78, 2.44, 2.22),
    (3, 2.18, 1.89, 2.95, 2.57),
    (4, 2.31, 1.92, 3.36, 2.80),
    (5, 2.38, 1.91, 3.69, 2.95),
    (6, 2.43, 1.87, 3.95, 3.04),
    (7, 2.46, 1.82, 4.16, 3.08),
    (8, 2.47, 1.77, 4.33, 3.09),
    (9, 2.48, 1.71, 4.46, 3.08),
    (10, 2.49, 1.66, 4.57, 3.05),
]


@pytest.mark.parametrize("k, t6, s6, t8, s8", HANDOUT_TABLE)
def test_section_3_table_to_two_decimals(k, t6, s6, t8, s8):
    assert round(expected_tokens(0.6, k), 2) == t6
    assert round(expected_speedup(0.6, k, 0.05), 2) == s6
    assert round(expected_tokens(0.8, k), 2) == t8
    assert round(expected_speedup(0.8, k, 0.05), 2) == s8


def test_handout_worked_figures():
    assert round(break_even_cost(0.8, 4), 2) == 0.59
    assert round(break_even_cost(0.6, 4), 2) == 0.33
    assert best_k(0.8, 0.32) == 3 and round(expected_speedup(0.8, 3, 0.32), 2) == 1.51
    assert best_k(0.6, 0.32) == 1 and round(expected_speedup(0.6, 1, 0.32), 2) == 1.21
    # best k at c = 0.05 read off the table: 4 for alpha 0.6, 8 for alpha 0.8
    assert best_k(0.6, 0.05) == 4 and best_k(0.8, 0.05) == 8


alphas = st.floats(0.0, 1.0, allow_nan=False)
ks = st.integers(1, 40)
costs = st.floats(0.0, 5.0, allow_nan=False)


@given(alphas, ks)
def test_expected_tokens_between_limits(alpha, k):
    event("alpha == 0" if alpha == 0 else "alpha == 1" if alpha == 1 else "0 < alpha < 1")
    t = expected_tokens(alpha, k)
    assert 1.0 <= t <= k + 1
    if alpha < 1:
        assert t <= 1 / (1 - alpha) + 1e-9  # saturation bound
        closed = (1 - alpha ** (k + 1)) / (1 - alpha)
        assert t == pytest.approx(closed, rel=1e-9)


@given(alphas, alphas, ks)
def test_expected_tokens_monotone_in_alpha(a, b, k):
    lo, hi = sorted((a, b))
    assert expected_tokens(lo, k) <= expected_tokens(hi, k) + 1e-12


@given(alphas, ks)
def test_expected_tokens_monotone_in_k_and_saturates(alpha, k):
    assert expected_tokens(alpha, k) <= expected_tokens(alpha, k + 1) + 1e-12
    if alpha <= 0.9:
        event("saturated regime")
        assert expected_tokens(alpha, 400) == pytest.approx(1 / (1 - alpha), rel=1e-9)


@given(alphas, ks, costs, costs)
def test_speedup_decreases_with_cost(alpha, k, c1, c2):
    lo, hi = sorted((c1, c2))
    assert expected_speedup(alpha, k, hi) <= expected_speedup(alpha, k, lo) + 1e-12


@given(alphas, ks, costs)
def test_break_even_is_where_speedup_crosses_one(alpha, k, c):
    be = break_even_cost(alpha, k)
    s = expected_speedup(alpha, k, c)
    if c < be - 1e-9:
        event("pays")
        assert s > 1
    elif c > be + 1e-9:
        event("does not pay")
        assert s < 1
    assert expected_speedup(alpha, k, be) == pytest.approx(1.0)


@given(alphas, costs)
def test_best_k_is_the_argmax(alpha, c):
    kb = best_k(alpha, c, max_k=12)
    best = expected_speedup(alpha, kb, c)
    assert all(expected_speedup(alpha, k, c) <= best + 1e-12 for k in range(1, 13))


def test_no_zero_division_at_alpha_one():
    assert expected_tokens(1.0, 1) == 2.0 and math.isfinite(expected_speedup(1.0, 7, 0.0))
