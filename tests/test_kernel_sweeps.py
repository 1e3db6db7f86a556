"""The kernel battery's sweeps (``kernel.sweeps.sweep_cases``): dense and wide vocabularies, every
k, batch rows past each tile and the pairwise test of a batch's rows, the value edges in each,
the reach a budget has, and the kernel mutants only they catch.

Every verdict here is an exact computation from explicit uniforms (no false-fail), except the
pairwise test and the generator kernel's statistics: chi-squares at the budget's false-fail rate
(1e-6 a battery; the pairwise test's share of it 2.5e-7, split over its offsets), fixed seeds."""

from __future__ import annotations

import dataclasses
import re

import kernel_subjects as ks
import numpy as np
import pytest

from specverify.interfaces.corners import CORNER_PREFIX
from specverify.interfaces.kernel import battery as kernel
from specverify.interfaces.kernel import cases as kc
from specverify.interfaces.kernel import corners as kernel_corners
from specverify.interfaces.kernel import plan as kernel_plan
from specverify.interfaces.kernel import statistics as kernel_statistics
from specverify.interfaces.kernel import sweeps as kernel_sweeps
from specverify.mutants import get
from specverify.samplers.reference_kernel import reference_kernel

STANDARD = kernel.get_budget("standard")


@pytest.fixture(scope="module")
def reference_standard():
    """One standard battery of the reference kernel (about 20 s on 2 cores), asserted on below."""
    return kernel.run(reference_kernel, "standard", 0)


def _edge_notes(result):
    return [f for f in result.findings if f.kind == "edge"]


def _distribution(result):
    return [f for f in result.findings if f.kind == "distribution"]


# --------------------------------------------------------------------------- the reference


def test_the_reference_is_exact_on_every_sweep(reference_standard):
    r = reference_standard
    assert r.exact is True and not r.findings and not r.shortfalls, (r.findings, r.shortfalls)
    ran = "\n".join(r.ran)
    for k in range(1, 9):
        assert f"exact from uniforms: k sweep k={k}, V6" in ran
    for V in (*STANDARD.dense_sweep, *STANDARD.binned_sweep):
        assert re.search(rf"exact from uniforms: (dense|binned) sweep V{V}, k=1", ran), V
    assert re.search(r"batch rows: .* 1024 rows, 16 calls each: 5,076 rows .*, 0 disagree", ran)
    assert r.exact_tv_max < 1e-4  # the float32 rounding of V = 4096 cumulative sums at most


def test_the_run_carries_its_reach(reference_standard):
    assert reference_standard.reach == kernel.reach("standard")  # BatteryResult.reach: coverage.reach
    assert reference_standard.ran[0] == "reach: dense V 4096, binned V 152064, k 8, batch 1024"
    assert reference_standard.ran[0] == kernel.reach_line("standard")
    origins = {c["name"]: c["origin"] for c in reference_standard.cases}
    assert origins["batch rows V5, k=2"] == origins["dense sweep V4096, k=1"] == "sweep"
    assert next(c for c in reference_standard.cases if c["name"] == "batch rows V5, k=2")["batches"][-1] == 1024


def test_a_run_on_given_cases_reaches_what_they_reach():
    cases = [kc.every_draft_case(), kc.wide_ids_case(), kernel_sweeps.batch_case((31,))]
    got = kernel.run(reference_kernel, "quick", 0, cases=cases).reach
    assert got == {"dense V": 5, "binned V": 33_024, "k": 2, "batch": 31}


def test_the_pairwise_test_states_its_power_and_false_fail_rate(reference_standard):
    line = next(x for x in reference_standard.ran if x.startswith("batch pairs:"))
    assert "32 batches of 1024 identical rows" in line and "offsets 1, 32, 64, 128, 256, 512" in line
    tv, rate = map(float, re.search(r"joint TV ([\d.e-]+) \(power 0.95, false-fail ([\d.e-]+) per", line).groups())
    assert tv < 0.05 and rate == pytest.approx(STANDARD.false_fail_rate / kernel_statistics.PAIR_SHARE / 6, rel=0.02)


# --------------------------------------------------------------------------- reach and budgets


