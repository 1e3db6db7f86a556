"""The loop interface's subject side: what runs in the subject's process (``specverify.battery.runner``),
and the contract one returned outcome must meet.

``read_outcome`` reads what the loop returned, in the subject's process: per request (tokens,
logprobs or None, drafted or None, accepted or None), only ints, floats, None and tuples of them,
at most ``READ_LIMIT`` tokens; whatever the subject's objects raise while read is a
``ContractBreach`` naming it (a contract finding, never a crash). The tasks run the loop on a
case's requests (a ``loop_cases.LoopCase``): ``loop_enumerate_task`` (every path of its random
decisions, ``specverify.laws.exact``), ``loop_sample_task`` (runs, and a replay of the rng state),
``loop_seed_task`` (a seeded request alone, batched and beside a same-seed request) and
``loop_seed_law_task`` (one request over seeds 0..n-1). ``same_outcomes`` compares replays (NaN
equal to NaN). ``contract_problem``, run in the parent, names the first stop / max_tokens, counts
or logprobs breach in one request's outcome.

Every task does what its counts say (paths, runs, seeds), never less because a clock ran: no
clock cuts a task that progresses. Each call of the loop is interrupted at its limit
(``call_limit``, SIGALRM: ``battery.guards.GuardStopped``, a hang, never a finding); a task whose
call overran says so (status "guard", or ``stopped``: the guard's words, with what it did before),
so that the parent reports the case as not judged instead of judging it on fewer runs
(``guard_words``). A hang no signal interrupts (in C, a blocking read) is the parent's idle guard's
(``runner.Runner.call(..., idle=)``: no loop call returned for ``call_limit_s`` +
``LoopBudget.task_idle_s``), reported in the same words.
"""

from __future__ import annotations

import copy
import math
import numbers
from dataclasses import replace

import numpy as np

from ...battery.guards import (
    GUARD_PREFIX,
    PASSED_THROUGH,
    ContractBreach,
    GuardStopped,
    as_sequence,
    call_subject,
    guard_reason,
    items_of,
    message_of,
    plain_tokens,
    reading,
    show,
    token_id,
    type_name,
    with_article,
)
from ...battery.seed_tree import stream
from ...laws import exact
from ...laws.requests import Output, Request, as_output, step_distribution
from ...laws.symbolic_uniform import SymbolicUniform

READ_LIMIT = 10_000
"""The most tokens (or logprobs) of one request read from a subject's result; more is a breach."""

COUNT_LIMIT = 10**15
"""A drafted or accepted count beyond this (in size) is a breach, not a number to print."""

LOGPROB_TOL = 1e-9
"""A returned log-probability this far from the processed target's is a ``logprobs`` breach."""


def read_outcome(out, n: int, vocab: int) -> tuple:
    """Per request (tokens, logprobs or None, drafted or None, accepted or None), or ContractBreach.

    Runs in the subject's process: whatever the returned objects raise while they are read (a
    ``__len__``, ``__iter__``, ``tolist``, ``__int__``, ``__float__`` or property) is a
    ContractBreach naming it, and only ints, floats, None and tuples of them go back."""
    with reading(f"returned {with_article(type_name(out))}; reading it"):
        is_list = isinstance(out, (list, tuple))
    if not is_list:
        raise ContractBreach(f"returned {type_name(out)}, not a list of {n} outputs")
    if type(out) is list or type(out) is tuple:  # runs no subject code
        count, items = len(out), out
    else:
        count, items = items_of(out, "returned", n)
    if count != n:
        raise ContractBreach(f"returned {count} outputs for {n} requests")
    return tuple(_plain_row(o, vocab) or _row(o, i, vocab) for i, o in enumerate(items))


def _plain_count(c) -> bool:
    return c is None or (type(c) is int and -COUNT_LIMIT <= c <= COUNT_LIMIT)


def _plain_row(o, vocab: int) -> tuple | None:
    """The fast path of ``_row``: an Output (exactly) of plain ints, floats and None, or a plain
    list of token ids; None when anything needs reading carefully. Runs no subject code (unless
    the subject patched the Output class in its process: then ``_row`` reads it carefully)."""
    if type(o) is not Output:
        toks = plain_tokens(o, vocab)
        return None if toks is None else (tuple(toks), None, None, None)
    try:
        toks = plain_tokens(o.tokens, vocab)
        lps, drafted, accepted = o.logprobs, o.drafted, o.accepted
    except Exception as exc:  # noqa: BLE001 - the careful path says what raised
        if type(exc) in PASSED_THROUGH:
            raise
        return None
    if toks is None or not (_plain_count(drafted) and _plain_count(accepted)):
        return None
    if lps is not None:
        if type(lps) not in (tuple, list) or len(lps) != len(toks):
            return None
        if not all(type(x) is float for x in lps):
            return None
        lps = tuple(lps)
    return tuple(toks), lps, drafted, accepted


