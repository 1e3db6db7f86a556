"""The pairwise corners of the sweeps: the cases at the joint largest values of pairs of swept
dimensions, for each interface, at budgets whose ``sweep_corners`` is set (thorough, and so
``tv=X``).

The sweeps (``round_cases.sweep_cases``, ``loop_cases.sweep_loop_cases``,
``kernel_cases.sweep_cases``) take one dimension at a time to its largest value with the others
small, so their cost stays linear in the number of dimensions; a bug that needs two sizes at once
(a cache cut short only in long rounds, a batch tile wrong only for long drafts) passes all of
them. A corner case puts both sizes at their largest, over a model whose law depends on what
either size could cut off, as the one-dimensional sweeps' do:

- round (``round_corner_cases``): context x k: a prefix of ``sweep_context - sweep_k + 1``
  tokens (prefix and window reach the context sweep's largest context), the first token 0 and
  every later one 1, k = ``sweep_k``, a window of k + 1 tokens, over a first-token model
  (``first_token_chance_model``: the row is chosen by the first token and the position) whose
  draft is one-hot and whose target has chance at 4 positions of the window only, so the
  enumeration stays small at any k; a sampler that shows the target a window of the last W
  tokens reads first-token-1 rows there;
- loop (``loop_corner_cases``): context x rounds, context x max_tokens and context x requests per
  batch: prompts of the largest context less the output, the first token 0, over a target whose
  rows the first prompt token alone chooses (``first_token_only_target``), judged per position
  like the sampled sweeps (``positions``). The pairs among rounds, max_tokens and batch are left
  out: a batch of ``sweep_batch`` requests of ``sweep_max_tokens`` tokens is B x m tokens a run
  (128 x 128 x 1,000 runs at thorough: about half an hour of the reference loop);
- kernel (``kernel_corner_cases``): k x batch (5 instances of ``k_sweep`` drafts, each position's
  rows its own, the last draft a value edge, tiled to batches of every ``batch_sweep`` size, the
  largest included) and binned V x k (the binned sweep's rows at the largest ``binned_sweep`` V after k - 1
  certain acceptances on one-hot rows). Dense V x anything and V x batch are left out: each probe
  of a scan is a whole row of (2k + 1) V floats, so dense V = 32,768 at k = 16 is some 11 times
  the 171 s of its k = 1 sweep, and a batch of 4,096 rows at V = 152,064 is 7.5 GB a call.

Every corner is built from the budget alone (fixed seeds: ``CORNER_SEED``), so a verdict stays a
function of (subject, seed, budget); each is judged as its interface's sweeps are (enumerated
within ``sweep_max_paths`` / ``extra_max_paths``, ``sweep_runs`` runs where sampled, exact from
uniforms), and its coverage origin is the sweeps'. Rule: Leviathan, Kalman, Matias (arXiv
2211.17192).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..laws.chains import FirstTokenModel, one_hot_draft_rows
from ..laws.requests import FirstTokenLogits, Request, SamplingParams
from .kernel import cases as kernel_cases
from .loop import cases as loop_cases
from .round import cases as round_cases

CORNER_SEED = 19
"""The seed of every corner's tables: the same corners for every check's seed."""

CORNER_PREFIX = "corner"
"""The name prefix of every corner case (``kernel_cases.SWEEPS`` lists it: origin "sweep")."""


# --------------------------------------------------------------------------- round


def first_token_chance_model(vocab: int, period: int, seed: int, chance: tuple[int, ...]) -> FirstTokenModel:
    """A ``chains.FirstTokenModel`` (the row chosen by the first token and the position modulo
    ``period``) whose draft is one-hot in every row and whose target is a random Dirichlet row at
    the positions in ``chance`` and equal to the draft elsewhere (accepted with certainty there):
    the law depends on the first token however long the context, and at most ``len(chance)``
    coins of chance keep the enumeration small at any k."""
    rows = vocab * period
    p, q = one_hot_draft_rows(vocab, rows, seed, np.isin(np.arange(rows) // vocab, chance))
    name = f"V{vocab}-first-token-one-hot-draft-period{period}-chance" + ",".join(map(str, chance))
    return FirstTokenModel(p, q, order=1, period=period, name=name)


def round_corner_cases(budget) -> list[round_cases.Case]:
    """The round's corner (context x k, see the module's docstring), or none where the budget
    has no ``sweep_corners`` or does not sweep both."""
    b = round_cases.get_budget(budget)
    if not (b.sweep_corners and b.sweep_context and b.sweep_k):
        return []
    k, period = b.sweep_k, round_cases.SWEEP_PERIOD
    n = max(b.sweep_context - k + 1, 1)
    chance = tuple(sorted({(n + j) % period for j in (0, k // 2, k - 1, k)}))
    model = first_token_chance_model(2, period, CORNER_SEED, chance)
    prefix = (0,) + (1,) * (n - 1)
    name = f"{CORNER_PREFIX} context {n} x k={k}: {model.name}, {k + 1} tokens"
    return [round_cases.Case(name, model, prefix, k, k + 1)]


# --------------------------------------------------------------------------- loop

FIRST_TOKEN_ROWS = (
    (1.2, -0.4, 0.3, -1.0),
    (-0.8, 0.9, -0.2, 0.6),
    (0.1, 0.2, -1.1, 1.0),
)
"""The loop corners' target: logits chosen by the first prompt token (modulo 3) alone."""


