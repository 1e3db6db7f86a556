"""Engine scale: cases at vocabularies in the thousands to 152k, k up to 8, judged by a
binned chi-square per output position (specverify.laws.scale), in the round and loop batteries, the
user's configuration (--vocab / --k / --max-tokens) and the shrink of a binned finding.

Statistical assertions: every binned test runs at the battery's per-position false-fail rate
(at most 1e-6 / 4 split over positions, stated in ``result.power``), so a correct sampler is
accused with probability below 1e-6 per check; the subjects below are wrong by a binned TV of 0.1
or more where the tests' 2,000 (round) or 300 (loop) runs detect 0.12 / 0.28 with probability 0.95
(asserted from ``result.power`` itself)."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import generated_subjects
import loop_wrong_only_there as wrong
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import specverify
from specverify import interfaces
from specverify.battery import subject_calls
from specverify.battery.core import Finding
from specverify.interfaces.loop.battery import run_loop_battery
from specverify.interfaces.loop.generated import scale_loop_cases
from specverify.interfaces.round import battery as round_interface
from specverify.interfaces.round import cases as round_cases
from specverify.interfaces.round.engine_scale import scale_sizes
from specverify.laws import scale
from specverify.samplers.chain import speculative_step
from specverify.samplers.reference_loop import generate

ROOT = Path(__file__).resolve().parents[1]

BINNED = replace(
    round_cases.get_budget("standard"), scale_cases=((4096, 8, "residual"), (33_024, 2, "draft")), scale_runs=2000
)
"""Standard with two engine-scale cases (V 4,096 at k = 8, V 33,024 at k = 2) at 2,000 runs: the
binned stage's calibration and power at a window of 9 tokens and past int16's ids (the standard
budget has none: thorough's run V 4,096 to 152,064 at 4,000 runs, slower than a test)."""


# ---------------------------------------------------------------------------- the binning


@given(st.integers(2, 5000), st.integers(20, 20_000), st.integers(0, 2**31 - 1))
def test_every_bin_expects_enough_samples_and_every_id_has_a_bin(vocab, n, seed):
    p = np.random.default_rng(seed).dirichlet(np.full(vocab, 0.2))
    bin_of, n_bins = scale.bins(p, n)
    assert bin_of.shape == (vocab,) and bin_of.min() >= 0 and bin_of.max() == n_bins - 1
    expected = np.bincount(bin_of, weights=n * p, minlength=n_bins)
    if n >= scale.MIN_BIN_EXPECTED:  # one bin short of the floor only when everything is pooled into it
        assert (expected >= scale.MIN_BIN_EXPECTED - 1e-9).all() or n_bins == 1
    alone = np.flatnonzero(n * p >= scale.MIN_BIN_EXPECTED)
    assert len(set(bin_of[alone])) == len(alone)  # a likely id is a bin of its own


def test_edge_ids_sit_where_tiles_and_id_types_end():
    ids = set(scale.edge_ids(33_024).tolist())
    assert {0, 1, 33_022, 33_023, 127, 128, 1023, 1024, 32_767, 32_768} <= ids
    assert max(scale.edge_ids(1025)) == 1024 and 1023 in scale.edge_ids(1025)
    with pytest.raises(ValueError, match="side"):
        scale.engine_pair(4096, "middle", np.random.default_rng(0))


def test_the_binned_test_passes_the_target_and_fails_a_dropped_edge_id():
    """Exact samples from p pass (false-fail rate 1e-6); dropping the likeliest edge id (binned TV
    = its mass, above 0.05 here) fails at 20,000 samples, where the test sees TV 0.03."""
    rng = np.random.default_rng(0)
    p = scale.engine_pair(4096, "residual", rng).p_table[0]
    good = rng.choice(4096, size=(20_000, 2), p=p).tolist()
    verdict = scale.judge_positions(good, p, 2, 1e-6)
    assert verdict.passed and verdict.position == 1
    edge = max(scale.edge_ids(4096), key=lambda i: p[i])
    assert p[edge] > 0.05
    biased = p.copy()
    biased[edge] = 0.0
    bad = rng.choice(4096, size=(20_000, 1), p=biased / biased.sum()).tolist()
    verdict = scale.judge_positions(bad, p, 1, 1e-6)
    assert not verdict.passed and verdict.position == 0 and verdict.binned_tv > 0.05
    assert any(row["tokens"] == [f"id {edge}"] for row in scale.binned_rows(verdict))


# ---------------------------------------------------------------------------- round battery


def test_the_round_budgets_past_quick_reach_vocabularies_in_the_thousands():
    """Quick has no dense engine-vocabulary case (its calls per verdict: docs/BUDGETS.md)."""
    for name in round_cases.BUDGETS:
        drawn = round_cases.generated_cases(name, 0)
        wide = max(c.model.vocab_size for c in drawn)
        assert wide <= 4 if name == "quick" else wide >= 4096, name
    assert round_cases.engine_scale_cases("standard", 0) == []  # its dense V = 4,096 case only
    big = round_cases.engine_scale_cases(BINNED, 0)
    assert [(c.model.vocab_size, c.k, c.m) for c in big] == [(4096, 8, 9), (33_024, 2, 3)]
    thorough = round_cases.engine_scale_cases("thorough", 0)
    assert max(c.model.vocab_size for c in thorough) == 152_064 and max(c.k for c in thorough) == 8
    again = round_cases.engine_scale_cases(BINNED, 0)
    assert all(np.array_equal(a.model.p_table, b.model.p_table) for a, b in zip(big, again))
    assert not np.array_equal(big[0].model.p_table, round_cases.engine_scale_cases(BINNED, 1)[0].model.p_table)


@pytest.mark.parametrize("seed", range(5))
def test_the_reference_is_exact_on_the_engine_scale_cases_over_seeds_0_to_4(seed):
    """The engine-scale stage alone on the reference, ``BINNED``'s two cases (the fixed and drawn
    cases are enumerated elsewhere, tests/test_generated_cases.py): no finding, power stated; the
    test is of the binned test's calibration at the budget's run count."""
    b = BINNED
    result = subject_calls.run_in_subject(
        speculative_step,
        lambda h: round_interface.RoundBattery(h, b, seed, None),
        lambda run: run.engine_scale(round_cases.engine_scale_cases(b, seed), b.false_fail_rate / 4),
    )
    assert result.findings == [], result.findings
    power = [row for row in result.power if "binned" in row]
    assert len(power) == 2 and all(row["runs"] == b.scale_runs for row in power)
    assert all(row["min_detectable_tv"] < 0.15 and row["false_fail_rate"] <= 1e-6 / 4 / 9 for row in power)


@pytest.mark.parametrize("name", ["tile_off_by_one", "int16_ids"])
def test_a_round_sampler_wrong_only_at_engine_scale_is_not_exact(name):
    """Not exact on ``BINNED``'s engine-scale cases: the tile bug by its law, the int16
    ids as a contract breach (the whole standard check of the tile bug: the CLI test below). On
    the quick budget with a dense engine-vocabulary case of V 1,024 (quick itself has none) the
    int16 ids are exact (every V below 32,768) and the tile bug is found by the exact law of that
    case alone (dense V 1,024 crosses its tile)."""
    fn = getattr(generated_subjects, name)
    result = round_interface.run_battery(fn, "quick", 0, engine_vocab=1024)
    if name == "tile_off_by_one":
        assert result.exact is False and result.flagged()
        assert all(f.case.startswith(round_cases.ENGINE_VOCAB_ORIGIN) for f in result.flagged()), result.findings
    else:
        assert result.exact is True, result.findings
    b = BINNED
    result = subject_calls.run_in_subject(
        fn,
        lambda h: round_interface.RoundBattery(h, b, 0, None),
        lambda run: run.engine_scale(round_cases.engine_scale_cases(b, 0), b.false_fail_rate / 4),
    )
    assert result.exact is False
    kinds = {(f.check, f.kind) for f in result.flagged()}
    assert kinds == (
        {("binned-chi-square", "distribution")} if name == "tile_off_by_one" else {("contract", "contract")}
    ), kinds
    assert all("V" in f.case and "binned" in f.case for f in result.flagged())


def test_the_cli_shrinks_a_binned_finding_to_the_first_vocabulary_that_shows_it():
    """The whole standard check, as a user runs it: exit 1, the JSON parses, the counterexample
    is the smallest engine-scale case that still shows the tile bug (V = 1025: one id past the
    first tile), and coverage lists every case with how it was judged."""
    target = f"{ROOT / 'tests' / 'generated_subjects.py'}:tile_off_by_one"
    proc = subprocess.run(
        [sys.executable, "-m", "specverify", "check", target, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["exact"] is False
    ce = report["counterexample"]
    assert ce["method"] == "binned" and ce["vocab_size"] == 1025, ce
    cases = report["coverage"]["cases"]
    judged = {c["judged"] for c in cases}
    assert {"enumeration", "binned chi-square"} <= judged
    assert {c["origin"] for c in cases} >= {"fixed", "generated"}
    # the dense V = 4,096 case, not enumerable here (its residual is int(rng.choice(...))), binned
    # at the runs its promised TV needs (scale_sizes), on any machine at any load
    b = round_cases.get_budget("standard")
    dense = [c for c in round_cases.generated_cases(b, 0) if c.name.startswith(round_cases.ENGINE_VOCAB_ORIGIN)]
    runs = scale_sizes(b, dense, b.false_fail_rate / 4)[0]
    assert any(
        c["vocab"] == 4096 and c["k"] == 1 and c["judged"] == "binned chi-square" and c["runs"] == runs for c in cases
    ), cases


def test_the_shrink_of_a_binned_finding_reaches_the_first_vocabulary_that_shows_it():
    """The same check in-process: V = 1025, k = 1, and the tile's last id under-drawn."""
    report = specverify.check(generated_subjects.tile_off_by_one, budget="standard")
    ce = report.counterexample
    assert report.exact is False and ce["method"] == "binned" and ce["vocab_size"] == 1025 and ce["k"] == 1, ce
    assert any(row["tokens"] == ["id 1023"] and row["sampler"] < row["target"] for row in ce["distributions"])


def test_aim_validates_each_argument_by_name():
    assert interfaces.aim(vocab="32000", k="1..8", max_tokens=16) == interfaces.Aim(32000, tuple(range(1, 9)), 16)
    assert interfaces.aim(k="2,4").ks == (2, 4) and interfaces.aim(k=[3]).ks == (3,)
    for kwargs, word in [
        ({"vocab": 1}, "vocab"),
        ({"vocab": "x"}, "vocab"),
        ({"k": "0..3"}, "k"),
        ({"k": "5..2"}, "k"),
        ({"k": True}, "k"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 65}, "max_tokens"),
    ]:
        with pytest.raises(interfaces.InterfaceError, match=f"^{word}:"):
            interfaces.aim(**kwargs)
    with pytest.raises(ValueError, match="^vocab:"):
        specverify.check(speculative_step, vocab=0)


def test_aimed_round_cases_reach_a_wide_vocabulary_the_budgets_do_not():
    """int16 ids are exact on every vocabulary of 32768 ids or fewer; aimed at V = 40000 the
    check breaches the contract on the aimed case (ids out of range) and lists it in coverage."""
    fn = generated_subjects.int16_ids
    report = specverify.check(fn, budget="quick", vocab=40_000, k=2, max_tokens=3, counterexample=False)
    assert report.exact is False and report.exit_code == 1
    assert all(f.case.startswith("aimed V40000") for f in report.result.flagged() if f.kind == "contract")
    assert "aimed at vocab 40000, k 2, max_tokens 3" in report.coverage


# ---------------------------------------------------------------------------- loop battery


def test_every_loop_budget_has_an_engine_scale_batch_and_aims_add_one_per_k():
    quick, standard = scale_loop_cases("quick", 0), scale_loop_cases("standard", 0)
    assert [c.vocab_size for c in quick] == [1100] and [(c.vocab_size, c.k) for c in standard] == [(4096, 8)]
    assert max(r.params.max_tokens for r in standard[0].requests) == 8
    assert max(len(r.prompt) for r in standard[0].requests) == 7
    aimed = scale_loop_cases("standard", 0, interfaces.aim(vocab=32000, k="1..8", max_tokens=16))
    assert [(c.vocab_size, c.k, c.kind) for c in aimed[1:]] == [(32000, k, "aimed") for k in range(1, 9)]
    assert all(r.params.max_tokens == 16 for c in aimed[1:] for r in c.requests)


@pytest.mark.parametrize("seed", range(1, 5))
def test_the_reference_loop_is_exact_on_its_engine_scale_batch_over_seeds_1_to_4(seed):
    """Seed 0 is tests/test_mutants.py's (loop-control/reference: the whole standard battery)."""
    case = scale_loop_cases("standard", seed)
    result = run_loop_battery(generate, "standard", seed, cases=case)  # every planned run
    assert result.exact is True, result.findings
    power = [row for row in result.power if row.get("binned")]
    assert len(power) == 2 and all(row["runs"] == 300 and row["min_detectable_tv"] < 0.3 for row in power)


@pytest.mark.parametrize("name", list(wrong.SCALE_WRONG))
def test_a_loop_wrong_only_at_engine_scale_is_not_exact(name):
    fn = wrong.SCALE_WRONG[name]
    before = run_loop_battery(fn, "standard", 0, stop_on_first=True, scale_vocab=0)
    assert before.exact is True, before.findings
    result = run_loop_battery(fn, "standard", 0, stop_on_first=True)
    assert result.exact is False
    assert {f.check for f in result.flagged()} == {"loop-binned-chi-square"}


def test_a_binned_loop_finding_is_shrunk_to_the_first_vocabulary_that_shows_it():
    """Found on the V = 4096, k = 8 batch; shrunk over V = 129, 257, 513, 1025, ... (k = 1 first at
    each): a residual that drops each 1024-id tile's last id first shows at V = 1025, k = 1
    (binned chi-square at 1e-6 split over the candidates' positions, seeded): on any machine at
    any load, since the search's candidates and their runs come from the budget."""
    from specverify.interfaces.loop.cases import get_loop_budget

    budget = get_loop_budget("standard")
    report = specverify.check(wrong.wrong_past_vocab1024, budget=budget, interface="loop")
    assert report.exact is False and report.exit_code == 1
    ce = report.counterexample
    assert ce["method"] == "binned" and ce["vocab_size"] == 1025 and ce["k"] == 1
    assert ce["case"].startswith("shrunk") and ce["window"] == 2
    assert ce["check"] == "loop-binned-chi-square" and ce["empirical_tv"] > 0
    assert len(ce["p"]) == len(ce["q"]) == 12
    assert "smallest model (binned): vocab 1025, k=1" in report.text()


def test_a_binned_loop_finding_no_smaller_batch_shows_is_its_own_counterexample():
    """When no smaller batch shows it, the batch the finding was made on is the counterexample:
    here the reference loop (exact: no candidate flags it, false-fail 1e-6 over all of them) and a
    finding handed to the shrink as a loop wrong only at the quick batch's shape would give."""
    from specverify.interfaces.loop.counterexample import shrink_binned_loop

    case = scale_loop_cases("quick", 0)[0]
    finding = Finding(
        "loop-binned-chi-square",
        "distribution",
        "request 0: ...",
        case.name,
        {"request": 0, "position": 3, "binned_tv": 0.4, "samples": 300},
    )
    ce = shrink_binned_loop(generate, "quick", 0, case, finding)
    assert ce["case"] == case.name and ce["vocab_size"] == case.vocab_size and ce["position"] == 3


def test_an_aimed_loop_check_reaches_int16_ids():
    report = specverify.check(
        wrong.ids_int16, budget="quick", interface="loop", vocab=40_000, k=2, max_tokens=4, counterexample=False
    )
    assert report.exact is False and report.exit_code == 1
    assert any(f.case.startswith("aimed") for f in report.result.flagged())
    entries = [c for c in report.to_dict()["coverage"]["cases"] if c["origin"] == "aimed"]
    assert entries and entries[0]["vocab"] == 40_000 and entries[0]["judged"] == "binned chi-square"
