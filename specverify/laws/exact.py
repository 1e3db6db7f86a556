"""Exact output distributions by re-running a sampler along every path of random decisions.

A sampler draws all its randomness from ``rng`` (the NumPy Generator API). Handing it an
``EnumeratingRng`` instead turns every random call into a recorded *decision*: ``choice`` and
``integers`` branch over their outcomes, and ``random()`` returns a ``SymbolicUniform`` that only
branches when it is compared with a number, or with many at once (inverse CDF: one decision over
the cells they cut, ``laws.threshold_cells``). ``enumerate_distribution`` re-runs the function once
per path, depth-first over recorded decision prefixes (re-execution with an execution trace, as in
Wingate, Stuhlmueller, Goodman, "Lightweight implementations of probabilistic programming
languages via transformational compilation", AISTATS 2011, and WebPPL's ``Enumerate``,
dippl.org chapter 3), and adds up the product of the branch weights per outcome. The result has no
sampling noise, so a correct speculative sampler (Leviathan et al., arXiv 2211.17192; Chen et al.,
arXiv 2302.01318) shows a total-variation distance of ~1e-16 from the target, and a bug shows its
true bias rather than bias plus noise.

A symbolic uniform (``laws.symbolic_uniform``) carries the interval that earlier comparisons on
this path left it, and branches through the rng when a comparison splits it. A ``choice`` over
many outcomes is a deferred draw, summed over where nothing but the outcome reads it
(``laws.summed_draws``). Anything the enumerator cannot follow (float(u), an rng method not
modelled, too many outcomes or paths) raises ``NotEnumerable``, never a wrong number, remembered
for the run (a sampler that swallows it is caught).

While torch is imported (never by this module), each run follows torch's random functions too:
``laws.torch_random`` routes ``torch.rand``, ``exponential_``, ``multinomial`` and the rest through
the same rng, and ``rng.integers`` over more than ``max_branching`` outcomes, refused otherwise, is
then a seed that may only seed torch (``int(rng.integers(2**63))`` for a ``torch.Generator``).

``SubrunMemo`` shares a sub-run across paths and enumerations (an engine's verification call on
the same drafts and rows, reached from many prefixes): a recorded sub-run is replayed by taking
its decisions again, with the same weights in the same order, so every path keeps its probability
bit for bit, and the sub-run's code runs once per path of its own decision tree, not once per path
of the enumeration.

``sampler_distribution`` composes rounds: the state between rounds is the prefix alone (a sampler
draws all randomness from the rng it is given), so each round is enumerated once per prefix and
memoized, and ``max_paths`` bounds the total number of paths over all rounds.
"""

from __future__ import annotations

import math
import numbers
import operator
import sys
from collections import defaultdict
from typing import NoReturn

import numpy as np

from ..common.validation import check_int, check_k
from . import precision, summed_draws
from .chains import sequence_distribution as sequence_distribution  # re-exported: exact.sequence_distribution
from .stats import total_variation as total_variation  # re-exported: exact.total_variation
from .summed_draws import SUMMED_FROM, ChoiceLaw, DeferredToken, as_token, expanded, expansions, pattern
from .symbolic_uniform import Interval, SymbolicUniform, as_constant

MAX_BRANCHING = 16_384
"""Most outcomes one ``choice`` / ``integers`` call may branch over (a draft drawn over an engine
vocabulary and read branches over all of them: ``laws.summed_draws``)."""

MAX_DECISIONS_PER_RUN = 10_000
"""Most decisions one run may make (``while rng.random() < 0.5`` would otherwise never end)."""

# numpy.random.Generator.choice refuses p whose sum is further than this from 1.
_NUMPY_P_SUM_ATOL = math.sqrt(np.finfo(np.float64).eps)


