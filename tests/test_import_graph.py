"""The import structure of specverify, read from the source (no module is imported), and the
size of its modules (none over ``MAX_LINES`` without a reason stated in its docstring).

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
"""Import circles that remain in files this test's author did not own, each with the file to
change. None: optimal <-> samplers.transport (the round optimum moved to ``optimum_tokens``),
adapters.hf_generate <-> adapters.hf_loop (``engine_context`` moved to ``adapters.hf``) and the
samplers package <-> its modules (the registry moved to ``samplers.registry``) are gone."""

KNOWN_PRIVATE_IMPORTS: set[tuple[str, str, str]] = set()
"""Underscore names used across modules: none left (detectors' RoundBattery, PASSED_THROUGH and
target_distribution, engines.loader's wheel_file are public); the set may only shrink."""


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
            if (isinstance(node, ast.Attribute) and _private(node.attr)
                    and isinstance(node.value, ast.Name) and node.value.id in aliases):
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
    assert "specverify.models.decoding" in EDGES["specverify.models.tree"]
    assert "specverify.samplers.registry" in EDGES["specverify.samplers"]


def test_cycles_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_specverify_modules():
    found = cycles(EDGES)
    unknown = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert not unknown, f"import circles: {unknown}"


def test_optimal_imports_no_sampler():
    """optimal (the transport LP) sits below samplers: samplers.transport imports it."""
    assert not {m for m in EDGES["specverify.optimal"]
                if m == "specverify.samplers" or m.startswith("specverify.samplers.")}
    assert "specverify.optimal" in EDGES["specverify.samplers.transport"]


def test_the_rule_modules_import_nothing_above_them():
    """samplers (the rules) and optimal import only validation, processing, theory, chains,
    optimal and each other: never the batteries, the enumerator, the CLI or models/."""
    allowed = {"specverify.validation", "specverify.processing", "specverify.theory",
               "specverify.chains", "specverify.optimal", "specverify.loop"}
    for module, targets in EDGES.items():
        if module == "specverify.optimal" or module.startswith("specverify.samplers"):
            above = {t for t in targets if t not in allowed and not t.startswith("specverify.samplers")}
            assert not above, (module, sorted(above))


def test_no_underscore_name_is_used_across_modules():
    unknown = sorted(PRIVATE - KNOWN_PRIVATE_IMPORTS)
    assert not unknown, f"private names used from another module: {unknown}"


MAX_LINES = 520
"""Issue 21: no module over ~500 lines without a reason stated in its docstring."""

LONG_MODULES = {
    "specverify.stats", "specverify.exact", "specverify.mutants.catalogue",
    "specverify.interfaces.kernel", "specverify.interfaces.round", "specverify.adapters.kernels",
    "specverify.models.medusa", "specverify.runner",
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
    assert not long - LONG_MODULES, (f"over {MAX_LINES} lines: split them, or list them in LONG_MODULES "
                                     f"with an 'It is over N lines because ...' sentence in the docstring: "
                                     f"{sorted(long - LONG_MODULES)}")
    assert not LONG_MODULES - long, f"no longer over {MAX_LINES} lines: {sorted(LONG_MODULES - long)}"
    unstated = sorted(m for m in LONG_MODULES if size_reason(MODULES[m]) is None)
    assert not unstated, f"no 'It is over N lines because ...' sentence in the docstring of {unstated}"
