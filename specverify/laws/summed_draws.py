"""Categorical draws summed over, not branched on, when nothing but the output reads them.

Re-executing a sampler once per path (``laws.exact``) costs a whole run per outcome of every
draw. A round at an engine's vocabulary draws its residual or bonus token over V outcomes and
only emits it: branching there costs V runs per path (2 V^2 runs at k = 1, 33 million at V =
4096). ``EnumeratingRng.choice`` over ``SUMMED_FROM`` positive outcomes or more therefore returns
a ``DeferredToken``: the draw is decided (one branch per outcome, through ``rng.decide``, with
the very weights ``choice`` would have branched on) only where the sampler reads it, as the torch
layer defers ``multinomial`` (``laws.random_elements``). Moving it (into a list, a tuple, the
returned tokens) reads nothing, and neither does comparing it with a constant that every outcome
answers alike (``token == -1``). Anything else reads it: ``int()``, indexing with it, arithmetic,
``hash``, ``bool``, numpy conversion, any attribute; the value it then stands for is the one
``choice`` returns (``np.int64``).

A token still undecided when the run ends is summed over: the enumerator keeps the run's outcome
as a pattern (``pattern``: each such token a ``Summed`` marker, numbered by first appearance, so
two places holding one draw keep one value), adds the path's probability to the pattern, and
``expanded`` turns the law of patterns into the law of outcomes, each marker replaced by each
outcome of its draw with the draw's weight. Deferring an independent draw to its first read,
and summing it where no read comes, leaves the law of every outcome unchanged (the draw's
outcome is independent of everything decided before it, and nothing after it depends on it).

Contract: a ``DeferredToken`` belongs to the run it was drawn in (one kept into a later run
refuses); a sampler that returns it gets it back unchanged in the outcome, so the outcome must
be made of tuples, lists and plain values (anything else holding one reads it by its hash).
"""

from __future__ import annotations

import itertools
import operator
from collections import defaultdict
from typing import NamedTuple

import numpy as np

SUMMED_FROM = 64
"""A ``choice`` with this many positive outcomes or more is deferred (fewer: decided at once, as
before: small draws cost little and keep their plain ``np.int64`` type)."""


class ChoiceLaw:
    """One categorical draw's law: ``outcomes`` (ints, as a tuple) and their ``weights`` (summing
    to 1), hashed once (a law over 4096 outcomes is a dictionary key on every path)."""

    __slots__ = ("outcomes", "weights", "_hash", "_array")

    def __init__(self, outcomes, weights):
        self.outcomes = tuple(int(o) for o in outcomes)
        self.weights = tuple(float(w) for w in weights)
        self._hash = hash((self.outcomes, self.weights))
        self._array = np.asarray(self.outcomes, dtype=np.int64)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (
            isinstance(other, ChoiceLaw) and (self.outcomes, self.weights) == (other.outcomes, other.weights)
        )

    def __repr__(self) -> str:
        return f"ChoiceLaw({len(self.outcomes)} outcomes)"

    def answers(self, order, c) -> set:
        """The answers the outcomes give to ``outcome order c`` (a constant c)."""
        try:
            got = order(self._array, c)
        except TypeError:
            return {True, False}
        got = np.asarray(got)
        if got.dtype != bool or got.shape != self._array.shape:
            return {True, False}
        return set(np.unique(got).tolist())


class Summed(NamedTuple):
    """A deferred draw nothing read, inside a pattern: ``slot`` numbers the draws of one outcome
    by first appearance, ``law`` is the draw's law."""

    slot: int
    law: ChoiceLaw


_COMPARISONS = {
    "__eq__": operator.eq,
    "__ne__": operator.ne,
    "__lt__": operator.lt,
    "__le__": operator.le,
    "__gt__": operator.gt,
    "__ge__": operator.ge,
}


class DeferredToken:
    """A categorical draw not decided yet (module docstring): ``decided()`` decides it through
    ``rng.decide(law.weights)`` (once; its value is kept) and gives the ``np.int64`` outcome."""

    __slots__ = ("rng", "run", "law", "value")
    deferred = True  # what a rule module asks, without importing the enumerator (samplers.chain.sample)

    def __init__(self, rng, law: ChoiceLaw):
        self.rng, self.run, self.law = rng, rng.run_id, law
        self.value: np.int64 | None = None

    def decided(self):
        """The draw's outcome, deciding it on this path when it is not decided yet."""
        if self.value is None:
            if self.run != self.rng.run_id:
                self.rng.refuse("a deferred draw was kept from an earlier run and read")
            self.rng.branch_cap(len(self.law.outcomes), "rng.choice")
            self.value = np.int64(self.law.outcomes[self.rng.decide(self.law.weights)])
        return self.value

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.decided(), name)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.decided(), dtype=dtype)

    def __repr__(self) -> str:
        return repr(self.decided())


