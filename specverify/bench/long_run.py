"""A sampler's long-run tokens and draft calls per round on a table model (``measure``): exact
where it can be (a stateless sampler's round-start states form a Markov chain whose kernel is the
exact round law, ``laws.exact.round_transition``; its long-run means are taken under the
stationary law reached from the prompt's state by Cesaro averaging), simulated otherwise
(``SEQUENCES`` independent sequences of ``ROUNDS`` rounds; the standard error is that of the mean
of the per-sequence means). ``speedup`` is the handout's cost model with the draft calls made."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..laws.chains import TableModel

MAX_PATHS = 10_000


SEQUENCES = 80


ROUNDS = 100


CESARO_STEPS = 4000


@dataclass(frozen=True)
class Measurement:
    tokens: float  # mean tokens per round
    se: float  # standard error of ``tokens`` (0 when exact)
    draft_calls: float  # mean draft-model calls per round under the cost model
    method: str  # "exact" or "simulated"


def exact_long_run(sampler, model: TableModel, prompt, k: int, fixed_calls=None) -> Measurement:
    """Long-run tokens and draft calls per round of a stateless sampler (see module docstring)."""
    from ..laws.round_chain import round_transition

    states, kernel, tokens, calls = round_transition(sampler, model, k, max_paths=MAX_PATHS)
    if fixed_calls is not None:
        calls = np.full(len(states), float(fixed_calls))
    start = tuple(prompt)[len(prompt) - model.order :] if model.order else ()
    mu = cesaro_average(kernel, states.index(start))
    return Measurement(float(mu @ tokens), 0.0, float(mu @ calls), "exact")


def cesaro_average(kernel: np.ndarray, start: int, steps: int = CESARO_STEPS) -> np.ndarray:
    """Average of the state distribution over ``steps`` rounds from ``start``: the stationary
    distribution of the start state's recurrent class, also for periodic chains."""
    dist = np.zeros(len(kernel))
    dist[start] = 1.0
    total = np.zeros(len(kernel))
    for _ in range(steps):
        total += dist
        dist = dist @ kernel
    return total / steps


def simulate(
    sampler,
    model: TableModel,
    prompt,
    k: int,
    seed: int = 0,
    fixed_calls=None,
    sequences: int = SEQUENCES,
    rounds: int = ROUNDS,
) -> Measurement:
    """Mean tokens and draft calls per round over independent sequences from ``prompt``."""
    from ..laws.round_chain import counted_round

    rng = np.random.default_rng(seed)
    per_sequence, all_calls = [], []
    for _ in range(sequences):
        prefix, n_tokens = tuple(prompt), 0
        for _ in range(rounds):
            out, n_calls = counted_round(sampler, model.p_fn, model.q_fn, prefix, k, rng)
            prefix += out
            n_tokens += len(out)
            all_calls.append(n_calls if fixed_calls is None else fixed_calls)
        per_sequence.append(n_tokens / rounds)
    se = float(np.std(per_sequence, ddof=1) / np.sqrt(sequences))
    return Measurement(float(np.mean(per_sequence)), se, float(np.mean(all_calls)), "simulated")


_CACHE: dict[tuple, Measurement] = {}
"""Measurements already made, by (sampler, model name, prompt, k, fixed draft calls): ``measure``'s."""


def measure(sampler, model, prompt, k, try_exact: bool = True, fixed_calls=None, seed=0) -> Measurement:
    """Exact where enumerable (and ``try_exact``), else simulated.

    Pass ``try_exact=False`` for samplers that look beyond the model's last ``order`` tokens
    (AdaptiveK's estimates, prompt lookup's whole prefix). Results are cached per
    (sampler object, model, prompt, k): they do not depend on the cost ratio.
    """
    key = (sampler, model.name, tuple(prompt), k, fixed_calls)
    if key not in _CACHE:
        _CACHE[key] = _measure(sampler, model, prompt, k, try_exact, fixed_calls, seed)
    return _CACHE[key]


def _measure(sampler, model, prompt, k, try_exact, fixed_calls, seed) -> Measurement:
    from ..laws.exact import NotEnumerable

    if try_exact:
        try:
            return exact_long_run(sampler, model, prompt, k, fixed_calls)
        except NotEnumerable:
            pass
    return simulate(sampler, model, prompt, k, seed=seed, fixed_calls=fixed_calls)


def speedup(m: Measurement, c: float) -> float:
    return m.tokens / (m.draft_calls * c + 1.0)
