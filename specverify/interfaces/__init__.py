"""Subject interfaces as plug-ins: one registry that every entry point dispatches through.

An interface is a package of this one that owns how one kind of subject is called and judged:

- ``round``: the handout's ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``;
- ``loop``: a whole generation loop ``generate(target, draft, requests, k, rng) -> outputs``;
- ``kernel``: a batched verification kernel ``kernel(draft_ids[B,k], draft_probs[B,k,V],
  target_probs[B,k+1,V], uniforms[B,k+1] | generator) -> (output_ids[B,k+1], num_accepted[B])``.

``get(name)`` returns the package's ``interface.INTERFACE``, an object satisfying
``interfaces.protocol.Interface``: ``NAME``, ``PARAMETERS`` (the parameter names its subjects
use, for detection), ``ALIASES`` (other spellings of the same parameters), ``budget(budget,
overrides)`` (its section of a budget name, resolved once), ``coverage``, ``reach``, the cases a
subject declares, ``device``, ``run(subject, budget, seed, ...) -> BatteryResult``,
``counterexample`` and ``units`` (independent units for the Ray executor). ``surface/`` (the
``check`` command, the API, the pytest plugin) and the mutant report call ``get(name)`` and
``detect(fn)`` and never name an interface's modules themselves.

Detection (``detect``) scores each interface by how many of a function's leading parameter
names it uses (aliases included) and takes the best; a tie, or a function whose names match no
interface, is a usage error that names ``--interface`` (``interface=`` in the API): a loop with
unusual parameter names is never judged as a round sampler by default.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InterfaceError

if TYPE_CHECKING:
    from .protocol import Interface

NAMES = ("round", "loop", "kernel")
"""Every registered interface, in the order ``--interface`` lists them."""

HANDOUT = "round"
"""The handout's interface, ``speculative_step(p_fn, q_fn, prefix, k, rng)``: what an adapter
(``check(interface=callable)``) returns, and whose coverage ``check --help`` states per budget."""


def get(name: str) -> Interface:
    """The interface called ``name`` (its package's ``interface.INTERFACE``, satisfying
    ``protocol.Interface``); InterfaceError naming the known ones otherwise."""
    if not isinstance(name, str) or name not in NAMES:
        raise InterfaceError(f"interface: must be one of {', '.join(NAMES)}, got {name!r}")
    return importlib.import_module(f"{__name__}.{name}.interface").INTERFACE


def _leading_names(fn) -> tuple[str, ...] | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def score(fn, name: str) -> int:
    """How many of ``fn``'s leading parameters are named as interface ``name`` names them."""
    module = get(name)
    names = _leading_names(fn) or ()
    wanted = module.PARAMETERS
    hits = 0
    for i, got in enumerate(names[: len(wanted)]):
        if got == wanted[i] or got in module.ALIASES.get(wanted[i], ()):
            hits += 1
    return hits


def signature_problem(fn, name: str) -> str | None:
    """Why ``fn`` cannot be called as interface ``name`` calls its subject (positionally, one
    argument per name of its ``PARAMETERS``), with the signature it expects; None when it can,
    or when its signature cannot be read (a builtin: it is called and judged). A usage error,
    never evidence about exactness: a kernel with three parameters, a kernel checked as a loop."""
    module = get(name)
    expected = f"the {name} interface's f({', '.join(module.PARAMETERS)})"
    if inspect.isclass(fn):
        return f"{fn.__name__} is a class, not a function; expected {expected}"
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*module.PARAMETERS)
    except TypeError as exc:
        return f"{getattr(fn, '__name__', 'the subject')}{signature} cannot be called as {expected}: {exc}"
    return None


def detect(fn) -> str:
    """The interface ``fn`` is written for, by its parameter names; InterfaceError when it
    cannot be told (a tie, or no name of any interface), naming ``--interface``."""
    if inspect.isclass(fn):
        raise InterfaceError(f"interface: {fn.__name__} is a class, not a function; pass a function of one interface")
    names = _leading_names(fn)
    if names is None:
        raise InterfaceError(f"interface: cannot read the parameters of {fn!r}; pass --interface ({' | '.join(NAMES)})")
    scores = {name: score(fn, name) for name in NAMES}
    best = max(scores.values())
    winners = [n for n, s in scores.items() if s == best]
    if len(winners) == 1 and best >= 2:
        return winners[0]
    shapes = "; ".join(f"{n}: ({', '.join(get(n).PARAMETERS)})" for n in NAMES)
    raise InterfaceError(
        f"interface: cannot tell which interface a function with parameters ({', '.join(names)}) "
        f"is written for; pass --interface (interface= in the API): {shapes}"
    )


