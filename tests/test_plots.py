"""The pictures of specverify.surface.plots: what a counterexample picture and a kills matrix
say (the pure helpers, on real quick checks and on Row objects), and that the files are real
pictures written atomically."""

from __future__ import annotations

import copy
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import specverify
from specverify.mutants import catalogue, get
from specverify.mutants.report import BASELINE_ID, SANITY_ID, SHORT_CHECK_NAMES, Row, Status
from specverify.samplers.chain import speculative_step
from specverify.surface import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def round_report():
    """A quick check of a round mutant that emits the drafts unverified: NOT EXACT."""
    report = specverify.check(catalogue.no_verification, budget="quick", seed=0).to_dict()
    assert report["exact"] is False and report["counterexample"]
    return report


@pytest.fixture(scope="module")
def loop_report():
    """A quick check of a loop mutant (min-p on the bonus row only): a per-sequence law."""
    report = specverify.check(get("loop-minp/bonus-only").fn, budget="quick", seed=0).to_dict()
    assert report["exact"] is False and report["counterexample"]["requests"]
    return report


@pytest.fixture(scope="module")
def exact_report():
    return specverify.check(speculative_step, budget="quick", seed=0).to_dict()


def with_outcomes(report: dict, rows: list[dict], **fields) -> dict:
    """``report`` with its counterexample's law replaced by ``rows`` (and ``fields`` set)."""
    out = copy.deepcopy(report)
    out["counterexample"].update(distributions=rows, **fields)
    return out


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return struct.unpack(">II", data[16:24])


# ---- counterexample_bars ----------------------------------------------------------------------


def test_bars_put_the_largest_difference_first(round_report):
    bars = plots.counterexample_bars(round_report)
    gaps = [abs(s - t) for s, t in zip(bars.subject, bars.target, strict=True)]
    assert gaps == sorted(gaps, reverse=True) and gaps[0] > 0
    by_label = {plots.outcome_label(r["tokens"]): r for r in round_report["counterexample"]["distributions"]}
    assert set(bars.labels) == set(by_label)
    for label, s, t in zip(bars.labels, bars.subject, bars.target, strict=True):
        assert (by_label[label]["sampler"], by_label[label]["target"]) == (s, t)


def test_bars_keep_only_the_top_differences(round_report):
    # 30 outcomes whose difference is their index / 1000, shuffled: the top 20 are 29..10
    order = [
        7,
        22,
        3,
        29,
        14,
        0,
        18,
        25,
        11,
        5,
        27,
        1,
        16,
        9,
        20,
        13,
        28,
        2,
        24,
        6,
        17,
        10,
        26,
        4,
        21,
        8,
        19,
        12,
        23,
        15,
    ]
    rows = [{"tokens": [i], "sampler": 0.01 + i / 1000, "target": 0.01} for i in order]
    bars = plots.counterexample_bars(with_outcomes(round_report, rows), top=20)
    assert bars.labels == [str(i) for i in range(29, 9, -1)]
    assert bars.left_out == 10
    assert "largest differences of 30" in plots.cut_words(len(bars.labels), len(bars.labels) + bars.left_out)


def test_a_negative_difference_counts_by_its_size(round_report):
    rows = [
        {"tokens": [0], "sampler": 0.40, "target": 0.45},
        {"tokens": [1], "sampler": 0.10, "target": 0.40},
        {"tokens": [2], "sampler": 0.50, "target": 0.15},
    ]
    assert plots.counterexample_bars(with_outcomes(round_report, rows)).labels == ["2", "1", "0"]


def test_the_title_names_the_verdict_and_the_tv(round_report):
    title = plots.counterexample_bars(round_report).title
    tv = round_report["counterexample"]["exact_tv"]
    assert f"exact TV {tv:.4g}" in title
    assert round_report["target"] in title and "NOT EXACT" in title
    assert f"battery's smallest chi-square p-value {round_report['chi2_p_value_min']:.3g}" in title


def test_the_title_prefers_the_counterexample_s_own_p_value(round_report):
    report = copy.deepcopy(round_report)
    ce = report["counterexample"]
    del ce["exact_tv"]
    ce.update(method="binned", empirical_tv=0.125, p_value=3.5e-9, samples=4000)
    title = plots.counterexample_bars(report).title
    assert "empirical TV 0.125 over 4000 runs, p-value 3.5e-09" in title
    assert "battery's" not in title


def test_a_loop_counterexample_is_drawn_per_sequence(loop_report):
    ce = loop_report["counterexample"]
    bars = plots.counterexample_bars(loop_report)
    assert all(len(label.split()) == ce["window"] for label in bars.labels)
    assert bars.axis_label == f"output sequence of request {ce['request']}"
    assert f"prompt {ce['requests'][ce['request']]['prompt']}" in bars.title
    assert f"exact TV {ce['exact_tv']:.4g}" in bars.title


def test_an_exact_report_has_nothing_to_plot(exact_report, tmp_path):
    assert exact_report["exact"] is True and exact_report["counterexample"] is None
    path = tmp_path / "ce.png"
    with pytest.raises(ValueError, match="no counterexample to plot in report: the verdict is EXACT"):
        plots.counterexample_figure(exact_report, path)
    assert list(tmp_path.iterdir()) == []


def test_a_counterexample_without_a_law_has_nothing_to_plot(round_report):
    with pytest.raises(ValueError, match="no per-outcome law"):
        plots.counterexample_bars(with_outcomes(round_report, [], method="binned"))


# ---- counterexample_figure --------------------------------------------------------------------


