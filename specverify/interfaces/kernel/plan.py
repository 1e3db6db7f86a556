"""The kernel battery's plan: its cases and random streams, and what judging a case costs.

``cases``: the budget's cases in the order the battery runs them (fixed, sweeps, drawn from
``KERNEL_STREAMS``, aimed); ``cases_reach``: the reach of given cases. ``tolerance``: the TV a
float32 kernel's rounding can reach on a case; ``grid_points`` and ``scan_rows``: how densely a
scan probes a uniform; ``planned_rows`` and ``planned_looks``: the rows and chi-square looks a case
takes, for the forecast and a time limit's words (never for a verdict).
"""

from __future__ import annotations

import numpy as np

from ...battery.budgets import KernelBudget
from ...battery.core import POWER_FALSE_PASS_RATE
from ...battery.seed_tree import stream
from ...laws import stats
from ...laws.precision import stated_precision
from ...laws.rounding import analytic_bound
from ...laws.uniform_cells import GRID_POINTS, probe_points
from . import cases as kc
from .corners import kernel_corner_cases
from .sweeps import sweep_cases, wide_sweep

GRID_PROBABILITY = 2.0**-24
"""One float32 value's probability under ``torch.rand`` (multiples of 2^-24 in [0, 1))."""
WIDE_ROW_BYTES = 1 << 19
"""Rows above this many input bytes (V over ~43,000 at k = 1) are scanned on fewer grid points
(``grid_points``)."""
ENGINE_VOCABS = (1024, 4097, 33_024, 152_064)
"""The vocabularies a drawn engine-scale kernel case picks from (tiles, int16, Qwen2.5's)."""

KERNEL_STREAMS = (
    "generated cases",
    "contract",
    "spot checks",
    "statistics",
    "engine-scale case",
    "aimed cases",
    "batch rows",
    "batch pairs",
)
"""The kernel battery's random streams (``battery.stream``: nodes of ``SeedSequence(seed)``'s
tree), child by child: 0 the generated cases (grandchild i for case i), 1 the contract's uniforms
and batch orders (its node ``(1, 0)`` seeds a generator kernel's contract rows: chunk c from
``(1, 0, c)``), 2 the spot checks' uniforms, 3 the sequential chi-square, one node per (case,
instance, look): ``(3, i, b, j)`` for instance b of case i of the run's cases at look j
(``kernel_tasks.kernel_counts_task``: its uniforms from the node's child 0, a generator kernel's
chunk c from ``(…, 1, c)``), 4 the drawn engine-scale case, 5 the aimed cases (grandchild i for
the i-th k), 6 the batch rows' uniforms (``(6, B)`` for batches of B rows), 7 the pairwise test
(``kernel_tasks.kernel_pairs_task``'s node)."""


def kernel_stream(seed: int, purpose: str, *path: int) -> np.random.SeedSequence:
    """The node ``(KERNEL_STREAMS.index(purpose), *path)`` of ``SeedSequence(seed)``'s tree."""
    return stream(seed, KERNEL_STREAMS.index(purpose), *path)


def cases(budget: KernelBudget, seed: int, aim=None) -> list[kc.KernelCase]:
    """The fixed cases, the sweeps (``sweep_cases``: batch rows, every k, dense and wide V;
    ``kernel.corners.kernel_corner_cases``: the pairwise corners where the budget has them),
    ``budget.generated`` drawn from ``kernel_stream(seed, "generated cases")``, with
    ``engine_scale`` one ``kc.sparse_engine_case`` drawn from ``"engine-scale case"`` (V from
    ``ENGINE_VOCABS``, k 1 to 8, either side), and with an ``interfaces.Aim`` the aimed cases from
    ``"aimed cases"`` (``KERNEL_STREAMS``)."""
    sweeps = sweep_cases(budget) + kernel_corner_cases(budget)
    small = [c for c in sweeps if c.vocab_size < ENGINE_VOCABS[0]]  # batch rows, every k: cheap, first
    fixed = [kc.every_draft_case(), kc.adversarial_case(), kc.ragged_case(), *small]
    drawn = kc.generated_cases(kernel_stream(seed, "generated cases"), budget.generated)
    if budget.engine_scale:
        fixed += [kc.dense_case(budget.dense_vocab, n=1), kc.tile_boundary_case(), kc.wide_ids_case()]
        rng = np.random.default_rng(kernel_stream(seed, "engine-scale case"))
        V, k = int(rng.choice(ENGINE_VOCABS)), int(rng.integers(1, 9))
        side = ("residual", "draft")[int(rng.integers(2))]
        drawn.append(kc.sparse_engine_case(rng, V, k, side, f"generated engine scale V{V} {side}, k={k}"))
    fixed += [c for c in sweeps if c.vocab_size >= ENGINE_VOCABS[0]]  # wide and dense V: after
    aimed = kc.aimed_cases(kernel_stream(seed, "aimed cases"), aim.vocab, aim.ks) if aim else []
    return fixed + drawn + aimed


