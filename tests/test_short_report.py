"""The default ``check`` report is short and ends with the smallest counterexample; ``--verbose``
is the whole listing; the JSON keeps everything.

The reference loop's EXACT report is pinned at the quick budget: its length hardly depends on
the budget (the budget's plan wraps to six lines at quick and at standard, the rest is one line
each for the reach, the cases, the power and the checks counted; measured: 15 lines at quick,
16 at standard, against 170 and 249 before the short default). A sampler that does not draw from
its rng is INCONCLUSIVE by design (docs/CHECK.md's verdict table), and the report says why in
one line.

Statistical false-fail rate: each report here is a fixed seed's run; the reference loop's
verdict is the battery's (1e-6); the mutant is found by enumeration (exact, no chance)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from specverify.surface.report_text import RNG_REASON, human, one_line

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

GLOBAL_RNG = """
import numpy as np


def speculative_step(p_fn, q_fn, prefix, k, rng):
    # draws from NumPy's global RNG, not from the rng it is given: exact, but not replayable
    ctx, drafts = tuple(prefix), []
    for _ in range(k):
        q = np.asarray(q_fn(ctx), dtype=float)
        drafts.append(int(np.random.choice(len(q), p=q / q.sum())))
        ctx += (drafts[-1],)
    ctx, out = tuple(prefix), []
    for t in drafts:
        p, q = np.asarray(p_fn(ctx), dtype=float), np.asarray(q_fn(ctx), dtype=float)
        if np.random.random() < min(1.0, p[t] / q[t]):
            out.append(t)
            ctx += (t,)
            continue
        r = np.maximum(p - q, 0.0)
        out.append(int(np.random.choice(len(r), p=r / r.sum())))
        return out
    p = np.asarray(p_fn(ctx), dtype=float)
    return out + [int(np.random.choice(len(p), p=p / p.sum()))]
"""


def cli(*args, cwd=None):
    proc = subprocess.run(
        [sys.executable, "-m", "specverify", *args], capture_output=True, text=True, timeout=600, env=ENV, cwd=cwd
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_the_reference_loops_exact_report_is_at_most_30_lines():
    code, out, err = cli("check", "specverify.samplers.reference_loop:generate", "--budget", "quick")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("specverify.samplers.reference_loop:generate: EXACT"), (out, err)
    assert len(lines) <= 30, out
    text = " ".join(out.split())
    for part in ("budget quick:", "reach:", "power:", "0 findings", "checks run:", "--verbose"):
        assert part in text, (part, out)


def test_a_not_exact_report_ends_with_the_smallest_counterexample_and_verbose_has_all(tmp_path):
    target = "specverify.mutants.catalogue:no_verification"
    code, out, _ = cli("check", target, "--budget", "quick", "--fail-fast")
    code_v, verbose, _ = cli("check", target, "--budget", "quick", "--fail-fast", "--verbose")
    code_j, as_json, _ = cli("check", target, "--budget", "quick", "--fail-fast", "--json")
    assert code == code_v == code_j == 1
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  smallest model"))
    assert all(line.startswith("    ") for line in lines[start + 1 :]), out  # nothing after it but its rows
    findings = [line for line in lines if line.startswith("  [")]
    report = json.loads(as_json)
    assert len(findings) == len(report["findings"]) + len(report["shortfalls"]) >= 1  # one line each
    assert "ran:" not in lines and "ran:" in verbose.splitlines()
    assert all(f"  {line}" in verbose or line[:40] in verbose for line in report["ran"])
    assert verbose.splitlines()[-1] == lines[-1]  # the counterexample last there too


def test_a_finding_is_cut_to_one_line_and_whole_in_verbose():
    finding = {"check": "contract", "kind": "contract", "case": "toy", "message": "word " * 60, "evidence": {}}
    report = {
        "target": "pkg.mod:step",
        "exact": False,
        "efficient": None,
        "seconds": 1.0,
        "budget": "quick",
        "coverage": "a plan",
        "findings": [finding],
        "shortfalls": [],
        "ran": ["contract: breached"],
        "output": "",
        "counterexample": None,
    }
    short = [line for line in human(report).splitlines() if line.startswith("  [")]
    assert len(short) == 1 and short[0].endswith("...") and len(short[0]) <= 100
    assert "word " * 30 in " ".join(human(report, verbose=True).split()) + " "
    assert one_line("short", 100) == "short"


def test_a_sampler_on_the_global_rng_is_inconclusive_and_the_report_says_why(tmp_path):
    (tmp_path / "global_rng.py").write_text(GLOBAL_RNG)
    code, out, err = cli(
        "check", "global_rng.py:speculative_step", "--budget", "quick", "--time-limit", "3", cwd=tmp_path
    )
    assert code == 3 and "INCONCLUSIVE" in out.splitlines()[0], (out, err)
    assert "[contract] rng" in out
    assert RNG_REASON.strip() in " ".join(out.split())
