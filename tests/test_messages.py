"""The words people read: the check report's verdict line and its width, the verdict label,
counts in the right number, the kernel battery's measured TV, the mutant table's wrapping, the
kernel's output-dtype breach, the tv=X range, an unknown --mutant, where a subject raised, and the
mutant report's progress when stderr is not a terminal.

Deterministic: the reports here are built by hand or run on explicit uniforms (the kernel
battery's exact scan), the mutant report's subjects replaced by a stub."""

from __future__ import annotations

import dataclasses
import io
import re

import kernel_subjects as ks
import numpy as np
import pytest

from specverify.battery import budgets
from specverify.battery.guards import ContractBreach, describe_exception, token_id, with_article
from specverify.battery.targets import load_target
from specverify.common import tables
from specverify.interfaces.kernel import battery as kernel
from specverify.interfaces.kernel import cases as kc
from specverify.interfaces.kernel import plan as kernel_plan
from specverify.interfaces.kernel.tasks import validate_outputs
from specverify.mutants import mutant_progress, mutant_table, report
from specverify.mutants.command import main, parse_args
from specverify.surface.report_text import counterexample_lines, human

SUMMARY = (
    "4 fixed cases + 1 drawn from the seed + one over 128 ids + contexts swept to 128 + k swept to 8, "
    "k up to 3, windows up to 4 tokens, "
    "chi-square up to 4000 runs; a case the enumerator cannot follow must see TV 0.15"
)


def report_dict(**changes) -> dict:
    """A ``check --json`` report of the quick budget (its shape, by hand), with ``changes``."""
    d = {
        "target": "pkg.mod:step",
        "seed": 0,
        "coverage": {
            "summary": SUMMARY,
            "cases": [
                {"name": "toy", "origin": "fixed", "judged": "enumeration"},
                {"name": "drawn", "origin": "generated", "judged": "chi-square"},
            ],
        },
        "false_fail_rate": 1e-6,
        "findings": [],
        "power": [
            {"case": "toy", "runs": 4000, "min_detectable_tv": 0.0655, "detection_probability": 0.95},
            {"case": "drawn", "runs": 4000, "min_detectable_tv": 0.0784, "detection_probability": 0.95},
        ],
        "shortfalls": [],
        "ran": ["chi-square: handout toy chain, k=2, 2 tokens: passed at n=4000 (p-value 0.0723); " * 2],
        "output": "x" * 130,
        "budget": "quick",
        "counterexample": None,
        "seconds": 2.61,
        "exact": True,
        "efficient": True,
    }
    return {**d, **changes}


FINDING = {"check": "exact-tv", "kind": "distribution", "case": "toy", "message": "TV 0.2", "evidence": {}}


# --------------------------------------------------------------------------- the verdict line


def test_the_verdict_line_is_one_short_line_and_the_budget_goes_below():
    lines = human(report_dict()).splitlines()
    assert lines[0] == "pkg.mod:step: EXACT, efficient (2.6 s)"
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    below = " ".join(" ".join(lines[1:]).split())
    assert "budget quick: " + SUMMARY in below
    assert "ran 2 cases (1 fixed, 1 generated; 1 by enumeration, 1 by chi-square), 0 findings" in below
    assert "power: 2 statistical checks of 4,000 runs; each detects a TV >= 0.0784" in below
    assert "x" * 90 in below.replace("| ", "")  # the sampler's long output line, wrapped, all there


def test_a_long_subject_is_shortened_on_the_verdict_line_and_given_whole_below():
    target = "/a/very/long/path/" + "nested/" * 12 + "sampler.py:speculative_step"
    lines = human(report_dict(target=target)).splitlines()
    assert len(lines[0]) <= 100 and lines[0].endswith("sampler.py:speculative_step: EXACT, efficient (2.6 s)")
    assert "..." in lines[0]
    assert target in "".join(line.strip() for line in lines[1:3]).replace("subject: ", "")


def test_a_biased_sampler_is_only_not_exact():
    lines = human(report_dict(exact=False, efficient=True, findings=[FINDING])).splitlines()
    assert lines[0] == "pkg.mod:step: NOT EXACT (2.6 s)"
    assert "efficien" not in lines[0]
    inconclusive = human(report_dict(exact=None, efficient=None)).splitlines()[0]
    assert inconclusive == "pkg.mod:step: INCONCLUSIVE, efficiency not established (2.6 s)"


# --------------------------------------------------------------------------- counts


