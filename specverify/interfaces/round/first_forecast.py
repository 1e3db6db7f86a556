"""The forecast a round battery prints right after its contract, before any enumeration.

An enumerated case costs one subject call per path of the sampler's random decisions, and at
standard those paths are most of a verdict's calls (the exact laws come before the sampled runs,
``round.battery``). Before the first path is spent, ``first_forecast_words`` tells the calls and
seconds of the whole budget at the pace the contract's rounds measured: the enumerations' calls
as Leviathan et al.'s rule (arXiv 2211.17192, ``samplers.chain.speculative_step``) spends them on
the same cases under the same path caps, plus the sampled runs the budget plans when every case
is enumerated, and the same for the other named budgets. A subject that branches on more of its
draws than the rule spends more calls (at most each case's cap), or fewer where a case is refused
at once (``summed_draws.wide_paths_foreseen``); the forecast after the enumerations
(``round.reach.forecast_words``) tells its sampled runs as they are.

The rule's counts depend on the code and the cases only, not on the subject, so they are kept on
disk (``$SPECVERIFY_CACHE_DIR``, else ``~/.cache/specverify``; keyed by a hash of the package's
sources, so any change of code recounts): the thorough budget's 46,000 counted paths cost about
10 s of CPU before the first enumeration of every check otherwise. A cache that cannot be read or
written is recounted, never an error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from ...common.files import write_atomically
from ...laws import exact
from ...samplers.chain import speculative_step
from .cases import ENGINE_VOCAB_ORIGIN, Budget, Case, engine_vocab_paths, round_length_cases

_REFERENCE_PATHS: dict = {}  # "case's name|k|m|cap|lengths" -> the rule's calls: the same on every run
_PACKAGE = Path(__file__).resolve().parents[2]


@functools.cache
def _sources_digest() -> str:
    digest = hashlib.sha256()
    for source in sorted(_PACKAGE.rglob("*.py")):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def cache_file() -> Path:
    """This code's cache of the rule's counts: one file per hash of the package's sources."""
    root = os.environ.get("SPECVERIFY_CACHE_DIR") or Path.home() / ".cache" / "specverify"
    return Path(root) / f"reference-paths-{_sources_digest()}.json"


def _load_cached() -> None:
    if not _REFERENCE_PATHS:
        try:
            _REFERENCE_PATHS.update(json.loads(cache_file().read_text()))
        except (OSError, ValueError, TypeError):
            pass


def _save_cached() -> None:
    try:
        cache_file().parent.mkdir(parents=True, exist_ok=True)
        write_atomically(cache_file(), json.dumps(_REFERENCE_PATHS, sort_keys=True))
    except OSError:
        pass


def path_cap(budget: Budget, case: Case, swept: set) -> int:
    """The paths ``case``'s enumeration may take under ``budget`` (``round.sampling``'s
    ``enumeration_args``: a swept case's ``sweep_max_paths``, the engine-vocabulary case's own)."""
    cap = budget.sweep_max_paths if case.name in swept else budget.max_paths
    if case.name.startswith(ENGINE_VOCAB_ORIGIN):
        cap = min(budget.max_paths, engine_vocab_paths(case.model.vocab_size))
    return cap


def reference_calls(case: Case, cap: int, lengths: bool = False) -> int:
    """Subject calls the reference rule's enumeration of ``case`` takes under ``cap`` paths (its
    round-length law with ``lengths``); memoized per case, cap and law, in the process and on
    disk. A case the rule cannot finish within its cap costs the cap."""
    key = f"{case.name}|{case.k}|{case.m}|{cap}|{lengths}"
    _load_cached()
    if key not in _REFERENCE_PATHS:
        calls = [0]

        def counted(*args):
            calls[0] += 1
            return speculative_step(*args)

        m = case.model
        try:
            if lengths:
                exact.round_length_distribution(counted, m.p_fn, m.q_fn, case.prefix, case.k, max_paths=cap)
            else:
                exact.sampler_distribution(counted, m.p_fn, m.q_fn, case.prefix, case.k, case.m, max_paths=cap)
        except exact.NotEnumerable:
            calls[0] = cap
        _REFERENCE_PATHS[key] = calls[0]
    return _REFERENCE_PATHS[key]


def enumeration_calls(budget: Budget, cases: list[Case], swept: set) -> int:
    """The reference rule's enumeration calls for ``cases`` and the round-length laws under
    ``budget``'s caps (``reference_calls``)."""
    known = len(_REFERENCE_PATHS)
    calls = sum(reference_calls(c, path_cap(budget, c, swept)) for c in cases)
    calls += sum(reference_calls(c, budget.max_paths, True) for c in round_length_cases())
    if len(_REFERENCE_PATHS) > known:
        _save_cached()
    return calls


def first_forecast_words(budget: Budget, enumerations: int, pace: float | None, others: dict):
    """Words (a ``round.reach.Forecast``) for ``budget``'s ``enumerations`` calls at ``pace``
    rounds a second, and ``others``' (name -> their calls)."""
    from .reach import Forecast

    if pace is None:
        return Forecast.of(
            f"forecast before enumerating: the {budget.name} budget's exact laws take at most about {enumerations:,} calls",
            None,
        )
    words = (
        f"forecast before enumerating, at about {pace:,.0f} rounds/s: the {budget.name} budget's exact laws "
        f"take at most about {enumerations:,} calls, about {enumerations / pace:,.0f} s"
    )
    for name, calls in others.items():
        words += f"; {name}: at most about {calls:,} calls, {calls / pace:,.0f} s"
    return Forecast.of(words, enumerations / pace)


def other_enumerations(budget: Budget, seed: int, case_lists) -> dict:
    """For each named budget other than ``budget``: the reference rule's enumeration calls
    (``enumeration_calls``) on that budget's cases (``case_lists(b) -> (cases, swept names)``)."""
    from ...battery.budgets import NAMES
    from .cases import get_budget

    out = {}
    for name in NAMES:
        if name != budget.name:
            b = get_budget(name)
            cases, swept = case_lists(b)
            out[name] = enumeration_calls(b, cases, swept)
    return out


__all__ = [
    "cache_file",
    "enumeration_calls",
    "first_forecast_words",
    "other_enumerations",
    "path_cap",
    "reference_calls",
]
