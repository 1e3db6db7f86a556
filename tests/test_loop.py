"""The loop interface: request-level processing, the reference loop exact by enumeration on drawn
request batches, target-only decoding against the DP law, bad requests, and the loop battery."""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings

from specverify.errors import verdict_exit_code
from specverify.interfaces.loop.battery import run_loop_battery
from specverify.interfaces.loop.cases import loop_cases
from specverify.interfaces.loop.counterexample import LAW_CHECKS, find_loop_counterexample, small_loop_cases
from specverify.interfaces.loop.sweeps import NO_SWEEPS
from specverify.interfaces.loop.tasks import contract_problem
from specverify.laws import exact
from specverify.laws import processing as pr
from specverify.laws.requests import (
    LastTokenGrammar,
    LogitTable,
    Output,
    Request,
    SamplingParams,
    as_output,
    sequence_law,
    step_distribution,
)
from specverify.mutants import ALL
from specverify.mutants.loop_mutants import LOOP_CONTROLS, LOOP_MUTANTS
from specverify.samplers.reference_loop import fit_width, generate, target_only
from specverify.surface import strategies as sst


def marginals(dist: dict, n: int) -> list[dict]:
    out = [dict() for _ in range(n)]
    for outcome, w in dist.items():
        for i in range(n):
            out[i][outcome[i]] = out[i].get(outcome[i], 0.0) + w
    return out


def tokens_law(loop, setup, max_paths=60_000):
    def run(rng):
        return tuple(o.tokens for o in loop(rng))

    return marginals(exact.enumerate_distribution(run, max_paths=max_paths), len(setup.requests))


# ---------------------------------------------------------------------------- processing


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits():
    z = np.array([2.0, -1.0, 0.5])
    np.testing.assert_allclose(pr.penalize_repetition(z, [0, 1, 1], 2.0), [1.0, -2.0, 0.5])


def test_frequency_and_presence_count_the_output():
    z = np.zeros(3)
    np.testing.assert_allclose(pr.penalize_frequency_presence(z, [1, 1, 2], 0.5, 0.25), [0, -1.25, -0.75])


def test_min_p_keeps_tokens_above_a_fraction_of_the_largest():
    p = np.array([0.6, 0.3, 0.1])
    np.testing.assert_allclose(pr.keep_min_p(p, 0.4), [2 / 3, 1 / 3, 0.0])


def test_process_step_order_and_greedy():
    z = np.array([1.0, 1.2, 0.0])
    assert pr.process_step(z, temperature=0, logit_bias={2: 5.0}).tolist() == [0, 0, 1]
    assert pr.process_step(z, temperature=0, repetition_penalty=2.0, prompt=(1,)).tolist() == [1, 0, 0]
    p = pr.process_step(z, allowed=(0, 2))
    assert p[1] == 0 and abs(p.sum() - 1) < 1e-12


def test_fit_width_drops_padding_and_masks_missing_ids():
    assert fit_width([1.0, 2.0, 3.0, 9.0], 3).tolist() == [1.0, 2.0, 3.0]
    assert fit_width([1.0], 3).tolist() == [1.0, -math.inf, -math.inf]


# ---------------------------------------------------------------------------- bad requests


@pytest.mark.parametrize(
    "field, kwargs",
    [
        ("max_tokens", {"max_tokens": -1}),
        ("top_p", {"top_p": 0.0}),
        ("top_p", {"top_p": 1.5}),
        ("repetition_penalty", {"repetition_penalty": 0.0}),
        ("repetition_penalty", {"repetition_penalty": -1.0}),
        ("min_p", {"min_p": 1.5}),
        ("temperature", {"temperature": -0.1}),
        ("top_k", {"top_k": 0}),
        ("frequency_penalty", {"frequency_penalty": math.inf}),
        ("stop_token_ids", {"stop_token_ids": (-1,)}),
        ("logit_bias", {"logit_bias": {0: math.nan}}),
        ("seed", {"seed": -3}),
    ],
)
def test_bad_params_name_the_field(field, kwargs):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**kwargs)