def test_counts_take_the_number_of_their_noun():
    assert [tables.counted(n, "token") for n in (0, 1, 2, 4000)] == ["0 tokens", "1 token", "2 tokens", "4,000 tokens"]
    text = human(report_dict(exact=False, findings=[FINDING]))
    assert "1 finding" in text and "(s)" not in text
    ce = {
        "method": "exact",
        "vocab_size": 2,
        "k": 1,
        "window": 1,
        "prefix": [],
        "model": "iid",
        "p": [0.5, 0.5],
        "q": [1.0, 0.0],
        "exact_tv": 0.5,
        "distributions": [{"tokens": [i], "sampler": 0.0, "target": 0.0} for i in range(17)],
    }
    lines = counterexample_lines(ce, rows=16)
    assert "window 1 token, " in lines[0] and lines[-1] == "    ... 1 more sequence"
    drafts = np.array([[0, -1]])
    with pytest.raises(ContractBreach, match=r"^row 0: num_accepted 2 with 1 draft$"):
        validate_outputs((np.array([[0, 1, 2]]), np.array([2])), drafts, 3)


# --------------------------------------------------------------------------- the kernel battery


def test_exact_from_uniforms_shows_the_measured_tv_beside_the_tolerance():
    case = kc.every_draft_case()
    result = kernel.run(ks.loop_kernel, "quick", 0, cases=[case])
    line = next(line for line in result.ran if line.startswith("exact from uniforms: "))
    found = re.search(r", 9 laws, TV (\S+) measured, tolerance (\S+)$", line)
    assert found, line
    assert float(found[1]) <= float(found[2]) == pytest.approx(kernel.tolerance(case), rel=0.05)
    assert kernel_plan.measured_tv_words([], 1e-6) == "no law measured exactly (TV tolerance 1e-06)"


def test_a_non_integer_output_is_named_with_its_dtype():
    drafts = np.array([[0, 1]])
    out = np.array([[0, 1, 2]])
    with pytest.raises(ContractBreach) as caught:
        validate_outputs((out, np.array([2.0], dtype=np.float32)), drafts, 3)
    assert str(caught.value).startswith("returned num_accepted of dtype float32: ")
    assert "output_ids of dtype" not in str(caught.value)
    with pytest.raises(ContractBreach, match=r"^returned output_ids of dtype float64: "):
        validate_outputs((out.astype(np.float64), np.array([2])), drafts, 3)


# --------------------------------------------------------------------------- the mutant table


def test_wrap_breaks_between_words_and_splits_only_a_word_longer_than_the_column():
    text = "exact, seeded-reproducibility, tokens-per-pass"
    assert tables.wrap(text, 23) == ["exact,", "seeded-reproducibility,", "tokens-per-pass"]
    assert tables.wrap("round/off-by-one-target", 18) == ["round/", "off-by-one-target"]
    assert tables.wrap("a-very-long-hyphenated-word", 10) == ["a-very-", "long-", "hyphenated", "-word"]
    assert tables.longest_word(text) == len("seeded-reproducibility,")


def test_the_killed_by_column_holds_its_longest_detector_name_whole():
    def row(i, killed_by):
        return report.Row(
            f"loop/{'a-long-mutant-identifier-' * 2}{i}", "biased", "killed", killed_by, 0.1, None, None, 1.0, "", ""
        )

    rows = [row(0, "contract,seeded-reproducibility"), row(1, "logprobs,tokens-per-pass"), row(2, "exact")]
    text = mutant_table.table(rows)
    for word in ("seeded-reproducibility", "tokens-per-pass", "logprobs,", "contract,", *(r.id for r in rows)):
        assert word in text, text
    short = [dataclasses.replace(r, id=f"loop/m-{i}") for i, r in enumerate(rows)]
    assert max(len(line) for line in mutant_table.table(short).splitlines()) <= 100  # ids never wrap; the rest fits


# --------------------------------------------------------------------------- budgets


@pytest.mark.parametrize("bad", ["tv=0", "tv=1", "tv=abc", "tv=-0.5"])
def test_a_bad_tv_budget_says_the_range_x_may_take(bad):
    with pytest.raises(ValueError) as caught:
        budgets.check_tv_budget(bad)
    message = str(caught.value)
    assert "0 < X < 1" in message and "e.g. tv=0.01" in message and repr(bad) in message
    with pytest.raises(ValueError, match=r"tv=X \(0 < X < 1\), got 'huge'$"):
        budgets.check_name("huge")


