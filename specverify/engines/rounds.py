"""Round-interface wrappers around engines' verification functions, in their calling conventions.

Each wrapper is a round sampler ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``
(the handout's interface, judged by the round battery on the *marginal* law of the emitted
tokens) that drafts k tokens from q with ``rng``, builds the engine's tensors for one sequence
(B = 1), takes all other randomness from ``rng`` and calls the engine function, which is an
argument: the engine's own (loaded from its package) or, in the offline tests, the project's
reference written in the engine's convention. Each also exposes ``verify(drafts, ps, qs, coins)``
(``speculative_step.verify``): the engine call on given drafts, for the behaviour probes.
"""

from __future__ import annotations

import random as _random
from contextlib import contextmanager
from functools import partial
from types import SimpleNamespace

import numpy as np
import torch

GRID = 1 << 24
"""torch.rand's float32 grid: uniforms are multiples of 2^-24 in [0, 1)."""


def draft(q_fn, prefix: tuple, k: int, rng) -> tuple[list[int], list[np.ndarray]]:
    """k drafts from q with ``rng`` (the draft model's own sampling, outside the engine call)."""
    drafts, qs = [], []
    for _ in range(k):
        q = np.asarray(q_fn(prefix + tuple(drafts)), dtype=np.float64)
        drafts.append(int(rng.choice(len(q), p=q)))
        qs.append(q)
    return drafts, qs


def targets(p_fn, prefix: tuple, drafts: list[int]) -> list[np.ndarray]:
    return [np.asarray(p_fn(prefix + tuple(drafts[:i])), dtype=np.float64) for i in range(len(drafts) + 1)]


def grid_uniforms(rng, n: int) -> np.ndarray:
    """n float32 uniforms on torch.rand's grid, from ``rng`` (integers, so the enumerator refuses
    them and the battery judges by statistics)."""
    return (np.asarray(rng.integers(0, GRID, size=n), dtype=np.float64) / GRID).astype(np.float32)


# ----------------------------------------------------------------------------- SGLang


def sglang_chain_round(chain_speculative_sampling_triton, block_verification: bool = False):
    """A round sampler around SGLang's ``chain_speculative_sampling_triton`` (B = 1): drafts from
    q, coins and the final uniform from ``rng`` on the float32 grid, ``block_verification`` as
    given. Tensors are built by ``adapters.kernels.from_sglang_chain``."""
    from ..adapters.kernels import from_sglang_chain

    fn = chain_speculative_sampling_triton
    if block_verification:
        fn = partial(chain_speculative_sampling_triton, block_verification=True)
    kernel = from_sglang_chain(fn)

    def verify(drafts, ps, qs, coins):
        k, V = len(drafts), len(ps[0])
        q = np.zeros((1, max(k, 1), V), np.float32) if k == 0 else np.asarray(qs, np.float32)[None]
        ids = np.asarray(drafts, np.int64).reshape(1, -1) if k else np.full((1, 1), -1, np.int64)
        p = np.asarray(ps, np.float32)[None]
        if k == 0:
            p = np.concatenate([p, np.zeros_like(p)], axis=1)
        out, nacc = kernel(ids, q, p, np.asarray(coins, np.float32).reshape(1, -1)[:, : ids.shape[1] + 1])
        n = int(nacc[0])
        return [int(t) for t in out[0, : n + 1]]

    def speculative_step(p_fn, q_fn, prefix, k, rng):
        prefix = tuple(prefix)
        drafts, qs = draft(q_fn, prefix, k, rng)
        ps = targets(p_fn, prefix, drafts)
        return verify(drafts, ps, qs, grid_uniforms(rng, k + 1))

    speculative_step.verify = verify
    return speculative_step


# ----------------------------------------------------------------------------- EAGLE-1


def identity_logits_processor(input_ids, scores):
    """EAGLE's ``logits_processor`` at temperature 1 with no top-k / top-p: scores unchanged."""
    return scores