class CellToken(DeferredToken):
    """``np.searchsorted(cdf, u)`` of a symbolic uniform u, not decided yet: a draw over the cells
    the sorted thresholds cut u's interval into (``laws.threshold_cells``), each cell's outcome the
    count of thresholds below it and its weight the cell's share of the interval. Decided where
    read, as a ``DeferredToken`` (``int()`` reads it: inverse-CDF code that wraps the index in
    ``int`` is decided at once, as before), and then u's interval narrows to the cell taken; u
    itself read again first decides the cell (``Interval.check_run``). Summed over where nothing
    reads it: an inverse-CDF token that is only emitted costs one path, not one per cell."""

    __slots__ = ("interval", "bounds")

    def __init__(self, rng, law: ChoiceLaw, interval, bounds: np.ndarray):
        super().__init__(rng, law)
        self.interval, self.bounds = interval, bounds

    def decided(self):
        if self.value is None:
            value = super().decided()
            cell = self.law.outcomes.index(int(value))
            self.interval.lo, self.interval.hi = float(self.bounds[cell]), float(self.bounds[cell + 1])
            self.interval.pending = None
        return self.value


def cell_token(interval, thresholds: np.ndarray) -> CellToken | None:
    """A ``CellToken`` for the count of ``thresholds`` (sorted, float64, in u's own scale) below
    the uniform whose interval is ``interval``, when they cut it into ``SUMMED_FROM`` cells or more
    (and no more than the rng branches over at once); None otherwise (decided at once, as before)."""
    interval.check_run()
    lo, hi, rng = interval.lo, interval.hi, interval.rng
    inside = np.unique(thresholds[(thresholds > lo) & (thresholds < hi)])
    if not SUMMED_FROM - 1 <= len(inside) < rng.max_branching:
        return None
    bounds = np.concatenate(([lo], inside, [hi]))
    widths = np.diff(bounds)
    counts = np.searchsorted(thresholds, bounds[:-1], side="right")  # thresholds at or below the cell
    token = CellToken(rng, ChoiceLaw(counts, (widths / widths.sum()).tolist()), interval, bounds)
    interval.pending = token
    return token


def _compare(name, order):
    def method(self, other):
        if self.value is None and not isinstance(other, (DeferredToken, np.ndarray)):
            said = self.law.answers(order, other)
            if len(said) == 1:  # every outcome answers alike: nothing is read
                return np.bool_(said.pop())
        return getattr(self.decided(), name)(other.decided() if isinstance(other, DeferredToken) else other)

    method.__name__ = name
    return method


def _reading(name):
    def method(self, *args):
        args = tuple(a.decided() if isinstance(a, DeferredToken) else a for a in args)
        return getattr(self.decided(), name)(*args)

    method.__name__ = name
    return method


for _name, _order in _COMPARISONS.items():
    setattr(DeferredToken, _name, _compare(_name, _order))
for _name in (
    "__int__ __index__ __float__ __bool__ __hash__ __str__ __format__ __neg__ __pos__ __abs__ __invert__ "
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ "
    "__rfloordiv__ __mod__ __rmod__ __divmod__ __rdivmod__ __pow__ __rpow__ __and__ __rand__ __or__ "
    "__ror__ __xor__ __rxor__ __lshift__ __rlshift__ __rshift__ __rrshift__ __round__ __trunc__ "
    "__floor__ __ceil__ __complex__"
).split():
    setattr(DeferredToken, _name, _reading(_name))


def pattern(outcome):
    """``outcome`` with every undecided ``DeferredToken`` a ``Summed`` marker (decided ones their
    value), inside tuples and lists (lists become tuples only where they hold one); the outcome
    itself when it holds none."""
    slots: dict[int, int] = {}

    def walk(x):
        if isinstance(x, DeferredToken):
            if x.value is not None:
                return x.value
            slot = slots.setdefault(id(x), len(slots))
            return Summed(slot, x.law)
        if type(x) is tuple or type(x) is list:
            items = [walk(v) for v in x]
            if any(a is not b for a, b in zip(items, x)):
                return tuple(items)
        return x

    return walk(outcome)


def markers(outcome) -> dict[int, ChoiceLaw]:
    """The draws summed over in a pattern: slot -> law (empty for a plain outcome)."""
    found: dict[int, ChoiceLaw] = {}

    def walk(x):
        if isinstance(x, Summed):
            found[x.slot] = x.law
        elif type(x) is tuple:
            for v in x:
                walk(v)

    walk(outcome)
    return found


def substituted(outcome, values: dict):
    """A pattern with slot s replaced by ``values[s]``."""
    if isinstance(outcome, Summed):
        return values[outcome.slot]
    if type(outcome) is tuple:
        return tuple(substituted(v, values) for v in outcome)
    return outcome