def test_bad_requests_at_generation_name_the_field():
    t = LogitTable(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="stop_token_ids"):
        generate(t, t, [Request((0,), SamplingParams(stop_token_ids=(3,)))], 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="prompt"):
        Request(())
    with pytest.raises(ValueError, match="allowed_tokens"):
        LastTokenGrammar((), ((0,), (0,), (0,)))
    nothing = Request((0,), SamplingParams(allowed_tokens=lambda out: ()))
    with pytest.raises(ValueError, match="allowed_tokens"):
        generate(t, t, [nothing], 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="allowed_tokens"):
        sequence_law(t, nothing)


# ---------------------------------------------------------------------------- exactness


@settings(max_examples=40)
@given(sst.loop_setups())
def test_reference_loop_is_exact_on_drawn_batches(setup):
    t, d, reqs, k = setup
    try:
        got = tokens_law(lambda rng: generate(t, d, reqs, k, rng), setup)
    except exact.NotEnumerable:
        assume(False)
    for i, r in enumerate(reqs):
        assert exact.total_variation(got[i], sequence_law(t, r)) < 1e-9


@settings(max_examples=30)
@given(sst.loop_setups(batch=(1, 2)))
def test_target_only_agrees_with_the_dp(setup):
    t, _, reqs, _ = setup
    got = tokens_law(lambda rng: target_only(t, reqs, rng), setup)
    for i, r in enumerate(reqs):
        law = sequence_law(t, r)
        assert abs(sum(law.values()) - 1) < 1e-12
        assert exact.total_variation(got[i], law) < 1e-9


@settings(max_examples=30)
@given(sst.loop_setups(seeded=True), sst.seeds())
def test_reference_outputs_keep_the_contract_and_seeds_reproduce(setup, seed):
    t, d, reqs, k = setup
    outs = generate(t, d, reqs, k, np.random.default_rng(seed))
    for i, (r, o) in enumerate(zip(reqs, outs)):
        assert isinstance(o, Output)
        case = type("C", (), {"requests": reqs, "target": t})
        assert contract_problem(case, i, (o.tokens, o.logprobs, o.drafted, o.accepted)) is None
        if r.params.seed is not None:
            alone = generate(t, d, [r], k, np.random.default_rng(seed + 1))[0]
            assert alone.tokens == o.tokens


def test_step_distribution_counts_the_prompt_for_repetition_only():
    params = SamplingParams(repetition_penalty=2.0, frequency_penalty=1.0)
    z = np.array([1.0, 1.0])
    p = step_distribution(z, params, (0,), ())
    assert p[0] < p[1]  # the prompt's token penalized by the repetition penalty alone
    q = step_distribution(z, params, (1,), (0,))
    assert q[0] < q[1] - 0.3  # 0 is in the output: divided and frequency-penalized


# ---------------------------------------------------------------------------- battery, mutants


def test_loop_battery_passes_target_only_and_finds_it_less_efficient():
    """Without the sweeps. The reference, exact and efficient on every case, sweeps included:
    tests/test_loop_sweeps.py (its standard battery at seed 0)."""
    result = run_loop_battery(lambda t, d, reqs, k, rng: target_only(t, reqs, rng), **NO_SWEEPS)
    assert result.exact is True, result.findings
    assert result.exact_tv_max < 1e-12
    # target-only emits one token per target pass: exact, and less efficient than the rule
    assert {f.check for f in result.flagged(("efficiency",))} == {"tokens-per-pass"}
    # tokens per pass ran with counts and no shortfall: efficiency is decided, not null
    assert result.efficient is False and result.mean_tokens_per_round


def test_loop_battery_reports_a_subject_that_raises():
    def broken(t, d, reqs, k, rng):
        raise RuntimeError("boom")

    result = run_loop_battery(broken)
    assert result.exact is False and "boom" in result.findings[0].message


