"""The random elements of one followed torch run: their expressions, and the decisions they take.

``laws.torch_random`` follows torch's random functions element by element; this is what an element
is, apart from any tensor. An element is an expression id: either f(u) for a uniform u of its own,
known to lie in an interval [lo, hi) on this path, and f a chain of steps (affine maps by
constants, ``log``, ``recip`` and ``expo``: E = -log(1 - u)), or a deferred categorical choice (one
of some outcomes with their probabilities). Comparing f(u) with a constant maps the threshold back
through the chain and branches as ``laws.symbolic_uniform.SymbolicUniform`` does, narrowing u's
interval. ``argmax`` / ``argmin`` of a row of fresh exponentials is one categorical decision: the
race w_i / E_i (i with probability w_i / sum(w); a zero row gives 0, as torch does) and Gumbel-max
l_i - log E_i or l_i - log(-log U_i) (softmax(l); Gumbel 1954, Maddison et al., arXiv 1411.0154).
vLLM's recovered tokens are the race (vllm-project/vllm,
``vllm/model_executor/layers/rejection_sampler.py``).

Categorical results (a race's argmax, ``multinomial`` with one sample or with replacement) are
deferred choices: decided (``choice_value``) where first used otherwise than moved, selected,
written, multiplied by 0 or 1, added to 0 or compared with an answer all outcomes give alike
(``keeps_choice``, ``answers``), and never decided when nothing reads them: deferring an
independent draw leaves the law of what is read unchanged, and spares a branch per unread draw
(engines draw every recovered and bonus token whether or not they emit it). ``handed_out`` gives
a choice out undecided as a ``DeferredChoice`` (for ``torch_random.read_deferred``).

Contract: ``RandomElements(rng)`` takes every decision through ``rng.decide`` or ``rng.choice`` and
refuses through ``rng.refuse`` (``NotEnumerable``, remembered for the run) whatever it cannot
follow: a step that may see a negative value, a value compared after a race conditioned it, an
argmax that is not a fresh race, a choice handed out undecided and then used again. It knows no
tensor: ``torch_random.Interception`` maps tensors' elements to these ids.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import NamedTuple

import numpy as np

from .summed_draws import ChoiceLaw
from .threshold_cells import cell_below

ORDERS = {
    name: getattr(operator, op)
    for op, names in (
        ("lt", "lt less __lt__"), ("le", "le less_equal __le__"), ("gt", "gt greater __gt__"),
        ("ge", "ge greater_equal __ge__"), ("eq", "eq __eq__"), ("ne", "ne not_equal __ne__"),
    )
    for name in names.split()
}  # fmt: skip
"""Comparisons of a deferred choice (an integer) with a constant: name -> the operator."""


def apply_step(step, x: float) -> float:
    """One step of a chain at one point (the image of an interval is that of its ends)."""
    if step[0] == "aff":
        return step[1] * x + step[2]
    if step == "log":
        return math.log(x) if x > 0.0 else -math.inf
    return (-math.log1p(-x) if x < 1.0 else math.inf) if step == "expo" else (1.0 / x if x else math.inf)


def merged(steps: tuple) -> tuple:
    """Consecutive affine steps composed, identities dropped."""
    out: list = []
    for s in steps:
        if s[0] == "aff" and out and out[-1][0] == "aff":
            _, a0, b0 = out.pop()
            s = ("aff", s[1] * a0, s[1] * b0 + s[2])
        if s != ("aff", 1.0, 0.0):
            out.append(s)
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def race_form(steps: tuple):
    """A row element's chain as a race entry: ("A", a, b) for a * E + b, ("B", a, b) for a / E + b,
    ("C", a, b) for a * log E + b, with E ~ Exp(1); None for anything else."""
    if steps[:1] == ("expo",):
        rest = merged(steps[1:])
    elif steps[:1] == ("log",):  # log u = -E with E = -log u
        rest = merged((("aff", -1.0, 0.0),) + steps[1:])
    else:
        return None
    if len(rest) >= 2 and rest[0][0] == "aff" and rest[0][1] > 0 and rest[0][2] == 0.0 and rest[1] in ("recip", "log"):
        c = rest[0][1]  # 1 / (cE) = (1 / c) / E; log(cE) = log E + log c
        moved = ("aff", 1.0 / c, 0.0) if rest[1] == "recip" else ("aff", 1.0, math.log(c))
        rest = merged((rest[1], moved) + rest[2:])
    kind = {(): "A", ("recip",): "B", ("log",): "C"}.get(tuple(s for s in rest if s[0] != "aff"))
    if kind is None or len(rest) > (1 if kind == "A" else 2) or (kind != "A" and rest[0][0] == "aff"):
        return None
    return (kind,) + (rest[-1][1:] if rest and rest[-1][0] == "aff" else (1.0, 0.0))


def keeps_choice(op: str, c: float, left: bool) -> bool:
    """Whether ``x op c`` (``left``) or ``c op x`` leaves a deferred choice x deferred: x * 1,
    x * 0 (a constant 0), x + 0, x - 0."""
    return (op == "mul" and c in (0, 1)) or (op == "add" and c == 0) or (op == "sub" and left and c == 0)


def race_weights(forms: list, others: list) -> np.ndarray | None:
    """The categorical weights of argmax over race entries and concrete values ``others`` that can
    never win; None when the row is no race (mixed forms, unequal offsets, a concrete rival)."""
    (kinds, slopes, offsets), one_offset = zip(*forms), len({f[2] for f in forms}) == 1
    if set(kinds) == {"A"} and all(a < 0 for a in slopes) and one_offset and not others:
        return -1.0 / np.array(slopes)
    if set(kinds) == {"B"} and all(a > 0 for a in slopes) and one_offset and all(v <= offsets[0] for v in others):
        return np.array(slopes)
    if set(kinds) == {"C"} and slopes[0] < 0 and len(set(slopes)) == 1 and all(v == -math.inf for v in others):
        z = np.array(offsets) / -slopes[0]
        return np.exp(z - z.max())
    return None


class DeferredChoice(NamedTuple):
    """A categorical draw the layer deferred (module docstring), handed out undecided by
    ``read_deferred``: one of ``outcomes`` with probabilities ``weights``; ``draw`` identifies it in
    its run (two elements with the same ``draw`` are one draw, decided once)."""

    draw: int
    outcomes: tuple
    weights: tuple


class RandomElements:
    """The expressions of one run's random elements (module docstring), each an id: ``new_uniforms``
    makes fresh ones, ``choice`` a deferred choice, the other methods derive or decide them."""

    def __init__(self, rng):
        self.rng = rng
        self.lo: list[float] = []  # per uniform: the interval [lo, hi) this path left it
        self.hi: list[float] = []
        self.spent: set[int] = set()  # uniforms an argmax race has conditioned
        self.exprs: list[tuple] = []  # id -> (uniform, chain of steps), or (None, (outcomes, weights)): a choice
        self.values: dict[int, int] = {}  # deferred choices decided so far: id -> the outcome
        self.handed: set[int] = set()  # deferred choices handed out undecided (read_deferred)

    def new_uniforms(self, n: int, steps: tuple) -> range:
        """The ids of n fresh elements f(u_i), each on a uniform of its own, f the chain ``steps``."""
        first_var, first_expr = len(self.lo), len(self.exprs)
        self.lo += [0.0] * n
        self.hi += [1.0] * n
        self.exprs += [(first_var + i, steps) for i in range(n)]
        return range(first_expr, first_expr + n)

    def choice(self, outcomes: list, weights: np.ndarray) -> int:
        """A deferred categorical decision (an outcome of ``outcomes`` with probabilities
        ``weights``, summing to 1): an expression id, decided where it is first used otherwise
        than moved, selected or compared with an answer every outcome gives alike, and never
        decided when nothing reads it. Deferring an independent draw to its first use, or
        dropping one nothing uses, leaves the law of what is read unchanged; it spares a branch
        per unread draw (engines draw every recovered and bonus token whether or not they emit it)."""
        self.exprs.append((None, (outcomes, weights)))
        return len(self.exprs) - 1

    def is_choice(self, e: int) -> bool:
        return self.exprs[e][0] is None

    def choice_value(self, e: int) -> int:
        if e in self.handed:
            self.rng.refuse("a deferred choice handed out undecided (read_deferred) was used again by torch")
        if e not in self.values:
            outcomes, weights = self.exprs[e][1]
            self.values[e] = int(outcomes[int(self.rng.choice(len(outcomes), p=weights))])
        return self.values[e]

    def handed_out(self, value, e: int):
        """Element ``value`` with expression id e (-1: concrete) as ``read_deferred`` gives it."""
        if e < 0:
            return value
        if not self.is_choice(e):
            self.rng.refuse("read_deferred of a random value that is not a deferred choice")
        if e in self.values:
            return self.values[e]
        self.handed.add(e)
        outcomes, weights = self.exprs[e][1]
        return DeferredChoice(e, tuple(int(o) for o in outcomes), tuple(np.asarray(weights, np.float64).tolist()))

    def affine(self, e: int, a: float, b: float):
        """Expression a * x + b for expression x = e, or the constant it is (a = 0, b infinite, NaN)."""
        var, steps = self.exprs[e]
        steps = merged(steps + (("aff", a, b),))
        a, b = steps[-1][1:] if steps and steps[-1][0] == "aff" else (1.0, 0.0)
        if math.isnan(a) or math.isnan(b):
            return math.nan
        if math.isinf(a):
            self.rng.refuse("a random value scaled by an infinite number is not modelled")
        if a == 0.0 or math.isinf(b):
            return float(b)
        self.exprs.append((var, steps))
        return len(self.exprs) - 1

    def monotone(self, e: int, step: str) -> int:
        """log(x) or 1 / x of expression x = e, whose values must be >= 0 (= 0 with probability 0)."""
        var, steps = self.exprs[e]
        lo, hi = self.lo[var], self.hi[var]
        for s in steps:
            lo, hi = sorted((apply_step(s, lo), apply_step(s, hi)))
        if lo < 0.0:
            self.rng.refuse(f"{'log' if step == 'log' else 'reciprocal'} of a random value that may be negative")
        self.exprs.append((var, steps + (step,)))
        return len(self.exprs) - 1

    def step(self, e: int, op: str, c: float, left: bool):
        """x op c (``left``) or c op x for expression x = e and constant c: an id or a constant."""
        if op in ("add", "mul", "neg", "sub"):
            return self.affine(
                e, *{"add": (1, c), "mul": (c, 0), "neg": (-1, 0), "sub": (1, -c) if left else (-1, c)}[op]
            )
        if op == "div" and left:
            if c == 0.0:
                self.rng.refuse("a random value divided by zero is not modelled")
            return self.affine(e, 1.0 / c, 0.0)
        return self.affine(self.monotone(e, "recip"), c, 0.0) if op == "div" else self.monotone(e, op)

    def uniform_threshold(self, e: int, t: float, below: bool) -> tuple[int, float, bool]:
        """x < t (``below``) or x > t for expression x = e as a question about its uniform u:
        (u's index, t', whether u < t' is asked, else u > t')."""
        var, steps = self.exprs[e]
        if var in self.spent:
            self.rng.refuse("a random value compared after an argmax race conditioned it")
        for s in reversed(steps):
            if s[0] == "aff":
                t, below = (t - s[2]) / s[1], below != (s[1] < 0)
            elif s == "log":
                t = math.exp(t) if t < 700.0 else math.inf
            elif s == "recip":
                t, below = (1.0 / t if t > 0.0 else math.inf), not below
            else:  # expo
                t = -math.expm1(-t) if t > 0.0 else 0.0
        return var, t, below

    def below_all(self, e: int, thresholds: list, below: list) -> list[bool]:
        """``below`` for one expression e and many thresholds (a uniform compared with a row of
        cumulative sums): the cell of u's interval among them decided once
        (``laws.threshold_cells``); a single threshold branches as ``below`` does."""
        asked = [self.uniform_threshold(e, t, b) for t, b in zip(thresholds, below) if not math.isnan(t)]
        var = self.exprs[e][0]
        ts = np.array([t for _, t, _ in asked])
        lo, hi = self.lo[var], self.hi[var]
        if int(((ts > lo) & (ts < hi)).sum()) <= 1:
            return [self.below(e, t, b) for t, b in zip(thresholds, below)]
        self.lo[var], self.hi[var], under = cell_below(self.rng, lo, hi, ts)
        answers = iter(bool(u == b) for u, (_, _, b) in zip(under.tolist(), asked))
        return [False if math.isnan(t) else next(answers) for t in thresholds]

    def answer_all(self, asked: list) -> dict:
        """{j: x_e < c (``below``) or x_e > c} for each (j, e, c, below) of ``asked``, in order of
        first appearance of each expression e; one expression against many thresholds (a
        uniform against a row of cumulative sums) decides its cell once (``below_all``)."""
        groups: dict[int, list] = {}
        for j, e, c, below in asked:
            groups.setdefault(e, []).append((j, c, below))
        out: dict = {}
        for e, group in groups.items():
            got = self.below_all(e, [c for _, c, _ in group], [b for _, _, b in group])
            out.update((j, answer) for (j, _, _), answer in zip(group, got))
        return out

    def counts_below(self, ids: list, rows: list, what: str) -> dict[int, int]:
        """What ``searchsorted`` returns for each random value of ``ids`` (row r of values against
        the sorted thresholds ``rows[r]``; -1: a concrete value): {flat index: how many thresholds
        lie below it}, each value's cell decided once (either side: ties have probability 0)."""
        out: dict[int, int] = {}
        for r, (row_ids, bounds) in enumerate(zip(ids, rows)):
            if any(math.isnan(b) for b in bounds) or any(b > c for b, c in zip(bounds, bounds[1:])):
                self.rng.refuse(f"{what} over thresholds not sorted ascending (or holding NaN) is not modelled")
            for j, e in enumerate(row_ids):
                if e >= 0:
                    out[r * len(row_ids) + j] = len(bounds) - sum(self.below_all(e, bounds, [True] * len(bounds)))
        return out

    def below(self, e: int, t: float, below: bool) -> bool:
        """Decide x < t (``below``) or x > t for expression x = e, branching when it is uncertain."""
        if math.isnan(t):
            return False
        var, t, below = self.uniform_threshold(e, t, below)
        lo, hi = self.lo[var], self.hi[var]
        if t <= lo or t >= hi:
            return (t >= hi) == below
        w = (t - lo) / (hi - lo)
        if w >= 1.0 or self.rng.decide((w, 1.0 - w)) == 0:
            self.hi[var] = min(t, hi)
            return below
        self.lo[var] = t
        return not below

    def race(self, ids: list, values: list, flip: bool) -> tuple[int, int]:
        """argmax (argmin with ``flip``) of one row holding random elements (``ids``: each
        element's expression id, -1 for a concrete one of value ``values[j]``): (a placeholder,
        the id of its deferred categorical decision); refused unless the row is a race."""
        entries = [(j, e) for j, e in enumerate(ids) if e >= 0]
        uniforms = [self.exprs[e][0] for _, e in entries]
        forms = [race_form(self.exprs[e][1] + ((("aff", -1.0, 0.0),) if flip else ())) for _, e in entries]
        fresh = all(v not in self.spent and (self.lo[v], self.hi[v]) == (0.0, 1.0) for v in uniforms)
        race = fresh and None not in forms and len(set(uniforms)) == len(uniforms)
        weights = race_weights(forms, [v for j, v in enumerate(values) if ids[j] < 0]) if race else None
        if weights is None:
            self.rng.refuse("argmax of random values that are not a fresh exponential race or Gumbel-max")
        assert weights is not None, "refuse raised for a row that is not a race"
        self.spent.update(uniforms)
        return entries[0][0], self.choice([j for j, _ in entries], weights / weights.sum())

    def answers(self, name: str, e: int, c: float, left: bool) -> set:
        """The answers the outcomes of deferred choice e give to ``e name c`` (``c name e``)."""
        order = ORDERS[name]
        return {bool(order(o, c) if left else order(c, o)) for o in self.exprs[e][1][0]}