def choice_atol(p) -> float:
    """How far from 1 ``Generator.choice`` lets p sum: sqrt(eps) of float64 or of p's coarser dtype."""
    dtype = getattr(p, "dtype", None)
    if dtype is not None and np.issubdtype(dtype, np.floating):
        return max(_NUMPY_P_SUM_ATOL, math.sqrt(np.finfo(dtype).eps))
    return _NUMPY_P_SUM_ATOL


class NotEnumerable(Exception):
    """Raised for anything the enumerator cannot follow (float() of a symbolic uniform, an rng
    method it does not model, comparing two symbolic uniforms, a choice over too many outcomes,
    the path budget exceeded). The message says what, so callers fall back to statistics. Never
    a wrong answer."""


# ----------------------------------------------------------------------------------------------
# The rng


class EnumeratingRng:
    """Stands in for ``numpy.random.Generator`` during enumeration.

    Each random call is a decision: on the replayed part of a path it returns the scripted branch,
    beyond it it takes branch 0 and records the branch weights for later backtracking.
    """

    def __init__(self, max_branching: int = MAX_BRANCHING):
        self._max_branching = check_int("max_branching", max_branching, 1)
        self.run_id = 0  # the run under way (a symbolic uniform of another run refuses)
        self._chosen: list[int] = []  # branch taken at each decision of the current path
        self._weights: list[tuple] = []  # conditional weights of the branches of each decision
        self._probs: list[float] = []  # probability of the path up to each decision
        self._pos = 0
        self._refusal: str | None = None
        self._active = False
        self._choice_cache: dict = {}
        self._torch = None  # the run's laws.torch_random.Interception while torch is followed
        self._memo_runs: list[tuple] = []  # this path's SubrunMemo runs: (memo, key, first, end, value)
        self.max_decisions = MAX_DECISIONS_PER_RUN  # an enumeration's own cap (_Budget)
        self.paths: _Budget | None = None  # the paths max_paths allows (summed_draws.wide_paths_foreseen)

    @property
    def max_branching(self) -> int:
        """Most branches one decision may have (``laws.threshold_cells`` bisects past it)."""
        return self._max_branching

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise NotEnumerable(
            f"rng.{name} is not modelled by the exact enumerator "
            "(only choice, random, integers and uniform are); fall back to statistics"
        )

    # -- decisions -----------------------------------------------------------------------------
    def refuse(self, message: str) -> NoReturn:
        """Raise NotEnumerable and remember it for the run, so a sampler that swallows it cannot
        go on (for the symbolic uniforms and layers as ``laws.torch_random`` too)."""
        if self._active and self._refusal is None:
            self._refusal = message
        raise NotEnumerable(message)

    def decide(self, weights: tuple) -> int:
        """One decision over branches with these conditional weights: the branch this path takes
        (for the symbolic uniforms and layers that model other random APIs, as ``laws.torch_random``)."""
        if not self._active:
            self.refuse("EnumeratingRng used outside enumerate_distribution")
        if len(weights) == 1:  # a certain outcome needs no branch
            return 0
        pos = self._pos
        self._pos = pos + 1
        if pos < len(self._chosen):
            if self._weights[pos] != weights:
                self.refuse(
                    "fn made different random calls on replay; it must depend only on its rng "
                    f"(decision {pos}: {self._weights[pos]} then {weights})"
                )
            return self._chosen[pos]
        if pos >= self.max_decisions:
            self.refuse(f"more than {self.max_decisions} random decisions in one run")
        if len(weights) >= SUMMED_FROM and self.paths is not None:  # refused at once, not after max_paths
            if words := summed_draws.wide_paths_foreseen(self._weights, self._chosen, len(weights), self.paths):
                self.refuse(words)
        self._chosen.append(0)
        self._weights.append(weights)
        self._probs.append((self._probs[-1] if pos else 1.0) * weights[0])
        return 0

    def branch_cap(self, n: int, what: str):
        if n > self._max_branching:
            self.refuse(f"{what} over {n} outcomes exceeds max_branching={self._max_branching}")

    # -- the modelled Generator API ------------------------------------------------------------
    def choice(self, a, size=None, replace=True, p=None, axis=0, shuffle=True):
        """One draw from range(a) or the 1-D array a, with probabilities p (default uniform).

        p is checked as NumPy does (ValueError on NaN, negative entries, or a sum off 1 by more
        than sqrt(eps)) and then normalized by its sum; zero-probability outcomes never branch.
        ``SUMMED_FROM`` outcomes or more (a an int): a ``DeferredToken`` (``laws.summed_draws``).
        """
        if size is not None:
            self.refuse("rng.choice(size=...) is not modelled; draw one token at a time")
        population = None
        if type(a) is int or isinstance(a, (numbers.Integral, np.integer)):
            n = int(a)
        else:
            population = np.asarray(a)
            if population.ndim == 0:
                n, population = operator.index(population.item()), None
            elif population.ndim != 1:
                self.refuse("rng.choice over a multi-dimensional array is not modelled")
            else:
                n = len(population)
        if n <= 0:
            raise ValueError("a must be a positive integer unless no samples are taken")
        if p is None:
            self.branch_cap(n, "rng.choice")
            index = self.decide((1.0 / n,) * n)
        else:
            precision.note(p)  # the weights' dtype (laws.precision)
            outcomes, weights, law = self._choice_weights(p, n)
            if law is not None and population is None:
                return self.defer(law)
            index = outcomes[self.decide(weights)]
        return np.int64(index) if population is None else population[index]

    def defer(self, law: ChoiceLaw) -> DeferredToken:
        """A draw of ``law`` decided where read, summed over where not (``laws.summed_draws``)."""
        if not self._active:
            self.refuse("EnumeratingRng used outside enumerate_distribution")
        return DeferredToken(self, law)

    def _choice_weights(self, p, n: int) -> tuple[list[int], tuple, ChoiceLaw | None]:
        """(outcomes with p > 0, their normalized weights, their ``ChoiceLaw`` from
        ``SUMMED_FROM`` outcomes on); memoized on the bytes of p, since
        re-running a sampler along every path hands the same few vectors over and over."""
        key = (p.dtype.str, p.shape, p.tobytes()) if type(p) is np.ndarray and p.dtype.kind == "f" else None
        cached = self._choice_cache.get((n, key)) if key is not None else None
        if cached is None:
            cached = self._check_choice_p(p, n)
            if key is not None:
                self._choice_cache[(n, key)] = cached
        return cached

    def _check_choice_p(self, p, n: int) -> tuple[list[int], tuple, ChoiceLaw | None]:
        atol = choice_atol(p)
        p = np.asarray(p, dtype=np.float64)  # float() of a symbolic entry raises NotEnumerable
        if p.ndim != 1:
            raise ValueError("p must be 1-dimensional")
        if p.size != n:
            raise ValueError("a and p must have same size")
        if np.isnan(p).any():
            raise ValueError("probabilities contain NaN")
        if (p < 0).any():
            raise ValueError("probabilities are not non-negative")
        total = math.fsum(p)
        if abs(total - 1.0) > atol:
            raise ValueError("probabilities do not sum to 1")
        outcomes = np.flatnonzero(p)
        weights = tuple((p[outcomes] / total).tolist())
        if len(outcomes) >= SUMMED_FROM:
            return outcomes.tolist(), weights, ChoiceLaw(outcomes.tolist(), weights)
        self.branch_cap(len(outcomes), "rng.choice")
        return outcomes.tolist(), weights, None

    def random(self, size=None, dtype=np.float64, out=None):
        """A SymbolicUniform, or an object array of independent ones for size=int / tuple."""
        if out is not None:
            self.refuse("rng.random(out=...) is not modelled")
        if not self._active:
            self.refuse("EnumeratingRng used outside enumerate_distribution")
        if size is None:
            return SymbolicUniform(Interval(self))
        return self._array(size, lambda: SymbolicUniform(Interval(self)))

    def uniform(self, low=0.0, high=1.0, size=None):
        """low + (high - low) * u with constant low and high."""
        low = as_constant(low, "rng.uniform(low=...)", self)
        high = as_constant(high, "rng.uniform(high=...)", self)
        if size is None:
            return low + (high - low) * self.random()
        return self._array(size, lambda: low + (high - low) * self.random())

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        """Uniform over [low, high) (or [low, high] with endpoint); each element one decision. Over
        more than max_branching outcomes it refuses, unless torch is followed: then it is a seed
        for torch only (``laws.torch_seeds.TorchSeed``)."""
        if high is None:
            low, high = 0, low
        low, high = operator.index(low), operator.index(high)  # symbolic -> NotEnumerable
        n = high - low + (1 if endpoint else 0)
        if n <= 0:
            raise ValueError("high <= low")
        if n > self._max_branching and size is None and self._torch is not None:
            return self._torch.seeds.token()  # a seed for torch only (laws.torch_random)
        self.branch_cap(n, "rng.integers")
        weights = (1.0 / n,) * n

        def draw():
            return np.dtype(dtype).type(low + self.decide(weights))

        return draw() if size is None else self._array(size, draw, dtype)

    @staticmethod
    def _array(size, make, dtype=object) -> np.ndarray:
        shape = (size,) if isinstance(size, (numbers.Integral, np.integer)) else tuple(size)
        out = np.empty(shape, dtype=object)
        for idx in np.ndindex(*shape):
            out[idx] = make()
        return out if dtype is object else out.astype(dtype)


