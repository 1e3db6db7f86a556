"""The round battery's cases and the laws it judges them against (the parent's side; nothing
here calls a subject).

- budgets: the round sections of ``budgets.TABLE`` (``Budget``, ``BUDGETS``, ``get_budget``,
  ``coverage``) and the campaign ``tv=X`` (``campaign_runs``, ``campaign_budget``);
- cases (``Case``: a model, a prefix, k and a window of m emitted tokens): the fixed
  ``all_cases`` (a budget's ``battery``), the ``generated_cases`` drawn from the check's seed,
  the ``engine_scale_cases`` (V 4096 to 152,064, judged by a binned chi-square), the
  ``round_length_cases`` of tokens per round and the ``reference_case`` the experiments use;
- the reference laws, computed from the parent's own copies of the tables: ``target_distribution``
  (the exact law of a case's first m tokens), ``expected_round_length`` (the exact rule's mean
  round length), the optima of tokens per round, and ``looks`` (the sequential test's sizes).

Rule: Leviathan, Kalman, Matias (arXiv 2211.17192).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ...battery import budgets
from ...battery.budgets import Budget
from ...battery.core import POWER_FALSE_PASS_RATE
from ...battery.seed_tree import stream
from ...laws import exact, scale, stats
from ...laws.chains import (
    TableModel,
    first_token_model,
    handout_iid,
    iid_model,
    one_hot_draft_model,
    random_model,
    toy_chain,
)
from ...samplers.chain import speculative_step
from . import optimum as round_optimum

# --------------------------------------------------------------------------- budgets and cases


BUDGETS = budgets.view("round")
"""The round sections of the named budgets (``budgets.TABLE``), by name."""


def get_budget(budget) -> Budget:
    """The round section of ``budget``: a name, ``tv=X`` (``campaign_budget``), a ``Budget`` as
    it is, another interface's budget by its name (``budgets.section``)."""
    return budgets.section("round", budget, campaign_of=campaign_budget)


def coverage(budget) -> str:
    """What the round section of ``budget`` runs, in one line (the report's ``coverage``)."""
    b = get_budget(budget)
    chosen = [all_cases()[i] for i in b.cases]
    extra = f" + {b.generated} drawn from the seed" if b.generated else ""
    extra += f" + one over {b.engine_vocab} ids" if b.engine_vocab else ""
    extra += f" + contexts swept to {b.sweep_context}" if b.sweep_context else ""
    extra += f" + k swept to {b.sweep_k}" if b.sweep_k else ""
    extra += " + the pairwise corner context x k" if b.sweep_corners and b.sweep_context and b.sweep_k else ""
    extra += "".join(f" + V{v} k={k} binned" for v, k, _ in b.scale_cases)
    if b.scale_cases and b.engine_vocab and not b.scale_beside_exact:
        extra += f" (binned where the V{b.engine_vocab} one is not enumerated)"
    return (
        f"{len(chosen)} fixed cases{extra}, k up to {max(c.k for c in chosen)}, windows up to "
        f"{max(c.m for c in chosen)} tokens, chi-square looks to {b.n_max} runs and on to a case's "
        f"TV; a case the enumerator cannot follow must see TV {b.detect_tv:g} (swept {b.sweep_tv:g}"
        + (f", binned {b.scale_tv:g} per position" if b.scale_cases or b.engine_vocab else "")
        + (f"; cross-check of enumerated ones {b.cross_check_tv:g}" if b.stat_cases else "")
        + ")"
    )


@dataclass(frozen=True)
class Case:
    """One model, prefix, k and window of m emitted tokens."""

    name: str
    model: TableModel
    prefix: tuple
    k: int
    m: int


