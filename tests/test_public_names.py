"""The names users import keep working: every public module's ``__all__``, the entry points
``pip install`` registers (the ``specverify`` command, the pytest plugin), and every import and
every dotted ``specverify.*`` name that the README and docs/ show."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

PUBLIC_MODULES = (
    "specverify",
    "specverify.surface.api",
    "specverify.surface.strategies",
    "specverify.interfaces",
    "specverify.samplers",
    "specverify.mutants",
)
"""The modules users import from, each promising its ``__all__``."""


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_name_of_a_public_module_imports(module):
    mod = importlib.import_module(module)
    assert mod.__all__, module
    missing = [name for name in mod.__all__ if getattr(mod, name, None) is None]
    assert missing == [], (module, missing)


def test_the_api_names_the_docs_use():
    import specverify
    from specverify.surface.api import (
        Report,
        assert_exact,
        check,
    )

    assert specverify.check is check and specverify.assert_exact is assert_exact and specverify.Report is Report


def _entry_point(group: str, name: str) -> importlib.metadata.EntryPoint:
    found = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == name]
    assert len(found) == 1, (group, name, found)
    return found[0]


def test_the_installed_entry_points_load():
    """``pip install`` registers the ``specverify`` command and the pytest plugin (the suite runs on
    an installed package: tox, or ``pip install -e .``)."""
    from specverify import cli
    from specverify.surface import pytest_plugin

    assert _entry_point("console_scripts", "specverify").load() is cli.run
    assert _entry_point("pytest11", "specverify").load() is pytest_plugin


def documented_imports(text: str) -> list[str]:
    """The ``import specverify...`` and ``from specverify... import ...`` lines of ``text``, one
    statement each (a parenthesised name list joined onto one line)."""
    text = re.sub(r"\(\s*([^()]*?)\s*\)", lambda m: " ".join(m.group(1).split()), text)
    found = re.findall(
        r"^\s*(?:>>> )?((?:from specverify[\w.]* import [\w, ]+)|(?:import specverify[\w.]*))", text, re.M
    )
    return [line.strip().rstrip(",") for line in found]


FILE_SUFFIXES = {"xml", "json", "md", "py", "txt", "csv", "png", "toml", "log"}
"""A dotted name ending in one of these is a file (``specverify.xml``, a report), not a module."""


def documented_dotted_names(text: str) -> set[str]:
    """Every ``specverify.a.b`` written in ``text`` (code spans and prose) that is not a file name."""
    found = {m.rstrip(".") for m in re.findall(r"\bspecverify(?:\.[A-Za-z_]\w*)+", text)}
    return {name for name in found if name.rsplit(".", 1)[1] not in FILE_SUFFIXES}


def resolve(dotted: str):
    """The object ``dotted`` names: its longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as exc:
            if exc.name and not dotted.startswith(exc.name):
                raise  # a missing third-party package, not a stale name
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_documented_imports_and_names_are_read_from_markdown():
    text = "```python\nfrom specverify.surface.api import (\n    check,\n    Report,\n)\nimport specverify.laws.exact\n```\n"
    assert documented_imports(text) == [
        "from specverify.surface.api import check, Report",
        "import specverify.laws.exact",
    ]
    assert documented_dotted_names("see `specverify.laws.exact.EnumeratingRng`; --junit-xml specverify.xml") == {
        "specverify.laws.exact.EnumeratingRng"
    }
    with pytest.raises((ModuleNotFoundError, AttributeError)):
        resolve("specverify.no_such_module.name")


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_import_a_page_shows_works(page):
    failed = []
    for line in documented_imports(page.read_text()):
        try:
            exec(line, {})  # noqa: S102 - the documented statement itself, as a reader would run it
        except ImportError as exc:
            failed.append(f"{line} ({type(exc).__name__}: {exc})")
    assert failed == [], f"{page.name} shows imports that fail: {failed}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_dotted_name_a_page_shows_exists(page):
    stale = []
    for name in sorted(documented_dotted_names(page.read_text())):
        try:
            resolve(name)
        except (ModuleNotFoundError, AttributeError) as exc:
            stale.append(f"{name} ({type(exc).__name__}: {exc})")
    assert stale == [], f"{page.name} names what does not exist: {stale}"
