"""Torch's random functions followed exactly while ``laws.exact`` enumerates a sampler.

``exact`` finds a law by re-execution (Wingate, Stuhlmueller, Goodman, AISTATS 2011). Torch samplers
(engines' code; p = target, q = draft, k = drafted tokens) draw from a ``torch.Generator``: while torch
is imported, ``exact`` runs them in ``Interception``, a ``TorchFunctionMode`` routing torch's draws
through its ``EnumeratingRng``. ``rand``, ``rand_like``, ``uniform_`` and ``exponential_`` give
elements f_i(u_i): u_i a uniform of their own on an interval, f_i a chain of affine maps by
constants, ``log`` and ``reciprocal`` (after E = -log(1 - u) for an exponential). Comparisons with
constants (``< <= > >=``, ``torch.lt/le/gt/ge``) map the threshold back and branch as
``laws.symbolic_uniform.SymbolicUniform``, element by element in row-major order after broadcasting (independent
elements, as Pyro's parallel enumeration, Obermeyer et al., arXiv 1902.03210), into bool tensors.
``argmax`` / ``argmin`` of a row of fresh exponentials is one categorical decision: the race w_i / E_i
(i with probability w_i / sum(w); a zero row gives 0, as torch does) and Gumbel-max l_i - log E_i or
l_i - log(-log U_i) (softmax(l); Gumbel 1954, Maddison et al., arXiv 1411.0154). vLLM's recovered
tokens are the race (vllm-project/vllm, ``vllm/model_executor/layers/rejection_sampler.py``).
``multinomial`` (without replacement: in turn), ``randint(_like)`` and ``bernoulli(_)`` are ``choice``
decisions. Overlays of storages (an id per element) keep symbolic elements through views, copies and
in-place writes (``q[a:b].exponential_()``, ``probs.div_(q)``, ``x[i] = torch.rand(...)``).
Categorical results (a race's argmax, ``multinomial`` with one sample or with replacement) are
deferred choices: decided where first used otherwise than moved, selected (``where``), written,
multiplied by 0 or 1, added to 0 or compared with an answer all outcomes give alike, and never
decided when nothing reads them (an engine's bonus and recovered tokens for every position cost a
branch only where one is emitted: deferring an independent draw leaves the law of what is read
unchanged). ``read_deferred`` hands a caller (an engine's wrapper reading the engine's output)
the undecided choices of a 1-D integer tensor, and ``decide_deferred`` decides them after, with the
very decisions the layer would take where the tensor is read; what a ``laws.exact.SubrunMemo``
records then ends before the choices, so it replays them rather than re-running per outcome.

Contract: any other use of a symbolic element (``item``, ``float``, ``tolist``, ``numpy``, sort, sum,
softmax, two symbolic operands, symbolic indices, leaving the CPU, other random functions) raises
``NotEnumerable``, remembered for the run: never a wrong number. Seeds: ``rng.integers`` over more
than ``max_branching`` outcomes (``int(rng.integers(2**63))``) gives a ``TorchSeed``, whose ``int()``
is a negative number of its own, only to seed torch (``manual_seed``) or ``random.seed`` in its run.
A torch draw is followed only from a generator (``generator=`` or the default) seeded, since last
drawn from, with a seed of this run not yet used for torch; ``random.random()`` (EAGLE's coins) is a
symbolic uniform once so seeded; the rest of ``random`` refuses. A constant, missing or reused seed
refuses (not independent draws), as does a seed used as a number or seeding no draw by the run's
end (so NumPy's error at a negative seed is ``NotEnumerable``). Only ``int(seed)`` used both as a
seed and in arithmetic escapes.

It is over 600 lines because every operation on a random element (moves, writes, arithmetic,
comparisons, selections, races, deferred choices) is one method of ``Interception`` reading the
same per-run state (the uniforms' intervals, the expressions, the storages' overlays); split, each
part would read another module's underscore names.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import random as pyrandom
from typing import NamedTuple

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

NAN = float("nan")
_SEEDS = itertools.count()  # seeds and generator markers, unique in the process
_ACTIVE: list = []  # the Interceptions entered and not yet exited, innermost last


_ARITH = {
    name: (op, name in ("__rsub__", "rsub", "__rdiv__", "__rtruediv__"))
    for op, names in (
        ("add", "add __add__ __radd__ __iadd__ add_"), ("sub", "sub __sub__ subtract __isub__ sub_ __rsub__ rsub"),
        ("mul", "mul __mul__ __rmul__ __imul__ mul_ multiply"), ("neg", "neg negative __neg__ neg_"),
        ("div", "div __div__ __truediv__ true_divide divide __itruediv__ div_ true_divide_ __rdiv__ __rtruediv__"),
        ("recip", "reciprocal reciprocal_"), ("log", "log log_"),
    )
    for name in names.split()
}  # fmt: skip
"""Element-wise arithmetic with constants: name -> (operation, operands swapped)."""

_BELOW = dict.fromkeys("lt le less less_equal __lt__ __le__".split(), True)
_BELOW.update(dict.fromkeys("gt ge greater greater_equal __gt__ __ge__".split(), False))
"""Comparisons: name -> whether x < t is asked (ties have probability 0, so < and <= agree)."""

_HANDLERS = {
    name: handler
    for handler, names in (
        ("_move", "__getitem__ view view_as reshape reshape_as unsqueeze squeeze expand expand_as transpose swapaxes t "
         "permute movedim flatten unflatten contiguous clone narrow select detach index_select gather unbind split "
         "chunk flip roll repeat tile cat concat concatenate stack hstack vstack float double to type_as cpu"),
        ("_write_op", "__setitem__ copy_ fill_ zero_"), ("_arith", " ".join(_ARITH)),
        ("_compare", " ".join(_BELOW) + " eq __eq__ ne not_equal __ne__"),
        ("_argmax", "argmax argmin"), ("_where", "where"), ("_symbolic_draw", "rand rand_like uniform_ exponential_"),
        ("_concrete_draw", "multinomial randint randint_like bernoulli bernoulli_"),
    )
    for name in names.split()
}  # fmt: skip
"""What is modelled on symbolic tensors (``_move``: element moves without arithmetic), and the draws."""

_ORDER = {
    name: getattr(operator, op)
    for op, names in (
        ("lt", "lt less __lt__"), ("le", "le less_equal __le__"), ("gt", "gt greater __gt__"),
        ("ge", "ge greater_equal __ge__"), ("eq", "eq __eq__"), ("ne", "ne not_equal __ne__"),
    )
    for name in names.split()
}  # fmt: skip
"""Comparisons of a deferred choice (an integer) with a constant: name -> the operator."""

_CASTS = frozenset("float double to type_as cpu".split())
_KEEPS_CHOICES = (frozenset(n for n, h in _HANDLERS.items() if h in ("_move", "_write_op", "_arith", "_compare", "_where"))
                  | frozenset(_ORDER)) - _CASTS  # fmt: skip
"""Operations after which a deferred choice stays deferred (moves, selections, writes, x * 1, x * 0,
x + 0, comparisons every outcome answers alike); any other use decides it first."""

_METADATA = frozenset(
    "__get__ size dim numel nelement stride storage_offset is_contiguous element_size is_floating_point is_complex "
    "__len__ ndimension get_device as_subclass requires_grad_ __hash__".split()
)
_UNMODELLED = frozenset(
    "randn randn_like randperm normal normal_ random_ cauchy_ log_normal_ geometric_ poisson binomial gumbel_softmax "
    "_standard_gamma _sample_dirichlet seed".split()
)
_DROPOUTS = frozenset("dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout rrelu".split())
_UNSEEDED = "a torch draw from a generator not seeded, in this run, with a fresh seed from rng.integers"


def _param(args, kwargs, i: int, name: str, default):
    return args[i] if len(args) > i else kwargs.get(name, default)


def _tensors(args, kwargs):
    for a in itertools.chain(args, kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (b for b in a if isinstance(b, torch.Tensor))


def _apply(step, x: float) -> float:
    """One step of a chain at one point (the image of an interval is that of its ends)."""
    if step[0] == "aff":
        return step[1] * x + step[2]
    if step == "log":
        return math.log(x) if x > 0.0 else -math.inf
    return (-math.log1p(-x) if x < 1.0 else math.inf) if step == "expo" else (1.0 / x if x else math.inf)


def _merged(steps: tuple) -> tuple:
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
def _race_form(steps: tuple):
    """A row element's chain as a race entry: ("A", a, b) for a * E + b, ("B", a, b) for a / E + b,
    ("C", a, b) for a * log E + b, with E ~ Exp(1); None for anything else."""
    if steps[:1] == ("expo",):
        rest = _merged(steps[1:])
    elif steps[:1] == ("log",):  # log u = -E with E = -log u
        rest = _merged((("aff", -1.0, 0.0),) + steps[1:])
    else:
        return None
    if len(rest) >= 2 and rest[0][0] == "aff" and rest[0][1] > 0 and rest[0][2] == 0.0 and rest[1] in ("recip", "log"):
        c = rest[0][1]  # 1 / (cE) = (1 / c) / E; log(cE) = log E + log c
        moved = ("aff", 1.0 / c, 0.0) if rest[1] == "recip" else ("aff", 1.0, math.log(c))
        rest = _merged((rest[1], moved) + rest[2:])
    kind = {(): "A", ("recip",): "B", ("log",): "C"}.get(tuple(s for s in rest if s[0] != "aff"))
    if kind is None or len(rest) > (1 if kind == "A" else 2) or (kind != "A" and rest[0][0] == "aff"):
        return None
    return (kind,) + (rest[-1][1:] if rest and rest[-1][0] == "aff" else (1.0, 0.0))


def _neutral(op: str, c: float, left: bool) -> bool:
    """Whether ``x op c`` (``left``) or ``c op x`` leaves a deferred choice x deferred: x * 1,
    x * 0 (a constant 0), x + 0, x - 0."""
    return (op == "mul" and c in (0, 1)) or (op == "add" and c == 0) or (op == "sub" and left and c == 0)


def _race_weights(forms: list, others: list) -> np.ndarray | None:
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


@functools.cache
def _python_random_names() -> tuple[str, ...]:
    """The functions of Python's ``random`` module that are methods of its hidden ``Random``
    (the ones a followed run replaces), as the module first had them."""
    return tuple(
        name
        for name in getattr(pyrandom, "__all__", ())
        if isinstance(getattr(getattr(pyrandom, name), "__self__", None), pyrandom.Random)
    )


class DeferredChoice(NamedTuple):
    """A categorical draw the layer deferred (module docstring), handed out undecided by
    ``read_deferred``: one of ``outcomes`` with probabilities ``weights``; ``draw`` identifies it in
    its run (two elements with the same ``draw`` are one draw, decided once)."""

    draw: int
    outcomes: tuple
    weights: tuple


def read_deferred(t: torch.Tensor) -> list:
    """``t.tolist()`` of a 1-D integer tensor, except that, while a run is followed, each element
    that is a deferred choice not decided yet is a ``DeferredChoice`` rather than decided. The
    choice is then the caller's to decide, with ``decide_deferred``, and torch may not use it again
    in this run (NotEnumerable). Any other random element refuses. Outside a followed run: tolist."""
    return _ACTIVE[-1].read_deferred(t) if _ACTIVE else t.tolist()


def decide_deferred(values, rng) -> list:
    """``values`` with each ``DeferredChoice`` replaced by its outcome, decided by
    ``rng.choice(len(outcomes), p=weights)`` in the order of first appearance, once per draw: the
    call, order and weights the layer itself uses where a deferred choice is first read
    (``tolist`` of the tensor), so the decisions, and the law, are the same. Values without a
    ``DeferredChoice`` need no ``rng`` (None is fine)."""
    decided: dict[int, int] = {}
    out = []
    for v in values:
        if isinstance(v, DeferredChoice):
            if v.draw not in decided:
                pick = int(rng.choice(len(v.outcomes), p=np.array(v.weights, dtype=np.float64)))
                decided[v.draw] = v.outcomes[pick]
            v = decided[v.draw]
        out.append(v)
    return out


class TorchSeed:
    """A seed for torch or ``random.seed`` (module docstring): ``int()`` gives it; no arithmetic,
    comparison or index (their TypeError, the seed unused, ends the run as NotEnumerable)."""

    def __init__(self, value: int):
        self.value = value

    def __int__(self):
        return self.value


class SymbolicTensor(torch.Tensor):
    """``torch.rand``, ``rand_like`` and ``random.random()`` while followed (NaN underneath): its
    run's ``Interception`` handles every operation on it; kept past the run, it refuses."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kept = next(t for t in _tensors(args, kwargs or {}) if isinstance(t, SymbolicTensor))
        kept.layer.rng.refuse("a random torch tensor was kept from an earlier run, or used outside enumeration")


