"""Tests of specverify.laws.torch_random: torch samplers get their exact output law from
``laws.exact``, and every use of a random torch value the layer does not model refuses.

Laws are exact up to float32 rounding (torch's thresholds and weights are float32), so a correct
torch sampler is within 1e-6 of the target and of the NumPy reference ``samplers.chain``; the
mutants are further than 0.01 (exactly, no sampling).
"""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from specverify.interfaces.round.cases import get_budget, reference_case
from specverify.interfaces.round.tasks import enumerate_task
from specverify.laws.chains import handout_iid, iid_model, toy_chain
from specverify.laws.exact import (
    NotEnumerable,
    SubrunMemo,
    enumerate_distribution,
    exact_tv,
    sampler_distribution,
    sequence_distribution,
    total_variation,
)
from specverify.laws.random_elements import decide_deferred
from specverify.laws.torch_random import read_deferred
from specverify.samplers.chain import draft, speculative_step

FLOAT32 = 1e-6


def generator(rng) -> torch.Generator:
    return torch.Generator().manual_seed(int(rng.integers(2**63)))


def assert_law(got: dict, expected: dict, tol: float = FLOAT32):
    assert total_variation(got, expected) < tol, (got, expected)
    assert sum(got.values()) == pytest.approx(1.0, abs=tol)


# ---------------------------------------------------------------------------------------------
# A torch port of the exact rule, and three mutants


def torch_round(accept="min", residual="max", bonus=True, global_generator=False):
    """The exact rule in torch (drafts by multinomial, coins by rand, the residual by the
    exponential race, the bonus by multinomial), or one mutant of it."""

    def speculative(p_fn, q_fn, prefix, k, rng):
        if global_generator:
            torch.manual_seed(int(rng.integers(2**63)))
            g = None
        else:
            g = generator(rng)
        prefix, drafts, qs = tuple(prefix), [], []
        for _ in range(k):
            qs.append(torch.tensor(q_fn(prefix + tuple(drafts)), dtype=torch.float32))
            drafts.append(int(torch.multinomial(qs[-1], 1, generator=g)))
        for i, x in enumerate(drafts):
            p, q = torch.tensor(p_fn(prefix + tuple(drafts[:i])), dtype=torch.float32), qs[i]
            ratio = torch.clamp(p[x] / q[x], max=1.0) if accept == "min" else p[x]
            if bool(torch.rand(1, generator=g) < ratio):
                continue
            r = torch.clamp(p - q, min=0.0) if residual == "max" else p.clone()
            e = torch.empty_like(r).exponential_(1.0, generator=g)
            return drafts[:i] + [int(r.div_(e).argmax(dim=-1))]
        if not bonus:
            return drafts
        p = torch.tensor(p_fn(prefix + tuple(drafts)), dtype=torch.float32)
        return drafts + [int(torch.multinomial(p, 1, generator=g)[0])]

    return speculative


def round_law(sampler, model, prefix, k) -> dict:
    return enumerate_distribution(lambda rng: tuple(sampler(model.p_fn, model.q_fn, prefix, k, rng)))


@pytest.mark.parametrize("global_generator", [False, True])
def test_the_torch_rule_is_exact(global_generator):
    sampler, model = torch_round(global_generator=global_generator), toy_chain()
    assert exact_tv(sampler, model.p_fn, model.q_fn, (0,), 2, 2) < FLOAT32
    assert_law(round_law(sampler, model, (0,), 2), round_law(speculative_step, model, (0,), 2))


def test_the_round_battery_enumerates_it():
    case = reference_case()
    status, law = enumerate_task(torch_round(), case, get_budget("quick"))
    assert status == "ok"
    assert_law(law, sequence_distribution(case.model.p_fn, case.prefix, case.m))


def test_a_batch_one_round_with_k_3_over_5_tokens_is_exact():
    model = iid_model([0.1, 0.2, 0.3, 0.15, 0.25], [0.3, 0.1, 0.2, 0.25, 0.15])
    assert_law(round_law(torch_round(), model, (), 3), round_law(speculative_step, model, (), 3))


