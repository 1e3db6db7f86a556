"""The round's exact law at engine vocabularies: a draw nothing but the output reads is summed
over (``laws.summed_draws``), not branched on, so one round over a dense V = 4096 pair is
enumerated in about 2 V paths. There the rule in float64 is exact, the rule in float32 exact at
float32 rounding, and a bias of order 1e-4 a finding. Every verdict here is an exact enumeration:
no sampling, so no false-fail rate."""

import numpy as np
import pytest

from specverify.interfaces.round import cases as round_cases
from specverify.interfaces.round.reach import reach
from specverify.laws import exact, rounding
from specverify.laws.exact import NotEnumerable, enumerate_distribution
from specverify.mutants.catalogue import round_with
from specverify.samplers.chain import acceptance, speculative_step

V = 4096
F32 = np.float32


@pytest.fixture(scope="module")
def case():
    """The standard budget's engine-vocabulary case for seed 0."""
    return round_cases.generated_cases("standard", 0)[-1]


def judged(fn, case):
    """(exact TV, the rounding policy's judgement) of ``fn`` on ``case``, enumerated under the
    battery's own caps for that case."""
    m = case.model
    law = exact.sampler_distribution(
        fn,
        m.p_fn,
        m.q_fn,
        case.prefix,
        case.k,
        case.m,
        max_paths=round_cases.engine_vocab_paths(V),
        max_decisions=round_cases.ENGINE_VOCAB_DECISIONS,
    )
    want = round_cases.target_distribution(case)
    tv = exact.total_variation(law, want)
    return tv, rounding.judge_law(tv, law, want, m.p_fn, m.q_fn, case.prefix, case.k, case.m)


def test_the_budgets_enumerate_a_dense_round_at_engine_vocabularies(case):
    assert case.model.vocab_size == V and case.name.startswith(round_cases.ENGINE_VOCAB_ORIGIN)
    assert np.count_nonzero(case.model.p_table[0]) == V and np.count_nonzero(case.model.q_table[0]) == V
    assert (case.k, case.m) == (1, 1)
    assert reach("standard")["exact V"] == V
    assert reach("thorough")["exact V"] > V


def test_a_draw_only_the_output_reads_is_summed_not_branched():
    p = np.random.default_rng(0).dirichlet(np.full(100, 0.5))
    summed = enumerate_distribution(lambda rng: (rng.choice(100, p=p),), max_paths=1)  # one path
    assert len(summed) == 100 and max(abs(summed[(i,)] - p[i]) for i in range(100)) < 1e-15
    with pytest.raises(NotEnumerable, match="max_paths"):  # int() reads it: one branch per outcome
        enumerate_distribution(lambda rng: (int(rng.choice(100, p=p)),), max_paths=1)
    read = enumerate_distribution(lambda rng: (int(rng.choice(100, p=p)),), max_paths=200)
    assert max(abs(read[k] - summed[k]) for k in summed) < 1e-15
    # a comparison every outcome answers alike reads nothing; one draw in two places keeps one value
    alike = enumerate_distribution(lambda rng: (x := rng.choice(100, p=p), x == -1, x), max_paths=1)
    assert all(key[1] is False or key[1] == False and key[0] == key[2] for key in alike)  # noqa: E712
    assert len(alike) == 100


def test_the_rule_is_exact_at_v4096(case):
    tv, judgement = judged(speculative_step, case)
    assert tv < rounding.EXACT_TV_TOL and judgement.exact and judgement.precision == "float64"


BIAS = 4e-4
"""Every coin's acceptance probability scaled by 1 - BIAS: a TV of order 1e-4 on the case."""


def biased_coin(p, q, x, rng) -> bool:
    return bool(rng.random() < acceptance(p, q, x) * (1.0 - BIAS))


def test_a_bias_of_order_1e_4_at_v4096_is_a_finding(case):
    tv, judgement = judged(lambda *a: round_with(*a, accept=biased_coin), case)
    assert 3e-5 < tv < 3e-4, tv
    assert not judgement.exact and "above float64 rounding" in judgement.words()


def float32_rule(p_fn, q_fn, prefix, k, rng):
    """The rule in float32 (rows, ratio, residual and weights in float32, drawn by ``choice``)."""
    prefix, out = tuple(prefix), []
    for _ in range(k):
        q = np.asarray(q_fn(prefix + tuple(out)), dtype=F32)
        p = np.asarray(p_fn(prefix + tuple(out)), dtype=F32)
        x = int(rng.choice(len(q), p=q / q.sum()))
        if not rng.random() < min(F32(1), p[x] / q[x]):
            r = np.maximum(p - q, F32(0))
            return out + [rng.choice(len(r), p=r / r.sum())]
        out.append(x)
    p = np.asarray(p_fn(prefix + tuple(out)), dtype=F32)
    return out + [rng.choice(len(p), p=p / p.sum())]


def test_the_rule_in_float32_at_v4096_is_exact_at_float32_rounding(case):
    tv, judgement = judged(float32_rule, case)
    assert judgement.precision == "float32" and judgement.exact, judgement.words()
    assert judgement.rule_tv is not None  # the rule in float32 enumerated at V 4096, not a bound
    assert tv > rounding.EXACT_TV_TOL  # float32 rounding shows, and is excused as rounding
