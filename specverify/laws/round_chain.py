"""The round-start chain of a stateless sampler, exactly: where a long decode's rounds go.

In a long decode with a table model of period 1, the state a round starts in is the last
``model.order`` tokens, so the rounds form a Markov chain; ``round_transition`` computes its
transition matrix, the exact mean round length and the mean number of draft calls per state by
enumerating one round from each state (``laws.exact.enumerate_distribution``), so long-run rates
are averages under its stationary distribution. ``counted_round`` runs one round and counts its
draft steps (q_fn calls).
"""

from __future__ import annotations

import itertools

import numpy as np

from .exact import NotEnumerable, enumerate_distribution
from .summed_draws import as_token


def counted_round(sampler, p_fn, q_fn, prefix, k, rng) -> tuple[tuple[int, ...], int]:
    """Run one round; return its tokens and the number of q_fn calls (draft steps) it made. A
    token drawn over many ids and not read stays a deferred draw (``laws.summed_draws``): the
    enumeration sums over it rather than branching."""
    calls = [0]

    def q_counted(ctx):
        calls[0] += 1
        return q_fn(ctx)

    return tuple(as_token(t) for t in sampler(p_fn, q_counted, prefix, k, rng)), calls[0]


def round_transition(sampler, model, k, *, max_paths=200_000):
    """The round-start chain of a stateless sampler on a table model with period 1.

    A round that starts in state s (the last ``model.order`` tokens) ends in state s'; returns
    (states, T, tokens, calls) with T[s, s'] that probability, tokens[s] the exact mean round
    length and calls[s] the mean number of q_fn calls from s. In a long decode the rounds form
    this Markov chain, so long-run rates are averages under its stationary distribution.
    """
    if model.period != 1:
        raise ValueError("model: the round-start chain needs period == 1")
    states = list(itertools.product(range(model.vocab_size), repeat=model.order))
    index = {s: i for i, s in enumerate(states)}
    kernel = np.zeros((len(states), len(states)))
    tokens, calls = np.zeros(len(states)), np.zeros(len(states))
    paths = [0]  # runs over all states: max_paths bounds the whole computation

    def one_round(rng, s):
        paths[0] += 1
        return counted_round(sampler, model.p_fn, model.q_fn, s, k, rng)

    for s in states:
        if paths[0] >= max_paths:
            raise NotEnumerable(f"more than max_paths={max_paths} paths over all states")
        dist = enumerate_distribution(lambda rng, s=s: one_round(rng, s), max_paths=max_paths - paths[0])
        for (out, n_calls), w in dist.items():
            nxt = (s + out)[len(s + out) - model.order :] if model.order else ()
            kernel[index[s], index[nxt]] += w
            tokens[index[s]] += w * len(out)
            calls[index[s]] += w * n_calls
    return states, kernel, tokens, calls
