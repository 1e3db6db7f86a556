"""The round battery's subject side: what runs in the subject's process (runner.Runner.call), or
in-process for the experiments' own samplers.

``guarded`` wraps a sampler so that every call is checked (``validate_round``: 1 to k + 1 int
tokens in range from a list, tuple or array; no exception, no exit, no write into the arrays p_fn
/ q_fn hand out: each call gets fresh copies, compared afterwards; every call within its limit).
The tasks the parent's battery (``interfaces.round.battery.RoundBattery``) sends: ``contract_task`` (a
case's first rounds), ``enumerate_task`` (a case's exact distribution, or its round length's, by
``specverify.laws.exact``), ``sample_task`` (sampled runs for the chi-square, the binned chi-square and
tokens per round); ``enumeration_key`` says when two enumerations are the same call (the units of
``specverify.interfaces.round.units`` are served by it). The parent's guards of an enumeration
(``enumeration_limit_s``, ``enumeration_idle_s``) and of sampled runs (``sample_guard_s``) follow
from counts and the per-call limit, never from a wall clock on the whole task. ``first_tokens``, ``exact_case`` and
``sample_first_tokens`` are the same pieces for the experiments and benchmarks.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ...battery.guards import (
    GUARD_PREFIX,
    PASSED_THROUGH,
    ContractBreach,
    GuardStopped,
    as_sequence,
    call_subject,
    items_of,
    message_of,
    plain_tokens,
    stopped_by_guard,
    token_id,
    type_name,
)
from ...laws import exact
from ...laws.chains import TableModel
from ...laws.summed_draws import DeferredToken
from .cases import ENGINE_VOCAB_DECISIONS, ENGINE_VOCAB_ORIGIN, Budget, Case


def validate_round(out, k: int, vocab_size: int) -> list[int]:
    """The round's tokens as ints, or ContractBreach saying what is wrong with them. Whatever the
    returned object raises while it is read becomes ContractBreach too."""
    if type(out) is np.ndarray and out.dtype.kind in "iu":
        out = out.tolist()
    fast = plain_tokens(out, vocab_size)
    if fast is not None and 1 <= len(fast) <= k + 1:
        return fast
    out, is_sequence = as_sequence(out, "returned")
    if not is_sequence:
        raise ContractBreach(f"returned {type_name(out)}, not a list of token ids")
    n, items = items_of(out, "returned", k + 1)
    if not 1 <= n <= k + 1:
        raise ContractBreach(f"returned {n} tokens with k={k} (must be 1 to {k + 1})")
    return [deferred_token(t, vocab_size) for t in items]


def deferred_token(t, vocab_size: int):
    """A returned token as ``token_id`` checks it, except a draw the enumerator deferred
    (``laws.summed_draws``): its value once decided, else the draw itself, undecided, to be summed
    over, when every outcome is a token id below ``vocab_size``."""
    if isinstance(t, DeferredToken):
        if t.value is not None:
            t = t.value
        elif 0 <= min(t.law.outcomes) and max(t.law.outcomes) < vocab_size:
            return t
    return token_id(t, vocab_size, "returned")


def _handing_out(name: str, fn: Callable, handed: list) -> Callable:
    """``fn`` returning a fresh copy per call, remembered beside the row it was copied from."""

    def model(prefix):
        row = np.asarray(fn(prefix), dtype=np.float64)
        given = row.copy()
        handed.append((name, prefix, given, row))
        return given

    return model


def _check_untouched(handed: list) -> None:
    for name, prefix, given, original in handed:
        try:
            same = given.tobytes() == original.tobytes()  # 20x faster than np.array_equal on short rows
        except BaseException as exc:  # noqa: BLE001 - the subject replaced what the array holds
            if type(exc) in PASSED_THROUGH:
                raise
            same = False
        if not same:
            try:
                i = int(np.flatnonzero(given != original)[0]) if given.shape == original.shape else 0
                how = f"entry {i} was {original.flat[i]:.6g}, became {given.flat[i]:.6g}"
            except BaseException as exc:  # noqa: BLE001 - its dtype or shape changed as well
                if type(exc) in PASSED_THROUGH:
                    raise
                how = "its contents, dtype or shape changed"
            raise ContractBreach(f"wrote into an array {name} returned for prefix {tuple(prefix)}: {how}")


def guarded(
    sampler: Callable,
    vocab_size: int,
    call_limit: float | None = None,
    interrupt: bool = False,
    overrun: type = ContractBreach,
) -> Callable:
    """``sampler`` with every call checked: whatever it raises (SystemExit and, in the subject's
    process, KeyboardInterrupt included), junk it returns and a write into what it was handed
    become ContractBreach; a call that took longer than ``call_limit`` seconds ``overrun``
    (ContractBreach, or GuardStopped where an overrun is a hang to stop, not a finding).
    ``interrupt`` also interrupts a call at its limit (SIGALRM); otherwise a hung call is the
    runner's to kill."""

    def call(p_fn, q_fn, prefix, k, rng):
        handed: list = []
        p, q = _handing_out("p_fn", p_fn, handed), _handing_out("q_fn", q_fn, handed)
        t0 = time.monotonic()
        out = call_subject(sampler, (p, q, prefix, k, rng), call_limit if interrupt else None, overrun)
        if call_limit is not None and time.monotonic() - t0 > call_limit:
            raise overrun(f"one call did not return within {call_limit:g} s (took {time.monotonic() - t0:.2f} s)")
        _check_untouched(handed)
        return validate_round(out, k, vocab_size)

    return call


