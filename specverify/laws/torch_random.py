"""Torch's random functions followed exactly while ``laws.exact`` enumerates a sampler.

``exact`` finds a law by re-execution (Wingate, Stuhlmueller, Goodman, AISTATS 2011). Torch samplers
(engines' code; p = target, q = draft, k = drafted tokens) draw from a ``torch.Generator``: while torch
is imported, ``exact`` runs them in ``Interception``, a ``TorchFunctionMode`` routing torch's draws
through its ``EnumeratingRng``. ``rand``, ``rand_like``, ``uniform_`` and ``exponential_`` give
random elements f_i(u_i) (``laws.random_elements``: a uniform of their own on an interval, a chain
of steps); comparisons with constants (``< <= > >=``, ``torch.lt/le/gt/ge``) branch after
broadcasting, each element by the cell of [0, 1) its uniform lies in among all its thresholds
(``laws.threshold_cells``: ``cumsum > u``), elements independent (Pyro's parallel enumeration,
Obermeyer et al., arXiv 1902.03210), into bool tensors; ``searchsorted`` / ``bucketize`` of them
in sorted constants are counts by the same cells; ``argmax`` / ``argmin`` of a row of fresh
exponentials is one categorical decision (the race, Gumbel-max). ``multinomial`` (without
replacement: in turn), ``randint(_like)`` and ``bernoulli(_)`` are ``choice`` decisions. Overlays
of storages (an id per element) keep symbolic elements through views, copies and in-place writes
(``q[a:b].exponential_()``, ``probs.div_(q)``, ``x[i] = torch.rand(...)``). Categorical results
(a race's argmax, ``multinomial`` with one sample or with replacement) are deferred choices,
decided where first used (``laws.random_elements``); ``read_deferred`` hands a caller (an engine's
wrapper) the undecided choices of a 1-D integer tensor, ``decide_deferred`` decides them after
with the very decisions the layer would take, so a ``laws.exact.SubrunMemo`` replays them.

Contract: any other use of a symbolic element (``item``, ``float``, ``tolist``, ``numpy``, sort, sum,
softmax, two symbolic operands, symbolic indices, leaving the CPU, other random functions) raises
``NotEnumerable``, remembered for the run: never a wrong number. A torch draw is followed only from
a generator seeded with a fresh seed of its run, ``int(rng.integers(2**63))``, and
``random.random()`` (EAGLE's coins) only once ``random.seed`` took one (``laws.torch_seeds``).
"""

from __future__ import annotations

import functools
import itertools
import math
import random as pyrandom
from typing import Any, Literal, overload

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..common.alarm_safe import unalarmed
from . import precision
from .random_elements import ORDERS, RandomElements, keeps_choice, merged
from .summed_draws import decided_within
from .threshold_cells import two_uniforms
from .torch_seeds import RunSeeds, python_random_names

NAN = float("nan")
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
        ("_argmax", "argmax argmin"), ("_searchsorted", "searchsorted bucketize"), ("_where", "where"),
        ("_symbolic_draw", "rand rand_like uniform_ exponential_"),
        ("_concrete_draw", "multinomial randint randint_like bernoulli bernoulli_"),
    )
    for name in names.split()
}  # fmt: skip
"""What is modelled on symbolic tensors (``_move``: element moves without arithmetic), and the draws."""

_CASTS = frozenset("float double to type_as cpu".split())
_KEEPS_CHOICES = (frozenset(n for n, h in _HANDLERS.items() if h in ("_move", "_write_op", "_arith", "_compare", "_where"))
                  | frozenset(ORDERS)) - _CASTS  # fmt: skip
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


def _param(args, kwargs, i: int, name: str, default):
    return args[i] if len(args) > i else kwargs.get(name, default)


