"""One test per catalogued mutant: it fails if the detector battery stops killing the mutant
(or starts accusing a negative control). Each runs the same configuration as
``python -m specverify.mutants report`` (fixed seed 0), through report.run_subject.

False-fail rate: the statistical detector's budget is 1e-6 per subject (Bonferroni over cases and
looks); exact enumeration has no sampling noise; with the fixed seed each test is deterministic.
"""

import pytest

from specverify.mutants import ALL, CONTROLS, MUTANTS
from specverify.mutants.command import main
from specverify.mutants.report import BASELINE_ID, SANITY_ID, judge, run_subject

TIMEOUT = 120.0


def outcome(mutant_id, effect):
    status, detail, result, _ = run_subject(mutant_id, effect, "standard", 0, TIMEOUT)
    return status, detail, result


def test_catalogue_is_large_enough():
    assert len(MUTANTS) >= 24 and len(CONTROLS) >= 4
    assert len({m.id for m in ALL}) == len(ALL)


def test_baseline_passes_every_detector():
    status, detail, result = outcome(BASELINE_ID, "exact")
    assert status == "passed", detail
    assert result["findings"] == [] and result["exact_tv_max"] < 1e-12


def test_forced_fail_is_detected_by_exact_and_statistics():
    status, _, result = outcome(SANITY_ID, "biased")
    checks = {f["check"] for f in result["findings"]}
    assert status == "killed" and {"exact-tv", "chi-square"} <= checks


@pytest.mark.parametrize("mutant", [m for m in ALL if m.effect != "exact"], ids=lambda m: m.id)
def test_mutant_is_killed(mutant):
    status, detail, result = outcome(mutant.id, mutant.effect)
    assert status == "killed", f"{mutant.id} {status}: {detail}"
    kinds = {f["kind"] for f in result["findings"]}
    if mutant.effect == "contract":
        assert "contract" in kinds
    elif mutant.effect == "fewer-tokens":
        assert kinds == {"efficiency"}  # exact in distribution, flagged only on tokens per round
    elif mutant.effect == "edge":
        assert kinds == {"edge"}  # exact in law: flagged only where the law puts no weight
    else:
        assert "distribution" in kinds


@pytest.mark.parametrize("control", [m for m in ALL if m.effect == "exact"], ids=lambda m: m.id)
def test_control_is_not_accused(control):
    status, detail, result = outcome(control.id, control.effect)
    assert status == "passed", f"{control.id} accused: {detail}"
    if control.interface == "kernel":  # float32 thresholds: within the battery's stated tolerance
        assert result["exact_tv_max"] is None or result["exact_tv_max"] < 1e-5
    else:
        assert result["exact_tv_max"] < 1e-12


def test_judge_rules():
    from specverify.battery.core import BatteryResult, Finding

    clean, biased, slow = BatteryResult(), BatteryResult(), BatteryResult()
    biased.findings.append(Finding("exact-tv", "distribution", "TV 0.1"))
    slow.findings.append(Finding("tokens-per-round", "efficiency", "fewer tokens"))
    assert judge("exact", clean)[0] == "passed" and judge("exact", biased)[0] == "accused"
    assert judge("biased", clean)[0] == "survived" and judge("biased", biased)[0] == "killed"
    assert judge("fewer-tokens", slow)[0] == "killed"
    assert judge("fewer-tokens", biased)[0] == "accused"


def test_report_cli_one_mutant_json_and_atomic_out(tmp_path, capsys):
    import json

    out = tmp_path / "r.json"
    rc = main(["report", "--mutant", "ratio/inverted", "--format", "json", "--out", str(out), "--workers", "1"])
    printed = json.loads(capsys.readouterr().out)
    assert rc == 0 and printed == json.loads(out.read_text())
    assert [r["id"] for r in printed["rows"]] == [BASELINE_ID, SANITY_ID, "ratio/inverted"]
    assert printed["rows"][2]["status"] == "killed" and printed["ok"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind


def test_report_cli_unknown_mutant_is_a_usage_error(capsys):
    assert main(["report", "--mutant", "no/such"]) == 2
    assert "no mutant with id 'no/such'" in capsys.readouterr().err