def _sequence(seq, what: str, noun: str) -> list:
    """The items of a list, tuple or array (``tolist``) the subject returned, at most READ_LIMIT."""
    seq, is_list = as_sequence(seq, what)
    if not is_list:
        raise ContractBreach(f"{what} {with_article(type_name(seq))} ({show(seq)}), not a list of {noun}")
    count, items = items_of(seq, what, READ_LIMIT)
    if count > READ_LIMIT:
        raise ContractBreach(f"{what} {count} {noun} (more than {READ_LIMIT} read)")
    return items


def _logprob(x, what: str) -> float:
    if isinstance(x, SymbolicUniform):
        float(x)  # a value that depends on a uniform: NotEnumerable (statistics instead)
    with reading(f"{what} {with_article(type_name(x))}; checking its type"):
        is_real = isinstance(x, numbers.Real) and not isinstance(x, bool)
    if not is_real:
        raise ContractBreach(f"{what} {with_article(type_name(x))} ({show(x)}), not a number")
    with reading(f"{what} {with_article(type_name(x))} whose float()"):
        return float(x)


def _count(c, what: str) -> int | None:
    """A drafted / accepted count: None, or a whole number (an int, a NumPy or 0-d tensor scalar,
    a float such as 3.0) of at most COUNT_LIMIT in size."""
    if c is None:
        return None
    if isinstance(c, SymbolicUniform):
        int(c)  # a count that depends on a uniform: NotEnumerable (statistics instead)
    with reading(f"{what} {with_article(type_name(c))}; reading it"):
        if not isinstance(c, numbers.Number) and hasattr(c, "item"):  # a 0-d tensor or array
            with reading(f"{what} {with_article(type_name(c))} whose item()"):
                c = c.item()
        integral = isinstance(c, numbers.Integral) and not isinstance(c, bool)
        real = isinstance(c, numbers.Real) and not isinstance(c, bool)
    if not (integral or real):
        raise ContractBreach(f"{what} {with_article(type_name(c))} ({show(c)}), not a count")
    with reading(f"{what} {with_article(type_name(c))} whose int() or float()"):
        if integral:
            v = int(c)
        else:
            f = float(c)
            if not (math.isfinite(f) and f == int(f)):
                raise ContractBreach(f"{what} {show(f)}, not a whole number")
            v = int(f)
    if not -COUNT_LIMIT <= v <= COUNT_LIMIT:
        raise ContractBreach(f"{what} {show(v)}, beyond any count of tokens")
    return v


def _row(o, i: int, vocab: int) -> tuple:
    """One request's (tokens, logprobs or None, drafted or None, accepted or None)."""
    what = f"request {i}:"
    with reading(f"{what} returned {with_article(type_name(o))}; reading it"):
        readable = isinstance(o, (Output, list, tuple)) or hasattr(o, "tolist")
    if not readable:
        raise ContractBreach(
            f"{what} returned {with_article(type_name(o))} ({show(o)}), not an Output or a list of token ids"
        )
    with reading(f"{what} returned {with_article(type_name(o))}; reading it"):
        o = as_output(o)
        tokens, logprobs, drafted, accepted = o.tokens, o.logprobs, o.drafted, o.accepted
    toks = tuple(token_id(t, vocab, f"{what} returned") for t in _sequence(tokens, f"{what} tokens is", "token ids"))
    lps = None
    if logprobs is not None:
        values = _sequence(logprobs, f"{what} logprobs is", "numbers")
        if len(values) != len(toks):
            raise ContractBreach(f"{what} {len(values)} logprobs for {len(toks)} tokens")
        lps = tuple(_logprob(x, f"{what} logprob {j} is") for j, x in enumerate(values))
    return toks, lps, _count(drafted, f"{what} drafted is"), _count(accepted, f"{what} accepted is")


def loop_call(subject, case, requests, rng, call_limit: float) -> tuple:
    """One call of the loop on ``requests`` of ``case`` (in the subject's process), read by
    ``read_outcome``; interrupted at ``call_limit`` seconds (GuardStopped: a hang, not judged)."""
    vocab = case.vocab_size  # read before the subject runs (it holds the case's tables)
    out = call_subject(subject, (case.target, case.draft, list(requests), case.k, rng), call_limit, GuardStopped)
    return read_outcome(out, len(requests), vocab)


