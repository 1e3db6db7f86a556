"""The handout's CPU experiments that sample: noise versus bias, the greedy drafter, and
non-i.i.d. acceptance on the toy chain.

Every number comes from the round battery's own pieces (specverify.interfaces.round.cases and
round_tasks): the case is ``round_cases.reference_case()`` (the handout's toy chain, k = 2,
prefix (0,), a 2-token window), samples come from ``round_tasks.sample_first_tokens`` (mutants
run through their Python function, round by round) or from the batched simulator
(specverify.samplers.batched) for the exact step, and the bias of each sampler is its exact TV
from ``round_tasks.exact_case``. Rule: Leviathan et al. 2023 (arXiv 2211.17192); mutants and their references: specverify.mutants.

The expected TV of n draws is computed exactly, not simulated: TV(p_hat, t) = 1/2 sum_x |p_hat(x) -
t(x)| and each count n p_hat(x) is Binomial(n, r(x)) when the sampler's exact distribution is r,
so by linearity E[TV] = 1/2 sum_x E|X_x / n - t(x)|. For a correct sampler (r = t) it is
asymptotically sqrt(2 / pi) / 2 * sum_x sqrt(t(x) (1 - t(x)) / n): the 1/sqrt(n) law.
"""

from __future__ import annotations

import math
import time

import numpy as np
import polars as pl
from scipy import stats as sps

from .. import mutants
from ..interfaces.round import cases as round_cases
from ..interfaces.round import tasks as round_tasks
from ..laws import exact, round_chain, stats, theory
from ..laws.chains import toy_chain
from ..samplers.batched import simulate_tokens
from ..samplers.chain import speculative_step
from .output import Table, figure, write_outputs

SIZES = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
NOISE_VS_BIAS_MUTANTS = (
    "rejection/resample-from-p",
    "rejection/continue-after-reject",
    "uniform/shared-across-positions",
    "draft/temperature-draft-only",
)
GREEDY_CONTROL, GREEDY_BUG = "control/greedy-draft-one-hot-q", "draft/greedy-softmax-q"
REFERENCE = "reference (batched simulator)"
MAX_PATHS = 100_000


