"""The experiments (specverify.experiments) and the benchmark (specverify.bench) on small settings.

Each experiment runs into a tmp dir and must write a real PNG and CSVs whose numbers are right
where they can be checked exactly (the handout's section 3 table, stats.py's documented power
figures, closed-form round lengths) or with a stated false-fail rate (fixed seeds throughout).
The benchmark asserts only its fields and the sanity ratio batched / loop > 1: absolute timings
on shared CI machines vary by 2x or more between runs, so any tighter timing threshold would
test the machine, not the code (the measured ratio is ~300x, so > 1 holds under any load).
"""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from specverify.bench import suite as bench
from specverify.experiments import (
    greedy_drafter,
    main,
    noise_vs_bias,
    non_iid,
    power,
    run,
    speedup_surface,
    temperature,
)
from specverify.experiments.analytic import temperature_pairs, toy_target
from specverify.experiments.output import PNG_SIGNATURE
from specverify.experiments.sampled import expected_tv, run_sizes, stationary
from specverify.laws import theory
from specverify.laws.chains import toy_chain

# The handout's section 3 table (c = 0.05): k -> (tokens 0.6, speedup 0.6, tokens 0.8, speedup 0.8)
HANDOUT_TABLE = {
    1: (1.60, 1.52, 1.80, 1.71),
    2: (1.96, 1.78, 2.44, 2.22),
    3: (2.18, 1.89, 2.95, 2.57),
    4: (2.31, 1.92, 3.36, 2.80),
    5: (2.38, 1.91, 3.69, 2.95),
    6: (2.43, 1.87, 3.95, 3.04),
    7: (2.46, 1.82, 4.16, 3.08),
    8: (2.47, 1.77, 4.33, 3.09),
    9: (2.48, 1.71, 4.46, 3.08),
    10: (2.49, 1.66, 4.57, 3.05),
}


def assert_outputs(output, n_csv: int = 1) -> list[pl.DataFrame]:
    """A real PNG over 1 KB, a markdown page that embeds it, and readable CSVs."""
    data = output.png.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert 1024 < len(data) < 150_000
    md = output.markdown.read_text()
    assert f"]({output.png.name})" in md and "|" in md
    assert len(output.csv) == n_csv
    frames = [pl.read_csv(path) for path in output.csv]
    assert all(frame.height > 0 for frame in frames)
    return frames


# ------------------------------------------------------------------------- noise vs bias


def test_expected_tv_is_exact():
    """E[TV] of one draw is sum_x r(x) (1 - t(x)) when r = t; at n = 30,000 it matches a
    seeded Monte Carlo of 20,000 multinomial draws within 6 standard errors (false-fail rate
    ~2e-9 under the CLT). The handout quotes a simulated mean of 0.0056; the exact value is
    0.00627."""
    t = toy_target()
    probs = np.array(list(t.values()))
    assert expected_tv(1, t, t) == pytest.approx(float(np.sum(probs * (1 - probs))), rel=1e-12)
    draws = np.random.default_rng(0).multinomial(30_000, probs, size=20_000) / 30_000
    tvs = 0.5 * np.abs(draws - probs).sum(axis=1)
    se = tvs.std(ddof=1) / math.sqrt(len(tvs))
    assert abs(expected_tv(30_000, t, t) - tvs.mean()) < 6 * se
    assert expected_tv(30_000, t, t) == pytest.approx(0.00627, abs=1e-5)


def test_noise_vs_bias_exact_step_falls_below_every_bias(tmp_path):
    """At n = 4,000 the exact step's TV is ~0.017 per replicate; the mean of 4 reaches 0.059
    (the smallest bias here) only if one replicate does, w.p. <= 4 (2^9 - 2) exp(-2 * 4000 *
    0.059^2) ~ 1e-9 by the Bretagnolle-Huber-Carol bound (stats.tv_threshold); fixed seed."""
    ids = ("rejection/resample-from-p", "draft/temperature-draft-only")
    (table,) = assert_outputs(noise_vs_bias(tmp_path, n_max=4000, replicates=4, mutant_ids=ids))
    last = table.filter(pl.col("n") == 4000)
    ref = last.filter(pl.col("kind") == "exact")
    bugs = last.filter(pl.col("kind") == "biased")
    assert ref.height == 1 and bugs["sampler"].to_list() == list(ids)
    assert ref["exact_tv"][0] < 1e-12
    assert bugs["exact_tv"].to_list() == pytest.approx([0.154, 0.0593], abs=1e-3)
    assert ref["sampled_tv"][0] < bugs["exact_tv"].min()
    assert table["n"].unique().sort().to_list() == [1000, 2000, 4000]


