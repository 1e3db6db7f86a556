"""Every bad input gets a clear error that names the argument and the problem."""

import numpy as np
import pytest

from specverify import acceptance_rate, best_k, break_even_cost, expected_speedup, expected_tokens, speculative_step
from specverify.common.validation import SUM_TOL

P = [0.5, 0.3, 0.2]
Q = [0.3, 0.3, 0.4]


@pytest.mark.parametrize(
    "p, q, match",
    [
        ([0.5, np.nan, 0.5], Q, r"p: entry 1 is nan"),
        (P, [0.3, np.inf, 0.4], r"q: entry 1 is inf"),
        ([0.6, -0.1, 0.5], Q, r"p: entry 1 is negative"),
        ([0.5, 0.3, 0.3], Q, r"p: sums to 1\.1.*not 1 \(tolerance 1e-05\)"),
        (P, [0.5, 0.5], r"p and q have different lengths \(3 and 2\)"),
        ([[0.5, 0.5]], [[0.5, 0.5]], r"p: expected a 1-D probability vector"),
        ([], [], r"p: empty probability vector"),
        (["a", "b"], Q, r"p: not a numeric vector"),
    ],
)
def test_acceptance_rate_rejects(p, q, match):
    with pytest.raises(ValueError, match=match):
        acceptance_rate(p, q)


def test_sum_tolerance_is_stated_and_applied():
    assert SUM_TOL == 1e-5
    acceptance_rate([0.5 + 0.5 * SUM_TOL, 0.3, 0.2], Q)  # inside the tolerance: accepted
    with pytest.raises(ValueError, match="sums to"):
        acceptance_rate([0.5 + 2 * SUM_TOL, 0.3, 0.2], Q)


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan"), float("inf")])
def test_alpha_out_of_range(alpha):
    with pytest.raises(ValueError, match="alpha: must"):
        expected_tokens(alpha, 3)


@pytest.mark.parametrize("k", [0, -2])
def test_k_below_one(k):
    with pytest.raises(ValueError, match=f"k: must be >= 1, got {k}"):
        expected_tokens(0.5, k)


@pytest.mark.parametrize("k", [2.0, 1.5, "3", True, None])
def test_k_not_an_integer(k):
    with pytest.raises(TypeError, match="k: must be an integer >= 1"):
        expected_tokens(0.5, k)


def test_cost_ratio_negative():
    with pytest.raises(ValueError, match=r"cost_ratio: must be >= 0"):
        expected_speedup(0.5, 2, -0.1)
    with pytest.raises(ValueError, match=r"cost_ratio: must be >= 0"):
        best_k(0.5, -1.0)


def test_break_even_and_best_k_validate():
    with pytest.raises(ValueError, match="alpha"):
        break_even_cost(2.0, 3)
    with pytest.raises(ValueError, match="max_k: must be >= 1"):
        best_k(0.5, 0.1, max_k=0)


def const(v):
    return lambda prefix: np.asarray(v, dtype=float)


@pytest.mark.parametrize(
    "p_out, q_out, match",
    [
        ([0.5, np.nan, 0.5], Q, r"p_fn\(\(0,\)\): entry 1 is nan"),
        (P, [0.3, -0.3, 1.0], r"q_fn\(\(0,\)\): entry 1 is negative"),
        (P, [0.3, 0.3, 0.3], r"q_fn\(\(0,\)\): sums to 0\.9"),
        ([0.5, 0.5], Q, r"p_fn output and q_fn output have different lengths \(2 and 3\)"),
    ],
)
def test_speculative_step_names_the_bad_model(p_out, q_out, match):
    with pytest.raises(ValueError, match=match):
        speculative_step(const(p_out), const(q_out), (0,), 2, np.random.default_rng(0))


@pytest.mark.parametrize("k, exc", [(0, ValueError), (2.0, TypeError)])
def test_speculative_step_rejects_bad_k(k, exc):
    with pytest.raises(exc, match="k: must"):
        speculative_step(const(P), const(Q), (0,), k, np.random.default_rng(0))


class ZeroProbabilityRng:
    """An rng that returns a token the draft gives probability 0 (impossible for a real rng)."""

    def choice(self, n, p=None):
        return int(np.flatnonzero(np.asarray(p) == 0)[0]) if p is not None else 0

    def random(self):
        return 0.5


def test_drafted_token_with_zero_draft_probability_is_named():
    with pytest.raises(ValueError, match=r"q_fn: drafted token 2 has q\(x\) = 0"):
        speculative_step(const(P), const([0.5, 0.5, 0.0]), (0,), 1, ZeroProbabilityRng())
