"""The kernel battery's forecast: the rows it plans (``kernel.plan.planned_rows``) and the words it
announces before its cases start, and a time limit's words in those rows. The row counts are
deterministic (explicit uniforms, fixed seeds); no assertion here reads a clock's value, only
whether words were said and in which order."""

from __future__ import annotations

import numpy as np

import specverify
from specverify.battery.subject_calls import listening
from specverify.interfaces.kernel import battery as kernel
from specverify.interfaces.kernel import cases as kc
from specverify.interfaces.kernel import plan as kernel_plan
from specverify.samplers.reference_kernel import reference_generator_kernel, reference_kernel


def rows_per_case(monkeypatch, subject=reference_kernel, **run_kwargs) -> list[tuple[str, int, int]]:
    """(case name, planned rows, rows the run took) per case of one quick battery of ``subject``."""
    seen, last = [], [0]
    cover = kernel.KernelBattery.cover

    def counting_cover(self, case):
        seen.append(
            (
                case.name,
                kernel_plan.planned_rows(case, self.budget, self.statistical, self.stat_checks),
                self.runs_done - last[0],
            )
        )
        last[0] = self.runs_done
        return cover(self, case)

    forecast = kernel.KernelBattery.forecast

    def marking_forecast(self, cases, pace):
        forecast(self, cases, pace)
        last[0] = self.runs_done

    monkeypatch.setattr(kernel.KernelBattery, "cover", counting_cover)
    monkeypatch.setattr(kernel.KernelBattery, "forecast", marking_forecast)
    kernel.run(subject, "quick", 0, **run_kwargs)
    return seen


def test_the_planned_rows_are_within_a_factor_of_two_of_what_the_reference_takes(monkeypatch):
    seen = rows_per_case(monkeypatch)
    assert len(seen) >= 10
    for name, planned, actual in seen:
        assert actual / 2 <= planned <= 2 * actual, (name, planned, actual)
    total_planned, total_actual = sum(p for _, p, _ in seen), sum(a for _, _, a in seen)
    assert 0.75 * total_actual <= total_planned <= 1.5 * total_actual


def test_a_generator_kernel_is_planned_the_rows_its_statistics_take_on_the_wide_sweeps(monkeypatch):
    """A kernel drawing its own uniforms, judged by statistics on the binned sweep at V 152,064
    (sized to see TV 0.5 per instance to stay fast): an exact kernel takes every planned look, so
    the planned rows are the rows taken, case by case (pairs included), and the wide case's
    forecast names it before it starts."""
    events: list[str] = []
    with listening(events.append):
        seen = rows_per_case(
            monkeypatch,
            reference_generator_kernel,
            binned_sweep=(152_064,),
            batch_sweep=(31, 32),
            detect_tv=0.5,
            detect_tv_large=0.5,
        )
    for name, planned, actual in seen:
        assert planned == actual, (name, planned, actual)
    wide = dict((name, planned) for name, planned, _ in seen)["binned sweep V152064, k=1"]
    assert 100 < wide < 1000 and f"binned sweep V152064, k=1: about {wide} rows of 2 MiB, about " in events[0]


def test_a_wide_case_is_forecast_before_the_cases_start_and_its_timing_calls_are_not_counted(monkeypatch):
    """A case of 1.5 MiB rows (V 131,072, k 1): the forecast times its costs and names it, before
    any case's scans; the rows the run reports done are the planned rows' kind only."""
    case = kc.aimed_cases(np.random.SeedSequence(7), 131_072, (1,))[0]
    assert kernel_plan.row_bytes(case) > kernel_plan.PREFLIGHT_ROW_BYTES
    events: list[str] = []
    cover = kernel.KernelBattery.cover
    monkeypatch.setattr(kernel.KernelBattery, "cover", lambda self, c: (events.append("case"), cover(self, c))[1])
    with listening(events.append):
        result = kernel.run(reference_kernel, "quick", 0, cases=[kc.every_draft_case(), case])
    assert result.findings == [] or all(f.kind == "edge" for f in result.findings)
    words = [e for e in events if e != "case"]
    assert len(words) == 1 and events.index(words[0]) < events.index("case")
    assert words[0].startswith("about ") and " kernel rows, about " in words[0]
    assert f"{case.name}: about " in words[0] and "rows of 2 MiB" in words[0]


SLOW_KERNEL = """
import time
from specverify.samplers.reference_kernel import reference_generator_kernel, reference_kernel

def slow_kernel(draft_ids, draft_probs, target_probs, uniforms):
    time.sleep(0.05)
    return reference_kernel(draft_ids, draft_probs, target_probs, uniforms)
"""


def test_a_kernel_stopped_by_the_time_limit_says_after_how_many_of_its_planned_rows(tmp_path):
    path = tmp_path / "slow_kernel.py"
    path.write_text(SLOW_KERNEL)
    report = specverify.check(f"{path}:slow_kernel", budget="quick", time_limit=5.0, counterexample=False)
    d = report.to_dict()
    assert report.exit_code == 3 and d["exact"] is None and d["timed_out"] is True
    stopped = [s for s in d["shortfalls"] if s.startswith("stopped by the time limit after ")]
    assert len(stopped) == 1 and stopped[0].endswith(" kernel rows"), d["shortfalls"]
    done, planned = (
        int(x.replace(",", "")) for x in stopped[0].split("after ")[1].split(" kernel")[0].split(" of about ")
    )
    assert 0 < done < planned
