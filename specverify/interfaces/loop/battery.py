"""The loop interface: a whole generation loop ``generate(target, draft, requests, k, rng) ->
list[Output]`` (``specverify.laws.requests``: SamplingParams, Request, Output), judged on whole requests.

``run_loop_battery(subject, budget, seed)`` returns the one ``battery.BatteryResult`` (same
findings, verdicts and JSON as the round battery). The subject runs only in its own process
(``runner.Runner``), through the tasks of ``loop_tasks``; every reference is computed in the
parent from its own tables (``loop.sequence_law``, the DP over the processed target). The modules:

- ``loop_cases``: the budgets (``LoopBudget``, ``LOOP_BUDGETS``: views of ``budgets.TABLE``), the cases and their order (fixed,
  edge, drawn from the seed, seeded, the sweeps, engine scale), the seed streams, the reference loop's law;
- ``loop_tasks``: what runs in the subject's process (reading its outputs, enumerating, sampling,
  seeding) and ``contract_problem``;
- ``loop.checks``: ``LoopBattery``, the checks below (its parts ``loop.calls``, ``loop.laws``,
  ``loop.seeds``, ``loop.positions``);
- ``loop_counterexample``: the smallest request and model that show a finding.

Enumerating every path of the loop's random decisions (``specverify.laws.exact``, the subject drawing
from an ``EnumeratingRng``) takes well under a second per case; an edge, generated or sweep case is
enumerated up to ``extra_max_paths`` paths, then judged by ``extra_samples`` runs (its power in
``result.power``, never a shortfall). The check's seed fixes everything (``SEED_STREAMS``: one
child of ``numpy.random.SeedSequence(seed)`` per purpose), and the budget fixes every sample size
(paths, runs, seeds, candidates): no decision reads a clock, so a subject gets the same verdict,
findings and runs per case on an idle machine and a loaded one. Clocks are hang guards only,
never cutting work that progresses (``call_limit_s`` per call; a task is stopped only when no
call returned for ``call_limit_s`` + ``task_idle_s``); a task a guard stops leaves its case not
judged, a shortfall that says "stopped by a guard". The sweeps (``loop.sweeps.sweep_loop_cases``) take
one dimension at a time to engine scale, the others small: the context (prompt + output, on a
target that reads the first token), rounds of an unseeded and of a seeded request, max_tokens and
requests per batch (``reach``: each one's largest value); at thorough the pairwise corners too
(``loop.corners.loop_corner_cases``: a long context with long rounds, max_tokens or batch). Checks, each
a ``Finding.check``:

- ``sequence-law`` (distribution): each request's exact output law against the DP, TV > 1e-9;
  ``loop-chi-square`` when the subject cannot be enumerated (pooled chi-square over sequences);
- ``batch-isolation`` (distribution): a request whose law is exact alone but not in its batch;
- ``joint-law`` (distribution): unseeded requests of one batch, identical or not, must be
  independent: the enumerated joint law against the product of their laws (TV > 1e-9), or by
  statistics each group of identical requests' joint outputs against the product law (a
  chi-square; power in ``result.power`` with ``"check": "joint-law"``); in a sweep judged per
  position, pairs of positions of one request (lags 1 to 16) and of identical requests;
- ``position-law`` (distribution): in a sweep judged per position (a context-free target), each
  position's tokens, and all of them pooled, against the processed row;
- ``stop-max-tokens`` (contract): on every reachable output, nothing after a stop token, never
  more than max_tokens, fewer only when ending at a stop, ids in the vocabulary;
- ``counts`` (contract): 0 <= accepted <= drafted and accepted <= tokens emitted (a stop inside an
  accepted block counted once), each bound checked whenever its counts were returned (accepted
  without drafted too);
- ``logprobs`` (contract): each returned log-probability equals the processed target's (1e-9);
- ``seeded-reproducibility`` (contract): a seeded request's tokens are the same alone and in a
  batch with unseeded requests drawing from another rng, and two requests with the same seed in
  one batch each give what they give alone;
- ``seed-law`` (distribution): a seeded request's outputs over seeds 0..n-1 follow its exact law
  (chi-square at the battery's split false-fail rate, its power in ``result.power``), and a
  seeded request of ``sweep_seeded_rounds`` rounds over the same seeds, position by position and
  pairs of positions (a generator re-created every few rounds repeats itself);
- ``tokens-per-pass`` (efficiency): mean tokens per target pass, E[tokens] / E[tokens -
  accepted], against the reference loop's on the same case, exact by enumeration, else a
  one-sided mean test over the runs (``loop.reference.tokens_per_pass_test``); only a shortfall is a
  finding;
- ``loop-binned-chi-square`` (distribution): on an engine-scale batch, each position's tokens
  against the processed row, binned (``specverify.laws.scale``);
- ``contract``: raised, exited, returned junk (read in the subject's process: whatever its objects
  raise while read is this finding, never a crash); ``rng``: the same rng state replayed
  differently (NaN logprobs replay as NaN: ``same_outcomes``).

Seeded requests draw from ``np.random.default_rng(seed)`` (not from the enumerating rng), so the
law cases use unseeded requests and seeding is checked with real generators: by replay, and by
the law of the outputs over many seeds (a loop that re-seeds every round replays perfectly).

The false-fail rate ``budget.false_fail_rate`` (1e-6) is split (Bonferroni) over every request of
every law case and every seed-law check; exact enumeration has no sampling noise.

Declared cases. A subject that can run only some shapes (transformers' ``generate`` takes last-token
models of one width: ``specverify.adapters.hf_loop``) declares the cases it can run, a sequence of
``loop_cases.LoopCase`` as its ``specverify_cases`` attribute (``CASES_ATTRIBUTE``), or a caller
passes them (``api.check(cases=...)``). The battery then runs exactly those (``declared_cases``:
kind "declared", judged as the core: their power is required), with every check the battery's own
cases get: when none is seeded, the first also runs with request 0 seeded (``with_seeded_declared``:
seeded reproducibility and seed law), tokens per pass by statistics where it cannot enumerate,
logprobs and counts on every run. The report's coverage says the
cases came from the subject and are not the standard ones (``declared_coverage``; each case's
``"origin": "declared"``), and the counterexample search is made among them, smallest first.

With a finding, ``counterexample`` gives the smallest request and model that show it
(``loop_counterexample.find_loop_counterexample``: ``small_loop_cases``, smallest first, each
candidate judged by ``LoopBattery.law_case``, the battery's own enumeration or chi-square), in the
shape of ``round_counterexample.describe`` plus the requests, then the exact sweeps, shortest first;
a binned finding is shrunk over smaller engine-scale batches (``loop_counterexample.shrink_binned_loop``);
a finding only a sweep judged per position shows is described on that sweep.
"""

