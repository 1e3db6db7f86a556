"""Cases drawn from the check's seed: reproducible, exact for the reference, and able
to catch a bug no fixed case reaches. Verdicts below are exact enumerations (no sampling noise)."""

import generated_subjects
import numpy as np
import pytest

import specverify
from specverify.battery import core as battery_core
from specverify.interfaces.round import battery as round_interface
from specverify.interfaces.round import cases as round_cases
from specverify.laws import exact, rounding
from specverify.mutants import ALL
from specverify.samplers.chain import speculative_step


def test_the_same_seed_draws_the_same_cases():
    a = round_cases.generated_cases("standard", 3)
    b = round_cases.generated_cases("standard", 3)
    c = round_cases.generated_cases("standard", 4)
    assert [x.name for x in a] == [x.name for x in b]
    assert all(np.array_equal(x.model.p_table, y.model.p_table) for x, y in zip(a, b))
    assert [x.name for x in a] != [x.name for x in c]
    assert len(a) == round_cases.get_budget("standard").generated + 1  # + the engine-scale pair
    assert a[-1].model.vocab_size == round_cases.get_budget("standard").engine_vocab


@pytest.mark.parametrize("seed", range(5))
def test_the_reference_is_exact_on_every_drawn_case(seed):
    for case in round_cases.generated_cases("standard", seed):
        got = exact.sampler_distribution(
            speculative_step, case.model.p_fn, case.model.q_fn, case.prefix, case.k, case.m, max_paths=200_000
        )
        want = exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)
        assert exact.total_variation(got, want) < battery_core.EXACT_TV_TOL, case.name


def test_a_bug_that_needs_a_large_vocabulary_is_caught_with_its_case():
    fn = generated_subjects.truncated_q_drafts
    small = round_interface.run_battery(fn, "quick", 0, engine_vocab=1024)
    assert small.exact is False  # a dense V = 1,024 case (enumerated) already shows it
    before = round_interface.run_battery(fn, "quick", 0)  # quick's cases alone (no dense case): V <= 3
    assert before.exact is True, before.findings
    report = specverify.check(fn, budget="standard")
    assert report.exact is False and report.exit_code == 1
    wide = round_cases.get_budget("standard").engine_vocab
    assert any(f"V{wide}" in (f.case or "") for f in report.findings if f.kind == "distribution")
    ce = report.counterexample
    assert ce["vocab_size"] == wide and ce["exact_tv"] > 1e-3


ROUND_CONTROLS = [m for m in ALL if m.effect == "exact" and m.interface == "round"]


@pytest.mark.parametrize("control", ROUND_CONTROLS, ids=lambda m: m.id)
def test_every_round_control_is_exact_on_every_drawn_case_over_seeds_0_to_4(control):
    """No false accusation on the cases the standard budget draws for seeds 0-4 (the dense
    engine-vocabulary pair included, where the control is enumerable within the battery's caps): each control's law enumerated exactly (no sampling, no false-fail rate)
    equals the target's, judged by the battery's rounding policy (``laws.rounding.judge_law``):
    a float64 control to 1e-9, a float32 or bfloat16 one within its precision's rounding (the
    rule carried out in that precision on the same case), its precision observed, not assumed.
    The binned engine-scale cases are the reference's alone (tests/test_engine_scale.py: 5 seeds
    x 2 cases x 2,000 runs a control would cost minutes)."""
    assert len(ROUND_CONTROLS) >= 7
    for seed in range(5):
        for case in round_cases.generated_cases("standard", seed):
            wide = case.name.startswith(round_cases.ENGINE_VOCAB_ORIGIN)  # under the battery's caps for it
            try:
                got = exact.sampler_distribution(
                    control.fn,
                    case.model.p_fn,
                    case.model.q_fn,
                    case.prefix,
                    case.k,
                    case.m,
                    max_paths=round_cases.engine_vocab_paths(case.model.vocab_size) if wide else 200_000,
                    max_decisions=round_cases.ENGINE_VOCAB_DECISIONS if wide else exact.MAX_DECISIONS_PER_RUN,
                )
            except exact.NotEnumerable:
                if wide:  # a token drawn by a loop over V ids: the battery bins this case instead
                    continue
                raise
            want = exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)
            tv = exact.total_variation(got, want)
            judgement = rounding.judge_law(tv, got, want, case.model.p_fn, case.model.q_fn, case.prefix, case.k, case.m)
            assert judgement.exact, (seed, case.name, judgement.words())
            if judgement.precision == "float64":
                assert tv < battery_core.EXACT_TV_TOL, (seed, case.name)
