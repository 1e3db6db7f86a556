"""specverify.laws.processing: temperature, top-k, top-p with transformers' semantics."""

import numpy as np
import pytest

from specverify.laws import processing as pr


def softmax(z):
    e = np.exp(z - np.max(z))
    return e / e.sum()


def test_temperature_alone_is_softmax_of_scaled_logits():
    z = np.array([1.0, -0.5, 2.0, 0.0])
    for t in (0.3, 1.0, 2.5):
        np.testing.assert_allclose(pr.process_logits(z, t), softmax(z / t), rtol=1e-12)


def test_top_k_keeps_every_logit_tied_with_the_kth():
    assert np.count_nonzero(pr.process_logits([3.0, 2.0, 2.0, 0.0], 1.0, top_k=2)) == 3
    assert np.count_nonzero(pr.process_logits([1.0, 2.0, 2.0, 0.0], 1.0, top_k=2)) == 2
    np.testing.assert_allclose(
        pr.process_logits([3.0, 2.0, 1.0], 1.0, top_k=2), [*softmax(np.array([3.0, 2.0])), 0.0], rtol=1e-12
    )


def test_top_k_at_or_above_the_vocabulary_keeps_everything():
    z = np.array([0.5, -1.0, 2.0])
    for k in (3, 4, 100):
        np.testing.assert_array_equal(pr.process_logits(z, 1.0, top_k=k), pr.process_logits(z, 1.0))
    p = np.array([0.2, 0.3, 0.5])
    np.testing.assert_array_equal(pr.keep_top_k(p, 5), p)
    np.testing.assert_array_equal(pr.keep_top_k(p, 5, keep_ties=False), p)


def test_top_p_keeps_the_smallest_set_that_reaches_it():
    p = np.array([0.5, 0.25, 0.125, 0.125])  # exact in binary: the boundary is exact
    np.testing.assert_array_equal(pr.keep_top_p(p, 0.75), [2 / 3, 1 / 3, 0, 0])  # reaches 0.75
    np.testing.assert_array_equal(pr.keep_top_p(p, 0.7), [2 / 3, 1 / 3, 0, 0])
    np.testing.assert_allclose(pr.keep_top_p(p, 0.76), [4 / 7, 2 / 7, 1 / 7, 0], rtol=1e-15)
    np.testing.assert_array_equal(pr.keep_top_p(p, 0.1), [1.0, 0, 0, 0])  # never empty
    logits = np.log(np.array([0.5, 0.25, 0.15, 0.1]))
    np.testing.assert_allclose(pr.process_logits(logits, 1.0, top_p=0.7), [2 / 3, 1 / 3, 0, 0])


def test_top_p_ties_are_cut_in_index_order():
    np.testing.assert_allclose(pr.keep_top_p(np.array([0.25, 0.5, 0.25]), 0.6), [1 / 3, 2 / 3, 0], rtol=1e-15)


def test_top_p_one_keeps_everything():
    p = np.array([1e-12, 0.3, 0.7 - 1e-12])
    assert pr.keep_top_p(p, 1.0) is p
    np.testing.assert_array_equal(pr.process_logits(np.log(p), 1.0, top_p=1.0), pr.process_logits(np.log(p)))


def test_probability_space_top_k_ties():
    p = np.array([0.3, 0.3, 0.4])
    np.testing.assert_array_equal(pr.keep_top_k(p, 2), p)  # both tied with the 2nd stay
    np.testing.assert_allclose(pr.keep_top_k(p, 2, keep_ties=False), [3 / 7, 0, 4 / 7], rtol=1e-15)
    np.testing.assert_allclose(pr.keep_top_k(np.array([0.1, 0.6, 0.3]), 1), [0, 1, 0])


def test_temper_is_softmax_of_log_probs_over_t():
    p = np.array([0.1, 0.6, 0.3])
    for t in (0.5, 1.0, 2.0):
        np.testing.assert_allclose(pr.temper(p, t), softmax(np.log(p) / t), rtol=1e-12)
    np.testing.assert_array_equal(pr.temper(np.array([0.0, 1.0]), 0.7), [0.0, 1.0])


def test_agrees_with_transformers_warpers():
    torch = pytest.importorskip("torch")
    lp = pytest.importorskip("transformers.generation.logits_process")
    rng = np.random.default_rng(3)
    for _ in range(300):
        z = rng.normal(0, 3, int(rng.integers(2, 30)))
        t, k, top_p = float(rng.uniform(0.2, 3)), int(rng.integers(1, 35)), float(rng.uniform(0.05, 1))
        scores = torch.tensor(z)[None]
        for warper in (lp.TemperatureLogitsWarper(t), lp.TopKLogitsWarper(k), lp.TopPLogitsWarper(top_p)):
            scores = warper(None, scores)
        np.testing.assert_allclose(
            pr.process_logits(z, t, k, top_p), scores.softmax(-1)[0].numpy(), rtol=1e-9, atol=1e-15
        )


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": float("inf")}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"temperature": "1"}, "temperature"),
        ({"temperature": 0.0}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 2.0}, "top_k"),
        ({"top_k": True}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_p": True}, "top_p"),
    ],
)
def test_bad_parameters_are_refused_by_name(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}: "):
        pr.process_logits([0.0, 1.0], **{"temperature": 1.0, **kwargs})


def test_check_sampling_returns_plain_numbers():
    assert pr.check_sampling(np.float32(0.5), np.int64(3), 1) == (0.5, 3, 1.0)
    assert pr.check_sampling(0) == (0.0, None, None)