from __future__ import annotations

from dataclasses import replace

from ...battery.budgets import LoopBudget
from ...battery.core import BatteryResult
from ...battery.subject_calls import run_in_subject
from ..corners import corner_words
from .cases import SCALE_KINDS, LoopCase, get_loop_budget, loop_cases
from .checks import LoopBattery
from .corners import loop_corner_cases
from .counterexample import (
    counterexample_checks,
    describe_binned_loop,
    find_loop_counterexample,
    shrink_binned_loop,
    small_loop_cases,
)
from .generated import generated_loop_cases, scale_loop_cases
from .mechanism_cases import dense_parameter_cases, mechanism_cases
from .own_reference import reference_process, with_reference
from .sweeps import SWEEP_DIMENSIONS, sweep_loop_cases
from .truncation_cases import truncation_cases

NAME = "loop"
PARAMETERS = ("target", "draft", "requests", "k", "rng")
ALIASES = {
    "target": ("target_model", "model", "p_model"),
    "draft": ("draft_model", "drafter", "q_model"),
    "requests": ("reqs", "batch", "prompts"),
    "k": ("gamma", "num_draft_tokens"),
    "rng": ("generator", "random_state", "gen"),
}


CASES_ATTRIBUTE = "specverify_cases"
"""A loop subject's attribute naming the cases it can run (``declared_cases``)."""


