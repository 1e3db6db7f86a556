"""``python -m specverify check-hf-generate --tiny-qwen``: transformers'
``generate(assistant_model=draft, do_sample=True)`` end to end on a real architecture, its findings
added to the ``check`` report of ``hf_loop.check`` (``add_to_report``): one verdict, ``api``'s words
and exit codes; this module has no verdict of its own.

On the tiny random Qwen2 pair (``specverify.models.loading.tiny_pair``: 320 logits, nothing
downloaded) and one prompt, for each setting (temperature 1.0; temperature 0.7; top-k 20 at
temperature 1.0; temperature 1.0 with ``pad_token_id`` an ordinary token):

1. *Exactness.* The exact law of the target's first ``NEW_TOKENS`` (3) tokens under the same
   processing (``specverify.laws.processing.process_logits``: HF's temperature, then top-k), from
   the target's own logits over every continuation: the first token over the whole vocabulary,
   the next conditioned on each prefix (all prefixes when there are at most ``MAX_CONTEXTS``,
   else the most probable ones), in batched forwards. Sequences are grouped into cells of the
   prefix tree (a cell with expected count < 5 at n joins its parent's "rest" cell): an exact
   coarsening, so the chi-square test (``specverify.laws.stats.chi_square_test``) stays valid and keeps
   its power; an outcome of probability 0 fails outright. n generations of batch size 1
   (assisted generation refuses more), fixed torch seed. With 3 new tokens the first round drafts
   2 tokens (transformers caps drafts at the tokens left minus one), so accepted drafts,
   residual and bonus tokens all appear in the window.
2. *Processing.* ``_speculative_sampling`` is wrapped (``recording_rounds``) while
   ``n_acceptance`` generations of 24 tokens run with k = ``K`` drafts a round. Each round's
   engine rows (its processed target and draft distributions) are compared with ours, from
   uncached teacher-forced forwards of the round's context and drafts: a target row off by more
   than ``PROCESSING_TOL`` (TV) changes the output law (a distribution finding); a draft row off
   only changes what is proposed (an efficiency finding: the engine verifies against the rows it
   drafted from, so the output stays exact).
3. *Acceptance.* At a verified draft position the rule accepts with conditional probability
   alpha_i = sum_x min(p_i(x), q_i(x)), p and q processed as requested. The sum over verified
   drafts of (accepted - alpha_i) is a martingale; a two-sided z-test on it (martingale CLT,
   variance sum alpha_i (1 - alpha_i)) flags an engine that accepts less, or more, than drafting
   from the requested q predicts. Per-position figures are reported as well.
4. *Control.* transformers' ``assistant_ensemble_weight=0.5`` (biased by design) through the same
   exactness test at the same n: it must be flagged, or the test lacked power at that n (a
   ``Report.add_control`` entry; unflagged, the report is inconclusive).

In the report: a failed chi-square (``tiny-qwen-chi-square``) or target row
(``target-processing``) is a distribution finding, a draft row (``draft-processing``) or the
acceptance test (``acceptance``) an efficiency finding; each setting's chi-square power is a
``power`` row (stated, not required). The false-fail budget given (``check-hf-generate``: half of
1e-6, the loop battery has the other half) is split: half over the settings' chi-square tests, half
over their acceptance tests (Bonferroni). The assistant runs with ``num_assistant_tokens=K``, a
constant schedule and ``assistant_confidence_threshold=0`` (no early stop); every change to the
models' configs, transformers' logging, torch's thread count and global RNG is undone afterwards.

What it finds in transformers 5.24.0 is in docs/ADAPTERS.md. References: Leviathan et al. 2023
(arXiv 2211.17192); transformers' ``_assisted_decoding`` and ``AssistedCandidateGenerator``.

Here: each setting's check, its findings and the report (``check_setting``, ``findings_of``,
``check_generate``, ``add_to_report``). What runs is ``hf_settings``' (the settings, the
``generate`` call), the exact law and its chi-square ``hf_exact_law``'s, the acceptance test
``hf_acceptance``'s.
"""

from __future__ import annotations

import time

from ..battery.core import Finding
from ..common.validation import check_int, check_seed
from ..laws import stats
from ..models.loading import tiny_pair
from . import hf
from .hf_acceptance import measure_acceptance, recording_rounds
from .hf_exact_law import cell_of, cells, distribution_test, exact_law
from .hf_settings import (
    ACCEPTANCE_NEW_TOKENS,
    CONTROL,
    FALSE_FAIL_RATE,
    FALSE_PASS_RATE,
    NEW_TOKENS,
    PROCESSING_TOL,
    PROMPT,
    SETTINGS,
    K,
    Setting,
    sample_generations,
    torch,
    transformers,
)

# --------------------------------------------------------------------------- the check