BATCH_ATTRIBUTE = "specverify_rounds"
"""A round subject may declare ``speculative_step.specverify_rounds = rounds`` with
``rounds(p_fn, q_fn, prefixes, k, rng) -> list of rounds``: one independent round per prefix,
each distributed as ``speculative_step``'s (engines verify a batch of sequences per call). The
sampled runs then go through it, many rounds per call; the contract and the enumeration still
call ``speculative_step`` one round at a time."""


def batch_of(sampler: Callable) -> Callable | None:
    """The subject's declared batch of rounds (``BATCH_ATTRIBUTE``), or None (also when reading
    the attribute raises)."""
    try:
        rounds = getattr(sampler, BATCH_ATTRIBUTE, None)
    except Exception:  # noqa: BLE001 - a subject's __getattr__
        return None
    return rounds if callable(rounds) else None


def guarded_batch(rounds: Callable, vocab_size: int, call_limit: float | None = None) -> Callable:
    """``rounds`` with every call checked as ``guarded`` checks one round: one valid round per
    prefix, nothing written into what it was handed; a call past ``call_limit`` per round is
    GuardStopped (a slow call: stopped by a guard, never a finding)."""

    def call(p_fn, q_fn, prefixes, k, rng):
        handed: list = []
        p, q = _handing_out("p_fn", p_fn, handed), _handing_out("q_fn", q_fn, handed)
        t0 = time.monotonic()
        out = call_subject(rounds, (p, q, list(prefixes), k, rng), None)
        limit = None if call_limit is None else call_limit * max(len(prefixes), 1)
        if limit is not None and time.monotonic() - t0 > limit:
            raise GuardStopped(f"one batched call of {len(prefixes)} rounds did not return within {limit:g} s")
        _check_untouched(handed)
        out, is_sequence = as_sequence(out, "specverify_rounds returned")
        if not is_sequence:
            raise ContractBreach(f"specverify_rounds returned {type_name(out)}, not a list of rounds")
        n, items = items_of(out, "specverify_rounds returned", len(prefixes))
        if n != len(prefixes):
            raise ContractBreach(f"specverify_rounds returned {n} rounds for {len(prefixes)} prefixes")
        return [validate_round(r, k, vocab_size) for r in items]

    return call


