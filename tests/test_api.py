"""The Python API (specverify.check / assert_exact / Report), ``check`` of several targets,
``--junit-xml`` on ``check`` and ``mutants report``, and the honest dependencies of the API.

Statistical false-fail rate: the battery's 1e-6 per run at fixed seeds, so every verdict here is
deterministic.
"""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import specverify
from specverify import interfaces
from specverify.errors import UsageError
from specverify.interfaces.round import cases as round_cases
from specverify.mutants import get
from specverify.surface import api

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(*args, module="specverify", env=ENV, timeout=300):
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_the_api_imports_only_what_it_needs():
    code = (
        "import sys, specverify, specverify.surface.api, specverify.surface.check_run; specverify.check; "
        "specverify.assert_exact; specverify.Report; "
        "print(sorted(m for m in ('polars', 'matplotlib', 'rich', 'torch', 'ray', 'transformers') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120, check=True
    ).stdout
    assert out.strip() == "[]"


def test_check_returns_a_typed_report():
    report = specverify.check(specverify.speculative_step, budget="quick", seed=0)
    assert isinstance(report, specverify.Report)
    assert report.exact is True and report.efficient is True and report.findings == []
    assert report.counterexample is None and report.exit_code == 0
    d = json.loads(report.to_json())
    assert d == json.loads(json.dumps(report.to_dict()))
    assert {
        "target",
        "seed",
        "coverage",
        "false_fail_rate",
        "exact",
        "efficient",
        "findings",
        "counterexample",
        "budget",
    } <= set(d)
    assert report.target.endswith(":speculative_step") and str(report).startswith(report.target)


def test_assert_exact_shows_the_smallest_counterexample_side_by_side():
    with pytest.raises(AssertionError) as info:
        specverify.assert_exact(get("ratio/inverted").fn, budget="quick", target="inverted")
    message = str(info.value)
    assert message.startswith("inverted: NOT EXACT")
    assert "smallest counterexample (exact): vocab 2, k=1" in message
    header = next(line for line in message.splitlines() if "sampler" in line and "target" in line)
    assert header.split() == ["tokens", "sampler", "target", "difference"]
    assert specverify.assert_exact(specverify.speculative_step, budget="quick").exact is True


def test_interface_adapts_another_signature():
    def keyword_step(*, p_fn, q_fn, prefix, k, rng):
        return specverify.speculative_step(p_fn, q_fn, prefix, k, rng)

    def adapt(fn):
        return lambda p_fn, q_fn, prefix, k, rng: fn(p_fn=p_fn, q_fn=q_fn, prefix=prefix, k=k, rng=rng)

    report = specverify.check(keyword_step, budget="quick", interface=adapt)
    assert report.exact is True and report.target.endswith(
        ":test_interface_adapts_another_signature.<locals>.keyword_step"
    )


def test_campaign_arithmetic_and_budget():
    c = api.campaign_runs(1e-3, "thorough")
    assert c["cases"] == len(round_cases.BUDGETS["thorough"].cases)
    assert c["n_max"] >= max(c["per_case"].values()) and c["runs"] == c["cases"] * c["n_max"]
    assert len(round_cases.looks(500, c["n_max"])) == c["looks"]
    # the per-check rate is the statistical half split over every case and every look
    assert c["per_check_false_fail_rate"] == pytest.approx(1e-6 / 2 / (c["cases"] * c["looks"]))
    assert api.campaign_runs(1e-2, "thorough")["runs"] < c["runs"]
    b = api.campaign_budget(1e-3)
    assert b == interfaces.get("round").budget("tv=0.001")  # the round interface's tv=X section
    assert b.n_max == c["n_max"] and b.stat_cases == c["cases"] and b.detect_tv == 1e-3
    with pytest.raises(UsageError, match="tv=X"):
        interfaces.get("round").budget("tv=2")