def check_setting(
    pair,
    prompt,
    setting: Setting,
    n: int,
    seed: int,
    dist_rate: float,
    n_acceptance: int,
    acc_rate: float,
    m: int = NEW_TOKENS,
    k: int = K,
) -> dict:
    t0 = time.perf_counter()
    cond = exact_law(pair.target, prompt, setting, m, n)
    partition = cells(cond, m, n)
    t1 = time.perf_counter()
    samples = sample_generations(pair, prompt, setting, n, m, seed)
    t2 = time.perf_counter()
    row = {
        "setting": setting.name,
        "temperature": setting.temperature,
        "top_k": setting.top_k,
        "ensemble_weight": setting.ensemble_weight,
        "new_tokens": m,
        **distribution_test(samples, cond, partition, dist_rate),
        "seconds_exact_law": round(t1 - t0, 2),
        "seconds_per_generation": (t2 - t1) / n,
    }
    if n_acceptance > 0:
        row.update(measure_acceptance(pair, prompt, setting, n_acceptance, k, seed + 1, acc_rate))
        row["seconds_acceptance"] = round(time.perf_counter() - t2, 2)
    return row


def findings_of(rows: list[dict]) -> list[Finding]:
    """Distribution findings (the output law, the target's processing) and efficiency findings
    (the draft's processing, the acceptance rate), one per failed check; each ``case`` is the
    setting's name prefixed with ``CASE_PREFIX``."""
    out = []

    def add(check, kind, r, message, **evidence):
        out.append(Finding(check, kind, message, CASE_PREFIX + r["setting"], evidence))

    for r in rows:
        if not r["passed"]:
            add(
                "tiny-qwen-chi-square",
                "distribution",
                r,
                f"first {r['new_tokens']} tokens differ from the target's: p-value {r['p_value']:.3g} < "
                f"{r['per_check_rate']:.3g} after {r['n']} generations, TV {r['tv']:.4f} ({r['detail']})",
                p_value=r["p_value"],
                samples=r["n"],
                empirical_tv=r["tv"],
            )
        if r.get("target_processing_tv_max", 0.0) > PROCESSING_TOL:
            add(
                "target-processing",
                "distribution",
                r,
                f"the engine verifies against target rows at TV up to {r['target_processing_tv_max']:.3g} "
                f"from the requested processing of the target's logits",
                tv=r["target_processing_tv_max"],
            )
        if r.get("draft_processing_tv_max", 0.0) > PROCESSING_TOL:
            add(
                "draft-processing",
                "efficiency",
                r,
                f"the draft proposes from rows at TV up to {r['draft_processing_tv_max']:.3g} from the "
                f"requested processing of the draft's logits on the same context (the output stays exact: "
                f"the engine verifies against the rows it drafted from)",
                tv=r["draft_processing_tv_max"],
            )
        if not r.get("acceptance_passed", True):
            add(
                "acceptance",
                "efficiency",
                r,
                f"accepts {r['acceptance_mean_measured']:.4f} of {r['verified_drafts']} verified drafts, "
                f"drafting from the requested q gives {r['alpha_mean_predicted']:.4f} (z-test p-value "
                f"{r['acceptance_p_value']:.3g} < {r['acceptance_per_check_rate']:.3g}); per position "
                f"{_fmt(r['acceptance_measured'])} vs {_fmt(r['alpha_predicted'])}",
                p_value=r["acceptance_p_value"],
                measured=r["acceptance_mean_measured"],
                expected=r["alpha_mean_predicted"],
                verified_drafts=r["verified_drafts"],
            )
    return out


CASE_PREFIX = "tiny Qwen2: "
"""What the findings' and the power rows' case names of this check start with."""


