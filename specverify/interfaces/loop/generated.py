"""The loop cases drawn from the check's seed: the generated cases (``generated_loop_cases``, kind
"generated": vocabularies 2 to 5, k 1 to 4, prompts of 1 to 4 tokens, max_tokens 0 to 5, every
sampling parameter drawn by ``drawn_params``, the value sets of ``strategies.sampling_params``),
and the engine-scale batches (``scale_loop_cases``, kinds "scale" and "aimed"), judged by a
binned chi-square per position. Each case from its own node of ``loop.cases.SEED_STREAMS``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...laws import exact
from ...laws.requests import ContextFreeLogits, LastTokenGrammar, LogitTable, Request, SamplingParams, sequence_law
from .cases import LoopCase, get_loop_budget, seed_stream
from .reference import reference_law, remember_rates

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
                law = reference_law(case, max_paths)
            except (ValueError, exact.NotEnumerable):
                continue
            remember_rates(case, law)
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


__all__ = [
    "GENERATED_ATTEMPTS",
    "drawn_grammar",
    "drawn_params",
    "generated_loop_cases",
    "scale_loop_case",
    "scale_loop_cases",
]