def expansions(outcome):
    """(outcome, weight) for each way the pattern's summed draws can come out."""
    found = markers(outcome)
    if not found:
        yield outcome, 1.0
        return
    slots = sorted(found)
    for picks in itertools.product(*(range(len(found[s].outcomes)) for s in slots)):
        weight, values = 1.0, {}
        for s, i in zip(slots, picks):
            weight *= found[s].weights[i]
            values[s] = found[s].outcomes[i]
        if weight > 0:
            yield substituted(outcome, values), weight


_HOLE = object()
"""Where a pattern's one summed draw stood, in ``expanded``'s templates (the patterns grouped)."""


def expanded(law: dict) -> dict:
    """A law over patterns as the law over outcomes (module docstring); a plain law as it is.
    Patterns with one summed draw are grouped by the rest of the pattern (a template) and their
    draws' weights summed per outcome in NumPy: V patterns of a V-way draw each (a residual that
    differs per draft) cost V^2 array entries, not V^2 Python tuples."""
    if not any(isinstance(key, (Summed, tuple)) and markers(key) for key in law):
        return law
    out: dict = defaultdict(float)
    single: dict = {}  # template -> (one pattern of it, its draw's slot, [(draw, path weight)])
    for key, w in law.items():
        found = markers(key)
        if len(found) == 1:
            ((slot, draw),) = found.items()
            single.setdefault(substituted(key, {slot: _HOLE}), (key, slot, []))[2].append((draw, w))
            continue
        for outcome, v in expansions(key):
            out[outcome] += w * v
    for key, slot, draws in single.values():
        ids = np.concatenate([draw._array for draw, _ in draws])
        mass = np.concatenate([np.asarray(draw.weights) * w for draw, w in draws])
        values, where = np.unique(ids, return_inverse=True)
        for y, m in zip(values.tolist(), np.bincount(where, weights=mass).tolist()):
            out[substituted(key, {slot: y})] += m
    return {x: w for x, w in out.items() if w > 0}


def as_token(x):
    """``int(x)``, except for a ``DeferredToken``, given back undecided (the enumerator's own
    readers of a round's tokens)."""
    return x if isinstance(x, DeferredToken) else int(x)


def decided_within(value):
    """``value`` with every ``DeferredToken`` inside its lists and tuples decided (``np.int64``),
    or ``value`` itself when it holds none: what a library that reads its argument's items by
    their type sees (``torch.tensor([token])`` infers no dtype from an object it does not know)."""
    if isinstance(value, DeferredToken):
        return value.decided()
    if type(value) is tuple or type(value) is list:
        items = [decided_within(v) for v in value]
        if any(a is not b for a, b in zip(items, value)):
            return type(value)(items)
    return value


def wide_paths_foreseen(weights: list, chosen: list, n: int, paths) -> str | None:
    """Why a new decision over ``n`` branches cannot finish within the paths ``max_paths`` leaves
    (``paths``: its ``cap`` and the paths ``used``), or None.

    ``weights`` / ``chosen``: the path's decisions so far (their branch weights, the branch
    taken). Only wide decisions (``SUMMED_FROM`` branches or more: a draw over a vocabulary that
    the sampler reads, so that it is decided rather than summed over) count: each untaken sibling
    of an open wide decision is foreseen to hold as many paths as the wide decisions after it on
    this path multiply to (the product of branch counts along a path, Knuth's estimate of a
    backtrack tree's size, Math. Comp. 29 (1975) 121-136). Two draws over V ids read on one path
    thus foresee about V^2 paths: an inverse-CDF draft and residual (``int(searchsorted(cdf,
    u))``) over an engine vocabulary, refused before its paths are spent. A sampler whose later
    wide draw happens on one branch only is foreseen more paths than it has; none does so among
    the rules the battery judges (a refusal sends the case to statistics, never to a finding)."""
    if n < SUMMED_FROM:
        return None
    left, cap = paths.cap - paths.used, paths.cap
    wide = [(i, len(w)) for i, w in enumerate(weights) if len(w) >= SUMMED_FROM]
    foreseen, after = n - 1, n  # the new decision's other branches, then each open one's siblings
    for i, width in reversed(wide):
        foreseen += (width - 1 - chosen[i]) * after
        after *= width
        if foreseen > left:
            return (
                f"two draws over {wide[0][1]:,} and {n:,} ids are read on one path: about "
                f"{wide[0][1]:,} x {n:,} paths, more than max_paths={cap:,} (foreseen before "
                "spending them); fall back to statistics or raise max_paths"
            )
    return None


__all__ = [
    "CellToken",
    "cell_token",
    "wide_paths_foreseen",
    "SUMMED_FROM",
    "ChoiceLaw",
    "DeferredToken",
    "Summed",
    "as_token",
    "decided_within",
    "expanded",
    "expansions",
    "markers",
    "pattern",
    "substituted",
]