def test_the_counterexample_png_is_a_real_picture(round_report, tmp_path):
    path = tmp_path / "out" / "ce.png"
    assert plots.counterexample_figure(round_report, path) == path
    width, height = png_size(path)
    assert width > 600 and height > 300
    assert path.stat().st_size > 10_000
    assert [p.name for p in path.parent.iterdir()] == ["ce.png"]  # no temporary file left


def test_the_suffix_names_the_format(loop_report, tmp_path):
    svg, pdf = tmp_path / "ce.svg", tmp_path / "ce.PDF"
    plots.counterexample_figure(loop_report, svg)
    plots.counterexample_figure(loop_report, pdf)
    assert b"<svg" in svg.read_bytes()[:2000]
    assert pdf.read_bytes()[:5] == b"%PDF-"


@pytest.mark.parametrize("name", ["ce.jpg", "ce", "ce.png.txt"])
def test_an_unsupported_suffix_is_refused_before_drawing(round_report, tmp_path, name):
    path = tmp_path / name
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        plots.counterexample_figure(round_report, path)
    assert not path.exists()


def test_importing_the_module_does_not_load_matplotlib():
    code = "import sys, specverify.surface.plots; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- kills_matrix -----------------------------------------------------------------------------


def row(id: str, status: Status, killed_by: str = "", effect: str = "biased") -> Row:
    return Row(id, effect, status, killed_by, None, None, None, 0.1, "", "")


CHECKS = list(SHORT_CHECK_NAMES.values())


def test_the_matrix_fills_the_checks_that_killed_each_mutant():
    rows = [
        row(BASELINE_ID, Status.PASSED, effect="exact"),
        row(SANITY_ID, Status.KILLED, "exact,chi2"),
        row("bonus/no-bonus-token", Status.KILLED, "tokens"),
        row("loop-stop/tokens-after-stop", Status.KILLED, "contract,sequence-law"),
        row("kernel/ratio-float16", Status.SURVIVED),
        row("control/match-target-sample", Status.PASSED, effect="exact"),
    ]
    m = plots.kills_matrix(rows, CHECKS)
    assert m.ids == [r.id for r in rows]
    assert m.checks == ["exact", "chi2", "tokens", "contract", "sequence-law"]  # an unknown check appended
    assert m.found == [
        [False, False, False, False, False],
        [True, True, False, False, False],
        [False, False, True, False, False],
        [False, False, False, True, True],
        [False, False, False, False, False],
        [False, False, False, False, False],
    ]
    assert m.outcomes == ["passed", "killed", "killed", "killed", "survived", "passed"]
    assert m.ok == [True, True, True, True, False, True]
    assert m.tally() == "killed 3, passed 2, survived 1"


def test_passed_rows_are_shaded_and_found_cells_filled():
    m = plots.kills_matrix([row("control/x", Status.PASSED, effect="exact"), row("m", Status.KILLED, "chi2")], CHECKS)
    colours = plots.cell_colours(m)
    assert set(colours[0]) == {plots.PASSED_COLOUR}
    assert colours[1] == [plots.EMPTY_COLOUR, plots.FOUND_COLOUR, plots.EMPTY_COLOUR, plots.EMPTY_COLOUR]


def test_without_checks_the_columns_come_from_the_rows():
    m = plots.kills_matrix([row("a", Status.KILLED, "chi2, exact"), row("b", Status.KILLED, "exact")])
    assert m.checks == ["chi2", "exact"]
    assert m.found == [[True, True], [False, True]]


def test_a_hundred_rows_make_a_tall_png(tmp_path):
    rows = [row(BASELINE_ID, Status.PASSED, effect="exact")]
    rows += [row(f"family-{i // 10}/mutant-number-{i}", Status.KILLED, CHECKS[i % 4]) for i in range(99)]
    path = plots.mutant_kills_figure(rows, tmp_path / "kills.png", CHECKS)
    width, height = png_size(path)
    assert height > 2 * width and height > 2000
    assert path.stat().st_size > 20_000


def test_no_rows_and_a_bad_suffix_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no mutant report rows"):
        plots.mutant_kills_figure([], tmp_path / "k.png")
    with pytest.raises(ValueError, match=r"k\.gif"):
        plots.mutant_kills_figure([row("a", Status.KILLED, "exact")], tmp_path / "k.gif")
    assert list(tmp_path.iterdir()) == []


def test_check_plot_draws_the_counterexample_and_refuses_what_it_cannot(tmp_path):
    """``specverify check --plot FILE``: a NOT EXACT target's counterexample drawn (exit 1, the
    verdict's), an exact one leaves FILE unwritten and its exit code 0, a bad suffix or two
    targets are usage errors."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}

    def check(*args):
        proc = subprocess.run(
            [sys.executable, "-m", "specverify", "check", *args, "--budget", "quick"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        return proc.returncode, proc.stderr

    drawn = tmp_path / "ce.png"
    code, err = check("specverify.mutants.catalogue:no_verification", "--plot", str(drawn))
    assert code == 1 and drawn.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", err
    none = tmp_path / "none.png"
    code, err = check("specverify.samplers.chain:speculative_step", "--plot", str(none))
    assert code == 0 and not none.exists() and "nothing drawn" in err, err
    code, err = check("specverify.samplers.chain:speculative_step", "--plot", str(tmp_path / "ce.jpg"))
    assert code == 2 and "--plot" in err, err
    code, err = check("a.b:c", "d.e:f", "--plot", str(drawn))
    assert code == 2 and "one TARGET" in err, err
