"""``specverify bench paced``: the paced subject counts and sleeps, the forecasts' calls are read
from their words, and the table puts forecast and measured side by side (the whole benchmark takes
minutes at its default pace: it is run by hand, docs/BENCHMARKS.md "A real-pace sampler")."""

from __future__ import annotations

import time

import numpy as np
import pytest

from specverify.bench import paced
from specverify.bench.calls import CALLS_FILE_VARIABLE
from specverify.laws.chains import toy_chain

FIRST = (
    "forecast before enumerating, at about 20 rounds/s: the standard budget's exact laws take at most "
    "about 12,429 calls, about 632 s; quick: at most about 1,527 calls, 78 s"
)
SAMPLED = (
    "forecast at about 20 rounds/s: the standard budget samples 400 runs, about 898 calls, about 46 s; "
    "quick: 294 runs, about 733 calls, 37 s"
)


def test_the_paced_subject_sleeps_its_round_and_counts_each_call(tmp_path, monkeypatch):
    counter = tmp_path / "calls"
    monkeypatch.setenv(CALLS_FILE_VARIABLE, str(counter))
    monkeypatch.setenv(paced.ROUND_MS_VARIABLE, "20")
    model, rng = toy_chain(), np.random.default_rng(0)
    start = time.monotonic()
    for _ in range(3):
        tokens = paced.paced_step(model.p_fn, model.q_fn, (0,), 2, rng)
        assert 1 <= len(tokens) <= 3
    assert time.monotonic() - start >= 3 * 0.02
    assert counter.stat().st_size == 3


def test_a_forecasts_calls_are_its_own_budgets():
    assert paced.forecast_calls(FIRST) == 12_429
    assert paced.forecast_calls(SAMPLED) == 898
    assert paced.forecast_calls("forecast: the quick budget samples 294 runs") is None


def test_the_table_sets_forecast_beside_measured():
    result = {
        "round_ms": 50.0,
        "budget": "standard",
        "seed": 0,
        "forecasts": [
            {"words": FIRST, "calls": 12_429, "seconds": 632.0, "said_after_calls": 360, "said_after_s": 20.0},
            {"words": SAMPLED, "calls": 898, "seconds": 46.0, "said_after_calls": 8_248, "said_after_s": 440.0},
        ],
        "calls": 9_480,
        "seconds": 498.8,
        "exact": True,
    }
    rows = {what: (calls, seconds) for what, calls, seconds, _ in paced.rows(result)}
    assert rows["forecast in all"] == (360 + 12_429 + 898, pytest.approx(20.0 + 632.0 + 46.0))
    assert rows["calls x 50 ms"] == (9_480, pytest.approx(474.0))
    assert rows["overhead"] == (None, pytest.approx(24.8))
    text = paced.table(result)
    assert text.splitlines()[0].endswith("budget standard, seed 0: EXACT")
    assert "12,429" in text and "9,480" in text and "474.0" in text and "24.8" in text


@pytest.mark.parametrize("argv", [["--round-ms", "fast"], ["--round-ms", "-1"], ["--budget", "weekly"]])
def test_bad_arguments_are_usage_errors_before_any_check(argv):
    with pytest.raises(SystemExit) as exited:
        paced.main(argv)
    assert exited.value.code == 2
