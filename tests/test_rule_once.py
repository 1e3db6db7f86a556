"""The exact rule lives once (``samplers.chain.verify``): its callers agree token for token."""

import copy

import numpy as np
import pytest

from specverify.chains import handout_iid, iid_model, random_model, toy_chain
from specverify.mutants.catalogue import _round
from specverify.samplers.chain import draft, speculative_step, verify, verify_drafts

MODELS = [
    (toy_chain(), (0,)),
    (handout_iid(), ()),
    (iid_model([0.5, 0.5, 0.0], [0.0, 0.6, 0.4]), ()),
    (random_model(3, 1, 3, 2), (1,)),
    (random_model(3, 1, 1, 3, zeros=True), (0,)),
]
SEEDS = range(2000)


@pytest.mark.parametrize("model, prefix", MODELS, ids=lambda m: getattr(m, "name", str(m)))
@pytest.mark.parametrize("k", range(1, 6))
def test_catalogue_round_with_its_defaults_is_the_reference(model, prefix, k):
    for seed in SEEDS:
        want = speculative_step(model.p_fn, model.q_fn, prefix, k, np.random.default_rng(seed))
        got = _round(model.p_fn, model.q_fn, prefix, k, np.random.default_rng(seed))
        assert got == want, (model.name, k, seed)


@pytest.mark.parametrize("model, prefix", MODELS, ids=lambda m: getattr(m, "name", str(m)))
def test_verify_on_precomputed_rows_is_verify_drafts(model, prefix):
    """Eager rows (what an engine's one forward gives) and lazy p_fn calls: same tokens, same
    rng state afterwards."""
    k = 4
    for seed in range(500):
        rng = np.random.default_rng(seed)
        drafts, qs = draft(model.q_fn, prefix, k, rng)
        ps = [model.p_fn(prefix + tuple(drafts[:i])) for i in range(k + 1)]
        rng_rows, rng_fn = copy.deepcopy(rng), copy.deepcopy(rng)
        j, token = verify(ps, qs, drafts, rng_rows)
        assert verify_drafts(model.p_fn, prefix, drafts, qs, rng_fn) == drafts[:j] + [token]
        assert rng_rows.random() == rng_fn.random()


def test_verify_reads_only_the_rows_it_reaches():
    reads = []

    class Rows:
        def __getitem__(self, i):
            reads.append(i)
            return np.array([1.0, 0.0])

    q = np.array([0.0, 1.0])  # draft 1 has p = 0: rejected at once, residual is token 0
    assert verify(Rows(), [q, q], [1, 1], np.random.default_rng(0)) == (0, 0)
    assert reads == [0]
