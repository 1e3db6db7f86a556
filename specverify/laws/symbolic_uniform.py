"""Symbolic uniforms: what ``EnumeratingRng.random()`` returns while ``laws.exact`` enumerates.

A symbolic uniform u ~ U(0, 1) carries the interval [lo, hi) that earlier comparisons on this path
left it. ``u < t`` with lo < t < hi branches: True with weight (t - lo) / (hi - lo), narrowing the
interval to [lo, t), False with the rest, narrowing it to [t, hi). Re-comparing the same u is
therefore consistent (a sampler that shares one uniform across positions gets the exact,
correlated probabilities). Affine transforms a*u + b with constant a, b (and sums, differences and
comparisons of affine forms of the same u) map their comparisons back to u. Compared with an array
of numbers (``cumsum(w) > u``), or searched in sorted ones (``np.searchsorted(cdf, u)``,
``np.digitize``), u branches once over the cells those thresholds cut its interval into
(``laws.threshold_cells``): inverse-CDF code is followed exactly. Anything else (float(u),
np.log(u), comparing two different uniforms, which names the subject's line) raises
``NotEnumerable``, never a wrong number.

Contract with the rng (``laws.exact.EnumeratingRng``, the only maker of an ``Interval``): a
uniform branches only through ``rng.decide(weights)`` and refuses only through
``rng.refuse(message)`` (which raises ``NotEnumerable`` and remembers it for the run, so a sampler
that swallows it cannot go on), and belongs to the run ``rng.run_id`` had when it was made: one
kept into a later run refuses.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from . import precision
from .summed_draws import cell_token
from .threshold_cells import cell_below, two_uniforms


class Interval:
    """The interval [lo, hi) one uniform is known to lie in on the current path."""

    __slots__ = ("lo", "hi", "rng", "run", "pending")

    def __init__(self, rng):
        self.lo, self.hi, self.rng, self.run = 0.0, 1.0, rng, rng.run_id
        self.pending = None  # a searchsorted of u not decided yet (summed_draws.CellToken)

    def check_run(self) -> None:
        """Refuse a uniform of an earlier run; decide a pending searchsorted of it before u is read."""
        if self.run != self.rng.run_id:
            self.rng.refuse("a symbolic uniform was kept from an earlier run and reused")
        if self.pending is not None:
            self.pending.decided()

    def below_all(self, thresholds: np.ndarray) -> np.ndarray:
        """Decide ``u < t`` for every t of ``thresholds`` at once: the cell of the interval u lies
        in among them (``laws.threshold_cells``), one decision, the interval narrowed to it."""
        self.check_run()
        self.lo, self.hi, below = cell_below(self.rng, self.lo, self.hi, thresholds)
        return below

    def less_than(self, t: float) -> bool:
        """Decide ``u < t`` on this path, branching when t splits the interval."""
        self.check_run()
        lo, hi = self.lo, self.hi
        if t <= lo:
            return False
        if t >= hi:
            return True
        w = (t - lo) / (hi - lo)
        if w >= 1.0:  # rounding: the False branch would have weight 0
            return True
        if self.rng.decide((w, 1.0 - w)) == 0:
            self.hi = t
            return True
        self.lo = t
        return False


def as_constant(x, what: str, rng) -> float:
    """x as a finite float, or NotEnumerable when it is symbolic, an array, or not a number."""
    if type(x) is float:
        return x
    if isinstance(x, SymbolicUniform):
        rng.refuse(two_uniforms(what))
    precision.note(x)  # the precision a threshold was computed in (laws.precision)
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "biuf":
        x = x.item()
    if not isinstance(x, numbers.Real):
        rng.refuse(f"{what} of a symbolic uniform and a {type(x).__name__} is not modelled")
    return float(x)


_REFUSED = (
    "__bool__", "__float__", "__int__", "__index__", "__complex__", "__round__", "__trunc__",
    "__floor__", "__ceil__", "__abs__", "__pow__", "__rpow__", "__mod__", "__rmod__",
    "__floordiv__", "__rfloordiv__", "__divmod__", "__rdivmod__", "__rtruediv__",
    # numpy's object-dtype loops call these methods on the elements of random(size=n)
    "log", "log1p", "log2", "log10", "exp", "expm1", "sqrt", "square", "reciprocal", "sin",
    "cos", "tan", "tanh", "arctan", "floor", "ceil", "rint", "sign", "conjugate",
)  # fmt: skip
"""Every use of a symbolic uniform that would need its value: each raises NotEnumerable."""


def _refusing(what: str):
    def refuse(self, *args, **kwargs):
        self._iv.rng.refuse(f"{what} of a symbolic uniform is not modelled")

    return refuse


def _refuses_unmodelled_uses(cls):
    """Class decorator: every name in ``_REFUSED`` raises NotEnumerable (see ``_refusing``)."""
    for name in _REFUSED:
        setattr(cls, name, _refusing(name.strip("_")))
    return cls


@_refuses_unmodelled_uses
class SymbolicUniform:
    """a * u + b for one u ~ U(0, 1); ``random()`` returns a = 1, b = 0.

    Comparisons with a number branch (see the module docstring); affine arithmetic with numbers
    gives an ``AffineUniform``; every other use raises ``NotEnumerable``.
    """

    __slots__ = ("_iv", "_a", "_b")
    __array_priority__ = 1000

    if TYPE_CHECKING:  # set by _refuses_unmodelled_uses, as every name of _REFUSED: NotEnumerable

        def __float__(self) -> NoReturn: ...

        def __int__(self) -> NoReturn: ...

    def __init__(self, interval: Interval, a: float = 1.0, b: float = 0.0):
        self._iv, self._a, self._b = interval, a, b

    def __repr__(self):
        iv = self._iv
        return f"{type(self).__name__}({self._a:g} * u + {self._b:g}, u in [{iv.lo:g}, {iv.hi:g}))"

    def __format__(self, spec):
        if spec:
            self._iv.rng.refuse("formatting a symbolic uniform as a number is not modelled")
        return repr(self)

    # -- comparisons ---------------------------------------------------------------------------
    def _compare(self, op: str, t):
        if isinstance(t, np.ndarray) and t.ndim > 0:
            return self.compare_array(op, t)
        if self._same_uniform(t):  # a1*u + b1 op a2*u + b2: (a1 - a2)*u + (b1 - b2) op 0
            return _ORDERS[op](self - t, 0.0)
        t = as_constant(t, f"comparison {op!r}", self._iv.rng)
        if math.isnan(t):
            return False  # every comparison with NaN is False, as for a real float
        a, b = self._a, self._b
        below = self._iv.less_than((t - b) / a)  # u < (t - b) / a, i.e. a*u + b < t when a > 0
        if a < 0:
            below = not below  # ties have probability 0
        return below if op in ("<", "<=") else not below

    def compare_array(self, op: str, c) -> np.ndarray:
        """``self op c`` element-wise for an array of constants c: a bool array, the cell of u's
        interval among c's thresholds decided once (``laws.threshold_cells``)."""
        c = constant_array(c, f"comparison {op!r}", self._iv.rng)
        a, b = self._a, self._b
        below = self._iv.below_all((c - b) / a)  # u < (c - b) / a, i.e. a*u + b < c when a > 0
        if a < 0:
            below = ~below  # ties have probability 0
        out = below if op in ("<", "<=") else ~below
        out[np.isnan(c)] = False  # every comparison with NaN is False, as for a real float
        return out

    def searched(self, c):
        """``np.searchsorted(c, u)``: an undecided ``summed_draws.CellToken`` where c cuts u's
        interval into ``SUMMED_FROM`` cells or more (u increasing in its uniform), else the count
        of c below u (``count_below``)."""
        if self._a > 0:
            t = self.sorted_constants(c, "numpy.searchsorted")
            if (token := cell_token(self._iv, (t - self._b) / self._a)) is not None:
                return token
        return np.intp(self.count_below(c, "numpy.searchsorted"))

    def sorted_constants(self, c, what: str) -> np.ndarray:
        """c as float64 constants, refused unless one-dimensional, sorted ascending, without NaN."""
        c = constant_array(c, what, self._iv.rng)
        if c.ndim != 1:
            self._iv.rng.refuse(f"{what} over a {c.ndim}-dimensional array is not modelled")
        if np.isnan(c).any() or (np.diff(c) < 0).any():
            self._iv.rng.refuse(f"{what} over an array that is not sorted ascending (or holds NaN) is not modelled")
        return c

    def count_below(self, c, what: str) -> int:
        """How many entries of the sorted constants c lie below this value: what ``searchsorted``
        (either side: ties have probability 0) returns for it."""
        return int((~self.compare_array("<", self.sorted_constants(c, what))).sum())

    def __lt__(self, t):
        return self._compare("<", t)

    def __le__(self, t):
        return self._compare("<=", t)

    def __gt__(self, t):
        return self._compare(">", t)

    def __ge__(self, t):
        return self._compare(">=", t)

    def __eq__(self, other):
        if other is self:
            return True
        if isinstance(other, (SymbolicUniform, numbers.Number, np.ndarray, np.generic)):
            self._iv.rng.refuse("equality with a symbolic uniform is not modelled")
        return NotImplemented

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = object.__hash__

    # -- affine arithmetic ---------------------------------------------------------------------
    def _affine(self, a: float, b: float):
        if a == 0.0:
            return b
        if not (math.isfinite(a) and math.isfinite(b)):
            self._iv.rng.refuse("a symbolic uniform scaled or shifted by a non-finite number")
        return AffineUniform(self._iv, a, b)

    def _same_uniform(self, other) -> bool:
        """Whether ``other`` is an affine form of this very uniform (its sum, difference and
        comparisons with this one are affine in u again)."""
        return isinstance(other, SymbolicUniform) and other._iv is self._iv

    def __add__(self, c):
        if self._same_uniform(c):
            return self._affine(self._a + c._a, self._b + c._b)
        return self._affine(self._a, self._b + as_constant(c, "addition", self._iv.rng))

    __radd__ = __add__

    def __sub__(self, c):
        if self._same_uniform(c):
            return self._affine(self._a - c._a, self._b - c._b)
        return self._affine(self._a, self._b - as_constant(c, "subtraction", self._iv.rng))

    def __rsub__(self, c):
        return self._affine(-self._a, as_constant(c, "subtraction", self._iv.rng) - self._b)

    def __mul__(self, c):
        c = as_constant(c, "multiplication", self._iv.rng)
        return self._affine(self._a * c, self._b * c)

    __rmul__ = __mul__

    def __truediv__(self, c):
        c = as_constant(c, "division", self._iv.rng)
        if c == 0.0:
            self._iv.rng.refuse("division of a symbolic uniform by zero")
        return self._affine(self._a / c, self._b / c)

    def __neg__(self):
        return self._affine(-self._a, -self._b)

    def __pos__(self):
        return self

    # -- NumPy: comparisons and affine arithmetic with scalars defer here; all else refuses ----
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """``np.float64(t) > u`` arrives here as ``np.greater``; a method rather than
        ``__array_ufunc__ = None`` so that ``np.log(u)`` raises NotEnumerable, not TypeError."""
        op = _UFUNC_OPERATORS.get(ufunc.__name__)
        if method != "__call__" or kwargs or op is None:
            self._iv.rng.refuse(f"numpy.{ufunc.__name__} of a symbolic uniform is not modelled")
        if any(isinstance(x, np.ndarray) and x.ndim > 0 for x in inputs):
            ops = _ARRAY_COMPARISONS.get(ufunc.__name__)
            if ops is None or len(inputs) != 2:
                self._iv.rng.refuse(f"numpy.{ufunc.__name__} of a symbolic uniform and an array is not modelled")
            assert ops is not None, "refuse raised for an operation that is not a comparison"
            first = inputs[0] is self  # u op c, else c op u: the same as u (op mirrored) c
            return self.compare_array(ops[0] if first else ops[1], inputs[1] if first else inputs[0])
        assert op is not None, "refuse raised for a ufunc that is not modelled"
        return op(*(x.item() if isinstance(x, (np.ndarray, np.generic)) else x for x in inputs))

    def __array_function__(self, func, types, args, kwargs):
        """``np.searchsorted(c, u)`` and ``np.digitize(u, c)`` over sorted constants c: the count of
        c below u, its cell decided once; any other NumPy function runs as NumPy runs it on an
        object (its comparisons and arithmetic then come back here, or refuse)."""
        name = func.__name__
        if name == "searchsorted" and len(args) >= 2 and args[1] is self and not isinstance(args[0], SymbolicUniform):
            sorter = args[3] if len(args) > 3 else kwargs.get("sorter")
            c = np.asarray(args[0]) if sorter is None else np.asarray(args[0])[np.asarray(sorter)]
            return self.searched(c)
        if name == "digitize" and args and args[0] is self:  # either ``right``: ties have probability 0
            return np.intp(self.count_below(args[1] if len(args) > 1 else kwargs.get("bins"), "numpy.digitize"))
        default = getattr(func, "_implementation", None)  # NumPy's own, as before this hook (NEP 18)
        if default is not None:
            return default(*args, **kwargs)
        return self._iv.rng.refuse(f"numpy.{name} of a symbolic uniform is not modelled")  # raises


