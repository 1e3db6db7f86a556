"""Running an engine's Triton kernels under the CPU interpreter (``TRITON_INTERPRET=1``) with
their randomness controlled, and with the ``libdevice`` functions the interpreter lacks.

Under the interpreter a kernel is plain Python: every ``tl.*`` call is looked up on
``triton.language`` when it executes, and every device function a kernel calls is looked up in
its module's globals. So both can be answered for the length of one engine call, without
touching an installed file, by swapping module attributes and restoring them afterwards:

* ``ControlledTritonDraws`` answers ``tl.rand(seed, offset)`` from a function of the host
  values of ``seed`` and ``offset`` (the battery's uniforms, looked up by the wrapper's own seed
  and position layout), as ``engines.vllm.ControlledDraws`` answers ``torch.rand``. Counter-based
  generators an engine writes in Triton itself (vLLM's ``murmur3_uniform32``, a hash of (seed,
  position, token id)) are answered the same way, named by (module, function). Any other of
  Triton's random calls (``tl.randint``, ``tl.randn``, ``tl.rand4x``, ``tl.philox``...) raises
  RuntimeError naming it: randomness the controlled uniforms would not cover.
* ``libdevice_shim`` fills ``triton.language.extra.libdevice``: in triton 3.9.0 its functions
  are stubs whose body is ``...`` (the backends supply them when compiling), so under the
  interpreter ``libdevice.log1p(x)`` returns None and the kernel fails. The shim answers the
  functions in ``LIBDEVICE_NUMPY`` with NumPy's (same element type as the argument) while it is
  active.

Both raise RuntimeError outside the interpreter: a compiled kernel never reads these attributes.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable

import numpy as np

TRITON_RANDOM_CALLS = ("rand", "randn", "randint", "rand4x", "randn4x", "randint4x", "philox", "philox_impl")
"""``triton.language``'s random functions (triton/language/random.py)."""


def _erf(x):
    import math

    return np.vectorize(math.erf, otypes=[x.dtype])(x)


def _erfc(x):
    import math

    return np.vectorize(math.erfc, otypes=[x.dtype])(x)


LIBDEVICE_NUMPY: dict[str, Callable] = {
    "log1p": np.log1p,
    "expm1": np.expm1,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "exp": np.exp,
    "exp2": np.exp2,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: (1 / np.sqrt(x)).astype(x.dtype),
    "cbrt": np.cbrt,
    "tanh": np.tanh,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "erf": _erf,
    "erfc": _erfc,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "rint": np.rint,
    "nearbyint": np.rint,
    "abs": np.abs,
    "fabs": np.abs,
    "isnan": np.isnan,
    "isinf": np.isinf,
    "signbit": np.signbit,
    "pow": np.power,
    "atan2": np.arctan2,
    "fmod": np.fmod,
    "hypot": np.hypot,
    "fmin": np.fmin,
    "fmax": np.fmax,
    "copysign": np.copysign,
    "nextafter": np.nextafter,
}
"""The libdevice functions the shim answers, as NumPy functions of the arguments' host arrays
(elementwise; the result keeps the first argument's element type unless it is boolean)."""


def require_interpreter() -> None:
    """RuntimeError unless ``TRITON_INTERPRET=1`` (the only mode these swaps act in)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError(
            "the Triton randomness control and libdevice shim act only under the interpreter "
            "(TRITON_INTERPRET=1, set before triton is imported)"
        )


def host_array(x) -> np.ndarray:
    """The NumPy values of an interpreted Triton value (a ``tl.tensor``, a constexpr or a Python
    number), at least 1-D."""
    import triton.language as tl

    if isinstance(x, tl.constexpr):
        x = x.value
    if isinstance(x, tl.tensor):
        return np.atleast_1d(np.asarray(x.handle.data))
    return np.atleast_1d(np.asarray(x))


def device_value(values: np.ndarray, *like) -> object:
    """``values`` as an interpreted ``tl.tensor``: a block of the first block-shaped argument of
    ``like``'s shape (values broadcast to it), else a scalar; the element type is ``values``'."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    values = np.asarray(values)
    element = {
        np.dtype(np.float32): tl.float32,
        np.dtype(np.float64): tl.float64,
        np.dtype(np.int32): tl.int32,
        np.dtype(np.int64): tl.int64,
        np.dtype(np.uint32): tl.uint32,
        np.dtype(np.uint64): tl.uint64,
        np.dtype(np.bool_): tl.int1,
    }[values.dtype]
    blocks = [t for t in like if isinstance(t, tl.tensor) and t.type.is_block()]
    if blocks:
        shape = [int(s) for s in blocks[0].type.shape]
        data = np.broadcast_to(values.reshape(values.shape or (1,)), shape).copy()
        return tl.tensor(TensorHandle(data, element), tl.block_type(element, shape))
    return tl.tensor(TensorHandle(values.reshape(1).copy(), element), element)


class SwappedAttributes:
    """Module attributes swapped for the body of a ``with`` and restored afterwards (also on an
    error), in reverse order; ``set(obj, name, value)`` records the original first."""

    def __init__(self):
        self.saved: list[tuple[object, str, object]] = []

    def set(self, obj, name: str, value) -> None:
        self.saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    def restore(self) -> None:
        while self.saved:
            obj, name, value = self.saved.pop()
            setattr(obj, name, value)


