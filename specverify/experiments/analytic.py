"""The experiments that need no sampling: alpha against temperature, the speedup surface, and
the statistical power of the suite against the handout's fixed test.

- temperature: alpha(T) = sum_x min(p_T(x), q_T(x)) with p_T, q_T = softmax(logits / T)
  (theory.acceptance_rate); Leviathan et al. 2023 (arXiv 2211.17192), section 3.
- speedup-surface: theory.expected_tokens / expected_speedup / best_k / break_even_cost (the
  handout's section 3; Leviathan et al. eq. 1 and Theorem 3.8).
- power: stats.min_num_samples_chi_square / min_num_samples_tv against the handout's test
  (30,000 runs, TV < 0.015), whose false-fail rate 1.5e-5 was measured in stats.py's docstring
  (2 * 10^7 exact multinomial draws). What the handout test detects follows the argument of
  ``stats.min_discrepancy_tv``: a bias d fails it w.p. >= 1 - fpr once
  d >= 0.015 + sqrt(ln(1/fpr) / (2n)), the Hoeffding shortfall that stats computes as
  min_discrepancy_tv - tv_threshold.
"""

from __future__ import annotations

import math
import time

import numpy as np
import polars as pl
from scipy.special import softmax

from .. import mutants
from ..battery.core import DEFAULT_FALSE_FAIL_RATE
from ..interfaces.round import cases as round_cases
from ..interfaces.round import tasks as round_tasks
from ..laws import exact, stats, theory
from ..laws.chains import toy_chain
from .output import Table, figure, write_outputs

# ------------------------------------------------------------------------------ temperature


def correlated_logits(rng, vocab: int, rho: float, scale: float = 2.0):
    """Two logit vectors with correlation rho: z2 = rho z1 + sqrt(1 - rho^2) noise."""
    z1 = rng.standard_normal(vocab)
    z2 = rho * z1 + math.sqrt(1 - rho**2) * rng.standard_normal(vocab)
    return scale * z1, scale * z2


def alpha_at_temperature(z_p, z_q, temperature: float) -> float:
    return theory.acceptance_rate(softmax(z_p / temperature), softmax(z_q / temperature))


def temperature_pairs(vocab: int, rho: float, seed: int):
    """The first pair drawn with this seed, and the first later pair whose argmaxes disagree
    (or agree, if the first one disagrees), so that both T -> 0 limits are shown."""
    rng = np.random.default_rng(seed)
    first = correlated_logits(rng, vocab, rho)
    agrees = np.argmax(first[0]) == np.argmax(first[1])
    for _ in range(10_000):
        other = correlated_logits(rng, vocab, rho)
        if (np.argmax(other[0]) == np.argmax(other[1])) != agrees:
            return [first, other]
    return [first]


