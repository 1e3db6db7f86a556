"""Exactness of the samplers beyond the single chain, and detection of their mutants.

Every assertion on distributions uses the exact enumerator (specverify.laws.exact): the output
distribution of the first m tokens is computed with no sampling noise, so a correct sampler's TV
from the target is rounding error (~1e-16) and the thresholds are not statistical (false-fail
rate 0 up to float rounding). No test here draws random samples for a distributional claim.
"""

import functools
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis_labels import label_model

from specverify.bench.compare_samplers import copy_heavy_chain, copy_heavy_prompt
from specverify.bench.long_run import exact_long_run, simulate
from specverify.laws.chains import TableModel, handout_iid, toy_chain
from specverify.laws.exact import (
    exact_tv,
    round_length_distribution,
    sampler_distribution,
    sequence_distribution,
    total_variation,
)
from specverify.laws.theory import expected_tokens as theory_tokens
from specverify.mutants.multi_draft import MULTI_DRAFT_MUTANTS
from specverify.samplers import SAMPLERS, get_sampler
from specverify.samplers.adaptive import AdaptiveK, confidence_step
from specverify.samplers.chain import speculative_step
from specverify.samplers.greedy import greedy_step
from specverify.samplers.prompt_lookup import lookup_drafts, prompt_lookup_step
from specverify.samplers.tree import tree_nodes, tree_step
from specverify.surface import strategies as sst

TOL = 1e-9  # exact TV of a correct sampler is float rounding, ~1e-16
EXACT_SAMPLERS = [
    "tree-iid", "tree-without-replacement", "adaptive-confidence", "adaptive-k", "prompt-lookup",
]  # fmt: skip


def second_order_model() -> TableModel:
    rng = np.random.default_rng(20240521)
    p, q = rng.dirichlet(np.ones(3), size=9), rng.dirichlet(np.ones(3), size=9)
    return TableModel(p, q, order=2, name="second-order")


def position_dependent_model() -> TableModel:
    rng = np.random.default_rng(7)
    p, q = rng.dirichlet(np.ones(3), size=6), rng.dirichlet(np.ones(3), size=6)
    return TableModel(p, q, order=1, period=2, name="position-dependent")


MODELS = {m.name: m for m in (toy_chain(), handout_iid(), second_order_model(),
                               position_dependent_model())}  # fmt: skip
# prompt lookup only drafts when the prefix repeats itself, so it also runs from a repetitive one
PREFIXES = {"plain": (0,), "repetitive": (0, 1, 2, 0, 1)}


def first_m_tvs(sampler, model, prefix, k, m_max=3) -> list[float]:
    """Exact TV of the first m = 1..m_max tokens, from one enumeration of the first m_max."""
    joint = sampler_distribution(sampler, model.p_fn, model.q_fn, prefix, k, m_max)
    tvs = []
    for m in range(1, m_max + 1):
        marginal = defaultdict(float)
        for seq, w in joint.items():
            marginal[seq[:m]] += w
        tvs.append(total_variation(marginal, sequence_distribution(model.p_fn, prefix, m)))
    return tvs


@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("name", EXACT_SAMPLERS)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_exact_for_first_three_tokens(name, model_name, k):
    model = MODELS[model_name]
    prefixes = PREFIXES.values() if name == "prompt-lookup" else [PREFIXES["plain"]]
    for prefix in prefixes:
        tvs = first_m_tvs(get_sampler(name), model, prefix, k)
        assert max(tvs) < TOL, f"{name} on {model_name}, prefix {prefix}, k={k}: TVs {tvs}"


@settings(max_examples=12)
@given(sst.table_models(vocab_size=(2, 3), order=(0, 1), period=(1, 2)))
def test_exact_on_generated_models(model):
    k, m = 2, 3  # m > k: the window reaches the first round's bonus token
    label_model(model, k, m)
    for name in EXACT_SAMPLERS:
        for prefix in ((0,), (0, 1, 0)):
            tv = exact_tv(get_sampler(name), model.p_fn, model.q_fn, prefix, k, m)
            assert tv < TOL, f"{name}, prefix {prefix}: TV {tv:.3g}"


@pytest.mark.parametrize("without_replacement", [False, True])
def test_tree_of_width_one_is_the_chain(without_replacement):
    tree = functools.partial(tree_step, width=1, without_replacement=without_replacement)
    model = toy_chain()
    for k in (1, 2, 3):
        got = sampler_distribution(tree, model.p_fn, model.q_fn, (0,), k, 3)
        want = sampler_distribution(speculative_step, model.p_fn, model.q_fn, (0,), k, 3)
        assert got.keys() == want.keys()
        assert max(abs(got[s] - want[s]) for s in want) < 1e-12