def eagle_chain_inputs(drafts, ps, qs, root: int = 0) -> dict:
    """EAGLE-1 ``evaluate_posterior``'s arguments for one chain (a tree with a single path).

    ``logits`` [1, k+1, V] = log p (float64, -inf where p = 0: softmax gives p back),
    ``candidates`` [1, k+1] = (root, drafts...), ``cart_candidates_prob`` [1, k+1] = (1, q(x_i)),
    ``op[i]`` [1, V] = q row i (the draft distribution at depth i), ``p_indices`` = zeros,
    ``b_indices`` = no earlier siblings, ``tree_candidates`` [1, k+1] = the candidates."""
    k = len(drafts)
    with np.errstate(divide="ignore"):
        logits = torch.from_numpy(np.log(np.asarray(ps, np.float64)))[None]
    cand = torch.tensor([[root] + list(drafts)], dtype=torch.long)
    cart = torch.tensor([[1.0] + [float(qs[i][x]) for i, x in enumerate(drafts)]], dtype=torch.float64)
    return dict(
        logits=logits,
        candidates=cand,
        logits_processor=identity_logits_processor,
        cart_candidates_prob=cart,
        op=[torch.from_numpy(np.asarray(qs[i], np.float64))[None] for i in range(k)],
        p_indices=[[0] * (k + 1)],
        tree_candidates=cand.clone(),
        b_indices=[[[] for _ in range(k + 1)]],
    )


@contextmanager
def python_random(module, value: float | None = None, seed: int | None = None):
    """The Python RNG ``module`` reads as its global ``random``: seeded with ``seed`` (the real
    global one), or, for the probes, a stand-in whose ``random()`` always returns ``value``."""
    if value is None:
        _random.seed(seed)
        yield
        return
    saved = module.random
    module.random = SimpleNamespace(random=lambda: value)
    try:
        yield
    finally:
        module.random = saved


def eagle_round(evaluate_posterior, module=None):
    """A round sampler around EAGLE-1's ``evaluate_posterior`` (eagle-llm 1.2.1, which uses q).

    Randomness: EAGLE draws its acceptance coins from Python's global ``random.random()``; the
    wrapper seeds it from ``rng`` each round (``random.seed(rng.integers(2**63))``), so a seeded
    round replays. The emitted token is ``torch.multinomial(sample_p, 1)`` as in EAGLE's
    ``update_inference_inputs``, with a generator seeded from ``rng``."""
    module = module if module is not None else SimpleNamespace(random=_random)

    def verify(drafts, ps, qs, coins=None, seed: int = 0):
        args = eagle_chain_inputs(drafts, ps, qs)
        value = None if coins is None else float(coins)
        with python_random(module, value, seed):
            best, accept_length, sample_p = evaluate_posterior(**args)
        n = int(accept_length)
        gen = torch.Generator().manual_seed(seed)
        token = int(torch.multinomial(sample_p.reshape(-1).double(), 1, generator=gen)[0])
        return [int(x) for x in drafts[:n]] + [token]

    def speculative_step(p_fn, q_fn, prefix, k, rng):
        prefix = tuple(prefix)
        drafts, qs = draft(q_fn, prefix, k, rng)
        ps = targets(p_fn, prefix, drafts)
        return verify(drafts, ps, qs, None, int(rng.integers(1 << 62)))

    speculative_step.verify = verify
    return speculative_step


# ----------------------------------------------------------------------------- Medusa 0.1

MEDUSA_THRESHOLD, MEDUSA_ALPHA = 0.09, 0.3
"""Medusa's ``medusa_generate`` defaults (posterior_threshold, posterior_alpha)."""


def medusa_round(
    evaluate_posterior,
    generate_candidates,
    temperature: float = 1.0,
    posterior_threshold: float = MEDUSA_THRESHOLD,
    posterior_alpha: float = MEDUSA_ALPHA,
):
    """A round sampler around Medusa 0.1's ``evaluate_posterior`` (typical acceptance). The
    token after the accepted prefix is what Medusa 0.1 emits next: ``generate_candidates``'s
    greedy ``argmax(logits[:, -1])`` on the target row after the accepted prefix (no Medusa
    heads). Deterministic given the drafts; ``rng`` only drafts."""

    def verify(drafts, ps, qs=None, coins=None, seed: int = 0):
        with np.errstate(divide="ignore"):
            logits = torch.from_numpy(np.log(np.asarray(ps, np.float64)))[None]
        cand = torch.tensor([[0] + list(drafts)], dtype=torch.long)
        best, accept_length = evaluate_posterior(logits, cand, temperature, posterior_threshold, posterior_alpha)
        n, b = int(accept_length), int(best)
        V = logits.shape[-1]
        nxt, _ = generate_candidates(
            torch.zeros((0, 1, 1, V), dtype=logits.dtype),
            logits[None, b, n : n + 1],
            [],
            torch.tensor([0]),
            temperature,
        )
        return [int(x) for x in drafts[:n]] + [int(nxt.reshape(-1)[0])]

    def speculative_step(p_fn, q_fn, prefix, k, rng):
        prefix = tuple(prefix)
        drafts, qs = draft(q_fn, prefix, k, rng)
        return verify(drafts, targets(p_fn, prefix, drafts), qs)

    speculative_step.verify = verify
    return speculative_step