def temperature(out_dir, *, vocab: int = 32, rho: float = 0.8, seed: int = 0, temperatures=None):
    """alpha against T for two correlated random logit pairs (handout, CPU experiment 3)."""
    t0 = time.perf_counter()
    if temperatures is None:
        temperatures = np.logspace(-3, 3, 121)
    temps = np.asarray(temperatures, dtype=float)
    if temps.ndim != 1 or len(temps) < 2 or np.any(temps <= 0):
        raise ValueError("temperatures: need at least 2 positive temperatures")
    rows = []
    fig, ax = figure(size=(7.5, 4.8))
    for i, (z_p, z_q) in enumerate(temperature_pairs(vocab, rho, seed)):
        agree = bool(np.argmax(z_p) == np.argmax(z_q))
        label = f"pair {i + 1}: argmaxes {'agree' if agree else 'differ'}"
        alphas = [alpha_at_temperature(z_p, z_q, t) for t in temps]
        rows += [
            {"pair": i + 1, "argmax_agree": agree, "temperature": float(t), "alpha": a} for t, a in zip(temps, alphas)
        ]
        ax.plot(temps, alphas, lw=2, label=f"{label} (alpha at T=1: {alpha_at_temperature(z_p, z_q, 1.0):.3f})")
    ax.axvline(1.0, color="0.5", ls=":", lw=1)
    ax.set(
        xscale="log",
        ylim=(-0.02, 1.02),
        xlabel="temperature T (applied to both p and q)",
        ylabel="alpha = sum min(p_T, q_T)",
        title=f"Acceptance rate against temperature (V = {vocab}, logit correlation {rho})",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    caption = (
        f"p = softmax(z_p / T) and q = softmax(z_q / T) for logit vectors over V = {vocab} "
        f"tokens with correlation {rho} (scale 2, numpy seed {seed}; pair 2 is the first later "
        "draw whose argmax agreement differs from pair 1's). **T -> 0**: both become one-hot at "
        "their argmax, so alpha = sum min(p, q) -> 1 if the argmaxes agree and -> 0 if they "
        "differ (greedy drafting then accepts exactly when the draft is the target's argmax). "
        "**T -> infinity**: both flatten to the uniform distribution over V tokens, whatever "
        "the logits, so alpha -> 1 (TV(p, q) = O(1/T)). In between, alpha follows how similar "
        "the two models' rankings are; the same temperature must be applied to both (handout §4)."
    )
    frame = pl.DataFrame(rows)
    decades = frame.filter(  # the markdown shows whole powers of ten; the CSV every T
        (pl.col("temperature").log10() - pl.col("temperature").log10().round()).abs() < 1e-9
    )
    shown = decades if decades.height else None
    return write_outputs(
        out_dir,
        "temperature",
        "Acceptance rate against temperature",
        caption,
        fig,
        [Table(frame, shown=shown)],
        time.perf_counter() - t0,
    )


# ------------------------------------------------------------------------- speedup surface

HANDOUT_ALPHAS, HANDOUT_COST = (0.6, 0.8), 0.05


def speedup_table(alphas=HANDOUT_ALPHAS, cost_ratio: float = HANDOUT_COST, ks=range(1, 11)) -> pl.DataFrame:
    """The handout's section 3 table: tokens per pass and speedup per k for each alpha."""
    rows = []
    for k in ks:
        row = {"k": k}
        for a in alphas:
            row[f"tokens_per_pass_alpha_{a}"] = theory.expected_tokens(a, k)
            row[f"speedup_alpha_{a}"] = theory.expected_speedup(a, k, cost_ratio)
        rows.append(row)
    return pl.DataFrame(rows)


def best_k_table(alphas, costs, max_k: int = 32) -> pl.DataFrame:
    rows = []
    for c in costs:
        for a in alphas:
            k = theory.best_k(a, c, max_k=max_k)
            s = theory.expected_speedup(a, k, c)
            rows.append(
                {
                    "alpha": a,
                    "c": c,
                    "best_k": k,
                    "speedup_at_best_k": s,
                    "break_even_c_at_best_k": theory.break_even_cost(a, k),
                    "pays": s > 1,
                }
            )
    return pl.DataFrame(rows)


def speedup_surface(out_dir, *, alphas=(0.5, 0.6, 0.7, 0.8, 0.9), costs=(0.05, 0.2, 0.32), max_k: int = 16):
    """The handout's table regenerated, and speedup against k with best k and break-even."""
    t0 = time.perf_counter()
    ks = np.arange(1, max_k + 1)
    fig, axes = figure(ncols=len(costs), size=(4.2 * len(costs), 4.6), sharey=True)
    axes = np.atleast_1d(axes)
    colors = ["tab:purple", "tab:blue", "tab:green", "tab:orange", "tab:red", "tab:brown"]
    for ax, c in zip(axes, costs):
        for a, color in zip(alphas, colors * 3):
            s = [theory.expected_speedup(a, int(k), c) for k in ks]
            kb = theory.best_k(a, c, max_k=max_k)
            ax.plot(ks, s, "-", color=color, lw=1.8, label=f"alpha = {a}")
            ax.plot(kb, theory.expected_speedup(a, kb, c), "*", color=color, ms=13, mec="black")
        ax.axhline(1.0, color="black", ls="--", lw=1)
        ax.text(ks[-1], 1.0, "break-even ", ha="right", va="bottom", fontsize=8)
        ax.set(xlabel="k (drafted tokens per round)", title=f"c = {c}")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("modelled speedup  E[tokens] / (k c + 1)")
    axes[-1].legend(fontsize=8, loc="upper right", title="star: best k", title_fontsize=8)
    fig.suptitle("Speedup against k (i.i.d. acceptance, free verification)")
    handout = speedup_table()
    best = best_k_table(alphas, costs, max_k=32)
    caption = (
        "Tokens per target pass (1 - alpha^(k+1)) / (1 - alpha) and speedup "
        "E[tokens] / (k c + 1) from specverify.laws.theory. The first table regenerates the "
        "handout's section 3 table (c = 0.05). In the plot a star marks `theory.best_k` on "
        f"k = 1..{max_k}, and the dashed line is the break-even speedup 1: below it speculation "
        "is slower than the target alone; equivalently c must stay below "
        "`theory.break_even_cost(alpha, k)` = (E[tokens] - 1) / k. The second table gives the "
        "best k over 1..32 for each alpha and c (c = 0.32 is the scale-up pair's parameter "
        "ratio: best k = 3 at 1.51x for alpha 0.8, k = 1 at 1.21x for alpha 0.6)."
    )
    tables = [
        Table(handout, float_format="{:.2f}", title="Handout section 3 table (c = 0.05)"),
        Table(best, suffix="best-k", float_format="{:.3g}", title="Best k per alpha and c"),
    ]
    return write_outputs(out_dir, "speedup-surface", "Speedup surface", caption, fig, tables, time.perf_counter() - t0)


# ------------------------------------------------------------------------------------ power

HANDOUT_N, HANDOUT_TV_THRESHOLD = 30_000, 0.015
HANDOUT_FALSE_FAIL_RATE = 1.5e-5  # measured in specverify/stats.py's docstring (2e7 draws)
SUITE_FALSE_FAIL_RATE = DEFAULT_FALSE_FAIL_RATE
FALSE_PASS_RATE = 0.01
POWER_TVS = (0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.17, 0.3, 0.5)
POWER_MUTANTS = (
    "rejection/resample-from-p",
    "draft/temperature-draft-only",
    "uniform/shared-across-positions",
    "draft/greedy-softmax-q",
)


def toy_target() -> dict:
    """The handout test's 9-cell target p(a | 0) p(b | a) on the toy chain."""
    return exact.sequence_distribution(toy_chain().p_fn, (0,), 2)


def handout_detectable_tv(
    n: int = HANDOUT_N, false_pass_rate: float = FALSE_PASS_RATE, threshold: float = HANDOUT_TV_THRESHOLD
) -> float:
    """Smallest TV the fixed 'TV < threshold' test fails w.p. >= 1 - false_pass_rate at n."""
    cells = len(toy_target())
    shortfall = stats.min_discrepancy_tv(n, cells, SUITE_FALSE_FAIL_RATE, false_pass_rate) - stats.tv_threshold(
        n, cells, SUITE_FALSE_FAIL_RATE
    )
    return threshold + shortfall


def detectable_tvs(n: int = HANDOUT_N, false_pass_rate: float = FALSE_PASS_RATE) -> pl.DataFrame:
    """Smallest TV each test detects at n runs, at its false-fail rate (one row per test)."""
    target, cells = toy_target(), len(toy_target())
    rows = [
        (
            "handout: TV < 0.015 (threshold calibrated for this p)",
            HANDOUT_FALSE_FAIL_RATE,
            handout_detectable_tv(n, false_pass_rate),
        )
    ]
    for rate in (HANDOUT_FALSE_FAIL_RATE, SUITE_FALSE_FAIL_RATE):
        rows.append(
            (
                "chi-square (stats.chi_square_test)",
                rate,
                stats.min_discrepancy_chi_square(n, target, rate, false_pass_rate),
            )
        )
        rows.append(
            (
                "TV bound, distribution-free (stats.tv_bound_test)",
                rate,
                stats.min_discrepancy_tv(n, cells, rate, false_pass_rate),
            )
        )
    return pl.DataFrame(
        [
            {"test": t, "n": n, "false_fail_rate": r, "false_pass_rate": false_pass_rate, "min_detectable_tv": d}
            for t, r, d in rows
        ]
    )


def samples_needed_table(tvs=POWER_TVS, false_pass_rate: float = FALSE_PASS_RATE) -> pl.DataFrame:
    target, cells = toy_target(), len(toy_target())
    return pl.DataFrame(
        [
            {
                "tv": d,
                "chi_square_at_1e-6": stats.min_num_samples_chi_square(
                    d, target, SUITE_FALSE_FAIL_RATE, false_pass_rate
                ),
                "tv_bound_at_1e-6": stats.min_num_samples_tv(d, cells, SUITE_FALSE_FAIL_RATE, false_pass_rate),
                "chi_square_at_1.5e-5": stats.min_num_samples_chi_square(
                    d, target, HANDOUT_FALSE_FAIL_RATE, false_pass_rate
                ),
            }
            for d in tvs
        ]
    )


def mutant_biases(ids=POWER_MUTANTS) -> dict[str, float]:
    case = round_cases.reference_case()
    out = {}
    for mid in ids:
        got, want = round_tasks.exact_case(mutants.get(mid).fn, case, 100_000)
        out[mid] = exact.total_variation(got, want)
    return out


def power(out_dir, *, tvs=POWER_TVS, false_pass_rate: float = FALSE_PASS_RATE):
    """Samples needed to detect a bias of a given TV, against the handout's fixed test."""
    t0 = time.perf_counter()
    needed = samples_needed_table(tvs, false_pass_rate)
    at_n = detectable_tvs(HANDOUT_N, false_pass_rate)
    fig, ax = figure(size=(7.5, 5))
    styles = [
        ("chi_square_at_1e-6", "chi-square, false-fail 1e-6 (the suite)", "tab:blue", "-"),
        ("tv_bound_at_1e-6", "TV bound (distribution-free), false-fail 1e-6", "tab:green", "--"),
        ("chi_square_at_1.5e-5", "chi-square, false-fail 1.5e-5 (handout's rate)", "tab:orange", ":"),
    ]
    for col, label, color, ls in styles:
        ax.plot(needed["tv"], needed[col], ls, marker="o", ms=4, color=color, lw=2, label=label)
    d_handout = at_n["min_detectable_tv"][0]
    ax.plot(
        [d_handout],
        [HANDOUT_N],
        "s",
        color="black",
        ms=9,
        label=f"handout: 30,000 runs, TV < 0.015 (false-fail 1.5e-5): detects TV >= {d_handout:.4f}",
    )
    ax.axhline(HANDOUT_N, color="black", ls=":", lw=0.8)
    for mid, bias in mutant_biases().items():
        ax.axvline(bias, color="0.6", lw=0.8)
        ax.text(
            bias,
            0.98,
            f"{mid} ",
            rotation=90,
            fontsize=6.5,
            va="top",
            ha="right",
            color="0.35",
            transform=ax.get_xaxis_transform(),
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="bias to detect: TV from the target",
        ylabel="runs needed (detect w.p. >= 0.99)",
        title="Power: runs needed on the toy chain's 9-cell target",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower left")
    caption = (
        "Runs needed to detect a bias of a given TV with probability >= 1 - false-pass = "
        f"{1 - false_pass_rate:g}, on the handout test's 9-cell target p(a|0) p(b|a) "
        "(`stats.min_num_samples_chi_square`, conservative over every alternative at that TV, "
        "asymptotic noncentral chi-square; `stats.min_num_samples_tv`, distribution-free). "
        "The black square is the handout's fixed test: 30,000 runs, fail when TV >= 0.015; its "
        "false-fail rate 1.5e-5 was measured in specverify/stats.py (2e7 exact multinomial "
        "draws), and it detects every bias >= 0.015 + sqrt(ln(1/fpr) / (2 n)) (Hoeffding on the "
        "set where the alternative exceeds the target). Grey lines: exact TVs of some mutants "
        "(exact enumeration). Note the detectors' sequential look schedule splits the "
        "false-fail budget further (Bonferroni), so the battery needs somewhat more runs "
        "than the single test drawn here."
    )
    tables = [
        Table(needed, title="Runs needed per TV"),
        Table(at_n, suffix="at-30000", title="Smallest detectable TV at 30,000 runs"),
    ]
    return write_outputs(out_dir, "power", "Detection power", caption, fig, tables, time.perf_counter() - t0)