def first_token_only_target() -> FirstTokenLogits:
    """A ``FirstTokenLogits`` over 4 ids whose row is ``FIRST_TOKEN_ROWS[first token % 3]``
    whatever the last token: under context-free params every output position of a request has
    the processed row of its first prompt token as its law (judged per position), and a loop
    that shows the target a window without that token reads another row."""
    table = np.repeat(np.array(FIRST_TOKEN_ROWS)[:, None, :], 4, axis=1)
    return FirstTokenLogits(table, "target V4, rows chosen by the first token alone")


def long_prompt(n: int) -> tuple:
    """A prompt of n tokens: 0, then 1, 2, 3, 1, 2, 3, ... (the first token alone is 0)."""
    return (0,) + tuple(1 + t % 3 for t in range(n - 1))


def loop_corner(name: str, requests: tuple, k: int, sweep: str) -> loop_cases.LoopCase:
    target, (_, draft) = first_token_only_target(), loop_cases.context_free_pair()
    return loop_cases.LoopCase(
        f"{CORNER_PREFIX}: {name}; per position", target, draft, requests, k, kind="sweep", sweep=sweep, positions=True
    )


def loop_corner_cases(budget) -> list[loop_cases.LoopCase]:
    """The loop's corners (context x rounds, x max_tokens, x requests per batch; see the module's
    docstring), those whose two dimensions the budget sweeps, where it has ``sweep_corners``."""
    b = loop_cases.get_loop_budget(budget)
    if not (b.sweep_corners and b.sweep_context):
        return []
    longest, out = b.sweep_context, []
    if b.sweep_rounds and longest > 2 * b.sweep_rounds:
        m = 2 * b.sweep_rounds
        params = SamplingParams(temperature=0.8, top_k=3, max_tokens=m)
        what = f"context {longest} x {b.sweep_rounds} rounds or more (prompt {longest - m}, max_tokens {m}, k=1)"
        out.append(loop_corner(what, (Request(long_prompt(longest - m), params),), 1, "context x rounds"))
    if b.sweep_max_tokens and longest > b.sweep_max_tokens:
        m = b.sweep_max_tokens
        params = SamplingParams(temperature=0.6, top_p=0.95, logit_bias={2: 1.2}, max_tokens=m)
        what = f"context {longest} x max_tokens {m} (prompt {longest - m}, k=4)"
        out.append(loop_corner(what, (Request(long_prompt(longest - m), params),), 4, "context x max_tokens"))
    if b.sweep_batch and longest > 2:
        prompt = long_prompt(longest - 2)
        cycle = loop_cases.BATCH_PARAMS
        reqs = tuple(Request(prompt, cycle[i % len(cycle)]) for i in range(b.sweep_batch))
        what = f"context {longest} x a batch of {b.sweep_batch} requests (prompts {longest - 2}, max_tokens 2, k=2)"
        out.append(loop_corner(what, reqs, 2, "context x requests per batch"))
    return out


