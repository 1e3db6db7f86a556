"""The loop battery: a generation loop (``specverify.loop``'s interface) judged on whole requests.

``run_loop_battery(subject, budget, seed)`` returns the one ``battery.BatteryResult`` (same
findings, verdicts and JSON as the round battery). The subject runs only in its own process
(``runner.Runner``), through the tasks below; every reference is computed in the parent from its
own tables (``loop.sequence_law``, the DP over the processed target).

Cases, in this order (every one judged by ``LoopBattery.law_case``):

- the core (``loop_cases``, kind "fixed"): logit tables on a vocabulary of 3 with drafts of the
  same width, wider (padding rows with finite logits, as real pairs have) and narrower; single
  requests and a ragged batch with different params and lengths; k 1 or 2; max_tokens 1 to 3;
- the edges (``edge_cases``, kind "edge", in every budget): max_tokens 0 and 1, a prompt ending
  with its stop id, a stop id as a likely first token, a grammar allowing one token, top-k 1, top-p
  0.05, min-p 0.95, temperature with logit bias, min-p, top-k and top-p together, penalties over
  repeated prompt tokens, an empty batch, a ragged batch of 8, and k = 3 on a vocabulary of 4 with
  a 3-token prompt and max_tokens 4;
- ``budget.generated`` cases drawn from the check's seed (``generated_loop_cases``, kind
  "generated"): vocabularies 2 to 5, k 1 to 4, prompts of 1 to 4 tokens, max_tokens 0 to 5, every
  sampling parameter drawn (``drawn_params``, the value sets of ``strategies.sampling_params``);
- last, the seeded case (request 0 seeded beside an unseeded one): seeds by replay and by law.

Enumerating every path of the loop's random decisions (``specverify.exact``, the subject drawing
from an ``EnumeratingRng``) takes well under a second per case; an edge or generated case is
enumerated up to ``extra_max_paths`` paths, then judged by ``extra_samples`` runs (its power in
``result.power``, never a shortfall). The check's seed fixes everything (``SEED_STREAMS``: one
child of ``numpy.random.SeedSequence(seed)`` per purpose). Checks, each a ``Finding.check``:

- ``sequence-law`` (distribution): each request's exact output law against the DP, TV > 1e-9;
  ``loop-chi-square`` when the subject cannot be enumerated (pooled chi-square over sequences);
- ``batch-isolation`` (distribution): a request whose law is exact alone but not in its batch;
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
  (chi-square at the battery's split false-fail rate, its power in ``result.power``);
- ``tokens-per-pass`` (efficiency): exact mean tokens per target pass, E[tokens] / E[tokens -
  accepted], against the reference loop's on the same case; only a shortfall is a finding;
- ``contract``: raised, exited, returned junk (read in the subject's process: whatever its objects
  raise while read is this finding, never a crash); ``rng``: the same rng state replayed
  differently (NaN logprobs replay as NaN: ``same_outcomes``).

Seeded requests draw from ``np.random.default_rng(seed)`` (not from the enumerating rng), so the
law cases use unseeded requests and seeding is checked with real generators: by replay, and by
the law of the outputs over many seeds (a loop that re-seeds every round replays perfectly).

The false-fail rate ``budget.false_fail_rate`` (1e-6) is split (Bonferroni) over every request of
every law case and every seed-law check; exact enumeration has no sampling noise.

With a finding, ``find_loop_counterexample`` gives the smallest request and model that show it
(``small_loop_cases``, smallest first; each candidate judged by ``LoopBattery.law_case``, the
battery's own enumeration or chi-square), in the shape of ``detectors.describe`` plus the requests.

Why this module is over 500 lines: it is the whole loop battery (budgets, fixed / edge / drawn /
engine-scale cases, the subject-side readers, the parent's checks and the counterexample search),
the part of issue 21 not yet moved into ``interfaces/loop.py``; what every battery shares is
``specverify.battery``.
"""

from __future__ import annotations

import copy
import math
import numbers
import time
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from . import exact, stats
from .battery import (CAMPAIGN_SECONDS, DEFAULT_FALSE_FAIL_RATE, EXACT_TV_TOL, PASSED_THROUGH, POWER_FALSE_PASS_RATE,
                      Battery, BatteryResult, ContractBreach, Finding, as_sequence, call_subject, items_of, message_of,
                      plain_tokens, reading, run_in_subject, show, time_limit, token_id, type_name)
from .loop import (ContextFreeLogits, LastTokenGrammar, LogitTable, Output, Request, SamplingParams, as_output,
                   sequence_law)
from .loop import step_distribution

LOGPROB_TOL = 1e-9


@dataclass(frozen=True)
class LoopBudget:
    """What one loop battery runs: the fixed cases (``loop_cases``, every budget), ``generated``
    cases drawn from the check's seed (``generated_loop_cases``, each at most ``generated_paths``
    paths of the reference loop), ``seeds`` seeds replayed alone / batched / beside a same-seed
    request and ``seed_law_runs`` seeds 0..n-1 judged by their law (``seed-law``).

    Measured: the reference loop, 2 shared cores, seeds 0-4, one battery per fresh process (the
    generated cases drawn and their reference law enumerated included), median wall time; before
    issue 22 (the 6 core cases only) 0.18 s for quick and standard, 0.20 s for thorough:

    ==========  =========  ==============  =============  ===============================
    budget      generated  paths per case  seed-law runs  wall time (before -> after)
    ==========  =========  ==============  =============  ===============================
    quick       2          <= 40           200            0.18 -> 0.32 s
    standard    4          <= 40           400            0.18 -> 0.39 s
    thorough    16         <= 400          2000           0.20 -> 0.9-1.8 s
    ==========  =========  ==============  =============  ===============================

    Of the standard budget's 0.21 s more: the 8 edge cases and same-seed pairs 0.09 s, the seed
    law 0.10 s, the 4 generated cases 0.02-0.04 s (+10-20 % of the time before). A loop the
    enumerator cannot follow (every case by statistics: ``extra_samples`` runs per edge or
    generated case) took 7.2 s at standard before and 11.8 s after.
    """

    name: str
    max_paths: int = 60_000
    case_enumeration_s: float = 20.0
    samples: int = 4000  # runs per case the enumerator cannot follow
    extra_samples: int = 500  # ... per edge or generated case (its power stated, not required)
    extra_max_paths: int = 2000  # the most paths enumerated on an edge or generated case
    statistics_s: float = 30.0
    detect_tv: float = 0.1  # a request judged by statistics alone must see this TV (w.p. 0.95)
    seeds: int = 12  # seeds of the reproducibility checks (alone vs batched, same-seed pairs)
    call_limit_s: float = 2.0
    false_fail_rate: float = DEFAULT_FALSE_FAIL_RATE
    counterexample_s: float = 20.0  # the whole counterexample search
    counterexample_samples: int = 1000  # runs per candidate the enumerator cannot follow
    generated: int = 4  # cases drawn from the seed besides the fixed ones (generated_loop_cases)
    generated_paths: int = 40  # the most paths of the reference loop a generated case may need
    seed_law_runs: int = 400  # seeds 0..n-1 of a seeded request, chi-square against its law
    # engine scale (scale_loop_cases): a context-free pair over scale_vocab ids (0: none), k =
    # scale_k, max_tokens scale_tokens, scale_runs runs within scale_s; aimed cases share aim_s
    scale_vocab: int = 4096
    scale_k: int = 8
    scale_tokens: int = 8
    scale_runs: int = 300
    scale_s: float = 10.0
    aim_s: float = 30.0

    def coverage(self) -> str:
        fixed = loop_cases()
        return (f"loop battery: {len(fixed)} fixed request batches + {self.generated} drawn from the seed "
                f"(vocabulary 2-5, k 1-4, prompts 1-4 tokens, max_tokens 0-5, at most "
                f"{self.generated_paths} reference paths each); seeds replayed ({self.seeds}) and judged "
                f"by their law ({self.seed_law_runs} seeds); "
                + (f"one engine-scale batch (V {self.scale_vocab}, k {self.scale_k}, max_tokens "
                   f"{self.scale_tokens}, binned chi-square per position over {self.scale_runs} runs); "
                   if self.scale_vocab else "")
                + f"a request the enumerator cannot follow must see TV {self.detect_tv:g}")