def batched_runs(rounds: Callable, case: Case, n: int, rng, lengths: bool) -> list:
    """n runs in lockstep through a checked batch of rounds: the first m tokens of each (the
    runs still short of m get their next round together), or with ``lengths`` the length of one
    round from the case's prefix."""
    p_fn, q_fn = case.model.p_fn, case.model.q_fn
    if lengths:
        return [len(r) for r in rounds(p_fn, q_fn, [case.prefix] * n, case.k, rng)]
    outs: list[list[int]] = [[] for _ in range(n)]
    contexts = [tuple(case.prefix)] * n
    while True:
        short = [i for i in range(n) if len(outs[i]) < case.m]
        if not short:
            return [tuple(o[: case.m]) for o in outs]
        for i, r in zip(short, rounds(p_fn, q_fn, [contexts[i] for i in short], case.k, rng)):
            outs[i] += r
            contexts[i] += tuple(r)


def first_tokens(sampler, model: TableModel, prefix: tuple, k: int, m: int, rng) -> tuple:
    """Run rounds from ``prefix`` until at least m tokens are out; the first m of them."""
    out: list[int] = []
    ctx = tuple(prefix)
    while len(out) < m:
        new = sampler(model.p_fn, model.q_fn, ctx, k, rng)
        out += new
        ctx += tuple(new)
    return tuple(out[:m])


def exact_case(sampler, case: Case, max_paths: int, call_limit: float | None = None) -> tuple[dict, dict]:
    """(sampler's exact distribution, target's) for the case, or NotEnumerable / ContractBreach."""
    g = guarded(sampler, case.model.vocab_size, call_limit)
    got = exact.sampler_distribution(
        g, case.model.p_fn, case.model.q_fn, case.prefix, case.k, case.m, max_paths=max_paths
    )
    return got, exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)


def sample_first_tokens(sampler, case: Case, n: int, rng) -> list[tuple]:
    g = guarded(sampler, case.model.vocab_size)
    return [first_tokens(g, case.model, case.prefix, case.k, case.m, rng) for _ in range(n)]


def round_length_run(g, case: Case, rng) -> int:
    return len(g(case.model.p_fn, case.model.q_fn, case.prefix, case.k, rng))


def _first_tokens_run(g, case: Case, rng) -> tuple:
    return first_tokens(g, case.model, case.prefix, case.k, case.m, rng)


def contract_task(sampler, case: Case, budget: Budget, rng, calls: int) -> tuple[dict, object]:
    """``calls`` rounds from the case's prefix: {"breach": what or None, "rounds": their tokens,
    "seconds": the time they took (for the speed forecast only)}, the rng after."""
    g = guarded(sampler, case.model.vocab_size, budget.call_limit_s, interrupt=True)
    outs: list = []
    t0 = time.perf_counter()
    try:
        while len(outs) < calls:
            outs.append(g(case.model.p_fn, case.model.q_fn, case.prefix, case.k, rng))
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return {"breach": message_of(exc), "rounds": outs, "seconds": time.perf_counter() - t0}, rng
    return {"breach": None, "rounds": outs, "seconds": time.perf_counter() - t0}, rng


def enumerate_task(sampler, case: Case, budget: Budget, lengths: bool = False):
    """("ok", exact distribution) | ("not-enumerable", why) | ("guard", what stopped it) |
    ("breach", what). Counts bound the work, identically on any machine: at most
    ``budget.max_paths`` paths (one sampler call each) and a cap on each path's decisions (past
    them: not enumerable). No clock cuts an enumeration that progresses: a call that overruns
    ``budget.call_limit_s`` is interrupted (a hang: "stopped by a guard", not judged, never a
    finding), and one that cannot be interrupted (a hang in C) is the parent's idle guard's
    (``enumeration_idle_s``)."""
    g = guarded(sampler, case.model.vocab_size, budget.call_limit_s, interrupt=True, overrun=GuardStopped)
    try:
        if lengths:
            return "ok", exact.round_length_distribution(
                g, case.model.p_fn, case.model.q_fn, case.prefix, case.k, max_paths=budget.max_paths
            )
        wide = case.name.startswith(ENGINE_VOCAB_ORIGIN)  # its paths' decisions capped too
        return "ok", exact.sampler_distribution(
            g,
            case.model.p_fn,
            case.model.q_fn,
            case.prefix,
            case.k,
            case.m,
            max_paths=budget.max_paths,
            max_decisions=ENGINE_VOCAB_DECISIONS if wide else exact.MAX_DECISIONS_PER_RUN,
        )
    except GuardStopped as exc:
        return "guard", f"{GUARD_PREFIX}{message_of(exc)}"
    except exact.NotEnumerable as exc:
        return "not-enumerable", message_of(exc)
    except ContractBreach as exc:
        return "breach", message_of(exc)


