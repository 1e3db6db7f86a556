"""The pytest plugin (entry point ``pytest11``: installing specverify is enough).

    def test_my_sampler_is_exact(specverify_check):
        report = specverify_check(my_engine.speculative_step)   # AssertionError unless exact
        assert report.efficient

    @pytest.mark.specverify(budget="quick", seed=3)              # per test, optional
    def test_quick(specverify_check): ...

``specverify_check(sampler, **kwargs)`` is ``specverify.assert_exact`` with the run's budget and
seed: ``--specverify-budget`` (quick | standard | thorough | tv=X; default standard) and
``--specverify-seed`` (default 0), overridden by the test's ``specverify`` marker, overridden by
keyword arguments. A failure's message is the verdict, the findings and the smallest
counterexample side by side. Nothing of specverify's battery is imported until a test uses the
fixture, so the plugin costs other test suites nothing.
"""

from __future__ import annotations

import pytest

DEFAULT_BUDGET = "standard"
DEFAULT_SEED = 0


def pytest_addoption(parser):
    group = parser.getgroup("specverify", "speculative-sampler exactness (specverify)")
    group.addoption("--specverify-budget", metavar="BUDGET", default=None,
                    help="budget of the specverify_check fixture: quick, standard (default), "
                         "thorough or tv=X")
    group.addoption("--specverify-seed", metavar="N", type=int, default=None,
                    help="seed of the specverify_check fixture (default 0)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "specverify(budget=None, seed=None): budget and seed of the specverify_check fixture")
    budget = config.getoption("--specverify-budget")
    if budget is not None:
        from .api import resolve_budget

        try:
            resolve_budget(budget)
        except ValueError as exc:
            raise pytest.UsageError(f"--specverify-budget: {exc}") from None
    seed = config.getoption("--specverify-seed")
    if seed is not None and seed < 0:
        raise pytest.UsageError(f"--specverify-seed: must be >= 0, got {seed}")


def pytest_report_header(config):
    budget = config.getoption("--specverify-budget")
    seed = config.getoption("--specverify-seed")
    if budget is not None or seed is not None:
        return [f"specverify: budget {budget or DEFAULT_BUDGET}, seed "
                f"{DEFAULT_SEED if seed is None else seed}"]
    return []


@pytest.fixture
def specverify_check(request):
    """``(sampler, *, budget=None, seed=None, interface=None, allow_inconclusive=False) ->
    specverify.Report``: run the battery on ``sampler`` and assert that it is exact."""
    config = request.config
    marker = request.node.get_closest_marker("specverify")
    marked = dict(marker.kwargs) if marker else {}
    option_budget = config.getoption("--specverify-budget")
    option_seed = config.getoption("--specverify-seed")

    def check(sampler, *, budget=None, seed=None, **kwargs):
        __tracebackhide__ = True
        from .api import assert_exact

        b = budget or marked.get("budget") or option_budget or DEFAULT_BUDGET
        s = seed if seed is not None else marked.get("seed", option_seed)
        return assert_exact(sampler, budget=b, seed=DEFAULT_SEED if s is None else s, **kwargs)

    return check