def run_sizes(n_max: int) -> list[int]:
    """The sizes of ``SIZES`` up to n_max, plus n_max itself (at least 2 sizes)."""
    if isinstance(n_max, bool) or not isinstance(n_max, int) or n_max < 20:
        raise ValueError(f"n_max: must be an integer >= 20, got {n_max!r}")
    sizes = [n for n in SIZES if n < n_max]
    return (sizes or [n_max // 10]) + [n_max]


def expected_tv(n: int, dist: dict, target: dict) -> float:
    """E[TV(empirical distribution of n draws from dist, target)], exactly (module docstring)."""
    total = 0.0
    for x in set(dist) | set(target):
        r, t = dist.get(x, 0.0), target.get(x, 0.0)
        if r <= 0.0 or r >= 1.0:
            total += abs(r - t)
            continue
        sd = math.sqrt(n * r * (1 - r))
        lo, hi = max(0, math.floor(n * r - 12 * sd)), min(n, math.ceil(n * r + 12 * sd))
        counts = np.arange(lo, hi + 1)
        total += float(np.sum(sps.binom.pmf(counts, n, r) * np.abs(counts / n - t)))
    return 0.5 * total


def asymptotic_tv_constant(target: dict) -> float:
    """C with E[TV] ~ C / sqrt(n) for a correct sampler."""
    t = np.array(list(target.values()))
    return math.sqrt(2 / math.pi) / 2 * float(np.sum(np.sqrt(t * (1 - t))))


def _empirical_tv(rows, target: dict) -> float:
    rows = np.asarray(rows)
    uniq, counts = np.unique(rows, axis=0, return_counts=True)
    emp = {tuple(int(t) for t in row): c / len(rows) for row, c in zip(uniq, counts)}
    return stats.tv_distance(emp, target)


def _curve(label, kind, dist, target, sizes, tvs, replicates):
    bias = exact.total_variation(dist, target)
    return [
        {
            "sampler": label,
            "kind": kind,
            "n": n,
            "sampled_tv": tv,
            "replicates": replicates,
            "expected_tv": expected_tv(n, dist, target),
            "exact_tv": bias,
        }
        for n, tv in zip(sizes, tvs)
    ]


def loop_curve(label: str, kind: str, sampler, case, sizes, rng) -> list[dict]:
    """One stream of sampled runs through the sampler's Python function; TV at nested sizes."""
    dist, target = round_tasks.exact_case(sampler, case, MAX_PATHS)
    samples = round_tasks.sample_first_tokens(sampler, case, sizes[-1], rng)
    return _curve(label, kind, dist, target, sizes, [_empirical_tv(samples[:n], target) for n in sizes], 1)


def batched_curve(case, sizes, rng, replicates: int) -> list[dict]:
    """The exact step through the batched simulator; mean TV of independent replicates per size."""
    dist, target = round_tasks.exact_case(speculative_step, case, MAX_PATHS)
    tvs = [
        float(
            np.mean(
                [
                    _empirical_tv(simulate_tokens(case.model, case.prefix, case.k, case.m, n, rng), target)
                    for _ in range(replicates)
                ]
            )
        )
        for n in sizes
    ]
    return _curve(REFERENCE, "exact", dist, target, sizes, tvs, replicates)


def _plot_curves(ax, rows: list[dict], target: dict, title: str):
    frame = pl.DataFrame(rows)
    sizes = np.array(sorted(set(frame["n"].to_list())), dtype=float)
    dense = np.geomspace(sizes[0], sizes[-1], 60)
    const = asymptotic_tv_constant(target)
    ax.plot(
        dense, const / np.sqrt(dense), ":", color="black", lw=1.5, label=r"$C/\sqrt{n}$ (correct sampler, asymptotic)"
    )
    ax.plot(
        dense,
        [expected_tv(int(n), target, target) for n in dense],
        "-",
        color="0.6",
        lw=4,
        alpha=0.5,
        label="exact E[TV] of a correct sampler",
    )
    colors = iter(plt_colors())
    for label in frame["sampler"].unique(maintain_order=True):
        sub = frame.filter(pl.col("sampler") == label)
        color, bias = next(colors), sub["exact_tv"][0]
        reps = sub["replicates"][0]
        mean = f", mean of {reps}" if reps > 1 else ""
        ax.plot(sub["n"], sub["sampled_tv"], "o-", color=color, ms=5, label=f"{label}{mean} (exact TV {bias:.2g})")
        if bias > 1e-9:
            ax.axhline(bias, color=color, ls="--", lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="runs n",
        ylabel="TV(empirical, target)",
        title=title,
        ylim=(min(1e-3, const / np.sqrt(sizes[-1]) / 2), 1),
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower left")


def plt_colors() -> list[str]:
    return ["tab:blue", "tab:red", "tab:orange", "tab:green", "tab:purple", "tab:brown"]


def _tv_table(rows) -> pl.DataFrame:
    return pl.DataFrame(rows).select("sampler", "kind", "n", "replicates", "sampled_tv", "expected_tv", "exact_tv")


def noise_vs_bias(
    out_dir, *, n_max: int = 100_000, replicates: int = 16, seed: int = 0, mutant_ids=NOISE_VS_BIAS_MUTANTS
):
    """TV against runs for the exact step and buggy ones (handout, CPU experiment 1)."""
    t0 = time.perf_counter()
    case, sizes, rng = round_cases.reference_case(), run_sizes(n_max), np.random.default_rng(seed)
    rows = batched_curve(case, sizes, rng, replicates)
    for mid in mutant_ids:
        rows += loop_curve(mid, mutants.get(mid).effect, mutants.get(mid).fn, case, sizes, rng)
    target = exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)
    fig, ax = figure(size=(8, 5.2))
    _plot_curves(ax, rows, target, "Noise vs bias: toy chain, k = 2, first 2 tokens from (0,)")
    caption = (
        "TV between the empirical distribution of the first 2 tokens (9 cells) and the exact "
        "target p(a|0) p(b|a), against the number of runs n. The exact step (batched simulator, "
        f"mean of {replicates} independent replicates per n) falls like 1/sqrt(n) and sits on "
        "the exact expected TV of a correct sampler (grey; computed from binomial counts, not "
        "simulated). Each mutant (its Python function, one stream of runs, TV at nested sizes) "
        "levels off at its bias, its exact TV from exact enumeration (dashed line). "
        "`expected_tv` in the table is the exact E[TV] at n for each sampler's exact "
        "distribution."
    )
    return write_outputs(
        out_dir, "noise-vs-bias", "Noise versus bias", caption, fig, [Table(_tv_table(rows))], time.perf_counter() - t0
    )


def greedy_drafter(out_dir, *, n_max: int = 100_000, seed: int = 1):
    """Greedy drafter with one-hot q (exact) beside the softmax-q bug (handout §4, experiment 4)."""
    t0 = time.perf_counter()
    case, sizes, rng = round_cases.reference_case(), run_sizes(n_max), np.random.default_rng(seed)
    rows = []
    for mid in (GREEDY_CONTROL, GREEDY_BUG):
        rows += loop_curve(mid, mutants.get(mid).effect, mutants.get(mid).fn, case, sizes, rng)
    target = exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)
    fig, ax = figure(size=(8, 5.2))
    _plot_curves(ax, rows, target, "Greedy drafter: one-hot q (exact) vs softmax q (biased)")
    control_tv = rows[0]["exact_tv"]
    caption = (
        "The drafter emits argmax(q). With q set to the one-hot vector of that argmax "
        f"(`{GREEDY_CONTROL}`) acceptance is p(x) and the residual is p without x: the exact "
        f"TV is {control_tv:.1e} (rounding), and the sampled TV falls like 1/sqrt(n) on the "
        f"correct sampler's expected TV. Plugging in the softmax q instead (`{GREEDY_BUG}`) "
        "levels off at its exact bias (dashed). Both run through their Python functions, one "
        "stream of runs each, toy chain, k = 2, first 2 tokens from (0,)."
    )
    return write_outputs(
        out_dir,
        "greedy-drafter",
        "Greedy drafter, sampled verification",
        caption,
        fig,
        [Table(_tv_table(rows))],
        time.perf_counter() - t0,
    )


# --------------------------------------------------------------------------- non-i.i.d.


def stationary(transition: np.ndarray) -> np.ndarray:
    """The stationary distribution pi = pi P of an irreducible row-stochastic matrix."""
    n = transition.shape[0]
    system = np.vstack([transition.T - np.eye(n), np.ones(n)])
    pi, *_ = np.linalg.lstsq(system, np.append(np.zeros(n), 1.0), rcond=None)
    return pi


def round_boundary_chain(model, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(T, L) for a first-order chain: T[c, c'] = P(a round from context c ends on token c'),
    L[c] = its exact mean length. In a long decode the next round starts from c', so the
    long-run tokens per round is sum_c pi_T(c) L(c), pi_T the stationary distribution of T."""
    _, transition, lengths, _ = round_chain.round_transition(speculative_step, model, k, max_paths=MAX_PATHS)
    return transition, lengths


def long_decode(model, k: int, n_rounds: int, rng, batches: int = 20) -> tuple[float, float]:
    """Mean tokens per round of one long decode from (0,) (rounds continue from each other),
    with its standard error from ``batches`` batch means (rounds are weakly dependent)."""
    ctx, lengths = (0,), np.empty(n_rounds)
    for i in range(n_rounds):
        out = speculative_step(model.p_fn, model.q_fn, ctx, k, rng)
        lengths[i], ctx = len(out), (out[-1],)
    means = lengths[: n_rounds // batches * batches].reshape(batches, -1).mean(axis=1)
    return float(lengths.mean()), float(means.std(ddof=1) / math.sqrt(batches))


def non_iid_table(ks=range(1, 7), n_rounds: int = 20_000, seed: int = 2) -> pl.DataFrame:
    model, rng = toy_chain(), np.random.default_rng(seed)
    alphas = model.alphas()
    pi_p = stationary(np.asarray(model.p_table))
    alpha_stationary, alpha_mean = float(pi_p @ alphas), float(alphas.mean())
    rows = []
    for k in ks:
        transition, lengths = round_boundary_chain(model, k)
        measured, se = long_decode(model, k, n_rounds, rng)
        rows.append(
            {
                "k": k,
                "measured": measured,
                "measured_se": se,
                "n_rounds": n_rounds,
                "exact_long_run": float(stationary(transition) @ lengths),
                "exact_stationary_start": float(pi_p @ lengths),
                "exact_from_0": float(lengths[0]),
                "formula_alpha_stationary": theory.expected_tokens(alpha_stationary, k),
                "formula_alpha_mean": theory.expected_tokens(alpha_mean, k),
                "alpha_stationary": alpha_stationary,
                "alpha_mean": alpha_mean,
            }
        )
    return pl.DataFrame(rows)


def non_iid(out_dir, *, ks=range(1, 7), n_rounds: int = 20_000, seed: int = 2):
    """Mean tokens per round on the toy chain against the i.i.d. formula (experiment 2)."""
    t0 = time.perf_counter()
    table = non_iid_table(ks, n_rounds, seed)
    a_st, a_mean = table["alpha_stationary"][0], table["alpha_mean"][0]
    fig, ax = figure(size=(7.5, 5))
    k = table["k"]
    ax.errorbar(
        k,
        table["measured"],
        yerr=2 * table["measured_se"],
        fmt="o",
        color="black",
        capsize=3,
        label=f"measured: long decode, {n_rounds:,} rounds per k (±2 SE)",
    )
    ax.plot(
        k,
        table["exact_long_run"],
        "-",
        color="tab:blue",
        lw=2,
        label="exact, long run (round-start chain's stationary dist.)",
    )
    ax.plot(
        k, table["exact_stationary_start"], "--", color="tab:cyan", label="exact, start context ~ p's stationary dist."
    )
    ax.plot(k, table["exact_from_0"], ":", color="tab:green", lw=2, label="exact, from prefix (0,)")
    ax.plot(
        k,
        table["formula_alpha_stationary"],
        "-.",
        color="tab:red",
        label=f"formula at stationary-average alpha = {a_st:.4f}",
    )
    ax.plot(
        k, table["formula_alpha_mean"], "-.", color="tab:orange", label=f"formula at simple-mean alpha = {a_mean:.4f}"
    )
    ax.set(
        xlabel="k (drafted tokens per round)",
        ylabel="mean tokens per round",
        title="Non-i.i.d. acceptance: toy chain (alpha 0.6 after 0, 0.5 after 1, 2)",
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left")
    caption = (
        "Mean tokens per round on the handout's toy chain, where alpha depends on the last "
        "token (0.6 after token 0, 0.5 after 1 and 2) and so changes within a round as drafts "
        "extend the context. *measured*: one long decode from (0,) per k, each round continuing "
        "from the last, through `speculative_step` (standard errors from 20 batch means). "
        "*exact*: `exact.enumerate_distribution` of one round from each start context c, "
        "giving its mean length L(c) and the distribution of its last token; averaged (a) under "
        "the stationary distribution of the round-start chain (what a long decode converges "
        "to), (b) under the stationary distribution pi of the target chain p (the brief's "
        f"choice; pi = stationary(p_table)), and (c) from prefix (0,) alone. *formula*: "
        f"(1 - alpha^(k+1)) / (1 - alpha) at the stationary average sum_c pi(c) alpha(c) = "
        f"{a_st:.4f} and at the simple mean of the three alphas = {a_mean:.4f}."
    )
    return write_outputs(
        out_dir, "non-iid", "Non-i.i.d. acceptance", caption, fig, [Table(table)], time.perf_counter() - t0
    )
