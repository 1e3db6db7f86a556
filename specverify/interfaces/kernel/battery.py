"""The kernel interface: a batched verification kernel, as engines ship them.

    kernel(draft_ids, draft_probs, target_probs, uniforms) -> (output_ids, num_accepted)

- ``draft_ids`` int64 [B, k]: the drafts; a row with k_b < k drafts is padded with -1.
- ``draft_probs`` float32 [B, k, V]: the q rows the drafts claim to be drawn from.
- ``target_probs`` float32 [B, k + 1, V]: the p rows, row i conditioned on drafts[:i]; a ragged
  row's bonus row is k_b.
- ``uniforms`` float32 [B, k + 1] in [0, 1): column i < k is draft i's acceptance coin, the last
  column the uniform the emitted token (recovered or bonus) is read from by inverse CDF in
  vocabulary order. A kernel whose fourth parameter is named ``generator`` (or ``rng``) gets a
  ``numpy.random.Generator`` / ``torch.Generator`` instead and draws its own.
- returns ``output_ids`` [B, k + 1] (the accepted drafts, the emitted token, then -1) and
  ``num_accepted`` [B]. NumPy arrays by default; torch tensors when the kernel fails on NumPy
  input (it is retried once with torch, and the report says so).

How it is judged (``run``), the claimed rule being the token-wise one (Leviathan et al., arXiv
2211.17192, Algorithm 1; batched as vLLM's and SGLang's kernels do):

1. **contract**: shapes, ids, the accepted prefix equal to the drafts, -1 padding, inputs left
   untouched, the same uniforms giving the same outputs.
2. **exact from uniforms** (kernels that take uniforms): along each coin, and along the final
   uniform given each accepted count, the output is found piece by piece on the float32 grid
   (``specverify.laws.uniform_cells``: the rule's thresholds probed on both sides and in the middle,
   any change bisected to neighbouring floats), in calls of at most ``scan_rows`` rows (below the
   first batch tile the sweep straddles); the law is the product of the pieces' measures,
   compared with ``kernel_cases.rule_law`` (TV above ``tolerance``: a distribution finding). A
   spot check of random uniform rows against that factorization guards its assumption (the
   output depends on coins only through the first rejection); where it fails the instance is
   scanned again one row a call, and judged by statistics if it still fails.
3. **measure-zero events**: u = 0 and u = 1 - 2^-24 on every coin and final uniform; what a
   kernel does there (a p(x) = 0 draft accepted, a p >= q draft rejected, a token of zero
   probability emitted) is reported with its probability on the float32 grid (kind "edge"),
   separately from the law, but only where the row keeps to the rule at interior uniforms of the
   same cell in the same batch: a deviation that holds there too is measured where the row sits
   (a distribution finding with its TV). So is what a kernel does with a draft whose q(x) = 0.
4. **statistics at kernel speed** (generator kernels, or where the factorization failed):
   ``n_min`` to ``n_max`` rows per instance per look, Pearson chi-square on (accepted, token)
   with cells below 5 expected pooled, the false-fail rate split over instances and looks.
5. **sweeps** (``kernel_cases.sweep_cases``, one dimension at a time; ``reach`` names how far):
   dense V, wide V with ids past 65,535, every k, and batch rows: every row of batches of each
   of ``batch_sweep`` sizes against its instance's function of its own uniforms (a row that
   disagrees is judged by its law where it sits), and rows of identical inputs tested pairwise
   for independence (``pairs``). The run's ``ran`` starts with the reach ("reach: dense V 4096,
   ..."). At thorough the pairwise corners too (``corners.kernel_corner_cases``: the largest k
   over every batch size, and over the widest binned V).

Over 500 lines because the battery's steps (contract, scans, edges, batch rows, statistics) share
one run's state (the accept points and pieces the scans find, the findings); the cases
(``kernel_cases``) and what runs in the subject's process (``kernel_tasks``) are their own modules.
"""

from __future__ import annotations

import time

import numpy as np

from ...battery import budgets, runner
from ...battery.budgets import KernelBudget
from ...battery.core import POWER_FALSE_PASS_RATE, BatteryResult, Finding, stopping_kinds
from ...battery.guards import ContractBreach
from ...battery.seed_tree import stream
from ...battery.subject_calls import Battery, announce, run_in_subject
from ...common.tables import counted
from ...laws import stats
from ...laws.uniform_cells import FLOAT32_ONE_MINUS, GRID_POINTS, probe_points, segments
from ..corners import CORNER_PREFIX, corner_words, kernel_corner_cases
from . import cases as kc
from .tasks import (
    GENERATOR_NAMES,
    as_round_sampler,
    case_task,
    check_device,
    kernel_batches_task,
    kernel_counts_task,
    kernel_pairs_task,
    kernel_rows_task,
    kind_task,
    uses_generator,
    validate_outputs,
)

NAME = "kernel"
PARAMETERS = ("draft_ids", "draft_probs", "target_probs", "uniforms")
ALIASES = {
    "draft_ids": ("draft_token_ids",),
    "draft_probs": ("q",),
    "target_probs": ("p",),
    "uniforms": ("generator", "rng", "uniform_samples", "gen"),
}
GRID_PROBABILITY = 2.0**-24
"""One float32 value's probability under ``torch.rand`` (multiples of 2^-24 in [0, 1))."""
WIDE_ROW_BYTES = 1 << 19
"""Rows above this many input bytes (V over ~43,000 at k = 1) are scanned on fewer grid points
(``grid_points``)."""
INTERIOR = (1 / 16, 1 / 4, 1 / 2, 3 / 4, 15 / 16)
"""Where across its rule cell an edge probe's deviation is probed again before it is called
measure-zero (``KernelBattery.deviation_inside``)."""
PAIR_SHARE = 4
"""The pairwise test's false-fail rate is the budget's over PAIR_SHARE, split over its offsets
(the statistics take half: the two stay within the budget's)."""


KERNEL_BUDGETS = budgets.view("kernel")
"""The kernel sections of the named budgets (``budgets.TABLE``), by name."""


def get_budget(budget) -> KernelBudget:
    """The kernel section of a budget (``budgets.section``): by name (another interface's budget
    too), ``tv=X`` (statistics sized to see TV X), or a KernelBudget as it is; an unknown name is
    an InterfaceError naming ``budget`` and the budgets there are."""
    return budgets.section("kernel", budget)


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
    """The fixed cases, the sweeps (``kc.sweep_cases``: batch rows, every k, dense and wide V;
    ``corners.kernel_corner_cases``: the pairwise corners where the budget has them),
    ``budget.generated`` drawn from ``kernel_stream(seed, "generated cases")``, with
    ``engine_scale`` one ``kc.sparse_engine_case`` drawn from ``"engine-scale case"`` (V from
    ``ENGINE_VOCABS``, k 1 to 8, either side), and with an ``interfaces.Aim`` the aimed cases from
    ``"aimed cases"`` (``KERNEL_STREAMS``)."""
    sweeps = kc.sweep_cases(budget) + kernel_corner_cases(budget)
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