# ----------------------------------------------------------------------------------------------
# Memoized sub-runs


class _Node:
    """A memoized sub-run's decision (weights, next nodes) or end (weights None, its value)."""

    __slots__ = ("weights", "after", "value")

    def __init__(self):
        self.weights: tuple | None = None
        self.after: dict[int, _Node] = {}
        self.value = _UNSET


_UNSET = object()


class SubrunMemo:
    """Sub-runs shared across paths and enumerations: ``memo.run(rng, key, thunk)``.

    Re-execution runs a sampler whole on every path (Wingate et al., AISTATS 2011), while most
    of it is often the same call on the same arguments (an engine's verification of the same
    drafts and rows, reached from several prefixes and paths). Contract: ``thunk()`` is a function
    of ``key()`` and of the decisions it takes from ``rng`` alone: every random draw it makes goes
    through ``rng`` (or the torch layer following it), anything it needs that ``rng`` provides
    outside decisions (a seed for torch) it draws itself, and nothing carries from one call to
    the next but its return value, which the caller does not mutate.

    Under enumeration (an active ``EnumeratingRng``), a call walks the decision tree recorded
    for ``key()``: it takes each recorded decision again through ``rng``, with the same branch
    weights in the same order, so each path keeps its probability bit for bit (the law is the
    one the thunk's own runs give), and returns the recorded value at the end. Where the tree has
    no such path yet, ``thunk()`` runs (taking the decisions walked so far again), and what it
    decided is recorded once the whole path has ended without a refusal (a run the enumerator
    refuses records nothing). A recorded node whose weights a later run contradicts raises
    NotEnumerable (the thunk is not a function of its key). Outside enumeration: ``thunk()``.
    """

    def __init__(self, max_keys: int = 100_000):
        self.max_keys = check_int("max_keys", max_keys, 1)
        self._trees: dict = {}
        self.precisions: set = set()  # what its sub-runs computed in, noted again on a replay (laws.precision)

    def run(self, rng, key, thunk):
        """thunk(), or the value its recorded run along this path returned (class docstring).
        ``key()`` gives what thunk is a function of (hashable); it is called under enumeration only."""
        if not isinstance(rng, EnumeratingRng) or not rng._active:
            return thunk()
        first, key = rng._pos, key()
        node = self._trees.get(key)
        while node is not None and node.weights is not None:
            node = node.after.get(rng.decide(node.weights))
        if node is not None and node.value is not _UNSET:
            precision.note_all(self.precisions)
            return node.value
        rng._pos = first  # the decisions walked are taken again by the thunk, as on any replay
        with precision.observing() as seen:
            value = thunk()
        self.precisions |= seen
        rng._memo_runs.append((self, key, first, rng._pos, value))
        return value

    def _record(self, key, weights: list, chosen: list, value) -> None:
        if key not in self._trees and len(self._trees) >= self.max_keys:
            self._trees.clear()
        node = self._trees.setdefault(key, _Node())
        for w, c in zip(weights, chosen):
            fresh = node.weights is None and node.value is _UNSET
            if not fresh and node.weights != w:
                raise NotEnumerable("a memoized sub-run took different decisions for the same key")
            node.weights = w
            node = node.after.setdefault(c, _Node())
        if node.weights is not None or (node.value is not _UNSET and node.value != value):
            raise NotEnumerable("a memoized sub-run gave different results for the same key and decisions")
        node.value = value