def test_run_sizes_rejects_tiny_n():
    assert run_sizes(100_000)[-1] == 100_000
    with pytest.raises(ValueError, match="n_max"):
        run_sizes(5)


def test_greedy_drafter_control_exact_bug_biased(tmp_path):
    """One-hot q: exact TV ~1e-17; softmax q: 0.216. At n = 2,000 the control's sampled TV
    exceeds 0.1 w.p. <= 510 exp(-2 * 2000 * 0.1^2) ~ 2e-15 (BHC), and the bug's falls below
    0.1 only if TV(empirical, its own law) >= 0.116, equally unlikely; fixed seed."""
    (table,) = assert_outputs(greedy_drafter(tmp_path, n_max=2000))
    last = table.filter(pl.col("n") == 2000)
    control = last.filter(pl.col("kind") == "exact")
    bug = last.filter(pl.col("kind") == "biased")
    assert control["exact_tv"][0] < 1e-12
    assert bug["exact_tv"][0] == pytest.approx(0.2163, abs=1e-3)
    assert control["sampled_tv"][0] < 0.1 < bug["sampled_tv"][0]


# ------------------------------------------------------------------------- non-i.i.d.


def test_non_iid_matches_closed_forms(tmp_path):
    """k = 1 from context c emits 1 + alpha(c) tokens on average, exactly; the formula columns
    are theory.expected_tokens at the stated alphas; the measured long decode (2,000 rounds)
    lies within 6 batch-means standard errors of the exact long-run value (t with 19 df:
    false-fail rate ~1e-5; fixed seed)."""
    (table,) = assert_outputs(non_iid(tmp_path, ks=(1, 2), n_rounds=2000))
    model = toy_chain()
    pi = stationary(np.asarray(model.p_table))
    assert np.allclose(pi @ model.p_table, pi) and pi.sum() == pytest.approx(1.0)
    alphas = model.alphas()
    row = table.row(0, named=True)
    assert row["exact_from_0"] == pytest.approx(1 + alphas[0], abs=1e-12)
    assert row["exact_stationary_start"] == pytest.approx(1 + pi @ alphas, abs=1e-12)
    assert row["alpha_mean"] == pytest.approx(alphas.mean())
    for r in table.iter_rows(named=True):
        assert r["formula_alpha_stationary"] == pytest.approx(theory.expected_tokens(pi @ alphas, r["k"]))
        assert abs(r["measured"] - r["exact_long_run"]) < 6 * r["measured_se"]


# ------------------------------------------------------------------------- analytic


def test_temperature_limits(tmp_path):
    """alpha in [0, 1]; -> 1 at T = 1e3 (both near uniform); at T = 1e-4 both are one-hot, so
    alpha is 1 where the argmaxes agree and 0 where they differ."""
    temps = np.logspace(-4, 3, 15)
    (table,) = assert_outputs(temperature(tmp_path, temperatures=temps))
    assert table["alpha"].is_between(0.0, 1.0).all()
    assert table.filter(pl.col("temperature") == temps[-1])["alpha"].min() > 0.99
    cold = table.filter(pl.col("temperature") == temps[0])
    assert sorted(cold["argmax_agree"].to_list()) == [False, True]
    for r in cold.iter_rows(named=True):
        assert r["alpha"] == pytest.approx(1.0 if r["argmax_agree"] else 0.0, abs=1e-6)
    assert len(temperature_pairs(32, 0.8, 0)) == 2
    with pytest.raises(ValueError, match="temperatures"):
        temperature(tmp_path, temperatures=[1.0, -1.0])


def test_speedup_surface_reproduces_handout_table(tmp_path):
    handout, best = assert_outputs(speedup_surface(tmp_path), n_csv=2)
    got = {r["k"]: r for r in handout.iter_rows(named=True)}
    for k, want in HANDOUT_TABLE.items():
        row = got[k]
        values = (
            row["tokens_per_pass_alpha_0.6"],
            row["speedup_alpha_0.6"],
            row["tokens_per_pass_alpha_0.8"],
            row["speedup_alpha_0.8"],
        )
        assert tuple(round(v, 2) for v in values) == want, k
    at_032 = {r["alpha"]: r for r in best.filter(pl.col("c") == 0.32).iter_rows(named=True)}
    assert (at_032[0.8]["best_k"], round(at_032[0.8]["speedup_at_best_k"], 2)) == (3, 1.51)
    assert (at_032[0.6]["best_k"], round(at_032[0.6]["speedup_at_best_k"], 2)) == (1, 1.21)


