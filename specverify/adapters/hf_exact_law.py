"""The exact law of the target's first new tokens under a setting's processing, from the target's
own logits over every continuation (``exact_law``), grouped into cells of the prefix tree that
keep every expected count at ``MIN_CELL_COUNT`` or more (``cells``, ``cell_of``: an exact
coarsening, so the chi-square stays valid), and the chi-square of generated samples against it
(``distribution_test``). Part of ``hf_generate``'s check."""

from __future__ import annotations

import numpy as np

from ..laws import stats
from .hf_settings import FALSE_PASS_RATE, Setting, torch

MAX_CONTEXTS = 512


MIN_CELL_COUNT = 5


def last_logits(model, contexts: list[list[int]], chunk: int = 256) -> np.ndarray:
    """float32 logits after each context (all of one length), in batched uncached forwards."""
    rows = []
    for start in range(0, len(contexts), chunk):
        x = torch.tensor(contexts[start : start + chunk])
        rows.append(model(input_ids=x).logits[:, -1, :].float().numpy())
    return np.concatenate(rows)


def exact_law(target, prompt: list[int], setting: Setting, m: int, n: int) -> dict:
    """prefix -> the target's processed next-token distribution, for every prefix expanded.

    Depth by depth: all prefixes with positive probability when there are at most MAX_CONTEXTS,
    else the most probable ones among those with n * P(prefix) >= 2 * MIN_CELL_COUNT (a prefix
    rarer than that could not be split into testable cells anyway).
    """
    cond: dict[tuple, np.ndarray] = {}
    level = {(): 1.0}
    for depth in range(m):
        expand = sorted(level, key=lambda pre: -level[pre])
        if len(expand) > MAX_CONTEXTS:
            expand = [pre for pre in expand[:MAX_CONTEXTS] if n * level[pre] >= 2 * MIN_CELL_COUNT]
        if not expand:
            break
        rows = last_logits(target, [prompt + list(pre) for pre in expand])
        nxt = {}
        for pre, row in zip(expand, rows):
            cond[pre] = setting.process(row)
            if depth + 1 < m:
                for t in np.flatnonzero(cond[pre]):
                    nxt[pre + (int(t),)] = level[pre] * cond[pre][t]
        level = nxt
    return cond


def _bucket(prefix: tuple, m: int) -> tuple:
    """The cell 'prefix, then anything': -1 marks the free positions."""
    return prefix + (-1,) * (m - len(prefix))


def cells(cond: dict, m: int, n: int) -> dict[tuple, float]:
    """An exact partition of the m-token sequences into cells with expected count >= 5 at n.

    A leaf (a whole sequence) keeps its own cell when n * P >= MIN_CELL_COUNT; what its prefix
    does not keep goes to the prefix's rest cell ``_bucket(prefix)``, which itself moves up to the
    parent's when too small. The root's rest cell keeps whatever is left.
    """
    out: dict[tuple, float] = {}

    def walk(prefix: tuple, mass: float) -> float:
        rest = 0.0
        vec = cond.get(prefix)
        if vec is None:
            rest = mass
        else:
            for t in np.flatnonzero(vec):
                child, child_mass = prefix + (int(t),), mass * float(vec[t])
                if len(child) < m:
                    rest += walk(child, child_mass)
                elif n * child_mass >= MIN_CELL_COUNT:
                    out[child] = child_mass
                else:
                    rest += child_mass
        if prefix and n * rest < MIN_CELL_COUNT:
            return rest
        if rest > 0:
            out[_bucket(prefix, m)] = rest
        return 0.0

    walk((), 1.0)
    return out


def cell_of(sample: tuple, cond: dict, partition: dict) -> tuple:
    """The cell a generated sequence falls in; the sequence itself when the law gives it 0."""
    m = len(sample)
    for j in range(m):
        vec = cond.get(sample[:j])
        if vec is None:
            break
        if not 0 <= sample[j] < vec.size or vec[sample[j]] == 0:
            return sample  # impossible under the target: absent from the expected cells
    for j in range(m, -1, -1):
        key = _bucket(sample[:j], m)
        if key in partition:
            return key
    raise AssertionError(f"no cell holds {sample}")  # the root's rest cell always exists


def distribution_test(samples: list[tuple], cond: dict, partition: dict, rate: float) -> dict:
    mapped = [cell_of(s, cond, partition) for s in samples]
    test = stats.chi_square_test(mapped, partition, false_fail_rate=rate)
    n = len(samples)
    return {
        "n": n,
        "cells": len(partition),
        "passed": bool(test.passed),
        "p_value": float(test.p_value if test.p_value is not None else 0.0),
        "per_check_rate": rate,
        "tv": stats.tv_distance(stats.empirical_distribution(mapped), partition),
        "min_discrepancy": stats.min_discrepancy_chi_square(n, partition, rate, FALSE_PASS_RATE),
        "detail": test.detail,
    }
