"""The loop interface's counterexamples: with a law or contract finding, the smallest request and
model that show it.

``find_loop_counterexample`` judges the candidates of ``small_loop_cases`` (smallest first: one
request before a batch, a vocabulary of 2 before 3, one sampling parameter at a time) each by
``loop.laws.LawChecks.law_case``, the battery's own enumeration or chi-square, and describes
the first that shows the finding (``describe_loop``: the shape of ``round_counterexample.describe`` plus the
requests). A binned finding on an engine-scale batch is shrunk over smaller engine-scale batches
instead (``shrink_binned_loop``, ``describe_binned_loop``).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from ...battery.core import BatteryResult, Finding
from ...battery.subject_calls import run_in_subject
from ...laws import exact, stats
from ...laws.requests import LastTokenGrammar, LogitTable, Request, SamplingParams, sequence_law, step_distribution
from .cases import LoopCase, get_loop_budget, seed_stream, seeded_logits
from .checks import LoopBattery
from .generated import scale_loop_case
from .own_reference import ReferenceBroken, with_reference

LAW_CHECKS = ("sequence-law", "loop-chi-square", "loop-two-sample", "batch-isolation", "joint-law", "position-law")
"""The checks that judge a request's output law: one family for the counterexample search."""


SEED_CHECKS = ("seeded-reproducibility", "seed-law")
"""The checks only a seeded candidate can show (``LoopBattery.seeded_case``)."""


def _family(check: str) -> str:
    return "law" if check in LAW_CHECKS else check


def counterexample_checks(result: BatteryResult) -> set | None:
    """What the counterexample must show: the law when the battery found a distribution finding
    (the round battery's rule), else the contract checks it flagged; None when it flagged nothing."""
    flagged = result.flagged(("distribution", "contract"))
    if not flagged:
        return None
    law = [f.check for f in flagged if f.kind == "distribution"]
    return set(law) if law else {f.check for f in flagged}


def _small_models(vocab: int) -> list[tuple[LogitTable, LogitTable]]:
    """(target, draft) pairs on ``vocab`` ids, simplest first: a same-width draft; a draft with a
    padding row (finite logit, as real pairs have); a draft lacking the last id; a target that
    gives the last id probability 0 where the draft gives it 1e-8; a position-dependent target."""
    target = LogitTable(seeded_logits(300 + vocab, 1, vocab, vocab, 1.0), f"target V{vocab}")
    draft = LogitTable(seeded_logits(310 + vocab, 1, vocab, vocab, 1.0), f"draft V{vocab}")
    padded = seeded_logits(320 + vocab, 1, vocab, vocab + 1, 1.0)
    padded[..., vocab] = 0.5
    zero_t, tiny_d = seeded_logits(330 + vocab, 1, vocab, vocab, 1.0), seeded_logits(340 + vocab, 1, vocab, vocab, 1.0)
    zero_t[..., vocab - 1] = -1e4
    tiny_d[..., vocab - 1] = np.log(1e-8) + tiny_d[..., : vocab - 1].max(axis=-1)
    return [
        (target, draft),
        (target, LogitTable(padded, f"draft V{vocab} + 1 padding row")),
        (
            target,
            LogitTable(seeded_logits(350 + vocab, 1, vocab, vocab - 1, 1.0), f"draft with {vocab - 1} of {vocab} ids"),
        ),
        (
            LogitTable(zero_t, f"target V{vocab}, p({vocab - 1}) = 0"),
            LogitTable(tiny_d, f"draft V{vocab}, q({vocab - 1}) = 1e-8"),
        ),
        (LogitTable(seeded_logits(360 + vocab, 2, vocab, vocab, 1.0), f"target V{vocab} period 2"), draft),
    ]


