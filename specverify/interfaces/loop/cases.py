"""The loop interface's cases: the budgets, the request batches the loop battery judges, and the
reference loop's law and tokens per pass on them.

A ``LoopCase`` is a target and a draft (``loop.LogitTable``, ``loop.FirstTokenLogits`` or
``loop.ContextFreeLogits``), a batch of requests and k. Cases, in this order (every one judged by ``loop_checks.LoopBattery``):

- the core (``loop_cases``, kind "fixed"): logit tables on a vocabulary of 3 with drafts of the
  same width, wider (padding rows with finite logits, as real pairs have) and narrower; single
  requests and a ragged batch with different params and lengths; k 1 or 2; max_tokens 1 to 3;
- the edges (``edge_cases``, kind "edge", in every budget): max_tokens 0 and 1, a prompt ending
  with its stop id, a stop id as a likely first token, a grammar allowing one token, top-k 1, top-p
  0.05, min-p 0.95, temperature with logit bias, min-p, top-k and top-p together, penalties over
  repeated prompt tokens, an empty batch, two identical unseeded requests, a ragged batch of 8,
  and k = 3 on a vocabulary of 4 with a 3-token prompt and max_tokens 4;
- ``budget.generated`` cases drawn from the check's seed (``generated_loop_cases``, kind
  "generated"): vocabularies 2 to 5, k 1 to 4, prompts of 1 to 4 tokens, max_tokens 0 to 5, every
  sampling parameter drawn (``drawn_params``, the value sets of ``strategies.sampling_params``);
- then the seeded case (request 0 seeded beside an unseeded one): seeds by replay and by law;
- the sweeps (``sweep_loop_cases``, kind "sweep", in every budget), one dimension at a time to
  the budget's largest value, the others small: the context (prompt + output, 2^j - 1 to 2^j + 1
  up to ``sweep_context``) on a target whose rows the first token chooses, enumerated; rounds of
  an unseeded request, rounds of a seeded one over seeds, max_tokens and requests per batch on a
  context-free target, judged per position and by pairs of positions (``sampled_sweeps``); greedy
  requests at the max_tokens boundary values, every draft rejected (one token a round);
- last, the engine-scale batches (``scale_loop_cases``, kinds "scale" and "aimed"), judged by a
  binned chi-square per position.

The check's seed fixes everything (``SEED_STREAMS``: one child of ``numpy.random.SeedSequence(seed)``
per purpose), the budget every count (paths, runs, seeds). ``reference_rates`` (and
``tokens_per_pass_rates``) is the reference loop (``samplers.loop.generate``) enumerated in the
parent, its outputs read as a subject's are (``loop_tasks.read_outcome``); ``tokens_per_pass_test``
compares sampled runs with it. The counterexample search's smaller candidates are
``loop_counterexample.small_loop_cases``.

It is over 550 lines because every case family (fixed, edge, generated, sweeps, engine-scale) is
drawn from the one seed tree or the budget and judged by the one reference law here, and the
budgets' case lists index into them in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ...battery import budgets
from ...battery.budgets import LoopBudget
from ...battery.seed_tree import stream
from ...laws import exact
from ...laws.requests import (
    ContextFreeLogits,
    FirstTokenLogits,
    LastTokenGrammar,
    LogitTable,
    Request,
    SamplingParams,
    sequence_law,
)
from .tasks import read_outcome

LOOP_BUDGETS = budgets.view("loop")
"""The loop sections of the named budgets (``budgets.TABLE``), by name."""


def campaign_loop_budget(name: str) -> LoopBudget:
    """``tv=X``: the thorough loop budget with every request the enumerator cannot follow (fixed,
    edge or generated case) sampled until its chi-square sees TV X (``budgets.campaign``)."""
    return budgets.campaign("loop", name)


def get_loop_budget(budget) -> LoopBudget:
    """A ``LoopBudget`` as it is, a name of ``LOOP_BUDGETS`` or ``tv=X`` (``campaign_loop_budget``);
    another interface's budget (a round ``Budget``) by its name (``budgets.section``)."""
    return budgets.section("loop", budget)


@dataclass(frozen=True)
class LoopCase:
    """A target and a draft (logit tables), a batch of requests and k."""

    name: str
    target: LogitTable
    draft: LogitTable
    requests: tuple
    k: int
    seeded: bool = False  # a reproducibility case: request 0 is seeded per run
    kind: str = "fixed"  # "fixed" (the core), "edge" (edge_cases), "generated" (generated_loop_cases),
    # "declared" (by the subject, ``interfaces.loop.declared_cases``), "sweep" (sweep_loop_cases),
    # "scale" / "aimed" (SCALE_KINDS)
    side: str | None = None  # an engine-scale batch's ``scale.scale_pair`` side ("residual" / "draft")
    sweep: str | None = None  # the dimension a sweep case reaches (a key of ``SWEEP_DIMENSIONS``; "a x b": a corner)
    positions: bool = False  # judged per position and by pairs of positions (a context-free target)

    @property
    def vocab_size(self) -> int:
        return self.target.width


