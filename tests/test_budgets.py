"""The one budget table (``specverify.battery.budgets``) and the usage errors it makes quick:
a section for every interface under every name, the interface modules' tables as
views of it, the one resolver ``section`` (a name, ``tv=X``, the interface's own object, another
interface's object by its name, an unknown name), and no NumPy, SciPy, torch or battery loaded by
the budgets module or by a ``check`` / ``bench`` command line that fails to parse.

No statistics run here (the round ``tv=X`` section computes run counts only): deterministic."""

import ast
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from specverify import interfaces
from specverify.battery import budgets
from specverify.battery import core as battery
from specverify.common import validation
from specverify.interfaces.kernel import battery as kernel
from specverify.interfaces.loop import cases as loop_cases
from specverify.interfaces.round import cases as round_cases
from specverify.laws import stats

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "numpy",
    "scipy",
    "torch",
    "specverify.battery.core",
    "specverify.surface.api",
    "specverify.surface.check_run",
    "specverify.interfaces.round.cases",
    "specverify.interfaces.loop.cases",
    "specverify.interfaces.kernel.battery",
)
"""Modules a usage error must not wait for."""


def test_the_table_has_every_interface_under_every_name():
    assert budgets.NAMES == ("quick", "standard", "thorough")
    assert set(budgets.CLASSES) == set(interfaces.NAMES)
    for name in budgets.NAMES:
        assert set(budgets.TABLE[name]) == set(interfaces.NAMES), name
        for interface, b in budgets.TABLE[name].items():
            assert isinstance(b, budgets.CLASSES[interface]) and b.name == name, (name, interface)
            assert b.false_fail_rate == budgets.DEFAULT_FALSE_FAIL_RATE


def test_the_interface_tables_are_views_of_the_one_table():
    for name in budgets.NAMES:
        assert round_cases.BUDGETS[name] is budgets.TABLE[name]["round"]
        assert loop_cases.LOOP_BUDGETS[name] is budgets.TABLE[name]["loop"]
        assert kernel.KERNEL_BUDGETS[name] is budgets.TABLE[name]["kernel"]
        for interface in interfaces.NAMES:
            assert interfaces.get(interface).budget(name) is budgets.TABLE[name][interface]
    assert round_cases.Budget is budgets.Budget and loop_cases.LoopBudget is budgets.LoopBudget
    assert kernel.KernelBudget is budgets.KernelBudget
    assert loop_cases.get_loop_budget("quick") is budgets.TABLE["quick"]["loop"]


def test_the_shared_constants_are_the_budget_modules():
    assert stats.DEFAULT_FALSE_FAIL_RATE == battery.DEFAULT_FALSE_FAIL_RATE == budgets.DEFAULT_FALSE_FAIL_RATE == 1e-6
    assert battery.CAMPAIGN_SECONDS == budgets.CAMPAIGN_SECONDS == 7 * 24 * 3600.0
    assert validation.DEFAULT_FALSE_FAIL_RATE == budgets.DEFAULT_FALSE_FAIL_RATE


@pytest.mark.parametrize("interface", interfaces.NAMES)
def test_a_name_gives_the_sections_and_an_own_object_is_kept(interface):
    assert budgets.section(interface, "standard") is budgets.TABLE["standard"][interface]
    own = replace(budgets.TABLE["quick"][interface], name="mine", call_limit_s=9.0)
    assert budgets.section(interface, own) is own


@pytest.mark.parametrize("interface", interfaces.NAMES)
def test_another_interfaces_object_is_taken_by_its_name(interface):
    for other in interfaces.NAMES:
        given = replace(budgets.TABLE["thorough"][other], call_limit_s=9.0)
        got = budgets.section(interface, given)
        assert got == (given if other == interface else budgets.TABLE["thorough"][interface])