def _small_params(vocab: int, m: int) -> list[SamplingParams]:
    """One parameter at a time, simplest first, each with max_tokens m."""
    last = vocab - 1
    # even lengths: never the last token again; odd lengths: anything (a state beyond the last token)
    grammar = LastTokenGrammar(
        tuple(range(vocab)),
        tuple(tuple(u for u in range(vocab) if u != t) for t in range(vocab)),
        tuple(tuple(range(vocab)) for _ in range(vocab)),
    )
    return [
        SamplingParams(max_tokens=m),
        SamplingParams(repetition_penalty=1.5, max_tokens=m),
        SamplingParams(frequency_penalty=0.5, presence_penalty=0.3, max_tokens=m),
        SamplingParams(min_p=0.3, max_tokens=m),
        SamplingParams(logit_bias={0: 1.0}, max_tokens=m),
        SamplingParams(stop_token_ids=(last,), max_tokens=m),
        SamplingParams(top_p=0.7, max_tokens=m),
        SamplingParams(temperature=0.7, top_k=vocab - 1, max_tokens=m),
        SamplingParams(allowed_tokens=grammar, max_tokens=m),
        SamplingParams(temperature=0, repetition_penalty=2.0, max_tokens=m),
    ]


@lru_cache(maxsize=1)
def small_loop_cases() -> tuple[LoopCase, ...]:
    """Candidate cases for the counterexample search, smallest first: one request before a batch,
    a vocabulary of 2 before 3, max_tokens 1 to 3, k 1 then 2; within those, one parameter at a
    time on the plain pair (``_small_params``), then the plain request on the other pairs
    (``_small_models``). Batches: two requests with different prompt lengths, params and
    max_tokens on the plain pair, and two identical requests; last, seeded-reproducibility cases
    (request 0 seeded)."""
    single, batch, seeded = [], [], []
    for vocab in (2, 3):
        models = _small_models(vocab)
        for m in (1, 2, 3):
            for k in (1, 2):
                for j, params in enumerate(_small_params(vocab, m)):
                    single.append(
                        LoopCase(
                            f"counterexample V{vocab} m={m} k={k} params {j}", *models[0], (Request((0,), params),), k
                        )
                    )
                for j, (target, draft) in enumerate(models[1:], 1):
                    single.append(
                        LoopCase(
                            f"counterexample V{vocab} m={m} k={k} model {j}",
                            target,
                            draft,
                            (Request((0,), SamplingParams(max_tokens=m)),),
                            k,
                        )
                    )
            if m >= 2:
                twins = (Request((0,), SamplingParams(max_tokens=m - 1)),) * 2
                for k in (1, 2):
                    name = f"counterexample V{vocab} m={m - 1} k={k} two identical requests"
                    batch.append(LoopCase(name, *models[0], twins, k))
                for k in (1, 2):
                    reqs = (
                        Request((0,), SamplingParams(repetition_penalty=1.5, max_tokens=m)),
                        Request((1, 0), SamplingParams(temperature=0.7, max_tokens=m - 1)),
                    )
                    batch.append(LoopCase(f"counterexample V{vocab} m={m} k={k} batch of 2", *models[0], reqs, k))
                seeded.append(
                    LoopCase(
                        f"counterexample V{vocab} m={m} k=1 seeded beside unseeded",
                        *models[0],
                        (Request((0,), SamplingParams(max_tokens=m)), Request((1,), SamplingParams(max_tokens=m))),
                        1,
                        seeded=True,
                    )
                )
    return tuple(single + batch + seeded)


def params_text(params: SamplingParams) -> dict:
    """The fields of ``params`` that differ from the defaults (JSON-ready)."""
    default = SamplingParams()
    out = {}
    for name in params.__dataclass_fields__:
        value = getattr(params, name)
        if value != getattr(default, name):
            out[name] = (
                repr(value)
                if name == "allowed_tokens"
                else ({str(t): b for t, b in value.items()} if isinstance(value, dict) else value)
            )
    return out