def seeded_logits(seed: int, period: int, vocab: int, width: int, scale: float = 1.2) -> np.ndarray:
    """A (period, vocab, width) table of normal logits from ``default_rng(seed)``, rounded to 3
    places: the fixed cases' and the counterexample candidates' tables."""
    return np.random.default_rng(seed).normal(scale=scale, size=(period, vocab, width)).round(3)


@lru_cache(maxsize=1)
def loop_cases() -> tuple[LoopCase, ...]:
    target = LogitTable(seeded_logits(11, 2, 3, 3, 0.8), "target V3 period 2")
    same = LogitTable(seeded_logits(12, 1, 3, 3), "draft V3")
    padded = seeded_logits(13, 1, 3, 4)
    padded[..., 3] = 0.5  # a padding row with a finite logit, as real pairs have
    wider = LogitTable(padded, "draft V3 + 1 padding row")
    narrower = LogitTable(seeded_logits(14, 1, 3, 2), "draft with 2 of the 3 ids")
    tiny_t = seeded_logits(15, 1, 3, 3)
    tiny_t[..., 2] = -1e4  # the target never emits token 2 ...
    tiny_d = seeded_logits(16, 1, 3, 3)
    tiny_d[..., 2] = np.log(1e-8) + tiny_d[..., :2].max(axis=-1)  # ... the draft rarely drafts it
    grammar = LastTokenGrammar((0, 1), ((1, 2), (0, 2), (0, 1)), ((0, 1), (1, 2), (0, 1, 2)))
    penalties = SamplingParams(
        temperature=1.0,
        repetition_penalty=1.4,
        frequency_penalty=0.5,
        presence_penalty=0.3,
        min_p=0.15,
        logit_bias={0: 0.5},
        stop_token_ids=(2,),
        max_tokens=3,
    )
    greedy = SamplingParams(temperature=0, repetition_penalty=2.5, logit_bias={1: 0.3}, max_tokens=2)
    short = SamplingParams(temperature=0.8, top_k=1, max_tokens=1)  # one token, no branching
    return (
        LoopCase("penalties, min-p, logit bias, stop; k=2", target, same, (Request((0,), penalties),), 2),
        LoopCase(
            "grammar, top-k, top-p; narrower draft; k=2",
            target,
            narrower,
            (
                Request(
                    (1,), SamplingParams(temperature=0.9, top_k=2, top_p=0.95, max_tokens=3, allowed_tokens=grammar)
                ),
            ),
            2,
        ),
        LoopCase(
            "logit bias, stop; draft with a padding row; k=1",
            target,
            wider,
            (
                Request(
                    (2,),
                    SamplingParams(temperature=1.3, logit_bias={2: -0.7, 1: 0.4}, stop_token_ids=(1,), max_tokens=3),
                ),
            ),
            1,
        ),
        LoopCase(
            "draft q(2) = 1e-8 where the target has p(2) = 0; k=2",
            LogitTable(tiny_t, "target p(2) = 0"),
            LogitTable(tiny_d, "draft q(2) = 1e-8"),
            (Request((0,), SamplingParams(max_tokens=2)),),
            2,
        ),
        LoopCase(
            "ragged batch: penalties + stop, greedy, one token; k=2",
            target,
            same,
            (
                Request((0,), replace(penalties, min_p=0.0, logit_bias={}, stop_token_ids=())),
                Request((1, 2), greedy),
                Request((2,), short),
            ),
            2,
        ),
        LoopCase(
            "seeded request beside an unseeded one; k=1",
            target,
            same,
            (
                Request((0,), SamplingParams(max_tokens=3, repetition_penalty=1.3)),
                Request((1,), SamplingParams(max_tokens=3)),
            ),
            1,
            seeded=True,
        ),
    ) + edge_cases()


def _one_hot_rows(table: np.ndarray) -> np.ndarray:
    """Each row's largest logit kept, every other at -inf: a draft whose q is one-hot."""
    return np.where(table == table.max(axis=-1, keepdims=True), table, -np.inf)