def declared_cases(cases) -> tuple[LoopCase, ...]:
    """A subject's (or caller's) cases as the battery runs them: a non-empty sequence of
    ``LoopCase``, each of kind "declared" (an engine-scale or aimed batch keeps its kind, judged
    binned); InterfaceError (a usage error) naming ``cases`` otherwise."""
    from ...errors import InterfaceError

    if isinstance(cases, (str, bytes, LoopCase)) or not hasattr(cases, "__iter__"):
        raise InterfaceError(f"cases: expected a sequence of LoopCase, got {type(cases).__name__}")
    out = tuple(cases)
    bad = next((c for c in out if not isinstance(c, LoopCase)), None)
    if bad is not None:
        raise InterfaceError(f"cases: expected a sequence of LoopCase, got a {type(bad).__name__} among them")
    if not out:
        raise InterfaceError("cases: empty; declare at least one LoopCase")
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise InterfaceError(f"cases: two cases share a name ({next(n for n in names if names.count(n) > 1)!r})")
    return tuple(c if c.kind in SCALE_KINDS else replace(c, kind="declared") for c in out)


def with_seeded_declared(cases) -> list[LoopCase]:
    """``cases`` and, when some are declared but none is seeded, the first declared one again
    with request 0 seeded per run (beside its other requests, or beside an unseeded copy of itself
    when it has no other), under the same name: the seeded checks (``seeded-reproducibility``,
    ``seed-law``) then run on declared cases as on the battery's own seeded case."""
    cases = list(cases)
    declared = [c for c in cases if c.kind == "declared" and c.requests]
    if not declared or any(c.seeded for c in cases):
        return cases
    first = declared[0]
    requests = first.requests if len(first.requests) > 1 else first.requests * 2
    return cases + [replace(first, requests=requests, seeded=True)]


def subject_cases(fn) -> tuple[LoopCase, ...] | None:
    """The cases ``fn`` declares (its ``CASES_ATTRIBUTE``, through ``declared_cases``); None
    when it declares none. Read where the subject lives (its own process for a TARGET)."""
    value = getattr(fn, CASES_ATTRIBUTE, None)
    return None if value is None else declared_cases(value)


def declared_coverage(budget, cases, from_subject: bool = True) -> str:
    """The coverage words of a run on declared cases: the subject's own (its ``CASES_ATTRIBUTE``)
    or the caller's (``cases=``), not the standard ones."""
    b = get_budget(budget)
    whose = (
        f"the {len(cases)} case(s) the subject declares ({CASES_ATTRIBUTE}"
        if from_subject
        else f"{len(cases)} case(s) given for the subject (cases="
    )
    runs = f"{b.samples} runs" if b.samples else "runs sized per request to see it"
    return (
        f"loop battery on {whose}; named in coverage.cases), NOT the standard loop cases; a request "
        f"the enumerator cannot follow must see TV {b.detect_tv:g} ({runs})"
    )


def get_budget(budget: object) -> LoopBudget:
    """The loop section of a budget (``budgets.section``): by the budget's name (a round
    ``Budget`` too), ``tv=X`` (every request the enumerator cannot follow sampled until it sees
    TV X: ``loop_cases.campaign_loop_budget``), a ``LoopBudget`` as it is; an unknown name is an
    InterfaceError naming ``budget`` and the budgets there are."""
    return get_loop_budget(budget)


def standard_cases(budget, seed: int = 0, aim=None) -> list[LoopCase]:
    """The cases a budget runs, in order: the fixed and edge cases, the truncation-order cases
    (``loop.truncation_cases``: top-k and top-p where their order matters), those drawn from the
    seed, the seeded case, the machinery and the enumerated parameters at scale
    (``loop.mechanism_cases``), the sweeps (``swept_cases``' order), the long outputs and dense row
    at scale, the engine-scale batches (the costly ones last)."""
    fixed = list(loop_cases())
    return (
        [c for c in fixed if not c.seeded]
        + list(truncation_cases())
        + generated_loop_cases(budget, seed)
        + [c for c in fixed if c.seeded]
        # -- the loop as engines run it: pools, mixed batches, consecutive calls, k = 0, parameters at scale
        + mechanism_cases(budget)
        + swept_cases(budget)
        + dense_parameter_cases(budget)
        + scale_loop_cases(budget, seed, aim)
    )


def swept_cases(budget) -> list[LoopCase]:
    """The sweeps (``sweep_loop_cases``), then the pairwise corners the budget has
    (``loop.corners.loop_corner_cases``: thorough's)."""
    return sweep_loop_cases(budget) + loop_corner_cases(budget)