LOOP_BUDGETS = {
    "quick": LoopBudget("quick", samples=2000, extra_samples=250, statistics_s=15.0, seeds=6, detect_tv=0.15,
                        generated=2, seed_law_runs=200, scale_vocab=1100, scale_k=4, scale_tokens=5,
                        scale_runs=300, scale_s=5.0, aim_s=20.0),
    "standard": LoopBudget("standard"),
    "thorough": LoopBudget("thorough", max_paths=400_000, samples=16_000, extra_samples=4000,
                           extra_max_paths=20_000, statistics_s=120.0, seeds=40,
                           detect_tv=0.05, generated=16, generated_paths=400, seed_law_runs=2000,
                           scale_vocab=33_024, scale_runs=2000, scale_s=60.0, aim_s=180.0),
}


def campaign_loop_budget(name: str) -> LoopBudget:
    """``tv=X``: the thorough loop budget with every request the enumerator cannot follow (fixed,
    edge or generated case) sampled until its chi-square sees TV X (``samples`` and
    ``extra_samples`` 0: sized per request from its law, ``stats.min_num_samples_chi_square``),
    and time limits that do not cut it short. The seed law and the engine-scale batch keep the
    thorough counts, run to the end (their power is stated in the result)."""
    from .validation import check_tv_budget

    tv = check_tv_budget(name)
    return replace(LOOP_BUDGETS["thorough"], name=f"tv={tv:g}", detect_tv=tv, samples=0, extra_samples=0,
                   statistics_s=CAMPAIGN_SECONDS, case_enumeration_s=CAMPAIGN_SECONDS,
                   scale_s=CAMPAIGN_SECONDS, aim_s=CAMPAIGN_SECONDS)


def get_loop_budget(budget) -> LoopBudget:
    """A ``LoopBudget`` as it is, a name of ``LOOP_BUDGETS`` or ``tv=X`` (``campaign_loop_budget``);
    a round ``detectors.Budget`` by its name."""
    if isinstance(budget, LoopBudget):
        return budget
    name = getattr(budget, "name", budget)
    if isinstance(name, str) and name.startswith("tv="):
        return campaign_loop_budget(name)
    if name not in LOOP_BUDGETS:
        raise ValueError(f"budget: must be one of {', '.join(LOOP_BUDGETS)}, got {budget!r}")
    return LOOP_BUDGETS[name]


@dataclass(frozen=True)
class LoopCase:
    """A target and a draft (logit tables), a batch of requests and k."""

    name: str
    target: LogitTable
    draft: LogitTable
    requests: tuple
    k: int
    seeded: bool = False  # a reproducibility case: request 0 is seeded per run
    kind: str = "fixed"  # "fixed" (the core), "edge" (edge_cases) or "generated" (generated_loop_cases)
    side: str | None = None  # an engine-scale batch's ``scale.scale_pair`` side ("residual" / "draft")

    @property
    def vocab_size(self) -> int:
        return self.target.width


def _table(seed: int, period: int, vocab: int, width: int, scale: float = 1.2) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=scale, size=(period, vocab, width)).round(3)