@pytest.mark.parametrize("width", [3, 5])
def test_wide_trees_stay_exact_when_q_runs_out_of_support(width):
    """Width above the draft's support: without replacement stops drafting early; i.i.d. repeats."""
    p = [[0.5, 0.3, 0.2]]
    q = [[0.0, 0.6, 0.4]]  # two tokens in q's support, token 0 only reachable by the residual
    model = TableModel(p, q, order=0, name="narrow-draft")
    for rule in (False, True):
        tree = functools.partial(tree_step, width=width, without_replacement=rule)
        assert exact_tv(tree, model.p_fn, model.q_fn, (), 2, 3) < TOL


def expected_tokens(sampler, model, k):
    dist = round_length_distribution(sampler, model.p_fn, model.q_fn, (0,), k)
    return sum(n * w for n, w in dist.items())


def test_trees_emit_more_tokens_per_round_than_the_chain():
    """Exact on the handout's i.i.d. pair (alpha 0.8): chain k=1 gives 1 + 0.8 = 1.8 tokens;
    a second i.i.d. candidate verified against the residual [1, 0, 0] is accepted with
    q(0) = 0.3, so the tree gives 1 + (1 - 0.2 * 0.7) = 1.86."""
    model = handout_iid()
    assert expected_tokens(speculative_step, model, 1) == pytest.approx(1.8, abs=1e-12)
    assert expected_tokens(get_sampler("tree-iid"), model, 1) == pytest.approx(1.86, abs=1e-12)
    assert expected_tokens(get_sampler("tree-without-replacement"), model, 1) > 1.8


def test_tree_size():
    assert tree_nodes(2, 3) == 2 + 4 + 8
    assert tree_nodes(1, 4) == 4


def test_greedy_is_exact_on_one_hot_targets_only():
    one_hot = np.eye(3)[[1, 2, 0]]  # argmax 1 after 0, 2 after 1, 0 after 2
    q = toy_chain().q_table
    greedy_model = TableModel(one_hot, q, order=1, name="temperature-0")
    for k in (1, 2, 3):
        assert max(first_m_tvs(greedy_step, greedy_model, (0,), k)) < TOL
    model = toy_chain()
    assert exact_tv(get_sampler("greedy"), model.p_fn, model.q_fn, (0,), 2, 2) > 0.05


def test_greedy_matches_target_only_greedy_decoding_without_the_rng():
    """Whatever the draft, greedy rounds (rng=None: no randomness used) reproduce the target's
    argmax text, at every k."""
    for model in MODELS.values():
        target_text = [0]
        for _ in range(8):
            target_text.append(int(np.argmax(model.p_fn(tuple(target_text)))))
        for k in (1, 2, 3):
            text = [0]
            while len(text) < len(target_text):
                text += greedy_step(model.p_fn, model.q_fn, tuple(text), k, rng=None)
            assert text[: len(target_text)] == target_text, model.name


# mutant id -> the model on which it is asserted to be biased (k = 2, m = 2: the peeking stop
# rule only acts from the second draft on, so one drafted position is not enough)
MUTANT_MODELS = {
    "tree/deterministic-topk-candidates": "toy-chain",
    "tree/duplicate-siblings-counted-twice": "toy-chain",  # 0 on handout-iid by coincidence
    "tree/residual-not-updated": "handout-iid",
    "adaptive/stop-peeks-at-target": "second-order",
    "greedy/argmax-check-at-positive-temperature": "position-dependent",
}


@pytest.mark.parametrize("mutant", MULTI_DRAFT_MUTANTS, ids=lambda m: m["id"])
def test_every_mutant_is_biased(mutant):
    assert set(mutant) == {"id", "description", "effect", "fn", "reference"}
    assert mutant["effect"] in {"biased", "contract", "fewer-tokens"}
    model = MODELS[MUTANT_MODELS[mutant["id"]]]
    tv = exact_tv(mutant["fn"], model.p_fn, model.q_fn, (0,), 2, 2)
    assert tv > 1e-6, f"{mutant['id']} looks exact on {model.name} (TV {tv:.3g})"


def test_prompt_lookup_drafts():
    assert lookup_drafts((5, 6, 7, 5, 6), 3) == [7, 5, 6]  # bigram (5, 6) seen at 0
    assert lookup_drafts((5, 6, 7, 8, 6), 3) == [7, 8, 6]  # no bigram match: unigram 6
    assert lookup_drafts((1, 2, 1, 2, 9, 1, 2), 2) == [9, 1]  # the most recent occurrence
    assert lookup_drafts((1, 1, 1), 5) == [1]  # the match may overlap the final n-gram
    assert lookup_drafts((1, 2, 3), 4) == []
    assert lookup_drafts((4,), 4) == []


