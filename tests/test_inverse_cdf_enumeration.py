"""The exact enumerator follows inverse-CDF and threshold code (``laws.threshold_cells``).

A token drawn as ``searchsorted(cumsum(w), u)``, ``(cumsum(w) > u).argmax()``, ``digitize`` or by a
comparison of u with a row of numbers, and a draft accepted by ``u * q(x) < p(x)``, are cells of
[0, 1) with their measures: the enumerator's law of such code is exact, in NumPy and in torch. The
reference subjects are ``samplers.inverse_cdf`` and ``samplers.torch_inverse_cdf``; the biased
variants below are NOT exact by their exact law (no sampling, so no false-fail rate: the
thresholds are float64 rounding, 1e-12, against biases of 0.01 and more). A comparison of two
uniforms with each other refuses, in one sentence naming the subject's file and line.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from specverify.laws.chains import handout_iid, toy_chain
from specverify.laws.exact import (
    NotEnumerable,
    enumerate_distribution,
    exact_tv,
    sampler_distribution,
    total_variation,
)
from specverify.samplers import chain, inverse_cdf

W = np.array([0.2, 0.0, 0.5, 0.3])
"""Weights with a zero-probability token: its cell has measure 0, so it is never drawn."""
LAW = {0: 0.2, 2: 0.5, 3: 0.3}
ROUNDING = 1e-12
"""A float64 law's distance from the true one: sums of a few products of float64 numbers."""


def _close(law: dict, expected: dict) -> bool:
    return total_variation(law, expected) < ROUNDING and set(law) == set(expected)


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng: int(np.searchsorted(np.cumsum(W), rng.random(), side="right")),
        lambda rng: int(np.searchsorted(np.cumsum(W), rng.random(), side="left")),
        lambda rng: int((np.cumsum(W) > rng.random()).argmax()),
        lambda rng: int((rng.random() <= np.cumsum(W)).argmax()),
        lambda rng: int((np.cumsum(W) < rng.random()).sum()),
        lambda rng: int(np.digitize(rng.random() * 4.0, 4.0 * np.cumsum(W))),
        lambda rng: int(np.searchsorted(np.cumsum(2 * W), 2 * rng.random())),
        lambda rng: int(np.cumsum(W).searchsorted(rng.random())),  # the method: a bisection of scalar comparisons
    ],
    ids=["searchsorted-right", "searchsorted-left", "cumsum>u", "u<=cumsum", "count", "digitize", "affine", "method"],
)
def test_numpy_inverse_cdf_draws_have_the_weights_law(draw):
    assert _close(enumerate_distribution(draw), LAW)


def test_many_cells_past_max_branching_are_bisected_to_the_same_law():
    w = np.arange(1.0, 41.0)
    got = enumerate_distribution(
        lambda rng: int(np.searchsorted(np.cumsum(w) / w.sum(), rng.random())), max_branching=8
    )
    assert _close(got, dict(enumerate((w / w.sum()).tolist())))


def test_one_uniform_read_twice_stays_consistent():
    """The cell decided by one comparison bounds the next: u is below 0.2 or not, once."""

    def fn(rng):
        u = rng.random()
        return int(np.searchsorted(np.cumsum(W), u)), bool(u < 0.1), bool(u - 0.5 * u < 0.35)

    got = enumerate_distribution(fn)
    assert _close(got, {(0, True, True): 0.1, (0, False, True): 0.1, (2, False, True): 0.5, (3, False, False): 0.3})


@pytest.mark.parametrize("model, k, m", [(toy_chain(), 2, 3), (handout_iid(), 2, 3)], ids=["toy-chain", "iid"])
def test_numpy_inverse_cdf_rule_has_the_rules_law(model, k, m):
    got = sampler_distribution(inverse_cdf.speculative_step, model.p_fn, model.q_fn, (0,), k, m)
    ref = sampler_distribution(chain.speculative_step, model.p_fn, model.q_fn, (0,), k, m)
    assert total_variation(got, ref) < ROUNDING
    assert exact_tv(inverse_cdf.speculative_step, model.p_fn, model.q_fn, (0,), k, m) < ROUNDING


def _residual_not_normalized(p_fn, q_fn, prefix, k, rng):
    """The residual drawn by inverse CDF over max(p - q, 0) left unnormalized, the index clamped to
    the last token: the missing mass all goes to the last token."""
    start = tuple(prefix)
    q = np.asarray(q_fn(start))
    x = inverse_cdf.inverse_cdf(q, rng.random())
    p = np.asarray(p_fn(start))
    if rng.random() * q[x] < p[x]:
        return [x, inverse_cdf.inverse_cdf(np.asarray(p_fn(start + (x,))), rng.random())]
    c = np.cumsum(np.maximum(p - q, 0.0))
    return [min(int(np.searchsorted(c, rng.random(), side="right")), len(p) - 1)]


def _sorted_position_not_mapped_back(p_fn, q_fn, prefix, k, rng):
    """Top-p-style code: the draw is made over the weights sorted descending, and the position in
    that order is returned instead of the token at it."""
    out = inverse_cdf.speculative_step(p_fn, q_fn, prefix, k, rng)
    p = np.asarray(p_fn(tuple(prefix) + tuple(out)))
    order = np.argsort(-p, kind="stable")
    return out + [int(np.searchsorted(np.cumsum(p[order]) / p.sum(), rng.random(), side="right"))]


@pytest.mark.parametrize("biased", [_residual_not_normalized, _sorted_position_not_mapped_back])
def test_biased_inverse_cdf_variants_are_found_by_the_exact_law(biased):
    model = toy_chain()
    assert exact_tv(biased, model.p_fn, model.q_fn, (0,), 1, 2) > 0.01