def test_reach_names_each_swept_dimensions_largest_value():
    assert kernel.reach("quick") == {"dense V": 0, "binned V": 0, "k": 4, "batch": 65}
    assert kernel.reach("standard") == {"dense V": 4096, "binned V": 152_064, "k": 8, "batch": 1024}
    assert kernel.reach("thorough") == {"dense V": 32_768, "binned V": 152_064, "k": 16, "batch": 4096}
    assert kernel.reach(kernel.get_budget("tv=0.01")) == kernel.reach("thorough")


def test_the_standard_sweeps_straddle_every_tile():
    sizes = set(STANDARD.batch_sweep)
    assert all({t - 1, t, t + 1} <= sizes for t in kernel_sweeps.BATCH_TILES) and max(sizes) == 1024
    assert STANDARD.scan_rows <= min(kernel_sweeps.BATCH_TILES)  # laws measured at rows below the first tile
    names = [c.name for c in kernel_sweeps.sweep_cases(STANDARD)]
    assert [n for n in names if n.startswith("k sweep")] == [f"k sweep k={k}, V6" for k in range(1, 9)]


# --------------------------------------------------------------------------- value edges


def test_value_edges_reach_every_sweep():
    cases = kernel_sweeps.sweep_cases(STANDARD)
    labels = " | ".join(" | ".join(c.labels) for c in cases if c.name.startswith("k sweep"))
    assert all(edge in labels for edge in kernel_sweeps.VALUE_EDGES)
    for prefix, edges in (
        ("batch rows", ("p(x)=0<q(x)", "p=q", "one-hot p!=q", "disjoint supports")),
        ("binned sweep V152064", ("p(x)=0<q(x)", "q(x)=0<p(x)", "disjoint supports")),
        ("dense sweep V4096", ("p(x)=0<q(x)",)),
    ):
        case = next(c for c in cases if c.name.startswith(prefix))
        assert all(any(e in label for label in case.labels) for e in edges), (prefix, case.labels)


def test_a_rejected_p_zero_draft_has_a_residual_unlike_p():
    """Where the value edge p(x) = 0 < q(x) is drafted (and so rejected), the residual
    max(p - q, 0) is not p: a kernel that samples p there shows (kernel/residual-p-when-p-zero).
    The dense sweep's is p on purpose (one scan of V cells)."""
    seen = 0
    for case in kernel_sweeps.sweep_cases(STANDARD):
        for b in [b for b in range(case.n) if "p(x)=0<q(x)" in case.labels[b]]:
            i = max(i for i, x in enumerate(case.drafts(b)) if case.p[b, i, x] == 0 < case.q[b, i, x])
            residual = kc.emission_weights(case.p[b, i], case.q[b, i])
            p = kc.emission_weights(case.p[b, i], None)
            assert (0.5 * np.abs(residual - p).sum() > 0.1) != case.name.startswith("dense"), case.name
            seen += 1
    assert seen >= 6


def test_the_wide_sweep_puts_mass_past_65535():
    case = kernel_sweeps.binned_sweep_case(152_064)
    assert case.drafts(0) == (152_063,)
    assert case.p[0, 0, 65_536] > 0 and case.p[0, 1, 152_063] > 0  # the residual's and the bonus's
    assert kernel_sweeps.top_ids(65_537) == (65_536, 65_535, 65_534, 32_768)


# --------------------------------------------------------------------------- the new mutants


NEW = {  # mutant -> the sweep case that catches it (the whole standard battery: tests/test_mutants.py)
    "kernel/residual-p-when-p-zero": lambda: kernel_sweeps.batch_case(STANDARD.batch_sweep),
    "kernel/batch-tile-256-target": lambda: kernel_sweeps.batch_case(STANDARD.batch_sweep),
    "kernel/batch-tile-256-coins": lambda: kernel_sweeps.batch_case(STANDARD.batch_sweep),
    "kernel/residual-top-512": lambda: kernel_sweeps.dense_sweep_case(1024),
    "kernel/bonus-row-off-by-one-at-k7": lambda: kernel_sweeps.k_sweep_cases(8)[6],
    "kernel/ids-uint16-emitted": lambda: kernel_sweeps.binned_sweep_case(65_537),
}


@pytest.mark.parametrize("mutant_id", NEW)
def test_a_new_mutant_is_not_exact_by_its_sweep(mutant_id):
    r = kernel.run(get(mutant_id).fn, "standard", 0, cases=[NEW[mutant_id]()])
    assert r.exact is False and _distribution(r), r.findings
    assert not [f for f in _edge_notes(r) if f.check == "measure-zero"], _edge_notes(r)


