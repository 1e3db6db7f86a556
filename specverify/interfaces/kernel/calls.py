"""The kernel battery's calls of the subject and what every check records.

``KernelCalls`` is the base of the kernel checks (``kernel.contract``, ``kernel.statistics``,
``kernel.scans``, ``kernel.edges``, ``kernel.exact``) and so of ``KernelBattery``: one run's
state (the streams, the arrays the kernel takes, whether it draws its own randomness, the
instances flagged), the kernel's rows in shuffled or given order, one call per uniform set on a
batch, a batch pinned to one row's uniforms; and the two records every check makes: a law judged
against the rule's (``judge_law``) and an edge finding (``edge``).
"""

from __future__ import annotations

import numpy as np

from ...battery import runner
from ...battery.budgets import KernelBudget
from ...battery.core import Finding
from ...battery.guards import ContractBreach
from ...battery.subject_calls import Battery
from ...laws import stats
from . import cases as kc
from .plan import kernel_stream, tolerance
from .tasks import kernel_batches_task, kernel_rows_task


class KernelCalls(Battery):
    """One kernel run's state and its calls (``battery.Battery``'s ``call``, ``now`` and
    ``breach``); the checks subclass it."""

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
        # (rows [N], uniforms [N, k + 1], position): rows() then varies that row only
        self.pinned: tuple[np.ndarray, np.ndarray, int] | None = None
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
        assert self.pinned is not None, "rows() calls this only while pinned"
        rows, base, position = self.pinned
        sets = np.repeat(np.asarray(base, dtype=np.float32)[None], len(uniforms), axis=0)
        sets[:, position] = uniforms
        out, nacc = self.batches(case, rows, sets, keep=position)
        return out[:, 0], nacc[:, 0]

    def edge(self, case, b, message, check):
        self.result.findings.append(Finding(check, "edge", f"{case.labels[b]}: {message}", case.name, {"instance": b}))

    def judge_law(
        self, case, b, got: dict, method: str, n: int | None = None, biased: bool | None = None, label=None, want=None
    ) -> float:
        """Compare the kernel's law given instance b's drafts (exact, or empirical with the
        chi-square's verdict ``biased``) with the rule's (``want``: the rule's law as the
        statistics judged it, e.g. binned); a distribution finding if it differs (named
        ``label``, default the instance's). Returns the TV between the two laws."""
        label = label or case.labels[b]
        want = kc.rule_law(case, b) if want is None else want
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


__all__ = ["KernelCalls"]
