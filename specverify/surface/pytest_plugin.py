"""The pytest plugin (entry point ``pytest11``: installing specverify is enough).

    def test_my_sampler_is_exact(specverify_check):
        report = specverify_check(my_engine.speculative_step)   # AssertionError unless exact
        assert report.efficient

    @pytest.mark.specverify(budget="quick", seed=3)              # per test, optional
    def test_quick(specverify_check): ...

The marker takes keywords only (``MARKER_KEYWORDS``: budget, seed, interface,
allow_inconclusive, precision, reference: the engine's own target-only path, a TARGET string or
a function, as ``specverify.check``'s); a positional argument, another keyword or a bad value errors the test that
uses the fixture with a message naming the marker. A keyword given as None is as if not given.

``specverify_check(sampler, **kwargs)`` is ``specverify.assert_exact`` with the run's budget and
seed: ``--specverify-budget`` (quick | standard | thorough | tv=X; default standard) and
``--specverify-seed`` (default 0), overridden by the test's ``specverify`` marker, overridden by
keyword arguments. A failure's message is the verdict, the findings and the smallest
counterexample side by side.

**When it skips.** Only on an environment error (``specverify.errors.EnvironmentProblem``: no
CUDA here, or a package missing under ``battery.environment``'s rule: an extra's, or one an
installed package needs), and the skip's reason says which. A subject that raises, breaks its
contract, or imports a module of its own that cannot be found fails the test (an
``AssertionError`` with the report, or the ``UsageError`` naming the import line): a CI that uses
the fixture never goes green on a broken sampler. Nothing of specverify's battery is imported until a test uses the
fixture, so the plugin costs other test suites nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from ..common.command_line import is_terminal
from ..errors import UsageError

if TYPE_CHECKING:
    from ..battery.runner import Runner
    from .verdict import Report

DEFAULT_BUDGET = "standard"
DEFAULT_SEED = 0
MARKER_KEYWORDS = ("budget", "seed", "interface", "allow_inconclusive", "precision", "reference")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specverify", "speculative-sampler exactness (specverify)")
    group.addoption(
        "--specverify-budget",
        metavar="BUDGET",
        default=None,
        help="budget of the specverify_check fixture: quick, standard (default), thorough or tv=X",
    )
    group.addoption(
        "--specverify-seed",
        metavar="N",
        type=int,
        default=None,
        help="seed of the specverify_check fixture (default 0)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "specverify(budget=None, seed=None, interface=None, allow_inconclusive=False, precision=None, "
        "reference=None): "
        "keywords of the specverify_check fixture for this test",
    )
    budget = config.getoption("--specverify-budget")
    if budget is not None:
        from ..battery.budgets import check_budget

        try:
            check_budget(budget)
        except UsageError as exc:
            raise pytest.UsageError(f"--specverify-budget: {exc}") from None
    seed = config.getoption("--specverify-seed")
    if seed is not None and seed < 0:
        raise pytest.UsageError(f"--specverify-seed: must be >= 0, got {seed}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    budget = config.getoption("--specverify-budget")
    seed = config.getoption("--specverify-seed")
    if budget is not None or seed is not None:
        return [f"specverify: budget {budget or DEFAULT_BUDGET}, seed {DEFAULT_SEED if seed is None else seed}"]
    return []


def marker_keywords(node: pytest.Item | pytest.Collector) -> dict[str, Any]:
    """The keywords of the closest ``specverify`` marker, those given as None left out; a
    positional argument, an unknown keyword or a bad budget / seed fails the test (at set-up,
    without a traceback) with a message naming the marker and the keywords it takes."""
    marker = node.get_closest_marker("specverify")
    if marker is None:
        return {}
    allowed = ", ".join(MARKER_KEYWORDS)
    if marker.args:
        hint = f" (budget={marker.args[0]!r}?)" if isinstance(marker.args[0], str) else ""
        pytest.fail(
            f"@pytest.mark.specverify takes keywords only ({allowed}), got positional "
            f"argument(s) {', '.join(map(repr, marker.args))}{hint}",
            pytrace=False,
        )
    unknown = sorted(set(marker.kwargs) - set(MARKER_KEYWORDS))
    if unknown:
        pytest.fail(
            f"@pytest.mark.specverify: unknown keyword(s) {', '.join(unknown)}; it takes {allowed}", pytrace=False
        )
    given = {k: v for k, v in marker.kwargs.items() if v is not None}
    if "budget" in given:
        from ..battery.budgets import check_budget

        try:
            check_budget(given["budget"])
        except UsageError as exc:
            pytest.fail(f"@pytest.mark.specverify: {exc}", pytrace=False)
    seed = given.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        pytest.fail(f"@pytest.mark.specverify: seed: must be an integer >= 0, got {seed!r}", pytrace=False)
    return given


@pytest.fixture
def specverify_check(request: pytest.FixtureRequest) -> Callable[..., Report]:
    """``(sampler, *, budget=None, seed=None, interface=None, allow_inconclusive=False) ->
    specverify.Report``: run the battery on ``sampler`` and assert that it is exact. Each
    keyword: given here, else the test's ``specverify`` marker, else the command line's
    ``--specverify-budget`` / ``--specverify-seed``, else the default."""
    config = request.config
    marked = marker_keywords(request.node)
    option_budget = config.getoption("--specverify-budget")
    option_seed = config.getoption("--specverify-seed")

    def check(
        sampler: str | Runner | Callable[..., Any],
        *,
        budget: Any = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> Report:
        __tracebackhide__ = True
        from .api import assert_exact

        b = budget or marked.get("budget") or option_budget or DEFAULT_BUDGET
        s = next((x for x in (seed, marked.get("seed"), option_seed) if x is not None), DEFAULT_SEED)
        for key in ("interface", "allow_inconclusive", "precision", "reference"):
            if kwargs.get(key) is None and key in marked:
                kwargs[key] = marked[key]
        from ..errors import EnvironmentProblem

        with status_line_through_capture(config, kwargs):
            try:
                return assert_exact(sampler, budget=b, seed=s, **kwargs)
            except EnvironmentProblem as exc:  # not evidence about exactness: this test cannot run here
                pytest.skip(skip_reason(exc))

    return check


SKIP_KINDS = {"NoCuda": "no CUDA on this machine", "MissingExtra": "a package is missing here"}
"""What each environment error says in a skip's reason."""


def skip_reason(exc: BaseException) -> str:
    """The reason of a skip for the environment error ``exc``: which kind (no CUDA, a missing
    package) and the error's own line with what to do."""
    kind = SKIP_KINDS.get(type(exc).__name__, "this environment cannot run it")
    return f"specverify: {kind}: {exc}"


@contextlib.contextmanager
def status_line_through_capture(config: pytest.Config, kwargs: dict[str, Any]) -> Iterator[None]:
    """The check's status line (``check``'s ``progress``) reaches the terminal through pytest's
    output capture: while the battery runs, capture is suspended (only specverify's code runs
    here; the subject's output goes to its own capture file) and, when stderr is then a terminal,
    the line is shown below the test's name and erased when done. Not under pytest-xdist (a
    worker has no terminal) nor when the caller passed ``progress``."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if kwargs.get("progress") is not None or capman is None or os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    with capman.global_and_fixture_disabled():
        if is_terminal(sys.stderr):
            sys.stderr.write("\n")  # below pytest's partial line, which the erased status line keeps
            kwargs["progress"] = True
        yield