def test_campaign_line_counts_the_reports_subjects_and_never_says_0_hours():
    """The line the docs quote: as many subjects as the mutant report runs (the catalogue,
    the baseline and the forced fail), the docs' line says the same number, and a short
    campaign is said in minutes or seconds."""
    from specverify.mutants import ALL
    from specverify.mutants.report import campaign_line

    line = campaign_line(1e-3, runs_per_second=3800)
    assert line.startswith(f"{len(ALL) + 2} subjects x 12 cases at TV 0.001")
    docs = (Path(__file__).resolve().parents[1] / "docs" / "BUDGETS.md").read_text()
    quoted = [ln for ln in docs.splitlines() if "subjects x 12 cases at TV 0.001 =" in ln]
    assert quoted and all(ln.startswith(f"{len(ALL) + 2} subjects") for ln in quoted)
    short = api.campaign_table(len(ALL) + 2, 0.3, runs_per_second=3800)
    runs = (len(ALL) + 2) * api.campaign_runs(0.3, "thorough")["runs"]  # about 3e6 at 3,800 per core-second: minutes
    minutes = round(runs / 3800 / 2 / 60)
    assert " 0 hours" not in short and f"{minutes} minutes on one 2-core machine" in short
    assert [api.duration(h) for h in (1290.4, 2.46, 0.2, 0.001)] == ["1,290 hours", "2.5 hours", "12 minutes", "3.6 s"]


def test_check_of_several_targets_writes_junit_xml(tmp_path):
    xml = tmp_path / "check.xml"
    code, out, err = cli(
        "check",
        "specverify:speculative_step",
        "specverify.mutants.catalogue:no_verification",
        "--budget",
        "quick",
        "--json",
        "--junit-xml",
        str(xml),
    )
    assert code == 1, err  # the worst of 0 and 1
    reports = [json.loads(line) for line in out.splitlines()]
    assert [r["exact"] for r in reports] == [True, False]
    suite = ET.parse(xml).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "specverify:speculative_step",
        "specverify.mutants.catalogue:no_verification",
    ]
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure.get("message").startswith("[distribution] exact-tv on")
    assert "smallest counterexample" in failure.text


def test_several_targets_exit_with_the_worst_code(tmp_path):
    code, out, err = cli("check", "specverify:speculative_step", "nosuch.module:f", "--budget", "quick")
    assert code == 2 and "cannot import 'nosuch.module'" in err and ": EXACT" in out