class ControlledTritonDraws:
    """While active: ``tl.rand(seed, offset)`` returns ``rand(seeds, offsets)`` (host arrays in,
    float32 uniforms out, one per offset); each ``generators[(module, name)]`` answers the Triton
    device function ``module.name`` from its arguments' host arrays (a NumPy array out: its
    element type is the result's), or raises RuntimeError naming it when its answer is None;
    every other of ``TRITON_RANDOM_CALLS`` raises so, as ``tl.rand`` does with ``rand`` None. ``answered`` counts the calls answered by name.
    RuntimeError when entered outside the interpreter."""

    def __init__(self, rand: Callable | None = None, generators: dict | None = None):
        self.rand = rand
        self.generators = dict(generators or {})
        self.answered: collections.Counter = collections.Counter()
        self.swaps = SwappedAttributes()

    def __enter__(self):
        require_interpreter()
        import triton.language as tl

        for name in TRITON_RANDOM_CALLS:
            if name == "rand" and self.rand is not None:
                self.swaps.set(tl, name, self.answer_rand)
            elif hasattr(tl, name):
                self.swaps.set(tl, name, self.refusal(f"tl.{name}"))
        for (module, name), answer in self.generators.items():
            label = f"{module.__name__}.{name}"
            self.swaps.set(
                module, name, self.refusal(label) if answer is None else self.answer_generator(label, answer)
            )
        return self

    def __exit__(self, *exc):
        self.swaps.restore()
        return False

    def answer_rand(self, seed, offset, n_rounds=None):
        self.answered["tl.rand"] += 1
        values = np.asarray(self.rand(host_array(seed), host_array(offset)), dtype=np.float32)
        return device_value(values, offset)

    def answer_generator(self, label: str, answer: Callable):
        def generator(*args, **kwargs):
            self.answered[label] += 1
            values = np.asarray(answer(*(host_array(a) for a in args), **{k: host_array(v) for k, v in kwargs.items()}))
            return device_value(values, *args, *kwargs.values())

        return generator

    def refusal(self, label: str):
        def refused(*args, **kwargs):
            raise RuntimeError(
                f"the kernel drew {label} beyond the controlled uniforms (answered: {dict(self.answered)})"
            )

        return refused


def shim_function(name: str, fn: Callable) -> Callable:
    """An interpreted libdevice function ``name`` computed by the NumPy function ``fn``."""

    def shimmed(*args, **kwargs):
        host = [host_array(a) for a in args]
        with np.errstate(all="ignore"):  # log1p(-1) = -inf and the like, as the device gives
            out = np.asarray(fn(*host))
        if out.dtype != np.bool_:
            out = out.astype(host[0].dtype, copy=False)
        return device_value(out, *args)

    shimmed.__name__ = name
    return shimmed


class LibdeviceShim:
    """While active, the functions of ``LIBDEVICE_NUMPY`` that ``triton.language.extra.libdevice``
    defines as plain (uncompiled) Python functions answer with NumPy; ``shimmed`` names them.
    RuntimeError when entered outside the interpreter."""

    def __init__(self):
        self.swaps = SwappedAttributes()
        self.shimmed: list[str] = []

    def __enter__(self):
        require_interpreter()
        import triton.language as tl
        import triton.language.extra.libdevice as libdevice

        for name, fn in LIBDEVICE_NUMPY.items():
            current = getattr(libdevice, name, None)
            if current is None or tl.core.is_builtin(current) or not callable(current):
                continue
            if getattr(current, "__module__", "") != libdevice.__name__:
                continue  # a backend's real implementation: leave it
            self.swaps.set(libdevice, name, shim_function(name, fn))
            self.shimmed.append(name)
        return self

    def __exit__(self, *exc):
        self.swaps.restore()
        return False


def libdevice_shim() -> LibdeviceShim:
    """``LibdeviceShim()``: use as ``with libdevice_shim(): ...``."""
    return LibdeviceShim()


class CachedLanguagePatch:
    """While active, the interpreter patches ``triton.language`` once per grid instead of once per
    device-function call. Upstream, every call of a ``@triton.jit`` helper from a kernel re-runs
    ``_patch_lang`` (an ``inspect.getmembers`` scan of the language modules, about 7 ms) although
    the grid already patched the same modules, and never restores that patch; here a helper
    whose language modules the running grid has patched skips it (the same state results), and
    any other takes the upstream path. About half of an interpreted vLLM runner-v2 call.
    RuntimeError when entered outside the interpreter."""

    def __init__(self):
        self.swaps = SwappedAttributes()
        self.grid_langs: set[int] | None = None

    def __enter__(self):
        require_interpreter()
        import triton.runtime.interpreter as interpreter

        self.swaps.set(interpreter, "_patch_lang", self.patcher(interpreter._patch_lang))
        return self

    def __exit__(self, *exc):
        self.swaps.restore()
        self.grid_langs = None
        return False

    def patcher(self, upstream: Callable) -> Callable:
        import inspect

        import triton.language as tl
        import triton.runtime.interpreter as interpreter

        def patch_lang(fn):
            langs = {id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core)}
            if self.grid_langs is not None and langs <= self.grid_langs:
                return interpreter._LangPatchScope()  # already patched by the running grid
            scope = upstream(fn)
            if self.grid_langs is None:  # the grid's own patch, restored when the grid ends
                self.grid_langs = langs
                restore = scope.restore

                def restore_grid():
                    restore()
                    self.grid_langs = None

                scope.restore = restore_grid
            else:
                self.grid_langs |= langs
            return scope

        return patch_lang