def test_prompt_lookup_is_exact_on_copy_heavy_sequences():
    model, prompt = copy_heavy_chain(), copy_heavy_prompt()
    for k in (1, 2, 3):
        tvs = first_m_tvs(prompt_lookup_step, model, prompt, k)
        assert max(tvs) < TOL, f"k={k}: TVs {tvs}"
    # and it actually copies: one round of k = 3 emits 1 + 0.92 + 0.92^2 + 0.92^3 tokens
    dist = round_length_distribution(prompt_lookup_step, model.p_fn, model.q_fn, prompt, 3)
    assert sum(n * w for n, w in dist.items()) == pytest.approx(sum(0.92**i for i in range(4)), abs=1e-12)


def test_prompt_lookup_without_a_match_emits_one_token_from_p():
    model = toy_chain()
    dist = sampler_distribution(prompt_lookup_step, model.p_fn, model.q_fn, (0,), 3, 1)
    assert dist == pytest.approx({(t,): float(model.p_fn((0,))[t]) for t in range(3)})
    assert round_length_distribution(prompt_lookup_step, model.p_fn, model.q_fn, (0,), 3) == {1: pytest.approx(1.0)}


def test_confidence_stopping_drafts_less_on_an_unsure_draft():
    """q's top probability is 0.4 on the handout pair: threshold 0.5 stops after one draft."""
    model = handout_iid()
    unsure = functools.partial(confidence_step, threshold=0.5)
    sure = functools.partial(confidence_step, threshold=0.3)
    assert max(round_length_distribution(unsure, model.p_fn, model.q_fn, (0,), 3)) == 2
    assert max(round_length_distribution(sure, model.p_fn, model.q_fn, (0,), 3)) == 4


def test_adaptive_k_grows_k_when_every_draft_is_accepted():
    """p == q: every draft is accepted, alpha_hat rises after each round and k follows."""
    model = TableModel([[0.5, 0.5]], [[0.5, 0.5]], order=0, name="p-equals-q")
    sampler = AdaptiveK(alpha0=0.3, cost_ratio=0.05, smoothing=0.3)
    rng = np.random.default_rng(0)
    prefix, ks, alphas = (), [], []
    for _ in range(8):
        alphas.append(sampler.estimates(prefix)[0])
        ks.append(sampler.choose_k(prefix, 8))
        out = sampler(model.p_fn, model.q_fn, prefix, 8, rng)
        assert len(out) == ks[-1] + 1  # all accepted, plus the bonus token
        prefix += tuple(out)
    assert alphas == sorted(alphas) and alphas[-1] > 0.95
    assert ks[0] < ks[-1] == 8
    assert sampler.estimates((1, 1, 1)) == (0.3, 0.05)  # an unknown sequence starts at the prior


def test_adaptive_k_cost_observation_lowers_k():
    sampler = AdaptiveK(alpha0=0.8, cost_ratio=0.05, smoothing=1.0)
    before = sampler.choose_k((), 16)
    sampler.observe_cost((), 0.5)
    assert sampler.estimates(()) == (0.8, 0.5)
    assert sampler.choose_k((), 16) < before


@pytest.mark.parametrize("name", sorted(set(EXACT_SAMPLERS) | {"greedy"}))
def test_contract_with_a_real_generator(name):
    model = MODELS["second-order"]
    rng = np.random.default_rng(1)
    prefix = (0, 1, 2, 0, 1)
    for k in (1, 2, 4):
        for _ in range(50):
            out = SAMPLERS[name](model.p_fn, model.q_fn, prefix, k, rng)
            assert 1 <= len(out) <= k + 1
            assert all(isinstance(t, int) and 0 <= t < 3 for t in out)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: tree_step(toy_chain().p_fn, toy_chain().q_fn, (0,), 2, None, width=0), "width"),
        (lambda: confidence_step(toy_chain().p_fn, toy_chain().q_fn, (0,), 2, None, threshold=1.5), "threshold"),
        (lambda: lookup_drafts((1, 2), 2, ngram=0), "ngram"),
        (lambda: AdaptiveK(smoothing=0.0), "smoothing"),
        (lambda: AdaptiveK(alpha0=1.2), "alpha0"),
        (lambda: prompt_lookup_step(handout_iid().p_fn, None, (7, 7), 2, None), "prefix"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_long_run_tokens_per_round_match_theory_and_simulation():
    """Exact long-run rate on the i.i.d. pair equals the handout's formula (3.3616 at k = 4);
    the simulation of 2,000 rounds agrees within 5 standard errors (false-fail rate ~6e-7
    under the normal approximation, fixed seed)."""
    model = handout_iid()
    exact = exact_long_run(speculative_step, model, (0,), 4)
    assert exact.tokens == pytest.approx(theory_tokens(0.8, 4), abs=1e-9)
    assert exact.draft_calls == pytest.approx(4.0, abs=1e-9)
    sim = simulate(speculative_step, model, (0,), 4, seed=3, sequences=40, rounds=50)
    assert sim.se > 0 and abs(sim.tokens - exact.tokens) < 5 * sim.se