def cases_reach(run: list) -> dict:
    """The reach of given cases (a run on ``cases=``), in ``reach``'s dimensions: dense V the
    widest case some row of which has mass on half its ids or more, binned V the widest other."""
    dense = [c for c in run if 2 * int((c.p > 0).sum(axis=2).max()) >= c.vocab_size]
    return {
        "dense V": max((c.vocab_size for c in dense), default=0),
        "binned V": max((c.vocab_size for c in run if not any(c is d for d in dense)), default=0),
        "k": max((c.k for c in run), default=0),
        "batch": max((b for c in run for b in c.batches), default=0),
    }


def tolerance(case: kc.KernelCase) -> float:
    """The TV a float32 kernel's rounding can reach on the case (``laws.rounding.analytic_bound``,
    at the stated precision where one is, ``check --precision``): each of the rule's thresholds
    (k coins, and a cumulative sum per token of positive target probability) may move by a few
    float32 ulps (2^-24 near 1)."""
    support = int((case.p > 0).sum(axis=2).max())
    return analytic_bound(stated_precision() or "float32", case.k, support)  # one policy: laws.rounding


def measured_tv_words(measured: list[float], tol: float) -> str:
    """The largest TV measured exactly on a case's laws beside the tolerance it is held to
    (``tolerance``): "TV 3e-08 measured, tolerance 4.8e-07"; with no law measured exactly (all
    judged by statistics), the tolerance alone, said so."""
    if not measured:
        return f"no law measured exactly (TV tolerance {tol:.2g})"
    return f"TV {max(measured):.2g} measured, tolerance {tol:.2g}"


def row_bytes(case: kc.KernelCase) -> int:
    """The bytes of one row of the kernel's inputs (float32 q and p rows)."""
    return 4 * (2 * case.k + 1) * case.vocab_size


def grid_points(case: kc.KernelCase) -> int:
    """Regular probes per scanned uniform besides the rule's cells (their ends and middles):
    ``uniform_cells.GRID_POINTS``, an eighth of them for rows above ``WIDE_ROW_BYTES`` (a probe
    there is megabytes of input; the cells' ends and middles are what the scan relies on)."""
    return GRID_POINTS if row_bytes(case) <= WIDE_ROW_BYTES else GRID_POINTS // 8


def detect_tv_for(case: kc.KernelCase, budget: KernelBudget) -> float:
    """The TV statistics must see on the case: ``detect_tv``, or ``detect_tv_large`` for rows
    above ``large_row_bytes`` (10^5 rows of V = 33k are gigabytes)."""
    return (
        budget.detect_tv if row_bytes(case) <= budget.large_row_bytes else max(budget.detect_tv, budget.detect_tv_large)
    )


PREFLIGHT_ROW_BYTES = 1 << 20
"""From this row size on (inputs of one batch row), the forecast times the widest case's calls
before the cases start (``KernelBattery.wide_costs``), and prices such cases by their bytes."""


BISECTION_ROWS = 3
"""Rows a scan spends on each breakpoint of the rule besides its probes (``segments``' bisection
to the kernel's own float32 threshold next to the rule's float64 one): about 3 on the reference
kernel's emission scans (V 65,536, k 8: 3,503 rows for 1,866 probes of about 600 breakpoints)."""


def scan_rows(breakpoints, grid: int) -> int:
    """About the rows one scan along a uniform takes: its probes and ``BISECTION_ROWS`` for each
    breakpoint inside (0, 1)."""
    b = np.asarray(breakpoints, dtype=np.float64).ravel()
    inside = np.unique(b[np.isfinite(b) & (b > 0) & (b < 1)])
    return len(probe_points(b, grid)) + BISECTION_ROWS * len(inside)


TASKS_PER_SCAN = 8
"""About the tasks one scan along a uniform takes (its probes, then the bisection rounds to the
kernel's float32 thresholds), for the forecast: each sends the case to the subject's process."""


def case_bytes(case: kc.KernelCase) -> int:
    """The bytes of a case's p and q rows (what a task sends to the subject's process)."""
    return int(case.p.nbytes + case.q.nbytes)


TILE_EDGES = tuple(2**e for e in range(5, 18))
"""The vocabulary tiles (32 to 131,072 ids) a binned law's id ranges are cut at (``token_bins``)."""
MAX_TOKEN_CELLS = 64
"""A swept law over more tokens than this is judged by statistics on id ranges (``token_bins``)."""


def token_bins(law: dict, V: int) -> np.ndarray | None:
    """The first ids of the id ranges the tokens of a statistical law {(j, y): p} over V ids are
    pooled into: cut at each tile of ``TILE_EDGES`` below V - 1 and at the top id V - 1 (its own
    range), so mass moved across a tile, or to or from the top id, shows; mass moved within a
    range does not (the price of sizing the statistics by ranges, not by V tokens). None: the law
    has at most ``MAX_TOKEN_CELLS`` tokens, each its own cell (the binned sweep's)."""
    if len({y for (_, y), v in law.items() if v > 0}) <= MAX_TOKEN_CELLS:
        return None
    return np.array([0, *(e for e in TILE_EDGES if e < V - 1), V - 1], dtype=np.int64)


