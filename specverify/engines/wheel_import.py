"""Loading one file of an engine's wheel with the same-wheel modules it imports, for real.

``load_following(dotted, wheel, package, overrides)`` executes the file ``dotted`` from the wheel
(unpacked on demand under ``<cache>/src/<package>-<version>/``) with an import hook
(:class:`WheelFinder`) in front of ``sys.meta_path``. Every module of the engine's package that the
file imports, directly or through other modules, is taken from the same wheel and executed as it
is. What cannot run here is stood in for by one generic rule (:func:`standin_reason`), not by a
list kept per release:

* a compiled extension (a ``.so`` / ``.pyd`` of the wheel, or a module named ``_C`` /
  ``*_C`` / ``_custom_ops``): CUDA code that cannot load on this machine;
* distributed and config machinery: any module under a package named ``distributed`` or
  ``config``, which sets up processes, devices and engine configuration the verification code
  only types against;
* a module the wheel does not have, and a third-party package that is not installed here;
* a same-wheel module whose own execution fails here (a missing optional dependency, a GPU
  probe): it is recorded with its error and stood in for.

A stand-in is a :class:`StandinModule`: every attribute is a permissive placeholder
(:func:`placeholder`, a class that can be called, subclassed, subscripted and is false), so
import-time uses (type hints, decorators, base classes) pass, and any use in the verification path
shows up as a wrong answer in the row's known-answer check (``contract``), never as a silent
verdict. ``overrides`` (per engine, the same for every release: its logger, its platform) replace
modules by name. The top package's ``__init__`` is never executed (it starts the whole engine);
sub-packages' ``__init__`` files are.

The file ``dotted`` itself must be in the wheel and load: if not, :class:`loader.Unavailable` names it in
one line.
The modules loaded are removed from ``sys.modules`` afterwards (the process is left as it was);
:meth:`Loaded.active` puts them and the hook back around calls into the engine, so that imports an
engine function makes when it runs resolve to the same modules.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .loader import Unavailable, installed, unpacked_dir

STANDIN_PACKAGES = ("distributed", "config")
"""Package names whose modules are stood in for wherever they sit in the engine (distributed and
config machinery: process groups, device and engine configuration)."""

EXTENSION_SUFFIXES = (".so", ".pyd")


class PlaceholderMeta(type):
    """Metaclass of placeholders: attribute access, subscription and ``|`` give placeholders."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return placeholder(f"{cls.__qualname__}.{name}")

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    def __ror__(cls, other):
        return cls

    def __bool__(cls):
        return False


