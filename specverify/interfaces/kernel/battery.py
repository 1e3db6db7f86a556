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
5. **sweeps** (``kernel.sweeps.sweep_cases``, one dimension at a time; ``reach`` names how far):
   dense V, wide V with ids past 65,535, every k, and batch rows: every row of batches of each
   of ``batch_sweep`` sizes against its instance's function of its own uniforms (a row that
   disagrees is judged by its law where it sits), and rows of identical inputs tested pairwise
   for independence (``pairs``). The run's ``ran`` starts with the reach ("reach: dense V 4096,
   ..."). A kernel that draws its own gets the same box, judged by statistics (on the dense and
   binned sweeps the tokens of a row of many counted by id range: ``plan.statistical_law``), and
   its reach line says so. At thorough the pairwise corners too
   (``kernel.corners.kernel_corner_cases``: the largest k over every batch size, and over the
   widest binned V).

This module is the interface (``run``, ``counterexample``, ``units``, the parameters and
aliases detection reads, the budgets, reach and coverage) and ``KernelBattery``, which runs the
checks case by case and forecasts their rows. Each step is a class of its own part of this
package, each built on the one it calls: ``kernel.calls`` (the kernel's rows, the state, the laws
judged), ``kernel.statistics`` (the chi-square, batch pairs), ``kernel.scans`` (the law from
uniforms), ``kernel.edges`` (measure-zero events, q(x) = 0 drafts), ``kernel.exact`` (a case
judged from its uniforms, its batch rows), and ``kernel.contract`` beside them; the cases are
``kernel.cases`` and ``kernel.sweeps``, the corner cases ``kernel.corners``, the streams and the
rows a case costs ``kernel.plan``, what runs in the subject's process ``kernel.tasks``, the
counterexample ``kernel.counterexample``.
"""

from __future__ import annotations

import time

import numpy as np

from ...battery import budgets
from ...battery.budgets import KernelBudget
from ...battery.core import BatteryResult, stopping_kinds
from ...battery.guards import ContractBreach
from ...battery.subject_calls import announce, run_in_subject
from ..corners import CORNER_PREFIX, corner_words
from . import cases as kc
from . import sweeps
from .contract import KernelContract
from .corners import kernel_corner_cases
from .counterexample import describe
from .exact import KernelExact
from .plan import (
    KERNEL_STREAMS,
    PREFLIGHT_ROW_BYTES,
    TASKS_PER_SCAN,
    case_bytes,
    cases,
    cases_reach,
    kernel_stream,
    planned_rows,
    row_bytes,
    statistical_instances,
    tolerance,
)
from .tasks import (
    GENERATOR_NAMES,
    as_round_sampler,
    case_task,
    check_device,
    kernel_rows_task,
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
KERNEL_BUDGETS = budgets.view("kernel")
"""The kernel sections of the named budgets (``budgets.TABLE``), by name."""


def get_budget(budget) -> KernelBudget:
    """The kernel section of a budget (``budgets.section``): by name (another interface's budget
    too), ``tv=X`` (statistics sized to see TV X), or a KernelBudget as it is; an unknown name is
    an InterfaceError naming ``budget`` and the budgets there are."""
    return budgets.section("kernel", budget)


def reach(budget) -> dict:
    """Each swept dimension's largest value at ``budget`` (a name or a KernelBudget):
    ``kernel.sweeps.reach``, e.g. {"dense V": 4096, "binned V": 152064, "k": 8, "batch": 1024};
    the same box for a kernel that takes uniforms and one that draws its own."""
    return sweeps.reach(get_budget(budget))


def reach_line(budget, uniforms: bool = True) -> str:
    """``reach`` as the result's ``ran`` says it: "reach: dense V 4096, binned V 152064, k 8,
    batch 1024" (dimensions not swept left out), judged exactly from the uniforms; ``uniforms``
    False, a kernel that draws its own, the same box and how it was judged: "..., batch 1024, by
    statistics (TV 0.1 per instance on the dense and binned sweeps, dense rows by id range)"."""
    b = get_budget(budget)
    words = ", ".join(f"{name} {value}" for name, value in reach(b).items() if value)
    if uniforms:
        return f"reach: {words}"
    wide = max(b.detect_tv, b.detect_tv_large)
    return f"reach: {words}, by statistics (TV {wide:g} per instance on the dense and binned sweeps, dense rows by id range)"


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


# --------------------------------------------------------------------------- the battery


class KernelBattery(KernelContract, KernelExact):
    """One run of the kernel checks on one subject (the parent's side; ``battery.Battery``'s
    ``call``, ``now`` and ``breach``): the contract on the first case, then each case exactly
    from its uniforms (``KernelExact``) or, for a kernel that draws its own, by statistics, and
    its batch pairs."""

    # -- all -------------------------------------------------------------------------------------
    def run(self, stop_on_first: bool | tuple[str, ...] = False, only=None) -> BatteryResult:
        all_cases = cases(self.budget, self.seed, self.aim) if only is None else list(only)
        started = time.perf_counter()
        if not self.contract(all_cases[0]):
            self.result.ran.append("contract: breached; the remaining checks skipped")
            return self.result
        contract_pace = (time.perf_counter() - started) / max(1, self.runs_done)
        if only is None:  # the budget's cases: its sweeps' reach, for either kind of kernel
            self.result.reach = reach(self.budget)
            self.result.ran.insert(0, reach_line(self.budget, uniforms=not self.statistical))
        else:
            self.result.reach = cases_reach(all_cases)
        self.stat_checks = sum(c.n for c in all_cases)
        self.forecast(all_cases, contract_pace)
        for i, case in enumerate(all_cases):
            self.case_index = i
            try:
                if self.statistical:
                    self.statistics(case, statistical_instances(case))
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
        rows = {id(c): planned_rows(c, self.budget, self.statistical, self.stat_checks) for c in all_cases}
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
            tasks = (3 if self.statistical else TASKS_PER_SCAN * 2 * (case.k + 1)) * case.n + 2  # looks / scans
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
                for o, prefixes in (("aimed", "aimed"), ("generated", "generated"), ("sweep", sweeps.SWEEPS))
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


# --------------------------------------------------------------------------- the interface


def run(
    subject,
    budget,
    seed: int,
    *,
    deadline=None,
    stop_on_first: bool | tuple[str, ...] = False,
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


def units(load, budget, stop_on_first: bool | tuple[str, ...] = False) -> list[tuple]:
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
