"""The import structure of specverify, read from the source (no module is imported): the layers
(``LAYERS``, imports only downward), no cycles, no underscore names across modules, no two modules
of one name, a short package root, and the size of its modules (none over ``MAX_LINES`` without a
reason stated in its docstring).

Every ``import`` and ``from ... import`` of a specverify module counts, at module level or inside
a function (a lazy import is still an arrow). ``from pkg import name`` is an arrow to ``pkg.name``
when that is a module, else to ``pkg``. Importing ``pkg.mod`` also runs ``pkg/__init__.py``; that
implicit arrow is not drawn (every module would then reach ``specverify/__init__.py``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "specverify"

KNOWN_CYCLES: list[set[str]] = []
"""Import circles that remain, each with the file to change. None; the list may only stay empty."""

KNOWN_PRIVATE_IMPORTS: set[tuple[str, str, str]] = set()
"""Underscore names used across modules: none; the set may only stay empty."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _base(module: str, path: Path, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _scan():
    """(edges: module -> the specverify modules it imports, private: (user, owner, name) for
    every underscore name of one specverify module that another one imports or reads)."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    private: set[tuple[str, str, str]] = set()
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        aliases: dict[str, str] = {}  # local name -> the specverify module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _base(module, path, node)
                if not base or not (base == "specverify" or base.startswith("specverify.")):
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in MODULES:
                        edges[module].add(full)
                        aliases[alias.asname or alias.name] = full
                    else:
                        edges[module].add(base)
                        if _private(alias.name) and base != module:
                            private.add((module, base, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in MODULES:
                        edges[module].add(alias.name)
                        if alias.asname:
                            aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                owner = aliases[node.value.id]
                if owner != module:
                    private.add((module, owner, node.attr))
    for module in edges:
        edges[module] = {m for m in edges[module] if m in MODULES and m != module}
    return edges, private


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


EDGES, PRIVATE = _scan()


def test_the_scan_sees_the_package():
    assert "specverify.samplers.chain" in EDGES["specverify.samplers.tree"]
    assert "specverify.models.decoding" in EDGES["specverify.models.tree_decoding"]
    assert "specverify.samplers.registry" in EDGES["specverify.samplers"]


def test_cycles_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_specverify_modules():
    found = cycles(EDGES)
    unknown = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert not unknown, f"import circles: {unknown}"


LAYERS = (
    ("common", ("specverify.common", "specverify.errors")),
    ("laws", ("specverify.laws",)),
    ("samplers", ("specverify.samplers",)),
    ("battery", ("specverify.battery",)),
    ("interfaces", ("specverify.interfaces",)),
    ("surface", ("specverify.surface",)),
    ("models", ("specverify.models",)),
    ("adapters", ("specverify.adapters",)),
    ("mutants", ("specverify.mutants",)),
    ("engines", ("specverify.engines",)),
    ("experiments", ("specverify.experiments",)),
    ("bench", ("specverify.bench",)),
    ("command", ("specverify.cli", "specverify.__main__")),
)
"""The layers, bottom first (docs/ARCHITECTURE.md draws them): a module may import its own layer
and the layers below it, never one above. Every module but the package's ``__init__`` is in
exactly one layer (a module of a prefix, or under it)."""

ROOT_MODULES = {
    "specverify",
    "specverify.__main__",
    "specverify.cli",
    "specverify.errors",
}
"""The package root: the lazy public names (``import specverify``), the ``specverify`` command
(``cli``, ``__main__``) and the one errors module; everything else users touch is in surface/."""


def layer_of(module: str) -> int | None:
    """The index in LAYERS of ``module``'s layer; None for the package's ``__init__``."""
    found = [i for i, (_, prefixes) in enumerate(LAYERS) for p in prefixes if module == p or module.startswith(p + ".")]
    assert module == "specverify" or len(found) == 1, (module, found)
    return found[0] if found else None


def back_arrows(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every import of a module in a higher layer than the importer's."""
    out = []
    for module, targets in sorted(edges.items()):
        here = layer_of(module)
        out += [
            (module, t) for t in sorted(targets) if here is not None and layer_of(t) is not None and layer_of(t) > here
        ]
    return out


def test_every_module_is_in_one_layer():
    assert {m: layer_of(m) for m in MODULES if m != "specverify" and layer_of(m) is None} == {}


def test_back_arrows_finds_an_import_upward():
    assert back_arrows({"specverify.laws.stats": {"specverify.battery.budgets"}}) == [
        ("specverify.laws.stats", "specverify.battery.budgets")
    ]
    assert back_arrows({"specverify.battery.budgets": {"specverify.laws.stats"}}) == []


def test_imports_only_point_down_the_layers():
    assert back_arrows(EDGES) == []


def test_the_package_root_holds_only_the_public_modules():
    root = {m for m, path in MODULES.items() if path.parent == PACKAGE}
    assert root == ROOT_MODULES


INTERFACE_PACKAGES = re.compile(r"^specverify\.interfaces\.(\w+)\.(\w+)$")
"""A module of an interface package (``interfaces.round.cases``): the interfaces hold the same
parts (battery, cases, tasks, checks, counterexample), so such a module is named by its package
and its part (``round.cases``), as readers and imports name it."""