class Placeholder(metaclass=PlaceholderMeta):
    """An instance of a placeholder: calls, attributes and items give placeholders; false;
    iterates as empty."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return placeholder(f"{type(self).__qualname__}.{name}")()

    def __call__(self, *args, **kwargs):
        return Placeholder()

    def __getitem__(self, item):
        return Placeholder()

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())


def placeholder(qualname: str) -> type:
    """A fresh placeholder class named ``qualname`` (subclass of :class:`Placeholder`)."""
    return PlaceholderMeta(qualname.rsplit(".", 1)[-1], (Placeholder,), {"__qualname__": qualname})


class StandinModule(types.ModuleType):
    """A stood-in module: ``__specverify_standin__`` says why; any other attribute is a
    placeholder; a package keeps ``__path__`` so its real submodules can still load."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        has = self.__dict__.get("__specverify_has__")
        if has is not None and has(f"{self.__name__}.{name}"):  # ``from pkg import sub``: the submodule
            try:
                return importlib.import_module(f"{self.__name__}.{name}")
            except ImportError:
                pass
        value = placeholder(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


def standin_module(name: str, why: str, path: list[str] | None = None) -> StandinModule:
    mod = StandinModule(name, f"stand-in: {why}")
    mod.__specverify_standin__ = why
    if path is not None:
        mod.__path__ = path
    return mod


def standin_reason(dotted: str, members: set[str], package: str) -> str | None:
    """Why the generic rule stands in for same-wheel module ``dotted`` (None: load it for real)."""
    parts = dotted.split(".")
    base = "/".join(parts)
    if any(m.startswith(base + ".") and m.endswith(EXTENSION_SUFFIXES) for m in members) and not (
        f"{base}.py" in members or f"{base}/__init__.py" in members
    ):
        return "a compiled extension (CUDA code; cannot load here)"
    last = parts[-1]
    if last == "_C" or last.endswith("_C") or last == "_custom_ops":
        return "a compiled extension (CUDA code; cannot load here)"
    for part in parts[1:]:
        if part in STANDIN_PACKAGES:
            return f"{part} machinery ({package}.{part}: cannot run here)"
    if f"{base}.py" not in members and f"{base}/__init__.py" not in members:
        return f"not in the {package} wheel"
    return None


@dataclass
class Loaded:
    """A file loaded by :func:`load_following`: the module, the modules it brought in (name ->
    module), and what was stood in for (name -> why)."""

    module: types.ModuleType
    modules: dict = field(default_factory=dict)
    standins: dict = field(default_factory=dict)
    finder: object = None

    @contextlib.contextmanager
    def active(self):
        """The engine's modules and import hook in place for the body (calls into the engine)."""
        with installed(self.modules), hooked(self.finder):
            yield

    def standin_words(self) -> str:
        """The stood-in modules in one line (``name (why)``, grouped by why)."""
        groups: dict = {}
        for name, why in sorted(self.standins.items()):  # one group for every "does not run here: error"
            groups.setdefault(why.split(":")[0] if why.startswith("does not run here") else why, []).append(name)
        return "; ".join(f"{why}: {', '.join(names)}" for why, names in groups.items())


@contextlib.contextmanager
def hooked(finder):
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)


class WheelFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The import hook of :func:`load_following` (module docstring): the engine's modules from
    the wheel (unpacked on demand), stand-ins by the generic rule, third-party packages from the
    environment when installed (else stood in for)."""

    def __init__(self, package: str, wheel: Path, root: Path, overrides: dict, strict: str, after: dict):
        self.package, self.wheel, self.root = package, wheel, root
        self.overrides, self.strict, self.after = overrides, strict, after
        with zipfile.ZipFile(wheel) as z:
            self.members = set(z.namelist())
        self.standins: dict[str, str] = {}

    def unpack(self, member: str) -> Path:
        path = self.root / member
        if not path.is_file():
            with zipfile.ZipFile(self.wheel) as z:
                z.extract(member, self.root)
        return path

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top == self.package:
            return self.engine_spec(fullname)
        if "." in fullname or fullname in sys.builtin_module_names or not self.imported_by_engine():
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            if finder.find_spec(fullname, None) is not None:
                return None
        self.standins[fullname] = "a third-party package not installed here"
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def has_module(self, dotted: str) -> bool:
        """Whether the wheel holds module ``dotted`` (source, package or compiled extension)."""
        base = dotted.replace(".", "/")
        if f"{base}.py" in self.members or f"{base}/__init__.py" in self.members:
            return True
        return any(m.startswith(base + ".") and m.endswith(EXTENSION_SUFFIXES) for m in self.members)

    def imported_by_engine(self) -> bool:
        """Whether the import being resolved comes from one of the engine's modules (only those
        get stand-ins for absent third-party packages; other code sees the usual ImportError)."""
        frame = sys._getframe(1)
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if not (name.startswith("importlib") or name == __name__):
                return name == self.package or name.startswith(self.package + ".")
            frame = frame.f_back
        return False

    def engine_spec(self, fullname: str):
        if fullname in self.overrides or fullname == self.package:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        why = None if fullname == self.strict else standin_reason(fullname, self.members, self.package)
        if why is not None:
            self.standins[fullname] = why
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        base = fullname.replace(".", "/")
        if f"{base}/__init__.py" in self.members:
            init = self.unpack(f"{base}/__init__.py")
            return importlib.util.spec_from_file_location(
                fullname, init, loader=self, submodule_search_locations=[str(init.parent)]
            )
        return importlib.util.spec_from_file_location(fullname, self.unpack(f"{base}.py"), loader=self)

    def create_module(self, spec):
        name = spec.name
        if name in self.overrides:
            return self.overrides[name]
        path = [str(self.root.joinpath(*name.split(".")))]
        if name == self.package:
            mod = standin_module(name, "the top package (its __init__ starts the whole engine; not run)", path)
        elif name in self.standins:
            mod = standin_module(name, self.standins[name], path)
        else:
            return None
        if name.split(".")[0] == self.package:
            mod.__specverify_has__ = self.has_module
        return mod

    def exec_module(self, module):
        name = module.__name__
        if isinstance(module, StandinModule) or name in self.overrides:
            return
        code = compile(Path(module.__file__).read_bytes(), module.__file__, "exec")
        try:
            exec(code, module.__dict__)  # noqa: S102 - the engine's own file, as import would run it
        except Exception as exc:  # noqa: BLE001 - any failure: the module is stood in for
            if name == self.strict:
                raise
            why = f"does not run here: {type(exc).__name__}: {first_line(exc)}"
            self.standins[name] = why
            module.__class__ = StandinModule
            module.__specverify_standin__ = why
            return
        for attr, value in self.after.get(name, {}).items():
            setattr(module, attr, value)


def first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:200] if text else ""


def as_standin(module: types.ModuleType) -> StandinModule:
    """``module`` (an engine's override) as a :class:`StandinModule`: its attributes, and a
    placeholder for any other name the engine's files import from it."""
    if isinstance(module, StandinModule):
        return module
    out = standin_module(module.__name__, module.__doc__ or "override")
    for key, value in vars(module).items():
        if key not in ("__name__", "__doc__", "__spec__", "__loader__", "__package__"):
            setattr(out, key, value)
    return out


def load_following(
    dotted: str,
    package: str,
    version: str,
    wheel: Path,
    overrides: dict | None = None,
    after: dict | None = None,
) -> Loaded:
    """Execute ``dotted`` from ``wheel`` (module docstring) and return it as :class:`Loaded`;
    :class:`loader.Unavailable` (one line naming the module) when ``dotted`` itself fails.
    ``overrides``: modules by name (made permissive: :func:`as_standin`); ``after``: module name
    -> attributes set right after that module of the wheel executes (a fact about this machine
    the engine would probe for wrongly, e.g. that Triton runs, under its interpreter)."""
    root = unpacked_dir(package, version)
    overrides = {name: as_standin(mod) for name, mod in (overrides or {}).items()}
    finder = WheelFinder(package, wheel, root, overrides, dotted, dict(after or {}))
    before = set(sys.modules)
    saved = {name: sys.modules[name] for name in before if name == package or name.startswith(package + ".")}
    if not finder.has_module(dotted):
        raise Unavailable(f"{package} {version}: the wheel has no module {dotted}")
    for name in saved:
        del sys.modules[name]
    try:
        with hooked(finder):
            try:
                module = importlib.import_module(dotted)
            except Exception as exc:  # noqa: BLE001 - the row's file does not load: one line
                raise Unavailable(
                    f"{package} {version}: {dotted} does not import here: {type(exc).__name__}: {first_line(exc)}"
                ) from None
    finally:
        added = {n: sys.modules[n] for n in set(sys.modules) - before}
        for name in added:
            if name == package or name.startswith(package + ".") or name in finder.standins:
                sys.modules.pop(name, None)
        sys.modules.update(saved)
    engine_modules = {
        n: m for n, m in added.items() if n == package or n.startswith(package + ".") or n in finder.standins
    }
    return Loaded(module, engine_modules, dict(finder.standins), finder)