def constant_array(c, what: str, rng) -> np.ndarray:
    """c as a float64 array of constants (noting the precision it was computed in), or
    NotEnumerable when it holds a symbolic uniform or is not numbers."""
    c = np.asarray(c)
    if c.dtype == object and any(isinstance(x, SymbolicUniform) for x in c.flat):
        rng.refuse(two_uniforms(what))
    if c.dtype.kind not in "biuf":
        rng.refuse(f"{what} of a symbolic uniform and an array of {c.dtype} is not modelled")
    precision.note(c)  # the precision the thresholds were computed in (laws.precision)
    return c.astype(np.float64)


_ORDERS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}

_ARRAY_COMPARISONS = {
    "less": ("<", ">"), "less_equal": ("<=", ">="), "greater": (">", "<"), "greater_equal": (">=", "<="),
}  # fmt: skip
"""A comparison ufunc of a symbolic uniform and an array: its operator with u first, with u second."""

_UFUNC_OPERATORS: dict[str, Callable[..., Any]] = {
    "less": operator.lt, "less_equal": operator.le, "greater": operator.gt,
    "greater_equal": operator.ge, "add": operator.add, "subtract": operator.sub,
    "multiply": operator.mul, "divide": operator.truediv, "true_divide": operator.truediv,
    "negative": operator.neg, "positive": operator.pos,
}  # fmt: skip


class AffineUniform(SymbolicUniform):
    """a * u + b with a != 0; comparisons are mapped back to u (flipped when a < 0)."""

    __slots__ = ()
