"""The engine's own reference (``--reference``, ``check(reference=...)``, the fixture's
``reference=``): a loop or a round judged against the subject's own target-only path.

Pinned here: an engine whose both paths apply top-p before top-k is EXACT against its own
target-only path and NOT EXACT without it, the order named; the speculative path alone swapped
is caught with its reference (sgl-project/sglang#36173); the exact law is used where the
enumerator follows both sides, a two-sample chi-square where it cannot; a broken reference
(raises, returns junk, hangs) is a finding on the reference, never a verdict on the subject.
Statistical tests run at the battery's false-fail rate (1e-6 split over its checks) or, for the
two-sample test itself, 1e-6; every seed is fixed, so each outcome is deterministic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import specverify
from specverify.errors import ArgumentError, ArgumentTypeError, InterfaceError
from specverify.interfaces.loop.semantics import named_difference, top_p_before_top_k, variant_law
from specverify.interfaces.loop.truncation_cases import truncation_cases
from specverify.laws import exact
from specverify.laws.requests import Output, sequence_law
from specverify.laws.two_sample import two_sample_test
from specverify.mutants import get
from specverify.mutants.loop_engine_mutants import (
    speculative_top_p_first,
    target_only_top_k_first,
    target_only_top_p_first,
)
from specverify.samplers import speculative_step
from specverify.samplers.reference_loop import generate
from specverify.surface.report_text import human

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]

CASES = truncation_cases()
QUICK = {
    "budget": "quick",
    "counterexample": False,
    "cases": CASES,
    "overrides": {"samples": 1000, "seed_law_runs": 100, "seeds": 2},
}
"""The truncation cases at a quick budget, fewer runs where sampled: a few seconds a check."""
STAT = {**QUICK, "cases": CASES[:1], "overrides": {"samples": 600, "seed_law_runs": 100, "seeds": 2}}
"""One truncation case, at least 600 runs where sampled (more where the budget's promised TV needs them): the statistical branches."""

LOOP_FILE = """
from specverify.interfaces.loop.truncation_cases import truncation_cases
from specverify.mutants.loop_engine_mutants import speculative_top_p_first, target_only_top_p_first


def generate(target, draft, requests, k, rng):
    return speculative_top_p_first(target, draft, requests, k, rng)


generate.specverify_cases = truncation_cases()[:1]


def generate_target_only(target, draft, requests, k, rng):
    return target_only_top_p_first(target, draft, requests, k, rng)
"""


def gumbel_target_only(step):
    """Target-only decoding by the Gumbel-max trick (the same law as a categorical draw, but
    draws the enumerator cannot follow): a reference judged by statistics."""

    def run(target, draft, requests, k, rng):
        outs = []
        for r in requests:
            g = rng if r.params.seed is None else np.random.default_rng(r.params.seed)
            out: list[int] = []
            while not (len(out) >= r.params.max_tokens or (out and out[-1] in r.params.stop_token_ids)):
                p = step(np.asarray(target(r.prompt + tuple(out))), r.params, r.prompt, tuple(out))
                with np.errstate(divide="ignore"):
                    out.append(int(np.argmax(np.log(p) + g.gumbel(size=p.size))))
            outs.append(Output(tuple(out)))
        return outs

    return run


def raising_reference(target, draft, requests, k, rng):
    raise RuntimeError("the reference exploded")


def junk_reference(target, draft, requests, k, rng):
    return "junk"


def hanging_reference(target, draft, requests, k, rng):
    time.sleep(60)
    return []


def target_only_round(p_fn, q_fn, prefix, k, rng):
    p = np.asarray(p_fn(prefix), dtype=np.float64)
    return [int(rng.choice(p.size, p=p))]


# --------------------------------------------------------------------------- the pieces


def test_two_sample_test_passes_one_law_and_sees_a_difference_at_its_stated_power():
    rng = np.random.default_rng(0)
    law, other = [0.5, 0.3, 0.2], [0.3, 0.3, 0.4]  # TV 0.2
    a, b = rng.choice(3, 3000, p=law).tolist(), rng.choice(3, 3000, p=law).tolist()
    same = two_sample_test(a, b, 1e-6)
    assert same.passed and same.df == 2 and same.min_detectable_tv < 0.2
    differ = two_sample_test(a, rng.choice(3, 3000, p=other).tolist(), 1e-6)
    assert not differ.passed and differ.p_value < 1e-6
    with pytest.raises(ValueError, match="b: empty"):
        two_sample_test(a, [], 1e-6)


def test_the_truncation_cases_tell_the_two_orders_apart_and_the_order_is_named():
    for case in CASES:
        for req in case.requests:
            swapped = variant_law(case.target, req, top_p_before_top_k)
            assert exact.total_variation(swapped, sequence_law(case.target, req)) > 0.1
            assert named_difference(case.target, req, swapped) == "applies top-p before top-k"
            assert named_difference(case.target, req, sequence_law(case.target, req)) is None


# --------------------------------------------------------------------------- the loop, by the API


def check(subject, **keywords) -> dict:
    """``specverify.check``'s report as its JSON dict."""
    return specverify.check(subject, **keywords).to_dict()


def test_an_engine_with_top_p_first_on_both_paths_is_exact_against_its_own_reference_only():
    own = check(speculative_top_p_first, reference=target_only_top_p_first, **QUICK)
    assert own["exact"] is True, own["findings"]
    assert "judged against the reference" in own["coverage"]["summary"]
    notes = [line for line in own["ran"] if line.startswith("reference differs")]
    assert notes and all("applies top-p before top-k" in line for line in notes)  # information ...
    assert not own["findings"]  # ... not a finding
    assert "reference differs" in human(own)  # shown in the short report too
    assert all(c["judged"] == "enumeration" for c in own["coverage"]["cases"])  # the exact law, both sides
    assert own["exact_tv_max"] is not None and own["exact_tv_max"] <= 1e-9
    default = check(speculative_top_p_first, **QUICK)
    assert default["exact"] is False
    laws = [f for f in default["findings"] if f["check"] == "sequence-law"]
    assert laws and all("applies top-p before top-k" in f["message"] for f in laws)
    assert all("--reference" in f["message"] for f in laws)


def test_the_order_swapped_on_the_speculative_path_only_is_caught_with_its_reference():
    mutant = get("loop-truncation/top-p-first-speculative-only")
    assert mutant.reference == "sgl-project/sglang#36173" and mutant.own_reference is target_only_top_k_first
    report = check(mutant.fn, reference=mutant.own_reference, **QUICK)
    assert report["exact"] is False
    assert any(f["check"] == "sequence-law" and "the reference's" in f["message"] for f in report["findings"])
    control = get("loop-control/top-p-first-both-paths")
    assert control.effect == "exact" and control.own_reference is target_only_top_p_first


def test_the_reference_loop_is_exact_against_a_target_only_path_of_this_projects_order():
    report = check(generate, reference=target_only_top_k_first, **QUICK)
    assert report["exact"] is True and not [line for line in report["ran"] if line.startswith("reference differs")]


def test_a_reference_the_enumerator_cannot_follow_is_judged_by_statistics_with_its_power():
    """The subject enumerated, the reference sampled (Gumbel-max): the battery's chi-square of
    the reference's runs against the subject's exact law, at the per-check false-fail rate."""
    ref = gumbel_target_only(top_p_before_top_k)
    report = check(speculative_top_p_first, reference=ref, **STAT)
    assert report["exact"] is True, report["findings"]
    rows = [row for row in report["power"] if row.get("against") == "reference"]
    whole = [
        row for row in rows if row["reference_runs"] >= 600
    ]  # the requests' laws, at least `samples` (the seed law: stated)
    assert whole and all(row["min_detectable_tv"] < 0.35 for row in whole)
    wrong = check(generate, reference=ref, **STAT)  # top-k first against top-p first
    assert wrong["exact"] is False


def test_neither_side_enumerable_is_a_two_sample_test_with_its_power():
    subject = gumbel_target_only(top_p_before_top_k)
    report = check(subject, reference=gumbel_target_only(top_p_before_top_k), **STAT)
    assert report["exact"] is True, report["findings"]
    assert any(line.startswith("loop-two-sample") for line in report["ran"])
    rows = [row for row in report["power"] if row.get("against") == "reference" and row["reference_runs"] >= 600]
    assert rows and all(row["min_detectable_tv"] < 0.35 for row in rows)
    other = gumbel_target_only(lambda z, params, prompt, out: np.full(len(z), 1.0 / len(z)))  # uniform rows
    wrong = check(subject, reference=other, **STAT)
    assert wrong["exact"] is False and any(f["check"] == "loop-two-sample" for f in wrong["findings"])


@pytest.mark.parametrize(
    "reference, words",
    [(raising_reference, "the reference exploded"), (junk_reference, "str"), (hanging_reference, "hangs")],
    ids=["raises", "junk", "hangs"],
)
def test_a_broken_reference_is_a_finding_on_the_reference_never_a_verdict_on_the_subject(reference, words):
    keywords = dict(QUICK)
    if reference is hanging_reference:
        keywords["overrides"] = {**QUICK["overrides"], "task_idle_s": 0.5, "call_limit_s": 0.5}
    report = check(generate, reference=reference, **keywords)
    assert report["exact"] is None  # INCONCLUSIVE: neither EXACT nor NOT EXACT
    on_reference = [f for f in report["findings"] if f["check"] == "reference"]
    assert on_reference and on_reference[0]["kind"] == "reference" and words in on_reference[0]["message"]
    assert not [f for f in report["findings"] if f["kind"] in ("distribution", "contract")]
    assert any("the reference" in s for s in report["shortfalls"])


def test_a_bad_reference_argument_is_a_usage_error_naming_it():
    with pytest.raises(ArgumentTypeError, match="reference:"):
        specverify.check(generate, reference=3)
    with pytest.raises(ArgumentError, match="reference:"):
        specverify.check(generate, reference="no_function_named")
    with pytest.raises(InterfaceError, match="reference"):
        specverify.check(generate, reference=lambda target, draft: [], **QUICK)  # not the loop's signature

    def kernel(draft_ids, draft_probs, target_probs, uniforms):
        return draft_ids

    with pytest.raises(InterfaceError, match="reference: the kernel interface takes no reference"):
        specverify.check(kernel, reference=kernel, budget="quick")


# --------------------------------------------------------------------------- the round


def test_a_round_is_judged_against_its_own_target_only_round():
    report = check(speculative_step, reference=target_only_round, budget="quick", counterexample=False)
    assert report["exact"] is True and "judged against the reference" in report["coverage"]["summary"]
    broken = check(speculative_step, reference=junk_reference, budget="quick", counterexample=False)
    assert broken["exact"] is None and [f for f in broken["findings"] if f["check"] == "reference"]


# --------------------------------------------------------------------------- the command line and the fixture


def cli(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "specverify", "check", *args], capture_output=True, text=True, timeout=600, env=env
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_the_command_line_takes_a_reference(tmp_path):
    loop = tmp_path / "loop.py"
    loop.write_text(LOOP_FILE)
    code, out, err = cli(
        f"{loop}:generate", "--reference", f"{loop}:generate_target_only", "--budget", "quick", "--json"
    )
    assert code == 0, err  # without --reference: NOT EXACT, the order named (the API's tests, the same run)
    report = json.loads(out)
    assert report["exact"] is True and any("applies top-p before top-k" in line for line in report["ran"])
    code, out, err = cli(f"{loop}:generate", "--reference", "nocolon")
    assert code == 2 and "--reference" in err


def plugin_args() -> list[str]:
    """``-p specverify.surface.pytest_plugin`` unless an installed entry point loads it already."""
    from importlib.metadata import entry_points

    registered = any(ep.value == "specverify.surface.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if registered else ["-p", "specverify.surface.pytest_plugin"]


def test_the_fixture_and_its_marker_take_a_reference(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(loop=LOOP_FILE)
    pytester.makepyfile(
        test_user="""
import pytest
from loop import generate, generate_target_only


@pytest.mark.specverify(reference=generate_target_only)
def test_marker(specverify_check):
    report = specverify_check(generate)
    assert report.exact is True and "judged against the reference" in report.coverage
"""
    )
    result = pytester.runpytest_subprocess(*plugin_args(), "--specverify-budget", "quick", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_assert_exact_takes_a_reference():
    def subject(target, draft, requests, k, rng):
        return speculative_top_p_first(target, draft, requests, k, rng)

    subject.specverify_cases = CASES[:1]
    report = specverify.assert_exact(subject, budget="quick", reference=target_only_top_p_first)
    assert report.exact is True
    with pytest.raises(AssertionError, match="applies top-p before top-k"):
        specverify.assert_exact(subject, budget="quick")