# ----------------------------------------------------------------------------------------------
# Enumeration


class _Budget:  # paths allowed over one or several enumerations, and decisions per run
    def __init__(self, max_paths: int, max_decisions: int = MAX_DECISIONS_PER_RUN):
        self.cap, self.decisions = check_int("max_paths", max_paths, 1), check_int("max_decisions", max_decisions, 1)
        self.used = 0

    def spend(self):
        if self.used >= self.cap:
            raise NotEnumerable(
                f"more than max_paths={self.cap} paths needed (visited {self.used}); "
                "fall back to statistics or raise max_paths"
            )
        self.used += 1


def _run(fn, rng: EnumeratingRng):
    """fn(rng); while torch is imported, with torch's random functions following rng's decisions
    (``laws.torch_random``, imported only then: the laws never import torch themselves)."""
    if "torch" not in sys.modules:
        return fn(rng)
    from .torch_random import Interception

    with Interception(rng) as rng._torch:
        try:
            return fn(rng)
        finally:
            rng._torch = None


def _enumerate(fn, budget: _Budget, max_branching: int = MAX_BRANCHING) -> dict:
    rng = EnumeratingRng(max_branching)
    rng.max_decisions = budget.decisions
    rng.paths = budget
    unwatched = "torch" not in sys.modules
    chosen, weights, probs = rng._chosen, rng._weights, rng._probs
    dist: dict = defaultdict(float)
    while True:
        budget.spend()
        rng.run_id += 1
        rng._pos, rng._refusal, rng._active = 0, None, True
        rng._memo_runs.clear()
        try:
            outcome = _run(fn, rng)
        except NotEnumerable:
            if not unwatched or "torch" not in sys.modules:
                raise
        finally:
            rng._active = False
        if unwatched and "torch" in sys.modules:  # fn imported torch: this run's draws were not followed
            return _enumerate(fn, budget, max_branching)
        if rng._refusal is not None:
            raise NotEnumerable(rng._refusal)
        if rng._pos != len(chosen):
            raise NotEnumerable("fn made fewer random calls on replay; it must depend only on its rng")
        for memo, key, first, end, value in rng._memo_runs:  # the path is complete: its sub-runs count
            memo._record(key, weights[first:end], chosen[first:end], value)
        try:
            dist[pattern(outcome)] += probs[-1] if probs else 1.0
        except TypeError:
            raise TypeError(f"fn must return a hashable outcome, got {type(outcome).__name__}") from None
        while chosen and chosen[-1] == len(weights[-1]) - 1:  # backtrack
            chosen.pop(), weights.pop(), probs.pop()
        if not chosen:
            return {x: w for x, w in dist.items() if w > 0}
        chosen[-1] += 1
        probs[-1] = (probs[-2] if len(probs) > 1 else 1.0) * weights[-1][chosen[-1]]