def describe_loop(case: LoopCase, finding: Finding, laws: dict) -> dict:
    """The counterexample as ``round_counterexample.describe`` shapes it (vocab_size, k, window = the
    request's max_tokens, prefix = its prompt, p / q = the target's / draft's raw logit tables,
    the sampler's and the target's law side by side), plus the requests and what they show."""
    i = int(finding.evidence.get("request", 0))
    req = case.requests[i]
    method, got, want, runs = laws.get(i, ("exact", {}, sequence_law(case.target, req), None))
    tv = (exact.total_variation(got, want) if method == "exact" else stats.tv_distance(got, want)) if got else 0.0
    return {
        "method": method,
        "case": case.name,
        "check": finding.check,
        "kind": finding.kind,
        "message": finding.message,
        "evidence": {key: v for key, v in finding.evidence.items() if key not in ("got", "expected")},
        "vocab_size": case.vocab_size,
        "k": case.k,
        "window": req.params.max_tokens,
        "prefix": list(req.prompt),
        "request": i,
        "requests": [{"prompt": list(r.prompt), "params": params_text(r.params)} for r in case.requests],
        "model": f"{case.target.name} / {case.draft.name}",
        "order": 1,
        "period": case.target.table.shape[0],
        "p": case.target.table.round(6).tolist(),
        "q": case.draft.table.round(6).tolist(),
        "processed_p": step_distribution(case.target(req.prompt), req.params, req.prompt, ()).round(6).tolist(),
        ("exact_tv" if method == "exact" else "empirical_tv"): float(tv),
        "samples": runs,
        "distributions": [
            {
                "tokens": list(key),
                "sampler": round(float(got.get(key, 0.0)), 9),
                "target": round(float(want.get(key, 0.0)), 9),
            }
            for key in sorted(set(got) | set(want))
        ],
    }


def describe_binned_loop(case: LoopCase, finding: Finding, method: str = "binned") -> dict:
    """A binned finding on an engine-scale batch (``LoopBattery.scale_case``), or (``method``
    "positions") a finding on a sweep judged per position (``LoopBattery.positions``), in
    ``describe_loop``'s shape: the batch itself (no smaller model shows a bug that needs its
    vocabulary, length or batch), p / q the heaviest ids of the processed target row and the
    draft's softmax, the position and binned TV that failed; no per-sequence law
    (``distributions`` is empty)."""
    from ...laws.scale import heaviest

    i = int(finding.evidence.get("request", 0))
    req = case.requests[i]
    p = step_distribution(case.target(req.prompt), req.params, req.prompt, ())
    z = case.draft(req.prompt)
    q = np.exp(z - z.max())
    return {
        "method": method,
        "case": case.name,
        "check": finding.check,
        "kind": finding.kind,
        "message": finding.message,
        "evidence": dict(finding.evidence),
        "vocab_size": case.vocab_size,
        "k": case.k,
        "window": req.params.max_tokens,
        "prefix": list(req.prompt),
        "request": i,
        "requests": [{"prompt": list(r.prompt), "params": params_text(r.params)} for r in case.requests],
        "model": f"{case.target.name} / {case.draft.name}",
        "order": 0,
        "period": 1,
        "p": heaviest(p),
        "q": heaviest(q / q.sum()),
        "position": finding.evidence.get("position"),
        "empirical_tv": float(finding.evidence.get("binned_tv", 0.0)),
        "samples": finding.evidence.get("samples"),
        "distributions": [],
    }


def shrink_binned_loop(subject, budget, seed: int, case: LoopCase, finding: Finding) -> dict | None:
    """The smallest engine-scale batch that still shows a binned finding of ``case``: the shapes
    of ``scale.shrink_shapes`` (V one past each tile / id-type boundary below the case's, k = 1
    before the case's k), each a fresh ``scale_loop_case`` of the case's side with max_tokens
    min(the case's, k + 1), drawn from ``seed_stream(seed, "shrink cases")``, given
    ``scale_runs`` runs and the binned chi-square at the false-fail rate split over every
    candidate's positions. The case's own batch (``describe_binned_loop`` of ``finding``) when no
    smaller one shows it."""
    from ...laws.scale import shrink_shapes

    b = get_loop_budget(budget)
    side = case.side or "residual"
    shapes = [s for s in shrink_shapes(case.vocab_size, case.k, side) if s != (case.vocab_size, case.k)]
    m = max(q.params.max_tokens for q in case.requests)
    candidates = [
        scale_loop_case(
            v,
            k,
            min(m, k + 1),
            np.random.default_rng(seed_stream(seed, "shrink cases", i)),
            f"shrunk (seed {seed})",
            "scale",
            side,
        )
        for i, (v, k) in enumerate(shapes)
    ]
    per_check = stats.split_budget(
        b.false_fail_rate, max(1, sum(min(m, c.k + 1) * len(c.requests) for c in candidates))
    )
    found: list = []

    def search(battery: LoopBattery) -> None:
        rng = np.random.default_rng(seed_stream(seed, "shrink runs"))
        for cand in candidates:
            battery.restart()
            rng = battery.scale_case(cand, per_check, rng)
            hits = [f for f in battery.result.findings if f.check == "loop-binned-chi-square"]
            if hits:
                found.append(describe_binned_loop(cand, hits[0]))
                return

    if candidates:
        run_in_subject(subject, lambda handle: LoopBattery(handle, b, seed, None), search)
    return found[0] if found else describe_binned_loop(case, finding)