def bin_law(law: dict, bins: np.ndarray | None) -> dict:
    """``law`` {(j, y): mass or count} with each token y replaced by the first id of its range in
    ``bins`` (``token_bins``), the masses of a range summed; None: ``law`` as it is."""
    if bins is None:
        return dict(law)
    out: dict = {}
    for (j, y), v in law.items():
        key = (j, int(bins[np.searchsorted(bins, y, side="right") - 1]))
        out[key] = out.get(key, 0) + v
    return out


def statistical_law(case: kc.KernelCase, b: int) -> tuple[dict, np.ndarray | None]:
    """(the law statistics judge instance b on, its ``token_bins``): the rule's law
    (``kc.rule_law``), over id ranges on the dense and binned sweeps (``sweeps.wide_sweep``:
    V tokens a row there, which no affordable sample sees one by one; a kernel that draws its own
    randomness has no uniforms to scan them exactly), token by token elsewhere."""
    law = kc.rule_law(case, b)
    bins = token_bins(law, case.vocab_size) if wide_sweep(case) else None
    return bin_law(law, bins), bins


def statistical_instances(case: kc.KernelCase) -> list[int]:
    """The instances statistics judge: all but those drafting a q(x) = 0 token (not a draw from
    q: judged for behaviour only, from uniforms)."""
    return [b for b in range(case.n) if not case.q_zero(b)]


def planned_rows(case: kc.KernelCase, budget: KernelBudget, statistical: bool, checks: int = 1) -> int:
    """About how many batch rows judging ``case`` takes, for a forecast and for a time limit's
    words (never for a verdict). From uniforms: every instance's scans along each coin and each
    final uniform (``scan_rows``: an exact kernel's; a biased one bisects more), the
    edges, the spot check and the batch rows and pairs. By statistics: each judged instance's
    last planned look (``planned_looks`` on its ``statistical_law``, the false-fail rate split
    over ``checks`` instances): what an exact kernel takes; a biased one stops sooner."""
    if statistical:
        n = 0
        for b in statistical_instances(case):
            want = {f"{j} {y}": v for (j, y), v in statistical_law(case, b)[0].items()}
            n += planned_looks(want, budget, checks, detect_tv_for(case, budget))[0][-1]
        return n + (max(case.batches) * budget.pair_calls if case.batches else 0)
    g, n = grid_points(case), 0
    for b in range(case.n):
        xs, emitting = case.drafts(b), []  # the positions an emission is scanned at
        for i, x in enumerate(xs):
            accept = kc.acceptance(case.p[b, i], case.q[b, i], x)
            n += scan_rows([accept], g) + 2  # its coin's scan and edges (u = 0, 1 - 2^-24)
            emitting += [i] if accept < 1 else []
            if accept <= 0:  # never accepted: the positions after it are not reached
                break
        else:
            emitting.append(len(xs))  # the bonus
        n += sum(scan_rows(kc.emission_breakpoints(case, b, j), g) + 2 for j in emitting)
    n += case.n * min(budget.spot_rows, max(32, budget.spot_bytes // row_bytes(case)))
    if case.batches:
        n += sum(case.batches) * budget.batch_calls + max(case.batches) * budget.pair_calls
    return n


def planned_looks(
    want: dict, budget: KernelBudget, checks: int, detect_tv: float | None = None
) -> tuple[list[int], float]:
    """(the look sizes, the false-fail rate per look) of one instance's sequential chi-square:
    looks n_min, 2 n_min, ... up to the first that sees ``detect_tv`` (power 1 -
    POWER_FALSE_PASS_RATE) or ``n_max``; half the budget's false-fail rate split over ``checks``
    instances and every planned look (solved together: the split depends on the count)."""
    n_looks = 1
    while True:
        per_check = stats.split_budget(budget.false_fail_rate / 2, checks * n_looks)
        need = stats.min_num_samples_chi_square(detect_tv or budget.detect_tv, want, per_check, POWER_FALSE_PASS_RATE)
        sizes = [min(budget.n_min, need)]
        while sizes[-1] < min(need, budget.n_max) and sizes[-1] * 2 <= budget.n_max:
            sizes.append(sizes[-1] * 2)
        if len(sizes) <= n_looks:
            return sizes, per_check
        n_looks = len(sizes)


__all__ = [
    "BISECTION_ROWS",
    "ENGINE_VOCABS",
    "GRID_PROBABILITY",
    "KERNEL_STREAMS",
    "PREFLIGHT_ROW_BYTES",
    "TASKS_PER_SCAN",
    "MAX_TOKEN_CELLS",
    "TILE_EDGES",
    "WIDE_ROW_BYTES",
    "bin_law",
    "case_bytes",
    "cases",
    "cases_reach",
    "detect_tv_for",
    "grid_points",
    "kernel_stream",
    "measured_tv_words",
    "planned_looks",
    "planned_rows",
    "row_bytes",
    "scan_rows",
    "statistical_instances",
    "statistical_law",
    "token_bins",
    "tolerance",
]
