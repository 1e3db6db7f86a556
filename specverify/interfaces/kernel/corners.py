"""The kernel interface's pairwise corners (``interfaces.corners`` says what a corner is and why):
k x batch (5 instances of ``k_sweep`` drafts, each position's rows its own, the last draft a value
edge, tiled to batches of every ``batch_sweep`` size, the largest included) and binned V x k (the
binned sweep's rows at the largest ``binned_sweep`` V after k - 1 certain acceptances on one-hot
rows). Dense V x anything and V x batch are left out: each probe of a scan is a whole row of
(2k + 1) V floats, so dense V = 32,768 at k = 16 is some 11 times the 171 s of its k = 1 sweep,
and a batch of 4,096 rows at V = 152,064 is 7.5 GB a call. Judged exactly from the uniforms, as
the kernel sweeps are.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...battery.budgets import KernelBudget
from ..corners import CORNER_PREFIX, CORNER_SEED
from .cases import KernelCase
from .sweeps import binned_sweep_case, k_sweep_cases

KERNEL_INSTANCES = 5
"""Instances of the k x batch corner: odd, so a row that reads row r - 2^j reads another one."""


def k_batch_corner(k: int, batches: tuple[int, ...]) -> KernelCase:
    """``KERNEL_INSTANCES`` instances of k drafts over V = 6 (``k_sweep_cases``' rows
    at k, from three seeds: a random chain and one whose last draft is a value edge each), tiled
    to batches of each of ``batches`` rows (row r instance r mod 5). Batch rows cost little at any
    k, so the corner takes every size of the batch sweep (its largest among them): a row that
    disagrees is measured where it sits at the first size that shows it, the smallest."""
    parts = [k_sweep_cases(k, seed=CORNER_SEED + 100 * i)[-1] for i in range(3)]
    n = KERNEL_INSTANCES

    def stacked(field: str) -> np.ndarray:
        return np.concatenate([getattr(c, field) for c in parts])[:n]

    labels = tuple(f"{label} #{i}" for i, c in enumerate(parts) for label in c.labels)[:n]
    V = parts[0].vocab_size
    return KernelCase(
        f"{CORNER_PREFIX} k={k} x batch {max(batches)}, V{V}",
        stacked("draft_ids"),
        stacked("q"),
        stacked("p"),
        labels,
        tuple(batches),
    )


def binned_k_corner(V: int, k: int) -> KernelCase:
    """The binned sweep's instances at V (``binned_sweep_case``: mass on the top ids,
    past 65,535 where V allows; value edges at the draft) as the last of k drafts, after k - 1
    drafts on one-hot rows p = q (accepted with certainty), each position's id its own: a kernel
    that reads a row one position off, or the bonus from row k - 1, moves the law."""
    last = binned_sweep_case(V)
    n = last.n
    ids = np.empty((n, k), np.int64)
    q = np.zeros((n, k, V), np.float32)
    p = np.zeros((n, k + 1, V), np.float32)
    for i in range(k - 1):
        x = (97 * (i + 1)) % (V - 8)  # clear of the top ids
        ids[:, i], q[:, i, x], p[:, i, x] = x, 1.0, 1.0
    ids[:, k - 1], q[:, k - 1], p[:, k - 1 :] = last.draft_ids[:, 0], last.q[:, 0], last.p
    return replace(last, name=f"{CORNER_PREFIX} binned V{V} x k={k}", draft_ids=ids, q=q, p=p)


def kernel_corner_cases(budget: KernelBudget) -> list[KernelCase]:
    """The kernel's corners (k x batch, binned V x k; see the module's docstring), those whose
    two dimensions the ``KernelBudget`` sweeps, where it has ``sweep_corners``."""
    if not budget.sweep_corners or budget.k_sweep < 2:
        return []
    out = [k_batch_corner(budget.k_sweep, tuple(budget.batch_sweep))] if budget.batch_sweep else []
    return out + ([binned_k_corner(max(budget.binned_sweep), budget.k_sweep)] if budget.binned_sweep else [])


__all__ = ["KERNEL_INSTANCES", "binned_k_corner", "k_batch_corner", "kernel_corner_cases"]