def test_executor_ray_without_ray_is_a_usage_error_naming_the_extra(tmp_path):
    fake = tmp_path / "ray"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env = {**ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    for args, module in (
        (["check", "specverify:speculative_step"], "specverify"),
        (["report", "--mutant", "ratio/inverted"], "specverify.mutants"),
    ):
        code, out, err = cli(*args, "--executor", "ray", module=module, env=env, timeout=60)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert "pip install -e '.[ray]'" in err
    code, _, err = cli("check", "specverify:speculative_step", "--executor", "spark", timeout=60)
    assert code == 2 and "ray://HOST:PORT" in err and "spark" in err


def test_mutant_report_writes_junit_xml(tmp_path):
    xml = tmp_path / "report.xml"
    code, out, err = cli(
        "report",
        "--mutant",
        "ratio/inverted",
        "--budget",
        "quick",
        "--workers",
        "1",
        "--format",
        "csv",
        "--junit-xml",
        str(xml),
        module="specverify.mutants",
    )
    assert code == 0, err
    suite = ET.parse(xml).getroot().find("testsuite")
    names = [c.get("name") for c in suite.findall("testcase")]
    assert names == ["baseline/reference", "sanity/emit-drafts", "ratio/inverted"]
    assert suite.get("failures") == "0" and suite.get("errors") == "0"


def test_a_survivor_is_a_junit_failure_carrying_why():
    from specverify.mutants.report import Row, Status, junit_case
    from specverify.surface import junit

    row = Row("x/y", "biased", Status.SURVIVED, "", None, None, None, 1.0, "a bug", "")
    case = junit_case(row)
    assert case.outcome == "failure" and "survived" in case.message
    root = ET.fromstring(junit.to_xml("s", [case]))
    assert root.find("testsuite/testcase/failure").get("message").startswith("survived")


def test_readme_property_example():
    """docs/API.md's example of a user's own @given test over specverify.surface.strategies."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from specverify.laws import exact
    from specverify.surface import strategies as sst

    @settings(max_examples=20, deadline=None)
    @given(model=sst.table_models(vocab_size=(2, 3), order=(0, 1)), k=st.integers(1, 3))
    def test_first_two_tokens_follow_the_target(model, k):
        prefix = (0,) * max(model.order, 1)
        got = exact.sampler_distribution(specverify.speculative_step, model.p_fn, model.q_fn, prefix, k, 2)
        want = exact.sequence_distribution(model.p_fn, prefix, 2)
        assert exact.total_variation(got, want) < 1e-9

    test_first_two_tokens_follow_the_target()


def test_strategies_stay_public():
    assert specverify.surface.strategies.table_models is not None


def test_a_campaign_budget_reaches_the_report_without_its_overrides():
    from specverify.mutants import report

    assert report.report_budget("tv=0.001") == ("tv=0.001", {})  # resolved by the subject's interface
    assert report.report_budget("quick") == ("quick", report.REPORT_OVERRIDES)
    from specverify.mutants import command

    assert command.parse_args(["report", "--budget", "tv=0.001"]).budget == "tv=0.001"
    code, _, err = cli("report", "--budget", "huge", module="specverify.mutants", timeout=60)
    assert code == 2 and "tv=X" in err


def test_a_loop_counterexample_reads_as_tables_of_logits():
    """The loop counterexample in the human report and in the fixture's message: the target's and
    the draft's logits labelled as such, one row per context, never a triple-nested list; the
    processed p of the request's first token beside them (a min-p bug shows there). Exact
    enumeration at quick: deterministic. ``fail_fast``: the search starts from the first finding,
    the whole run's first (``test_checker.test_fail_fast_gives_the_whole_runs_verdict``), and
    gives the same counterexample in 0.7 s instead of 15 s."""
    report = specverify.check(get("loop-minp/bonus-only").fn, budget="quick", progress=False, fail_fast=True)
    ce = report.to_dict()["counterexample"]
    for text in (api.human(report.to_dict()), "\n".join(api.counterexample_lines(ce))):
        assert "target logits (row: position mod 1, last token):" in text and "draft logits" in text
        assert "      [0, 1]: " in text and "[[[" not in text and " p = " not in text
        assert "processed p of request 0's first token: " in text


def three_parameter_kernel(draft_ids, draft_probs, target_probs):
    return draft_ids


def adapter(fn):
    return fn


def odd_names(a, b, c, d, e):
    return []


USAGE_ERRORS = {
    "an unknown budget name": (dict(budget="fast"), "InterfaceError", "budget: "),
    "a bad tv=X": (dict(budget="tv=2"), "InterfaceError", "budget: tv=X needs"),
    "a budget of no type": (dict(budget=3), "ArgumentTypeError", "budget: "),
    "a negative seed": (dict(seed=-1), "ArgumentError", "seed: must be >= 0"),
    "a seed that is a float": (dict(seed=1.5), "ArgumentTypeError", "seed: must be an integer"),
    "an unknown interface": (dict(interface="rounds"), "InterfaceError", "interface: must be one of"),
    "an interface of no type": (dict(interface=3), "ArgumentTypeError", "interface: must be one of"),
    "an adapter given a TARGET": (
        dict(sampler="specverify.samplers.chain:speculative_step", interface=adapter),
        "ArgumentTypeError",
        "interface: give a callable sampler",
    ),
    "a sampler of no type": (dict(sampler=3), "ArgumentTypeError", "sampler: expected a callable"),
    "a signature that fits no interface": (
        dict(sampler=three_parameter_kernel, interface="kernel"),
        "InterfaceError",
        "cannot be called as the kernel interface's f(",
    ),
    "a signature nothing can tell": (dict(sampler=odd_names), "InterfaceError", "pass --interface"),
    "an unknown override": (dict(overrides={"bogus": 1}), "ArgumentError", "overrides: the round budget has no"),
    "a bad override value": (dict(overrides={"n_max": -1}), "ArgumentError", "n_max (a round budget field)"),
    "overrides of no type": (dict(overrides="n_max=1"), "ArgumentTypeError", "overrides: expected a mapping"),
    "a k out of range": (dict(k=99), "InterfaceError", "k: each k must be in 1..16"),
    "a k that does not parse": (dict(k="1-4"), "InterfaceError", "k: expected an int"),
    "a vocabulary out of range": (dict(vocab=1), "InterfaceError", "vocab: must be in 2.."),
    "max_tokens out of range": (dict(max_tokens=100), "InterfaceError", "max_tokens: must be in 0..64"),
    "fail_fast not a bool": (dict(fail_fast="yes"), "ArgumentTypeError", "fail_fast: must be True or False"),
    "counterexample not a bool": (dict(counterexample=1), "ArgumentTypeError", "counterexample: must be True"),
    "a negative time limit": (dict(time_limit=-1), "ArgumentError", "time_limit: must be a number of seconds"),
    "no workers": (dict(workers=0), "ArgumentError", "workers: must be >= 1"),
    "too many workers": (dict(workers=10_000), "ArgumentError", "workers: must be <= 256"),
    "a progress that is no choice": (dict(progress="loud"), "ArgumentError", "progress: must be"),
    "a device for a round sampler": (dict(device="cuda"), "InterfaceError", "device: only kernels run on a device"),
    "a device of no type": (dict(device=0), "ArgumentTypeError", "device: expected cpu"),
    "cases for a round sampler": (dict(cases=[]), "InterfaceError", "cases: the round interface runs its own"),
    "a file TARGET that does not exist": (dict(sampler="no_such_file.py:f"), "TargetError", "no such file"),
    "a module TARGET that does not import": (dict(sampler="no_such.module:f"), "TargetError", "cannot import"),
    "a TARGET without a colon": (dict(sampler="no_colon"), "TargetError", "'no_colon'"),
    "a TARGET that names nothing": (dict(sampler="specverify:nope"), "TargetError", "has no attribute 'nope'"),
}
"""Every usage error the API raises, by what the caller got wrong: (``check``'s keywords, the
``specverify.errors`` class raised, words of its message). A check with these keywords and the
reference sampler otherwise; each ends before any battery runs."""


@pytest.mark.parametrize("keywords, kind, words", USAGE_ERRORS.values(), ids=USAGE_ERRORS)
def test_every_usage_error_of_the_api_is_a_usage_error(keywords, kind, words):
    """``except specverify.errors.UsageError`` catches every mistake of the caller's, each of its
    own kind (a ValueError, or an ArgumentTypeError that is also a TypeError), naming what is
    wrong; the same through ``assert_exact``."""
    from specverify import errors

    keywords = dict(keywords)
    sampler = keywords.pop("sampler", specverify.speculative_step)
    calls = [lambda: specverify.check(sampler, **{"progress": False, "counterexample": False, **keywords})]
    if set(keywords) <= {"budget", "seed", "interface", "k", "vocab", "max_tokens", "progress"}:
        calls.append(lambda: specverify.assert_exact(sampler, **keywords))
    for call in calls:
        with pytest.raises(errors.UsageError) as info:
            call()
        assert type(info.value).__name__ == kind and words in str(info.value), (type(info.value), str(info.value))
        assert isinstance(info.value, TypeError if kind == "ArgumentTypeError" else ValueError)


def test_assert_exact_checks_its_own_keyword():
    from specverify.errors import ArgumentTypeError

    with pytest.raises(ArgumentTypeError, match="allow_inconclusive: must be True or False"):
        specverify.assert_exact(specverify.speculative_step, allow_inconclusive="no")


def test_a_device_this_machine_lacks_is_an_environment_problem_not_a_usage_error():
    """``device="cuda"`` for a kernel where torch sees no CUDA (or there is no torch): NoCuda or
    MissingExtra, exit 4; a device name that is none is an ArgumentError."""
    from specverify.errors import ArgumentError, EnvironmentProblem, exit_code_of
    from specverify.samplers.reference_kernel import reference_kernel

    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        pytest.skip("this machine has CUDA: the kernel runs there")
    with pytest.raises(EnvironmentProblem) as info:
        specverify.check(reference_kernel, budget="quick", device="cuda", progress=False)
    assert exit_code_of(info.value) == 4
    with pytest.raises(ArgumentError, match="device: must be cpu, cuda or cuda:N, got 'gpu'"):
        specverify.check(reference_kernel, budget="quick", device="gpu", progress=False)


def test_the_command_line_and_the_api_refuse_a_value_with_the_same_words():
    """One checker per field (``request.FIELD_CHECKS``): ``--workers 0`` and ``workers=0``."""
    code, out, err = cli("check", "specverify.samplers.chain:speculative_step", "--workers", "0", timeout=60)
    assert code == 2 and out == "" and "argument --workers: must be >= 1, got 0" in err
    with pytest.raises(UsageError, match="workers: must be >= 1, got 0"):
        specverify.check(specverify.speculative_step, workers=0)
