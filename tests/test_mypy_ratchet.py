"""tools/mypy_ratchet.py's bookkeeping, without running mypy (``tox -e types`` runs it): how it
reads mypy's report, which modules it holds to zero, and which counts fail."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("mypy_ratchet", ROOT / "tools" / "mypy_ratchet.py")
ratchet = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ratchet)

REPORT = [
    'specverify/battery/runner.py:765: error: Item "None" of "X | None" has no attribute "y"  [union-attr]',
    "specverify/battery/runner.py:765: note: see https://mypy.readthedocs.io",
    "specverify/battery/runner.py:811:12: error: Incompatible types in assignment  [assignment]",
    "specverify/surface/junit.py:3: error: Missing return statement  [return]",
    "Found 3 errors in 2 files (checked 64 source files)",
]


def test_errors_are_counted_per_file_and_notes_are_not():
    assert ratchet.count_errors(REPORT) == {"specverify/battery/runner.py": 2, "specverify/surface/junit.py": 1}


def test_the_strict_modules_are_read_from_pyproject():
    strict = ratchet.strict_files()
    assert {"specverify/__init__.py", "specverify/cli.py", "specverify/surface/api.py"} <= strict
    assert "specverify/laws/theory.py" in strict and "specverify/battery/executors.py" in strict
    assert all((ROOT / f).is_file() for f in strict), sorted(f for f in strict if not (ROOT / f).is_file())


def test_a_rise_a_new_file_and_a_strict_error_fail_and_a_fall_asks_for_a_lower_baseline():
    baseline = {"a.py": 3, "b.py": 2, "gone.py": 1}
    rises, falls = ratchet.compare({"a.py": 4, "b.py": 1, "new.py": 1, "s.py": 1}, baseline, {"s.py"})
    assert rises == [
        "  a.py: 4 errors, baseline 3",
        "  new.py: 1 errors, baseline 0",
        "  s.py: 1 errors, baseline 0 (held to strict mode: zero)",
    ]
    assert falls == ["  b.py: 1 errors, baseline 2", "  gone.py: 0 errors, baseline 1"]
    assert ratchet.compare({"a.py": 3}, {"a.py": 3}, set()) == ([], [])


def test_the_committed_baseline_excuses_no_strict_module():
    import json

    baseline = json.loads((ROOT / "mypy-baseline.json").read_text())
    assert not set(baseline) & ratchet.strict_files()
    assert all(isinstance(n, int) and n > 0 for n in baseline.values())