def _rounds(case: LoopCase) -> int:
    """Rounds every run of a sweep's request takes at least: max_tokens / (k + 1), rounded up."""
    return max((-(-q.params.max_tokens // (case.k + 1)) for q in case.requests), default=0)


def cases_reach(cases) -> dict:
    """The largest value of each dimension over ``cases``: context (prompt + max_tokens), rounds
    and seeded rounds (those of the rounds sweeps: at least max_tokens / (k + 1) a run),
    max_tokens, requests per batch, vocabulary (the target's width) and k."""
    cases = list(cases)
    reqs = [q for c in cases for q in c.requests]
    return {
        "context": max((len(q.prompt) + q.params.max_tokens for q in reqs), default=0),
        "rounds": max((_rounds(c) for c in cases if c.sweep == "rounds"), default=0),
        "seeded rounds": max((_rounds(c) for c in cases if c.sweep == "seeded rounds"), default=0),
        "max_tokens": max((q.params.max_tokens for q in reqs), default=0),
        "requests per batch": max((len(c.requests) for c in cases), default=0),
        "vocab": max((c.vocab_size for c in cases), default=0),
        "k": max((c.k for c in cases), default=0),
    }


def reach(budget="standard") -> dict:
    """Each swept dimension's largest value in the budget's loop battery (``cases_reach`` of its
    cases at seed 0: the drawn cases stay within the fixed ones' small ranges), e.g. at
    standard {"context": 512, "rounds": 16, "seeded rounds": 8, "max_tokens": 64, "requests per
    batch": 64, "vocab": 4096, "k": 8}."""
    return cases_reach(standard_cases(get_budget(budget), 0))


def reach_line(values: dict) -> str:
    """``reach: context 512, rounds 16, ...``: one line of ``result.ran``."""
    return "reach: " + ", ".join(f"{name} {value}" for name, value in values.items())


def _swept_words(values: dict) -> str:
    return ", ".join(f"{name} {values[name]}" for name in SWEEP_DIMENSIONS)


def coverage(budget) -> str:
    """What the loop section of ``budget`` runs, in one line (the report's ``coverage``)."""
    b = get_budget(budget)
    sweeps = sweep_loop_cases(b)
    return (
        f"loop battery: {len(loop_cases())} fixed request batches + {len(truncation_cases())} where the "
        f"order of top-k and top-p matters + {b.generated} drawn from the seed "
        f"(vocabulary 2-5, k 1-4, prompts 1-4 tokens, max_tokens 0-5, at most "
        f"{b.generated_paths} reference paths each); seeds replayed ({b.seeds}) and judged "
        f"by their law ({b.seed_law_runs} seeds); {len(sweeps)} sweeps, one dimension at a time "
        f"({_swept_words(cases_reach(sweeps))}; {b.sweep_runs} runs where sampled"
        f"{corner_words([c.sweep for c in loop_corner_cases(b) if c.sweep is not None])}); "
        + (
            f"one engine-scale batch (V {b.scale_vocab}, k {b.scale_k}, max_tokens "
            f"{b.scale_tokens}, binned chi-square per position over {b.scale_runs} runs); "
            if b.scale_vocab
            else ""
        )
        + f"a request the enumerator cannot follow must see TV {b.detect_tv:g}"
    )


def run(
    subject,
    budget,
    seed: int,
    *,
    deadline=None,
    stop_on_first: bool | tuple[str, ...] = False,
    prefetched: dict | None = None,
    aim=None,
    cases=None,
    reference=None,
    **overrides,
) -> BatteryResult:
    """``cases``: declared cases (``declared_cases``) run instead of the standard ones;
    ``reference``: the engine's own target-only path (``loop.own_reference``)."""
    if cases is not None:
        cases = declared_cases(cases)
    return run_loop_battery(
        subject,
        get_budget(budget),
        seed,
        deadline=deadline,
        stop_on_first=stop_on_first,
        aim=aim,
        cases=cases,
        reference=reference,
        **overrides,
    )


def run_loop_battery(
    subject,
    budget="standard",
    seed: int = 0,
    *,
    stop_on_first: bool | tuple[str, ...] = False,
    deadline: float | None = None,
    cases=None,
    aim=None,
    reference=None,
    **overrides,
) -> BatteryResult:
    """Every loop check on every loop case; never raises for a broken subject (nor for a broken
    ``reference``: a finding on it, ``loop.own_reference``).

    ``subject``: ``generate(target, draft, requests, k, rng)`` (a callable, handed to its process by
    fork) or a started ``runner.Runner``; ``budget``: a name of ``LOOP_BUDGETS`` (or a round
    ``round_cases.Budget``, by its name) or a ``LoopBudget``; ``overrides`` replace its fields
    (``validation.with_overrides``: an unknown field or a bad value is an error).
    ``aim``: an ``interfaces.Aim`` adds aimed engine-scale batches (``scale_loop_cases``).
    ``reference``: the engine's own target-only path (a callable of the loop's interface or a
    started ``runner.Runner``): every law judged against it (``loop.own_reference``)."""
    from ...common.validation import check_seed, with_overrides

    seed = check_seed(seed)
    b = get_loop_budget(budget)
    b = with_overrides("loop", b, overrides)
    cases = standard_cases(b, seed, aim) if cases is None else with_seeded_declared(cases)
    with reference_process(reference) as handle:
        result = run_in_subject(
            subject,
            lambda subject_handle: with_reference(LoopBattery(subject_handle, b, seed, deadline), handle),
            lambda run: run.run(list(cases), stop_on_first),
        )
    result.reach = cases_reach(cases)
    result.ran.append(reach_line(result.reach))
    return result


def counterexample(
    subject, budget, seed: int, result: BatteryResult, aim=None, cases=None, reference=None
) -> dict | None:
    """The smallest request and model that show a law or contract finding (None without one);
    with declared ``cases``, the smallest of them (fewest requests, then vocabulary, max_tokens, k);
    with a ``reference``, judged against it (an engine-scale finding is then described on its own
    batch, not shrunk)."""
    checks = counterexample_checks(result)
    if not checks:
        return None
    declared = declared_cases(cases) if cases is not None else None
    if checks == {"loop-binned-chi-square"}:  # only an engine-scale batch shows it: shrunk from it
        finding = next(f for f in result.flagged(("distribution",)) if f.check == "loop-binned-chi-square")
        pool = declared if declared is not None else scale_loop_cases(budget, seed, aim)
        case = next((c for c in pool if c.name == finding.case), None)
        if case is not None and reference is not None:
            return describe_binned_loop(case, finding)
        return shrink_binned_loop(subject, budget, seed, case, finding) if case is not None else None
    exact_ok = not any(f.check == "rng" for f in result.findings)
    if declared is None:
        sweeps = swept_cases(budget)
        small = list(small_loop_cases()) + [c for c in sweeps if not c.positions]
    else:
        sweeps = []
        small = sorted(
            (c for c in declared if c.kind not in SCALE_KINDS),
            key=lambda c: (
                len(c.requests),
                c.vocab_size,
                max((q.params.max_tokens for q in c.requests), default=0),
                c.k,
            ),
        ) + [c for c in with_seeded_declared(declared) if c.seeded]
    with reference_process(reference) as handle:
        found = find_loop_counterexample(
            subject, get_budget(budget), seed, checks, exact_ok, cases=small, reference=handle
        )
    return found if found is not None else sweep_counterexample(result, sweeps)


def sweep_counterexample(result: BatteryResult, sweeps) -> dict | None:
    """A law finding only a sweep judged per position shows (no smaller candidate did), described
    on that sweep (``describe_binned_loop``, method "positions"); None without one."""
    by_name = {c.name: c for c in sweeps if c.positions}
    finding = next((f for f in result.flagged(("distribution",)) if f.case in by_name), None)
    return None if finding is None else describe_binned_loop(by_name[finding.case], finding, "positions")


def units(load, budget, stop_on_first: bool | tuple[str, ...] = False) -> list[tuple]:
    """None: the loop battery runs whole."""
    return []


__all__ = [
    "ALIASES",
    "CASES_ATTRIBUTE",
    "NAME",
    "PARAMETERS",
    "cases_reach",
    "counterexample",
    "coverage",
    "declared_cases",
    "declared_coverage",
    "get_budget",
    "reach",
    "reach_line",
    "run",
    "run_loop_battery",
    "standard_cases",
    "subject_cases",
    "sweep_counterexample",
    "swept_cases",
    "units",
    "with_seeded_declared",
]
