"""The round contract detector: 1 to k + 1 int tokens in range, no exception, no exit, no write
into the tables p_fn / q_fn hand out, every call within ``Budget.call_limit_s``; the same seed
replays the same rounds (``REPLAYED_CALLS`` of them), else the subject does not draw (only) from
its rng. What runs in the subject's process is ``round.tasks.contract_task``.
"""

from __future__ import annotations

import copy

import numpy as np

from ...battery.core import Finding
from ...battery.guards import ContractBreach
from .cases import WIDE_VOCAB, too_slow
from .sampling import RoundSampling
from .tasks import contract_task

REPLAYED_CALLS = 10
"""Each contract case's first rounds replayed from the same rng state: a different replay means
the subject does not draw (only) from its rng."""


class ContractDetector(RoundSampling):
    """The contract's rounds on every case, first of the detectors (``RoundBattery.run``)."""

    def contract_rounds(self, case, rng: np.random.Generator) -> tuple[dict, np.random.Generator]:
        """``contract_task``'s rounds for ``case``: its first call alone, under one call's limit
        (a call that hangs where the in-process alarm cannot reach it, in C or swallowing the
        alarm, is killed after one call's limit, not the whole contract's), then the rest."""
        b = self.budget
        first, rng = self.call(contract_task, case, b, rng, 1, seconds=2 * b.call_limit_s)
        if first["breach"] or b.contract_calls <= 1:
            return first, rng
        rest, rng = self.call(
            contract_task, case, b, rng, b.contract_calls - 1, seconds=b.contract_calls * b.call_limit_s
        )
        rounds = first["rounds"] + rest["rounds"]
        return {"breach": rest["breach"], "rounds": rounds, "seconds": first["seconds"] + rest["seconds"]}, rng

    def contract(self, cases) -> bool:
        """True when the interface held (False: a breach, recorded). Each case's first rounds
        are replayed from the same rng state: a different replay means the subject does not
        draw (only) from its rng."""
        b, rng = self.budget, np.random.default_rng(self.seed)
        unreproducible = []
        for case in cases:
            start = copy.deepcopy(rng)
            try:
                out, rng = self.contract_rounds(case, rng)
                self.speed.add(out["rounds"], out["seconds"])
                if not out["breach"]:
                    n = min(len(out["rounds"]), REPLAYED_CALLS)
                    replay, _ = self.call(contract_task, case, b, start, n, seconds=(n + 1) * b.call_limit_s)
                    out["breach"] = replay["breach"]
                    if replay["rounds"] != out["rounds"][:n]:
                        unreproducible.append(case.name)
            except ContractBreach as exc:
                out = {"breach": str(exc)}
            if out["breach"] and too_slow(out["breach"]) and case.model.vocab_size >= WIDE_VOCAB:
                self.too_slow.append(case.name)  # a sampler slow at a wide vocabulary: not judged there
                self.result.shortfalls.append(f"contract: {case.name}: {out['breach']}; not judged at this vocabulary")
                continue
            if out["breach"]:
                self.breach(out["breach"], case)
                return False
        if unreproducible:
            self.result.findings.append(
                Finding(
                    "rng",
                    "contract",
                    "does not draw from rng: not reproducible (the same seed replayed different rounds); "
                    "enumeration skipped, distribution judged by statistics",
                    unreproducible[0],
                    {"cases": unreproducible},
                )
            )
        self.result.ran.append(
            f"contract: up to {b.contract_calls} rounds on each of {len(cases)} "
            f"cases, {REPLAYED_CALLS} replayed, fresh copies of the tables, "
            f"{b.call_limit_s:g} s per call"
        )
        return True


__all__ = ["REPLAYED_CALLS", "ContractDetector"]