def check_generate(
    n: int = 2000,
    seed: int = 0,
    n_acceptance: int = 100,
    control: bool = True,
    pair=None,
    settings=SETTINGS,
    k: int = K,
    false_fail_rate: float = FALSE_FAIL_RATE,
) -> dict:
    """Every setting's rows (``check_setting``), the control's, and the findings they make
    (``findings_of``: ``Finding`` objects) in one dict; no verdict of its own (``add_to_report`` puts the
    findings in a ``check`` report). ``false_fail_rate``: half over the settings' chi-square
    tests, half over their acceptance tests."""
    check_int("n", n, 1)
    check_int("n_acceptance", n_acceptance, 0)
    check_seed(seed)
    t0 = time.perf_counter()
    pair = pair or tiny_pair()
    prompt = pair.tokenizer.encode(PROMPT)
    dist_rate = stats.split_budget(false_fail_rate / 2, len(settings))
    acc_rate = stats.split_budget(false_fail_rate / 2, len(settings))
    with hf.engine_context(pair.draft, k):
        rows = [
            check_setting(pair, prompt, s, n, seed * 1000 + 10 * i, dist_rate, n_acceptance, acc_rate, k=k)
            for i, s in enumerate(settings)
        ]
        ctrl = (
            check_setting(pair, prompt, CONTROL, n, seed * 1000 + 999, dist_rate, 0, acc_rate, k=k) if control else None
        )
    return {
        "target": "transformers generate(assistant_model=draft, do_sample=True) on the tiny random Qwen2 pair",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "model": pair.name,
        "prompt": PROMPT,
        "k": k,
        "new_tokens": NEW_TOKENS,
        "findings": findings_of(rows),
        "rows": rows,
        "control": None if ctrl is None else {**ctrl, "detected": not ctrl["passed"]},
        "n": n,
        "n_acceptance": n_acceptance,
        "seed": seed,
        "false_fail_rate": false_fail_rate,
        "false_pass_rate": FALSE_PASS_RATE,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def add_to_report(
    report,
    n: int = 2000,
    seed: int = 0,
    n_acceptance: int = 100,
    control: bool = True,
    pair=None,
    settings=SETTINGS,
    false_fail_rate: float = FALSE_FAIL_RATE,
) -> dict:
    """Run ``check_generate`` and put what it finds into ``report`` (an ``api.Report``): its
    findings (distribution: the output law, the target's processing; efficiency: the draft's
    processing, the acceptance rate), one ``power`` row per setting (the chi-square's runs and the
    TV it detects with probability 1 - FALSE_PASS_RATE: stated, not required), one ``ran`` line
    per setting, the control (``Report.add_control``: undetected, the report is inconclusive),
    the coverage words, the seconds and the false-fail rate (``false_fail_rate`` added to the
    report's). The verdict and exit code stay the report's (``api``). Returns the raw dict."""
    raw = check_generate(n, seed, n_acceptance, control, pair, settings, false_fail_rate=false_fail_rate)
    r = report.result
    r.findings += raw["findings"]
    for row in raw["rows"]:
        case = CASE_PREFIX + row["setting"]
        r.power.append(
            {
                "case": case,
                "request": 0,
                "check": "tiny-qwen-chi-square",
                "runs": row["n"],
                "min_detectable_tv": row["min_discrepancy"],
                "false_fail_rate": row["per_check_rate"],
                "detection_probability": 1 - FALSE_PASS_RATE,
            }
        )
        r.chi2_p_value_min = row["p_value"] if r.chi2_p_value_min is None else min(r.chi2_p_value_min, row["p_value"])
        r.ran.append(
            f"tiny-qwen-chi-square: {case}: first {row['new_tokens']} tokens, {row['cells']} cells, "
            f"p-value {row['p_value']:.3g} after {row['n']} generations; detects TV >= "
            f"{row['min_discrepancy']:.3g} with probability {1 - FALSE_PASS_RATE:g}"
        )
        if "acceptance_measured" in row:
            r.ran.append(
                f"acceptance: {case}: {_fmt(row['acceptance_measured'])} per position, predicted "
                f"{_fmt(row['alpha_predicted'])}, engine's own {_fmt(row['alpha_engine'])}; all "
                f"positions p-value {_fmt([row['acceptance_p_value']], '.3g')}; processing TV max "
                f"target {row['target_processing_tv_max']:.2g}, draft {row['draft_processing_tv_max']:.2g}"
            )
    ctrl = raw["control"]
    if ctrl is not None:
        found = (
            []
            if not ctrl["detected"]
            else [
                Finding(
                    "tiny-qwen-chi-square",
                    "distribution",
                    f"p-value {ctrl['p_value']:.3g} < {ctrl['per_check_rate']:.3g} "
                    f"after {ctrl['n']} generations, TV {ctrl['tv']:.4f}",
                    CASE_PREFIX + CONTROL.name,
                ).to_dict()
            ]
        )
        report.add_control(
            f"{raw['target']}, assistant_ensemble_weight={hf.ENSEMBLE_WEIGHT}",
            "biased by design, through the same chi-square at the same n",
            False if ctrl["detected"] else True,
            found,
        )
    report.coverage += (
        f"; plus the tiny random Qwen2 pair end to end ({len(raw['rows'])} settings: first "
        f"{NEW_TOKENS} tokens by a prefix-tree chi-square at {n} generations, power stated; "
        f"processing and acceptance over {n_acceptance} generations of {ACCEPTANCE_NEW_TOKENS} tokens)"
    )
    r.seconds += raw["seconds"]
    report.false_fail_rate += false_fail_rate
    return raw


def _fmt(values, spec: str = ".3f") -> str:
    return "[" + ", ".join("-" if v is None else format(v, spec) for v in values) + "]"


__all__ = [
    "ACCEPTANCE_NEW_TOKENS",
    "CASE_PREFIX",
    "CONTROL",
    "SETTINGS",
    "FALSE_FAIL_RATE",
    "K",
    "NEW_TOKENS",
    "PROCESSING_TOL",
    "PROMPT",
    "Setting",
    "add_to_report",
    "cell_of",
    "cells",
    "check_generate",
    "exact_law",
    "findings_of",
    "measure_acceptance",
    "recording_rounds",
]