@lru_cache(maxsize=1)
def edge_cases() -> tuple[LoopCase, ...]:
    """The edges every budget reaches on purpose (part of ``loop_cases``), each enumerable in a few
    dozen paths: max_tokens 0 beside 1; a prompt that ends with its stop id where the stop id is
    also a likely first token; a grammar allowing one token, top-k 1, top-p 0.05 and min-p 0.95 in
    one batch (each request deterministic); temperature with logit bias, min-p, top-k and top-p
    together; penalties over a prompt with repeated tokens; an empty batch; two identical
    unseeded requests in one batch (their joint law must be the product of their laws: a loop
    that shares one output between them is caught exactly); a ragged batch of 8
    (prompts of 1 to 4 tokens, max_tokens 0 to 5, greedy and sampled); and k = 3 drafts on a
    vocabulary of 4 with a 3-token prompt and max_tokens 4 (a period-2 target, so the prompt's
    length matters; a one-hot draft and top-k 2 keep it to 16 paths)."""
    t3 = LogitTable(seeded_logits(11, 2, 3, 3, 0.8), "target V3 period 2")
    d3 = LogitTable(seeded_logits(12, 1, 3, 3), "draft V3")
    t4 = LogitTable(seeded_logits(17, 2, 4, 4, 1.0), "target V4 period 2")
    d4 = LogitTable(seeded_logits(19, 1, 4, 4), "draft V4")
    hot4 = LogitTable(_one_hot_rows(seeded_logits(18, 1, 4, 4)), "one-hot draft V4")
    one = LastTokenGrammar((1,), ((2,), (0,), (1, 2), (1,)))  # one token allowed at most states
    ragged = (
        Request((0,), SamplingParams(temperature=0, max_tokens=5)),
        Request((1, 2), SamplingParams(max_tokens=0)),
        Request((2, 0, 1), SamplingParams(temperature=0, repetition_penalty=1.5, max_tokens=3)),
        Request((3, 3, 1, 0), SamplingParams(top_k=1, max_tokens=4, stop_token_ids=(2,))),
        Request((1,), SamplingParams(temperature=0.9, max_tokens=1)),
        Request((2, 1), SamplingParams(temperature=0, logit_bias={3: 0.6}, max_tokens=2)),
        Request((0, 0, 0), SamplingParams(min_p=0.9, max_tokens=5)),
        Request((3,), SamplingParams(top_p=0.4, max_tokens=2)),
    )
    return (
        LoopCase(
            "edge: max_tokens 0 beside max_tokens 1; k=1",
            t3,
            d3,
            (Request((1,), SamplingParams(max_tokens=0)), Request((0,), SamplingParams(temperature=0.7, max_tokens=1))),
            1,
            kind="edge",
        ),
        LoopCase(
            "edge: a prompt ending with its stop id, the stop id a likely first token; k=2",
            t3,
            d3,
            (Request((0, 2), SamplingParams(stop_token_ids=(2,), logit_bias={2: 1.0}, max_tokens=2)),),
            2,
            kind="edge",
        ),
        LoopCase(
            "edge: a grammar allowing one token, top-k 1, top-p 0.05, min-p 0.95; k=2",
            t4,
            hot4,
            (
                Request((0,), SamplingParams(allowed_tokens=one, max_tokens=3)),
                Request((1,), SamplingParams(temperature=1.3, top_k=1, max_tokens=3)),
                Request((2,), SamplingParams(top_p=0.05, max_tokens=3)),
                Request((3,), SamplingParams(min_p=0.95, max_tokens=3)),
            ),
            2,
            kind="edge",
        ),
        LoopCase(
            "edge: temperature, logit bias, min-p, top-k and top-p together; k=2",
            t4,
            d4,
            (
                Request(
                    (1,),
                    SamplingParams(
                        temperature=0.7, logit_bias={0: 0.8, 3: -0.5}, min_p=0.1, top_k=3, top_p=0.9, max_tokens=3
                    ),
                ),
            ),
            2,
            kind="edge",
        ),
        LoopCase(
            "edge: penalties over a prompt with repeated tokens; k=2",
            t3,
            d3,
            (
                Request(
                    (1, 1, 2, 1),
                    SamplingParams(repetition_penalty=1.6, frequency_penalty=0.4, presence_penalty=0.3, max_tokens=2),
                ),
            ),
            2,
            kind="edge",
        ),
        LoopCase("edge: an empty batch; k=2", t3, d3, (), 2, kind="edge"),
        LoopCase(
            "edge: two identical unseeded requests (same prompt and params) in one batch; k=2",
            t3,
            d3,
            (Request((1,), SamplingParams(temperature=0.9, max_tokens=2)),) * 2,
            2,
            kind="edge",
        ),
        LoopCase(
            "edge: a ragged batch of 8 (prompts 1-4 tokens, max_tokens 0-5); k=2", t4, hot4, ragged, 2, kind="edge"
        ),
        LoopCase(
            "edge: k=3 on a vocabulary of 4, a 3-token prompt, max_tokens 4; k=3",
            t4,
            hot4,
            (Request((2, 0, 3), SamplingParams(temperature=0.8, top_k=2, logit_bias={1: 0.7}, max_tokens=4)),),
            3,
            kind="edge",
        ),
    )


# --------------------------------------------------------------------------- drawn from the seed