def test_the_tile_256_kernel_is_not_exact_where_rows_sit():
    """Rows past a batch tile of 256 read row b - 256's target: the rows there are judged against
    their own law (TV 1 at row 256 of 257), never set aside as measure-zero or degenerate-residual
    notes; the fixed cases' laws, measured below the first tile, stay exact."""
    cases = [kc.every_draft_case(), kc.adversarial_case(), kernel_sweeps.batch_case(STANDARD.batch_sweep)]
    r = kernel.run(get("kernel/batch-tile-256-target").fn, "standard", 0, cases=cases)
    assert r.exact is False and not _edge_notes(r), _edge_notes(r)
    found = _distribution(r)
    assert found and all(re.search(r"row 25[67] of a batch of (25[7-9]|[3-9]\d\d|1\d{3})", f.message) for f in found)
    assert found[0].evidence["tv"] > 0.5


def test_an_edge_deviation_on_a_whole_cell_is_a_law_finding():
    """A kernel whose rows past 32 read row b - 32's target passes the contract's 16 rows (the
    first case's) and the scans (at most 32 rows a call), but its edge probes' batch has 74 rows:
    the deviations there hold at interior uniforms of the same cells, so they are measured where
    they sit (TV > 0.1), not filed as measure-zero events."""
    cases = [kernel_sweeps.k_sweep_cases(1)[0], kc.every_draft_case()]
    r = kernel.run(ks.tile_32_wrong_target, "standard", 0, cases=cases)
    assert r.exact is False and not _edge_notes(r), _edge_notes(r)
    found = _distribution(r)
    assert found and all("edge probes" in f.message and f.evidence["tv"] > 0.1 for f in found)


def test_rows_sharing_one_generator_row_fail_the_pairwise_test():
    """A generator kernel that draws one row of uniforms for the whole batch: each row's law is
    the rule's, so only the pairwise test sees it (false-fail 2.5e-7 over its offsets)."""
    r = kernel.run(
        ks.generator_one_row, "quick", 0, cases=[kernel_sweeps.batch_case(kernel.get_budget("quick").batch_sweep)]
    )
    pairs = [f for f in _distribution(r) if f.check == "batch-pairs"]
    assert r.exact is False and pairs and all(f.evidence["tv"] > 0.5 for f in pairs)


# --------------------------------------------------------------------------- kernels that draw their own

WIDE_BOX = {
    "generated": 0,
    "engine_scale": False,
    "dense_sweep": (4096,),
    "binned_sweep": (152_064,),
    "k_sweep": 1,
    "batch_sweep": (),
    "detect_tv": 0.5,
    "detect_tv_large": 0.5,
}
"""Standard's widest dense and binned sweeps (V 4,096 and 152,064) without its other sweeps and
drawn cases, its statistics sized to see TV 0.5 per instance (power 0.95) instead of 0.02 / 0.1:
210 rows of 1.8 MB at V 152,064 instead of 4,616; false-fail rate the budget's 1e-6 a run."""


def test_a_generator_kernel_reaches_the_box_a_uniforms_kernel_does():
    line = kernel.reach_line("standard", uniforms=False)
    assert line.startswith(kernel.reach_line("standard") + ", by statistics") and "binned V 152064" in line
    wide = [c for c in kernel.cases(STANDARD, 0) if kernel_sweeps.wide_sweep(c)]
    assert [c.vocab_size for c in wide] == [*STANDARD.dense_sweep, *STANDARD.binned_sweep]


@pytest.fixture(scope="module")
def generator_wide():
    """The rule drawing its own uniforms, at ``WIDE_BOX`` (about 7 s on 2 loaded cores)."""
    return kernel.run(ks.generator_kernel, "standard", 0, **WIDE_BOX)