def sample_task(
    sampler, case: Case, n: int, rng, budget: Budget, run: Callable = _first_tokens_run
) -> tuple[list, str | None, object]:
    """Exactly n runs (fewer only when they ended early); (runs, why they ended early or None,
    the rng after). Why: a breach's words, or a guard's ("stopped by a guard: ...",
    ``stopped_by_guard``) when a call took longer than ``budget.call_limit_s``: a slow call is
    not evidence of a wrong law, so it is not judged, as the loop's sampled runs and every
    enumeration treat it (checked when the call returns: no alarm per call on this hot path; a
    call that never returns is the parent's kill limit's, ``sample_guard_s``). A subject that
    declares a batch of rounds (``BATCH_ATTRIBUTE``) runs them many rounds per call."""
    rounds = batch_of(sampler)
    out: list = []
    try:
        if rounds is not None and run in (_first_tokens_run, round_length_run):
            checked = guarded_batch(rounds, case.model.vocab_size, budget.call_limit_s)
            return batched_runs(checked, case, n, rng, run is round_length_run), None, rng
        g = guarded(sampler, case.model.vocab_size, budget.call_limit_s, overrun=GuardStopped)
        while len(out) < n:
            out.append(run(g, case, rng))
    except GuardStopped as exc:
        return out, f"{GUARD_PREFIX}{message_of(exc)}", rng
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return out, message_of(exc), rng
    return out, None, rng


def sample_guard_s(case: Case, n: int, budget: Budget) -> float:
    """The kill limit of a ``sample_task`` of n runs: every call at its own limit (a guard
    against a hang; a subject inside its per-call limit is never stopped by it)."""
    return n * max(case.m, 1) * budget.call_limit_s + budget.call_limit_s


def enumeration_limit_s(budget: Budget) -> float:
    """The absolute kill limit of an ``enumerate_task``, from its counts: every one of its at
    most ``max_paths`` calls at its own limit, and the idle guard's wait once more (a backstop;
    the idle guard, ``enumeration_idle_s``, is the one that stops a hang)."""
    return budget.max_paths * budget.call_limit_s + enumeration_idle_s(budget)


def enumeration_idle_s(budget: Budget) -> float:
    """The idle guard of an ``enumerate_task``: it is stopped (not judged) only when no sampler
    call has returned for one call's limit plus ``budget.enumeration_idle_s``."""
    return budget.call_limit_s + budget.enumeration_idle_s


def guard_outcome(exc: BaseException) -> tuple[str, str]:
    """``enumerate_task``'s ("guard", words) for a task the parent's idle guard stopped (the
    words of ``subject_calls.call_within``'s GuardStopped, or of a ``runner.Stalled``)."""
    words = message_of(exc) if isinstance(exc, GuardStopped) else str(exc)
    return "guard", words if stopped_by_guard(words) else f"{GUARD_PREFIX}{words}"


def enumeration_key(case: Case, budget: Budget, lengths: bool) -> tuple:
    """What makes two ``enumerate_task`` calls the same call: the case, what is enumerated
    (the window's distribution, or the round length's, with ``lengths``), and the limits that
    decide its outcome. The prefetched battery (``interfaces.round``) serves a prefetched
    result only for its key."""
    return (case.name, bool(lengths), budget.max_paths, budget.call_limit_s, budget.enumeration_idle_s)


__all__ = [
    "BATCH_ATTRIBUTE",
    "contract_task",
    "batch_of",
    "batched_runs",
    "enumerate_task",
    "enumeration_idle_s",
    "enumeration_key",
    "enumeration_limit_s",
    "exact_case",
    "first_tokens",
    "guarded",
    "guard_outcome",
    "guarded_batch",
    "round_length_run",
    "sample_first_tokens",
    "sample_guard_s",
    "sample_task",
    "validate_round",
]