def test_loop_cases_cover_widths_batches_and_seeds():
    cases = loop_cases()
    widths = {c.draft.width - c.target.width for c in cases}
    assert {-1, 0, 1} <= widths
    assert any(len(c.requests) > 1 and not c.seeded for c in cases) and any(c.seeded for c in cases)


def test_loop_catalogue_shape():
    assert len(LOOP_MUTANTS) >= 16 and len(LOOP_CONTROLS) >= 2
    assert all(m.interface == "loop" and m.reference for m in LOOP_MUTANTS)
    assert all(m.effect == "exact" for m in LOOP_CONTROLS)
    assert {m.id for m in LOOP_MUTANTS + LOOP_CONTROLS} <= {m.id for m in ALL}


def test_a_loop_the_enumerator_cannot_follow_is_judged_by_statistics():
    def opaque(t, d, reqs, k, rng):  # reproducible, but its own generator hides every decision
        return generate(t, d, reqs, k, np.random.default_rng(int(rng.integers(2**62))))

    result = run_loop_battery(opaque, samples=2000, **NO_SWEEPS)
    assert result.findings == [] and result.power
    assert any("not enumerable" in line for line in result.ran)
    assert result.exact in (True, None)  # None when 3000 runs cannot see the budget's TV

    def biased(t, d, reqs, k, rng):  # plain token lists: no logprobs or counts to contradict
        hot = [replace(r, params=replace(r.params, temperature=3.0)) if r.params.temperature else r for r in reqs]
        return [list(o.tokens) for o in opaque(t, d, hot, k, rng)]

    result = run_loop_battery(biased, samples=2000, stop_on_first=True, **NO_SWEEPS)
    assert result.exact is False and result.findings[0].check == "loop-chi-square"


def test_a_loop_that_ignores_its_rng_is_not_enumerated():
    def unseeded(t, d, reqs, k, rng):
        return generate(t, d, reqs, k, np.random.default_rng())

    # one case: the replay that finds it is per case, and the verdict cannot be exact after it
    result = run_loop_battery(unseeded, samples=1000, cases=loop_cases()[:1], **NO_SWEEPS)
    assert any(f.check == "rng" for f in result.findings) and result.exact is None


