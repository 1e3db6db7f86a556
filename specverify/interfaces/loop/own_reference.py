"""The engine's own reference: a loop judged against its own target-only path (``--reference``).

Without a reference, every law the loop battery judges is this project's target-only sampling
(``laws.requests.sequence_law``). With one (``reference=``: a function of the loop's interface,
``generate_target_only(target, draft, requests, k, rng)``, which may ignore the draft and k),
each law comes from the reference instead, run on the same requests, models and case:

- where the enumerator follows the reference (``loop.tasks.loop_enumerate_task``, the subject's
  task, in the reference's own process under the same guards), its exact law; a subject the
  enumerator follows too is judged by exact TV, one it cannot follow by the battery's chi-square
  against that law;
- where it cannot, ``budget`` runs of the reference (``loop_sample_task``): a two-sample
  chi-square (``laws.two_sample``) against the subject's runs, or a chi-square of those runs
  against the subject's exact law; the false-fail rate is the battery's per-check rate, the
  power (the TV seen with probability 0.95) in ``result.power`` with ``"against": "reference"``;
- per position (the sweeps judged per position, the engine-scale batches): the row is the
  reference's exact law of one token of the request (``wanted_row``).

The reference runs in a process of its own, started as the subject's is (a TARGET in a forked or
spawned child, ``battery.runner.Runner``; a callable handed over by fork), through the same tasks
and hang guards. A reference that raises, dies, hangs, returns junk or breaks stop / max_tokens
is a finding on the reference (``check`` "reference", ``kind`` "reference": never a verdict on
the subject) and a shortfall: the battery stops, INCONCLUSIVE unless the subject had already
been found NOT EXACT (``ReferenceBroken``).

Where the reference's law differs from this project's definition, the difference is a ``ran``
line and a note (``notes``), named where ``loop.semantics`` knows it
("your target-only sampling applies top-p before top-k"): information, not a finding.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np

from ...battery.core import POWER_FALSE_PASS_RATE, Finding
from ...battery.guards import ContractBreach, GuardStopped, guard_reason
from ...battery.seed_tree import stream
from ...battery.subject_calls import call_within, subject_process
from ...laws import exact
from ...laws.requests import sequence_law, step_distribution
from ...samplers.reference_loop import reads_no_tokens
from .calls import LoopCalls, request_law
from .cases import LoopCase
from .mechanism_cases import CONTINUOUS
from .semantics import named_difference
from .tasks import contract_problem, loop_enumerate_task, loop_sample_task, sample_calls

REFERENCE_STREAM = 64
"""The child of ``SeedSequence(seed)`` the reference's runs draw from (past ``loop.cases.SEED_STREAMS``),
one grandchild per case (the CRC-32 of its name) and purpose."""

CHECK = "reference"
"""The check and the kind of a finding on a broken reference (not a breaking kind)."""


class ReferenceBroken(Exception):
    """The reference raised, died, hung, returned junk or broke its contract: the battery stops."""


def reference_contract_problem(case: LoopCase, ids, outcome) -> str | None:
    """The first stop / max_tokens breach in one reference outcome (its tokens only: the
    reference's logprobs and counts are its own business), or None."""
    sub = replace(case, requests=tuple(case.requests[i] for i in ids))
    for i, row in enumerate(outcome):
        problem = contract_problem(sub, i, (row[0], None, None, None))
        if problem:
            return problem[1]
    return None


def marginal(joint: dict, i: int) -> dict:
    """Request i's law of tokens from a joint law of outcomes."""
    out: dict = {}
    for outcome, w in joint.items():
        out[outcome[i][0]] = out.get(outcome[i][0], 0.0) + w
    return out


class ReferenceCalls(LoopCalls):
    """The reference's side of the loop checks: ``wanted`` (a request's law), ``wanted_row``
    (one token's), ``reference_runs`` (when it cannot be enumerated); without a reference,
    this project's definition."""

    reference: Any = None
    """The engine's own target-only path (a started ``runner.Runner``), or None."""

    def reference_cache(self) -> dict:
        if not hasattr(self, "_reference_cache"):
            self._reference_cache: dict = {}
            self.notes: list[str] = []
            self.differing: set[str] = set()  # the cases where the reference's law is not the project's
        return self._reference_cache

    def rate_comparable(self, case: LoopCase) -> bool:
        """Whether tokens per pass may be judged against this project's reference loop on ``case``:
        without a reference, or where the reference's law is the project's (the reference loop's
        rate is that of this project's target law); said in ``ran`` otherwise."""
        if self.reference is None:
            return True
        self.reference_law(case, tuple(range(len(case.requests))))
        if case.name not in self.differing:
            return True
        self.result.ran.append(
            f"tokens-per-pass: {case.name}: not judged (your target-only law differs from the project's, "
            "whose reference loop's rate is the bar)"
        )
        return False

    def broken(self, case: LoopCase, words: str) -> None:
        """The reference broke on ``case``: a finding on it, a shortfall, and the battery stops."""
        self.result.findings.append(Finding(CHECK, CHECK, f"the reference {words}", case.name))
        self.result.shortfalls.append(
            f"{case.name}: the reference (the engine's own target-only path) is broken; the subject not judged "
            "against it from here on"
        )
        raise ReferenceBroken(words)

    def contracts(self, case: LoopCase, outcomes) -> None:
        """``LoopCalls.contracts``; with a reference, logprobs are not checked (they are the
        engine's own semantics, which this project's processed rows need not match), said once."""
        if self.reference is None:
            return super().contracts(case, outcomes)
        if not getattr(self, "said_logprobs", False):
            self.said_logprobs = True
            self.result.ran.append(
                "logprobs: not checked against this project's processed rows (judged against your reference)"
            )
        super().contracts(case, [tuple((row[0], None, *row[2:]) for row in outcome) for outcome in outcomes])

    def reference_call(self, case: LoopCase, task, *args, calls: int):
        """``task(reference, case, *args)`` in the reference's process under the subject's guards
        (``LoopCalls.task``); a death or a hang its guards stopped breaks the reference."""
        try:
            return call_within(
                self.reference,
                task,
                (case, *args),
                self.task_limit_s(calls),
                self.deadline,
                self.now,
                self.task_idle_s(),
            )
        except GuardStopped as exc:
            self.broken(case, f"hangs: {guard_reason(exc)}")
        except ContractBreach as exc:
            self.broken(case, f"died: {exc}")

    def reference_law(self, case: LoopCase, ids: tuple) -> dict | None:
        """The reference's exact joint law of the requests ``ids`` of ``case`` (cached), or None
        when the enumerator cannot follow it; ``ReferenceBroken`` when it breaks."""
        cache = self.reference_cache()
        key = ("law", case.name, id(case), ids)
        if key not in cache:
            b = self.budget
            status, value = self.reference_call(
                case, loop_enumerate_task, ids, b.max_paths, b.call_limit_s, calls=b.max_paths
            )
            if status == "breach":
                self.broken(case, f"broke its contract: {value}")
            if status == "guard":
                self.broken(case, f"hangs: {value}")
            if status == "ok":
                for outcome in value:
                    problem = reference_contract_problem(case, ids, outcome)
                    if problem:
                        self.broken(case, f"broke its contract: {problem}")
                self.note_difference(case, ids, value)
            cache[key] = (case, value if status == "ok" else None)
        return cache[key][1]

    def wanted(self, case: LoopCase, i: int, ids: tuple | None = None) -> dict | None:
        """Request i's law the subject is judged against: this project's (``request_law``), or
        with a reference its exact law of the requests ``ids`` (default: the whole batch), None
        when the enumerator cannot follow it (``reference_runs`` then)."""
        if self.reference is None:
            return request_law(case, i)
        ids = self.law_ids(case, i) if ids is None else ids
        law = self.reference_law(case, ids)
        return None if law is None else marginal(law, ids.index(i))

    def law_ids(self, case: LoopCase, i: int) -> tuple:
        """The requests whose joint law request i's is read from: the whole batch, or on a case
        with more requests than the enumerator follows jointly (``mechanism_cases.CONTINUOUS``,
        whose subject is judged by statistics for that reason) request i alone, each request
        enumerated on its own (a sum of paths over the requests, not their product: on the
        10-request case a fraction of a second against minutes; said once in ``ran``). A
        target-only path serves each request alone as in the batch, so the law is the same; one
        that does not is not batch-invariant, which is the reference's defect to fix, not a
        verdict this case owes it (the subject's batch, not the reference's, is under test)."""
        if case.sweep != CONTINUOUS:
            return tuple(range(len(case.requests)))
        said = self.reference_cache().setdefault(("alone", case.name), False)
        if not said:
            self.reference_cache()[("alone", case.name)] = True
            self.result.ran.append(
                f"reference: {case.name}: each request's law enumerated on the request alone "
                f"({len(case.requests)} requests: more than the enumerator follows jointly)"
            )
        return (i,)

    def wanted_row(self, case: LoopCase, i: int) -> np.ndarray | None:
        """Request i's processed first row (a context-free case: every position's law): this
        project's, or the reference's exact law of one token of the request (shared by the
        requests of the case whose params read no tokens and whose first rows are equal: a
        target-only path whose params read no tokens draws one token from the row alone); None
        when the enumerator cannot follow the reference."""
        req = case.requests[i]
        logits = case.target(req.prompt)
        if self.reference is None:
            return step_distribution(logits, req.params, req.prompt, ())
        cache = self.reference_cache()
        key = ("row", id(case.target), np.asarray(logits).tobytes(), repr(req.params))
        if reads_no_tokens(req.params) and key in cache:  # same row, same params: the same law
            return cache[key][1]
        one = replace(case, requests=(replace(req, params=replace(req.params, max_tokens=1)),))
        law = self.reference_law(one, (0,))
        if law is None:
            return None
        row = np.zeros(case.vocab_size)
        for outcome, w in law.items():
            if outcome[0][0]:
                row[outcome[0][0][0]] += w
        cache[key] = ((case, req.params), row)
        return row

    def reference_runs(self, case: LoopCase, ids: tuple, n: int, purpose: int = 0) -> list:
        """n runs of the reference on the requests ``ids`` (its outcomes' tokens per request),
        drawn from its own stream; ``ReferenceBroken`` when it breaks."""
        rng = np.random.default_rng(stream(self.seed, REFERENCE_STREAM, zlib.crc32(case.name.encode()), purpose))
        b = self.budget
        got, breach, _, _, stopped = self.reference_call(
            case, loop_sample_task, ids, n, rng, b.call_limit_s, calls=sample_calls(n)
        )
        if breach:
            self.broken(case, f"broke its contract: {breach}")
        if stopped:
            self.broken(case, f"hangs: {len(got)} of {n} runs done: {stopped}")
        for outcome in got:
            problem = reference_contract_problem(case, ids, outcome)
            if problem:
                self.broken(case, f"broke its contract: {problem}")
        return [tuple(row[0] for row in outcome) for outcome in got]

    def note_difference(self, case: LoopCase, ids: tuple, law: dict) -> None:
        """Where the reference's law of a request differs from this project's definition: a note
        (information, not a finding), its semantics named where ``loop.semantics`` knows it."""
        for j, i in enumerate(ids):
            req = case.requests[i]
            if req.params.seed is not None:
                continue
            got = marginal(law, j)
            tv = exact.total_variation(got, sequence_law(case.target, req))
            if tv <= 1e-9:
                continue
            words = named_difference(case.target, req, got)
            note = (
                f"{case.name}: request {i}: your target-only sampling "
                + (words if words else f"differs from this project's definition (exact TV {tv:.4g})")
                + " (information, not a finding: the loop is judged against your reference)"
            )
            self.differing.add(case.name)
            if note not in self.notes:
                self.notes.append(note)
                self.result.ran.append(f"reference differs: {note}")

    def two_sample_power(self, case: LoopCase, i: int, test, rate: float) -> None:
        self.result.power.append(
            {
                "case": case.name,
                "request": i,
                "against": "reference",
                "runs": test.n_a,
                "reference_runs": test.n_b,
                "min_detectable_tv": test.min_detectable_tv,
                "false_fail_rate": rate,
                "detection_probability": 1 - POWER_FALSE_PASS_RATE,
            }
        )


@contextmanager
def reference_process(reference) -> Iterator:
    """The reference as a started ``runner.Runner`` (itself when it is one, left running; a
    callable in a process of its own, as the subject's, closed on leaving), or None."""
    if reference is None:
        yield None
        return
    with subject_process(reference) as handle:
        yield handle


def with_reference(battery, handle):
    """``battery`` (a ``ReferenceCalls``) judging against the reference ``handle`` (None: this
    project's definition)."""
    battery.reference = handle
    return battery


__all__ = [
    "CHECK",
    "REFERENCE_STREAM",
    "ReferenceBroken",
    "ReferenceCalls",
    "marginal",
    "reference_contract_problem",
    "reference_process",
    "with_reference",
]
