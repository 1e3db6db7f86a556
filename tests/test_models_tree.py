"""Tree drafts with a tree attention mask (``specverify.models.tree_decoding``) on the tiny random Qwen2 pair.

Checks: the masked forward's rows equal separate forwards of each root-to-node path; gathering
the cache to a path equals prefilling that path; greedy tree output equals target-only greedy
decoding (k = 1, 2, 3, both tree shapes); per round from one context the greedy tree accepts at
least as many tokens as the chain; at T = 0.7, top-k 8 the first two emitted tokens follow the
target's processed law (chi-square, stated false-fail rate and detectable TV); argument errors.
"""

import numpy as np
import pytest

INSTALL = "pip install -e '.[models]'"
torch = pytest.importorskip("torch", reason=f"the real-model stage needs torch: {INSTALL}")
pytest.importorskip("transformers", reason=f"the real-model stage needs transformers: {INSTALL}")
pytestmark = pytest.mark.usefixtures("one_thread")

from specverify.laws import stats  # noqa: E402
from specverify.laws.processing import process_logits  # noqa: E402
from specverify.models import decoding, model_calls  # noqa: E402
from specverify.models import tree_decoding as tree
from specverify.samplers.tree import tree_nodes  # noqa: E402

PROMPTS = ["def f(x):\n    return x", "Hello, how are you?", "import numpy as np\n"]
NEW_TOKENS = 24


# A hand-made tree after the prompt: phase 0 is the prompt's last token (the root), then nodes.
# Node tokens and phase parents: two children of the root, two under the first, one under the
# second, one under a grandchild (depth 3).
TREE_TOKENS = [101, 102, 103, 104, 105, 106]
TREE_PARENTS = [-1, 0, 0, 1, 1, 2, 3]


def _phase_paths(prompt):
    """For each phase token, the full token sequence up to and including it."""
    phase = [prompt[-1]] + TREE_TOKENS
    seen = tree.ancestor_matrix(TREE_PARENTS)
    return [prompt[:-1] + [phase[j] for j in np.flatnonzero(seen[i])] for i in range(len(phase))]


def _masked_rows(model, prompt):
    cache = model_calls.new_cache(model)
    with torch.no_grad():
        model_calls.forward(model, prompt[:-1], cache)
        rows = tree.tree_forward(model, [prompt[-1]] + TREE_TOKENS, TREE_PARENTS, 0, cache)
    return rows.numpy(), cache


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("role", ["target", "draft"])
def test_tree_mask_rows_equal_separate_path_forwards(pair, role, attention):
    """Row i of the masked forward = the last row of an uncached forward of phase token i's
    root-to-node path, to 1e-4, under both attention implementations that take the mask."""
    model = getattr(pair, role)
    before = model.config._attn_implementation
    model.set_attn_implementation(attention)
    try:
        prompt = pair.tokenizer.encode(PROMPTS[0])
        rows, _ = _masked_rows(model, prompt)
        for i, path in enumerate(_phase_paths(prompt)):
            alone = decoding.teacher_forced_logits(model, path)[-1]
            np.testing.assert_allclose(rows[i], alone, rtol=0, atol=1e-4, err_msg=f"phase token {i}")
    finally:
        model.set_attn_implementation(before)


def test_tree_positions_are_past_plus_depth():
    assert tree.tree_positions(10, TREE_PARENTS, 0) == [10, 11, 11, 12, 12, 12, 13]
    assert tree.tree_positions(10, TREE_PARENTS, 3) == [12, 12, 12, 13]


def test_keep_slots_equals_prefilling_the_path(pair):
    """Gathering the cache to a non-contiguous path gives the keys/values of a fresh prefill."""
    prompt = pair.tokenizer.encode(PROMPTS[1])
    _, cache = _masked_rows(pair.target, prompt)
    n_past = len(prompt) - 1
    path_phase = [0, 2, 5]  # root, its second child, that child's child
    model_calls.keep_slots(cache, list(range(n_past)) + [n_past + j for j in path_phase])
    with torch.no_grad():
        _assert_cache_is_prefill(pair.target, cache, prompt + [TREE_TOKENS[1], TREE_TOKENS[4]])


def test_keep_slots_refuses_bad_slots(pair):
    _, cache = _masked_rows(pair.target, pair.tokenizer.encode(PROMPTS[0]))
    with pytest.raises(ValueError, match="keep"):
        model_calls.keep_slots(cache, [3, 2])