def decide_deferred(values, rng) -> list:
    """``values`` with each ``DeferredChoice`` replaced by its outcome, decided by
    ``rng.choice(len(outcomes), p=weights)`` in the order of first appearance, once per draw: the
    call, order and weights the layer itself uses where a deferred choice is first read
    (``tolist`` of the tensor), so the decisions, and the law, are the same. A draw the
    enumerator's ``choice`` defers (``laws.summed_draws``: many outcomes) stays deferred, over
    the choice's own outcomes: summed over where nothing but the output reads it, not branched
    on. Values without a ``DeferredChoice`` need no ``rng`` (None is fine)."""
    decided: dict[int, object] = {}
    out = []
    for v in values:
        if isinstance(v, DeferredChoice):
            if v.draw not in decided:
                pick = rng.choice(len(v.outcomes), p=np.array(v.weights, dtype=np.float64))
                if getattr(pick, "deferred", False):
                    law = ChoiceLaw([v.outcomes[i] for i in pick.law.outcomes], pick.law.weights)
                    decided[v.draw] = rng.defer(law)
                else:
                    decided[v.draw] = v.outcomes[int(pick)]
            v = decided[v.draw]
        out.append(v)
    return out


__all__ = ["ORDERS", "DeferredChoice", "RandomElements", "decide_deferred", "keeps_choice", "merged"]