def enumerate_distribution(fn, *, max_paths: int = 200_000, max_branching: int = MAX_BRANCHING):
    """fn(rng) -> hashable outcome. Returns {outcome: probability} exactly (floats); a draw
    nothing but the outcome reads is summed over (``laws.summed_draws``), not branched on.

    Depth-first search over recorded decision prefixes: each path is visited once and weighted
    by the product of its branch weights. Raises NotEnumerable if fn does something unmodelled or
    more than ``max_paths`` paths are needed. Exceptions raised by fn itself that are not
    NotEnumerable propagate unchanged.
    """
    return expanded(_enumerate(fn, _Budget(max_paths), max_branching))


def _round_tokens(sampler, p_fn, q_fn, prefix: tuple, k: int, rng) -> tuple[int, ...]:
    out = sampler(p_fn, q_fn, prefix, k, rng)
    tokens = tuple(as_token(t) for t in out)
    if not tokens:
        raise ValueError(f"sampler returned no tokens from prefix {prefix}; a round emits >= 1")
    return tokens


def _round_distribution(sampler, p_fn, q_fn, prefix: tuple, k: int, budget: _Budget) -> dict:
    """One round's law (of patterns), with the precisions it computed in (``precision.ObservedLaw``)."""
    with precision.observing() as seen:
        law = _enumerate(lambda rng: _round_tokens(sampler, p_fn, q_fn, prefix, k, rng), budget)
    return precision.ObservedLaw(law, seen)


