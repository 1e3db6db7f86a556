"""The battery's independent units (specverify.interfaces.round.units) without Ray: each case's enumeration in its
own subject process, replayed by ``run_battery(prefetched=...)``, gives the local battery's
verdict, findings and run log for the same seed; the clock is charged with the units' seconds;
a subject that dies in a unit is a finding, as in one process."""

import os
from dataclasses import replace
from functools import partial

import numpy as np
import pytest

from specverify.battery import core as battery_core
from specverify.interfaces.round import battery as round_interface
from specverify.interfaces.round import cases as round_cases
from specverify.interfaces.round import units
from specverify.mutants import report
from specverify.samplers import chain as chain_sampler

QUICK = replace(round_cases.get_budget("quick"), **report.REPORT_OVERRIDES)


def compared(result: battery_core.BatteryResult) -> dict:
    """Everything but the wall-clock seconds and the subject's printed output."""
    d = result.to_dict()
    d.pop("seconds"), d.pop("output")
    return d


def run_units(load, budget, stop_on_first=False) -> list[dict]:
    return [
        units.enumeration_unit(load, budget, lengths, i)
        for lengths, i in units.enumeration_calls(budget, stop_on_first)
    ]


@pytest.mark.parametrize(
    "mutant_id, effect",
    [
        (report.BASELINE_ID, "exact"),
        ("control/unknown-draft-probs", "exact"),
        ("ratio/inverted", "biased"),
        ("bonus/no-bonus-token", "fewer-tokens"),
    ],
)
def test_prefetched_units_give_the_local_battery_result(mutant_id, effect):
    fn, stop = report.subject_fn(mutant_id), report.stops_on_first(effect)
    here = round_interface.run_battery(fn, QUICK, 3, stop_on_first=stop)
    got = run_units(partial(report.subject_fn, mutant_id), QUICK, stop)
    assert all(u["outcome"][0] == "ok" for u in got)
    split = round_interface.run_battery(fn, QUICK, 3, stop_on_first=stop, prefetched=units.prefetched(got))
    assert compared(split) == compared(here)
    assert split.exact is {"exact": True, "fewer-tokens": True, "biased": False}[effect]


def test_units_cover_only_what_the_battery_surely_asks_for():
    assert units.enumeration_calls(QUICK) == [(False, i) for i in QUICK.cases] + [(True, 0), (True, 1), (True, 2)]
    assert units.enumeration_calls(QUICK, stop_on_first=True) == [
        (False, QUICK.cases[0]),
        (True, 0),
        (True, 1),
        (True, 2),
    ]


def test_slow_units_change_nothing_but_the_clock():
    """Units that took 6 s each (a slow machine) give the result the local run gives: no clock
    decides what is enumerated or how many runs a case gets."""
    got = run_units(lambda: chain_sampler.speculative_step, QUICK)
    for u in got:
        u["seconds"] = 6.0
    result = round_interface.run_battery(chain_sampler.speculative_step, QUICK, 0, prefetched=units.prefetched(got))
    here = round_interface.run_battery(chain_sampler.speculative_step, QUICK, 0)
    assert compared(result) == compared(here)
    last = round_cases.all_cases()[QUICK.cases[-1]].name
    assert any(line.startswith(f"exact: {last}: TV") for line in result.ran)
    assert result.exact is True


def test_a_unit_past_the_deadline_ends_the_run_as_timed_out():
    got = run_units(lambda: chain_sampler.speculative_step, QUICK)
    for u in got:
        u["seconds"] = 6.0
    import time

    result = round_interface.run_battery(
        chain_sampler.speculative_step, QUICK, 0, prefetched=units.prefetched(got), deadline=time.monotonic() + 9.0
    )
    assert result.timed_out and result.exact is None


def dies_when_enumerated(p_fn, q_fn, prefix, k, rng):
    """Exact when sampled; exits its process when the enumerator drives it."""
    if not isinstance(rng, np.random.Generator):
        os._exit(3)
    return chain_sampler.speculative_step(p_fn, q_fn, prefix, k, rng)


def test_a_subject_that_exits_in_a_unit_is_the_local_finding():
    here = round_interface.run_battery(dies_when_enumerated, QUICK, 0)
    got = run_units(lambda: dies_when_enumerated, QUICK)
    assert got[0]["outcome"] == ("failed", "its process exited with code 3 during a call (os._exit or a C-level exit)")
    split = round_interface.run_battery(dies_when_enumerated, QUICK, 0, prefetched=units.prefetched(got))
    assert compared(split) == compared(here)
    assert split.exact is False and split.findings[0].kind == "contract"


def test_a_subject_that_cannot_load_leaves_its_units_unused():
    def load():
        raise ImportError("no such engine")

    got = run_units(load, QUICK, stop_on_first=True)
    assert {u["outcome"][0] for u in got} == {"load-failed"}
    assert units.prefetched(got) == {}


def test_a_chi_square_look_draws_the_same_runs_whatever_else_is_live():
    """Case i's runs at look j come from their own stream (``round_cases.ROUND_STREAMS``),
    so the first case's looks give the same p-value beside a case that draws few numbers per run
    (k = 1, two tokens) and beside one that draws many (k = 4, five tokens): each (case,
    look) is an independent unit. With the one rng threaded through every live case that these
    streams replaced, the second case's draws moved every later look of the first."""
    first, light, heavy = (round_cases.all_cases()[i] for i in (0, 3, 1))
    assert light.m < heavy.m

    def first_line(others):
        result = round_interface.run_statistics(
            chain_sampler.speculative_step, [first, *others], 4, "quick", n_max=2000
        )
        lines = [line for line in result.ran if line.startswith(f"chi-square: {first.name}:")]
        return [line.split(";")[0] for line in lines]  # the runs and the p-value (the power: the split)

    alone = first_line([])
    assert alone and "at n=2000 (p-value" in alone[0]
    assert first_line([light]) == alone == first_line([heavy])


def test_a_stream_is_the_node_spawn_hands_out():
    """``battery.stream(seed, *path)`` is ``SeedSequence(seed).spawn``'s child path[0], its child
    path[1], ...: the streams drawn by spawn (generated and engine-scale cases)
    kept their numbers; a node given as the seed is extended."""
    from specverify.battery.seed_tree import stream

    old = np.random.SeedSequence(7).spawn(3)[2].spawn(4)[1]
    assert (stream(7, 2, 1).generate_state(4) == old.generate_state(4)).all()
    assert (stream(stream(7, 2), 1).generate_state(4) == old.generate_state(4)).all()
    assert (stream(7).generate_state(4) == np.random.SeedSequence(7).generate_state(4)).all()
    assert len({tuple(stream(7, 0, i, j).generate_state(2)) for i in range(4) for j in range(4)}) == 16