def _tensors(args, kwargs):
    for a in itertools.chain(args, kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (b for b in a if isinstance(b, torch.Tensor))


def read_deferred(t: torch.Tensor) -> list:
    """``t.tolist()`` of a 1-D integer tensor, except that, while a run is followed, each element
    that is a deferred choice not decided yet is a ``DeferredChoice`` rather than decided. The
    choice is then the caller's to decide, with ``random_elements.decide_deferred``, and torch may not use it again
    in this run (NotEnumerable). Any other random element refuses. Outside a followed run: tolist."""
    return _ACTIVE[-1].read_deferred(t) if _ACTIVE else t.tolist()


class SymbolicTensor(torch.Tensor):
    """``torch.rand``, ``rand_like`` and ``random.random()`` while followed (NaN underneath): its
    run's ``Interception`` handles every operation on it; kept past the run, it refuses."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kept = next(t for t in _tensors(args, kwargs or {}) if isinstance(t, SymbolicTensor))
        kept.layer.rng.refuse("a random torch tensor was kept from an earlier run, or used outside enumeration")


def _pop_modes_down_to(mode: TorchFunctionMode) -> None:
    """Pop torch's mode stack down to ``mode``, past any mode the subject pushed and left."""
    if any(torch._C._get_function_stack_at(i) is mode for i in range(torch._C._len_torch_function_stack())):
        while torch._C._pop_torch_function_stack() is not mode:
            pass


class Interception(TorchFunctionMode):
    """One run of ``exact``'s enumeration with torch's random functions following ``rng``."""

    def __init__(self, rng):
        super().__init__()
        self.rng, self.saved = rng, {}
        self.seeds = RunSeeds(rng)  # the run's seeds for torch and random, and the generators they seeded
        self.elements = RandomElements(rng)  # the run's random elements, by expression id
        self.overlays: dict[int, tuple] = {}  # storage address -> (ids, element size, the storage)

    @unalarmed
    def __enter__(self):
        self.saved_state = torch.default_generator.get_state()  # our markers reseed it: restored after
        stand_ins = {"seed": self.seeds.python_seed, "random": self.python_uniform}
        for name in python_random_names():
            self.saved[name] = getattr(pyrandom, name)
            setattr(pyrandom, name, stand_ins.get(name) or functools.partial(self.seeds.python_refusal, name))
        _ACTIVE.append(self)
        return super().__enter__()

    @unalarmed
    def __exit__(self, exc_type, exc, tb):
        _pop_modes_down_to(self)
        _ACTIVE.remove(self)
        for name, fn in self.saved.items():
            setattr(pyrandom, name, fn)
        torch.default_generator.set_state(self.saved_state)
        if self.seeds.unused():
            stopped = f" (the run stopped with {exc_type.__name__}: {exc})" if exc_type else ""
            self.rng.refuse(f"a seed from rng.integers over more than max_branching outcomes seeded no draw{stopped}")

    def python_uniform(self) -> torch.Tensor:
        """``random.random()`` while followed: a 0-dim symbolic float64 tensor."""
        if not self.seeds.python_seeded:
            self.rng.refuse("random.random() before random.seed(a seed from rng.integers) in this run")
        with torch._C.DisableTorchFunction():
            return self._new_uniforms(torch.full((), NAN, dtype=torch.float64), (), subclass=True)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs, name = kwargs or {}, getattr(func, "__name__", "")
        args, kwargs = decided_within(tuple(args)), {n: decided_within(v) for n, v in kwargs.items()}
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
            assert handler is not None, "refuse raised for a random tensor with no handler"
            return getattr(self, handler)(func, name, args, kwargs)

    def _decide_choices(self, tensors) -> bool:
        """Decide the deferred choices these tensors hold and write their outcomes in place (their
        elements become concrete); whether there were any."""
        found = False
        for t in tensors:
            ids = self._ids(t)
            flat = ids.reshape(-1).tolist() if ids is not None else []
            where = [j for j, e in enumerate(flat) if e >= 0 and self.elements.is_choice(e)]
            if not where:
                continue
            assert ids is not None, "a tensor without ids holds no choices"
            found = True
            values = torch.tensor([self.elements.choice_value(flat[j]) for j in where], dtype=t.dtype)
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
            return values if ids is None else [self.elements.handed_out(v, e) for v, e in zip(values, ids.tolist())]

    @overload
    def _ids(self, t: torch.Tensor, create: Literal[True], concrete: bool = False) -> torch.Tensor: ...

    @overload
    def _ids(self, t: torch.Tensor, create: bool = False, *, concrete: Literal[True]) -> torch.Tensor: ...

    @overload
    def _ids(self, t: torch.Tensor, create: bool = False, concrete: bool = False) -> torch.Tensor | None: ...

    def _ids(self, t: torch.Tensor, create: bool = False, concrete: bool = False) -> torch.Tensor | None:
        """The expression id of each element of t (-1: concrete), a view into its storage's overlay;
        when the storage has none: one made with ``create``, all -1 with ``concrete``, else None. An
        empty tensor has no overlay: its ids are an empty tensor with ``create`` or ``concrete``."""
        if not t.numel():  # no elements, so nothing random to record: no overlay
            return torch.full(t.shape, -1) if create or concrete else None
        storage = t.untyped_storage()
        entry = self.overlays.get(storage.data_ptr())
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
            ids = self._ids(t)
            assert ids is not None, "a storage with an overlay has ids"
            found = int(ids.max()) >= 0
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
        ids = self.elements.new_uniforms(out.numel(), steps)
        out.fill_(NAN)
        self._write(out, list(ids), {})
        if subclass:
            out = out.as_subclass(SymbolicTensor)
            out.layer = self
        return out

    def _symbolic_draw(self, func, name, args, kwargs):
        self.seeds.check_generator(kwargs)
        out = func(*args, **kwargs)  # torch checks the arguments; the draw itself is discarded
        if out.device.type != "cpu" or not out.is_floating_point():
            self.rng.refuse(f"torch {name} on {out.device} or of dtype {out.dtype} is not modelled")
        precision.note(out)  # the coins' dtype (laws.precision)
        low, high = (
            float(_param(args, kwargs, i + 1, k, i)) if name == "uniform_" else i for i, k in enumerate(("from", "to"))
        )
        lam = float(_param(args, kwargs, 1, "lambd", 1.0)) if name == "exponential_" else None
        steps = ("expo", ("aff", 1.0 / lam, 0.0)) if lam else (("aff", high - low, low),)
        return self._new_uniforms(out, merged(steps), subclass=name in ("rand", "rand_like"))

    def _concrete_draw(self, func, name, args, kwargs):
        self._concrete_rest(args, kwargs, (0,) if name in ("randint_like", "bernoulli_") else ())
        self.seeds.check_generator(kwargs)
        out = func(*args, **kwargs)  # torch checks the arguments; the draw itself is replaced
        if name == "multinomial":
            precision.note(args[0])  # the weights' dtype (laws.precision)
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
            ids += [self.elements.choice(support.tolist(), p[support] / p.sum()) for _ in range(n)]
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
        choices = {self.elements.is_choice(e) for e in live}
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
        n = math.prod(shape)
        flat: list[Any] = []  # x's ids (None: concrete) and values, then y's
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
                self.rng.refuse(two_uniforms(f"torch {name}"))
            if ex >= 0 or ey >= 0:
                items.append((j, ex, yv[j], True) if ex >= 0 else (j, ey, xv[j], False))
        return items, n

    def _arith(self, func, name, args, kwargs):
        if kwargs:
            self.rng.refuse(f"torch {name} with options {sorted(kwargs)} on a random tensor is not modelled")
        op, swapped = _ARITH[name]
        x, y = (args[1], args[0]) if swapped else (args[0], args[1] if len(args) > 1 else 0.0)
        items, n = self._operands(name, x, y)
        if any(self.elements.is_choice(e) and not keeps_choice(op, c, left) for _, e, c, left in items):
            self._decide_choices(_tensors(args, {}))
            return self.__torch_function__(func, (), args, kwargs)
        out = func(*args)
        ids, constants = [-1] * n, {}
        for j, e, c, left in items:
            r = (
                (e if op != "mul" or c == 1 else 0.0)
                if self.elements.is_choice(e)
                else self.elements.step(e, op, c, left)
            )
            if isinstance(r, float):
                constants[j] = r
            else:
                ids[j] = r
        self._write(out, ids, constants)
        return out

    def _compare(self, func, name, args, kwargs):
        if kwargs or len(args) != 2:
            self.rng.refuse(f"torch {name} of a random tensor with options is not modelled")
        precision.note_all(args)  # a threshold's dtype (laws.precision)
        items, _ = self._operands(name, *args)
        answers = {j: self.elements.answers(name, e, c, left) for j, e, c, left in items if self.elements.is_choice(e)}
        if any(len(a) > 1 for a in answers.values()):
            self._decide_choices(_tensors(args, {}))
            return self.__torch_function__(func, (), args, kwargs)
        if name not in _BELOW and len(answers) < len(items):
            self.rng.refuse(f"torch {name} (equality) of a random value is not modelled")
        out = func(*args)
        flat = out.view(-1)
        for j, a in answers.items():
            flat[j] = a.pop()
        asked = [(j, e, c, _BELOW[name] == left) for j, e, c, left in items if j not in answers]
        for j, answer in self.elements.answer_all(asked).items():
            flat[j] = answer
        return out

    def _searchsorted(self, func, name, args, kwargs):
        """``torch.searchsorted(boundaries, values)`` / ``bucketize(values, boundaries)`` of random
        values against sorted concrete boundaries (``RandomElements.counts_below``)."""
        seq, values = (args[1], args[0]) if name == "bucketize" else (args[0], args[1])  # (positional, as always)
        self._concrete_rest([seq], {}, ())
        rows = seq.dim() > 1 and tuple(values.shape[:-1]) != tuple(seq.shape[:-1])
        if rows or kwargs.get("sorter") is not None or kwargs.get("out") is not None:
            self.rng.refuse(f"torch {name} of a random tensor with sorter, out or unmatched rows is not modelled")
        out, rows = func(*args, **kwargs), seq.detach().double().reshape(-1, seq.shape[-1]).tolist()
        ids = self._ids(values, concrete=True).reshape(len(rows), -1).tolist()
        for j, count in self.elements.counts_below(ids, rows, f"torch {name}").items():
            out.view(-1)[j] = count  # the entries of concrete values are torch's own
        return out

    def _argmax(self, func, name, args, kwargs):
        x, dim = args[0], _param(args, kwargs, 1, "dim", None)
        self._concrete_rest(args, kwargs, (0,))
        out = func(*args, **kwargs)
        ids, values = self._ids(x, concrete=True), x.detach().double()
        ids, values = (
            v.reshape(1, -1) if dim is None else v.movedim(dim, -1).reshape(-1, x.shape[dim]) for v in (ids, values)
        )
        picks = [self._row_argmax(i, v, name == "argmin") for i, v in zip(ids.tolist(), values.tolist())]
        out.copy_(torch.tensor([v for v, _ in picks]).reshape(out.shape))
        self._write(out, [e for _, e in picks], {})
        return out

    def _row_argmax(self, ids: list, values: list, flip: bool) -> tuple[int, int]:
        """argmax (argmin with ``flip``) of one row: (its value, -1), or for a race (a placeholder,
        the id of its deferred categorical decision)."""
        if all(e < 0 for e in ids):
            return int(getattr(torch.tensor(values), "argmin" if flip else "argmax")()), -1
        return self.elements.race(ids, values, flip)