@pytest.mark.parametrize(
    "mutant", [dict(residual="p"), dict(accept="p"), dict(bonus=False)], ids=["resample-from-p", "u<p", "no-bonus"]
)
def test_torch_mutants_are_exactly_far(mutant):
    sampler, model = torch_round(**mutant), toy_chain()
    reference = round_law(speculative_step, model, (0,), 2)
    assert total_variation(round_law(sampler, model, (0,), 2), reference) > 0.01
    if "bonus" not in mutant:  # dropping the bonus changes the rounds, not the law of the tokens
        assert exact_tv(sampler, model.p_fn, model.q_fn, (0,), 2, 2) > 0.01


# ---------------------------------------------------------------------------------------------
# vLLM V0's rejection sampler, batch 1, written out as the engine does it


def vllm_v0_round(p_fn, q_fn, prefix, k, rng):
    """Drafts from NumPy; acceptance, recovered tokens and the bonus token as vLLM V0's
    ``RejectionSampler`` (uniforms from the request's generator, the recovered tokens by the
    exponential race on clamp(p - q, min=tiny), the first rejection by cumprod)."""
    prefix = tuple(prefix)
    drafts, qs = draft(q_fn, prefix, k, rng)
    ps = [p_fn(prefix + tuple(drafts[:i])) for i in range(k + 1)]
    g = generator(rng)
    target = torch.tensor(np.array(ps[:k]), dtype=torch.float32)[None]
    draft_probs = torch.tensor(np.array(qs), dtype=torch.float32)[None]
    ids = torch.tensor([drafts])
    batch, positions = torch.arange(1)[:, None], torch.arange(k)
    ratio = target[batch, positions, ids] / draft_probs[batch, positions, ids]
    uniform = torch.empty(1, k)
    uniform[0, :] = torch.rand(1, k, generator=g)
    accepted = uniform < torch.clamp(ratio, max=1)
    f = torch.clamp(target - draft_probs, min=torch.finfo(torch.float32).tiny)
    recovered = (f / torch.sum(f, dim=-1).reshape(-1, k, 1)).reshape(k, -1)
    q = torch.empty_like(recovered)
    q[0:k].exponential_(1.0, generator=g)
    recovered_ids = recovered.div_(q).argmax(dim=1).view(1, k)
    bonus = torch.multinomial(torch.tensor(ps[k], dtype=torch.float32), 1, generator=g)
    n = int(accepted.int().cumprod(dim=1).sum())
    return drafts[:n] + ([int(recovered_ids[0, n])] if n < k else [int(bonus[0])])


def test_a_vllm_v0_style_round_is_exact():
    model = handout_iid()
    assert exact_tv(vllm_v0_round, model.p_fn, model.q_fn, (), 1, 2) < FLOAT32
    assert_law(round_law(vllm_v0_round, model, (), 2), round_law(speculative_step, model, (), 2))


# ---------------------------------------------------------------------------------------------
# Small programs: each modelled form gives its exact law


def softmax(logits):
    z = np.exp(np.asarray(logits) - max(logits))
    return z / z.sum()


LOGITS = [0.5, -1.0, 2.0, 0.0]


def gumbel_exponential(rng):
    e = torch.empty(4).exponential_(generator=generator(rng))
    return int((torch.tensor(LOGITS) - torch.log(e)).argmax())


def gumbel_uniform(rng):
    torch.manual_seed(int(rng.integers(2**63)))  # the global generator
    u = torch.rand(2, 4)
    return tuple((torch.tensor(LOGITS) - torch.log(-torch.log(u))).argmax(dim=-1, keepdim=True).view(-1).tolist())


def race(rng):
    w = torch.tensor([[0.0, 0.0, 0.0], [0.2, 0.0, 0.8]])
    e = torch.empty_like(w).exponential_(generator=generator(rng))
    return tuple((w * (1 / e)).argmax(dim=1).tolist())


def test_gumbel_max_and_the_exponential_race():
    law = dict(enumerate(softmax(LOGITS)))
    assert_law(enumerate_distribution(gumbel_exponential), law)
    pairs = {(i, j): law[i] * law[j] for i in law for j in law}
    assert_law(enumerate_distribution(gumbel_uniform), pairs)
    assert_law(enumerate_distribution(race), {(0, 0): 0.2, (0, 2): 0.8})  # a row of zeros: index 0