def test_tv_x_is_each_interfaces_campaign():
    loop = budgets.section("loop", "tv=0.05")
    assert loop == loop_cases.campaign_loop_budget("tv=0.05")
    assert (loop.name, loop.detect_tv, loop.samples, loop.extra_samples) == ("tv=0.05", 0.05, 0, 0)
    assert loop.seeds == budgets.TABLE["thorough"]["loop"].seeds
    # no clock decides a loop run either: a call's limit, and a task stopped only when idle (a hang)
    assert {n for n in vars(loop) if n.endswith("_s")} == {"call_limit_s", "task_idle_s"}
    k = budgets.section("kernel", "tv=0.0010")
    assert (k.name, k.detect_tv, k.n_max) == ("tv=0.0010", 0.001, 1 << 40)
    r = round_cases.get_budget("tv=0.05")  # the round hands section its own builder
    assert r == round_cases.campaign_budget(0.05) == budgets.section("round", "tv=0.05", round_cases.campaign_budget)
    with pytest.raises(KeyError, match="campaign_of"):
        budgets.section("round", "tv=0.05")  # budgets never loads an interface
    assert (r.name, r.detect_tv, r.stat_cases) == ("tv=0.05", 0.05, len(budgets.TABLE["thorough"]["round"].cases))
    assert r.n_max == round_cases.campaign_runs(0.05)["n_max"]
    # no clock decides a round run: its only seconds are guards against a hang
    assert {n for n in vars(r) if n.endswith("_s")} == {
        "call_limit_s",
        "scale_call_limit_s",
        "enumeration_idle_s",
        "counterexample_guard_s",
    }
    # another interface's campaign object: this interface's campaign of the same name
    assert budgets.section("loop", r) == loop and budgets.section("kernel", r).detect_tv == 0.05
    assert round_cases.get_budget(loop) == r


def another(interface: str) -> str:
    """An interface other than ``interface``."""
    return next(n for n in interfaces.NAMES if n != interface)


@pytest.mark.parametrize("interface", interfaces.NAMES)
@pytest.mark.parametrize("given", ["huge", "", 3, None, "another's object named 'fast'"])
def test_an_unknown_budget_is_one_error_naming_budget(interface, given):
    if given == "another's object named 'fast'":
        given = replace(budgets.TABLE["quick"][another(interface)], name="fast")
    name = getattr(given, "name", given)
    with pytest.raises(
        interfaces.InterfaceError,
        match=rf"^budget: the {interface} interface has the budgets quick, standard, "
        rf"thorough or tv=X \(0 < X < 1\), got {re.escape(repr(name))}$",
    ):
        budgets.section(interface, given)


@pytest.mark.parametrize("interface", interfaces.NAMES)
@pytest.mark.parametrize("tv", ["tv=0", "tv=1", "tv=x", "tv="])
def test_a_bad_tv_is_named(interface, tv):
    with pytest.raises(ValueError, match=r"^budget: tv=X needs 0 < X < 1"):
        budgets.section(interface, tv)
    with pytest.raises(ValueError, match=r"^budget: tv=X needs 0 < X < 1"):
        budgets.check_name(tv)


def test_check_name_builds_nothing():
    assert [budgets.check_name(n) for n in ("quick", "tv=1e-9")] == ["quick", "tv=1e-9"]
    with pytest.raises(interfaces.InterfaceError, match=r"^budget: every interface has the budgets .*got 'huge'$"):
        budgets.check_name("huge")


def loaded_after(code: str) -> list[str]:
    """The HEAVY modules loaded once ``code`` ran in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120, check=True
    ).stdout
    return ast.literal_eval(out.strip().splitlines()[-1])


def test_the_budget_module_imports_nothing_heavy():
    assert (
        loaded_after("import specverify.battery.budgets as b; b.section('loop', 'tv=0.1'); b.check_name('quick')") == []
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["specverify", "check", "--bogus"],
        ["specverify", "check", "a:b", "--budget", "huge"],
        ["specverify.bench", "--bogus"],
        ["specverify.bench", "--budget", "huge"],
    ],
    ids=" ".join,
)
def test_a_usage_error_of_check_and_bench_loads_nothing_heavy(argv):
    """Through the command's own entry (``python -m``), run in-process by runpy so that what it
    loaded before exiting 2 can be read."""
    module, args = argv[0], argv[1:]
    code = (
        "import runpy, sys\n"
        f"sys.argv = [{module!r}, *{args!r}]\n"
        "try:\n"
        f"    runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 2, exc.code"
    )
    assert loaded_after(code) == []


def test_check_help_still_says_what_each_budget_covers():
    out = subprocess.run(
        [sys.executable, "-m", "specverify", "check", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=True,
    ).stdout
    flat = " ".join(out.split()).replace("- ", "-")  # argparse may wrap a line after a hyphen
    for name in budgets.NAMES:
        assert f"{name}: {round_cases.coverage(name)}" in flat, name
