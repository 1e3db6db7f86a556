"""The cost model (draft and target costs per pass) and the loops that act on it, on the tiny random Qwen2 pair.

Checks ``theory.speedup_with_costs`` / ``best_k_with_costs``, the measured ``StepCosts``, the
``KPolicy`` that chooses k in 0..K per round, and that the loop stays exact when k changes
between rounds (k = 0 included) and when prompt lookup drafts: greedy output identical to
target-only decoding, and the law of the first two sampled tokens equal to the target's.
"""

import numpy as np
import pytest

from specverify.laws import stats, theory

INSTALL = "pip install -e '.[models]'"
torch = pytest.importorskip("torch", reason=f"the real-model stage needs torch: {INSTALL}")
pytest.importorskip("transformers", reason=f"the real-model stage needs transformers: {INSTALL}")
pytestmark = pytest.mark.usefixtures("one_thread")

from specverify.laws.processing import process_logits  # noqa: E402
from specverify.models import costs, decoding  # noqa: E402

PROMPTS = ["def f(x):\n    return x", "Hello, how are you?", "a = [1, 2, 3]\nb = [1, 2, 3]\n"]
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def step_costs(pair):
    return costs.measure_step_costs(pair.target, pair.draft, pair.tokenizer.encode(PROMPTS[0]), 3, repeats=3)


class Cycle:
    """A policy that cycles through fixed ks: rounds of every size, k = 0 included."""

    def __init__(self, ks):
        self.ks, self.i = list(ks), 0

    def choose(self, max_k):
        k = min(self.ks[self.i % len(self.ks)], max_k)
        self.i += 1
        return k

    def observe(self, drafted, accepted, draft_s, verify_s):
        assert 0 <= accepted <= drafted


# ---------------------------------------------------------------------------- theory


def test_speedup_with_costs_reduces_to_the_handout_at_unit_verification():
    for alpha, k, c in [(0.8, 4, 0.05), (0.5, 1, 0.3), (0.95, 7, 0.0)]:
        assert theory.speedup_with_costs(alpha, k, c, 1.0) == pytest.approx(theory.expected_speedup(alpha, k, c))
    assert theory.speedup_with_costs(0.9, 0, 0.5, 1.0) == 1.0


def test_best_k_with_costs_switches_speculation_off_when_verification_is_dear():
    # alpha 0.9, c 0.33: with v = 1 speculation pays (handout); with v(k) = 1 + k it never does
    assert theory.best_k_with_costs(0.9, 0.33, [1.0] * 5) == theory.best_k(0.9, 0.33, max_k=4)
    assert theory.best_k_with_costs(0.9, 0.33, [1.0 + k for k in range(5)]) == 0
    # a cheap draft and a flat v(k) past k = 1 make the largest k best
    assert theory.best_k_with_costs(0.95, 0.01, [1.0, 1.5, 1.5, 1.5, 1.5]) == 4


@pytest.mark.parametrize("bad", [[], [1.0, 0.0], [1.0, float("nan")], [[1.0]]])
def test_verify_costs_are_validated(bad):
    with pytest.raises(ValueError, match="verify_costs"):
        theory.best_k_with_costs(0.5, 0.1, bad)


# ---------------------------------------------------------------------------- costs and policy


def test_measured_costs_have_the_promised_shape(step_costs):
    assert len(step_costs.v) == 4 and step_costs.v[0] == 1.0
    assert all(v > 0 for v in step_costs.v) and step_costs.c > 0
    assert step_costs.best_k(0.0) == 0  # a draft that is always rejected never pays


def test_policy_chooses_zero_and_probes():
    dear = costs.StepCosts(1.0, 0.5, (1.0, 3.0, 4.0, 5.0))
    policy = costs.KPolicy(dear, alpha0=0.6, probe_every=4)
    ks = [policy.choose(3) for _ in range(8)]
    assert ks == [0, 0, 0, ks[3], 0, 0, 0, ks[7]] and ks[3] >= 1 and ks[7] >= 1


def test_policy_follows_alpha():
    cheap = costs.StepCosts(1.0, 0.05, (1.0, 1.05, 1.1, 1.15, 1.2))
    policy = costs.KPolicy(cheap, alpha0=0.95)
    assert policy.choose(4) == 4
    for _ in range(60):
        policy.observe(4, 0, draft_s=0.2, verify_s=1.2)  # every first draft rejected
    assert policy.alpha_hat < 0.01 and policy.choose(4) == 0


def test_policy_learns_costs():
    start = costs.StepCosts(1.0, 0.05, (1.0, 1.1, 1.2))
    policy = costs.KPolicy(start, alpha0=0.9, learn_costs=True, smoothing=0.5)
    for _ in range(20):
        policy.observe(2, 2, draft_s=2.0, verify_s=5.0)  # drafts and verification dearer than thought
    learned = policy.current_costs()
    assert learned.draft_step_s == pytest.approx(1.0, rel=1e-3) and learned.verify_s[2] == pytest.approx(5.0, rel=1e-3)
    assert policy.choose(2) == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [({"alpha0": 1.5}, "alpha0"), ({"smoothing": 0.0}, "smoothing"), ({"probe_every": 0}, "probe_every")],
)
def test_policy_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        costs.KPolicy(costs.StepCosts(1.0, 0.1, (1.0, 1.1)), **kwargs)


# ---------------------------------------------------------------------------- exactness of the loops