def test_multinomial_randint_bernoulli_and_comparisons():
    def program(rng):
        g = generator(rng)
        pair = tuple(torch.multinomial(torch.tensor([[0.5, 0.3, 0.2]]), 2, generator=g)[0].tolist())
        die = int(torch.randint(1, 4, (1,), generator=g))
        coin = int(torch.bernoulli(torch.tensor(0.25), generator=g))
        u = torch.rand(2, generator=g)
        below = tuple((2 * u - 0.5 < torch.tensor([0.1, 1.0])).tolist())
        return pair, die, coin, below

    without = {(0, 1): 0.3, (0, 2): 0.2, (1, 0): 0.3 * 0.5 / 0.7, (1, 2): 0.3 * 0.2 / 0.7,
               (2, 0): 0.2 * 0.5 / 0.8, (2, 1): 0.2 * 0.3 / 0.8}  # fmt: skip
    below = {(True, True): 0.3 * 0.75, (True, False): 0.3 * 0.25, (False, True): 0.7 * 0.75,
             (False, False): 0.7 * 0.25}  # fmt: skip
    expected = {
        (pair, die, coin, b): wp * wb * (0.25 if coin else 0.75) / 3
        for pair, wp in without.items()
        for die in (1, 2, 3)
        for coin in (0, 1)
        for b, wb in below.items()
    }
    assert_law(enumerate_distribution(program), expected)


def test_one_uniform_compared_twice_stays_consistent():
    def program(rng):
        u = torch.rand(1, generator=generator(rng))
        return bool(u < 0.5), bool(0.25 >= u), bool(torch.gt(-u + 1, 0.9))

    expected = {(True, True, True): 0.1, (True, True, False): 0.15, (True, False, False): 0.25,
                (False, False, False): 0.5}  # fmt: skip
    assert_law(enumerate_distribution(program), expected)


def test_python_random_seeded_from_rng_is_a_uniform():
    def eagle_like(rng):
        random.seed(int(rng.integers(1 << 62)))
        return bool(random.random() <= torch.tensor(0.3, dtype=torch.float64))

    assert_law(enumerate_distribution(eagle_like), {True: 0.3, False: 0.7}, tol=1e-12)


# ---------------------------------------------------------------------------------------------
# Refusals: NotEnumerable, never a number


def two_symbolic(rng):
    g = generator(rng)
    return bool(torch.rand(1, generator=g) < torch.rand(1, generator=g))


@pytest.mark.parametrize(
    "fn, words",
    [
        (lambda rng: torch.rand(1, generator=generator(rng)).item(), "item"),
        (lambda rng: float(torch.rand(1, generator=generator(rng))), "float"),
        (lambda rng: torch.sort(torch.rand(3, generator=generator(rng))), "sort"),
        (lambda rng: torch.rand(3, generator=generator(rng)).sum() < 1, "sum"),
        (lambda rng: torch.softmax(torch.rand(3, generator=generator(rng)), 0), "softmax"),
        (two_symbolic, "two random"),
        (lambda rng: torch.rand(2, generator=generator(rng)).numpy(), "numpy"),
        (lambda rng: torch.rand(2, generator=generator(rng)).tolist(), "tolist"),
        (lambda rng: torch.rand(2, generator=generator(rng)).long(), "long"),
        (lambda rng: torch.randn(2, generator=generator(rng)), "randn"),
        (lambda rng: np.random.default_rng(int(rng.integers(2**63))).random() < 0.5, "seed"),
        (lambda rng: np.random.default_rng(rng.integers(2**63)).random() < 0.5, "seed"),
        (lambda rng: int(rng.integers(2**63)) % 3, "seed"),
        (lambda rng: rng.integers(2**63) + 1, "seed"),
        (lambda rng: bool(torch.rand(1) < 0.5), "not seeded"),
        (lambda rng: bool(torch.rand(1, generator=torch.Generator().manual_seed(0)) < 0.5), "not seeded"),
        (lambda rng: random.random() < 0.5, "random.seed"),
    ],
)
def test_unmodelled_uses_refuse(fn, words):
    with pytest.raises(NotEnumerable, match=words):
        enumerate_distribution(fn)