def reach(budget, uniforms: bool = True) -> dict:
    """Each swept dimension's largest value at ``budget`` (a name or a KernelBudget):
    ``kernel_cases.reach``, e.g. {"dense V": 4096, "binned V": 152064, "k": 8, "batch": 1024};
    ``uniforms`` False: for a kernel that draws its own (the uniforms-only sweeps left out)."""
    return kc.reach(get_budget(budget), uniforms)


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


def reach_line(budget, uniforms: bool = True) -> str:
    """``reach`` as the result's ``ran`` says it: "reach: dense V 4096, binned V 152064, k 8,
    batch 1024" (dimensions not swept left out; a kernel that draws its own: "..., the dense and
    binned sweeps need uniforms")."""
    words = ", ".join(f"{name} {value}" for name, value in reach(budget, uniforms).items() if value)
    return f"reach: {words}" + ("" if uniforms else " (the dense and binned sweeps need uniforms)")


def coverage(budget) -> str:
    b = get_budget(budget)
    scale = "V up to 152,064, k up to 8, " if b.engine_scale else ""
    big = (
        f" + dense rows (V {b.dense_vocab}, k 8), tile boundaries (V 4097), wide ids (V 33,024)"
        if b.engine_scale
        else ""
    )
    drawn = " (+ 1 at engine scale: V from 1,024 to 152,064, k 1-8, sparse rows)" if b.engine_scale else ""
    return (
        f"kernel battery: 3 fixed cases{big} + {b.generated} generated{drawn}, {scale}exact from "
        f"uniforms on the float32 grid; statistics "
        f"(generator kernels) see TV {b.detect_tv:g} per instance, {max(b.detect_tv, b.detect_tv_large):g} "
        f"where a row exceeds {b.large_row_bytes // 1024} KiB; sweeps to "
        + ", ".join(f"{name} {value}" for name, value in reach(b).items() if value)
        + corner_words([c.name.split(",")[0].removeprefix(CORNER_PREFIX + " ") for c in kernel_corner_cases(b)])
    )


def tolerance(case: kc.KernelCase) -> float:
    """The TV a float32 kernel's rounding can reach on the case: each of the rule's thresholds
    (k coins, and a cumulative sum per token of positive target probability) may move by a few
    float32 ulps (2^-24 near 1)."""
    support = int((case.p > 0).sum(axis=2).max())
    return 4 * GRID_PROBABILITY * (case.k + 1 + support)


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


def planned_rows(case: kc.KernelCase, budget: KernelBudget, statistical: bool) -> int:
    """About how many batch rows judging ``case`` takes, for a forecast and for a time limit's
    words (never for a verdict). From uniforms: every instance's scans along each coin and each
    final uniform (``scan_rows``: an exact kernel's; a biased one bisects more), the
    edges, the spot check and the batch rows and pairs. By statistics: ``n_max`` rows an
    instance, the most its looks take."""
    if statistical:
        return case.n * budget.n_max
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


# --------------------------------------------------------------------------- the battery


