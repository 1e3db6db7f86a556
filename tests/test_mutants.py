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

TIMEOUT = 600.0
"""A hang guard, as the report's default --timeout: the slowest controls (the generator kernel's
statistics over the engine-scale sweeps, a loop's engine-scale batches) take a few minutes on 2
cores shared with other work."""


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
    """The report's forced fail stops at its first finding, the exact law's; where the enumerator
    cannot follow (one path allowed), the chi-square flags it too."""
    from specverify import interfaces
    from specverify.mutants.report import emit_drafts

    status, _, result = outcome(SANITY_ID, "biased")
    assert status == "killed" and "exact-tv" in {f["check"] for f in result["findings"]}
    sampled = interfaces.get("round").run(emit_drafts, "standard", 0, stop_on_first=True, max_paths=1)
    assert "chi-square" in {f.check for f in sampled.findings}


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
    elif result["rounding"].get("rounding_cases"):  # a float32 / bfloat16 control: exact at its rounding
        assert result["rounding"]["precision"] in ("float32", "bfloat16") and not result["findings"]
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


def table_rows(ids):
    from specverify.mutants.mutant_verdict import Row

    return [
        Row(i, "biased", "killed", "exact,chi2,degenerate-residual,tokens", 0.25, None, None, 1.0, "", "") for i in ids
    ]


def test_the_human_table_never_wraps_an_id():
    """``grep ID`` on a redirected report finds every id whole, however narrow the table."""
    from specverify.mutants import ALL
    from specverify.mutants.mutant_table import table

    ids = sorted((m.id for m in ALL), key=len)[-6:]  # the longest ids of the catalogue
    for width in (40, 80, 100):
        lines = table(table_rows(ids), width).splitlines()
        assert all(sum(i in line for line in lines) == 1 for i in ids), (width, lines)


def test_the_timing_line_says_judging_is_summed_over_the_workers():
    from specverify.mutants.mutant_table import render, timing_line

    rows = table_rows([BASELINE_ID, SANITY_ID])  # 1 s each
    assert timing_line(rows, 2, 1.2) == "1 s wall time, 2 s of judging summed over 2 worker processes"
    assert timing_line(rows) == "2 s of judging in 1 process"
    assert render(rows, "table", 0, "quick", timing_line(rows, 2, 1.2)).splitlines()[-1] == timing_line(rows, 2, 1.2)


def test_the_report_workers_leave_ctrl_c_to_the_parent():
    """An idle pool worker that got SIGINT would print a ``Process ForkProcess-N:`` traceback."""
    import signal

    from specverify.mutants.report import worker_pool

    with worker_pool(2) as pool:
        assert pool.submit(signal.getsignal, signal.SIGINT).result(timeout=60) == signal.SIG_IGN


def test_ctrl_c_on_a_terminal_stops_the_report_with_one_line():
    """Ctrl-C on a terminal reaches the whole process group (parent and pool workers): the parent
    prints one line and exits 130; no worker prints a ``Process ForkProcess-N:`` traceback."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    if not children.exists():
        pytest.skip("needs /proc/PID/task/PID/children to see the report's workers")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "specverify.mutants", "report", "--workers", "2", "--seed", "31337"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    own = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(own.read_text().split()) < 2:  # the 2 pool workers
        time.sleep(0.2)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err, err