@lru_cache(maxsize=1)
def loop_cases() -> tuple[LoopCase, ...]:
    target = LogitTable(_table(11, 2, 3, 3, 0.8), "target V3 period 2")
    same = LogitTable(_table(12, 1, 3, 3), "draft V3")
    padded = _table(13, 1, 3, 4)
    padded[..., 3] = 0.5  # a padding row with a finite logit, as real pairs have
    wider = LogitTable(padded, "draft V3 + 1 padding row")
    narrower = LogitTable(_table(14, 1, 3, 2), "draft with 2 of the 3 ids")
    tiny_t = _table(15, 1, 3, 3)
    tiny_t[..., 2] = -1e4  # the target never emits token 2 ...
    tiny_d = _table(16, 1, 3, 3)
    tiny_d[..., 2] = np.log(1e-8) + tiny_d[..., :2].max(axis=-1)  # ... the draft rarely drafts it
    grammar = LastTokenGrammar((0, 1), ((1, 2), (0, 2), (0, 1)), ((0, 1), (1, 2), (0, 1, 2)))
    penalties = SamplingParams(temperature=1.0, repetition_penalty=1.4, frequency_penalty=0.5,
                               presence_penalty=0.3, min_p=0.15, logit_bias={0: 0.5},
                               stop_token_ids=(2,), max_tokens=3)
    greedy = SamplingParams(temperature=0, repetition_penalty=2.5, logit_bias={1: 0.3}, max_tokens=2)
    short = SamplingParams(temperature=0.8, top_k=1, max_tokens=1)  # one token, no branching
    return (
        LoopCase("penalties, min-p, logit bias, stop; k=2", target, same,
                 (Request((0,), penalties),), 2),
        LoopCase("grammar, top-k, top-p; narrower draft; k=2", target, narrower,
                 (Request((1,), SamplingParams(temperature=0.9, top_k=2, top_p=0.95, max_tokens=3,
                                               allowed_tokens=grammar)),), 2),
        LoopCase("logit bias, stop; draft with a padding row; k=1", target, wider,
                 (Request((2,), SamplingParams(temperature=1.3, logit_bias={2: -0.7, 1: 0.4},
                                               stop_token_ids=(1,), max_tokens=3)),), 1),
        LoopCase("draft q(2) = 1e-8 where the target has p(2) = 0; k=2", LogitTable(tiny_t, "target p(2) = 0"),
                 LogitTable(tiny_d, "draft q(2) = 1e-8"), (Request((0,), SamplingParams(max_tokens=2)),), 2),
        LoopCase("ragged batch: penalties + stop, greedy, one token; k=2", target, same,
                 (Request((0,), replace(penalties, min_p=0.0, logit_bias={}, stop_token_ids=())), Request((1, 2), greedy),
                  Request((2,), short)), 2),
        LoopCase("seeded request beside an unseeded one; k=1", target, same,
                 (Request((0,), SamplingParams(max_tokens=3, repetition_penalty=1.3)),
                  Request((1,), SamplingParams(max_tokens=3))), 1, seeded=True),
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
    together; penalties over a prompt with repeated tokens; an empty batch; a ragged batch of 8
    (prompts of 1 to 4 tokens, max_tokens 0 to 5, greedy and sampled); and k = 3 drafts on a
    vocabulary of 4 with a 3-token prompt and max_tokens 4 (a period-2 target, so the prompt's
    length matters; a one-hot draft and top-k 2 keep it to 16 paths)."""
    t3 = LogitTable(_table(11, 2, 3, 3, 0.8), "target V3 period 2")
    d3 = LogitTable(_table(12, 1, 3, 3), "draft V3")
    t4 = LogitTable(_table(17, 2, 4, 4, 1.0), "target V4 period 2")
    d4 = LogitTable(_table(19, 1, 4, 4), "draft V4")
    hot4 = LogitTable(_one_hot_rows(_table(18, 1, 4, 4)), "one-hot draft V4")
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
        LoopCase("edge: max_tokens 0 beside max_tokens 1; k=1", t3, d3,
                 (Request((1,), SamplingParams(max_tokens=0)),
                  Request((0,), SamplingParams(temperature=0.7, max_tokens=1))), 1, kind="edge"),
        LoopCase("edge: a prompt ending with its stop id, the stop id a likely first token; k=2", t3, d3,
                 (Request((0, 2), SamplingParams(stop_token_ids=(2,), logit_bias={2: 1.0}, max_tokens=2)),), 2,
                 kind="edge"),
        LoopCase("edge: a grammar allowing one token, top-k 1, top-p 0.05, min-p 0.95; k=2", t4, hot4,
                 (Request((0,), SamplingParams(allowed_tokens=one, max_tokens=3)),
                  Request((1,), SamplingParams(temperature=1.3, top_k=1, max_tokens=3)),
                  Request((2,), SamplingParams(top_p=0.05, max_tokens=3)),
                  Request((3,), SamplingParams(min_p=0.95, max_tokens=3))), 2, kind="edge"),
        LoopCase("edge: temperature, logit bias, min-p, top-k and top-p together; k=2", t4, d4,
                 (Request((1,), SamplingParams(temperature=0.7, logit_bias={0: 0.8, 3: -0.5}, min_p=0.1,
                                               top_k=3, top_p=0.9, max_tokens=3)),), 2, kind="edge"),
        LoopCase("edge: penalties over a prompt with repeated tokens; k=2", t3, d3,
                 (Request((1, 1, 2, 1), SamplingParams(repetition_penalty=1.6, frequency_penalty=0.4,
                                                       presence_penalty=0.3, max_tokens=2)),), 2, kind="edge"),
        LoopCase("edge: an empty batch; k=2", t3, d3, (), 2, kind="edge"),
        LoopCase("edge: a ragged batch of 8 (prompts 1-4 tokens, max_tokens 0-5); k=2", t4, hot4, ragged, 2,
                 kind="edge"),
        LoopCase("edge: k=3 on a vocabulary of 4, a 3-token prompt, max_tokens 4; k=3", t4, hot4,
                 (Request((2, 0, 3), SamplingParams(temperature=0.8, top_k=2, logit_bias={1: 0.7},
                                                    max_tokens=4)),), 3, kind="edge"),
    )


# --------------------------------------------------------------------------- drawn from the seed

SEED_STREAMS = ("generated cases", "seed-law and same-seed runs", "engine-scale cases", "engine-scale runs",
                "shrink cases", "shrink runs")
"""What each child of ``numpy.random.SeedSequence(seed)`` draws, by index: child 0 the generated
cases (one grandchild per case, so that case i is the same whatever the budget's count), child 1
the ``rng`` handed to the loop in the seed-law and same-seed runs (what unseeded batch-mates draw
from), child 2 the engine-scale and aimed cases (``scale_loop_cases``, one grandchild per case),
child 3 the rng of their runs, child 4 the smaller batches a binned finding is shrunk over
(``shrink_binned_loop``, one grandchild per candidate), child 5 the rng of their runs. The checks older than issue 22 keep their own streams, so their verdicts replay: the replay
check draws from ``default_rng(seed)``, the chi-square of a case the enumerator cannot follow from
``default_rng(seed + 7)``, the alone / batched replay from ``default_rng(10_000 + s)`` and
``default_rng(20_000 + s)``."""


def seed_stream(seed: int, purpose: str) -> np.random.SeedSequence:
    """The child of ``SeedSequence(seed)`` for ``purpose`` (a name of ``SEED_STREAMS``)."""
    return np.random.SeedSequence(seed).spawn(len(SEED_STREAMS))[SEED_STREAMS.index(purpose)]


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
        top_p=_pick(rng, _TOP_PS), min_p=_pick(rng, _MIN_PS),
        repetition_penalty=_pick(rng, _REPETITION), frequency_penalty=_pick(rng, _FREQUENCY),
        presence_penalty=_pick(rng, _PRESENCE),
        logit_bias={token(): _pick(rng, _BIASES) for _ in range(int(rng.integers(0, 3)))},
        allowed_tokens=drawn_grammar(rng, vocab) if rng.random() < 1 / 3 else None,
        stop_token_ids=(token(),) if rng.random() < 0.5 else (), max_tokens=max_tokens)


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
    reqs = tuple(Request(tuple(int(x) for x in rng.integers(0, V, int(rng.integers(1, 5)))),
                         drawn_params(rng, V, int(rng.integers(0, m_max + 1)))) for _ in range(n))
    shape = ", ".join(f"prompt {len(r.prompt)} m={r.params.max_tokens}" for r in reqs)
    return LoopCase(f"{name}: V{V} period {period}, draft width {width}, k={k}, {n} request"
                    f"{'s' if n > 1 else ''} ({shape})", target, draft, reqs, k, kind="generated")


def _reference_law(case: LoopCase, max_paths: int) -> dict:
    from .samplers.loop import generate

    return exact.enumerate_distribution(
        lambda rng: _outcome(generate(case.target, case.draft, list(case.requests), case.k, rng),
                             len(case.requests), case.vocab_size), max_paths=max_paths)


@lru_cache(maxsize=8)
def _generated(seed: int, count: int, max_paths: int) -> tuple[LoopCase, ...]:
    out = []
    for i, stream in enumerate(seed_stream(seed, "generated cases").spawn(count)):
        rng = np.random.default_rng(stream)
        for attempt in range(4 * GENERATED_ATTEMPTS):
            case = _drawn_case(rng, f"generated #{i} (seed {seed})", 5 >> (attempt // GENERATED_ATTEMPTS))
            try:
                for r in case.requests:
                    sequence_law(case.target, r)  # a grammar that allows only ids at p = 0: redraw
                law = _reference_law(case, max_paths)
            except (ValueError, exact.NotEnumerable):
                continue
            _REFERENCE_RATES[id(case)] = (case, _rates(law, len(case.requests)))
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


SCALE_KINDS = ("scale", "aimed")
"""LoopCase kinds judged by ``LoopBattery.scale_case`` (a binned chi-square per position)."""


def scale_loop_case(vocab: int, k: int, max_tokens: int, rng, name: str, kind: str,
                    side: str = "residual") -> LoopCase:
    """A batch at engine scale: a context-free target and draft (``loop.ContextFreeLogits``, the
    logs of a ``scale.scale_pair`` of that ``side``: mass on the ids where tiles and id types
    end, drawn from ``rng``) and two requests of ``max_tokens`` each: a 1-token
    prompt at temperature 1, and a 7-token prompt (ids at the edges) with temperature 0.8, top-k
    (half the vocabulary), top-p 0.95, min-p 1e-4, a logit bias on the last id and a stop id at
    V - 2. Context-free processing: every position's law is the processed row."""
    from .scale import scale_pair

    pair = scale_pair(vocab, side, rng)
    p, q = pair.p_table[0], pair.q_table[0]
    target = ContextFreeLogits(np.log(p), f"context-free target V{vocab}")
    draft = ContextFreeLogits(np.log(q), f"context-free draft V{vocab}")
    long_prompt = tuple(int(x) % vocab for x in (0, vocab - 1, 1, vocab - 2, 127, 128, 1023))
    reqs = (Request((int(rng.integers(vocab)),), SamplingParams(max_tokens=max_tokens)),
            Request(long_prompt, SamplingParams(temperature=0.8, top_k=max(1, vocab // 2), top_p=0.95, min_p=1e-4,
                                                logit_bias={vocab - 1: 1.5}, stop_token_ids=(max(vocab - 2, 0),),
                                                max_tokens=max_tokens)))
    return LoopCase(f"{name}: V{vocab}, k={k}, max_tokens {max_tokens}, prompts 1 and 7 tokens, binned",
                    target, draft, reqs, k, kind=kind, side=side)


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
        shapes += [(aim.vocab or 4096, k, m, "aimed", "aimed", ("residual", "draft")[i % 2])
                   for i, k in enumerate(aim.ks or (4,))]
    streams = seed_stream(seed, "engine-scale cases").spawn(len(shapes))
    return [scale_loop_case(v, k, m, np.random.default_rng(st), f"{name} (seed {seed})", kind, side)
            for (v, k, m, name, kind, side), st in zip(shapes, streams)]


# --------------------------------------------------------------------------- the subject's side


READ_LIMIT = 10_000
"""The most tokens (or logprobs) of one request read from a subject's result; more is a breach."""

COUNT_LIMIT = 10**15
"""A drafted or accepted count beyond this (in size) is a breach, not a number to print."""


def _outcome(out, n: int, vocab: int) -> tuple:
    """Per request (tokens, logprobs or None, drafted or None, accepted or None), or ContractBreach.

    Runs in the subject's process: whatever the returned objects raise while they are read (a
    ``__len__``, ``__iter__``, ``tolist``, ``__int__``, ``__float__`` or property) is a
    ContractBreach naming it, and only ints, floats, None and tuples of them go back."""
    with reading(f"returned a {type_name(out)}; reading it"):
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
        if (type(lps) is not tuple and type(lps) is not list) or len(lps) != len(toks):
            return None
        if not all(type(x) is float for x in lps):
            return None
        lps = tuple(lps)
    return tuple(toks), lps, drafted, accepted



def _sequence(seq, what: str, noun: str) -> list:
    """The items of a list, tuple or array (``tolist``) the subject returned, at most READ_LIMIT."""
    seq, is_list = as_sequence(seq, what)
    if not is_list:
        raise ContractBreach(f"{what} a {type_name(seq)} ({show(seq)}), not a list of {noun}")
    count, items = items_of(seq, what, READ_LIMIT)
    if count > READ_LIMIT:
        raise ContractBreach(f"{what} {count} {noun} (more than {READ_LIMIT} read)")
    return items


def _logprob(x, what: str) -> float:
    if isinstance(x, exact.SymbolicUniform):
        float(x)  # a value that depends on a uniform: NotEnumerable (statistics instead)
    with reading(f"{what} a {type_name(x)}; checking its type"):
        is_real = isinstance(x, numbers.Real) and not isinstance(x, bool)
    if not is_real:
        raise ContractBreach(f"{what} a {type_name(x)} ({show(x)}), not a number")
    with reading(f"{what} a {type_name(x)} whose float()"):
        return float(x)


def _count(c, what: str) -> int | None:
    """A drafted / accepted count: None, or a whole number (an int, a NumPy or 0-d tensor scalar,
    a float such as 3.0) of at most COUNT_LIMIT in size."""
    if c is None:
        return None
    if isinstance(c, exact.SymbolicUniform):
        int(c)  # a count that depends on a uniform: NotEnumerable (statistics instead)
    with reading(f"{what} a {type_name(c)}; reading it"):
        if not isinstance(c, numbers.Number) and hasattr(c, "item"):  # a 0-d tensor or array
            with reading(f"{what} a {type_name(c)} whose item()"):
                c = c.item()
        integral = isinstance(c, numbers.Integral) and not isinstance(c, bool)
        real = isinstance(c, numbers.Real) and not isinstance(c, bool)
    if not (integral or real):
        raise ContractBreach(f"{what} a {type_name(c)} ({show(c)}), not a count")
    with reading(f"{what} a {type_name(c)} whose int() or float()"):
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
    with reading(f"{what} returned a {type_name(o)}; reading it"):
        readable = isinstance(o, (Output, list, tuple)) or hasattr(o, "tolist")
    if not readable:
        raise ContractBreach(f"{what} returned a {type_name(o)} ({show(o)}), not an Output or a "
                             f"list of token ids")
    with reading(f"{what} returned a {type_name(o)}; reading it"):
        o = as_output(o)
        tokens, logprobs, drafted, accepted = o.tokens, o.logprobs, o.drafted, o.accepted
    toks = tuple(token_id(t, vocab, f"{what} returned")
                 for t in _sequence(tokens, f"{what} tokens is", "token ids"))
    lps = None
    if logprobs is not None:
        values = _sequence(logprobs, f"{what} logprobs is", "numbers")
        if len(values) != len(toks):
            raise ContractBreach(f"{what} {len(values)} logprobs for {len(toks)} tokens")
        lps = tuple(_logprob(x, f"{what} logprob {j} is") for j, x in enumerate(values))
    return toks, lps, _count(drafted, f"{what} drafted is"), _count(accepted, f"{what} accepted is")


def _run(subject, case: LoopCase, requests, rng, call_limit=None) -> tuple:
    vocab = case.vocab_size  # read before the subject runs (it holds the case's tables)
    out = call_subject(subject, (case.target, case.draft, list(requests), case.k, rng), call_limit)
    return _outcome(out, len(requests), vocab)


def same_outcomes(a, b) -> bool:
    """``a == b`` for outcomes (nested tuples and lists of ints, floats and None), NaN equal to
    NaN: a loop that returns NaN logprobs replays them as NaN, and that is the same outcome."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(same_outcomes(x, y) for x, y in zip(a, b)))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _requests(case: LoopCase, ids) -> list:
    return [case.requests[i] for i in ids]


def loop_enumerate_task(subject, case: LoopCase, ids, max_paths: int, seconds: float):
    """("ok", exact law of the joint outcome) | ("not-enumerable", why) | ("breach", what)."""
    reqs = _requests(case, ids)
    try:
        with time_limit(seconds, "exact enumeration", exact.NotEnumerable):
            return "ok", exact.enumerate_distribution(lambda rng: _run(subject, case, reqs, rng),
                                                      max_paths=max_paths)
    except exact.NotEnumerable as exc:
        return "not-enumerable", message_of(exc)
    except ContractBreach as exc:
        return "breach", message_of(exc)


def loop_sample_task(subject, case: LoopCase, ids, n: int, rng, seconds: float, call_limit: float):
    """Up to n runs (fewer when ``seconds`` ran out); (outcomes, breach or None, replayed, rng)."""
    reqs = _requests(case, ids)
    out: list = []
    stop = time.monotonic() + seconds
    start = copy.deepcopy(rng)
    try:
        while len(out) < n and (not out or time.monotonic() < stop):
            out.append(_run(subject, case, reqs, rng, call_limit))
        replay = [_run(subject, case, reqs, start, call_limit) for _ in range(min(3, len(out)))]
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return out, message_of(exc), True, rng
    return out, None, same_outcomes(replay, out[: len(replay)]), rng


def _seeded(request: Request, seed: int) -> Request:
    return replace(request, params=replace(request.params, seed=int(seed)))


def loop_seed_task(subject, case: LoopCase, seeds, call_limit: float, same_seed: bool = False):
    """For each seed s: request 0 seeded with s, run alone and in the batch (the others unseeded,
    another rng); with ``same_seed`` and a second request, also requests 0 and 1 both seeded with s
    in one batch, each against itself alone. (mismatches, breach or None); a mismatch names its
    ``kind`` ("batched" or "same seed"), the seed, the request and both outputs."""
    mismatches = []
    try:
        for s in seeds:
            seeded = _seeded(case.requests[0], s)
            alone = _run(subject, case, [seeded], np.random.default_rng(10_000 + s), call_limit)
            batch = _run(subject, case, [seeded, *case.requests[1:]], np.random.default_rng(20_000 + s),
                         call_limit)
            if alone[0][0] != batch[0][0]:
                mismatches.append({"kind": "batched", "seed": int(s), "request": 0,
                                   "alone": list(alone[0][0]), "batched": list(batch[0][0])})
            if same_seed and len(case.requests) > 1:
                other = _seeded(case.requests[1], s)
                alone1 = _run(subject, case, [other], np.random.default_rng(30_000 + s), call_limit)
                pair = _run(subject, case, [seeded, other], np.random.default_rng(40_000 + s), call_limit)
                for i, solo in ((0, alone), (1, alone1)):
                    if pair[i][0] != solo[0][0]:
                        mismatches.append({"kind": "same seed", "seed": int(s), "request": i,
                                           "alone": list(solo[0][0]), "batched": list(pair[i][0])})
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return mismatches, message_of(exc)
    return mismatches, None


def loop_seed_law_task(subject, case: LoopCase, n: int, rng, call_limit: float, seconds: float):
    """Request 0 alone, seeded with 0, 1, ..., n - 1 (fewer when ``seconds`` ran out), the loop's
    rng ``rng`` (unused by an exact loop: the request is seeded); (its tokens per seed, breach)."""
    out: list = []
    stop = time.monotonic() + seconds
    try:
        for s in range(n):
            if out and time.monotonic() >= stop:
                break
            out.append(_run(subject, case, [_seeded(case.requests[0], s)], rng, call_limit)[0][0])
    except (ContractBreach, exact.NotEnumerable) as exc:  # NotEnumerable: raised by the subject
        return out, message_of(exc)
    return out, None


# --------------------------------------------------------------------------- the parent's side


def _law(case: LoopCase, i: int) -> dict:
    return sequence_law(case.target, case.requests[i])


def contract_problem(case: LoopCase, i: int, row: tuple) -> tuple[str, str] | None:
    """(check, message) for the first contract breach in one request's outcome, or None."""
    req = case.requests[i]
    params, prompt = req.params, req.prompt
    tokens, lps, drafted, accepted = row
    stops = params.stop_token_ids
    cut = next((j for j, t in enumerate(tokens) if t in stops), None)
    if cut is not None and cut < len(tokens) - 1:
        return "stop-max-tokens", f"request {i}: tokens {list(tokens)} continue after stop token {tokens[cut]}"
    if len(tokens) > params.max_tokens:
        return "stop-max-tokens", f"request {i}: {len(tokens)} tokens with max_tokens={params.max_tokens}"
    if len(tokens) < params.max_tokens and cut is None:
        return "stop-max-tokens", (f"request {i}: ended after {len(tokens)} < max_tokens={params.max_tokens} "
                                   f"tokens without a stop token")
    for name, count in (("drafted", drafted), ("accepted", accepted)):
        if count is not None and count < 0:
            return "counts", f"request {i}: {name} {count} (a count cannot be negative)"
    if drafted is not None and accepted is not None and accepted > drafted:
        return "counts", f"request {i}: accepted {accepted} of {drafted} drafted (acceptance above 1)"
    if accepted is not None and accepted > len(tokens):  # checked with or without drafted
        return "counts", (f"request {i}: accepted {accepted} drafts but emitted only {len(tokens)} tokens "
                          f"{list(tokens)}")
    if lps is not None:
        for j, (t, lp) in enumerate(zip(tokens, lps)):
            p = step_distribution(case.target(prompt + tokens[:j]), params, prompt, tokens[:j])[t]
            want = math.log(p) if p > 0 else -math.inf
            if not (lp == want or abs(lp - want) <= LOGPROB_TOL):
                return "logprobs", (f"request {i}: logprob of token {t} at position {j} of {list(tokens)} is "
                                    f"{lp:.6g}, the processed target gives {want:.6g}")
    return None


class LoopBattery(Battery):
    """One run of every loop check on one subject (the parent's side); ``battery.Battery``'s
    ``call``: killed past its limit, a death a ContractBreach, the deadline OutOfTime.
    ``laws``: each request's (method, law got, law wanted, runs) of the case judged last."""

    def __init__(self, subject, budget: LoopBudget, seed: int, deadline: float | None):
        super().__init__(subject, budget, seed, deadline)
        self.laws: dict = {}

    def restart(self) -> None:
        """A fresh result and laws: the counterexample search judges each candidate alone."""
        self.result, self.laws = BatteryResult(budget=self.budget.name), {}

    def find(self, check, kind, message, case, evidence=None):
        self.result.findings.append(Finding(check, kind, message, case.name, evidence or {}))

    def contracts(self, case: LoopCase, outcomes) -> None:
        seen = set()
        for outcome in outcomes:
            for i, row in enumerate(outcome):
                problem = contract_problem(case, i, row)
                if problem and problem[0] not in seen:
                    seen.add(problem[0])
                    self.find(problem[0], "contract", problem[1], case, {"request": i})

    def enumerate(self, case: LoopCase, ids):
        """The task ``loop_enumerate_task``: at most ``budget.max_paths`` paths, or
        ``budget.extra_max_paths`` for an edge or generated case (past it: statistics)."""
        b = self.budget
        paths = b.max_paths if case.kind == "fixed" else min(b.max_paths, b.extra_max_paths)
        return self.call(loop_enumerate_task, case, tuple(ids), paths, b.case_enumeration_s,
                         seconds=b.case_enumeration_s + b.call_limit_s)

    def law_case(self, case: LoopCase, per_check: float, exact_ok: bool, efficiency: bool = True) -> None:
        """Judge every request of the case: exact law by enumeration (``exact_ok``), else the
        chi-square over whole outputs; contracts on every outcome; tokens per pass when
        ``efficiency``. Each request's (method, law got, law wanted, runs) goes to ``self.laws``."""
        b, r = self.budget, self.result
        self.laws: dict = {}
        ids = tuple(range(len(case.requests)))
        status, value = self.enumerate(case, ids) if exact_ok else ("not-enumerable", "rng replay differed")
        if status == "breach":
            self.find("contract", "contract", value, case)
            return
        if status == "ok":
            self.cover(case, "enumeration", None, None)
            self.contracts(case, value)
            if efficiency:
                self.tokens_per_pass(case, value)
            for i in ids:
                got: dict = {}
                for outcome, w in value.items():
                    got[outcome[i][0]] = got.get(outcome[i][0], 0.0) + w
                want = _law(case, i)
                tv = exact.total_variation(got, want)
                self.laws[i] = ("exact", got, want, None)
                r.exact_tv_max = tv if r.exact_tv_max is None else max(r.exact_tv_max, tv)
                r.ran.append(f"sequence-law: {case.name}: request {i}: exact TV {tv:.3g}")
                if tv <= EXACT_TV_TOL:
                    continue
                check = "sequence-law"
                if len(ids) > 1:
                    s2, alone = self.enumerate(case, (i,))
                    if s2 == "ok":
                        g2: dict = {}
                        for outcome, w in alone.items():
                            g2[outcome[0][0]] = g2.get(outcome[0][0], 0.0) + w
                        if exact.total_variation(g2, want) <= EXACT_TV_TOL:
                            check = "batch-isolation"
                self.find(check, "distribution",
                          f"request {i}: exact law of the output differs from target-only sampling's: TV {tv:.4g}"
                          + (" (exact alone, biased in its batch)" if check == "batch-isolation" else ""),
                          case, {"request": i, "exact_tv": tv, "got": _top(got), "expected": _top(want)})
            return
        r.ran.append(f"sequence-law: {case.name}: not enumerable ({value}); statistics instead")
        rng = np.random.default_rng(self.seed + 7)
        core = case.kind == "fixed"
        runs = b.samples if core else b.extra_samples
        if not runs:  # a campaign (tv=X): enough runs for every request's chi-square to see it
            runs = max(stats.min_num_samples_chi_square(b.detect_tv, _law(case, i), per_check, POWER_FALSE_PASS_RATE)
                       for i in ids)
        got, breach, _, _ = self.call(loop_sample_task, case, ids, runs, rng,
                                      b.statistics_s, b.call_limit_s, seconds=b.statistics_s + 2 * b.call_limit_s)
        if breach:
            self.find("contract", "contract", breach, case)
        self.contracts(case, got)
        for i in ids:
            samples = [o[i][0] for o in got]
            if not samples:
                continue
            want = _law(case, i)
            self.laws[i] = ("statistical", stats.empirical_distribution(samples), want, len(samples))
            test = stats.chi_square_test(samples, want, false_fail_rate=per_check)
            p = test.p_value if test.p_value is not None else 0.0
            r.chi2_p_value_min = p if r.chi2_p_value_min is None else min(r.chi2_p_value_min, p)
            tv = min(stats.min_discrepancy_chi_square(len(samples), want, per_check, POWER_FALSE_PASS_RATE), 1.0)
            r.power.append({"case": case.name, "request": i, "runs": len(samples), "min_detectable_tv": tv,
                            "false_fail_rate": per_check, "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                            **({} if core else {"kind": case.kind})})
            line = (f"loop-chi-square: {case.name}: request {i}: p-value {p:.3g} after {len(samples)} runs; "
                    f"detects TV >= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}")
            r.ran.append(line)
            if test.passed and tv > b.detect_tv and core:  # an edge or generated case: power stated
                r.shortfalls.append(f"{line}, not the budget's {b.detect_tv:g}")
            if not test.passed:
                r.samples_to_detect = len(samples)
                self.find("loop-chi-square", "distribution",
                          f"request {i}: sampled outputs differ from target-only sampling's: p-value {p:.3g} "
                          f"< {per_check:.3g} after {len(samples)} runs", case, {"request": i, "p_value": p})
        seen = [row["min_detectable_tv"] for row in r.power if row["case"] == case.name]
        self.cover(case, "chi-square", len(got), max(seen) if seen else None)

    def tokens_per_pass(self, case: LoopCase, law: dict) -> None:
        """Per request, exact mean tokens per target pass (tokens / (tokens - accepted): every round
        but one cut by a stop inside its accepted block ends with one token not drafted) against the
        reference loop's; only a shortfall is a finding (efficiency). Skipped without counts."""
        if any(row[3] is None for outcome in law for row in outcome):
            self.result.ran.append(f"tokens-per-pass: {case.name}: no counts returned; skipped")
            return
        want = _reference_rates(case)
        for i, (got, ref) in enumerate(zip(_rates(law, len(case.requests)), want)):
            self.result.ran.append(f"tokens-per-pass: {case.name}: request {i}: {got:.4f} vs {ref:.4f}")
            if got < ref - 1e-9:
                self.find("tokens-per-pass", "efficiency",
                          f"request {i}: {got:.4f} tokens per target pass, the reference loop gives {ref:.4f}",
                          case, {"request": i, "measured": got, "expected": ref})

    def seeded_case(self, case: LoopCase, per_check: float | None = None) -> None:
        """Seeds, by replay and by law. ``seeded-reproducibility`` (contract): request 0 seeded with
        s gives the same tokens alone and beside unseeded requests, and requests 0 and 1 both
        seeded with s in one batch each give what they give alone (``budget.seeds`` seeds).
        ``seed-law`` (distribution): request 0 alone, seeded with 0..n-1 (n =
        ``budget.seed_law_runs``), must follow its exact law (``loop.sequence_law``): the
        battery's chi-square at ``per_check`` (default: the budget's whole false-fail rate), its
        power (the TV it detects with probability 0.95) in ``result.power`` with ``"check":
        "seed-law"``; a loop that re-seeds every round, or ignores the target when seeded, replays
        perfectly and fails here. Its power is stated, never a shortfall: the request's law is
        also judged, unseeded, by enumeration."""
        b, r = self.budget, self.result
        self.laws = {}
        seeds = list(range(b.seeds))
        mismatches, breach = self.call(loop_seed_task, case, seeds, b.call_limit_s, True,
                                       seconds=4 * len(seeds) * b.call_limit_s + b.call_limit_s)
        if breach:
            self.find("contract", "contract", breach, case)
        r.ran.append(f"seeded-reproducibility: {case.name}: {len(mismatches)} mismatches over {len(seeds)} seeds "
                     f"(alone vs batched, same-seed pairs)")
        for kind in ("batched", "same seed"):
            first = next((m for m in mismatches if m["kind"] == kind), None)
            if first is None:
                continue
            what = ("a seeded request's tokens differ alone and in a batch" if kind == "batched" else
                    "two requests with the same seed in one batch do not each give what they give alone")
            self.find("seeded-reproducibility", "contract",
                      f"{what} (seed {first['seed']}, request {first['request']}: {first['alone']} alone, "
                      f"{first['batched']} batched)", case,
                      {"request": first["request"], "mismatches": [m for m in mismatches if m["kind"] == kind][:5]})
        if breach or b.seed_law_runs <= 0:
            return
        rate = b.false_fail_rate if per_check is None else per_check
        rng = np.random.default_rng(seed_stream(self.seed, "seed-law and same-seed runs"))
        seconds = b.statistics_s
        samples, breach = self.call(loop_seed_law_task, case, b.seed_law_runs, rng, b.call_limit_s, seconds,
                                    seconds=seconds + 2 * b.call_limit_s)
        if breach:
            self.find("contract", "contract", breach, case)
        if not samples:
            return
        want = _law(case, 0)
        self.laws[0] = ("statistical", stats.empirical_distribution(samples), want, len(samples))
        test = stats.chi_square_test(samples, want, false_fail_rate=rate)
        p = test.p_value if test.p_value is not None else 0.0
        r.chi2_p_value_min = p if r.chi2_p_value_min is None else min(r.chi2_p_value_min, p)
        tv = min(stats.min_discrepancy_chi_square(len(samples), want, rate, POWER_FALSE_PASS_RATE), 1.0)
        r.power.append({"case": case.name, "request": 0, "check": "seed-law", "runs": len(samples),
                        "seeds": f"0..{len(samples) - 1}", "min_detectable_tv": tv, "false_fail_rate": rate,
                        "detection_probability": 1 - POWER_FALSE_PASS_RATE})
        self.cover(case, "chi-square", len(samples), tv)
        r.ran.append(f"seed-law: {case.name}: request 0 over seeds 0..{len(samples) - 1}: p-value {p:.3g}; "
                     f"detects TV >= {tv:.3g} with probability {1 - POWER_FALSE_PASS_RATE:g}")
        if not test.passed:
            self.find("seed-law", "distribution",
                      f"request 0: its outputs over seeds 0..{len(samples) - 1} do not follow target-only "
                      f"sampling's law: p-value {p:.3g} < {rate:.3g}", case,
                      {"request": 0, "p_value": p, "seeds": len(samples),
                       "empirical_tv": stats.tv_distance(self.laws[0][1], want)})

    def scale_case(self, case: LoopCase, per_check: float, seconds: float, rng):
        """An engine-scale or aimed batch (``scale_loop_cases``): ``scale_runs`` runs (within
        ``scale_s``, an aimed batch ``aim_s`` over the aimed ones), contracts on every outcome,
        then each request's tokens at each position (the runs that reached it) against its
        processed row by a binned chi-square (``scale.judge_columns``, at least 20 tokens per
        position) at ``per_check``, within ``seconds``, drawing from ``rng``; returns the rng after.
        Context-free processing: a position's law is the row."""
        from .scale import binning_words, judge_columns, min_detectable_tv

        b, r = self.budget, self.result
        ids = tuple(range(len(case.requests)))
        got, breach, _, rng = self.call(loop_sample_task, case, ids, b.scale_runs, rng, seconds,
                                        b.call_limit_s, seconds=seconds + 4 * b.call_limit_s)
        if breach:
            self.find("contract", "contract", breach, case)
        before = len(r.findings)
        self.contracts(case, got)
        runs, detect = len(got), []
        for i, req in enumerate(case.requests):
            if len(r.findings) > before or not got:  # ids out of range or past max_tokens: nothing to bin
                break
            row = step_distribution(case.target(req.prompt), req.params, req.prompt, ())
            columns = [[o[i][0][j] for o in got if len(o[i][0]) > j] for j in range(req.params.max_tokens)]
            verdict = judge_columns(columns, row, per_check, min_samples=20)
            if verdict is None:
                continue
            words = binning_words(len(verdict.want), case.vocab_size, verdict.n)
            tv = min_detectable_tv(row, len(columns[0]) if columns else 0, per_check, POWER_FALSE_PASS_RATE)
            detect.append(tv)
            r.power.append({"case": case.name, "request": i, "runs": runs, "min_detectable_tv": tv,
                            "false_fail_rate": per_check, "detection_probability": 1 - POWER_FALSE_PASS_RATE,
                            "kind": case.kind, "binned": len(verdict.want)})
            r.ran.append(f"loop binned chi-square: {case.name}: request {i}: {runs} runs, "
                         f"{req.params.max_tokens} position(s); detects a binned TV >= {tv:.3g} at the first "
                         f"position with probability {1 - POWER_FALSE_PASS_RATE:g} ({words})")
            if not verdict.passed:
                self.find("loop-binned-chi-square", "distribution",
                          f"request {i}: token {verdict.position + 1} differs from target-only sampling's law: "
                          f"p-value {verdict.p_value:.3g} < {per_check:.3g}, binned TV {verdict.binned_tv:.3g} "
                          f"({words})", case,
                          {"request": i, "position": verdict.position, "p_value": verdict.p_value,
                           "binned_tv": verdict.binned_tv, "samples": verdict.n})
                break
        self.cover(case, "binned chi-square", runs, max(detect) if detect else None)
        return rng

    def cover(self, case: LoopCase, judged: str, runs: int | None, detect_tv: float | None) -> None:
        """The case's ``coverage_entry`` (origin: its kind; an engine-scale batch is generated)."""
        origin = {"scale": "generated"}.get(case.kind, case.kind)
        self.result.cover(name=case.name, origin=origin, vocab=case.vocab_size, k=case.k,
                          tokens=max((q.params.max_tokens for q in case.requests), default=0), judged=judged,
                          runs=runs, detect_tv=detect_tv, requests=len(case.requests),
                          prompts=[len(q.prompt) for q in case.requests], seeded=case.seeded)

    def run(self, cases, stop_on_first: bool) -> BatteryResult:
        r = self.result
        law = [c for c in cases if not c.seeded and c.kind not in SCALE_KINDS]
        big = [c for c in cases if c.kind in SCALE_KINDS]
        aimed = sum(c.kind == "aimed" for c in big)
        scale_rng = np.random.default_rng(seed_stream(self.seed, "engine-scale runs"))
        seed_laws = sum(1 for c in cases if c.seeded) if self.budget.seed_law_runs > 0 else 0
        positions = sum(q.params.max_tokens for c in big for q in c.requests)
        per_check = stats.split_budget(self.budget.false_fail_rate,
                                       max(1, sum(len(c.requests) for c in law) + seed_laws + positions))
        # replay: the same rng state must give the same outputs, else enumeration would mislead
        exact_ok = True
        first = (law or big)[0]
        got, breach, replayed, _ = self.call(loop_sample_task, first, tuple(range(len(first.requests))), 3,
                                             np.random.default_rng(self.seed), 5.0, self.budget.call_limit_s,
                                             seconds=5.0 + 4 * self.budget.call_limit_s)
        if breach:
            self.find("contract", "contract", breach, first)
            return r
        if not replayed:
            exact_ok = False
            self.find("rng", "contract", "does not draw from rng: the same rng state replayed different "
                      "outputs; enumeration skipped, laws judged by statistics", first)
        for case in cases:
            if stop_on_first and r.flagged():
                r.ran.append("stopped after the first finding")
                break
            if case.seeded:
                self.seeded_case(case, per_check)
            elif case.kind in SCALE_KINDS:
                seconds = self.budget.aim_s / aimed if case.kind == "aimed" else self.budget.scale_s
                scale_rng = self.scale_case(case, per_check, seconds, scale_rng)
            else:
                self.law_case(case, per_check, exact_ok)
        return r


def _rates(law: dict, n: int) -> list[float]:
    """Exact E[tokens] / E[tokens - accepted] per request (inf when every token was a draft)."""
    out = []
    for i in range(n):
        tokens = sum(w * len(o[i][0]) for o, w in law.items())
        passes = sum(w * (len(o[i][0]) - min(o[i][3], len(o[i][0]))) for o, w in law.items())
        out.append(tokens / passes if passes > 0 else (math.inf if tokens > 0 else 1.0))
    return out


_REFERENCE_RATES: dict = {}


def _reference_rates(case: LoopCase) -> list[float]:
    """The reference loop's tokens per target pass on the case, enumerated in the parent."""
    from .samplers.loop import generate

    key = id(case)
    if key not in _REFERENCE_RATES:
        law = exact.enumerate_distribution(
            lambda rng: _outcome(generate(case.target, case.draft, list(case.requests), case.k, rng),
                                 len(case.requests), case.vocab_size), max_paths=1_000_000)
        _REFERENCE_RATES[key] = (case, _rates(law, len(case.requests)))
    return _REFERENCE_RATES[key][1]


def _top(dist: dict, limit: int = 12) -> dict:
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:limit]
    return {" ".join(map(str, key)) or "(empty)": round(float(v), 12) for key, v in top}


def run_loop_battery(subject, budget="standard", seed: int = 0, *, stop_on_first: bool = False,
                     deadline: float | None = None, cases=None, aim=None, **overrides) -> BatteryResult:
    """Every loop check on every loop case; never raises for a broken subject.

    ``subject``: ``generate(target, draft, requests, k, rng)`` (a callable, handed to its process by
    fork) or a started ``runner.Runner``; ``budget``: a name of ``LOOP_BUDGETS`` (or a round
    ``detectors.Budget``, by its name) or a ``LoopBudget``; ``overrides`` replace its fields
    (``validation.with_overrides``: an unknown field or a bad value is an error).
    ``aim``: an ``interfaces.Aim`` adds aimed engine-scale batches (``scale_loop_cases``)."""
    from .validation import check_seed, with_overrides

    seed = check_seed(seed)
    b = get_loop_budget(budget)
    b = with_overrides("loop", b, overrides)
    if cases is None:
        fixed = list(loop_cases())  # drawn cases before the seeded case, engine scale last
        cases = ([c for c in fixed if not c.seeded] + generated_loop_cases(b, seed) + [c for c in fixed if c.seeded]
                 + scale_loop_cases(b, seed, aim))  # the costly engine-scale batches last
    return run_in_subject(subject, lambda handle: LoopBattery(handle, b, seed, deadline),
                          lambda run: run.run(list(cases), stop_on_first))


# --------------------------------------------------------------------------- counterexamples

LAW_CHECKS = ("sequence-law", "loop-chi-square", "batch-isolation")
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
    target = LogitTable(_table(300 + vocab, 1, vocab, vocab, 1.0), f"target V{vocab}")
    draft = LogitTable(_table(310 + vocab, 1, vocab, vocab, 1.0), f"draft V{vocab}")
    padded = _table(320 + vocab, 1, vocab, vocab + 1, 1.0)
    padded[..., vocab] = 0.5
    zero_t, tiny_d = _table(330 + vocab, 1, vocab, vocab, 1.0), _table(340 + vocab, 1, vocab, vocab, 1.0)
    zero_t[..., vocab - 1] = -1e4
    tiny_d[..., vocab - 1] = np.log(1e-8) + tiny_d[..., :vocab - 1].max(axis=-1)
    return [
        (target, draft),
        (target, LogitTable(padded, f"draft V{vocab} + 1 padding row")),
        (target, LogitTable(_table(350 + vocab, 1, vocab, vocab - 1, 1.0), f"draft with {vocab - 1} of {vocab} ids")),
        (LogitTable(zero_t, f"target V{vocab}, p({vocab - 1}) = 0"),
         LogitTable(tiny_d, f"draft V{vocab}, q({vocab - 1}) = 1e-8")),
        (LogitTable(_table(360 + vocab, 2, vocab, vocab, 1.0), f"target V{vocab} period 2"), draft),
    ]


def _small_params(vocab: int, m: int) -> list[SamplingParams]:
    """One parameter at a time, simplest first, each with max_tokens m."""
    last = vocab - 1
    # even lengths: never the last token again; odd lengths: anything (a state beyond the last token)
    grammar = LastTokenGrammar(tuple(range(vocab)), tuple(tuple(u for u in range(vocab) if u != t)
                                                          for t in range(vocab)),
                               tuple(tuple(range(vocab)) for _ in range(vocab)))
    return [SamplingParams(max_tokens=m), SamplingParams(repetition_penalty=1.5, max_tokens=m),
            SamplingParams(frequency_penalty=0.5, presence_penalty=0.3, max_tokens=m),
            SamplingParams(min_p=0.3, max_tokens=m), SamplingParams(logit_bias={0: 1.0}, max_tokens=m),
            SamplingParams(stop_token_ids=(last,), max_tokens=m), SamplingParams(top_p=0.7, max_tokens=m),
            SamplingParams(temperature=0.7, top_k=vocab - 1, max_tokens=m),
            SamplingParams(allowed_tokens=grammar, max_tokens=m),
            SamplingParams(temperature=0, repetition_penalty=2.0, max_tokens=m)]


@lru_cache(maxsize=1)
def small_loop_cases() -> tuple[LoopCase, ...]:
    """Candidate cases for the counterexample search, smallest first: one request before a batch,
    a vocabulary of 2 before 3, max_tokens 1 to 3, k 1 then 2; within those, one parameter at a
    time on the plain pair (``_small_params``), then the plain request on the other pairs
    (``_small_models``). Batches: two requests with different prompt lengths, params and
    max_tokens on the plain pair; last, seeded-reproducibility cases (request 0 seeded)."""
    single, batch, seeded = [], [], []
    for vocab in (2, 3):
        models = _small_models(vocab)
        for m in (1, 2, 3):
            for k in (1, 2):
                for j, params in enumerate(_small_params(vocab, m)):
                    single.append(LoopCase(f"counterexample V{vocab} m={m} k={k} params {j}", *models[0],
                                           (Request((0,), params),), k))
                for j, (target, draft) in enumerate(models[1:], 1):
                    single.append(LoopCase(f"counterexample V{vocab} m={m} k={k} model {j}", target, draft,
                                           (Request((0,), SamplingParams(max_tokens=m)),), k))
            if m >= 2:
                for k in (1, 2):
                    reqs = (Request((0,), SamplingParams(repetition_penalty=1.5, max_tokens=m)),
                            Request((1, 0), SamplingParams(temperature=0.7, max_tokens=m - 1)))
                    batch.append(LoopCase(f"counterexample V{vocab} m={m} k={k} batch of 2", *models[0], reqs, k))
                seeded.append(LoopCase(f"counterexample V{vocab} m={m} k=1 seeded beside unseeded", *models[0],
                                       (Request((0,), SamplingParams(max_tokens=m)),
                                        Request((1,), SamplingParams(max_tokens=m))), 1, seeded=True))
    return tuple(single + batch + seeded)


def params_text(params: SamplingParams) -> dict:
    """The fields of ``params`` that differ from the defaults (JSON-ready)."""
    default = SamplingParams()
    out = {}
    for name in params.__dataclass_fields__:
        value = getattr(params, name)
        if value != getattr(default, name):
            out[name] = repr(value) if name == "allowed_tokens" else (
                {str(t): b for t, b in value.items()} if isinstance(value, dict) else value)
    return out


def describe_loop(case: LoopCase, finding: Finding, laws: dict) -> dict:
    """The counterexample as ``detectors.describe`` shapes it (vocab_size, k, window = the
    request's max_tokens, prefix = its prompt, p / q = the target's / draft's raw logit tables,
    the sampler's and the target's law side by side), plus the requests and what they show."""
    i = int(finding.evidence.get("request", 0))
    req = case.requests[i]
    method, got, want, runs = laws.get(i, ("exact", {}, sequence_law(case.target, req), None))
    tv = (exact.total_variation(got, want) if method == "exact" else stats.tv_distance(got, want)) if got else 0.0
    return {
        "method": method, "case": case.name, "check": finding.check, "kind": finding.kind,
        "message": finding.message,
        "evidence": {key: v for key, v in finding.evidence.items() if key not in ("got", "expected")},
        "vocab_size": case.vocab_size, "k": case.k, "window": req.params.max_tokens, "prefix": list(req.prompt),
        "request": i, "requests": [{"prompt": list(r.prompt), "params": params_text(r.params)} for r in case.requests],
        "model": f"{case.target.name} / {case.draft.name}", "order": 1, "period": case.target.table.shape[0],
        "p": case.target.table.round(6).tolist(), "q": case.draft.table.round(6).tolist(),
        ("exact_tv" if method == "exact" else "empirical_tv"): float(tv), "samples": runs,
        "distributions": [{"tokens": list(key), "sampler": round(float(got.get(key, 0.0)), 9),
                           "target": round(float(want.get(key, 0.0)), 9)} for key in sorted(set(got) | set(want))],
    }


def describe_binned_loop(case: LoopCase, finding: Finding) -> dict:
    """A binned finding on an engine-scale batch (``LoopBattery.scale_case``) in
    ``describe_loop``'s shape: the batch itself (no smaller model shows a bug that needs its
    vocabulary), p / q the heaviest ids of the processed target row and the draft's softmax, the
    position and binned TV that failed; no per-sequence law (``distributions`` is empty)."""
    from .scale import heaviest

    i = int(finding.evidence.get("request", 0))
    req = case.requests[i]
    p = step_distribution(case.target(req.prompt), req.params, req.prompt, ())
    z = case.draft(req.prompt)
    q = np.exp(z - z.max())
    return {
        "method": "binned", "case": case.name, "check": finding.check, "kind": finding.kind,
        "message": finding.message, "evidence": dict(finding.evidence),
        "vocab_size": case.vocab_size, "k": case.k, "window": req.params.max_tokens, "prefix": list(req.prompt),
        "request": i, "requests": [{"prompt": list(r.prompt), "params": params_text(r.params)} for r in case.requests],
        "model": f"{case.target.name} / {case.draft.name}", "order": 0, "period": 1,
        "p": heaviest(p), "q": heaviest(q / q.sum()), "position": finding.evidence.get("position"),
        "empirical_tv": float(finding.evidence.get("binned_tv", 0.0)), "samples": finding.evidence.get("samples"),
        "distributions": [],
    }


def shrink_binned_loop(subject, budget, seed: int, case: LoopCase, finding: Finding) -> dict | None:
    """The smallest engine-scale batch that still shows a binned finding of ``case``: the shapes
    of ``scale.shrink_shapes`` (V one past each tile / id-type boundary below the case's, k = 1
    before the case's k), each a fresh ``scale_loop_case`` of the case's side with max_tokens
    min(the case's, k + 1), drawn from ``seed_stream(seed, "shrink cases")``, given
    ``scale_runs`` runs and the binned chi-square at the false-fail rate split over every
    candidate's positions; within ``counterexample_s`` in all. The case's own batch
    (``describe_binned_loop`` of ``finding``) when no smaller one shows it in time."""
    from .scale import shrink_shapes

    b = get_loop_budget(budget)
    side = case.side or "residual"
    shapes = [s for s in shrink_shapes(case.vocab_size, case.k, side) if s != (case.vocab_size, case.k)]
    m = max(q.params.max_tokens for q in case.requests)
    streams = seed_stream(seed, "shrink cases").spawn(len(shapes))
    candidates = [scale_loop_case(v, k, min(m, k + 1), np.random.default_rng(st), f"shrunk (seed {seed})", "scale",
                                  side) for (v, k), st in zip(shapes, streams)]
    per_check = stats.split_budget(b.false_fail_rate, max(1, sum(min(m, c.k + 1) * len(c.requests)
                                                                   for c in candidates)))
    deadline = time.monotonic() + b.counterexample_s
    found: list = []

    def search(battery: LoopBattery) -> None:
        rng = np.random.default_rng(seed_stream(seed, "shrink runs"))
        for cand in candidates:
            battery.restart()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            rng = battery.scale_case(cand, per_check, left, rng)
            hits = [f for f in battery.result.findings if f.check == "loop-binned-chi-square"]
            if hits:
                found.append(describe_binned_loop(cand, hits[0]))
                return

    if candidates:
        run_in_subject(subject, lambda handle: LoopBattery(handle, b, seed, deadline), search)
    return found[0] if found else describe_binned_loop(case, finding)


def find_loop_counterexample(subject, budget="standard", seed: int = 0, checks=None,
                             exact_ok: bool = True, cases=None, judged: list | None = None,
                             **overrides) -> dict | None:
    """The smallest request and model (``small_loop_cases`` order) on which the loop subject shows
    a finding of one of ``checks`` (default: any law or contract check; the law checks count as one;
    seeded candidates only when ``checks`` holds one of ``SEED_CHECKS``), a law finding preferred.

    Each candidate is judged by the loop battery's own ``law_case``: exact enumeration when the
    subject replays its rng (``exact_ok``), else ``counterexample_samples`` runs and the battery's
    chi-square at the false-fail rate split over every candidate (``"method": "statistical"``).
    None when no candidate shows it within ``counterexample_s``, or the subject breaks the search;
    ``judged``, when a list, receives the name of every candidate judged to the end."""
    from .validation import check_seed, with_overrides

    seed = check_seed(seed)
    b = get_loop_budget(budget)
    b = with_overrides("loop", b, overrides)
    b = replace(b, samples=b.counterexample_samples, statistics_s=b.counterexample_s)
    candidates = list(small_loop_cases() if cases is None else cases)
    wanted = None if checks is None else {_family(c) for c in checks}
    per_check = stats.split_budget(b.false_fail_rate, max(1, sum(len(c.requests) for c in candidates)))
    found: list = []

    def search(battery: LoopBattery) -> None:
        for case in candidates:
            battery.restart()
            if case.seeded:
                if wanted is not None and not wanted & set(SEED_CHECKS):
                    continue
                battery.seeded_case(case, per_check)
            elif wanted is not None and wanted <= set(SEED_CHECKS):
                continue  # only a seeded case can show it
            else:
                battery.law_case(case, per_check, exact_ok, efficiency=False)
            hits = sorted((f for f in battery.result.findings if f.kind in ("distribution", "contract")
                           and f.check != "rng" and (wanted is None or _family(f.check) in wanted)),
                          key=lambda f: f.kind != "distribution")  # a law finding first
            if judged is not None:
                judged.append(case.name)
            if hits:
                found.append(describe_loop(case, hits[0], battery.laws))
                return

    run_in_subject(subject, lambda handle: LoopBattery(handle, b, seed, time.monotonic() + b.counterexample_s),
                   search)
    return found[0] if found else None

__all__ = ["LOOP_BUDGETS", "LoopBudget", "LoopCase", "SEED_CHECKS", "SEED_STREAMS", "contract_problem",
           "counterexample_checks", "describe_loop", "drawn_grammar", "drawn_params", "edge_cases",
           "find_loop_counterexample", "generated_loop_cases", "loop_cases", "run_loop_battery", "seed_stream",
           "shrink_binned_loop", "small_loop_cases"]