class KernelBattery(Battery):
    """One run of the kernel checks on one subject (the parent's side; ``battery.Battery``'s
    ``call``, ``now`` and ``breach``)."""

    def __init__(self, subject: runner.Runner, budget: KernelBudget, seed: int, deadline: float | None):
        super().__init__(subject, budget, seed, deadline)
        self.aim = None  # interfaces.Aim: the user's vocabulary and k (cases' aimed ones)
        self.contract_rng = np.random.default_rng(kernel_stream(seed, "contract"))
        self.spot_rng = np.random.default_rng(kernel_stream(seed, "spot checks"))
        self.generators = kernel_stream(seed, "contract", 0)  # a generator kernel's contract rows
        self.case_index = 0  # the case judged now, in the run's order (its statistics' streams)
        self.arrays = "numpy" if budget.device == "cpu" else "torch"  # on a GPU: torch tensors there
        self.generator = False  # the kernel draws from a generator (its fourth parameter's name)
        self.statistical = False  # judged by statistics: a generator, or uniforms that do not replay
        self.flagged_instances: list = []  # (V*k, case, b, got, want, tv, method)
        self.stat_checks = 1  # instances the statistics' false-fail rate is split over (set by run)
        self.pinned = None  # (rows [N], uniforms [N, k + 1], position): rows() then varies that row only
        self.scan_batch = budget.scan_rows  # rows per call of the scans (1 while measuring again)

    def chunk_rows(self, case: kc.KernelCase) -> int:
        per_row = 4 * (2 * case.k + 1) * case.vocab_size + 8 * (2 * case.k + 1)
        return max(1, self.budget.chunk_bytes // per_row)

    def rows(
        self,
        case: kc.KernelCase,
        inst: np.ndarray,
        uniforms,
        generators=None,
        order: np.ndarray | None = None,
        batch: int | None = None,
    ):
        """The kernel's (out, nacc) on instance rows ``inst``, in a shuffled order (so that
        neighbouring batch rows belong to different instances and problems), or in ``order``, at
        most ``batch`` rows per call (default: ``chunk_bytes`` of them). While ``pinned``, each row
        is instead its own call: the pinned batch with the pinned position's uniforms replaced."""
        if self.pinned is not None:
            return self.pinned_rows(case, uniforms)
        if order is None:
            order = self.contract_rng.permutation(len(inst))
        u = None if uniforms is None else np.asarray(uniforms, dtype=np.float32)[order]
        per_call = min(self.chunk_rows(case), batch or len(inst) or 1)
        chunks = -(-len(inst) // per_call)
        got = self.call(
            kernel_rows_task,
            case,
            np.asarray(inst)[order],
            u,
            self.arrays,
            per_call,
            generators,
            self.budget.device,
            seconds=self.budget.call_limit_s * chunks,
        )
        if got[0] == "breach":
            raise ContractBreach(got[1])
        self.runs_done += len(inst)
        out, nacc = np.empty_like(got[1]), np.empty_like(got[2])
        out[order], nacc[order] = got[1], got[2]
        return out, nacc

    def batches(self, case: kc.KernelCase, rows: np.ndarray, uniforms: np.ndarray, keep=None):
        """One kernel call per uniform set ``uniforms[c]`` on the batch ``rows`` (instance r at
        position r): (out [C, B, k + 1], nacc [C, B]), or only position ``keep``'s row."""
        got = self.call(
            kernel_batches_task,
            case,
            np.asarray(rows, dtype=np.int64),
            np.asarray(uniforms, dtype=np.float32),
            self.arrays,
            self.budget.device,
            keep,
            seconds=self.budget.call_limit_s * max(1, len(uniforms)),
        )
        if got[0] == "breach":
            raise ContractBreach(got[1])
        self.runs_done += int(np.asarray(got[2]).size)
        return got[1], got[2]

    def pinned_rows(self, case: kc.KernelCase, uniforms):
        """``rows`` while pinned to (batch rows, their uniforms, position): one call per uniform
        row given, the pinned batch with that position's uniforms replaced by it."""
        rows, base, position = self.pinned
        sets = np.repeat(np.asarray(base, dtype=np.float32)[None], len(uniforms), axis=0)
        sets[:, position] = uniforms
        out, nacc = self.batches(case, rows, sets, keep=position)
        return out[:, 0], nacc[:, 0]

    # -- contract ------------------------------------------------------------------------------
    def contract(self, case: kc.KernelCase) -> bool:
        self.generator = self.call(kind_task, seconds=10.0)
        inst = np.repeat(np.arange(case.n), 8)
        u = None if self.generator else self.contract_rng.random((len(inst), case.k + 1), dtype=np.float32)
        order = self.contract_rng.permutation(len(inst))
        try:
            first = self.rows(case, inst, u, generators=self.generators, order=order)
        except ContractBreach as exc:
            if not _numpy_type_error(str(exc)) or not _torch_available():
                self.breach(str(exc), case)
                return False
            self.arrays = "torch"
            try:
                first = self.rows(case, inst, u, generators=self.generators, order=order)
            except ContractBreach as exc2:
                self.breach(f"{exc2} (with torch tensors; with NumPy arrays: {exc})", case)
                return False
            self.result.ran.append("contract: fails on NumPy arrays; judged with torch tensors (CPU)")
        again = self.rows(case, inst, u, generators=self.generators, order=order)
        same = all(np.array_equal(a, b) for a, b in zip(first, again))
        self.statistical = self.generator
        if not same and self.generator:
            self.result.findings.append(
                Finding(
                    "rng",
                    "contract",
                    "the same generator seed gave different outputs: the kernel "
                    "draws randomness besides its generator (a seeded request would not replay)",
                    case.name,
                )
            )
        elif not same:
            self.result.findings.append(
                Finding(
                    "rng",
                    "contract",
                    "the same uniforms gave different outputs: the kernel draws "
                    "randomness besides its uniforms; judged by statistics",
                    case.name,
                )
            )
            self.statistical = True
        elif not self.generator:
            moved = self.rows(case, inst, u, generators=self.generators)  # the same rows in another batch order
            differ = [int(r) for r in np.flatnonzero((moved[0] != first[0]).any(axis=1) | (moved[1] != first[1]))]
            if differ:
                r = differ[0]
                self.breach(
                    f"batch rows are not independent: row {case.labels[inst[r]]} with the same uniforms "
                    f"gave {first[0][r].tolist()} in one batch order and {moved[0][r].tolist()} in "
                    f"another ({len(differ)} of {len(inst)} rows differ): a row reads another row's "
                    f"inputs",
                    case,
                )
                return False
        kind = "a generator" if self.generator else "explicit uniforms"
        self.result.ran.append(f"contract: {case.name}: {len(inst)} rows twice, {kind}, {self.arrays} arrays")
        return True

    # -- exact from uniforms --------------------------------------------------------------------
    def coin_pieces(self, case, insts, accept_pts):
        """For every (instance, position) reachable under the kernel: the pieces of 'draft i
        accepted' along coin i; ``accept_pts`` [n, k] is filled with a point of each accept set."""
        k = case.k
        pieces: dict = {}
        for i in range(k):
            probs = [
                (b, i)
                for b in insts
                if i < len(case.drafts(b)) and all(not np.isnan(accept_pts[b, j]) for j in range(i))
            ]
            if not probs:
                break
            probes = [
                probe_points([kc.acceptance(case.p[b, i], case.q[b, i], case.drafts(b)[i])], grid_points(case))
                for b, _ in probs
            ]

            def evaluate(ids, vals, probs=probs, i=i):
                u = np.full((len(ids), k + 1), 0.5, dtype=np.float32)
                bs = np.array([probs[j][0] for j in ids], dtype=np.int64)
                u[:, :i] = accept_pts[bs, :i]
                u[:, i] = vals
                _, nacc = self.rows(case, bs, u, batch=self.scan_batch)
                return (nacc > i).astype(np.int64)

            for (b, _), pc in zip(probs, segments(evaluate, probes)):
                pieces[(b, i)] = pc
                acc = [(m, s) for s, lab, m in zip(pc.starts, pc.labels, pc.measures()) if lab == 1]
                if acc:
                    m, s = max(acc, key=lambda t: t[0])
                    accept_pts[b, i] = np.float32(s + m / 2)
        return pieces

    def emission_pieces(self, case, insts, accept_pts, coin):
        """For every (instance, accepted count j) the kernel reaches: the pieces of its output
        along the final uniform, with coins < j in their accept sets and coin j rejecting."""
        V, k = case.vocab_size, case.k
        probs, bases = [], []
        for b in insts:
            kb = len(case.drafts(b))
            for j in range(kb + 1):
                if any(np.isnan(accept_pts[b, i]) for i in range(j)):
                    break
                base = np.full(k + 1, 0.5, dtype=np.float32)
                base[:j] = accept_pts[b, :j]
                if j < kb:
                    pc = coin[(b, j)]
                    rej = [(m, s) for s, lab, m in zip(pc.starts, pc.labels, pc.measures()) if lab == 0]
                    if not rej:
                        continue
                    m, s = max(rej, key=lambda t: t[0])
                    base[j] = np.float32(s + m / 2)
                probs.append((b, j))
                bases.append(base)
        probes = [probe_points(kc.emission_breakpoints(case, b, j), grid_points(case)) for b, j in probs]
        bases = np.array(bases)

        def evaluate(ids, vals):
            u = bases[ids].copy()
            u[:, k] = vals
            bs = np.array([probs[j][0] for j in ids], dtype=np.int64)
            out, nacc = self.rows(case, bs, u, batch=self.scan_batch)
            return nacc * (V + 1) + out[np.arange(len(ids)), nacc] + 1

        return dict(zip(probs, segments(evaluate, probes))), dict(zip(probs, bases))

    def kernel_law(self, case, b, coin, emission) -> dict | None:
        """{(j, y): probability} from the pieces; None if an emission piece has another count."""
        V, law, reach = case.vocab_size, {}, 1.0
        kb = len(case.drafts(b))
        for j in range(kb + 1):
            accept = (
                1.0 if j == kb else float(sum(m for lab, m in zip(coin[(b, j)].labels, coin[(b, j)].measures()) if lab))
            )
            stop = reach * (1.0 - accept) if j < kb else reach
            if stop > 0:
                if (b, j) not in emission:
                    return None
                for label, m in emission[(b, j)].law().items():
                    n, y = divmod(label, V + 1)
                    if n != j:
                        return None
                    law[(j, y - 1)] = law.get((j, y - 1), 0.0) + stop * m
            reach *= accept
            if reach == 0:
                break
        return law

    def spot_check(self, case, insts, coin, emission) -> set:
        """Instances whose random uniform rows disagree with the factorized law's prediction."""
        V, k = case.vocab_size, case.k
        n = min(self.budget.spot_rows, max(32, self.budget.spot_bytes // row_bytes(case)))
        inst = np.repeat(np.array(insts, dtype=np.int64), n)
        u = self.spot_rng.random((len(inst), k + 1), dtype=np.float32)
        out, nacc = self.rows(case, inst, u, batch=self.scan_batch)
        bad = set()
        for r, b in enumerate(inst.tolist()):
            kb = len(case.drafts(b))
            j = 0
            while j < kb and (b, j) in coin and coin[(b, j)].label_at([u[r, j]])[0] == 1:
                j += 1
            if (b, j) not in emission:
                bad.add(b) if int(nacc[r]) != j else None
                continue
            want = int(emission[(b, j)].label_at([u[r, k]])[0])
            if int(nacc[r]) * (V + 1) + int(out[r, nacc[r]]) + 1 != want:
                bad.add(b)
        return bad

    def edges(self, case, insts, accept_pts, bases):
        """Measure-zero probes: u = 0 and 1 - 2^-24 on each coin and each final uniform. A row
        that deviates there is reported as a measure-zero event only if it keeps to the rule at
        interior uniforms of the same cell, in the same batch (``deviation_inside``)."""
        k = case.k
        rows, what = [], []
        for b in insts:
            xs = case.drafts(b)
            for i, x in enumerate(xs):
                if any(np.isnan(accept_pts[b, j]) for j in range(i)):
                    break
                p, q = float(case.p[b, i, x]), float(case.q[b, i, x])
                if q <= 0:  # not a draw from q: q_zero_behaviour reports it
                    continue
                for u_i in (0.0, float(FLOAT32_ONE_MINUS)):
                    u = np.full(k + 1, 0.5, np.float32)
                    u[:i], u[i] = accept_pts[b, :i], u_i
                    rows.append((b, u))
                    what.append(("coin", b, i, u_i, u_i * q < p))
            for (bb, j), base in bases.items():
                if bb != b:
                    continue
                for u_k in (0.0, float(FLOAT32_ONE_MINUS)):
                    u = base.copy()
                    u[k] = u_k
                    rows.append((b, u))
                    what.append(("final", b, j, u_k, None))
        if not rows:
            return
        inst, U = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
        order = self.contract_rng.permutation(len(rows))
        out, nacc = self.rows(case, inst, U, order=order)
        deviating = [r for r, w in enumerate(what) if self.deviates(case, w, out[r], int(nacc[r]))]
        inside = self.deviation_inside(case, inst, U, order, what, deviating)
        for r in deviating:
            if r not in inside:
                self.measure_zero_event(case, what[r], out[r], int(nacc[r]))

    @staticmethod
    def deviates(case, what, out_row, n: int) -> bool:
        """Whether a row's output breaks the rule's decision of its probe ``what``: a coin decided
        the other way, or a token of probability 0 emitted."""
        kind, b, i, _, rule_accepts = what
        if kind == "coin":
            return (n > i) != rule_accepts
        xs = case.drafts(b)
        w = kc.emission_weights(case.p[b, n], case.q[b, n] if n < len(xs) else None)
        return bool(w[int(out_row[n])] <= 0)

    def measure_zero_event(self, case, what, out_row, n: int) -> None:
        kind, b, i, u, _ = what
        if kind == "coin":
            x = case.drafts(b)[i]
            p, q = float(case.p[b, i, x]), float(case.q[b, i, x])
            verb = "accepts" if n > i else "rejects"
            self.edge(
                case,
                b,
                f"{verb} draft {x} at position {i} (p(x) = {p:.3g}, q(x) = {q:.3g}) when "
                f"its coin is {u:.8g}, where u q(x) < p(x) says otherwise (probability 2^-24 "
                f"per such draft on the float32 grid; then emits "
                f"{list(case.drafts(b)[:n]) + [int(out_row[n])]})",
                "measure-zero",
            )
        else:
            self.edge(
                case,
                b,
                f"emits token {int(out_row[n])}, of probability 0, at accepted count {n} with "
                f"final uniform {u:.8g} (probability 2^-24 on the float32 grid)",
                "measure-zero",
            )

    @staticmethod
    def rule_cell(case, what) -> tuple[int, float, float]:
        """(the uniform's column, lo, hi): the cell of the rule around an edge probe, on which the
        rule decides as at the probe: [0, t) or [t, 1) for a coin with acceptance t; the emitted
        token's interval of the cumulative sum for the final uniform."""
        kind, b, i, u, rule_accepts = what
        if kind == "coin":
            t = min(1.0, kc.acceptance(case.p[b, i], case.q[b, i], case.drafts(b)[i]))
            return i, *((0.0, t) if rule_accepts else (t, 1.0))
        xs = case.drafts(b)
        c = np.cumsum(kc.emission_weights(case.p[b, i], case.q[b, i] if i < len(xs) else None))
        y = min(int(np.searchsorted(c, u * c[-1], side="right")), len(c) - 1)
        return case.k, (float(c[y - 1] / c[-1]) if y else 0.0), float(c[y] / c[-1])

    def deviation_inside(self, case, inst, U, order, what, deviating) -> set:
        """The deviating edge rows that deviate at interior uniforms of the same cell too
        (``INTERIOR`` of the way across it, the row's batch unchanged): not measure-zero. Their
        law where they sit is measured (``law_where_it_sits``, up to ``rescans`` rows a case): a
        distribution finding where it differs from the rule's, else the deviation is another
        order along the uniform (noted); rows past the cap are a shortfall."""
        flagged = {b for _, c, b, *_ in self.flagged_instances if c is case}
        flagged |= {b for b in range(case.n) if case.q_zero(b)}  # no law: q_zero_behaviour judges them
        if not deviating:
            return set()
        cells = {r: self.rule_cell(case, what[r]) for r in deviating}
        inside = set()
        for f in INTERIOR:
            moved = U.copy()
            for r, (col, lo, hi) in cells.items():
                moved[r, col] = min(np.float32(lo + (hi - lo) * f), np.nextafter(np.float32(hi), np.float32(0)))
            out, nacc = self.rows(case, inst, moved, order=order)
            inside |= {r for r in deviating if self.deviates(case, what[r], out[r], int(nacc[r]))}
        measure = sorted(r for r in inside if inst[r] not in flagged)  # the others' law is a finding already
        chunk = self.chunk_rows(case)
        where = np.argsort(order)
        for n, r in enumerate(measure):
            if n >= self.budget.rescans:
                self.result.shortfalls.append(
                    f"{case.name}: {len(measure) - n} more edge rows deviate at interior uniforms too; "
                    f"their law where they sit not measured (the first {n} were)"
                )
                break
            start = int(where[r]) // chunk * chunk
            members = order[start : start + chunk]
            label = f"{case.labels[inst[r]]}, row {int(where[r]) - start} of a batch of {len(members)} edge probes"
            self.law_where_it_sits(case, int(inst[r]), inst[members], U[members], int(where[r]) - start, label)
        return inside

    def note_order(self, case, coin, emission) -> None:
        """Say so when the kernel maps a uniform to outcomes in another order than the rule's
        (accept below the threshold; tokens in vocabulary order along the last uniform): its law
        may still be the rule's, but its measure-zero points and its replay of another engine's
        uniforms differ."""
        V, moved = case.vocab_size, 0.0
        for (b, i), pc in coin.items():
            if case.q_zero(b):  # q_zero_behaviour reports these
                continue
            t = kc.acceptance(case.p[b, i], case.q[b, i], case.drafts(b)[i])
            ends = np.append(pc.starts[1:].astype(np.float64), 1.0)
            for lo, hi, lab in zip(pc.starts.astype(np.float64), ends, pc.labels):
                inside = max(0.0, min(hi, t) - lo)  # the rule accepts on [0, t)
                moved += (hi - lo - inside) if lab == 1 else inside
        for (b, j), pc in emission.items():
            xs = case.drafts(b)
            c = np.cumsum(kc.emission_weights(case.p[b, j], case.q[b, j] if j < len(xs) else None))
            mids = (pc.starts.astype(np.float64) + np.append(pc.starts[1:].astype(np.float64), 1.0)) / 2
            rule = np.minimum(np.searchsorted(c, mids * c[-1], side="right"), V - 1)
            moved += float(pc.measures()[(pc.labels % (V + 1)) - 1 != rule].sum())
        if moved > tolerance(case) * max(1, len(coin) + len(emission)):
            self.result.ran.append(
                f"order: {case.name}: the kernel maps its uniforms to outcomes in another "
                f"order than the rule's (measure {moved:.3g} placed elsewhere along the "
                f"uniforms; judged by its law)"
            )

    def q_zero_behaviour(self, case, b, coin, emission) -> None:
        """A drafted token with q(x) = 0: accepted (an edge finding: the reference rejects it),
        and, once rejected, what is emitted: from the residual max(p - q, 0) (another law is a
        distribution finding), or, when that is empty, from p (another choice is an edge finding:
        the engines' fallbacks differ)."""
        i = next(i for i, x in enumerate(case.drafts(b)) if case.q[b, i, x] <= 0)
        if (b, i) not in coin:
            return
        x = case.drafts(b)[i]
        pc = coin[(b, i)]
        acc = float(sum(m for lab, m in zip(pc.labels, pc.measures()) if lab))
        if acc >= GRID_PROBABILITY:  # below: a float32 grid point, the measure-zero probes' to report
            self.edge(
                case,
                b,
                f"accepts drafted token {x}, whose q(x) = 0 (p(x) = {case.p[b, i, x]:.3g}), with "
                f"probability {acc:.6g}; the reference rejects it (p / 0 is not a ratio)",
                "q-zero-draft",
            )
        if (b, i) not in emission:
            return
        empty = np.maximum(case.p[b, i].astype(np.float64) - case.q[b, i], 0).sum() <= 0
        want = kc.emission_weights(case.p[b, i], case.q[b, i])  # the residual, or p where it is empty
        got = np.zeros(case.vocab_size)
        for label, m in emission[(b, i)].law().items():
            n, y = divmod(label, case.vocab_size + 1)
            if n == i and 0 <= y - 1 < case.vocab_size:
                got[y - 1] += m
        tv = 0.5 * np.abs(got - want).sum()
        if tv <= tolerance(case):
            return
        top = [int(t) for t in np.argsort(-got)[:3] if got[t] > 0]
        if empty:
            self.edge(
                case,
                b,
                f"after rejecting it the residual max(p - q, 0) is empty; emits tokens {top} "
                f"(TV {tv:.3g} from p, which the reference emits from)",
                "degenerate-residual",
            )
            return
        self.result.findings.append(
            Finding(
                "exact-tv",
                "distribution",
                f"{case.labels[b]}: after rejecting drafted token {x} (q(x) = 0) emits tokens {top}: TV {tv:.3g} "
                f"from the residual max(p - q, 0), which a rejection samples from",
                case.name,
                {"instance": b, "tv": tv},
            )
        )

    def edge(self, case, b, message, check):
        self.result.findings.append(Finding(check, "edge", f"{case.labels[b]}: {message}", case.name, {"instance": b}))

    def judge_law(
        self, case, b, got: dict, method: str, n: int | None = None, biased: bool | None = None, label=None
    ) -> float:
        """Compare the kernel's law given instance b's drafts (exact, or empirical with the
        chi-square's verdict ``biased``) with the rule's; a distribution finding if it differs
        (named ``label``, default the instance's). Returns the TV between the two laws."""
        label = label or case.labels[b]
        want = kc.rule_law(case, b)
        tv = stats.tv_distance(got, want)
        r = self.result
        if method == "exact":
            r.exact_tv_max = max(r.exact_tv_max or 0.0, tv)
            biased = tv > tolerance(case)
        if biased:
            r.findings.append(
                Finding(
                    "exact-tv" if method == "exact" else "chi-square",
                    "distribution",
                    f"{label}: the output law given the drafts differs from the token-wise rule's "
                    f"(TV {tv:.3g}{', ' + method if method != 'exact' else ''})",
                    case.name,
                    {"instance": b, "tv": tv},
                )
            )
            self.flagged_instances.append((case.vocab_size * case.k, case, b, got, want, tv, method, n))
        got_len = sum((j + 1) * v for (j, _), v in got.items())
        want_len = sum((j + 1) * v for (j, _), v in want.items())
        r.mean_tokens_per_round[f"{case.name}: {label}"] = (got_len, want_len)
        return tv

    def exact_case(self, case: kc.KernelCase) -> None:
        laws = [b for b in range(case.n) if not case.q_zero(b)]
        accept_pts = np.full((case.n, case.k), np.nan, dtype=np.float32)
        coin = self.coin_pieces(case, list(range(case.n)), accept_pts)
        emission, bases = self.emission_pieces(case, list(range(case.n)), accept_pts, coin)
        for b in range(case.n):
            if case.q_zero(b):
                self.q_zero_behaviour(case, b, coin, emission)
        self.note_order(case, coin, emission)
        bad = self.spot_check(case, laws, coin, emission)
        if bad and self.scan_batch > 1:
            bad = self.measure_again(case, sorted(bad), accept_pts, coin, emission, bases)
        stat, measured = [], []
        for b in laws:
            got = None if b in bad else self.kernel_law(case, b, coin, emission)
            if got is None:
                stat.append(b)
            else:
                measured.append(self.judge_law(case, b, got, "exact"))
        if stat:
            self.result.ran.append(
                f"exact: {case.name}: {counted(len(stat), 'instance')} whose output is not a "
                f"function of the first rejection and the final uniform; by statistics"
            )
            self.statistics(case, stat, uniforms=True)
        self.edges(case, range(case.n), accept_pts, bases)
        self.result.ran.append(
            f"exact from uniforms: {case.name} ({case.shape_text()}), "
            f"{counted(len(laws), 'law')}, {measured_tv_words(measured, tolerance(case))}"
        )
        if case.batches:
            skip = {b for b in range(case.n) if case.q_zero(b)} | bad | set(stat)
            self.batch_rows(case, coin, emission, skip)

    def measure_again(self, case, insts: list, accept_pts, coin, emission, bases) -> set:
        """Instances whose random rows disagreed with their pieces, scanned again one row a call
        (batch position 0: a kernel whose rows depend on where they sit in the scans' batches of
        ``scan_rows`` then shows a function, and the batch rows judge the rest); their pieces
        replaced in ``coin`` / ``emission`` / ``bases``; the instances that still disagree."""
        again = np.full_like(accept_pts, np.nan)
        self.scan_batch = 1
        try:
            coin2 = self.coin_pieces(case, insts, again)
            emission2, bases2 = self.emission_pieces(case, insts, again, coin2)
            bad = self.spot_check(case, insts, coin2, emission2)
        finally:
            self.scan_batch = self.budget.scan_rows
        for pieces, fresh in ((coin, coin2), (emission, emission2), (bases, bases2)):
            for key in [key for key in pieces if key[0] in insts]:
                del pieces[key]
            pieces.update(fresh)
        accept_pts[insts] = again[insts]
        self.result.ran.append(
            f"exact: {case.name}: {counted(len(insts), 'instance')} disagreed with their pieces at batches of "
            f"{self.budget.scan_rows} rows; measured again one row a call ({len(bad)} still disagree)"
        )
        return bad

    def law_where_it_sits(self, case, b: int, rows, uniforms, position: int, label: str) -> None:
        """Instance b's law at ``position`` of the batch ``rows`` (instance ids) with the other
        rows' uniforms held at ``uniforms``: the scans run with only that row's uniforms varied,
        one call per probe, and the law is judged as any (``judge_law``, named ``label``). Rows of
        more than ``spot_bytes`` together, or a law that does not factorize, are a shortfall."""
        if len(rows) * row_bytes(case) > self.budget.spot_bytes:
            self.result.shortfalls.append(f"{case.name}: {label}: its batch is too large to measure its law there")
            return
        self.pinned = (np.asarray(rows), np.asarray(uniforms, dtype=np.float32), position)
        try:
            accept_pts = np.full((case.n, case.k), np.nan, dtype=np.float32)
            coin = self.coin_pieces(case, [b], accept_pts)
            emission, _ = self.emission_pieces(case, [b], accept_pts, coin)
            got = self.kernel_law(case, b, coin, emission)
        finally:
            self.pinned = None
        if got is None:
            self.result.shortfalls.append(
                f"{case.name}: {label}: its output there is not a function of its own uniforms"
            )
            return
        tv = self.judge_law(case, b, got, "exact", label=label)
        self.result.ran.append(f"where it sits: {case.name}: {label}: TV {tv:.3g} from the rule's law")

    # -- batch rows -----------------------------------------------------------------------------
    def predicted(self, case, rows: np.ndarray, U: np.ndarray, coin, emission) -> np.ndarray:
        """The labels (nacc * (V + 1) + token + 1) the instances' pieces give batch rows ``rows``
        at uniforms ``U`` [C, B, k + 1] (-1 where the pieces do not say)."""
        k = case.k
        want = np.full(U.shape[:2], -1, dtype=np.int64)
        for b in np.unique(rows).tolist():
            at = rows == b
            u = U[:, at].reshape(-1, k + 1)
            j, alive = np.zeros(len(u), dtype=np.int64), np.ones(len(u), dtype=bool)
            for i in range(len(case.drafts(b))):
                ok = coin[(b, i)].label_at(u[:, i]) == 1 if (b, i) in coin else np.zeros(len(u), bool)
                alive &= ok
                j += alive
            got = np.full(len(u), -1, dtype=np.int64)
            for jj in np.unique(j).tolist():
                if (b, jj) in emission:
                    got[j == jj] = emission[(b, jj)].label_at(u[j == jj, k])
            want[:, at] = got.reshape(len(U), -1)
        return want

    def batch_rows(self, case, coin, emission, skip: set) -> None:
        """Every row of batches of B rows (each of ``case.batches``; row r instance r mod n) on
        ``batch_calls`` uniform sets, against its instance's function of its own uniforms (the
        pieces its law was measured from, at small batches). Where rows disagree, the law where
        they sit (``law_where_it_sits``) of the first disagreeing row of each batch size in turn,
        ``rescans`` rows a case: a distribution finding where it differs from the rule's; rows
        left unmeasured with no such finding are a shortfall. Deterministic (no false-fail): a
        row that reads another row's inputs or uniforms disagrees on most uniform sets."""
        V, k, calls = case.vocab_size, case.k, self.budget.batch_calls
        checked, disagreeing = 0, []  # (B, rows, U, wrong [C, B]) of the sizes with disagreeing rows
        for B in case.batches:
            rows = np.arange(B) % case.n
            U = np.random.default_rng(kernel_stream(self.seed, "batch rows", B)).random((calls, B, k + 1), np.float32)
            out, nacc = self.batches(case, rows, U)
            got = nacc * (V + 1) + np.take_along_axis(out, nacc[..., None], axis=2)[..., 0] + 1
            want = self.predicted(case, rows, U, coin, emission)
            want[:, np.isin(rows, list(skip))] = -1
            checked += int((want >= 0).any(axis=0).sum())
            if ((want >= 0) & (got != want)).any():
                disagreeing.append((B, rows, U, (want >= 0) & (got != want)))
        before = len(self.result.flagged())
        for B, rows, U, wrong in disagreeing[: self.budget.rescans]:
            r = int(np.flatnonzero(wrong.any(axis=0))[0])
            c = int(np.flatnonzero(wrong[:, r])[0])
            self.law_where_it_sits(
                case, int(rows[r]), rows, U[c], r, f"{case.labels[rows[r]]}, row {r} of a batch of {B}"
            )
        total = sum(int(w.any(axis=0).sum()) for *_, w in disagreeing)
        measured = min(len(disagreeing), self.budget.rescans)
        if total > measured and len(self.result.flagged()) == before:
            self.result.shortfalls.append(
                f"{case.name}: {total - measured} batch rows disagree with their instance's function; "
                f"their law where they sit not measured"
            )
        self.result.ran.append(
            f"batch rows: {case.name}: batches of {', '.join(map(str, case.batches))} rows, {calls} calls each: "
            f"{checked:,} rows against their instance's function of its own uniforms, {total} disagree"
        )

    def pairs(self, case) -> None:
        """Rows are independent: ``pair_calls`` batches of the largest batch size of identical rows
        (instance 0) and the disjoint pairs (r, r + t) at each offset t (1 and the batch tiles,
        32, 64, ... up to half the batch);
        the joint law of a pair's (accepted, token) against the product of the rule's (a chi-square,
        its false-fail rate the budget's over ``PAIR_SHARE`` split over the offsets): a distribution
        finding where rows are not independent draws of the rule's law."""
        B, calls, V = max(case.batches), self.budget.pair_calls, case.vocab_size
        offsets = (1, *(2**j for j in range(5, B.bit_length()) if 2**j <= B // 2))  # 1, 32, 64, ..., B / 2
        node = kernel_stream(self.seed, "batch pairs")
        got = self.call(
            kernel_pairs_task,
            case,
            0,
            B,
            calls,
            node,
            self.arrays,
            self.generator,
            self.budget.device,
            offsets,
            seconds=self.budget.call_limit_s * calls,
        )
        if got[0] == "breach":
            raise ContractBreach(got[1])
        law = {j * (V + 1) + y: v for (j, y), v in kc.rule_law(case, 0).items()}
        want = {f"{a} {b}": pa * pb for a, pa in law.items() for b, pb in law.items()}
        per_check = stats.split_budget(self.budget.false_fail_rate / PAIR_SHARE, len(offsets))
        seen = []
        for t in offsets:
            counts = {f"{a} {b}": n for (a, b), n in got[1][t].items()}
            n = sum(counts.values())
            test = stats.chi_square_test(counts, want, false_fail_rate=per_check)
            seen.append(stats.min_discrepancy_chi_square(n, want, per_check, POWER_FALSE_PASS_RATE))
            if not test.passed:
                tv = 0.5 * sum(abs(counts.get(key, 0) / n - want.get(key, 0.0)) for key in set(counts) | set(want))
                self.result.findings.append(
                    Finding(
                        "batch-pairs",
                        "distribution",
                        f"{case.labels[0]}: rows r and r + {t} of batches of {B} identical rows are not "
                        f"independent draws of the rule's law (joint TV {tv:.3g} from the product of the "
                        f"rule's over {n:,} pairs; {test.detail})",
                        case.name,
                        {"instance": 0, "tv": tv},
                    )
                )
        self.result.ran.append(
            f"batch pairs: {case.name}: {calls} batches of {B} identical rows, pairs at offsets "
            f"{', '.join(map(str, offsets))}: each sees joint TV {max(seen):.3g} (power "
            f"{1 - POWER_FALSE_PASS_RATE:g}, false-fail {per_check:.2g} per offset)"
        )

    # -- statistics -----------------------------------------------------------------------------
    def statistics(self, case: kc.KernelCase, insts: list, uniforms: bool = False) -> None:
        """The sequential chi-square on each instance: looks at n_min, 2 n_min, ... rows, until
        a look fails, or the power reaches the budget's ``detect_tv``, or ``n_max``; every look
        draws from its own node, ``kernel_stream(seed, "statistics", case, instance, look)``."""
        b_ = self.budget
        for b in insts:
            want = {f"{j} {y}": v for (j, y), v in kc.rule_law(case, b).items()}
            detect = detect_tv_for(case, b_)
            sizes, per_check = planned_looks(want, b_, max(1, self.stat_checks), detect)
            counts: dict = {}
            done, result = 0, None
            for look, n in enumerate(sizes):
                chunks = -(-(n - done) // self.chunk_rows(case))
                node = kernel_stream(self.seed, "statistics", self.case_index, b, look)
                got = self.call(
                    kernel_counts_task,
                    case,
                    b,
                    n - done,
                    node,
                    self.arrays,
                    self.chunk_rows(case),
                    self.generator,
                    self.budget.device,
                    seconds=self.budget.call_limit_s * chunks,
                )
                if got[0] == "breach":
                    raise ContractBreach(got[1])
                for (j, y), c in got[1].items():
                    counts[f"{j} {y}"] = counts.get(f"{j} {y}", 0) + c
                done = n
                result = stats.chi_square_test(counts, want, false_fail_rate=per_check)
                if (
                    not result.passed
                    or stats.min_discrepancy_chi_square(done, want, per_check, POWER_FALSE_PASS_RATE) <= detect
                ):
                    break
            power = stats.min_discrepancy_chi_square(done, want, per_check, POWER_FALSE_PASS_RATE)
            self.result.power.append({"case": f"{case.name}: {case.labels[b]}", "runs": done, "min_tv": power})
            r = self.result
            r.chi2_p_value_min = min(r.chi2_p_value_min if r.chi2_p_value_min is not None else 1.0, result.p_value)
            got = {tuple(map(int, key.split())): c / done for key, c in counts.items()}
            if not result.passed:
                r.samples_to_detect = done if r.samples_to_detect is None else min(r.samples_to_detect, done)
            elif power > detect:
                r.shortfalls.append(
                    f"{case.name}: {case.labels[b]}: {done} rows see TV {power:.3g}, not the budget's {detect:g}"
                )
            self.judge_law(case, b, got, "statistical", done, biased=not result.passed)
            self.result.ran.append(
                f"statistics: {case.name}: {case.labels[b]}: {done:,} rows, "
                f"sees TV {power:.3g} (false-fail {per_check:.2g} per look)"
            )

    # -- all -------------------------------------------------------------------------------------
    def run(self, stop_on_first: bool = False, only=None) -> BatteryResult:
        all_cases = cases(self.budget, self.seed, self.aim) if only is None else list(only)
        started = time.perf_counter()
        if not self.contract(all_cases[0]):
            self.result.ran.append("contract: breached; the remaining checks skipped")
            return self.result
        contract_pace = (time.perf_counter() - started) / max(1, self.runs_done)
        if only is None:  # the budget's cases: its sweeps' reach, those a generator kernel can be judged on
            self.result.reach = reach(self.budget, uniforms=not self.statistical)
            self.result.ran.insert(0, reach_line(self.budget, uniforms=not self.statistical))
            all_cases = [c for c in all_cases if not (self.statistical and kc.uniforms_only(c))]
        else:
            self.result.reach = cases_reach(all_cases)
        self.stat_checks = sum(c.n for c in all_cases)
        self.forecast(all_cases, contract_pace)
        for i, case in enumerate(all_cases):
            self.case_index = i
            try:
                if self.statistical:
                    self.statistics(case, [b for b in range(case.n) if not case.q_zero(b)])
                else:
                    self.exact_case(case)
                if case.batches:
                    self.pairs(case)
            except ContractBreach as exc:
                self.breach(str(exc), case)
                return self.result
            self.cover(case)
            if stop_on_first and self.result.flagged(stopping_kinds(stop_on_first)):
                break
        return self.result

    def forecast(self, all_cases: list, seconds_per_small_row: float) -> None:
        """Plan the cases' rows (``planned_rows``) and announce about how long they take, before
        they start: at the contract's pace per row, and, for cases whose rows exceed
        ``PREFLIGHT_ROW_BYTES``, at the costs timed here on the widest case (``wide_costs``: per
        row, per task), scaled by the bytes of each. Words for a progress line only: no result
        depends on a clock."""
        rows = {id(c): planned_rows(c, self.budget, self.statistical) for c in all_cases}
        self.plan(sum(rows.values()))
        widest = max(all_cases, key=row_bytes)
        wide = row_bytes(widest) > PREFLIGHT_ROW_BYTES
        per_row_byte = per_case_byte = 0.0
        if wide:
            per_row, per_task = self.wide_costs(widest)
            per_row_byte, per_case_byte = per_row / row_bytes(widest), per_task / case_bytes(widest)

        def seconds(case) -> float:
            if row_bytes(case) <= PREFLIGHT_ROW_BYTES or not per_row_byte:
                return rows[id(case)] * seconds_per_small_row
            tasks = TASKS_PER_SCAN * (2 * case.n * (case.k + 1)) + 2
            return rows[id(case)] * per_row_byte * row_bytes(case) + tasks * per_case_byte * case_bytes(case)

        total = sum(seconds(c) for c in all_cases)
        words = f"about {sum(rows.values()):,} kernel rows, about {total:,.0f} s at the pace of the first calls"
        if wide:
            words += (
                f"; {widest.name}: about {rows[id(widest)]:,} rows of {row_bytes(widest) / 2**20:,.0f} MiB, "
                f"about {seconds(widest):,.0f} s"
            )
        announce(words)

    def wide_costs(self, case: kc.KernelCase) -> tuple[float, float]:
        """(seconds per row, seconds per task) of ``case``'s calls: a task that only sends the case
        to the subject's process (``case_task``), then one that calls the kernel on one row (its
        first instance at uniforms 0.5), each the faster of two. Outputs unused; no rng drawn (no
        shuffle); a breach is left to the case's own calls to report (costs 0)."""
        u = None if self.statistical else np.full((1, case.k + 1), 0.5, dtype=np.float32)
        one = np.zeros(1, dtype=np.int64)
        planned_so_far = self.runs_done  # the timing calls are not planned rows

        def fastest(fn) -> float:
            times = []
            for _ in range(2):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            return min(times)

        try:
            per_task = fastest(lambda: self.call(case_task, case, seconds=self.budget.call_limit_s))
            task_and_row = fastest(lambda: self.rows(case, one, u, generators=self.generators, order=one))
        except ContractBreach:
            return 0.0, 0.0
        finally:
            self.runs_done = planned_so_far
        per_row = task_and_row - per_task
        return (per_row if per_row > 0 else task_and_row), per_task  # a noisy clock: the whole task a row

    def stopped_words(self) -> str:
        """What a time limit stopped, in rows (a kernel's plan is an estimate: ``planned_rows``)."""
        if self.runs_planned:
            return f"stopped by the time limit after {self.runs_done:,} of about {self.runs_planned:,} kernel rows"
        return "stopped by the time limit before the planned rows"

    def cover(self, case) -> None:
        """The case's ``coverage_entry``: origin from its name (aimed, generated, sweep, else
        fixed), judged exactly from the uniforms, or by statistics for a kernel that draws its own."""
        origin = next(
            (
                o
                for o, prefixes in (("aimed", "aimed"), ("generated", "generated"), ("sweep", kc.SWEEPS))
                if case.name.startswith(prefixes)
            ),
            "fixed",
        )
        seen = [row for row in self.result.power if str(row.get("case", "")).startswith(f"{case.name}: ")]
        self.result.cover(
            name=case.name,
            origin=origin,
            vocab=case.vocab_size,
            k=case.k,
            tokens=case.k + 1,
            judged="chi-square" if self.statistical else "exact from uniforms",
            runs=sum(row.get("runs", 0) for row in seen) or None,
            detect_tv=max((row["min_tv"] for row in seen), default=None),
            instances=case.n,
            **({"batches": list(case.batches)} if case.batches else {}),
        )


def _numpy_type_error(message: str) -> bool:
    """Whether a breach's message reads as a kernel that wants torch tensors (its raise site,
    " (at FILE:LINE in FUNCTION)", aside: a file named numpy_kernel.py says nothing)."""
    words = message.rsplit(" (at ", 1)[0]
    return any(w in words for w in ("TypeError", "AttributeError", "numpy"))


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------- the interface


def run(
    subject,
    budget,
    seed: int,
    *,
    deadline=None,
    stop_on_first: bool = False,
    prefetched: dict | None = None,
    cases=None,
    aim=None,
    **overrides,
) -> BatteryResult:
    """Every kernel check on every case (``cases``: these ``KernelCase`` instead of the
    budget's; ``aim``: an ``interfaces.Aim`` adds cases at the user's vocabulary and k); never
    raises for a broken subject. ``overrides`` replace fields of the kernel budget; an unknown
    one is a ValueError naming it."""
    from ...common.validation import check_seed, with_overrides

    seed = check_seed(seed)
    b = get_budget(budget)
    b = with_overrides("kernel", b, overrides)
    check_device(b.device)
    holder: list = []

    def make(handle):
        battery = KernelBattery(handle, b, seed, deadline)
        battery.aim = aim
        holder.append(battery)
        return battery

    result = run_in_subject(subject, make, lambda battery: battery.run(stop_on_first, cases))
    if holder and holder[0].flagged_instances:
        result.counterexample = describe(min(holder[0].flagged_instances, key=lambda t: t[0]))
    return result


def counterexample(subject, budget, seed: int, result: BatteryResult, aim=None) -> dict | None:
    """The smallest flagged instance, found during the run (its tensors and laws side by side)."""
    return result.counterexample


def _row(v: np.ndarray, limit: int = 8):
    if len(v) <= limit:
        return [round(float(x), 6) for x in v]
    top = np.argsort(-v)[:limit]
    return {int(i): round(float(v[i]), 6) for i in sorted(top)}


def describe(flagged) -> dict:
    """A finding as a kernel developer reads it: the instance's tensors (their names) and the
    laws of (accepted drafts, emitted token) side by side."""
    _, case, b, got, want, tv, method, n = flagged
    xs = case.drafts(b)
    keys = sorted(set(got) | set(want), key=lambda key: -abs(got.get(key, 0) - want.get(key, 0)))
    return {
        "method": "exact" if method == "exact" else "statistical",
        "vocab_size": case.vocab_size,
        "k": case.k,
        "window": case.k + 1,
        "prefix": [],
        "model": f"{case.name}: {case.labels[b]}",
        "draft_ids": list(xs),
        "p": [_row(case.p[b, i]) for i in range(len(xs) + 1)],
        "q": [_row(case.q[b, i]) for i in range(len(xs))],
        ("exact_tv" if method == "exact" else "empirical_tv"): tv,
        "samples": n,
        "distributions": [
            {
                "tokens": list(xs[:j]) + [y],
                "sampler": round(float(got.get((j, y), 0.0)), 9),
                "target": round(float(want.get((j, y), 0.0)), 9),
            }
            for j, y in keys[:64]
        ],
    }


def units(load, budget, stop_on_first: bool = False) -> list[tuple]:
    """None: the kernel battery runs whole (its calls are already batched)."""
    return []


__all__ = [
    "ALIASES",
    "GENERATOR_NAMES",
    "KERNEL_BUDGETS",
    "KERNEL_STREAMS",
    "as_round_sampler",
    "KernelBattery",
    "KernelBudget",
    "NAME",
    "PARAMETERS",
    "cases",
    "counterexample",
    "coverage",
    "get_budget",
    "kernel_rows_task",
    "kernel_stream",
    "run",
    "tolerance",
    "units",
    "uses_generator",
    "validate_outputs",
]