def find_loop_counterexample(
    subject,
    budget="standard",
    seed: int = 0,
    checks=None,
    exact_ok: bool = True,
    cases=None,
    judged: list | None = None,
    reference=None,
    **overrides,
) -> dict | None:
    """The smallest request and model (``small_loop_cases`` order) on which the loop subject shows
    a finding of one of ``checks`` (default: any law or contract check; the law checks count as one;
    seeded candidates only when ``checks`` holds one of ``SEED_CHECKS``), a law finding preferred.

    Each candidate is judged by the loop battery's own ``law_case``: exact enumeration when the
    subject replays its rng (``exact_ok``), else ``counterexample_samples`` runs and the battery's
    chi-square at the false-fail rate split over every candidate (``"method": "statistical"``).
    At most ``counterexample_candidates`` candidates are judged, in order (a count, not a time).
    None when none of them shows it, or the subject breaks the search; ``judged``, when a list,
    receives the name of every candidate judged to the end. ``reference``: a started
    ``runner.Runner`` of the engine's own target-only path, the candidates judged against it
    (``loop.own_reference``; the search ends where it breaks)."""
    from ...common.validation import check_seed, with_overrides

    seed = check_seed(seed)
    b = get_loop_budget(budget)
    b = with_overrides("loop", b, overrides)
    b = replace(b, samples=b.counterexample_samples)
    candidates = list(small_loop_cases() if cases is None else cases)[: b.counterexample_candidates]
    wanted = None if checks is None else {_family(c) for c in checks}
    per_check = stats.split_budget(b.false_fail_rate, max(1, sum(len(c.requests) for c in candidates)))
    found: list = []

    def search(battery: LoopBattery) -> None:
        try:
            walk(battery)
        except ReferenceBroken:
            return

    def walk(battery: LoopBattery) -> None:
        for i, case in enumerate(candidates):
            battery.restart()
            if case.seeded:
                if wanted is not None and not wanted & set(SEED_CHECKS):
                    continue
                battery.seeded_case(case, per_check)
            elif wanted is not None and wanted <= set(SEED_CHECKS):
                continue  # only a seeded case can show it
            else:
                battery.law_case(
                    case, per_check, exact_ok, seed_stream(seed, "counterexample runs", i), efficiency=False
                )
            hits = sorted(
                (
                    f
                    for f in battery.result.findings
                    if f.kind in ("distribution", "contract")
                    and f.check != "rng"
                    and (wanted is None or _family(f.check) in wanted)
                ),
                key=lambda f: f.kind != "distribution",
            )  # a law finding first
            if judged is not None:
                judged.append(case.name)
            if hits:
                found.append(describe_loop(case, hits[0], battery.laws))
                return

    run_in_subject(subject, lambda handle: with_reference(LoopBattery(handle, b, seed, None), reference), search)
    return found[0] if found else None


__all__ = [
    "LAW_CHECKS",
    "SEED_CHECKS",
    "counterexample_checks",
    "describe_binned_loop",
    "describe_loop",
    "find_loop_counterexample",
    "params_text",
    "shrink_binned_loop",
    "small_loop_cases",
]