SEED_STREAMS = (
    "generated cases",
    "seed-law and same-seed runs",
    "engine-scale cases",
    "engine-scale runs",
    "shrink cases",
    "shrink runs",
    "loop chi-square",
    "seed replay runs",
    "counterexample runs",
)
"""What each child of ``numpy.random.SeedSequence(seed)`` draws (``battery.stream``), by index:
child 0 the generated cases (one grandchild per case, so that case i is the same whatever the
budget's count), child 1 the ``rng`` handed to the loop in the seed-law and same-seed runs (what
unseeded batch-mates draw from), child 2 the engine-scale and aimed cases (``scale_loop_cases``,
one grandchild per case), child 3 the rng of their runs, child 4 the smaller batches a binned
finding is shrunk over (``shrink_binned_loop``, one grandchild per candidate), child 5 the rng of
their runs, child 6 the chi-square of a case the enumerator cannot follow (grandchild i for case i
of the battery's cases), child 7 the loop's rng in the seed replay runs (``loop_seed_task``: node
``(7, s, r)`` for request seed s and run r: 0 alone, 1 batched, 2 the second request alone, 3 the
same-seed pair), child 8 the counterexample search's chi-square runs (grandchild i for candidate
i). The root itself (``default_rng(seed)``) draws the replay check's three runs."""


def seed_stream(seed: int, purpose: str, *path: int) -> np.random.SeedSequence:
    """The node ``(SEED_STREAMS.index(purpose), *path)`` of ``SeedSequence(seed)``'s tree."""
    return stream(seed, SEED_STREAMS.index(purpose), *path)


# The value sets of ``strategies.sampling_params`` (the Hypothesis strategy), drawn here with NumPy
# so that the check's seed, not Hypothesis, fixes them; tiny top-p and min-p near 1 added.
_TEMPERATURES = (0.0, 0.7, 1.0, 1.5)
_TOP_PS = (1.0, 0.9, 0.6, 0.05)
_MIN_PS = (0.0, 0.1, 0.3, 0.95)
_REPETITION = (1.0, 1.3, 0.8)
_FREQUENCY = (0.0, 0.5, -0.3)
_PRESENCE = (0.0, 0.4)
_BIASES = (-1.0, 0.5, 2.0)
GENERATED_ATTEMPTS = 200
"""Draws tried per generated case before its max_tokens is lowered (see ``generated_loop_cases``)."""


def _pick(rng, values):
    return values[int(rng.integers(len(values)))]


def _ids(rng, vocab: int) -> tuple:
    """A non-empty sorted set of ids (``strategies.grammars``' allowed sets)."""
    n = int(rng.integers(1, vocab + 1))
    return tuple(sorted(int(x) for x in rng.choice(vocab, size=n, replace=False)))


def drawn_grammar(rng, vocab: int) -> LastTokenGrammar:
    """``strategies.grammars`` drawn with NumPy: a non-empty allowed set first and after each token,
    half the time a different table at odd lengths."""
    after = tuple(_ids(rng, vocab) for _ in range(vocab))
    odd = tuple(_ids(rng, vocab) for _ in range(vocab)) if rng.random() < 0.5 else None
    return LastTokenGrammar(_ids(rng, vocab), after, odd)


def drawn_params(rng, vocab: int, max_tokens: int) -> SamplingParams:
    """``strategies.sampling_params`` drawn with NumPy: every field (temperature 0 included), a
    grammar a third of the time, a stop id half the time, up to 2 logit biases."""
    token = lambda: int(rng.integers(vocab))  # noqa: E731
    return SamplingParams(
        temperature=_pick(rng, _TEMPERATURES),
        top_k=None if rng.random() < 0.5 else int(rng.integers(1, vocab + 1)),
        top_p=_pick(rng, _TOP_PS),
        min_p=_pick(rng, _MIN_PS),
        repetition_penalty=_pick(rng, _REPETITION),
        frequency_penalty=_pick(rng, _FREQUENCY),
        presence_penalty=_pick(rng, _PRESENCE),
        logit_bias={token(): _pick(rng, _BIASES) for _ in range(int(rng.integers(0, 3)))},
        allowed_tokens=drawn_grammar(rng, vocab) if rng.random() < 1 / 3 else None,
        stop_token_ids=(token(),) if rng.random() < 0.5 else (),
        max_tokens=max_tokens,
    )