def test_check_recognises_the_loop_interface_by_signature_and_by_option(tmp_path):
    """The CLI judges a loop by the loop battery: the reference exact (exit 0), a loop mutant not
    exact (exit 1); auto-detection by parameter names and --interface loop agree. Fixed seed 0,
    false-fail rate 1e-6 per run (exact enumeration here: no sampling noise)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    path = tmp_path / "myloop.py"
    path.write_text(
        "from specverify.samplers.reference_loop import generate\n"
        "from specverify.mutants import get\n"
        "bias_bonus_only = get('loop-bias/bonus-only').fn\n"
    )

    def check(name, *extra):
        proc = subprocess.run(
            [sys.executable, "-m", "specverify", "check", f"{path}:{name}", "--json", "--budget", "quick", *extra],
            capture_output=True,
            text=True,
            timeout=600,
            env={**__import__("os").environ, "PYTHONPATH": str(root)},
        )
        return proc.returncode, json.loads(proc.stdout)

    code, report = check("generate")
    assert code == 0 and report["exact"] is True and report["coverage"]["summary"].startswith("loop battery")
    code, report = check("bias_bonus_only", "--interface", "loop")
    assert code == 1 and report["exact"] is False
    assert "sequence-law" in {f["check"] for f in report["findings"]}
    ce = report["counterexample"]  # the smallest request and model that show the law's bias
    assert ce["method"] == "exact" and ce["check"] == "sequence-law" and ce["exact_tv"] > 1e-9
    assert ce["vocab_size"] == 2 and ce["window"] <= 3 and "logit_bias" in ce["requests"][0]["params"]


# ---------------------------------------------------------------------------- loop counterexamples


def _candidate(ce: dict):
    return next(c for c in small_loop_cases() if c.name == ce["case"])


def _joint_law(loop, case):
    def run(rng):
        return tuple(o.tokens for o in map(as_output, loop(case.target, case.draft, list(case.requests), case.k, rng)))

    return exact.enumerate_distribution(run, max_paths=100_000)


def test_loop_candidates_grow_smallest_first():
    keys = [
        (len(c.requests), c.vocab_size, max(r.params.max_tokens for r in c.requests))
        for c in small_loop_cases()
        if not c.seeded
    ]
    assert keys == sorted(keys) and keys[0] == (1, 2, 1)
    assert {c.draft.width - c.target.width for c in small_loop_cases()} == {-1, 0, 1}


@pytest.mark.parametrize(
    "mutant_id, checks",
    [
        ("loop-minp/bonus-only", set(LAW_CHECKS)),
        ("loop-vocab/draft-padding-probability", set(LAW_CHECKS)),
        ("loop-stop/tokens-after-stop", {"stop-max-tokens"}),
    ],
)
def test_loop_counterexample_is_small_and_genuine(mutant_id, checks):
    """Exact enumeration (no sampling: the TV tolerance 1e-9 is the only threshold). The found
    case is re-enumerated here, in this process, and shows the finding again."""
    from specverify.mutants import get

    loop = get(mutant_id).fn
    ce = find_loop_counterexample(loop, "quick", 0, checks)
    assert ce is not None and ce["method"] == "exact" and ce["check"] in checks
    assert ce["vocab_size"] == 2 and ce["window"] <= 3 and ce["k"] <= 2 and len(ce["requests"]) == 1
    from specverify.surface.api import counterexample_lines

    text = "\n".join(counterexample_lines(ce))
    assert "request 0: prompt [0]" in text and f"shows [{ce['kind']}] {ce['check']}" in text
    case = _candidate(ce)
    law = marginals(_joint_law(loop, case), 1)[0]
    want = sequence_law(case.target, case.requests[0])
    if ce["check"] in LAW_CHECKS:
        assert exact.total_variation(law, want) == pytest.approx(ce["exact_tv"], abs=1e-12) and ce["exact_tv"] > 1e-9
        assert sum(r["sampler"] for r in ce["distributions"]) == pytest.approx(1.0, abs=1e-6)
    else:
        assert any(contract_problem(case, 0, (out, None, None, None)) for out in law)


def test_an_exact_loop_has_no_counterexample():
    """The reference over every vocabulary-2 candidate, each enumerated exactly: nothing to show."""
    cases = [c for c in small_loop_cases() if c.vocab_size == 2]
    judged: list = []
    assert find_loop_counterexample(generate, "quick", 0, cases=cases, judged=judged) is None
    assert judged == [c.name for c in cases]  # every candidate judged: none timed out


def test_loop_counterexample_by_statistics_when_the_loop_cannot_be_enumerated():
    """1000 runs per candidate, chi-square at false-fail rate 1e-6 split over the 2 candidates'
    requests: the exact candidate (no logit bias) is flagged with probability <= 5e-7; the biased one
    (exact TV 0.184, above the 0.116 the test sees with probability 0.95 at n = 1000, asserted) is
    missed with probability <= 0.05; seed 0 fixes the run."""
    from specverify.laws.stats import min_discrepancy_chi_square
    from specverify.mutants import get

    biased = get("loop-bias/bonus-only").fn

    def opaque(t, d, reqs, k, rng):  # reproducible, but its own generator hides every decision
        own = np.random.default_rng(int(rng.integers(2**62)))
        return [list(as_output(o).tokens) for o in biased(t, d, reqs, k, own)]

    cases = [
        c
        for c in small_loop_cases()
        if c.name in ("counterexample V2 m=2 k=1 params 0", "counterexample V2 m=2 k=1 params 4")
    ]
    want = sequence_law(cases[1].target, cases[1].requests[0])
    assert min_discrepancy_chi_square(1000, want, 1e-6 / 2, 0.05) < 0.12
    ce = find_loop_counterexample(opaque, "quick", 0, set(LAW_CHECKS), exact_ok=False, cases=cases)
    assert ce["method"] == "statistical" and ce["samples"] == 1000 and ce["case"] == cases[1].name
    assert ce["empirical_tv"] > 0.1


# ---------------------------------------------------------------------------- declared cases


def _declared_pair():
    """Two small cases the reference loop can run: a logit bias (which loop-bias/bonus-only gets
    wrong at the bonus position) with max_tokens 2, and a plain request with max_tokens 1."""
    from specverify.interfaces.loop.cases import LoopCase, seeded_logits

    target = LogitTable(seeded_logits(302, 1, 2, 2, 1.0), "target V2")
    draft = LogitTable(seeded_logits(312, 1, 2, 2, 1.0), "draft V2")
    return [
        LoopCase("bias, m=2", target, draft, (Request((0,), SamplingParams(logit_bias={0: 1.0}, max_tokens=2)),), 1),
        LoopCase("plain, m=1", target, draft, (Request((0,), SamplingParams(max_tokens=1)),), 1),
    ]


def test_check_runs_exactly_the_cases_a_loop_subject_declares():
    """Exact enumeration (TV tolerance 1e-9, no sampling): the reference loop is exact on the two
    declared cases, a loop mutant not; the report says the cases were the subject's, not the
    standard coverage, and the counterexample is the smallest declared case that shows the bias."""
    from specverify.mutants import get
    from specverify.surface import api

    cases = _declared_pair()
    report = api.check(generate, budget="quick", cases=cases)
    d = report.to_dict()
    assert report.exact is True and report.exit_code == verdict_exit_code(True) == 0
    assert [c["name"] for c in d["coverage"]["cases"]] == [c.name for c in cases]
    assert {c["origin"] for c in d["coverage"]["cases"]} == {"declared"}
    assert (
        "NOT the standard loop cases" in d["coverage"]["summary"]
        and "given for the subject" in d["coverage"]["summary"]
    )

    def declaring(target, draft, requests, k, rng):  # the same cases, declared by the subject itself
        return get("loop-bias/bonus-only").fn(target, draft, requests, k, rng)

    declaring.specverify_cases = tuple(cases)
    report = api.check(declaring, budget="quick")
    assert report.exact is False and report.exit_code == 1 and "controls" not in report.to_dict()
    assert {f.case for f in report.findings} == {"bias, m=2"}
    assert report.counterexample["case"] == "bias, m=2" and report.counterexample["exact_tv"] > 1e-9
    assert [c["origin"] for c in report.to_dict()["coverage"]["cases"]] == ["declared", "declared"]
    assert "the subject declares (specverify_cases" in report.coverage


def test_declared_cases_usage_errors():
    from specverify.samplers.chain import speculative_step
    from specverify.surface import api

    cases = _declared_pair()
    with pytest.raises(api.UsageError, match="round interface runs its own cases"):
        api.check(speculative_step, budget="quick", cases=cases)
    with pytest.raises(api.UsageError, match="declared"):
        api.check(generate, budget="quick", cases=cases, vocab=4096)
    for bad, words in (([], "empty"), ([cases[0], cases[0]], "share a name"), (["x"], "LoopCase")):
        with pytest.raises(api.UsageError, match=words):
            api.check(generate, budget="quick", cases=bad)


def test_a_report_is_inconclusive_when_its_control_is_not_flagged():
    """Report.add_control: a control that must be NOT EXACT but came out exact makes the report
    inconclusive (exit 3, api's mapping); a flagged one leaves the verdict as it was."""
    from specverify.surface import api

    report = api.check(generate, budget="quick", cases=_declared_pair()[1:])
    report.add_control("a control", "biased by design", False, [{"check": "x"}])
    assert report.exact is True and report.to_dict()["controls"][0]["flagged"] is True
    report.add_control("another", "biased by design", True, [])
    assert report.exact is None and report.exit_code == verdict_exit_code(None) == 3
    assert "not flagged" in report.to_dict()["shortfalls"][-1] and "must be NOT EXACT" in report.text()
