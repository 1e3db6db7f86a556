"""Shape of the mutant catalogue: well-formed entries, runnable samplers, sane controls.

Whether each mutant's bias is found is the mutant report's job; here only a quick sampled check
that the negative controls (and the exact-in-distribution no-bonus mutant) emit a first token
distributed as p, and that the 'no verification' mutant does not.
"""

from __future__ import annotations

import numbers
import re

import numpy as np
import pytest
from scipy.stats import chisquare

from specverify.laws.chains import toy_chain
from specverify.mutants import catalogue
from specverify.mutants.catalogue import CONTROLS, EFFECTS, MUTANTS, SOURCES, Mutant, get

ALL = MUTANTS + CONTROLS
CONTRACT = [m for m in ALL if m.effect == "contract"]
WELL_BEHAVED = [m for m in ALL if m.effect != "contract"]
SEEDS, KS = range(5), (1, 2, 3)
N_DRAWS = 20_000
ALPHA = 1e-6  # false-fail rate of each chi-square assertion below


def ids(mutants):
    return [m.id for m in mutants]


def breaks_contract(out, k: int, vocab_size: int) -> bool:
    """True unless out is a list of 1 to k + 1 ints in [0, vocab_size)."""
    if not isinstance(out, list) or not 1 <= len(out) <= k + 1:
        return True
    return not all(isinstance(t, numbers.Integral) and not isinstance(t, bool) and 0 <= t < vocab_size for t in out)


def first_token_counts(fn, k: int, seed: int) -> np.ndarray:
    model = toy_chain()
    rng = np.random.default_rng(seed)
    firsts = [fn(model.p_fn, model.q_fn, (0,), k, rng)[0] for _ in range(N_DRAWS)]
    return np.bincount(firsts, minlength=model.vocab_size)


def test_ids_are_unique_and_family_slash_defect():
    assert len(set(ids(ALL))) == len(ALL)
    for m in ALL:
        assert re.fullmatch(r"[a-z0-9-]+/[a-z0-9-]+", m.id), m.id


def test_catalogue_sizes_effects_and_sources():
    assert len(MUTANTS) >= 26
    assert len(CONTROLS) >= 3
    assert {m.effect for m in ALL} <= set(EFFECTS)
    assert {m.source for m in ALL} <= set(SOURCES)
    assert all(m.effect == "exact" for m in CONTROLS)
    assert all(m.effect != "exact" for m in MUTANTS)
    assert all(m.description and "\n" not in m.description for m in ALL)
    assert get("bonus/no-bonus-token").effect == "fewer-tokens"


def test_every_reference_is_cited_in_a_known_form():
    """handout sections, arXiv ids or owner/repo#number, separated by '; '."""
    form = re.compile(r"handout.*|arXiv \d{4}\.\d{4,5}|[\w.-]+/[\w.-]+#\d+( \(disputed\))?")
    for m in ALL:
        if m.reference is not None:
            for part in m.reference.split("; "):
                assert form.fullmatch(part), (m.id, part)


def test_get_finds_every_entry_and_lists_known_ids_when_unknown():
    for m in ALL:
        assert get(m.id) is m
    with pytest.raises(ValueError, match="rejection/resample-from-p"):
        get("no/such-mutant")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("id", "NoSlash", "family/defect"),
        ("effect", "slow", "effect"),
        ("source", "blog", "source"),
    ],
)
def test_mutant_rejects_malformed_fields(field, value, message):
    fields = dict(id="a/b", description="d", effect="biased", fn=catalogue.resample_from_p)
    fields[field] = value
    with pytest.raises(ValueError, match=message):
        Mutant(**fields)


@pytest.mark.parametrize("mutant", WELL_BEHAVED, ids=ids(WELL_BEHAVED))
def test_non_contract_entries_return_1_to_k_plus_1_tokens_in_range(mutant):
    model = toy_chain()
    for seed in SEEDS:
        for k in KS:
            out = mutant.fn(model.p_fn, model.q_fn, (0,), k, np.random.default_rng(seed))
            assert not breaks_contract(out, k, model.vocab_size), (seed, k, out)


@pytest.mark.parametrize("mutant", CONTRACT, ids=ids(CONTRACT))
def test_contract_mutants_misbehave_on_read_only_toy_chain(mutant):
    """TableModel rows are read-only, so an in-place write raises; the others return junk."""
    model = toy_chain()
    misbehaved = 0
    for seed in range(20):
        for k in KS:
            try:
                out = mutant.fn(model.p_fn, model.q_fn, (0,), k, np.random.default_rng(seed))
            except ValueError:
                misbehaved += 1
            else:
                misbehaved += breaks_contract(out, k, model.vocab_size)
    assert misbehaved > 0


@pytest.mark.parametrize("mutant", CONTROLS + (get("bonus/no-bonus-token"),), ids=ids(CONTROLS) + ["no-bonus-token"])
def test_exact_in_distribution_entries_emit_a_first_token_distributed_as_p(mutant):
    """Chi-square goodness of fit of 20,000 first tokens (k = 1, seed 0) to p(. | 0); an exact
    sampler fails with probability ALPHA = 1e-6."""
    counts = first_token_counts(mutant.fn, k=1, seed=0)
    expected = N_DRAWS * toy_chain().p_fn((0,))
    assert chisquare(counts, expected).pvalue > ALPHA


def test_no_verification_first_token_is_not_distributed_as_p():
    """Its first token is a draft, ~ q(. | 0) = [0.6, 0.2, 0.2] against p = [0.2, 0.5, 0.3]: with
    20,000 draws the chi-square statistic is ~1e4, so p-value < 1e-6 (ALPHA) fails to hold only
    with negligible probability."""
    counts = first_token_counts(get("verify/no-verification").fn, k=1, seed=0)
    expected = N_DRAWS * toy_chain().p_fn((0,))
    assert chisquare(counts, expected).pvalue < ALPHA
