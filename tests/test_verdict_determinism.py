"""A verdict is a function of (subject, seed, budget) alone: never of the machine's speed or load.

The budget fixes every case's run count (``battery.budgets``); clocks only guard against a hang.
So the same check run on an idle machine and beside two CPU-bound processes (on a 2-core machine:
the subject gets about a third of the time) must print the same JSON, byte for byte, apart from
the seconds it took. The subject is one the enumerator cannot follow (a Generator reseeded from
the rng), so every case is judged by sampled runs: the part that used to stop at a wall clock.
"""

from __future__ import annotations

import sys

import numpy as np

from specverify.bench import determinism

SUBJECT = """\
import numpy as np
from specverify import speculative_step

def reseeded(p_fn, q_fn, prefix, k, rng):
    return speculative_step(p_fn, q_fn, prefix, k, np.random.default_rng(int(rng.integers(2**63))))
"""


def test_the_same_json_idle_and_beside_two_cpu_bound_processes(tmp_path):
    """Through ``specverify bench determinism``'s comparison (every field but the timings)."""
    path = tmp_path / "reseeded.py"
    path.write_text(SUBJECT)
    argv = [
        sys.executable,
        "-m",
        "specverify",
        "check",
        f"{path}:reseeded",
        "--budget",
        "quick",
        "--seed",
        "3",
        "--json",
    ]
    result = determinism.compare(argv, busy=2)
    assert result["identical"] is True, result["differs"]
    # and the runs are the budget's: every case to the quick budget's n_max, a swept one to its
    # sweep_runs
    idle = result["report"]
    assert idle["exact"] is True and idle["power"]
    assert {row["runs"] for row in idle["power"]} == {1000, 4000}


def test_the_comparison_names_what_differs_and_ignores_timings():
    a = {"exact": True, "seconds": 3.0, "power": [{"runs": 1000, "seconds": 1.0}]}
    b = {"exact": True, "seconds": 9.0, "power": [{"runs": 900, "seconds": 2.0}]}
    assert determinism.differing_keys(determinism.timing_free(a), determinism.timing_free(b)) == ["power[0].runs"]
    assert determinism.differing_keys(determinism.timing_free(a), determinism.timing_free(a)) == []
    assert determinism.differing_keys({"x": 1}, {"y": 1}) == ["x", "y"]


def _reseeded(p_fn, q_fn, prefix, k, rng):
    from specverify import speculative_step

    return speculative_step(p_fn, q_fn, prefix, k, np.random.default_rng(int(rng.integers(2**63))))


def test_the_same_result_with_one_worker_or_three():
    """The sampled runs come in blocks, each from its own stream: three processes sharing them
    give the result one gives (the quick budget on two fixed cases, every case sampled)."""
    from dataclasses import replace

    from specverify.interfaces.round import battery as round_interface
    from specverify.interfaces.round import cases as round_cases

    budget = replace(round_cases.get_budget("quick"), cases=(0, 4), generated=0, sweep_context=0, sweep_k=0)
    one, three = (round_interface.run_battery(_reseeded, budget, 5, workers=n).to_dict() for n in (1, 3))
    for report in (one, three):
        report.pop("seconds")
    assert one == three
    fixed = {row["runs"] for row in one["power"] if not row["case"].startswith(round_cases.ENGINE_VOCAB_ORIGIN)}
    assert one["exact"] is True and fixed == {budget.n_max}  # the engine-vocabulary case: binned, its own size


def _lossy(p_fn, q_fn, prefix, k, rng):
    """Accepts every draft: enumerable, and not exact (its findings must not depend on workers)."""
    drafts = []
    for _ in range(k):
        q = np.asarray(q_fn(tuple(prefix) + tuple(drafts)), dtype=np.float64)
        drafts.append(int(rng.choice(len(q), p=q)))
    p = np.asarray(p_fn(tuple(prefix) + tuple(drafts)), dtype=np.float64)
    return drafts + [int(rng.choice(len(p), p=p))]


def test_the_same_result_with_enumerations_shared_among_two_workers():
    """With two workers the enumerations (each case's law and the tokens-per-round laws) are
    shared out too: the report is the one a single process gives, for an exact subject and for
    one that is not, and the laws were had by enumeration, not sampled."""
    from dataclasses import replace

    from specverify import speculative_step
    from specverify.interfaces.round import battery as round_interface
    from specverify.interfaces.round import cases as round_cases

    budget = replace(round_cases.get_budget("quick"), cases=(0, 1, 4), generated=1, sweep_context=2, sweep_k=2)
    for subject, exact in ((speculative_step, True), (_lossy, False)):
        one, two = (round_interface.run_battery(subject, budget, 2, workers=n).to_dict() for n in (1, 2))
        for report in (one, two):
            report.pop("seconds")
        assert one == two
        assert one["exact"] is exact
        assert sum(line.startswith("exact: ") and "TV" in line for line in one["ran"]) >= 3
        assert any(line.startswith("tokens per round:") and "(exact)" in line for line in one["ran"])
