"""The exact rule lives once (``samplers.chain.verify``): its callers agree token for token.

Also pinned here: the mutant catalogue walks ``chain.verify_with`` (the walk ``chain.verify``
runs), the batched simulator replays to ``chain.speculative_step`` uniform for uniform, the tree
rule is ``samplers.tree.sibling_rule`` for every tree sampler, and the greedy rule is
``samplers.greedy.greedy_node`` for the chain sampler, ``models.decoding``, ``models.medusa`` and
``models.tree``."""

import copy

import numpy as np
import pytest

from specverify.laws.chains import handout_iid, iid_model, random_model, toy_chain
from specverify.mutants import catalogue
from specverify.mutants.catalogue import round_with
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
        got = round_with(model.p_fn, model.q_fn, prefix, k, np.random.default_rng(seed))
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


# ------------------------------------------------------------------------ the catalogue's walk


def _spy(monkeypatch, module, name):
    """Replace module.name by a wrapper that counts its calls; returns the count (a list)."""
    calls, real = [], getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_the_catalogue_and_the_reference_walk_the_same_verify_with(monkeypatch):
    """``chain.verify`` and ``catalogue.round_with`` both run ``chain.verify_with``: a mutant
    built on ``round_with`` cannot walk the drafts differently from the reference."""
    from specverify.samplers import chain

    assert catalogue.verify_with is chain.verify_with
    model, prefix = toy_chain(), (0,)
    reference = _spy(monkeypatch, chain, "verify_with")
    speculative_step(model.p_fn, model.q_fn, prefix, 3, np.random.default_rng(0))
    assert reference
    mutant_calls = _spy(monkeypatch, catalogue, "verify_with")
    for fn in (
        catalogue.no_bonus_token,
        catalogue.resample_from_p,
        catalogue.off_by_one_target,
        catalogue.residual_swapped,
        catalogue.temperature_draft_only,
    ):
        fn(model.p_fn, model.q_fn, prefix, 3, np.random.default_rng(1))
    assert len(mutant_calls) == 5


# ------------------------------------------------------------------------ the batched simulator


class _Recording:
    """An rng that remembers every array of uniforms it hands out."""

    def __init__(self, seed):
        self.rng, self.draws = np.random.default_rng(seed), []

    def random(self, size=None):
        u = self.rng.random(size)
        self.draws.append(u)
        return u


class _Replay:
    """chain's rng calls answered from given uniforms: ``choice`` by the inverse CDF the batched
    simulator uses (the number of CDF entries <= u, clipped to the last positive token),
    ``random`` by the acceptance coins in order."""

    def __init__(self, choices, coins):
        self.choices, self.coins = list(choices), list(coins)

    def choice(self, n, p):
        u = self.choices.pop(0)
        last = len(p) - 1 - int(np.argmax(p[::-1] > 0))
        return min(int(np.searchsorted(np.cumsum(p), u, side="right")), last)

    def random(self):
        return self.coins.pop(0)


def _large_vocab():
    from specverify.laws.chains import TableModel

    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.full(40, 0.3), size=40)
    q = 0.5 * p + 0.5 * rng.dirichlet(np.full(40, 0.3), size=40)
    p[:, ::7] = 0.0
    return TableModel(p / p.sum(axis=1, keepdims=True), q, order=1, name="large-vocab")


@pytest.mark.parametrize("model, prefix", MODELS + [(_large_vocab(), (3,))], ids=lambda m: getattr(m, "name", str(m)))
@pytest.mark.parametrize("k", [1, 2, 4])
def test_batched_rounds_replay_to_the_reference(model, prefix, k):
    """Every row of ``simulate_rounds``, its uniforms handed to ``speculative_step`` (the drafts'
    and the last token's through ``choice``, the coins through ``random``), is the reference's
    round token for token: the simulator's accept table is ``chain.acceptance`` and its residual
    ``chain.residual``, so only the vectorized sampling is its own."""
    from specverify.samplers.batched import PAD, simulate_rounds

    n = 400
    rng = _Recording(100 + k)
    tokens, lengths = simulate_rounds(model, prefix, k, n, rng)
    assert len(rng.draws) == k + 2  # k draft columns, the (k, n) coins, the last token
    drafts, coins, last = rng.draws[:k], rng.draws[k], rng.draws[k + 1]
    for r in range(n):
        replay = _Replay([d[r] for d in drafts] + [last[r]], coins[:, r])
        want = speculative_step(model.p_fn, model.q_fn, prefix, k, replay)
        got = [int(t) for t in tokens[r] if t != PAD]
        assert got == want and lengths[r] == len(want), (model.name, k, r)


# ------------------------------------------------------------------------ the tree rule


def test_every_tree_sampler_runs_the_one_sibling_rule(monkeypatch):
    from specverify.samplers import tree

    calls = _spy(monkeypatch, tree, "sibling_rule")
    model, prefix = toy_chain(), (0,)
    for without in (False, True):
        for seed in range(200):
            walked = tree.tree_step(
                model.p_fn, model.q_fn, prefix, 2, np.random.default_rng(seed), width=2, without_replacement=without
            )
            shaped = tree.tree_shape_step(
                model.p_fn,
                model.q_fn,
                prefix,
                2,
                np.random.default_rng(seed),
                shape=tree.full_shape((2, 2)),
                without_replacement=without,
            )
            assert walked == shaped, (without, seed)
    assert len(calls) >= 2 * 2 * 200


def test_the_real_model_tree_uses_the_sibling_rule():
    from specverify.models import tree_decoding as model_tree
    from specverify.samplers import tree

    assert model_tree.verify_siblings is tree.verify_siblings


# ------------------------------------------------------------------------ the greedy rule


def test_the_greedy_rule_is_greedy_node_everywhere(monkeypatch):
    from specverify.models import decoding, medusa
    from specverify.models import tree_decoding as model_tree
    from specverify.samplers import greedy

    assert decoding.greedy_verify is greedy.greedy_verify
    assert model_tree.greedy_node is greedy.greedy_node
    assert medusa.decoding is decoding
    calls = _spy(monkeypatch, greedy, "greedy_node")
    model, prefix = random_model(4, 1, 1, 5), (1,)
    for k in range(1, 5):
        step = greedy.greedy_step(model.p_fn, model.q_fn, prefix, k)
        drafts = greedy.greedy_drafts(model.q_fn, prefix, k)[0]
        rows = np.array([model.p_fn(prefix + tuple(drafts[:i])) for i in range(k + 1)])
        j, token = decoding.verify_rows(rows, drafts, None, 0.0, None, None, None)
        assert step == drafts[:j] + [token]
    assert calls


def test_greedy_node_picks_the_argmax_candidate():
    from specverify.samplers.greedy import greedy_node, greedy_verify

    row = np.array([0.1, 0.5, 0.5, 0.2])  # tie: the lowest id wins
    assert greedy_node(row, [3, 1, 2]) == (1, 1)
    assert greedy_node(row, [3, 2]) == (None, 1)
    assert greedy_node(row, []) == (None, 1)
    rows = np.array([[0.0, 1.0], [1.0, 0.0], [0.3, 0.7]])
    assert greedy_verify(rows, [1, 0]) == (2, 1)
    assert greedy_verify(rows, [1, 1]) == (1, 0)
    assert greedy_verify(rows, [0, 0]) == (0, 1)