MAX_AIM_VOCAB = 1 << 20
MAX_AIM_K = 16
MAX_AIM_TOKENS = 64


@dataclass(frozen=True)
class Aim:
    """An engine's configuration to aim the check at (``check --vocab 32000 --k 1..8
    --max-tokens 16``; ``api.check(vocab=, k=, max_tokens=)``): every interface adds generated
    cases at it, besides its budget's own. ``vocab``: the vocabulary size (None: the budget's);
    ``ks``: the draft lengths k to reach (empty: the budget's); ``max_tokens``: the longest
    output a loop case asks for, and the longest window a round case judges (None: the
    budget's). Built by ``aim``, which validates."""

    vocab: int | None = None
    ks: tuple[int, ...] = ()
    max_tokens: int | None = None

    def __bool__(self) -> bool:
        return self.vocab is not None or bool(self.ks) or self.max_tokens is not None

    def words(self) -> str:
        parts = [f"vocab {self.vocab}"] if self.vocab is not None else []
        parts += [f"k {', '.join(map(str, self.ks))}"] if self.ks else []
        parts += [f"max_tokens {self.max_tokens}"] if self.max_tokens is not None else []
        return ", ".join(parts)


def parse_ks(text) -> tuple[int, ...]:
    """``k`` as the user writes it: an int, ``"A..B"`` (both included), ``"A,B,C"`` or a
    sequence of ints; InterfaceError naming ``k`` otherwise."""
    if isinstance(text, bool):
        raise InterfaceError(f"k: expected an int, A..B or A,B,..., got {text!r}")
    if isinstance(text, int):
        ks: tuple[int, ...] = (text,)
    elif isinstance(text, str) and re.fullmatch(r"\s*\d+\s*\.\.\s*\d+\s*", text):
        a, b = (int(x) for x in text.split(".."))
        if a > b:
            raise InterfaceError(f"k: A..B needs A <= B, got {text!r}")
        ks = tuple(range(a, b + 1))
    elif isinstance(text, str) and re.fullmatch(r"\s*\d+\s*(,\s*\d+\s*)*", text):
        ks = tuple(int(x) for x in text.split(","))
    elif isinstance(text, (list, tuple)) and text and all(isinstance(x, int) and not isinstance(x, bool) for x in text):
        ks = tuple(text)
    else:
        raise InterfaceError(f"k: expected an int, A..B or A,B,..., got {text!r}")
    bad = [x for x in ks if not 1 <= x <= MAX_AIM_K]
    if bad:
        raise InterfaceError(f"k: each k must be in 1..{MAX_AIM_K}, got {bad[0]}")
    return tuple(sorted(set(ks)))


def _whole(name: str, value, low: int, high: int) -> int:
    """``value`` (an int, or a string of digits) checked to lie in low..high; InterfaceError naming ``name``."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InterfaceError(f"{name}: expected a whole number, got {value!r}")
    if not low <= value <= high:
        raise InterfaceError(f"{name}: must be in {low}..{high}, got {value}")
    return value


def aim(vocab=None, k=None, max_tokens=None) -> Aim:
    """The validated ``Aim`` (InterfaceError naming the argument otherwise): ``vocab`` 2 to
    2^20, each k 1 to 16, ``max_tokens`` 0 to 64."""
    return Aim(
        vocab=None if vocab is None else _whole("vocab", vocab, 2, MAX_AIM_VOCAB),
        ks=() if k is None else parse_ks(k),
        max_tokens=None if max_tokens is None else _whole("max_tokens", max_tokens, 0, MAX_AIM_TOKENS),
    )


def reach_words(reach: dict) -> str:
    """A reach box in words, dimension by dimension: ``context <= 514, k <= 8, ...`` (a dimension
    at 0, not reached, is left out)."""
    return ", ".join(f"{name} <= {value:,}" for name, value in reach.items() if value)


def budget_reach(name: str, budget) -> dict:
    """The box the ``name`` interface's cases reach at ``budget`` (that interface's ``reach``)."""
    return get(name).reach(budget)


__all__ = [
    "Aim",
    "HANDOUT",
    "InterfaceError",
    "NAMES",
    "aim",
    "budget_reach",
    "detect",
    "get",
    "parse_ks",
    "reach_words",
    "score",
    "signature_problem",
]