def _drawn_case(rng, name: str, m_max: int) -> LoopCase:
    """One loop case: vocabulary 2 to 5, a period-1-to-3 target (normal logits, a third of the time
    one id at -inf: p = 0 there), a draft as wide (a fifth of the time the target itself: p = q),
    one id wider (a padding row with a finite logit) or one narrower; k 1 to 4; 1 to 3 requests
    (1 twice as often), each a prompt of 1 to 4 tokens, drawn params and max_tokens 0 to m_max."""
    V, k, period = int(rng.integers(2, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
    tt = rng.normal(scale=_pick(rng, (0.8, 1.2, 2.0)), size=(period, V, V)).round(3)
    if rng.random() < 1 / 3:
        tt[..., int(rng.integers(V))] = -np.inf
    target = LogitTable(tt, f"target V{V} period {period}")
    width = _pick(rng, (V, V, V + 1, V - 1))
    if width == V and rng.random() < 0.2:
        draft = LogitTable(tt, "draft = target")
    else:
        dt = rng.normal(scale=1.2, size=(1, V, width)).round(3)
        if width > V:
            dt[..., V:] = 0.5
        draft = LogitTable(dt, f"draft V{V} width {width}")
    n = _pick(rng, (1, 1, 2, 3))
    reqs = tuple(
        Request(
            tuple(int(x) for x in rng.integers(0, V, int(rng.integers(1, 5)))),
            drawn_params(rng, V, int(rng.integers(0, m_max + 1))),
        )
        for _ in range(n)
    )
    shape = ", ".join(f"prompt {len(r.prompt)} m={r.params.max_tokens}" for r in reqs)
    return LoopCase(
        f"{name}: V{V} period {period}, draft width {width}, k={k}, {n} request{'s' if n > 1 else ''} ({shape})",
        target,
        draft,
        reqs,
        k,
        kind="generated",
    )


def _reference_law(case: LoopCase, max_paths: int) -> dict:
    from ...samplers.reference_loop import generate

    return exact.enumerate_distribution(
        lambda rng: read_outcome(
            generate(case.target, case.draft, list(case.requests), case.k, rng), len(case.requests), case.vocab_size
        ),
        max_paths=max_paths,
    )


def tokens_per_pass_rates(law: dict, n: int) -> list[float]:
    """Exact E[tokens] / E[tokens - accepted] per request (inf when every token was a draft)."""
    out = []
    for i in range(n):
        tokens = sum(w * len(o[i][0]) for o, w in law.items())
        passes = sum(w * (len(o[i][0]) - min(o[i][3], len(o[i][0]))) for o, w in law.items())
        out.append(tokens / passes if passes > 0 else (math.inf if tokens > 0 else 1.0))
    return out


def tokens_per_pass_test(tokens, passes, reference: float, rate: float, false_pass_rate: float) -> dict:
    """Sampled tokens per target pass, sum(tokens) / sum(passes) over n runs, against the
    reference loop's exact rate r: one-sided, only a shortfall is a finding. Per run D = tokens -
    r x passes has mean >= 0 when the subject's rate is r or more; z = mean(D) / (sd(D) / sqrt(n)),
    a finding when z < -z(``rate``) (normal approximation of the mean, its false-fail rate
    ``rate``; when D never varies, when mean(D) < 0). Returns ``measured``, ``z``, ``p_value``,
    ``passed`` and ``detects``: the shortfall in tokens per pass seen with probability
    1 - ``false_pass_rate``, (z(rate) + z(false_pass_rate)) sd(D) / sqrt(n) / mean(passes)."""
    from scipy.stats import norm

    t, q = np.asarray(tokens, dtype=np.float64), np.asarray(passes, dtype=np.float64)
    n, d = len(t), t - reference * q
    measured = float(t.sum() / q.sum()) if q.sum() > 0 else math.inf
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    mean = float(d.mean())
    if sd > 0:
        z = mean / (sd / math.sqrt(n))
        p_value, passed = float(norm.cdf(z)), bool(z >= norm.ppf(rate))
    else:
        z, p_value, passed = (0.0, 1.0, True) if mean >= -1e-9 else (-math.inf, 0.0, False)
    detects = (norm.isf(rate) + norm.isf(false_pass_rate)) * sd / math.sqrt(n) / max(float(q.mean()), 1e-12)
    return {"measured": measured, "z": z, "p_value": p_value, "passed": passed, "detects": float(detects), "runs": n}


_REFERENCE_RATES: dict = {}


def reference_rates(case: LoopCase) -> list[float]:
    """The reference loop's tokens per target pass on the case, enumerated in the parent."""
    from ...samplers.reference_loop import generate

    key = id(case)
    if key not in _REFERENCE_RATES:
        law = exact.enumerate_distribution(
            lambda rng: read_outcome(
                generate(case.target, case.draft, list(case.requests), case.k, rng), len(case.requests), case.vocab_size
            ),
            max_paths=1_000_000,
        )
        _REFERENCE_RATES[key] = (case, tokens_per_pass_rates(law, len(case.requests)))
    return _REFERENCE_RATES[key][1]


@lru_cache(maxsize=8)
def _generated(seed: int, count: int, max_paths: int) -> tuple[LoopCase, ...]:
    out = []
    for i in range(count):
        rng = np.random.default_rng(seed_stream(seed, "generated cases", i))
        for attempt in range(4 * GENERATED_ATTEMPTS):
            case = _drawn_case(rng, f"generated #{i} (seed {seed})", 5 >> (attempt // GENERATED_ATTEMPTS))
            try:
                for r in case.requests:
                    sequence_law(case.target, r)  # a grammar that allows only ids at p = 0: redraw
                law = _reference_law(case, max_paths)
            except (ValueError, exact.NotEnumerable):
                continue
            _REFERENCE_RATES[id(case)] = (case, tokens_per_pass_rates(law, len(case.requests)))
            out.append(case)
            break
    return tuple(out)


def generated_loop_cases(budget="standard", seed: int = 0) -> list[LoopCase]:
    """``budget.generated`` loop cases drawn from ``seed_stream(seed, "generated cases")``, case i
    from its i-th child (the same seed gives the same cases, and a budget's cases are the first of
    a larger budget's): ``_drawn_case``'s shapes and ``drawn_params``. A draw is kept when every
    request's law exists (a grammar may allow only ids the target never emits) and the reference
    loop's random decisions take at most ``budget.generated_paths`` paths (counted by enumerating
    it, the law then kept for tokens per pass); otherwise the stream draws again, and after
    ``GENERATED_ATTEMPTS`` draws max_tokens is drawn from a halved range. Judged like the fixed
    cases (``LoopBattery.law_case``: enumeration, or chi-square)."""
    b = get_loop_budget(budget)
    return list(_generated(int(seed), b.generated, b.generated_paths)) if b.generated else []


CORE_KINDS = ("fixed", "declared")
"""LoopCase kinds judged as the core: every path enumerated up to ``max_paths``, else ``samples``
runs whose power is required (an edge or generated case: ``extra_samples``, its power stated)."""

SCALE_KINDS = ("scale", "aimed")
"""LoopCase kinds judged by ``LoopBattery.scale_case`` (a binned chi-square per position)."""


def scale_loop_case(vocab: int, k: int, max_tokens: int, rng, name: str, kind: str, side: str = "residual") -> LoopCase:
    """A batch at engine scale: a context-free target and draft (``loop.ContextFreeLogits``, the
    logs of a ``scale.scale_pair`` of that ``side``: mass on the ids where tiles and id types
    end, drawn from ``rng``) and two requests of ``max_tokens`` each: a 1-token
    prompt at temperature 1, and a 7-token prompt (ids at the edges) with temperature 0.8, top-k
    (half the vocabulary), top-p 0.95, min-p 1e-4, a logit bias on the last id and a stop id at
    V - 2. Context-free processing: every position's law is the processed row."""
    from ...laws.scale import scale_pair

    pair = scale_pair(vocab, side, rng)
    p, q = pair.p_table[0], pair.q_table[0]
    target = ContextFreeLogits(np.log(p), f"context-free target V{vocab}")
    draft = ContextFreeLogits(np.log(q), f"context-free draft V{vocab}")
    long_prompt = tuple(int(x) % vocab for x in (0, vocab - 1, 1, vocab - 2, 127, 128, 1023))
    reqs = (
        Request((int(rng.integers(vocab)),), SamplingParams(max_tokens=max_tokens)),
        Request(
            long_prompt,
            SamplingParams(
                temperature=0.8,
                top_k=max(1, vocab // 2),
                top_p=0.95,
                min_p=1e-4,
                logit_bias={vocab - 1: 1.5},
                stop_token_ids=(max(vocab - 2, 0),),
                max_tokens=max_tokens,
            ),
        ),
    )
    return LoopCase(
        f"{name}: V{vocab}, k={k}, max_tokens {max_tokens}, prompts 1 and 7 tokens, binned",
        target,
        draft,
        reqs,
        k,
        kind=kind,
        side=side,
    )


def scale_loop_cases(budget="standard", seed: int = 0, aim=None) -> list[LoopCase]:
    """The budget's engine-scale batch (``scale_vocab``, ``scale_k``, ``scale_tokens``; none when
    ``scale_vocab`` is 0), then with an ``interfaces.Aim`` one aimed batch per k (k = 4 when
    none) at the aimed vocabulary (4096 when none) and max_tokens (8 when none), sides
    alternating from "residual" (the budget's batch is "residual": p holds the edge ids' mass,
    so rejections' residual lands there). Case i drawn
    from the i-th child of ``seed_stream(seed, "engine-scale cases")``."""
    b = get_loop_budget(budget)
    shapes = [(b.scale_vocab, b.scale_k, b.scale_tokens, "engine scale", "scale", "residual")] if b.scale_vocab else []
    if aim:
        m = aim.max_tokens if aim.max_tokens is not None else 8
        shapes += [
            (aim.vocab or 4096, k, m, "aimed", "aimed", ("residual", "draft")[i % 2])
            for i, k in enumerate(aim.ks or (4,))
        ]
    return [
        scale_loop_case(
            v,
            k,
            m,
            np.random.default_rng(seed_stream(seed, "engine-scale cases", i)),
            f"{name} (seed {seed})",
            kind,
            side,
        )
        for i, (v, k, m, name, kind, side) in enumerate(shapes)
    ]


# --------------------------------------------------------------------------- the sweeps

SWEEP_DIMENSIONS = {
    "context": "sweep_context",
    "rounds": "sweep_rounds",
    "seeded rounds": "sweep_seeded_rounds",
    "max_tokens": "sweep_max_tokens",
    "requests per batch": "sweep_batch",
}
"""Each dimension the sweeps reach (``LoopCase.sweep``) and the ``LoopBudget`` field holding its
largest value (0: that sweep off)."""

NO_SWEEPS = {field: 0 for field in SWEEP_DIMENSIONS.values()}
"""The overrides that turn every sweep off (``run_loop_battery(..., **NO_SWEEPS)``): a battery
judged on its other cases only."""

MAX_LAG = 16
"""The largest distance between two positions of one request whose joint law a sampled sweep
tests (``loop_checks.lag_pairs``): a generator re-created every r rounds of two tokens repeats
at distance 2r."""


def boundary_values(largest: int, smallest: int = 1) -> list[int]:
    """2^j - 1, 2^j and 2^j + 1 for each 2^j from ``smallest`` to ``largest``, and ``largest``
    itself: the values from ``smallest - 1`` to ``largest`` where an engine's tiles, buffers and
    id types end, sorted."""
    values, j = {largest}, 1
    while j <= largest:
        if j >= smallest:
            values |= {j - 1, j, j + 1}
        j *= 2
    return sorted(v for v in values if smallest - 1 <= v <= largest)


def context_sweep(largest: int) -> list[LoopCase]:
    """One request per case, max_tokens 3, prompts of 2^j - 1 tokens (j = 1, 2, ...: the target
    sees contexts of 2^j - 1, 2^j and 2^j + 1 tokens) and last a prompt of ``largest`` - 3
    (prompt + output = ``largest``). The target is a ``FirstTokenLogits``: its rows are chosen by
    the first prompt token (0), every later prompt token 1 or 2, so a loop that shows the target
    only the last w < context tokens reads other rows, and the exact law differs (a sliding window
    of 16 first shows at the prompt of 15 tokens). Every other case a repetition penalty counts
    the whole prompt. Enumerated like an edge (a few dozen paths each)."""
    if largest < 4:
        return []
    target = FirstTokenLogits(seeded_logits(41, 3, 3, 3, 1.5), "target V3, rows chosen by the first token")
    draft = LogitTable(seeded_logits(42, 1, 3, 3), "draft V3")
    prompts = dict.fromkeys([2**j - 1 for j in range(1, largest.bit_length()) if 2**j + 2 <= largest] + [largest - 3])
    cases = []
    for i, n in enumerate(prompts):
        prompt = (0,) + tuple(1 + (t % 3 == 2) for t in range(n - 1))
        penalty = {"repetition_penalty": 1.3} if i % 2 else {}
        cases.append(
            LoopCase(
                f"sweep: context {n + 3} (prompt {n} from first token 0, max_tokens 3"
                f"{', repetition penalty' if penalty else ''}); k=2",
                target,
                draft,
                (Request(prompt, SamplingParams(temperature=0.9, max_tokens=3, **penalty)),),
                2,
                kind="sweep",
                sweep="context",
            )
        )
    return cases


def greedy_max_tokens_case(largest: int) -> LoopCase | None:
    """One batch of greedy requests whose max_tokens are the boundary values from 31 (or
    ``largest`` / 2) to ``largest``, on a period-2 target whose draft always proposes the
    target's least likely token: every draft rejected, one token a round, so a request of
    max_tokens m runs m rounds. Deterministic: one path, enumerated; the output's length and
    every token are checked at each value."""
    if largest < 2:
        return None
    values = boundary_values(largest, min(32, largest))
    t3 = seeded_logits(11, 2, 3, 3, 0.8)
    target, draft = LogitTable(t3, "target V3 period 2"), LogitTable(-t3, "draft V3 = -target (always rejected)")
    reqs = tuple(Request((0,), SamplingParams(temperature=0, max_tokens=m)) for m in values)
    return LoopCase(
        f"sweep: greedy max_tokens {', '.join(map(str, values))}, every draft rejected (one token a round); k=1",
        target,
        draft,
        reqs,
        1,
        kind="sweep",
        sweep="max_tokens",
    )


def context_free_pair(same: bool = False) -> tuple[ContextFreeLogits, ContextFreeLogits]:
    """A context-free target over 4 ids and its draft (the target itself when ``same``)."""
    target = ContextFreeLogits(np.array([0.0, 0.4, -0.3, 0.2]), "context-free target V4")
    if same:
        return target, target
    return target, ContextFreeLogits(np.array([0.5, -0.2, 0.1, -0.4]), "context-free draft V4")


BATCH_PARAMS = (
    SamplingParams(max_tokens=2),
    SamplingParams(temperature=0.6, logit_bias={2: 1.2}, max_tokens=2),
    SamplingParams(top_k=2, max_tokens=2),
    SamplingParams(temperature=1.4, min_p=0.2, max_tokens=2),
)
"""The params a sampled batch sweep cycles through (request i: ``BATCH_PARAMS[i % 4]``, prompt
(0,)): requests i and i + 4 are identical, so their joint law is tested too."""


def sampled_sweeps(b: LoopBudget) -> list[LoopCase]:
    """The sweeps judged per position (``positions``): a context-free target over 4 ids and
    context-free params, so that every position of a request has the processed row as its law
    and any two positions (of one request, or of two identical requests) are independent:

    - rounds: one request of max_tokens 2 x ``sweep_rounds``, k = 1 (at least that many rounds);
    - seeded rounds: one seeded request of max_tokens 2 x ``sweep_seeded_rounds``, k = 1, the draft
      the target itself (every draft accepted: exactly two tokens a round), over seeds 0..n-1;
    - max_tokens: one request of max_tokens ``sweep_max_tokens``, k = 4;
    - requests per batch: ``sweep_batch`` requests of max_tokens 2 (``BATCH_PARAMS``), k = 2."""
    target, draft = context_free_pair()
    out = []
    if b.sweep_rounds:
        m = 2 * b.sweep_rounds
        out.append(
            LoopCase(
                f"sweep: {b.sweep_rounds} rounds or more (max_tokens {m}, k=1), context-free V4; per position",
                target,
                draft,
                (Request((0,), SamplingParams(temperature=0.8, top_k=3, max_tokens=m)),),
                1,
                kind="sweep",
                sweep="rounds",
                positions=True,
            )
        )
    if b.sweep_seeded_rounds:
        m = 2 * b.sweep_seeded_rounds
        same, _ = context_free_pair(same=True)
        out.append(
            LoopCase(
                f"sweep: a seeded request of {b.sweep_seeded_rounds} rounds (max_tokens {m}, k=1, draft = target: "
                f"two tokens a round) over seeds; per position",
                same,
                same,
                (Request((0,), SamplingParams(temperature=0.9, max_tokens=m)),),
                1,
                seeded=True,
                kind="sweep",
                sweep="seeded rounds",
                positions=True,
            )
        )
    if b.sweep_max_tokens:
        out.append(
            LoopCase(
                f"sweep: max_tokens {b.sweep_max_tokens} (k=4), context-free V4; per position",
                target,
                draft,
                (
                    Request(
                        (0,),
                        SamplingParams(temperature=0.6, top_p=0.95, logit_bias={2: 1.2}, max_tokens=b.sweep_max_tokens),
                    ),
                ),
                4,
                kind="sweep",
                sweep="max_tokens",
                positions=True,
            )
        )
    if b.sweep_batch:
        reqs = tuple(Request((0,), BATCH_PARAMS[i % len(BATCH_PARAMS)]) for i in range(b.sweep_batch))
        out.append(
            LoopCase(
                f"sweep: a batch of {b.sweep_batch} requests (max_tokens 2, 4 params cycled), context-free V4; "
                f"per position; k=2",
                target,
                draft,
                reqs,
                2,
                kind="sweep",
                sweep="requests per batch",
                positions=True,
            )
        )
    return out


@lru_cache(maxsize=8)
def _sweeps(context: int, max_tokens: int, sampled: LoopBudget) -> tuple[LoopCase, ...]:
    greedy = greedy_max_tokens_case(max_tokens)
    return tuple(context_sweep(context) + sampled_sweeps(sampled) + ([greedy] if greedy else []))


def sweep_loop_cases(budget="standard") -> list[LoopCase]:
    """The budget's sweeps, one dimension at a time, the others small (kind "sweep"):
    ``context_sweep`` to ``sweep_context`` (enumerated like edges), the ones judged per position
    (``sampled_sweeps``, ``sweep_runs`` runs each; the seeded one over ``seed_law_runs`` seeds),
    then ``greedy_max_tokens_case`` to ``sweep_max_tokens`` (enumerated: one path; last, since a
    loop that makes it random costs ``extra_max_paths`` long runs before statistics). The same
    budget gives the same case objects (cached)."""
    b = get_loop_budget(budget)
    return list(_sweeps(b.sweep_context, b.sweep_max_tokens, b))


__all__ = [
    "BATCH_PARAMS",
    "CORE_KINDS",
    "GENERATED_ATTEMPTS",
    "MAX_LAG",
    "NO_SWEEPS",
    "LOOP_BUDGETS",
    "LoopBudget",
    "LoopCase",
    "SCALE_KINDS",
    "SEED_STREAMS",
    "SWEEP_DIMENSIONS",
    "boundary_values",
    "campaign_loop_budget",
    "context_free_pair",
    "context_sweep",
    "drawn_grammar",
    "drawn_params",
    "edge_cases",
    "generated_loop_cases",
    "get_loop_budget",
    "greedy_max_tokens_case",
    "loop_cases",
    "reference_rates",
    "sampled_sweeps",
    "scale_loop_case",
    "scale_loop_cases",
    "seed_stream",
    "seeded_logits",
    "sweep_loop_cases",
    "tokens_per_pass_rates",
    "tokens_per_pass_test",
]