@lru_cache(maxsize=1)
def all_cases() -> tuple[Case, ...]:
    """i.i.d., first- to third-order and position-dependent chains, zeros in p and in q, disjoint
    supports, k from 1 to 5, windows of k + 1 or more tokens (accepted drafts, residual and bonus
    tokens all appear)."""
    zeros_pq = iid_model([0.5, 0.5, 0.0], [0.0, 0.6, 0.4], name="iid-zeros")
    disjoint = iid_model([0.7, 0.3, 0.0], [0.0, 0.0, 1.0], name="iid-disjoint")
    binary = iid_model([0.7, 0.3], [0.4, 0.6], name="iid-binary")
    return (
        Case("handout toy chain, k=2, 2 tokens", toy_chain(), (0,), 2, 2),
        Case("iid V2 alpha=0.7, k=4, 5 tokens", binary, (), 4, 5),
        Case("iid zeros in p and q, k=2, 3 tokens", zeros_pq, (), 2, 3),
        Case("iid disjoint supports, k=1, 2 tokens", disjoint, (), 1, 2),
        Case("2nd-order chain V3, k=1, 3 tokens", random_model(3, 2, 1, 1), (2, 1), 1, 3),
        Case("position-dependent chain V3, k=2, 3 tokens", random_model(3, 1, 3, 2), (1,), 2, 3),
        Case("chain with zeros V3, k=3, 4 tokens", random_model(3, 1, 1, 3, zeros=True), (0,), 3, 4),
        Case("position-dependent 2nd-order V2, k=4, 5 tokens", random_model(2, 2, 2, 5), (0, 1), 4, 5),
        Case("3rd-order chain V2, k=5, 6 tokens", random_model(2, 3, 1, 4), (1, 0, 1), 5, 6),
        Case("handout iid alpha=0.8, k=4, 5 tokens", handout_iid(), (), 4, 5),
        Case("toy chain, k=3, 4 tokens", toy_chain(), (1,), 3, 4),
        Case("chain with zeros V4, k=2, 3 tokens", random_model(4, 1, 1, 6, zeros=True), (3,), 2, 3),
    )


def battery(budget: str | Budget = "standard") -> list[Case]:
    """The fixed cases a budget runs every detector on (``generated_cases`` adds the drawn ones)."""
    return [all_cases()[i] for i in get_budget(budget).cases]


def boundary_values(largest: int, smallest: int = 0) -> list[int]:
    """The values a size's bug hides behind, from ``smallest`` to ``largest``: the edges (0, 1,
    2 and the largest) and every power of two with its neighbours (2^j - 1, 2^j, 2^j + 1)."""
    values = {0, 1, 2, largest}
    j = 1
    while (1 << j) - 1 <= largest:
        values |= {(1 << j) - 1, 1 << j, (1 << j) + 1}
        j += 1
    return sorted(v for v in values if smallest <= v <= largest)


SWEEP_PERIOD = 1031
"""The context sweep's period of positions (a prime past any standard context): the target's row
changes with the position modulo it, and with the first token of the context."""