def test_a_generator_kernel_is_judged_on_the_wide_sweeps_by_binned_statistics(generator_wide):
    r = generator_wide
    assert r.exact is True and not r.findings and not r.shortfalls, (r.findings, r.shortfalls)
    assert r.ran[0] == kernel.reach_line(dataclasses.replace(STANDARD, **WIDE_BOX), uniforms=False)
    assert (
        r.ran[0].startswith("reach: dense V 4096, binned V 152064, k 1, by statistics")
        and r.reach["binned V"] == 152_064
    )
    ran = "\n".join(r.ran)
    assert re.search(r"statistics: dense sweep V4096, k=1: .*: [\d,]+ rows, tokens in 9 id ranges, sees TV 0\.", ran)
    wide = re.findall(r"statistics: binned sweep V152064, k=1: .*, sees TV ([\d.]+) ", ran)
    assert len(wide) == 3 and all(float(tv) <= 0.5 for tv in wide)  # the q(x) = 0 instance: behaviour only


def test_a_generator_kernel_wrong_only_past_65536_ids_is_not_exact():
    """Its ids past 65,535 get no target mass: exact on every case up to V 4,096 (the same run as
    the exact kernel's, no finding there), TV 0.5 to 0.75 on each instance of the binned sweep
    at V 152,064, each seen with probability 0.95 (``WIDE_BOX``)."""
    r = kernel.run(ks.generator_first_65536_ids, "standard", 0, **WIDE_BOX)
    found = _distribution(r)
    assert r.exact is False and found and {f.case for f in found} == {"binned sweep V152064, k=1"}, r.findings
    assert all(f.evidence["tv"] >= 0.4 for f in found)


def test_the_binned_law_pools_tokens_by_tile_and_keeps_the_top_id_apart():
    case = kernel_sweeps.dense_sweep_case(4096)
    law, bins = kernel_plan.statistical_law(case, 0)
    assert bins.tolist() == [0, 32, 64, 128, 256, 512, 1024, 2048, 4095]
    assert sum(law.values()) == pytest.approx(1.0) and (0, 4095) not in law  # p(top) = 0: not emitted
    wide = kernel_sweeps.binned_sweep_case(152_064)
    assert kernel_plan.statistical_law(wide, 0) == (kc.rule_law(wide, 0), None)  # four ids: each its own cell


# --------------------------------------------------------------------------- the pairwise corners


def test_only_thorough_has_the_corners_and_they_stay_in_the_box():
    assert not kernel_corners.kernel_corner_cases(STANDARD) and not kernel_corners.kernel_corner_cases(
        kernel.get_budget("quick")
    )
    thorough = kernel.get_budget("thorough")
    names = [c.name for c in kernel.cases(thorough, 0) if c.name.startswith(CORNER_PREFIX)]
    assert names == ["corner k=16 x batch 4096, V6", "corner binned V152064 x k=16"]
    assert kernel_plan.cases_reach(kernel_corners.kernel_corner_cases(thorough)) == {
        **kernel.reach("thorough"),
        "dense V": 6,
    }
    assert "pairwise corners k=16 x batch 4096, binned V152064 x k=16" in kernel.coverage("thorough")


FEWER_CALLS = {"batch_calls": 8, "pair_calls": 8, "rescans": 1}


def test_a_tile_bug_at_long_drafts_only_shows_at_the_thorough_corner():
    """Exact from uniforms (no false-fail) but for the pairwise test of the batch rows (its share of
    the battery's 1e-6): standard's batch sweep has k = 2 and its k sweep runs in small batches,
    so the kernel passes every standard sweep of k and batch; thorough's k x batch corner (k = 16,
    every batch size to 4,096) finds row 256 of the first batch past the tile judged against its
    own law where it sits (TV 0.998). The corner alone, 8 calls a batch size and 8 batches in the
    pairwise test instead of 32 and 128, one law measured where it sits instead of 4: about 12 s
    instead of 30 on 2 cores, the same finding."""
    standard = [kernel_sweeps.batch_case(STANDARD.batch_sweep), *kernel_sweeps.k_sweep_cases(STANDARD.k_sweep)]
    assert kernel.run(ks.tile_256_wrong_target_at_long_drafts, "standard", 0, cases=standard).exact is True
    thorough = kernel.get_budget("thorough")
    (corner, _) = kernel_corners.kernel_corner_cases(thorough)
    assert corner.k == 16 and corner.batches == thorough.batch_sweep
    r = kernel.run(ks.tile_256_wrong_target_at_long_drafts, thorough, 0, cases=[corner], **FEWER_CALLS)
    assert r.exact is False and not _edge_notes(r), _edge_notes(r)
    (found,) = _distribution(r)
    assert "row 256 of a batch of 257" in found.message and found.evidence["tv"] > 0.5, found