def same_outcomes(a, b) -> bool:
    """``a == b`` for outcomes (nested tuples and lists of ints, floats and None), NaN equal to
    NaN: a loop that returns NaN logprobs replays them as NaN, and that is the same outcome."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same_outcomes(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _requests(case, ids) -> list:
    return [case.requests[i] for i in ids]


def guard_words(what: str, done: int | None, planned: int, unit: str, why: str) -> str:
    """The one sentence for a task a guard stopped: "stopped by a guard: <what> after N of M
    <unit>: <why>; not judged" (``done`` None: the task was killed, its count unknown)."""
    where = f"after {done} of {planned} {unit}" if done is not None else f"({planned} {unit} planned)"
    return f"{GUARD_PREFIX}{what} {where}: {why}; not judged"


def loop_enumerate_task(subject, case, ids, max_paths: int, call_limit: float):
    """("ok", exact law of the joint outcome) | ("not-enumerable", why: more than ``max_paths``
    paths, or decisions the enumerator cannot follow) | ("breach", what) | ("guard", the guard's
    words: not judged). Counts bound it (``max_paths`` paths, one loop call each); no clock cuts
    it while it progresses: a call past ``call_limit`` is interrupted (``battery.guards.GuardStopped``,
    which ``call_subject`` lets through), one no signal interrupts is the parent's idle guard's."""
    reqs = _requests(case, ids)
    try:
        return "ok", exact.enumerate_distribution(
            lambda rng: loop_call(subject, case, reqs, rng, call_limit), max_paths=max_paths
        )
    except GuardStopped as exc:
        return "guard", f"{GUARD_PREFIX}exact enumeration: {guard_reason(exc)}; not judged"
    except exact.NotEnumerable as exc:
        return "not-enumerable", message_of(exc)
    except ContractBreach as exc:
        return "breach", message_of(exc)


def loop_sample_task(subject, case, ids, n: int, rng, call_limit: float):
    """n runs, then 3 replays of the first from the starting rng state; (outcomes, breach or
    None, replayed, rng after, stopped): ``stopped`` None, or why a guard ended the runs first
    (a call past ``call_limit``; the outcomes so far returned, the parent does not judge them)."""
    reqs = _requests(case, ids)
    out: list = []
    start = copy.deepcopy(rng)
    try:
        while len(out) < n:
            out.append(loop_call(subject, case, reqs, rng, call_limit))
        replay = [loop_call(subject, case, reqs, start, call_limit) for _ in range(min(3, len(out)))]
    except GuardStopped as exc:
        return out, None, True, rng, guard_reason(exc)
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return out, message_of(exc), True, rng, None
    return out, None, same_outcomes(replay, out[: len(replay)]), rng, None


def sample_calls(n: int) -> int:
    """The loop calls ``loop_sample_task`` makes for ``n`` runs: the runs and up to 3 replays."""
    return n + min(3, n)


def _seeded(request: Request, seed: int) -> Request:
    return replace(request, params=replace(request.params, seed=int(seed)))


def loop_seed_task(subject, case, seeds, runs, call_limit: float, same_seed: bool = False):
    """For each seed s: request 0 seeded with s, run alone and in the batch (the others unseeded,
    another rng); with ``same_seed`` and a second request, also requests 0 and 1 both seeded with s
    in one batch, each against itself alone. The loop's rng in run r for seed s (r: 0 alone, 1
    batched, 2 request 1 alone, 3 the same-seed pair) is ``default_rng(stream(runs, s, r))``,
    ``runs`` the check's ``seed_stream(seed, "seed replay runs")``. (mismatches, breach or None,
    seeds done, stopped: None, or why a guard ended the seeds first: a call past ``call_limit``);
    a mismatch names its ``kind`` ("batched" or "same seed"), the seed, the request and both
    outputs."""
    mismatches: list = []
    done = 0
    try:
        for s in seeds:
            seeded = _seeded(case.requests[0], s)
            alone = loop_call(subject, case, [seeded], np.random.default_rng(stream(runs, s, 0)), call_limit)
            batch = loop_call(
                subject, case, [seeded, *case.requests[1:]], np.random.default_rng(stream(runs, s, 1)), call_limit
            )
            if alone[0][0] != batch[0][0]:
                mismatches.append(
                    {
                        "kind": "batched",
                        "seed": int(s),
                        "request": 0,
                        "alone": list(alone[0][0]),
                        "batched": list(batch[0][0]),
                    }
                )
            if same_seed and len(case.requests) > 1:
                other = _seeded(case.requests[1], s)
                alone1 = loop_call(subject, case, [other], np.random.default_rng(stream(runs, s, 2)), call_limit)
                pair = loop_call(subject, case, [seeded, other], np.random.default_rng(stream(runs, s, 3)), call_limit)
                for i, solo in ((0, alone), (1, alone1)):
                    if pair[i][0] != solo[0][0]:
                        mismatches.append(
                            {
                                "kind": "same seed",
                                "seed": int(s),
                                "request": i,
                                "alone": list(solo[0][0]),
                                "batched": list(pair[i][0]),
                            }
                        )
            done += 1
    except GuardStopped as exc:
        return mismatches, None, done, guard_reason(exc)
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return mismatches, message_of(exc), done, None
    return mismatches, None, done, None


