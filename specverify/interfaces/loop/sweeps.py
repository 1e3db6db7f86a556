"""The loop sweeps (``sweep_loop_cases``, kind "sweep", in every budget), one dimension at a time
to the budget's largest value (``SWEEP_DIMENSIONS``), the others small: the context (prompt +
output, 2^j - 1 to 2^j + 1 up to ``sweep_context``) on a target whose rows the first token
chooses, enumerated; rounds of an unseeded request, rounds of a seeded one over seeds, max_tokens
and requests per batch on a context-free target, judged per position and by pairs of positions
(``sampled_sweeps``); greedy requests at the max_tokens boundary values, every draft rejected (one
token a round).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ...battery.budgets import LoopBudget
from ...laws.requests import ContextFreeLogits, FirstTokenLogits, LogitTable, Request, SamplingParams
from .cases import LoopCase, get_loop_budget, seeded_logits

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
tests (``laws.requests.lag_pairs``): a generator re-created every r rounds of two tokens repeats
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
        penalty: dict[str, Any] = {"repetition_penalty": 1.3} if i % 2 else {}
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


def sweep_loop_cases(budget: object = "standard") -> list[LoopCase]:
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
    "MAX_LAG",
    "NO_SWEEPS",
    "SWEEP_DIMENSIONS",
    "boundary_values",
    "context_free_pair",
    "context_sweep",
    "greedy_max_tokens_case",
    "sampled_sweeps",
    "sweep_loop_cases",
]