def _compare_two_uniforms(rng):
    u, v = rng.random(), rng.random()
    return bool(u < v)  # the line the refusal names


def test_comparing_two_uniforms_names_the_subjects_line():
    line = next(i for i, text in enumerate(inspect.getsource(_compare_two_uniforms).splitlines()) if "u < v" in text)
    lineno = _compare_two_uniforms.__code__.co_firstlineno + line
    with pytest.raises(NotEnumerable) as caught:
        enumerate_distribution(_compare_two_uniforms)
    message = str(caught.value)
    assert f"test_inverse_cdf_enumeration.py, line {lineno}:" in message, message
    assert "two symbolic uniforms" in message and "no cell of [0, 1)" in message


def test_searchsorted_of_an_unsorted_array_refuses():
    with pytest.raises(NotEnumerable, match="not sorted ascending"):
        enumerate_distribution(lambda rng: np.searchsorted(np.array([0.5, 0.2]), rng.random()))


# ------------------------------------------------------------------------------------ torch


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _generator(torch, rng):
    return torch.Generator().manual_seed(int(rng.integers(2**63)))


def test_torch_inverse_cdf_draws_have_the_weights_law(torch):
    w = torch.tensor(W)

    def draws(rng):
        g = _generator(torch, rng)
        u = torch.rand(1, generator=g, dtype=torch.float64)
        v = torch.rand((), generator=g)
        by_search = int(torch.searchsorted(torch.cumsum(w, 0), u, right=True))
        by_argmax = int((torch.cumsum(w, 0) > u).int().argmax())  # the same u: the same token
        by_bucket = int(torch.bucketize(v, torch.cumsum(w, 0).float()))
        return by_search, by_argmax == by_search, by_bucket

    got = enumerate_distribution(draws)
    search = {t: sum(p for (a, _, _), p in got.items() if a == t) for t in LAW}
    bucket = {t: sum(p for (_, _, b), p in got.items() if b == t) for t in LAW}
    assert all(same for _, same, _ in got)
    assert total_variation(search, LAW) < ROUNDING
    assert total_variation(bucket, LAW) < 1e-6  # float32 thresholds


def test_torch_searchsorted_per_row(torch):
    rows = torch.cumsum(torch.stack([torch.tensor(W), torch.tensor(W).flip(0)]), 1)

    def draws(rng):
        u = torch.rand(2, 1, generator=_generator(torch, rng), dtype=torch.float64)
        return tuple(torch.searchsorted(rows, u).view(-1).tolist())

    got = enumerate_distribution(draws)
    flipped = {0: 0.3, 1: 0.5, 3: 0.2}
    assert _close(got, {(a, b): LAW[a] * flipped[b] for a in LAW for b in flipped})


def test_torch_inverse_cdf_rule_has_the_rules_law(torch):
    from specverify.samplers.torch_inverse_cdf import torch_speculative_step

    model = handout_iid()
    assert exact_tv(torch_speculative_step, model.p_fn, model.q_fn, (0,), 2, 2) < ROUNDING


def test_torch_biased_inverse_cdf_is_found(torch):
    """torch.searchsorted over the unnormalized residual, clamped to the last token."""
    model = handout_iid()

    def biased(p_fn, q_fn, prefix, k, rng):
        g = _generator(torch, rng)
        p, q = (torch.tensor(np.asarray(f(tuple(prefix)))) for f in (p_fn, q_fn))
        x = int(torch.searchsorted(torch.cumsum(q, 0), torch.rand(1, generator=g, dtype=torch.float64)))
        if bool(torch.rand(1, generator=g, dtype=torch.float64) * q[x] < p[x]):
            return [x]
        c = torch.cumsum(torch.clamp(p - q, min=0.0), 0)
        return [min(int(torch.searchsorted(c, torch.rand(1, generator=g, dtype=torch.float64))), 2)]

    assert exact_tv(biased, model.p_fn, model.q_fn, (0,), 1, 1) > 0.01


def test_torch_comparing_two_uniforms_names_the_subjects_line(torch):
    def fn(rng):
        u = torch.rand(2, generator=_generator(torch, rng))
        return bool(u[0] < u[1])

    lineno = fn.__code__.co_firstlineno + 2
    with pytest.raises(NotEnumerable, match=rf"test_inverse_cdf_enumeration\.py, line {lineno}: torch lt of two"):
        enumerate_distribution(fn)


# ---------------------------------------------------------------------------- bench calls


def test_bench_calls_counts_each_subject_call_and_shows_the_before_figures(tmp_path, monkeypatch):
    from specverify.bench import calls

    counter = tmp_path / "calls"
    monkeypatch.setenv(calls.CALLS_FILE_VARIABLE, str(counter))
    model, rng = toy_chain(), np.random.default_rng(0)
    for _ in range(3):
        calls.counted_inverse_cdf_form(model.p_fn, model.q_fn, (0,), 2, rng)
    calls.counted_choice_form(model.p_fn, model.q_fn, (0,), 2, rng)
    assert counter.stat().st_size == 4
    row = {"form": "rng.choice", "budget": "standard", "calls": 9_000, "enumerated": 47, "cases": 49}
    text = calls.table([{**row, "before": calls.BEFORE["rng.choice"]["standard"], "exact": True, "seconds": 1.0}])
    assert "53,301" in text and "9,000" in text and "47/49" in text and "EXACT" in text
    with pytest.raises(SystemExit) as exited:  # an unknown budget is a usage error, before any check runs
        calls.main(["--budgets", "weekly"])
    assert exited.value.code == 2