def _assert_cache_is_prefill(model, cache, ids):
    """Keys/values equal a fresh prefill's to 1e-4 (different batch shapes round differently,
    ~1e-5 here; a wrong or misplaced slot differs by O(0.1))."""
    fresh = model_calls.new_cache(model)
    model_calls.forward(model, ids, fresh)
    assert model_calls.cache_length(cache) == len(ids)
    for got, want in zip(cache.layers, fresh.layers):
        torch.testing.assert_close(got.keys, want.keys, rtol=0, atol=1e-4)
        torch.testing.assert_close(got.values, want.values, rtol=0, atol=1e-4)


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_rounds_leave_both_caches_equal_to_a_prefill_of_the_output(pair, temperature):
    """After every round the target cache holds the output but its last token and the draft
    cache a prefix of that, key for key as a fresh prefill (greedy identity alone would not
    catch a wrong draft cache: it only lowers acceptance)."""
    sampling = tree.Sampling(temperature, None, None, 2, pair.vocab_size, np.random.default_rng(3), True)
    ids = pair.tokenizer.encode(PROMPTS[2])
    totals = decoding.DecodeStats()
    with torch.no_grad():
        state = tree.prefill(pair.target, pair.draft, ids)
        for _ in range(6):
            ids += tree.tree_round(pair.target, pair.draft, ids, state, 3, sampling, "full", totals)
            assert state.t_len == len(ids) - 1 and len(ids) - 2 <= state.d_len <= state.t_len
            _assert_cache_is_prefill(pair.target, state.t_cache, ids[: state.t_len])
            _assert_cache_is_prefill(pair.draft, state.d_cache, ids[: state.d_len])
    assert totals.accepted > 0


def _tree(pair, ids, k, max_new_tokens=NEW_TOKENS, **kwargs):
    return tree.tree_generate(pair.target, pair.draft, ids, k, max_new_tokens, vocab_size=pair.vocab_size, **kwargs)


