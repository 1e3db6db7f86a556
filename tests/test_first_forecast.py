"""The round battery's first forecast (``round.first_forecast``): said right after the contract,
before the first enumeration, counting the enumerations' calls; and a case whose paths
foreseeably pass its cap refused before they are spent (``summed_draws.wide_paths_foreseen``)."""

from __future__ import annotations

import os
import re

import pytest

from specverify.battery.subject_calls import listening
from specverify.bench.calls import CALLS_FILE_VARIABLE, counted_choice_form
from specverify.interfaces.round.battery import RoundBattery, run_battery
from specverify.laws import exact
from specverify.laws.summed_draws import SUMMED_FROM


def test_the_first_forecast_comes_before_the_first_enumeration_and_counts_its_calls(monkeypatch, tmp_path):
    """Quick, no sweeps or engine-vocabulary case: the first words said are the enumerations'
    forecast, before any enumeration runs, and its calls are the calls the enumerations took
    (the subject is the rule the forecast counts, one byte written per call)."""
    calls_file = tmp_path / "calls"
    calls_file.write_bytes(b"")
    monkeypatch.setenv(CALLS_FILE_VARIABLE, str(calls_file))
    events: list = []
    spent = [0]
    enumeration = RoundBattery.enumeration

    def watched(self, args, reference=None):
        events.append("enumeration")
        before = os.path.getsize(calls_file)
        out = enumeration(self, args, reference)
        spent[0] += os.path.getsize(calls_file) - before
        return out

    monkeypatch.setattr(RoundBattery, "enumeration", watched)
    with listening(events.append):
        result = run_battery(counted_choice_form, "quick", 0, sweep_context=0, sweep_k=0, engine_vocab=0)
    assert result.exact is True
    first = events.index("enumeration")
    said = [e for e in events[:first] if e != "enumeration"]
    assert len(said) == 1 and said[0].startswith("forecast before enumerating")
    assert (
        said[0].seconds is not None
        and "; standard: at most about " in said[0]
        and "; thorough: at most about " in said[0]
    )
    forecast_calls = int(re.search(r"exact laws take at most about ([\d,]+) calls", said[0]).group(1).replace(",", ""))
    assert spent[0] > 0 and forecast_calls == spent[0]


def _two_wide_draws(rng):
    return int(rng.choice(SUMMED_FROM)), int(rng.choice(SUMMED_FROM))


def test_two_wide_draws_on_one_path_are_refused_before_their_paths_are_spent():
    """SUMMED_FROM^2 paths under a cap of 100: refused on the first path, naming both draws."""
    runs = [0]

    def fn(rng):
        runs[0] += 1
        return _two_wide_draws(rng)

    with pytest.raises(exact.NotEnumerable, match=f"two draws over {SUMMED_FROM} and {SUMMED_FROM} ids"):
        exact.enumerate_distribution(fn, max_paths=100)
    assert runs[0] == 1


def test_two_wide_draws_within_the_cap_are_enumerated_as_before():
    """With room for every path the law is the uniform one over the pairs, every path visited."""
    law = exact.enumerate_distribution(_two_wide_draws, max_paths=SUMMED_FROM**2)
    assert len(law) == SUMMED_FROM**2
    assert all(abs(w - 1 / SUMMED_FROM**2) < 1e-15 for w in law.values())


def test_the_rules_counts_are_kept_on_disk_and_read_back(monkeypatch, tmp_path):
    """The reference rule's path counts are the same on every run of this code: counted once, a
    later process reads them from the cache (here: the in-process memo emptied) and counts nothing."""
    from specverify.interfaces.round import first_forecast
    from specverify.interfaces.round.cases import battery, get_budget

    monkeypatch.setenv("SPECVERIFY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(first_forecast, "_REFERENCE_PATHS", {})
    budget = get_budget("quick")
    cases = battery(budget)[:2]
    counted = first_forecast.enumeration_calls(budget, cases, set())
    assert counted > 0 and first_forecast.cache_file().parent == tmp_path and first_forecast.cache_file().exists()

    monkeypatch.setattr(first_forecast, "_REFERENCE_PATHS", {})
    monkeypatch.setattr(first_forecast.exact, "sampler_distribution", None)  # counting again would fail
    monkeypatch.setattr(first_forecast.exact, "round_length_distribution", None)
    assert first_forecast.enumeration_calls(budget, cases, set()) == counted
