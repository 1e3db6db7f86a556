"""A newcomer's sampler file as it is: it imports a module beside it, and it may be broken.

The target file's folder is on ``sys.path`` while the subject runs (as pytest's rootdir
insertion makes it for the test file), so ``check path/mine_sampler.py:step`` runs; a module that
is neither beside the subject nor installed is a usage error (exit 2) naming the import line,
not advice to ``pip install`` whatever PyPI has under that name; only a package of specverify's
extras, or one an installed package needs, is an environment error (exit 4). The pytest fixture
fails a raising sampler that imports its sibling, and skips only on an environment error, saying
which.

Every check here ends on a contract breach of the subject's first call or before a battery runs,
so no statistical test decides anything (no false-fail rate to state)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specverify.battery.environment import environment_problem, package_of_installed
from specverify.common.command_line import EXIT_ENVIRONMENT, EXIT_USAGE
from specverify.errors import MissingExtra, NoCuda
from specverify.surface.pytest_plugin import skip_reason

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

MINE = "def leviathan(p_fn, q_fn, prefix, k, rng):\n    raise RuntimeError('leviathan is not written yet')\n"
MINE_SAMPLER = (
    "from mine import leviathan\n\n\n"
    "def step(p_fn, q_fn, prefix, k, rng):\n    return leviathan(p_fn, q_fn, prefix, k, rng)\n"
)
TYPO_SAMPLER = (
    "import numpy as np\nfrom leviathann import step as inner\n\n\n"
    "def step(p_fn, q_fn, prefix, k, rng):\n    return inner(p_fn, q_fn, prefix, k, rng)\n"
)
USES_FAKELIB = "import fakelib\n\n\ndef step(p_fn, q_fn, prefix, k, rng):\n    return []\n"
FIXTURE_TESTS = """
from mine_sampler import step


def test_the_function(specverify_check):
    specverify_check(step, budget="quick")


def test_the_target_string(specverify_check):
    specverify_check("mine_sampler.py:step", budget="quick")
"""


@pytest.fixture
def newcomer(tmp_path):
    """A folder as a newcomer has it: the sampler, its sibling, a typo'd one, and a fake
    site-packages whose package ``fakelib`` imports a dependency that is not installed."""
    (tmp_path / "mine.py").write_text(MINE)
    (tmp_path / "mine_sampler.py").write_text(MINE_SAMPLER)
    (tmp_path / "typo_sampler.py").write_text(TYPO_SAMPLER)
    (tmp_path / "uses_fakelib.py").write_text(USES_FAKELIB)
    fakelib = tmp_path / "lib" / "site-packages" / "fakelib"
    fakelib.mkdir(parents=True)
    (fakelib / "__init__.py").write_text("import fakelib_missing_dependency\n")
    return tmp_path


def cli(*args, cwd, pythonpath=()):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *map(str, pythonpath)])}
    proc = subprocess.run(
        [sys.executable, "-m", "specverify", *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_a_sampler_that_imports_its_sibling_is_checked(newcomer, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # not the sampler's folder: sys.path gets that one
    code, out, err = cli(
        "check", str(newcomer / "mine_sampler.py") + ":step", "--budget", "quick", "--verbose", cwd=elsewhere
    )
    assert code == 1, (out, err)
    assert "NOT EXACT" in out and "leviathan is not written yet" in " ".join(out.split())  # wrapped lines
    assert "pip install" not in out + err


def test_a_module_found_nowhere_is_a_usage_error_naming_the_import_line(newcomer):
    code, out, err = cli("check", "typo_sampler.py:step", "--budget", "quick", cwd=newcomer)
    assert code == EXIT_USAGE, (out, err)
    assert "typo_sampler.py:2: 'from leviathann import step as inner'" in err
    assert "no module named 'leviathann'" in err and "pip install" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_dependency_an_installed_package_lacks_is_an_environment_error(newcomer):
    code, out, err = cli(
        "check",
        "uses_fakelib.py:step",
        "--budget",
        "quick",
        cwd=newcomer,
        pythonpath=[newcomer / "lib" / "site-packages"],
    )
    assert code == EXIT_ENVIRONMENT, (out, err)
    assert "the installed package 'fakelib' needs 'fakelib_missing_dependency'" in err


@pytest.mark.parametrize(
    "message, advice",
    [
        ("raised ModuleNotFoundError: No module named 'torch'", "pip install 'specverify[models]'"),
        ("raised ModuleNotFoundError: No module named 'ray.util'", "pip install 'specverify[ray]'"),
        ("raised ModuleNotFoundError: No module named 'numpy.not_a_part'", "pip install numpy"),  # partial install
        (
            "raised ModuleNotFoundError: No module named 'xformers' [imported by the installed package 'vllm']",
            "the installed package 'vllm' needs 'xformers'",
        ),
        ("raised ModuleNotFoundError: No module named 'mine' (at mine_sampler.py:4 in step)", None),
        ("raised ModuleNotFoundError: No module named 'flash_attn.ops'", "pip install flash_attn"),  # a GPU's
        ("raised ModuleNotFoundError: No module named 'mine_helpers.ops'", None),  # the subject's own import
    ],
)
def test_which_missing_module_is_the_environments_fault(message, advice):
    got = environment_problem(message)
    assert (got is None) if advice is None else (advice in got), got


def test_installed_code_is_told_by_its_folder(tmp_path):
    assert package_of_installed(str(tmp_path / "site-packages" / "vllm" / "worker.py")) == "vllm"
    assert package_of_installed(str(tmp_path / "dist-packages" / "six.py")) == "six"
    assert package_of_installed(str(tmp_path / "mine.py")) is None


def test_a_skip_says_which_environment_error():
    assert skip_reason(NoCuda("x: cannot run here")).startswith("specverify: no CUDA on this machine: x")
    assert skip_reason(MissingExtra("y")).startswith("specverify: a package is missing here: y")


def test_the_fixture_fails_a_raising_sampler_that_imports_its_sibling(pytester, newcomer, monkeypatch):
    """The pytest run fails (exit 1, two failures, nothing skipped) whether the test imports the
    sampler (pytest's rootdir insertion) or names it as a TARGET string."""
    from test_pytest_plugin import plugin_args

    for name in ("mine.py", "mine_sampler.py"):
        (pytester.path / name).write_text((newcomer / name).read_text())
    pytester.makepyfile(test_mine=FIXTURE_TESTS)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(failed=2)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*NOT EXACT*", "*leviathan is not written yet*"])