@pytest.mark.parametrize("shape", ["full", "spine"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_greedy_tree_matches_target_only(pair, references, k, shape):
    verdicts = []
    for ref, logits in references:
        gen = _tree(pair, ref.ids[: ref.n_prompt], k, shape=shape)
        verdicts.append(decoding.compare_greedy(gen.ids, ref.ids, logits, ref.n_prompt))
        assert gen.stats.rounds < NEW_TOKENS, "the tree never accepted a draft"
        assert gen.stats.emitted >= NEW_TOKENS and len(gen.new_ids) == NEW_TOKENS
        per_round = 2 * k if shape == "spine" else tree_nodes(2, k)
        assert gen.stats.drafted == per_round * gen.stats.rounds
    near_ties = [v for v in verdicts if v["kind"] == "near-tie"]
    if near_ties:
        print(f"k={k} {shape}: near-ties (excused, reported): {near_ties}")
    assert [v for v in verdicts if v["kind"] == "mismatch"] == [], verdicts


def test_greedy_tree_stops_at_eos_like_target_only(pair, references):
    ref, _ = references[0]
    eos = ref.new_ids[7]
    prompt = ref.ids[: ref.n_prompt]
    want = decoding.target_only_generate(pair.target, prompt, NEW_TOKENS, vocab_size=pair.vocab_size, eos_token_id=eos)
    got = _tree(pair, prompt, 3, eos_token_id=eos)
    assert got.ids == want.ids and got.ids[-1] == eos and len(got.new_ids) <= 8


@pytest.mark.parametrize("k", [1, 2, 3])
def test_greedy_tree_accepts_at_least_the_chain_per_round(pair, references, k):
    """From one context, one greedy round (max_new_tokens=1) of the width-2 tree accepts >= the
    chain: the chain's drafts (q's argmax at each level) are the tree's first candidates, so
    the chain's accepted path is in the tree. Over whole generations this need not hold round
    by round (the two split the same text into different rounds), so only per context."""
    wins = 0
    for ref, _ in references:
        for end in range(ref.n_prompt, len(ref.ids), 3):
            context = ref.ids[:end]
            chain = decoding.speculative_generate(pair.target, pair.draft, context, k, 1, vocab_size=pair.vocab_size)
            for shape in ("full", "spine"):
                got = _tree(pair, context, k, 1, shape=shape).stats.accepted
                assert got >= chain.stats.accepted, (end, shape, got, chain.stats.accepted)
                wins += got > chain.stats.accepted
    assert wins > 0, "the sibling alternatives never helped: the tree reduced to the chain"


def test_tree_helper_measures_tree_and_chain(pair):
    rows = tree.measure_tree(pair, PROMPTS[:2], 2, 2, 12, 0.0)
    assert rows["tree"]["emitted"] >= 24 and rows["chain"]["emitted"] >= 24
    assert rows["tree"]["nodes_per_round"] == 6.0
    assert 1.0 <= rows["chain"]["tokens_per_pass"] <= rows["tree"]["tokens_per_pass"] <= 3.0


# ---------------------------------------------------------------------------- sampled law

TEMPERATURE, TOP_K = 0.7, 4
FALSE_FAIL_RATE = 1e-6  # per test, split between its chi-square tests
FALSE_PASS_RATE = 1e-3  # for the detectable-TV statement


def _two_token_law(model, prompt, vocab):
    """Exact law {(x1, x2): P} of two tokens sampled from ``model``'s processed rows."""
    first = process_logits(decoding.teacher_forced_logits(model, prompt, vocab)[-1], TEMPERATURE, TOP_K)
    law = {}
    for x1 in np.flatnonzero(first):
        row = decoding.teacher_forced_logits(model, prompt + [int(x1)], vocab)[-1]
        second = process_logits(row, TEMPERATURE, TOP_K)
        for x2 in np.flatnonzero(second):
            law[(int(x1), int(x2))] = float(first[x1] * second[x2])
    return law


def _marginal(law):
    out = {}
    for (x1, _), prob in law.items():
        out[x1] = out.get(x1, 0.0) + prob
    return out


def _sample_tree(pair, prompt, n_runs, n_tokens, without_replacement, seed):
    """n_runs independent tree generations of n_tokens (k = 2, width 2) from one prefill, rewound
    after each run; returns the emitted token tuples and the summed stats."""
    sampling = tree.Sampling(
        TEMPERATURE, TOP_K, None, 2, pair.vocab_size, np.random.default_rng(seed), without_replacement
    )
    totals, samples = decoding.DecodeStats(), []
    with torch.no_grad():
        state = tree.prefill(pair.target, pair.draft, prompt)
        for _ in range(n_runs):
            ids = list(prompt)
            while len(ids) - len(prompt) < n_tokens:
                ids += tree.tree_round(pair.target, pair.draft, ids, state, 2, sampling, "full", totals)
            samples.append(tuple(ids[len(prompt) : len(prompt) + n_tokens]))
            state.rewind(len(prompt) - 1)
    assert 0 < totals.rejections < totals.rounds, "the sibling rule was never (or always) exercised"
    return samples, totals


def _check(observed, law, rate, n):
    result = stats.chi_square_test(observed, law, rate)
    tv = stats.min_discrepancy_chi_square(n, law, rate, FALSE_PASS_RATE)
    print(f"{result.detail}; detects TV >= {tv:.3f} w.p. >= 1 - {FALSE_PASS_RATE}")
    assert result.passed, result.detail


def test_sampled_tree_first_two_tokens_follow_the_target(pair):
    """600 tree runs (k = 2, width 2, siblings without replacement, two tokens) at T = 0.7,
    top-k 4, where alpha ~0.5 (in about half the rounds some node rejects both candidates).

    The first token (4 cells) and the (first, second) pair (16 cells) are chi-square tested
    against the target's processed law at false-fail rate 5e-7 each (1e-6 for the test; fixed
    seed, so deterministic). At n = 600 the pair test detects, with probability >= 1 - 1e-3,
    any law at TV >= 0.21, the first-token test at TV >= 0.19 (``stats.min_discrepancy_chi_
    square``, printed). Negative control: the same counts reject the law of "always accept the
    first candidate", i.e. the draft's own two-token law (TV 0.67 from the target's here).
    """
    prompt = pair.tokenizer.encode(PROMPTS[1])
    target_law = _two_token_law(pair.target, prompt, pair.vocab_size)
    samples, _ = _sample_tree(pair, prompt, 600, 2, True, seed=11)
    rate = stats.split_budget(FALSE_FAIL_RATE, 2)
    _check([s[0] for s in samples], _marginal(target_law), rate, len(samples))
    _check(samples, target_law, rate, len(samples))
    draft_law = _two_token_law(pair.draft, prompt, pair.vocab_size)
    assert not stats.chi_square_test(samples, draft_law, rate).passed


def test_sampled_tree_iid_siblings_first_token_follows_the_target(pair):
    """i.i.d. siblings (SpecInfer's rule): 400 one-round runs, first token chi-square tested at
    false-fail rate 1e-6 against the target's processed law (4 cells; detects TV >= 0.23 with
    probability >= 1 - 1e-3)."""
    prompt = pair.tokenizer.encode(PROMPTS[1])
    samples, _ = _sample_tree(pair, prompt, 400, 1, False, seed=12)
    law = _marginal(_two_token_law(pair.target, prompt, pair.vocab_size))
    _check([s[0] for s in samples], law, FALSE_FAIL_RATE, len(samples))


def test_identical_draft_accepts_every_level(pair):
    """p == q up to float rounding: the first candidate is accepted at every level (a rejection
    has probability ~1e-6), so each pass emits k + 1 tokens."""
    gen = tree.tree_generate(
        pair.target,
        pair.target,
        pair.tokenizer.encode(PROMPTS[0]),
        3,
        24,
        temperature=0.7,
        top_p=0.9,
        rng=1,
        vocab_size=pair.vocab_size,
    )
    assert gen.stats.rejections == 0 and gen.stats.tokens_per_pass == 4.0
    assert len(gen.new_ids) == 24


# ---------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"width": 0}, "width"),
        ({"shape": "star"}, "shape"),
        ({"temperature": -1.0}, "temperature"),
        ({"vocab_size": 10_000}, "vocab_size"),
    ],
)
def test_bad_arguments_name_themselves(pair, kwargs, name):
    with pytest.raises(ValueError, match=name):
        tree.tree_generate(pair.target, pair.draft, [1, 2, 3], 2, 4, **kwargs)


def test_bad_parents_and_replayed_impossible_candidate():
    with pytest.raises(ValueError, match="parents"):
        tree.ancestor_matrix([-1, 1])
    replay = tree.ReplayRng(np.random.default_rng(0), [2])
    with pytest.raises(ValueError, match="candidates"):
        replay.choice(3, p=np.array([0.5, 0.5, 0.0]))