class Interception(TorchFunctionMode):
    """One run of ``exact``'s enumeration with torch's random functions following ``rng``."""

    def __init__(self, rng):
        super().__init__()
        self.rng, self.python_seeded, self.saved = rng, False, {}
        self.lo: list[float] = []  # per uniform: the interval [lo, hi) this path left it
        self.hi: list[float] = []
        self.spent: set[int] = set()  # uniforms an argmax race has conditioned
        self.exprs: list[tuple] = []  # id -> (uniform, chain of steps), or (None, (outcomes, weights)): a choice
        self.values: dict[int, int] = {}  # deferred choices decided so far: id -> the outcome
        self.overlays: dict[int, tuple] = {}  # storage address -> (ids, element size, the storage)
        self.seeds: dict[int, set] = {}  # this run's seeds (as uint64) -> the uses left: torch, python
        self.markers: dict[int, tuple] = {}  # id(generator) -> (generator, the seed we left it with)
        self.handed: set[int] = set()  # deferred choices handed out undecided (read_deferred)

    def __enter__(self):
        self.saved_state = torch.default_generator.get_state()  # our markers reseed it: restored after
        stand_ins = {"seed": self.python_seed, "random": self.python_uniform}
        for name in _python_random_names():
            self.saved[name] = getattr(pyrandom, name)
            setattr(pyrandom, name, stand_ins.get(name) or functools.partial(self.python_refusal, name))
        _ACTIVE.append(self)
        return super().__enter__()

    def python_refusal(self, name: str, *args, **kwargs):
        """Python's ``random.<name>`` other than ``seed`` and ``random`` while followed: refused."""
        self.rng.refuse(f"Python's random.{name} is not modelled by the exact enumerator")

    def __exit__(self, exc_type, exc, tb):
        super().__exit__(exc_type, exc, tb)
        _ACTIVE.remove(self)
        for name, fn in self.saved.items():
            setattr(pyrandom, name, fn)
        torch.default_generator.set_state(self.saved_state)
        if any(len(uses) == 2 for uses in self.seeds.values()):
            stopped = f" (the run stopped with {exc_type.__name__}: {exc})" if exc_type else ""
            self.rng.refuse(f"a seed from rng.integers over more than max_branching outcomes seeded no draw{stopped}")

    def seed_token(self) -> TorchSeed:
        """What ``EnumeratingRng.integers`` returns for a range it cannot branch over."""
        value = -(1 << 62) - next(_SEEDS)
        self.seeds[value % (1 << 64)] = {"torch", "python"}
        return TorchSeed(value)

    def _use_seed(self, key, use: str, refusal: str) -> None:
        if use not in self.seeds.get(key, ()):
            self.rng.refuse(refusal)
        self.seeds[key].discard(use)

    def python_seed(self, a=None, version=2):
        """``random.seed`` while followed: only a seed of this run, used once."""
        key = int(a) % (1 << 64) if isinstance(a, (int, TorchSeed)) else None
        self._use_seed(key, "python", "random.seed with a value that is not a fresh seed from rng.integers in this run")
        self.python_seeded = True

    def python_uniform(self) -> torch.Tensor:
        """``random.random()`` while followed: a 0-dim symbolic float64 tensor."""
        if not self.python_seeded:
            self.rng.refuse("random.random() before random.seed(a seed from rng.integers) in this run")
        with torch._C.DisableTorchFunction():
            return self._new_uniforms(torch.full((), NAN, dtype=torch.float64), (), subclass=True)

    def _generator(self, kwargs) -> None:
        """Check the generator a draw reads: seeded from this run's rng since this run last drew
        from it. Then reseed it with a marker of ours, so that a seed set twice shows as reused."""
        gen = kwargs.get("generator") or torch.default_generator
        if gen.device.type != "cpu":
            self.rng.refuse(f"a torch draw on {gen.device} is not modelled (CPU generators only)")
        key = gen.initial_seed()
        if self.markers.get(id(gen), (None, None))[1] != key:
            self._use_seed(key, "torch", _UNSEEDED)
        marker = -(1 << 62) - next(_SEEDS)
        self.markers[id(gen)] = (gen.manual_seed(marker), marker % (1 << 64))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs, name = kwargs or {}, getattr(func, "__name__", "")
        with torch._C.DisableTorchFunctionSubclass():
            if name in _METADATA:
                return func(*args, **kwargs)
            handler = _HANDLERS.get(name)
            training = name in _DROPOUTS and kwargs.get("training", _param(args, kwargs, 2, "train", True))
            if name in _UNMODELLED or training or (handler is None and "generator" in kwargs):
                self.rng.refuse(f"torch {name} is not modelled by the exact enumerator")
            if handler is None or not handler.endswith("_draw"):
                if not self._symbolic(_tensors(args, kwargs)):
                    return func(*args, **kwargs)
                if name not in _KEEPS_CHOICES and self._decide_choices(_tensors(args, kwargs)):
                    return self.__torch_function__(func, types, args, kwargs)
                if handler is None:
                    self.rng.refuse(f"torch {name} of a random tensor is not modelled by the exact enumerator")
            return getattr(self, handler)(func, name, args, kwargs)

    def _choice(self, outcomes: list, weights: np.ndarray) -> int:
        """A deferred categorical decision (an outcome of ``outcomes`` with probabilities
        ``weights``, summing to 1): an expression id, decided where it is first used otherwise
        than moved, selected or compared with an answer every outcome gives alike, and never
        decided when nothing reads it. Deferring an independent draw to its first use, or
        dropping one nothing uses, leaves the law of what is read unchanged; it spares a branch
        per unread draw (engines draw every recovered and bonus token whether or not they emit it)."""
        self.exprs.append((None, (outcomes, weights)))
        return len(self.exprs) - 1

    def _is_choice(self, e: int) -> bool:
        return self.exprs[e][0] is None

    def _choice_value(self, e: int) -> int:
        if e in self.handed:
            self.rng.refuse("a deferred choice handed out undecided (read_deferred) was used again by torch")
        if e not in self.values:
            outcomes, weights = self.exprs[e][1]
            self.values[e] = int(outcomes[int(self.rng.choice(len(outcomes), p=weights))])
        return self.values[e]

    def _decide_choices(self, tensors) -> bool:
        """Decide the deferred choices these tensors hold and write their outcomes in place (their
        elements become concrete); whether there were any."""
        found = False
        for t in tensors:
            ids = self._ids(t)
            flat = ids.reshape(-1).tolist() if ids is not None else []
            where = [j for j, e in enumerate(flat) if e >= 0 and self._is_choice(e)]
            if not where:
                continue
            found = True
            values = torch.tensor([self._choice_value(flat[j]) for j in where], dtype=t.dtype)
            if t.dim() == 0:
                t.fill_(values[0])
                ids.fill_(-1)
                continue
            index = tuple(torch.from_numpy(i) for i in np.unravel_index(where, t.shape))
            t[index] = values
            ids[index] = -1
        return found

    def read_deferred(self, t: torch.Tensor) -> list:
        """``read_deferred`` (the module function) while this run is the innermost one."""
        with torch._C.DisableTorchFunction():
            if t.dim() != 1 or t.is_floating_point() or t.is_complex():
                self.rng.refuse(f"read_deferred of a {t.dim()}-dimensional {t.dtype} tensor (1-D integers only)")
            values, ids = t.tolist(), self._ids(t)
            return values if ids is None else [self._handed_out(v, e) for v, e in zip(values, ids.tolist())]

    def _handed_out(self, value, e: int):
        """Element ``value`` with expression id e (-1: concrete) as ``read_deferred`` gives it."""
        if e < 0:
            return value
        if not self._is_choice(e):
            self.rng.refuse("read_deferred of a random value that is not a deferred choice")
        if e in self.values:
            return self.values[e]
        self.handed.add(e)
        outcomes, weights = self.exprs[e][1]
        return DeferredChoice(e, tuple(int(o) for o in outcomes), tuple(np.asarray(weights, np.float64).tolist()))

    def _ids(self, t: torch.Tensor, create: bool = False, concrete: bool = False) -> torch.Tensor | None:
        """The expression id of each element of t (-1: concrete), a view into its storage's overlay;
        when the storage has none: one made with ``create``, all -1 with ``concrete``, else None."""
        storage = t.untyped_storage() if t.numel() else None
        entry = self.overlays.get(storage.data_ptr()) if storage is not None else None
        if entry is None and create:
            if t.device.type != "cpu":
                self.rng.refuse(f"random values written to a tensor on {t.device} are not modelled")
            ids = torch.full((storage.nbytes() // t.element_size(),), -1)
            entry = self.overlays[storage.data_ptr()] = (ids, t.element_size(), storage)
        if entry is None:
            return torch.full(t.shape, -1) if concrete else None
        if entry[1] != t.element_size():
            self.rng.refuse("a random tensor's storage read as another dtype is not modelled")
        return entry[0].as_strided(t.shape, t.stride(), t.storage_offset())

    def _symbolic(self, tensors) -> bool:
        """Whether any of ``tensors`` holds a random element (every one is checked for a symbolic
        tensor of another run). On every torch call: a storage without an overlay is skipped
        before any view of its ids is made."""
        found, overlays = False, self.overlays
        for t in tensors:
            if isinstance(t, SymbolicTensor) and t.layer is not self:
                self.rng.refuse("a random torch tensor was kept from an earlier run and reused")
            if found or not overlays or not t.numel() or t.untyped_storage().data_ptr() not in overlays:
                continue
            found = int(self._ids(t).max()) >= 0
        return found

    def _concrete_rest(self, args, kwargs, data: tuple) -> None:
        rest = [a for i, a in enumerate(args) if i not in data] + list(kwargs.values())
        self._decide_choices(_tensors(rest, {}))
        if self._symbolic(_tensors(rest, {})):
            self.rng.refuse("a random tensor as an index, size, probability or option is not modelled")

    def _write(self, out: torch.Tensor, ids: list, constants: dict) -> None:
        """Element j of out (row-major) gets expression ids[j], and the value constants[j] where an
        operation left a constant (0 * u, u + inf)."""
        if constants:
            where = tuple(torch.from_numpy(i) for i in np.unravel_index(list(constants), out.shape))
            out[where] = torch.tensor(list(constants.values()), dtype=out.dtype)
        overlay = self._ids(out, create=max(ids, default=-1) >= 0)
        if overlay is not None:
            overlay.copy_(torch.tensor(ids, dtype=torch.int64).reshape(out.shape))

    def _new_uniforms(self, out: torch.Tensor, steps: tuple, subclass: bool = False) -> torch.Tensor:
        n, first_var, first_expr = out.numel(), len(self.lo), len(self.exprs)
        self.lo += [0.0] * n
        self.hi += [1.0] * n
        self.exprs += [(first_var + i, steps) for i in range(n)]
        out.fill_(NAN)
        self._write(out, list(range(first_expr, first_expr + n)), {})
        if subclass:
            out = out.as_subclass(SymbolicTensor)
            out.layer = self
        return out

    def _symbolic_draw(self, func, name, args, kwargs):
        self._generator(kwargs)
        out = func(*args, **kwargs)  # torch checks the arguments; the draw itself is discarded
        if out.device.type != "cpu" or not out.is_floating_point():
            self.rng.refuse(f"torch {name} on {out.device} or of dtype {out.dtype} is not modelled")
        low, high = (
            float(_param(args, kwargs, i + 1, k, i)) if name == "uniform_" else i for i, k in enumerate(("from", "to"))
        )
        lam = float(_param(args, kwargs, 1, "lambd", 1.0)) if name == "exponential_" else None
        steps = ("expo", ("aff", 1.0 / lam, 0.0)) if lam else (("aff", high - low, low),)
        return self._new_uniforms(out, _merged(steps), subclass=name in ("rand", "rand_like"))

    def _concrete_draw(self, func, name, args, kwargs):
        self._concrete_rest(args, kwargs, (0,) if name in ("randint_like", "bernoulli_") else ())
        self._generator(kwargs)
        out = func(*args, **kwargs)  # torch checks the arguments; the draw itself is replaced
        if name == "multinomial":
            n, replace = _param(args, kwargs, 1, "num_samples", 1), _param(args, kwargs, 2, "replacement", False)
            rows = args[0].tolist() if args[0].dim() == 2 else [args[0].tolist()]
            if n == 1 or replace:  # independent draws: deferred to their first use
                return self._deferred_draws(out, rows, n)
            picks = [i for row in rows for i in self._categorical(row, n, replace)]
        elif name.startswith("randint"):
            ints = [int(a) for a in args if isinstance(a, int)]
            low = int(kwargs.get("low", ints[0] if len(ints) > 1 or (ints and "high" in kwargs) else 0))
            high = int(kwargs.get("high", ints[-1] if ints else 0))
            picks = [low + int(self.rng.choice(high - low)) for _ in range(out.numel())]
        else:
            p = _param(args, kwargs, 1, "p", None if name == "bernoulli" else 0.5)
            probs = torch.as_tensor(args[0] if p is None else p, dtype=torch.float64).expand(out.shape)
            picks = [int(self.rng.choice(2, p=np.array([1.0 - w, w]))) for w in probs.reshape(-1).tolist()]
        out.copy_(torch.tensor(picks).reshape(out.shape))
        self._write(out, [-1] * out.numel(), {})  # bernoulli_ may overwrite random values
        return out

    def _deferred_draws(self, out: torch.Tensor, rows: list, n: int) -> torch.Tensor:
        """n draws with replacement per row of torch.multinomial's weights, as deferred choices."""
        ids = []
        for row in rows:
            p = np.asarray(row, dtype=np.float64)
            support = np.flatnonzero(p)
            ids += [self._choice(support.tolist(), p[support] / p.sum()) for _ in range(n)]
        out.fill_(0)
        self._write(out, ids, {})
        return out

    def _categorical(self, weights: list, n: int, replace: bool) -> list[int]:
        """n draws from one row of torch.multinomial's weights (without replacement: in turn)."""
        picks: list[int] = []
        for p in (np.asarray(weights, dtype=np.float64) for _ in range(n)):
            p[picks if not replace else []] = 0.0
            picks.append(int(self.rng.choice(len(p), p=p / p.sum())))
        return picks

    def _affine(self, e: int, a: float, b: float):
        """Expression a * x + b for expression x = e, or the constant it is (a = 0, b infinite, NaN)."""
        var, steps = self.exprs[e]
        steps = _merged(steps + (("aff", a, b),))
        a, b = steps[-1][1:] if steps and steps[-1][0] == "aff" else (1.0, 0.0)
        if math.isnan(a) or math.isnan(b):
            return NAN
        if math.isinf(a):
            self.rng.refuse("a random value scaled by an infinite number is not modelled")
        if a == 0.0 or math.isinf(b):
            return float(b)
        self.exprs.append((var, steps))
        return len(self.exprs) - 1

    def _monotone(self, e: int, step: str) -> int:
        """log(x) or 1 / x of expression x = e, whose values must be >= 0 (= 0 with probability 0)."""
        var, steps = self.exprs[e]
        lo, hi = self.lo[var], self.hi[var]
        for s in steps:
            lo, hi = sorted((_apply(s, lo), _apply(s, hi)))
        if lo < 0.0:
            self.rng.refuse(f"{'log' if step == 'log' else 'reciprocal'} of a random value that may be negative")
        self.exprs.append((var, steps + (step,)))
        return len(self.exprs) - 1

    def _step(self, e: int, op: str, c: float, left: bool):
        """x op c (``left``) or c op x for expression x = e and constant c: an id or a constant."""
        if op in ("add", "mul", "neg", "sub"):
            return self._affine(
                e, *{"add": (1, c), "mul": (c, 0), "neg": (-1, 0), "sub": (1, -c) if left else (-1, c)}[op]
            )
        if op == "div" and left:
            if c == 0.0:
                self.rng.refuse("a random value divided by zero is not modelled")
            return self._affine(e, 1.0 / c, 0.0)
        return self._affine(self._monotone(e, "recip"), c, 0.0) if op == "div" else self._monotone(e, op)

    def _below(self, e: int, t: float, below: bool) -> bool:
        """Decide x < t (``below``) or x > t for expression x = e, branching when it is uncertain."""
        if math.isnan(t):
            return False
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
        lo, hi = self.lo[var], self.hi[var]
        if t <= lo or t >= hi:
            return (t >= hi) == below
        w = (t - lo) / (hi - lo)
        if w >= 1.0 or self.rng.decide((w, 1.0 - w)) == 0:
            self.hi[var] = min(t, hi)
            return below
        self.lo[var] = t
        return not below

    def _race(self, ids: list, values: list, flip: bool) -> tuple[int, int]:
        """argmax (argmin with ``flip``) of one row: (its value, -1), or for a race (a placeholder,
        the id of its deferred categorical decision)."""
        entries = [(j, e) for j, e in enumerate(ids) if e >= 0]
        if not entries:
            return int(getattr(torch.tensor(values), "argmin" if flip else "argmax")()), -1
        uniforms = [self.exprs[e][0] for _, e in entries]
        forms = [_race_form(self.exprs[e][1] + ((("aff", -1.0, 0.0),) if flip else ())) for _, e in entries]
        fresh = all(v not in self.spent and (self.lo[v], self.hi[v]) == (0.0, 1.0) for v in uniforms)
        race = fresh and None not in forms and len(set(uniforms)) == len(uniforms)
        weights = _race_weights(forms, [v for j, v in enumerate(values) if ids[j] < 0]) if race else None
        if weights is None:
            self.rng.refuse("argmax of random values that are not a fresh exponential race or Gumbel-max")
        self.spent.update(uniforms)
        return entries[0][0], self._choice([j for j, _ in entries], weights / weights.sum())

    def _move(self, func, name, args, kwargs):
        """The same operation on the ids gives the output's ids."""
        self._concrete_rest(args, kwargs, (0,))
        out = func(*args, **kwargs)
        data = [self._ids(t, concrete=True) for t in args[0]] if isinstance(args[0], (list, tuple)) else None
        ids = func(data or self._ids(args[0], concrete=True), *args[1:], **kwargs)  # casts: exact below 2**24
        for o, i in zip(*((out, ids) if isinstance(out, (tuple, list)) else ((out,), (ids,)))):
            self._adopt(o, i, name)
        return out

    def _adopt(self, out: torch.Tensor, ids: torch.Tensor, name: str) -> None:
        """Give ``out`` the expression ids ``ids`` (a move's), unless it is a view that has them:
        random values stay float32 / float64, deferred choices integers, on the CPU."""
        live = set(ids[ids >= 0].tolist()) if ids.numel() else set()
        choices = {self._is_choice(e) for e in live}
        integer = not (out.is_floating_point() or out.is_complex() or out.dtype == torch.bool)
        kind_ok = integer if choices == {True} else out.dtype in (torch.float32, torch.float64) and True not in choices
        if live and (out.device.type != "cpu" or not kind_ok):
            self.rng.refuse(f"torch {name} of a random tensor to {out.dtype} on {out.device} is not modelled")
        if self._ids(out) is None and live:  # not a view: fresh storage
            self._ids(out, create=True).copy_(ids)

    def _where(self, func, name, args, kwargs):
        """torch.where(condition, x, y) / x.where(condition, y) with a concrete condition: a selection."""
        if kwargs or len(args) != 3:
            self.rng.refuse(f"torch {name} of a random tensor with options is not modelled")
        cond, x, y = (args[1], args[0], args[2]) if func is torch.Tensor.where else args
        self._concrete_rest([cond], {}, ())
        out = func(*args)

        def ids(v):
            return self._ids(v, concrete=True) if isinstance(v, torch.Tensor) else torch.tensor(-1)

        self._adopt(out, torch.where(cond, ids(x), ids(y)), name)
        return out

    def _write_op(self, func, name, args, kwargs):
        self._concrete_rest(args, kwargs, {"__setitem__": (0, 2), "copy_": (0, 1)}.get(name, (0,)))
        value = args[2] if name == "__setitem__" else args[1] if name == "copy_" else None
        if isinstance(value, torch.Tensor) and (args[0].is_floating_point() or args[0].dtype == torch.bool):
            self._decide_choices([value])  # a choice written into a float or bool tensor: decided
        out = func(*args, **kwargs)
        src = self._ids(value) if isinstance(value, torch.Tensor) else None
        dst = self._ids(args[0], create=src is not None)
        if dst is not None and name == "__setitem__":
            dst[args[1]] = src if src is not None else -1
        elif dst is not None:
            dst.copy_(src if src is not None else torch.tensor(-1))
        return out

    def _operands(self, name: str, x, y) -> tuple[list, int]:
        """Read x and y (before an in-place operation writes): (j, expression, the other operand's
        value, whether the expression is x) for each broadcast element j with a symbolic operand."""
        shape = tuple(np.broadcast_shapes(*(v.shape for v in (x, y) if isinstance(v, torch.Tensor))))
        n, flat = math.prod(shape), []
        listed = lambda t: (t if t.shape == shape else t.expand(shape)).reshape(-1).tolist()  # noqa: E731
        for v in (x, y):
            tensor = isinstance(v, torch.Tensor)
            ids = self._ids(v) if tensor else None
            flat += [None if ids is None else listed(ids), listed(v) if tensor else [float(v)] * n]
        xi, xv, yi, yv = flat
        items = []
        for j in range(n):
            ex, ey = (xi[j] if xi else -1), (yi[j] if yi else -1)
            if ex >= 0 and ey >= 0:
                self.rng.refuse(f"torch {name} of two random values is not modelled")
            if ex >= 0 or ey >= 0:
                items.append((j, ex, yv[j], True) if ex >= 0 else (j, ey, xv[j], False))
        return items, n

    def _arith(self, func, name, args, kwargs):
        if kwargs:
            self.rng.refuse(f"torch {name} with options {sorted(kwargs)} on a random tensor is not modelled")
        op, swapped = _ARITH[name]
        x, y = (args[1], args[0]) if swapped else (args[0], args[1] if len(args) > 1 else 0.0)
        items, n = self._operands(name, x, y)
        if any(self._is_choice(e) and not _neutral(op, c, left) for _, e, c, left in items):
            self._decide_choices(_tensors(args, {}))
            return self.__torch_function__(func, (), args, kwargs)
        out = func(*args)
        ids, constants = [-1] * n, {}
        for j, e, c, left in items:
            r = (e if op != "mul" or c == 1 else 0.0) if self._is_choice(e) else self._step(e, op, c, left)
            if isinstance(r, float):
                constants[j] = r
            else:
                ids[j] = r
        self._write(out, ids, constants)
        return out

    def _compare(self, func, name, args, kwargs):
        if kwargs or len(args) != 2:
            self.rng.refuse(f"torch {name} of a random tensor with options is not modelled")
        items, _ = self._operands(name, *args)
        answers = {j: self._answers(name, e, c, left) for j, e, c, left in items if self._is_choice(e)}
        if any(len(a) > 1 for a in answers.values()):
            self._decide_choices(_tensors(args, {}))
            return self.__torch_function__(func, (), args, kwargs)
        if name not in _BELOW and len(answers) < len(items):
            self.rng.refuse(f"torch {name} (equality) of a random value is not modelled")
        out = func(*args)
        flat = out.view(-1)
        for j, e, c, left in items:
            flat[j] = answers[j].pop() if j in answers else self._below(e, c, _BELOW[name] == left)
        return out

    def _answers(self, name: str, e: int, c: float, left: bool) -> set:
        """The answers the outcomes of deferred choice e give to ``e name c`` (``c name e``)."""
        order = _ORDER[name]
        return {bool(order(o, c) if left else order(c, o)) for o in self.exprs[e][1][0]}

    def _argmax(self, func, name, args, kwargs):
        x, dim = args[0], _param(args, kwargs, 1, "dim", None)
        self._concrete_rest(args, kwargs, (0,))
        out = func(*args, **kwargs)
        ids, values = self._ids(x, concrete=True), x.detach().double()
        ids, values = (
            v.reshape(1, -1) if dim is None else v.movedim(dim, -1).reshape(-1, x.shape[dim]) for v in (ids, values)
        )
        picks = [self._race(i, v, name == "argmin") for i, v in zip(ids.tolist(), values.tolist())]
        out.copy_(torch.tensor([v for v, _ in picks]).reshape(out.shape))
        self._write(out, [e for _, e in picks], {})
        return out
