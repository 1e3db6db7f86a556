"""Tests of specverify.laws.exact: exact distributions by enumerating every path of random decisions.

Every figure is exact up to float rounding, except one cross-check against a real NumPy
Generator (``test_enumeration_agrees_with_real_sampling``), which states its false-fail rate.

Exact TV of the handout's bug variants on ``toy_chain()``, prefix (0,), k = 2, m = 2 (the
handout's sampled figures, on its own chain with 30,000 runs, in brackets):

    no bonus token                        0.0     (0.005, sampling noise only)
    on rejection resample from p          0.154   (0.17)
    keep verifying after a rejection      0.110   (0.18)
    inverted ratio min(1, q/p)            0.508   (0.52)
    greedy argmax check while sampling    0.750   (0.64)
    no verification (emit the drafts)     0.510   (0.52)
    off-by-one target drafts[:i + 1]      0.160   (0.61)

The greedy check always emits the argmax path (1, 0), whose target probability is 0.25, hence
0.75; no verification is TV(q x q, p x p) = 0.51 directly. Differences from the handout's
figures are sampling noise plus the handout's own variants of each bug; the enumerator itself is
cross-checked against a real Generator in ``test_enumeration_agrees_with_real_sampling``.

(``test_bug_variants_exact_tv`` prints them with ``pytest -s``.)
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specverify.laws.chains import TableModel, handout_iid, toy_chain
from specverify.laws.exact import (
    EnumeratingRng,
    NotEnumerable,
    SubrunMemo,
    enumerate_distribution,
    exact_tv,
    round_length_distribution,
    sampler_distribution,
    sequence_distribution,
    total_variation,
)
from specverify.laws.symbolic_uniform import AffineUniform, SymbolicUniform
from specverify.samplers.chain import accepts, draft, model_output, residual, speculative_step

TOL = 1e-12


def assert_distribution(got: dict, expected: dict):
    assert set(got) == set(expected)
    for outcome, prob in expected.items():
        assert got[outcome] == pytest.approx(prob, abs=TOL), outcome
    assert sum(got.values()) == pytest.approx(1.0, abs=TOL)


# ---------------------------------------------------------------------------------------------
# enumerate_distribution on small functions


def two_comparisons_of_one_uniform(rng):
    u = rng.random()
    return (u < 0.5, u < 0.25)


@pytest.mark.parametrize(
    "fn, expected",
    [
        (lambda rng: int(rng.choice(4)), {0: 0.25, 1: 0.25, 2: 0.25, 3: 0.25}),
        (lambda rng: int(rng.choice(3, p=[0.2, 0.0, 0.8])), {0: 0.2, 2: 0.8}),
        (lambda rng: str(rng.choice(np.array(["a", "b"]), p=[0.7, 0.3])), {"a": 0.7, "b": 0.3}),
        (lambda rng: rng.random() < 0.3, {True: 0.3, False: 0.7}),
        (lambda rng: rng.random() >= 0.3, {True: 0.7, False: 0.3}),
        (two_comparisons_of_one_uniform, {(True, True): 0.25, (True, False): 0.25,
                                          (False, False): 0.5}),
        (lambda rng: 0.3 > rng.random(), {True: 0.3, False: 0.7}),
        (lambda rng: np.float64(0.3) > rng.random(), {True: 0.3, False: 0.7}),
        (lambda rng: np.float32(0.25) <= rng.random(), {True: 0.75, False: 0.25}),
        (lambda rng: rng.random() * 2 < 1, {True: 0.5, False: 0.5}),
        (lambda rng: 1 - rng.random() < 0.2, {True: 0.2, False: 0.8}),
        (lambda rng: -rng.random() / 4 + 1 > 0.9, {True: 0.4, False: 0.6}),
        (lambda rng: rng.uniform(2.0, 6.0) < 3.0, {True: 0.25, False: 0.75}),
        (lambda rng: int(rng.integers(1, 4)), {1: 1 / 3, 2: 1 / 3, 3: 1 / 3}),
        (lambda rng: min(1.0, rng.random() * 4) < 0.5, {True: 0.125, False: 0.875}),
        (lambda rng: int((rng.random(size=3) < 0.5).sum()),
         {0: 0.125, 1: 0.375, 2: 0.375, 3: 0.125}),
    ],
)  # fmt: skip
def test_exact_probabilities_of_small_functions(fn, expected):
    assert_distribution(enumerate_distribution(fn), expected)


def test_a_certain_comparison_does_not_branch():
    paths = []

    def fn(rng):
        paths.append(None)
        u = rng.random()
        return (u < 0.5, u < 0.75, u > 1.5, u < float("nan"), u > float("nan"))

    dist = enumerate_distribution(fn)
    assert_distribution(dist, {(True, True, False, False, False): 0.5,
                               (False, True, False, False, False): 0.25,
                               (False, False, False, False, False): 0.25})  # fmt: skip
    assert len(paths) == 3


def test_affine_values_stay_symbolic_and_a_zero_scale_is_a_constant():
    def fn(rng):
        u = rng.random()
        assert isinstance(u, SymbolicUniform) and isinstance(3 * u - 1, AffineUniform)
        assert u * 0 == 0.0
        return 3 * u - 1 < 0.5

    assert_distribution(enumerate_distribution(fn), {True: 0.5, False: 0.5})


# ---------------------------------------------------------------------------------------------
# NotEnumerable: refusals, never a wrong answer


@pytest.mark.parametrize(
    "fn, words",
    [
        (lambda rng: float(rng.random()), "float"),
        (lambda rng: bool(rng.random()), "bool"),
        (lambda rng: np.log(rng.random()), "log"),
        (lambda rng: rng.normal(), "rng.normal"),
        (lambda rng: rng.random() < rng.random(), "two symbolic"),
        (lambda rng: rng.integers(2**63), "max_branching"),
        (lambda rng: rng.choice(3, size=2), "size"),
        (lambda rng: rng.choice(2, p=[rng.random(), 0.5]), "float"),
        (lambda rng: np.searchsorted(np.array([0.4, 0.2]), rng.random()), "not sorted"),
        (lambda rng: np.add(np.array([0.2, 0.4]), rng.random()), "array"),
        (lambda rng: rng.random() * np.array([1.0, 2.0]), "ndarray"),
        (lambda rng: 1 / rng.random(), "rtruediv"),
    ],
)
def test_unmodelled_use_raises_not_enumerable(fn, words):
    with pytest.raises(NotEnumerable, match=words):
        enumerate_distribution(fn)


def test_a_swallowed_refusal_still_refuses():
    def fn(rng):
        try:
            return float(rng.random()) < 0.5
        except Exception:
            return "fallback"

    with pytest.raises(NotEnumerable, match="float"):
        enumerate_distribution(fn)


def test_a_fn_with_state_across_runs_is_refused():
    calls = []

    def stateful(rng):  # draws over 2 tokens on its first run and over 3 afterwards
        calls.append(None)
        return int(rng.choice(2 if len(calls) == 1 else 3))

    with pytest.raises(NotEnumerable, match="replay"):
        enumerate_distribution(stateful)
    kept = []

    def keeps_a_uniform(rng):
        if kept:
            return kept[0] < 0.5
        kept.append(rng.random())
        return rng.random() < 0.5

    with pytest.raises(NotEnumerable):
        enumerate_distribution(keeps_a_uniform)


def test_exceeding_max_paths_names_the_cap():
    with pytest.raises(NotEnumerable, match=r"max_paths=10\b.*visited 10"):
        enumerate_distribution(lambda rng: (int(rng.choice(4)), int(rng.choice(4))), max_paths=10)
    assert len(enumerate_distribution(lambda rng: int(rng.choice(10)), max_paths=10)) == 10


def test_fn_errors_propagate_unchanged():
    def fn(rng):
        if rng.random() < 0.5:
            raise ZeroDivisionError("from fn")
        return 1

    with pytest.raises(ZeroDivisionError, match="from fn"):
        enumerate_distribution(fn)
    with pytest.raises(ValueError, match="do not sum to 1"):  # as numpy's Generator.choice
        enumerate_distribution(lambda rng: rng.choice(2, p=[0.5, 0.4]))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="max_paths"):
        enumerate_distribution(lambda rng: 0, max_paths=0)
    with pytest.raises(ValueError, match="max_branching"):
        EnumeratingRng(max_branching=0)
    with pytest.raises(ValueError, match="m: must be >= 1"):
        sequence_distribution(toy_chain().p_fn, (0,), 0)


# ---------------------------------------------------------------------------------------------
# The reference sampler is exact


def random_table_model(seed: int, order: int, period: int, vocab: int = 3) -> TableModel:
    gen = np.random.default_rng(seed)
    rows = vocab**order * period
    return TableModel(gen.dirichlet(np.ones(vocab), rows), gen.dirichlet(np.ones(vocab), rows),
                      order=order, period=period)  # fmt: skip


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("m", [1, 2, 3])
def test_reference_is_exact_on_toy_chain(k, m):
    model = toy_chain()
    assert exact_tv(speculative_step, model.p_fn, model.q_fn, (0,), k, m) < TOL


@pytest.mark.parametrize(
    "model",
    [handout_iid(), random_table_model(1, order=2, period=1),
     random_table_model(2, order=1, period=2)],
    ids=["handout-iid", "order-2", "period-2"],
)  # fmt: skip
@pytest.mark.parametrize("k", [1, 3])
def test_reference_is_exact_on_other_models(model, k):
    for prefix in [(0,), (2, 1)]:
        assert exact_tv(speculative_step, model.p_fn, model.q_fn, prefix, k, 3) < TOL


def test_sequence_distribution_is_the_product_of_conditionals():
    p = np.array(toy_chain().p_table)
    dist = sequence_distribution(toy_chain().p_fn, (0,), 2)
    assert_distribution(dist, {(a, b): p[0, a] * p[a, b] for a in range(3) for b in range(3)})


def test_sampler_distribution_covers_every_target_sequence():
    model = toy_chain()
    dist = sampler_distribution(speculative_step, model.p_fn, model.q_fn, (0,), 2, 3)
    assert len(dist) == 27 and sum(dist.values()) == pytest.approx(1.0, abs=TOL)


def test_total_variation():
    assert total_variation({"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5}) == 0.0
    assert total_variation({"a": 1.0}, {"b": 1.0}) == 1.0
    assert total_variation({"a": 0.7, "b": 0.3}, {"a": 0.2, "c": 0.8}) == pytest.approx(0.8)


# ---------------------------------------------------------------------------------------------
# The handout's bug table, exactly


def no_bonus(p_fn, q_fn, prefix, k, rng):
    drafts, qs = draft(q_fn, prefix, k, rng)
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))
        if not accepts(p, q, x, rng):
            return drafts[:i] + [int(rng.choice(len(p), p=residual(p, q)))]
    return drafts


def resample_from_p(p_fn, q_fn, prefix, k, rng):
    drafts, qs = draft(q_fn, prefix, k, rng)
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))
        if not accepts(p, q, x, rng):
            return drafts[:i] + [int(rng.choice(len(p), p=p))]
    p = model_output("p_fn", p_fn, prefix + tuple(drafts))
    return drafts + [int(rng.choice(len(p), p=p))]


def keep_verifying(p_fn, q_fn, prefix, k, rng):
    drafts, qs = draft(q_fn, prefix, k, rng)
    out = []
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))
        out.append(x if accepts(p, q, x, rng) else int(rng.choice(len(p), p=residual(p, q))))
    p = model_output("p_fn", p_fn, prefix + tuple(drafts))
    return out + [int(rng.choice(len(p), p=p))]


def inverted_ratio(p_fn, q_fn, prefix, k, rng):
    drafts, qs = draft(q_fn, prefix, k, rng)
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))
        if not rng.random() < min(1.0, q[x] / p[x]):
            return drafts[:i] + [int(rng.choice(len(p), p=residual(p, q)))]
    p = model_output("p_fn", p_fn, prefix + tuple(drafts))
    return drafts + [int(rng.choice(len(p), p=p))]


def greedy_check(p_fn, q_fn, prefix, k, rng):
    drafts, _ = draft(q_fn, prefix, k, rng)
    for i, x in enumerate(drafts):
        best = int(np.argmax(model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))))
        if x != best:
            return drafts[:i] + [best]
    return drafts + [int(np.argmax(model_output("p_fn", p_fn, prefix + tuple(drafts))))]


def no_verification(p_fn, q_fn, prefix, k, rng):
    return draft(q_fn, prefix, k, rng)[0]


def off_by_one(p_fn, q_fn, prefix, k, rng):
    drafts, qs = draft(q_fn, prefix, k, rng)
    for i, (x, q) in enumerate(zip(drafts, qs)):
        p = model_output("p_fn", p_fn, prefix + tuple(drafts[: i + 1]))
        if not accepts(p, q, x, rng):
            return drafts[:i] + [int(rng.choice(len(p), p=residual(p, q)))]
    p = model_output("p_fn", p_fn, prefix + tuple(drafts))
    return drafts + [int(rng.choice(len(p), p=p))]


BUGGY = [resample_from_p, keep_verifying, inverted_ratio, greedy_check, no_verification,
         off_by_one]  # fmt: skip
EXPECTED_TV = {  # exact, toy_chain, prefix (0,), k = 2, m = 2
    no_bonus: 0.0, resample_from_p: 0.154, keep_verifying: 0.110, inverted_ratio: 0.508,
    greedy_check: 0.750, no_verification: 0.510, off_by_one: 0.160,
}  # fmt: skip


def test_bug_variants_exact_tv():
    model = toy_chain()
    tvs = {}
    for sampler in [no_bonus, *BUGGY]:
        tvs[sampler] = exact_tv(sampler, model.p_fn, model.q_fn, (0,), 2, 2)
        print(f"{sampler.__name__:>16}: exact TV {tvs[sampler]:.4f}")
    assert tvs[no_bonus] < TOL  # exact in distribution, only fewer tokens per round
    for sampler in BUGGY:
        assert tvs[sampler] > 0.05, sampler.__name__
    for sampler, tv in tvs.items():  # regression pins for the figures in the module docstring
        assert tv == pytest.approx(EXPECTED_TV[sampler], abs=1e-9), sampler.__name__


def test_a_uniform_shared_by_all_positions_gets_its_correlated_probability():
    """One uniform for every accept test: later tests are conditioned on earlier ones."""

    def shared_uniform(p_fn, q_fn, prefix, k, rng):
        drafts, qs = draft(q_fn, prefix, k, rng)
        u = rng.random()
        for i, (x, q) in enumerate(zip(drafts, qs)):
            p = model_output("p_fn", p_fn, prefix + tuple(drafts[:i]))
            if not u < min(1.0, p[x] / q[x]):
                return drafts[:i] + [int(rng.choice(len(p), p=residual(p, q)))]
        p = model_output("p_fn", p_fn, prefix + tuple(drafts))
        return drafts + [int(rng.choice(len(p), p=p))]

    model = handout_iid()  # min(1, p/q) is 1 for tokens 0 and 1 (q = 0.6), 0.5 for 2 (q = 0.4)
    shared = round_length_distribution(shared_uniform, model.p_fn, model.q_fn, (), 2)
    fresh = round_length_distribution(speculative_step, model.p_fn, model.q_fn, (), 2)
    # both drafts are token 2 with prob 0.16: one uniform accepts both with 0.5, two with 0.25
    assert shared[3] == pytest.approx(0.6**2 + 2 * 0.6 * 0.4 * 0.5 + 0.16 * 0.5, abs=TOL)
    assert fresh[3] == pytest.approx(0.6**2 + 2 * 0.6 * 0.4 * 0.5 + 0.16 * 0.25, abs=TOL)


def sample_first_tokens(sampler, model, prefix, k, m, runs, seed) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(runs):
        out: list[int] = []
        while len(out) < m:
            out += sampler(model.p_fn, model.q_fn, prefix + tuple(out), k, rng)
        samples.append(tuple(out[:m]))
    return samples


@pytest.mark.parametrize("sampler", [keep_verifying, off_by_one], ids=lambda s: s.__name__)
def test_enumeration_agrees_with_real_sampling(sampler):
    """The enumerated distribution of a buggy sampler is what a real Generator produces.

    Chi-square goodness of fit of 8,000 sampled runs (fixed seed) against the enumerated
    probabilities; every expected count is >= 5. False-fail rate 1e-3 per sampler if the
    enumeration is right; a cell probability p off by 0.04 adds about 8000 * 0.04^2 / p >= 42
    (every p here is <= 0.3) to chi-square on 8 degrees of freedom, whose 1e-3 critical value
    is 26.1, so an error of that size or larger is caught.
    """
    model = toy_chain()
    exact = sampler_distribution(sampler, model.p_fn, model.q_fn, (0,), 2, 2)
    samples = sample_first_tokens(sampler, model, (0,), 2, 2, runs=8_000, seed=14)
    cells = sorted(exact)
    observed = np.array([samples.count(c) for c in cells])
    expected = np.array([exact[c] for c in cells]) * len(samples)
    assert set(samples) <= set(cells) and expected.min() >= 5
    assert stats.chisquare(observed, expected).pvalue > 1e-3


# ---------------------------------------------------------------------------------------------
# Round lengths


def test_round_length_matches_theory_on_handout_iid():
    model = handout_iid()
    lengths = round_length_distribution(speculative_step, model.p_fn, model.q_fn, (0,), 4)
    assert set(lengths) == {1, 2, 3, 4, 5}
    assert sum(n * w for n, w in lengths.items()) == pytest.approx(3.3616, abs=1e-9)
    for i in range(5):
        at_least = sum(w for n, w in lengths.items() if n >= i + 1)
        assert at_least == pytest.approx(0.8**i, abs=TOL)


# ---------------------------------------------------------------------------------------------
# SubrunMemo: a sub-run shared across paths and enumerations keeps the law bit for bit


def keyed_subrun(key: int, rng) -> tuple:
    """Decisions that depend on the key: a choice over key + 2 outcomes, then a coin."""
    x = int(rng.choice(key + 2, p=np.arange(1, key + 3) / sum(range(1, key + 3))))
    return (x, bool(rng.random() < 0.25 + 0.1 * key))


def memo_round(memo, calls: list):
    def fn(rng):
        key = int(rng.choice(2, p=[0.3, 0.7]))

        def thunk():
            calls.append(key)
            return keyed_subrun(key, rng)

        out = memo.run(rng, lambda: key, thunk) if memo is not None else thunk()
        return (key, *out, bool(rng.random() < 0.5))

    return fn


def test_a_memoized_subrun_gives_the_same_law_bit_for_bit_and_runs_once_per_path():
    plain = enumerate_distribution(memo_round(None, []))
    memo, calls = SubrunMemo(), []
    first = enumerate_distribution(memo_round(memo, calls))
    runs = len(calls)
    second = enumerate_distribution(memo_round(memo, calls))
    assert first == plain and list(first) == list(plain)  # same floats, same order
    assert second == plain and list(second) == list(plain)
    assert len(calls) == runs  # the second enumeration replayed every sub-run
    assert runs == 2 * 2 + 3 * 2  # one run per (key, sub-run path), not per path (twice that)


def test_a_memo_outside_enumeration_runs_the_thunk():
    memo, rng = SubrunMemo(), np.random.default_rng(0)
    assert [memo.run(rng, lambda: "k", lambda: rng.integers(10**6)) for _ in range(2)] == list(
        np.random.default_rng(0).integers(10**6, size=2)
    )


def test_a_subrun_that_is_not_a_function_of_its_key_refuses():
    memo, flip = SubrunMemo(), [0]

    def fn(rng):
        flip[0] += 1
        return memo.run(rng, lambda: "same key", lambda: int(rng.choice(2 + flip[0] % 2)))

    with pytest.raises(NotEnumerable, match="different"):
        enumerate_distribution(fn)
    memo, key = SubrunMemo(), [2]  # a tree left partial (max_paths), then another sub-run
    with pytest.raises(NotEnumerable, match="max_paths"):
        enumerate_distribution(lambda rng: memo.run(rng, lambda: "k", lambda: int(rng.choice(key[0]))), max_paths=1)
    key[0] = 3
    with pytest.raises(NotEnumerable, match="different"):
        enumerate_distribution(lambda rng: memo.run(rng, lambda: "k", lambda: int(rng.choice(key[0]))))


def test_a_refused_path_records_nothing():
    memo, calls = SubrunMemo(), []

    def swallowing(rng):
        def thunk():
            calls.append(1)
            try:
                float(rng.random())
            except NotEnumerable:
                pass
            return 0

        return memo.run(rng, lambda: "key", thunk)

    with pytest.raises(NotEnumerable):
        enumerate_distribution(swallowing)
    with pytest.raises(NotEnumerable):  # not replayed from a refused run: it refuses again
        enumerate_distribution(swallowing)
    assert len(calls) == 2