def test_a_reused_seed_and_a_swallowed_refusal_refuse():
    def same_seed_twice(rng):
        seed = int(rng.integers(2**63))
        first = torch.rand(1, generator=torch.Generator().manual_seed(seed))
        return bool(first < 0.5), bool(torch.rand(1, generator=torch.Generator().manual_seed(seed)) < 0.5)

    def swallows(rng):
        try:
            return torch.rand(1, generator=generator(rng)).item() < 0.5
        except Exception:
            return "fallback"

    for fn, words in ((same_seed_twice, "not seeded"), (swallows, "item")):
        with pytest.raises(NotEnumerable, match=words):
            enumerate_distribution(fn)


def test_a_tensor_kept_from_an_earlier_run_refuses():
    kept = []

    def keeps(rng):
        u = torch.rand(1, generator=generator(rng))
        kept.append(u)
        return bool(kept[0] < 0.5)

    with pytest.raises(NotEnumerable, match="earlier run"):
        enumerate_distribution(keeps)
    with pytest.raises(NotEnumerable, match="outside enumeration"):
        kept[0] + 1


def test_concrete_torch_and_numpy_samplers_are_unchanged():
    model = toy_chain()
    window = sampler_distribution(speculative_step, model.p_fn, model.q_fn, (0,), 2, 2)
    assert total_variation(window, sequence_distribution(model.p_fn, (0,), 2)) < 1e-12
    assert enumerate_distribution(lambda rng: int(torch.tensor([1, 2]).sum()) + int(rng.choice(2))) == {3: 0.5, 4: 0.5}


