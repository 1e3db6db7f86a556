"""Consecutive ``generate`` calls in one subject process (``mechanism_cases.consecutive_calls_case``):
the subject's side (``loop_consecutive_task``) and the parent's checks (``ConsecutiveChecks``).

An engine keeps state between calls (a sampler's generator, slot streams, a cache): a second
call must not replay the first's draws. Run r calls the loop twice on the case's batch with one
generator, ``default_rng(stream(node, r))`` (the second call continues it; ``node`` is
``seed_stream(seed, "seed-law and same-seed runs", 1)``, a child no other check draws from),
request 0 seeded with r:

- ``seeded-reproducibility`` (contract): the seeded request's tokens are the same in both calls;
- ``joint-law`` (distribution): each unseeded request that samples, its (first call, second
  call) outputs over the runs against the product of its law with itself, a chi-square at the
  battery's split rate (the case counts as a law case of as many tests as it has requests in
  ``LoopBattery.split``, more than it makes); its power in ``result.power``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...battery.core import POWER_FALSE_PASS_RATE
from ...battery.guards import ContractBreach, GuardStopped, guard_reason, message_of
from ...battery.seed_tree import stream
from ...laws import exact, stats
from .calls import LoopCalls, request_law
from .cases import LoopCase, seed_stream
from .tasks import guard_words, loop_call


def seeded_first(case: LoopCase, seed: int) -> list:
    """The case's requests with request 0 seeded with ``seed``."""
    first = case.requests[0]
    return [replace(first, params=replace(first.params, seed=int(seed))), *case.requests[1:]]


def loop_consecutive_task(subject, case: LoopCase, runs: int, node, call_limit: float):
    """Runs 0..runs-1 in the subject's process, each two calls of the batch ``seeded_first(case,
    r)`` with one generator ``default_rng(stream(node, r))``; (pairs of outcomes, breach or None,
    stopped: None, or why a guard ended the runs first: a call past ``call_limit``)."""
    out: list = []
    try:
        for r in range(runs):
            reqs = seeded_first(case, r)
            rng = np.random.default_rng(stream(node, r))
            first = loop_call(subject, case, reqs, rng, call_limit)
            out.append((first, loop_call(subject, case, reqs, rng, call_limit)))
    except GuardStopped as exc:
        return out, None, guard_reason(exc)
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return out, message_of(exc), None
    return out, None, None


class ConsecutiveChecks(LoopCalls):
    """The case judged across two consecutive calls (the module's docstring)."""

    def consecutive_case(self, case: LoopCase, per_check: float) -> None:
        b, r = self.budget, self.result
        runs = b.extra_samples or b.sweep_runs
        node = seed_stream(self.seed, "seed-law and same-seed runs", 1)
        try:
            pairs, breach, stopped = self.task(loop_consecutive_task, case, runs, node, b.call_limit_s, calls=2 * runs)
        except GuardStopped as exc:
            self.stopped(case, guard_words("consecutive calls", None, runs, "runs", guard_reason(exc)))
            return
        if breach:
            self.find("contract", "contract", breach, case)
        self.contracts(case, [o for pair in pairs for o in pair])
        if stopped:
            self.stopped(case, guard_words("consecutive calls", len(pairs), runs, "runs", stopped))
            return
        if not pairs:
            return
        replays = [(i, a[0][0], c[0][0]) for i, (a, c) in enumerate(pairs) if a[0][0] != c[0][0]]
        r.ran.append(f"seeded-reproducibility: {case.name}: {len(replays)} of {len(pairs)} seeds differ across calls")
        if replays:
            seed, one, two = replays[0]
            self.find(
                "seeded-reproducibility",
                "contract",
                f"a seeded request's tokens differ between two consecutive calls (seed {seed}: {list(one)} in the "
                f"first call, {list(two)} in the second)",
                case,
                {"request": 0, "seed": seed, "differ": len(replays)},
            )
        detect = []
        for i in range(1, len(case.requests)):
            law = request_law(case, i)
            if len(law) < 2:  # greedy or deterministic: nothing to be dependent
                continue
            want = {(x, y): pa * pb for x, pa in law.items() for y, pb in law.items()}
            samples = [(a[i][0], c[i][0]) for a, c in pairs]
            test = stats.chi_square_test(samples, want, false_fail_rate=per_check)
            p = test.p_value if test.p_value is not None else 0.0
            tv = min(stats.min_discrepancy_chi_square(len(samples), want, per_check, POWER_FALSE_PASS_RATE), 1.0)
            detect.append(tv)
            r.power.append(
                {
                    "case": case.name,
                    "request": i,
                    "check": "joint-law",
                    "runs": len(samples),
                    "min_detectable_tv": tv,
                    "false_fail_rate": per_check,
                    "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                    "kind": case.kind,
                }
            )
            r.ran.append(
                f"joint-law: {case.name}: request {i} across two calls: p-value {p:.3g} after {len(samples)} runs; "
                f"detects TV >= {tv:.3g} from independence with probability {1 - POWER_FALSE_PASS_RATE:g}"
            )
            if not test.passed:
                same = sum(x == y for x, y in samples)
                self.find(
                    "joint-law",
                    "distribution",
                    f"request {i}: its outputs in two consecutive calls are not independent draws of its law: "
                    f"p-value {p:.3g} < {per_check:.3g} after {len(samples)} runs ({same} equal in both calls)",
                    case,
                    {"request": i, "p_value": p, "equal": same},
                )
                break
        self.cover(case, "chi-square", len(pairs), max(detect) if detect else None)


__all__ = ["ConsecutiveChecks", "loop_consecutive_task", "seeded_first"]