# --------------------------------------------------------------------------- an unknown --mutant


def test_an_unknown_mutant_is_one_short_line_with_the_closest_ids(capsys):
    assert parse_args(["list"]).command == "list"  # the subcommand the line points to
    assert main(["report", "--mutant", "ratio/invertd"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and len(err) < 200, err
    assert "no mutant with id 'ratio/invertd'" in err and "closest: ratio/inverted" in err
    assert err.rstrip().endswith("specverify mutants list")


# --------------------------------------------------------------------------- where a subject raised


def _raises_here():
    raise ValueError("boom")


def _numpy_raises_here():
    return np.reshape(np.arange(3), (2, 2))


def _raising_kernel(draft_ids, draft_probs, target_probs, uniforms):
    return _raises_here()


@pytest.mark.parametrize(
    "noun, said", [("int", "an int"), ("ndarray", "an ndarray"), ("float", "a float"), ("list", "a list")]
)
def test_a_type_takes_a_or_an_by_its_first_letter(noun, said):
    assert with_article(noun) == said


def test_a_target_that_is_no_function_says_an_int(tmp_path):
    (tmp_path / "not_a_function.py").write_text("step = 3\n")
    with pytest.raises(ValueError, match="'step' is an int, not callable"):
        load_target(f"{tmp_path / 'not_a_function.py'}:step")


def test_a_token_of_the_wrong_type_says_an_ndarray():
    with pytest.raises(ContractBreach, match="returned an ndarray"):
        token_id(np.zeros(2), 4, "returned")


def test_a_raised_exception_says_its_file_line_and_function():
    line = _raises_here.__code__.co_firstlineno + 1
    with pytest.raises(ValueError) as caught:
        _raises_here()
    assert describe_exception(caught.value) == f"ValueError: boom (at test_messages.py:{line} in _raises_here)"
    with pytest.raises(ValueError) as caught:
        _numpy_raises_here()  # raised inside NumPy: placed at the subject's line that called it
    where = _numpy_raises_here.__code__.co_firstlineno + 1
    assert describe_exception(caught.value).endswith(f" (at test_messages.py:{where} in _numpy_raises_here)")
    assert describe_exception(ValueError("never raised")) == "ValueError: never raised"


def test_a_raising_kernels_finding_says_where_it_raised():
    result = kernel.run(_raising_kernel, "quick", 0, cases=[kc.every_draft_case()])
    line = _raises_here.__code__.co_firstlineno + 1
    assert result.exact is False
    assert f"raised ValueError: boom (at test_messages.py:{line} in _raises_here)" in result.findings[0].message


# --------------------------------------------------------------------------- progress


def _stub_subject(mutant_id, effect, budget, seed, timeout, *units):
    status = report.Status.PASSED if effect == "exact" else report.Status.KILLED
    return status, "", {"findings": []}, 0.01


def test_a_redirected_report_prints_plain_progress_on_stderr_and_only_the_report_on_stdout(monkeypatch, capsys):
    monkeypatch.setattr(report, "run_subject", _stub_subject)
    monkeypatch.setattr(mutant_progress, "PROGRESS_EVERY_S", 0.0)
    assert main(["report", "--mutant", "ratio/inverted", "--workers", "1"]) == 0
    out, err = capsys.readouterr()
    assert re.findall(r"^mutants: (\d)/3 done, \d+ s$", err, re.M) == ["1", "2", "3"], err
    assert "mutants:" not in out and out.splitlines()[-2].startswith("baseline passed")


def test_plain_progress_says_a_line_every_ten_seconds_and_a_last_one():
    now = [0.0]
    stream = io.StringIO()
    progress = mutant_progress.PlainProgress(4, stream=stream, clock=lambda: now[0])
    for t in (3.0, 11.0, 15.0):
        now[0] = t
        progress.advance()
    now[0] = 22.0
    progress.tick()
    now[0] = 23.0
    progress.advance()
    assert stream.getvalue().splitlines() == [
        "mutants: 2/4 done, 11 s",
        "mutants: 3/4 done, 22 s",
        "mutants: 4/4 done, 23 s",
    ]
    quiet = io.StringIO()
    short = mutant_progress.PlainProgress(1, stream=quiet, clock=lambda: 0.0)
    short.advance()
    assert quiet.getvalue() == ""  # a report done within the first ten seconds says nothing


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert mutant_progress.progress_mode_for(Terminal()) == "bar"
    assert mutant_progress.progress_mode_for(io.StringIO()) == "lines"