def sampler_distribution(sampler, p_fn, q_fn, prefix, k, m, *, max_paths=200_000, max_decisions=MAX_DECISIONS_PER_RUN):
    """Exact distribution of the first m tokens emitted by running ``sampler`` rounds from prefix
    (each round's output appended to the prefix) until at least m tokens are out. Each round is
    enumerated once per prefix it starts from; ``max_paths`` caps the paths over all of them. A
    round's law is one of patterns (``laws.summed_draws``): a draw the window cuts off is summed
    away, one inside it is summed over at the end. ``max_decisions``: the most decisions per run."""
    m = check_k(m, "m")
    prefix = tuple(prefix)
    budget = _Budget(max_paths, max_decisions)
    rounds: dict[tuple, dict] = {}
    pending: list[dict] = [defaultdict(float) for _ in range(m)]  # by number of tokens emitted
    pending[0][()] = 1.0
    result: dict = defaultdict(float)
    for emitted_len in range(m):
        for emitted, prob in pending[emitted_len].items():
            start = prefix + emitted
            if start not in rounds:
                rounds[start] = _round_distribution(sampler, p_fn, q_fn, start, k, budget)
            for out, w in rounds[start].items():
                seq = emitted + out
                if len(seq) >= m:
                    result[seq[:m]] += prob * w
                else:  # the next round starts after these tokens: each summed draw's outcomes apart
                    for start_seq, v in expansions(seq):
                        pending[len(seq)][start_seq] += prob * w * v
    return precision.observed_law(expanded(result), *rounds.values())


def round_length_distribution(sampler, p_fn, q_fn, prefix, k, *, max_paths=200_000) -> dict[int, float]:
    """Exact distribution of the number of tokens one round emits."""
    dist = _round_distribution(sampler, p_fn, q_fn, tuple(prefix), k, _Budget(max_paths))
    lengths: dict[int, float] = defaultdict(float)
    for out, w in dist.items():
        lengths[len(out)] += w
    return precision.observed_law(sorted(lengths.items()), dist)


def exact_tv(sampler, p_fn, q_fn, prefix, k, m, *, max_paths=200_000) -> float:
    """TV between sampler_distribution and sequence_distribution(p_fn, prefix, m)."""
    got = sampler_distribution(sampler, p_fn, q_fn, prefix, k, m, max_paths=max_paths)
    return total_variation(got, sequence_distribution(p_fn, prefix, m))