def seed_calls(case, seeds: int, same_seed: bool = False) -> int:
    """The loop calls ``loop_seed_task`` makes for ``seeds`` seeds: 2 per seed, 4 with
    ``same_seed`` on a case of two requests or more."""
    return seeds * (4 if same_seed and len(case.requests) > 1 else 2)


def loop_seed_law_task(subject, case, n: int, rng, call_limit: float):
    """Request 0 alone, seeded with 0, 1, ..., n - 1, the loop's rng ``rng`` (unused by an exact
    loop: the request is seeded); (its tokens per seed, breach or None, stopped: None, or why a
    guard ended the seeds first: a call past ``call_limit``)."""
    out: list = []
    try:
        for s in range(n):
            out.append(loop_call(subject, case, [_seeded(case.requests[0], s)], rng, call_limit)[0][0])
    except GuardStopped as exc:
        return out, None, guard_reason(exc)
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return out, message_of(exc), None
    return out, None, None


# --------------------------------------------------------------------------- run in the parent


def _processed(case, i: int, tokens: tuple, j: int, rows: dict | None) -> np.ndarray:
    """Request i's processed target row after ``tokens[:j]``; with ``rows`` (a cache), rows of
    params that do not read the output (no penalties, no grammar) are kept by their raw logits."""
    req = case.requests[i]
    params, prompt = req.params, req.prompt
    logits = case.target(prompt + tokens[:j])
    reads_output = (
        params.repetition_penalty != 1
        or params.frequency_penalty
        or params.presence_penalty
        or params.allowed_tokens is not None
    )
    if rows is None or reads_output:
        return step_distribution(logits, params, prompt, tokens[:j])
    key = (i, np.asarray(logits).tobytes())
    if key not in rows:
        rows[key] = step_distribution(logits, params, prompt, tokens[:j])
    return rows[key]


def contract_problem(case, i: int, row: tuple, rows: dict | None = None) -> tuple[str, str] | None:
    """(check, message) for the first contract breach in one request's outcome, or None.
    ``rows``: a cache of processed rows shared by the outcomes of one case (``_processed``)."""
    req = case.requests[i]
    params = req.params
    tokens, lps, drafted, accepted = row
    stops = params.stop_token_ids
    cut = next((j for j, t in enumerate(tokens) if t in stops), None)
    if cut is not None and cut < len(tokens) - 1:
        return "stop-max-tokens", f"request {i}: tokens {list(tokens)} continue after stop token {tokens[cut]}"
    if len(tokens) > params.max_tokens:
        return "stop-max-tokens", f"request {i}: {len(tokens)} tokens with max_tokens={params.max_tokens}"
    if len(tokens) < params.max_tokens and cut is None:
        return "stop-max-tokens", (
            f"request {i}: ended after {len(tokens)} < max_tokens={params.max_tokens} tokens without a stop token"
        )
    for name, count in (("drafted", drafted), ("accepted", accepted)):
        if count is not None and count < 0:
            return "counts", f"request {i}: {name} {count} (a count cannot be negative)"
    if drafted is not None and accepted is not None and accepted > drafted:
        return "counts", f"request {i}: accepted {accepted} of {drafted} drafted (acceptance above 1)"
    if accepted is not None and accepted > len(tokens):  # checked with or without drafted
        return "counts", (
            f"request {i}: accepted {accepted} drafts but emitted only {len(tokens)} tokens {list(tokens)}"
        )
    if lps is not None:
        for j, (t, lp) in enumerate(zip(tokens, lps)):
            p = _processed(case, i, tokens, j, rows)[t]
            want = math.log(p) if p > 0 else -math.inf
            if not (lp == want or abs(lp - want) <= LOGPROB_TOL):
                return "logprobs", (
                    f"request {i}: logprob of token {t} at position {j} of {list(tokens)} is "
                    f"{lp:.6g}, the processed target gives {want:.6g}"
                )
    return None


__all__ = [
    "COUNT_LIMIT",
    "LOGPROB_TOL",
    "READ_LIMIT",
    "contract_problem",
    "guard_words",
    "loop_call",
    "loop_enumerate_task",
    "loop_sample_task",
    "loop_seed_law_task",
    "loop_seed_task",
    "read_outcome",
    "same_outcomes",
    "sample_calls",
    "seed_calls",
]