def test_power_reproduces_stats_docstring(tmp_path):
    """At false-pass 1e-6, stats.py documents: handout test 0.0302, chi-square at 1.5e-5
    0.0303, at 1e-6 0.0319, TV bound at 1e-6 0.0335; TV 0.17 needs 1,181 / 1,162 runs."""
    needed, at_n = assert_outputs(power(tmp_path, tvs=(0.03, 0.17), false_pass_rate=1e-6), 2)
    d = {(r["test"].split(" ")[0], r["false_fail_rate"]): r["min_detectable_tv"] for r in at_n.iter_rows(named=True)}
    assert d[("handout:", 1.5e-5)] == pytest.approx(0.0302, abs=5e-5)
    assert d[("chi-square", 1.5e-5)] == pytest.approx(0.0303, abs=5e-5)
    assert d[("chi-square", 1e-6)] == pytest.approx(0.0319, abs=5e-5)
    assert d[("TV", 1e-6)] == pytest.approx(0.0335, abs=5e-5)
    row = needed.filter(pl.col("tv") == 0.17).row(0, named=True)
    assert (row["chi_square_at_1e-6"], row["tv_bound_at_1e-6"]) == (1181, 1162)
    assert needed["chi_square_at_1e-6"].to_list()[0] > row["chi_square_at_1e-6"]


def test_cli_and_bad_input(tmp_path, capsys):
    assert main(["speedup-surface", "--out", str(tmp_path)]) == 0
    assert "speedup-surface.png" in capsys.readouterr().out
    with pytest.raises(ValueError, match="name"):
        run("no-such-experiment", tmp_path)
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("x")
    with pytest.raises(ValueError, match="out_dir"):
        speedup_surface(not_a_dir)


# ------------------------------------------------------------------------- benchmark


def test_bench_quick_fields(tmp_path, capsys):
    report = tmp_path / "BENCHMARKS.md"
    assert bench.main(["--quick", "--json", "--markdown", str(report)]) == 0
    result = json.loads(capsys.readouterr().out)
    for field in ("machine", "batched_vs_loop_speedup", "exact_enumeration", "check", "power"):
        assert field in result
    assert result["batched_vs_loop_speedup"] > 1  # sanity only: see the module docstring
    assert result["machine"]["nproc"] >= 1
    rows = result["exact_enumeration"]
    assert rows and all(r["status"] == "ok" and r["exact_tv"] < 1e-12 for r in rows)
    assert all(r["paths"] >= 1 and r["outcomes"] == r["vocab"] ** r["window"] for r in rows)
    verdicts = {r["sampler"]: r["exact"] for r in result["check"]}
    assert verdicts == {
        "reference/speculative_step": True,
        "rejection/resample-from-p": False,
        "control/product-form-acceptance": True,
    }
    assert any(r["test"].startswith("handout") for r in result["power"])
    text = report.read_text()
    assert text.startswith("# Benchmarks") and "python -m specverify.bench" in text
    with pytest.raises(ValueError, match="budget"):
        bench.run_bench(quick=True, budget="huge")


def test_time_enumeration_caps():
    row = bench.time_enumeration(4, 5, 3, cap_s=0.05)
    assert row["status"].startswith("capped") and row["exact_tv"] is None
    assert row["seconds"] < 5.0  # the 0.05 s cap fired (SIGALRM), not the 12 s enumeration


def test_hot_path_bench_measures_every_piece_and_refuses_bad_arguments(capsys, tmp_path):
    """``bench.hot_path.measure`` times each named piece (a positive figure each; the figures
    themselves are the machine's, compared only side by side); usage errors are one line, exit 2."""
    from specverify.bench import hot_path as bench_hot_path

    times = bench_hot_path.measure(seconds=0.01)
    assert list(times) == list(bench_hot_path.PIECES) and all(t > 0 for t in times.values())
    assert bench_hot_path.main(["--repeats", "0"]) == 2
    assert bench_hot_path.main(["--against", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--repeats" in err[0] and "no specverify package" in err[1]