@pytest.mark.parametrize("drafter", ["cycle", "policy", "lookup", "confident"])
def test_greedy_output_identical_to_target_only(pair, step_costs, drafter):
    for text in PROMPTS:
        ids = pair.tokenizer.encode(text)
        ref = decoding.target_only_generate(pair.target, ids, NEW_TOKENS, vocab_size=pair.vocab_size)
        draft, policy = pair.draft, None
        if drafter == "cycle":
            policy = Cycle([0, 3, 1, 0, 2])
        elif drafter == "policy":
            policy = costs.KPolicy(step_costs, alpha0=0.5, learn_costs=True, probe_every=2)
        elif drafter == "lookup":
            draft = decoding.LookupDrafter(pair.vocab_size)
        else:
            draft = decoding.ModelDrafter(pair.draft, pair.vocab_size, min_confidence=0.4)
        gen = decoding.speculative_generate(
            pair.target, draft, ids, 3, NEW_TOKENS, vocab_size=pair.vocab_size, policy=policy
        )
        assert gen.ids == ref.ids, (drafter, text)
        assert gen.stats.emitted >= NEW_TOKENS and gen.stats.accepted <= gen.stats.drafted


def _two_token_law(model, width, ids, temperature, top_k):
    """A model's exact law of its first two sampled tokens after ``ids``."""
    with torch.no_grad():
        first = model(input_ids=torch.tensor([ids])).logits[0, -1, :width].float().numpy()
        p1 = process_logits(first, temperature, top_k)
        support = np.flatnonzero(p1 > 1e-12)
        batch = torch.tensor([ids + [int(x)] for x in support])
        second = model(input_ids=batch).logits[:, -1, :width].float().numpy()
    law = {}
    for x, row in zip(support, second):
        p2 = process_logits(row, temperature, top_k)
        for y in np.flatnonzero(p2 > 1e-12):
            law[(int(x), int(y))] = p1[x] * p2[y]
    return law


N_SAMPLED = 400
FALSE_FAIL = 1e-4
TOP_K = 4  # at most 16 two-token cells, so 400 runs have power


@pytest.mark.parametrize("drafter", ["cycle", "lookup"])
def test_sampled_law_of_the_first_two_tokens(pair, drafter):
    """400 generations of 2 tokens at T = 0.7, top-k 4: k switching between 0, 1 and 2 (the first round
    drafts 0 tokens, the second 2, or 1 then 0, ...) and prompt lookup (one-hot q) both follow the
    target's exact two-token law, the draft model also stopping after a draft below confidence
    0.5 (``ModelDrafter(min_confidence=0.5)``). Pearson chi-square with pooled cells at false-fail rate 1e-4
    (fixed seeds: deterministic). It also checks the TV this n detects with probability 0.95
    (``min_discrepancy_chi_square``) is below the TV of the classic bug "emit the draft's own
    sample" (0.38 here), so a loop with that bug could not pass."""
    ids = pair.tokenizer.encode("a = [1, 2, 3]\nb = [1, 2")
    law = _two_token_law(pair.target, pair.vocab_size, ids, 0.7, TOP_K)
    rng = np.random.default_rng(11)
    counts = {}
    for i in range(N_SAMPLED):
        if drafter == "cycle":  # a draft model that also stops at its own low confidence
            draft = decoding.ModelDrafter(pair.draft, pair.vocab_size, min_confidence=0.5)
            policy = Cycle([[0, 2], [1, 0], [2, 1]][i % 3])
        else:
            draft, policy = decoding.LookupDrafter(pair.vocab_size), None
        gen = decoding.speculative_generate(
            pair.target,
            draft,
            ids,
            2,
            2,
            temperature=0.7,
            top_k=TOP_K,
            rng=rng,
            vocab_size=pair.vocab_size,
            policy=policy,
        )
        key = tuple(gen.new_ids)
        counts[key] = counts.get(key, 0) + 1
    result = stats.chi_square_test(counts, law, FALSE_FAIL)
    assert result.passed, result.detail
    detectable = stats.min_discrepancy_chi_square(N_SAMPLED, law, FALSE_FAIL, 0.05)
    assert detectable < 0.25, detectable  # 0.22: the TV this n sees with probability 0.95
    draft_law = _two_token_law(pair.draft, pair.vocab_size, ids, 0.7, TOP_K)
    tv = 0.5 * sum(abs(law.get(c, 0.0) - draft_law.get(c, 0.0)) for c in set(law) | set(draft_law))
    assert tv > detectable, "the control must be visible at this n for the test to mean anything"


def test_confidence_stop_drafts_fewer_and_is_validated(pair):
    ids = pair.tokenizer.encode(PROMPTS[0])
    never = decoding.speculative_generate(
        pair.target,
        decoding.ModelDrafter(pair.draft, pair.vocab_size, min_confidence=0.0),
        ids,
        3,
        NEW_TOKENS,
        vocab_size=pair.vocab_size,
    )
    always = decoding.speculative_generate(
        pair.target,
        decoding.ModelDrafter(pair.draft, pair.vocab_size, min_confidence=1.0),
        ids,
        3,
        NEW_TOKENS,
        vocab_size=pair.vocab_size,
    )
    assert never.ids == always.ids
    assert always.stats.drafted == always.stats.rounds  # q(x) < 1 always: one draft a round
    assert never.stats.drafted == 3 * never.stats.rounds
    with pytest.raises(ValueError, match="min_confidence"):
        decoding.ModelDrafter(pair.draft, pair.vocab_size, min_confidence=1.5)