def sweep_cases(budget: str | Budget, seed: int) -> list[Case]:
    """The sweeps, one dimension at a time with the others small, each case enumerated exactly:

    - context length: a prefix of every ``boundary_values(sweep_context)`` length (its tokens
      drawn from ``round_stream(seed, "generated cases", budget.generated + 1)``), V = 2, k = 2,
      2 tokens, over a ``chains.FirstTokenModel`` whose law depends on the context's first token
      and its length modulo ``SWEEP_PERIOD``: a sampler that shows the target a window of the
      last W tokens, or loses positions past some length, reads the wrong rows past W;
    - k: every k from 1 to ``sweep_k``, a window of k + 1 tokens (the bonus token included),
      V = 2, over ``chains.one_hot_draft_model`` with a period of 17 positions and a target of
      chance at the first, the middle, the last draft's and the bonus position (certain
      elsewhere): deterministic drafts and at most 4 coins of chance keep the enumeration small
      at any k, however a sampler draws its coins (all at once, as engines do, or one by one),
      while every row (the bonus's included) matters.
    """
    b = get_budget(budget)
    out = []
    if b.sweep_context:
        rng = np.random.default_rng(round_stream(seed, "generated cases", b.generated + 1))
        model = first_token_model(2, SWEEP_PERIOD, int(rng.integers(1 << 31)))
        tokens = tuple(int(t) for t in rng.integers(0, 2, b.sweep_context))
        for n in boundary_values(b.sweep_context):
            out.append(Case(f"sweep context {n} (seed {seed}): {model.name}, k=2, 2 tokens", model, tokens[:n], 2, 2))
    if b.sweep_k:
        for k in range(1, b.sweep_k + 1):
            k_model = one_hot_draft_model(2, 17, SWEEP_K_SEED, chance=tuple(sorted({0, k // 2, k - 1, k})))
            out.append(Case(f"sweep k={k}: {k_model.name}, {k + 1} tokens", k_model, (), k, k + 1))
    return out


SWEEP_K_SEED = 17  # the k sweep's fixed model (sweep_cases): the same tables for every seed and budget


GENERATED_SHAPES = ((2, 5, 6), (3, 4, 4), (4, 3, 3))
"""(V, largest k, largest window) of a drawn case: the enumerator follows all of them."""


def generated_cases(budget: str | Budget, seed: int) -> list[Case]:
    """``budget.generated`` cases, case i drawn from ``round_stream(seed, "generated cases", i)``
    (the same seed gives the same cases): a vocabulary of 2 to 4, order 0 to 2, period 1 to 3, zeros
    or not, k and a window up to ``GENERATED_SHAPES``' bounds, a random prefix; then, with
    ``engine_vocab``, a dense i.i.d. pair over that many ids (``scale.scale_pair``; k = 1, one
    token), enumerated (``engine_vocab_paths``: the last token summed, ``laws.summed_draws``): a
    bug that needs a large vocabulary (a narrow id type, a ratio rounded past some V, drafts from
    a truncated q) shows by its exact TV. Drawn from ``round_stream(seed, "generated cases",
    budget.generated)`` (the child after the cases')."""
    b = get_budget(budget)
    out = []
    for i in range(b.generated):
        rng = np.random.default_rng(round_stream(seed, "generated cases", i))
        V, k_max, m_max = GENERATED_SHAPES[int(rng.integers(len(GENERATED_SHAPES)))]
        order, period = int(rng.integers(0, 3)), int(rng.integers(1, 4))
        model = random_model(V, order, period, int(rng.integers(1 << 31)), zeros=bool(rng.random() < 0.4))
        k = int(rng.integers(1, k_max + 1))
        m = int(rng.integers(1, min(k + 1, m_max) + 1))
        prefix = tuple(int(x) for x in rng.integers(0, V, max(order, 1)))
        out.append(Case(f"generated #{i} (seed {seed}): {model.name}, k={k}, {m} tokens", model, prefix, k, m))
    if b.engine_vocab:
        V = b.engine_vocab
        model = scale.scale_pair(
            V, "residual", np.random.default_rng(round_stream(seed, "generated cases", b.generated))
        )
        out.append(Case(f"{ENGINE_VOCAB_ORIGIN} V{V} iid dense (seed {seed}), k=1, 1 token", model, (), 1, 1))
    return out


ENGINE_VOCAB_ORIGIN = "generated engine-vocabulary"  # how that case's name begins (generated_cases)


def engine_vocab_paths(vocab: int) -> int:
    """The engine-vocabulary case's paths: the rule's draft over V ids, its coin where p < q (<= 2 V
    paths), its last token summed; a sampler branching on that token too (V^2) goes to statistics."""
    return 2 * vocab + 64


ENGINE_VOCAB_DECISIONS = 64
"""Decisions one run of the engine-vocabulary case may take: the rule's two (draft, coin); a loop of
comparisons over V ids takes one per id passed, refused at once rather than after V-step paths."""


WIDE_VOCAB = 128
"""A case over this many ids or more is wide: a call there past its limit is a shortfall (the
sampler too slow to be judged at that vocabulary: inconclusive, never "not exact" for it)."""


def too_slow(breach: str) -> bool:
    """Whether a breach is only a call past its time limit (``guarded``'s or the runner's kill)."""
    return "did not return within" in breach


def engine_scale_case(vocab: int, k: int, m: int, side: str, origin: str, rng, seed: int) -> Case:
    """One engine-scale case: an i.i.d. ``scale.scale_pair`` over ``vocab`` ids drawn from
    ``rng``, k drafts, a window of m tokens, judged by the binned chi-square
    (``RoundBattery.engine_scale``)."""
    return Case(
        f"{origin} V{vocab} {side} (seed {seed}), k={k}, {m} tokens, binned",
        scale.scale_pair(vocab, side, rng),
        (),
        k,
        m,
    )


ROUND_STREAMS = ("chi-square looks", "generated cases", "engine scale", "tokens per round", "cross-check")
"""The round battery's random streams (``battery.stream``: nodes of ``SeedSequence(seed)``'s tree),
child by child: 0 the sequential chi-square, one node per (case, look, block): ``(0, i, j, l)``
draws block l (``run_blocks``) of the runs case i of the chi-square's cases
(``RoundBattery.sequential``' list: the cases the enumerator cannot follow) adds at look j
(``looks``), whatever other cases are live; 1 the generated cases (``(1, i)`` case i,
``(1, budget.generated)`` the engine-vocabulary pair, ``(1, budget.generated + 1)`` the context
sweep's model and tokens); 2 the engine-scale streams
(``SCALE_STREAMS``; the runs of engine-scale case i, block l: ``(2, 1, i, l)``); 3 sampled tokens
per round, ``(3, i, l)`` for block l of case i of ``round_length_cases``; 4 the cross-check of
enumerated cases (``round.statistics``): ``(4, 0)`` draws its cases, ``(4, 1, j, l)`` block l of
the runs of its case j. The root itself (``default_rng(seed)``) draws the contract's rounds,
threaded through the cases in order, and the counterexample search's runs (``round_counterexample``).
No stream is made by adding an offset to the seed."""

SCALE_STREAMS = ("budget and aimed cases", "engine-scale runs", "shrink cases", "shrink runs")
"""The children of ``round_stream(seed, "engine scale")`` (node ``(2,)``), by index: the cases (one
grandchild per case, in ``engine_scale_cases``' order), the rng of their runs, the smaller cases a
shrink draws (one grandchild per candidate) and the rng of its runs."""


def round_stream(seed: int, purpose: str, *path: int) -> np.random.SeedSequence:
    """The node ``(ROUND_STREAMS.index(purpose), *path)`` of ``SeedSequence(seed)``'s tree."""
    return stream(seed, ROUND_STREAMS.index(purpose), *path)


def scale_stream(seed: int, purpose: str) -> np.random.SeedSequence:
    """The engine-scale stream for ``purpose`` (a name of ``SCALE_STREAMS``)."""
    return round_stream(seed, "engine scale", SCALE_STREAMS.index(purpose))


def engine_scale_cases(budget: str | Budget, seed: int, aim=None) -> list[Case]:
    """The budget's engine-scale cases (``scale_cases``: V, k, side; a window of k + 1 tokens, at
    most 9), then, with an ``Aim`` (``interfaces.Aim``: the user's --vocab, --k, --max-tokens),
    one aimed case per k (k = 4 when none is given) at the aimed vocabulary (4096 when none), a
    window of the aimed max_tokens (k + 1 when none; at least 1), sides alternating. Each drawn
    from its own grandchild of ``scale_stream(seed, "budget and aimed cases")``."""
    b = get_budget(budget)
    shapes = [(v, k, min(k + 1, 9), side, "generated") for v, k, side in b.scale_cases]
    if aim:
        for i, k in enumerate(aim.ks or (4,)):
            m = max(1, aim.max_tokens) if aim.max_tokens is not None else k + 1
            shapes.append((aim.vocab or 4096, k, m, scale.SIDES[i % 2], "aimed"))
    cases = scale_stream(seed, "budget and aimed cases")
    return [
        engine_scale_case(v, k, m, side, origin, np.random.default_rng(stream(cases, i)), seed)
        for i, (v, k, m, side, origin) in enumerate(shapes)
    ]


def binned_cases(budget: str | Budget, big: list[Case], engine_vocab_exact: bool) -> list[Case]:
    """The engine-scale cases ``big`` (``engine_scale_cases``) a run judges by binned chi-square:
    all of them, except that where the engine-vocabulary case's exact law was had
    (``engine_vocab_exact``) and the budget does not ask for them beside it
    (``scale_beside_exact``), only the aimed ones (the user's --vocab / --k). The named budgets'
    binned cases are thorough's (``scale_beside_exact``: all of them either way); standard has
    none, so it covers the same box for every subject, its dense V = ``engine_vocab`` case judged
    by its exact law or, where the enumerator cannot follow it, binned (docs/BUDGETS.md, "The
    binned cases at standard")."""
    b = get_budget(budget)
    if engine_vocab_exact and not b.scale_beside_exact:
        return [c for c in big if c.name.startswith("aimed")]
    return list(big)


def binned_split(budget: str | Budget, fallback: list[Case], big: list[Case], engine_vocab_exact: bool):
    """(the cases judged by chi-square, the cases judged by binned chi-square) of a run whose
    enumerator could not follow ``fallback``: the dense engine-vocabulary case among them is
    binned, as an engine-scale case is, beside ``binned_cases`` of the engine-scale cases ``big``."""
    dense = [c for c in fallback if c.name.startswith(ENGINE_VOCAB_ORIGIN)]
    rest = [c for c in fallback if not c.name.startswith(ENGINE_VOCAB_ORIGIN)]
    return rest, dense + binned_cases(budget, big, engine_vocab_exact)


def round_length_cases() -> list[Case]:
    """Tokens per round: the handout's i.i.d. alpha = 0.8 pair at k = 4 (3.3616 tokens), zeros in
    p and q, and the toy chain (non-i.i.d.: the exact rule's own expectation)."""
    return [
        Case("handout iid alpha=0.8, k=4", handout_iid(), (), 4, 1),
        Case("iid zeros in p and q, k=2", iid_model([0.5, 0.5, 0.0], [0.0, 0.6, 0.4]), (), 2, 1),
        Case("handout toy chain, k=2", toy_chain(), (0,), 2, 1),
    ]


def reference_case() -> Case:  # the handout's two-token window on its toy chain (k = 2)
    return all_cases()[0]


# --------------------------------------------------------------------------- the reference laws


def _cached(fn):
    """Memoize a function of a Case by its contents (a Case holds arrays: not hashable)."""
    memo: dict = {}

    def cached(case: Case):
        m = case.model
        key = (
            m.p_table.tobytes(),
            m.q_table.tobytes(),
            m.p_table.shape,
            m.order,
            m.period,
            case.prefix,
            case.k,
            case.m,
        )
        if key not in memo:
            memo[key] = fn(case)
        return memo[key]

    return cached


@_cached
def target_distribution(case: Case) -> dict:
    """The exact law of the case's first m tokens, from the parent's own tables."""
    return exact.sequence_distribution(case.model.p_fn, case.prefix, case.m)


optimum_tokens_per_round = _cached(round_optimum.optimum_tokens_per_round)
"""The most tokens per round any exact rule gets from the case's chain of k drafts (information:
the token-wise rule stays the bar for ``efficient``)."""

tree_optimum_tokens_per_round = _cached(round_optimum.nodewise_optimum_tokens_per_round)
"""For multi-draft samplers: a tree of depth k with 2 i.i.d. drafts per node, every node at the
transport LP's optimal acceptance (round_optimum.nodewise_optimum_tokens_per_round)."""


@_cached
def expected_round_length(case: Case) -> float:
    """The exact rule's mean round length on the case (= expected_tokens(alpha, k) if i.i.d.)."""
    dist = exact.round_length_distribution(speculative_step, case.model.p_fn, case.model.q_fn, case.prefix, case.k)
    return sum(n * w for n, w in dist.items())


RUN_BLOCK = 1000
"""Runs per block: the sampled runs of a case come in blocks of this many, each drawn from its
own node of the seed's tree (``run_blocks``), so that the runs are the same however the blocks
are shared out among processes."""


def run_blocks(n: int) -> list[int]:
    """n runs as block sizes: ``RUN_BLOCK`` each, the last one the rest."""
    return [RUN_BLOCK] * (n // RUN_BLOCK) + ([n % RUN_BLOCK] if n % RUN_BLOCK else [])


def looks(n_min: int, n_max: int) -> list[int]:
    """Sample sizes of the sequential test: n_min, 2 n_min, ... up to n_max."""
    sizes = [n_min]
    while sizes[-1] * 2 <= n_max:
        sizes.append(sizes[-1] * 2)
    return sizes


# --------------------------------------------------------------------------- the campaign tv=X


def campaign_runs(tv: float, budget: str | Budget = "thorough", false_fail_rate: float | None = None) -> dict:
    """Sampler runs one subject needs so that the chi-square detector sees a TV of ``tv`` (with
    probability 1 - POWER_FALSE_PASS_RATE) on every case of ``budget``.

    The statistical half of the battery's false-fail rate is split (Bonferroni) over every case
    and every look of the sequential test, exactly as the battery splits it; the number of looks
    depends on the run count, so the two are solved together. A correct subject runs every case
    to the last look (``n_max``, the smallest look at or above the largest case's need), so
    ``runs`` = cases x n_max. Returns {"tv", "budget", "cases", "looks", "n_max", "runs",
    "per_case": {case: runs it needs}, "per_check_false_fail_rate"}.
    """
    b = get_budget(budget)
    rate = b.false_fail_rate if false_fail_rate is None else false_fail_rate
    cases = [all_cases()[i] for i in b.cases]
    n_looks = 1
    while True:
        per_check = stats.split_budget(rate / 2, len(cases) * n_looks)
        per_case = {
            c.name: stats.min_num_samples_chi_square(tv, target_distribution(c), per_check, POWER_FALSE_PASS_RATE)
            for c in cases
        }
        need = max(max(per_case.values()), b.n_min)
        sizes = looks(b.n_min, 2 * need - 1)  # up to the first look >= need
        if len(sizes) <= n_looks:
            break
        n_looks = len(sizes)
    n_max = sizes[-1]
    return {
        "tv": tv,
        "budget": b.name,
        "cases": len(cases),
        "looks": len(sizes),
        "n_max": n_max,
        "runs": len(cases) * n_max,
        "per_case": per_case,
        "per_check_false_fail_rate": per_check,
    }


def campaign_budget(tv: float, base: str | Budget = "thorough") -> Budget:
    """``base`` with every sampled case sized to see ``tv`` (fixed, generated and swept cases the
    enumerator cannot follow, the binned cases per position, the pooled cross-check of every
    enumerated case's kind; the looks up to the run count ``campaign_runs`` gives), and time limits that do not cut it short (``--budget tv=0.001``): the round
    section of ``tv=X`` (``budgets.campaign``)."""
    b = get_budget(base)
    c = campaign_runs(tv, b)
    return replace(
        b,
        name=f"tv={tv:g}",
        stat_cases=len(b.cases),
        n_max=c["n_max"],
        detect_tv=min(b.detect_tv, tv),
        sweep_tv=min(b.sweep_tv, tv),
        scale_tv=min(b.scale_tv, tv),
        cross_check_tv=min(b.cross_check_tv, tv),
    )


__all__ = [
    "BUDGETS",
    "Budget",
    "Case",
    "GENERATED_SHAPES",
    "ROUND_STREAMS",
    "RUN_BLOCK",
    "SCALE_STREAMS",
    "ENGINE_VOCAB_DECISIONS",
    "ENGINE_VOCAB_ORIGIN",
    "WIDE_VOCAB",
    "SWEEP_K_SEED",
    "SWEEP_PERIOD",
    "all_cases",
    "battery",
    "boundary_values",
    "campaign_budget",
    "campaign_runs",
    "coverage",
    "engine_scale_case",
    "binned_cases",
    "binned_split",
    "engine_scale_cases",
    "engine_vocab_paths",
    "expected_round_length",
    "generated_cases",
    "get_budget",
    "looks",
    "optimum_tokens_per_round",
    "reference_case",
    "round_length_cases",
    "round_stream",
    "run_blocks",
    "scale_stream",
    "sweep_cases",
    "target_distribution",
    "too_slow",
    "tree_optimum_tokens_per_round",
]