def test_the_laws_never_import_torch_and_a_lazy_import_is_followed():
    code = """
import sys
from specverify.laws.exact import enumerate_distribution
assert enumerate_distribution(lambda rng: int(rng.choice(2))) == {0: 0.5, 1: 0.5}
assert "torch" not in sys.modules

def lazy(rng):
    import torch
    g = torch.Generator().manual_seed(int(rng.integers(2**63)))
    return bool(torch.rand(1, generator=g) < 0.25)

print(sorted(enumerate_distribution(lazy).items()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[(False, 0.75), (True, 0.25)]"


# ---------------------------------------------------------------------------------------------
# Deferred choices: a categorical draw nobody reads costs no branch


def test_an_unread_draw_does_not_branch_and_a_read_one_has_its_law():
    w = torch.tensor([0.1, 0.2, 0.3, 0.4])

    def program(rng):
        g = generator(rng)
        unread = torch.multinomial(w, 1, generator=g)  # noqa: F841 - drawn, never read
        race = (w / torch.empty(4).exponential_(1.0, generator=g)).argmax()
        kept = torch.where(torch.tensor(True), race, -1) * 1 + 0
        assert bool((kept >= 0) & (kept < 4))  # every outcome answers alike: still deferred
        return int(kept.tolist())

    law = enumerate_distribution(program, max_paths=4)  # eager draws would need 16 paths
    assert_law(law, {i: float(x) for i, x in enumerate(w.tolist())})


def test_a_deferred_choice_cast_to_float_is_decided():
    def program(rng):
        x = torch.multinomial(torch.tensor([0.5, 0.5]), 1, generator=generator(rng))
        return float(x.float()[0] * 2.0)

    assert_law(enumerate_distribution(program), {0.0: 0.5, 2.0: 0.5})


# ---------------------------------------------------------------------------------------------
# Deferred choices handed out undecided (read_deferred), and sub-runs shared across paths


def row_program(read: bool):
    """A coin, two multinomial draws and a race cut into one row, read by ``tolist`` or handed
    out undecided and decided after (``read_deferred`` / ``decide_deferred``)."""
    w = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.0, 0.25, 0.25]])

    def fn(rng):
        g = generator(rng)
        coin = bool(torch.rand(1, generator=g) < 0.3)
        picks = torch.multinomial(w, 1, generator=g).view(-1)
        race = (w[1] / torch.empty(4).exponential_(1.0, generator=g)).argmax().view(1)
        row = torch.cat([picks, torch.tensor([-1]), race, picks[:1]])
        return (coin, *(decide_deferred(read_deferred(row), rng) if read else row.tolist()))

    return fn


def test_a_choice_decided_after_the_read_has_the_same_law_bit_for_bit():
    plain, handed = enumerate_distribution(row_program(False)), enumerate_distribution(row_program(True))
    assert plain == handed and list(plain) == list(handed)  # same decisions, same floats, same order
    assert read_deferred(torch.tensor([3, -1])) == [3, -1]  # outside enumeration: tolist


def test_a_choice_handed_out_and_then_used_by_torch_refuses():
    def fn(rng):
        x = torch.multinomial(torch.tensor([0.5, 0.5]), 1, generator=generator(rng))
        read_deferred(x)
        return int(x[0])

    with pytest.raises(NotEnumerable, match="handed out"):
        enumerate_distribution(fn)


def memoized(sampler, memo):
    """``sampler``'s round, with the torch part after the drafts' seed shared per (prefix, k)."""

    def step(p_fn, q_fn, prefix, k, rng):
        return list(memo.run(rng, lambda: (tuple(prefix), k), lambda: tuple(sampler(p_fn, q_fn, prefix, k, rng))))

    return step


def test_a_memoized_torch_round_has_the_same_law_and_replays_across_enumerations():
    model, memo, runs = toy_chain(), SubrunMemo(), [0]

    def counted(*args):
        runs[0] += 1
        return torch_round()(*args)

    plain = sampler_distribution(torch_round(), model.p_fn, model.q_fn, (0,), 2, 3)
    first = sampler_distribution(memoized(counted, memo), model.p_fn, model.q_fn, (0,), 2, 3)
    n = runs[0]
    again = sampler_distribution(memoized(counted, memo), model.p_fn, model.q_fn, (0,), 2, 3)
    assert first == plain and again == plain and list(again) == list(plain)
    assert runs[0] == n  # every path of the second one replayed


def test_the_engine_round_wrappers_replay_with_the_same_law():
    from specverify.engines import rounds

    model, runs = toy_chain(), [0]

    def engine(*args):
        runs[0] += 1
        return vllm_style_forward(*args)

    step = rounds.vllm_v0_round(engine)
    first = sampler_distribution(step, model.p_fn, model.q_fn, (0,), 2, 3)
    n = runs[0]
    assert sampler_distribution(step, model.p_fn, model.q_fn, (0,), 2, 3) == first
    assert runs[0] == n
    assert total_variation(first, sequence_distribution(model.p_fn, (0,), 3)) < FLOAT32


def vllm_style_forward(target, bonus, draft_probs, ids, seeded_seqs):
    """vLLM V0's ``RejectionSampler.forward`` convention (B = 1) in a few torch lines: coins by
    ``rand``, recovered tokens by the exponential race, -1 after the first rejection."""
    g, k = seeded_seqs[0], ids.shape[1]
    pos = torch.arange(k)
    ratio = target[0, pos, ids[0]] / draft_probs[0, pos, ids[0]]
    accepted = torch.rand(k, generator=g) < torch.clamp(ratio, max=1)
    f = torch.clamp(target[0, :k] - draft_probs[0], min=torch.finfo(torch.float32).tiny)
    e = torch.empty_like(f).exponential_(1.0, generator=g)
    recovered = (f / f.sum(-1, keepdim=True)).div_(e).argmax(dim=1)
    n = int(accepted.int().cumprod(0).sum())
    out = torch.full((1, k + 1), -1, dtype=torch.int64)
    out[0, :n] = ids[0, :n]
    out[0, n] = recovered[n] if n < k else bonus[0, 0]
    return out


def test_a_random_value_written_into_an_empty_tensor_is_no_random_element():
    """An empty tensor has no elements and no storage to overlay: writing into it records nothing
    (the enumerator once failed on ``None.nbytes()`` here), and the law is the rest of the run's."""

    def program(rng):
        g = generator(rng)
        empty = torch.empty(0)
        empty[...] = torch.rand(1, generator=g)
        return bool(torch.rand(1, generator=g) < 0.25)

    assert_law(enumerate_distribution(program), {True: 0.25, False: 0.75}, tol=1e-7)