def test_no_two_modules_share_a_name():
    """``interfaces.loop`` is the only ``loop``: a name says which module it is, in any layer (an
    interface package's parts by ``interface.part``)."""
    names: dict[str, list[str]] = {}
    for m in MODULES:
        if m != "specverify" and not m.endswith("__main__") and MODULES[m].name != "__init__.py":
            part = INTERFACE_PACKAGES.match(m)
            names.setdefault(".".join(part.groups()) if part else m.rsplit(".", 1)[1], []).append(m)
    assert {n: ms for n, ms in names.items() if len(ms) > 1} == {}


def test_the_surface_names_no_interface_package():
    """Above the registry nothing names an interface: ``surface/`` reaches the interfaces through
    ``specverify.interfaces`` (``get``, ``detect``, ``protocol.Interface``) and the modules beside
    it, never a module of ``interfaces.round``, ``interfaces.loop`` or ``interfaces.kernel``."""
    packages = {
        m for m, path in MODULES.items() if path.name == "__init__.py" and path.parent.parent.name == "interfaces"
    }
    named = {
        (module, target)
        for module, targets in EDGES.items()
        if module.startswith("specverify.surface.")
        for target in targets
        if target in packages or INTERFACE_PACKAGES.match(target)
    }
    assert named == set()


def test_optimal_imports_no_sampler():
    """optimal (the transport LP) sits below samplers: samplers.transport imports it."""
    assert not {
        m
        for m in EDGES["specverify.laws.optimal_acceptance"]
        if m == "specverify.samplers" or m.startswith("specverify.samplers.")
    }
    assert "specverify.laws.optimal_acceptance" in EDGES["specverify.samplers.transport"]


def test_the_rule_modules_import_nothing_above_them():
    """samplers (the rules) and optimal import only validation, processing, theory, chains,
    optimal, the type names (arrays) and each other: never the batteries, the enumerator, the CLI
    or models/."""
    allowed = {
        "specverify.common.validation",
        "specverify.laws.arrays",
        "specverify.laws.processing",
        "specverify.laws.theory",
        "specverify.laws.chains",
        "specverify.laws.optimal_acceptance",
        "specverify.laws.requests",
    }
    for module, targets in EDGES.items():
        if module == "specverify.laws.optimal_acceptance" or module.startswith("specverify.samplers"):
            above = {t for t in targets if t not in allowed and not t.startswith("specverify.samplers")}
            assert not above, (module, sorted(above))


def test_no_underscore_name_is_used_across_modules():
    unknown = sorted(PRIVATE - KNOWN_PRIVATE_IMPORTS)
    assert not unknown, f"private names used from another module: {unknown}"


MAX_LINES = 500
"""No module of 500 lines or more without a reason stated in its docstring."""

LONG_MODULES = {
    "specverify.mutants.catalogue",
}
"""The modules of MAX_LINES lines or more, each saying why in its docstring (``REASON``). A module
that grows past MAX_LINES fails until it is split or listed here with its reason; one that
shrinks below fails until it is taken off the list."""

REASON = re.compile(r"\b[Oo]ver (\d+) lines because\b(?P<why>.*?)(?:\.\s+[A-Z]|\.$)", re.S)
"""The reason's sentence: "It is over N lines because WHY." (or "Over N lines because WHY."), N a
true lower bound of the module's length, at least 500, and WHY a reason, not a word or two."""


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def size_reason(path: Path) -> str | None:
    """Why a long module is one module, as its docstring says: the WHY of the first REASON
    sentence whose N is at least 500 and at most the module's length, WHY of 60 characters or
    more; None when there is none."""
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    for m in REASON.finditer(" ".join(doc.split())):
        if 500 <= int(m.group(1)) <= _lines(path) and len(m.group("why").strip()) >= 60:
            return m.group("why").strip()
    return None


def test_size_reason_reads_only_a_stated_reason(tmp_path):
    f = tmp_path / "m.py"
    why = "its steps share one run's state (the findings, the cases too slow to judge)"
    wrapped = why.replace(" (", "\n    (")  # over two lines of the docstring
    cases = {
        '"""One line per finding, the lines of a report."""': None,
        '"""Over 500 lines."""': None,
        '"""It is over 500 lines because it is long."""': None,
        f'"""It is over 900 lines because {why}."""': None,  # not that long
        f'"""X.\n\nIt is over 2 lines because {why}."""': None,  # not a reason for 500
        f'"""X.\n\nIt is over 500 lines because {wrapped}. More."""': why,
        f'"""X.\n\nOver 500 lines because {why}."""': why,
    }
    for doc, want in cases.items():
        f.write_text(doc + "\n" * 600)
        assert size_reason(f) == want, doc


def test_no_module_is_long_without_a_stated_reason():
    long = {m for m, path in MODULES.items() if _lines(path) >= MAX_LINES}
    assert not long - LONG_MODULES, (
        f"over {MAX_LINES} lines: split them, or list them in LONG_MODULES "
        f"with an 'It is over N lines because ...' sentence in the docstring: "
        f"{sorted(long - LONG_MODULES)}"
    )
    assert not LONG_MODULES - long, f"no longer over {MAX_LINES} lines: {sorted(LONG_MODULES - long)}"
    unstated = sorted(m for m in LONG_MODULES if size_reason(MODULES[m]) is None)
    assert not unstated, f"no 'It is over N lines because ...' sentence in the docstring of {unstated}"