# --------------------------------------------------------------------------- kernel

KERNEL_INSTANCES = 5
"""Instances of the k x batch corner: odd, so a row that reads row r - 2^j reads another one."""


def k_batch_corner(k: int, batches: tuple[int, ...]) -> kernel_cases.KernelCase:
    """``KERNEL_INSTANCES`` instances of k drafts over V = 6 (``kernel_cases.k_sweep_cases``' rows
    at k, from three seeds: a random chain and one whose last draft is a value edge each), tiled
    to batches of each of ``batches`` rows (row r instance r mod 5). Batch rows cost little at any
    k, so the corner takes every size of the batch sweep (its largest among them): a row that
    disagrees is measured where it sits at the first size that shows it, the smallest."""
    parts = [kernel_cases.k_sweep_cases(k, seed=CORNER_SEED + 100 * i)[-1] for i in range(3)]
    n = KERNEL_INSTANCES

    def stacked(field: str) -> np.ndarray:
        return np.concatenate([getattr(c, field) for c in parts])[:n]

    labels = tuple(f"{label} #{i}" for i, c in enumerate(parts) for label in c.labels)[:n]
    V = parts[0].vocab_size
    return kernel_cases.KernelCase(
        f"{CORNER_PREFIX} k={k} x batch {max(batches)}, V{V}",
        stacked("draft_ids"),
        stacked("q"),
        stacked("p"),
        labels,
        tuple(batches),
    )


def binned_k_corner(V: int, k: int) -> kernel_cases.KernelCase:
    """The binned sweep's instances at V (``kernel_cases.binned_sweep_case``: mass on the top ids,
    past 65,535 where V allows; value edges at the draft) as the last of k drafts, after k - 1
    drafts on one-hot rows p = q (accepted with certainty), each position's id its own: a kernel
    that reads a row one position off, or the bonus from row k - 1, moves the law."""
    last = kernel_cases.binned_sweep_case(V)
    n = last.n
    ids = np.empty((n, k), np.int64)
    q = np.zeros((n, k, V), np.float32)
    p = np.zeros((n, k + 1, V), np.float32)
    for i in range(k - 1):
        x = (97 * (i + 1)) % (V - 8)  # clear of the top ids
        ids[:, i], q[:, i, x], p[:, i, x] = x, 1.0, 1.0
    ids[:, k - 1], q[:, k - 1], p[:, k - 1 :] = last.draft_ids[:, 0], last.q[:, 0], last.p
    return replace(last, name=f"{CORNER_PREFIX} binned V{V} x k={k}", draft_ids=ids, q=q, p=p)


def kernel_corner_cases(budget) -> list[kernel_cases.KernelCase]:
    """The kernel's corners (k x batch, binned V x k; see the module's docstring), those whose
    two dimensions the ``KernelBudget`` sweeps, where it has ``sweep_corners``."""
    if not budget.sweep_corners or budget.k_sweep < 2:
        return []
    out = [k_batch_corner(budget.k_sweep, tuple(budget.batch_sweep))] if budget.batch_sweep else []
    return out + ([binned_k_corner(max(budget.binned_sweep), budget.k_sweep)] if budget.binned_sweep else [])


def corner_words(dimensions: list[str]) -> str:
    """The corners in a coverage line: "; pairwise corners context x k" ("" with none)."""
    return f"; pairwise corners {', '.join(dimensions)}" if dimensions else ""


__all__ = [
    "CORNER_PREFIX",
    "CORNER_SEED",
    "FIRST_TOKEN_ROWS",
    "KERNEL_INSTANCES",
    "binned_k_corner",
    "corner_words",
    "first_token_chance_model",
    "first_token_only_target",
    "k_batch_corner",
    "kernel_corner_cases",
    "long_prompt",
    "loop_corner",
    "loop_corner_cases",
    "round_corner_cases",
]
