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

It is over 550 lines because its two checks, the exact law of the first tokens and the acceptance
rate per round, run on the same recorded generations of each setting and share the recording hooks
and the cells of the law; split, the recording would become a protocol between modules.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from ..battery.core import Finding
from ..common.validation import check_int, check_seed
from ..laws import stats
from ..laws.processing import process_logits
from ..models.loading import tiny_pair, torch_modules
from . import hf

torch, transformers = torch_modules()
import transformers.generation.utils as hf_generation  # noqa: E402 - after torch_modules(): a missing torch is one clear error

PROMPT = "def mean(xs):"
NEW_TOKENS = 3
K = 4
ACCEPTANCE_NEW_TOKENS = 24
MAX_CONTEXTS = 512
MIN_CELL_COUNT = 5
FALSE_FAIL_RATE = stats.DEFAULT_FALSE_FAIL_RATE
FALSE_PASS_RATE = 0.01
MIN_ROUNDS = 30  # fewer verified drafts at a position: no z-test there


@dataclass(frozen=True)
class Setting:
    name: str
    temperature: float
    top_k: int | None = None
    ensemble_weight: float | None = None
    pad_token_id: int | None = None

    def generate_kwargs(self) -> dict:
        """Sampling options for ``generate``; top_k=0 disables transformers' default top-k of 50."""
        out = {"do_sample": True, "temperature": self.temperature, "top_k": self.top_k or 0, "top_p": 1.0}
        if self.ensemble_weight is not None:
            out["assistant_ensemble_weight"] = self.ensemble_weight
        if self.pad_token_id is not None:
            out["pad_token_id"] = self.pad_token_id
        return out

    def process(self, logits) -> np.ndarray:
        return process_logits(logits, self.temperature, self.top_k)


PAD_DEMO_TOKEN = 52
"""The default tiny pair's most likely first token after PROMPT (p = 0.28 at T = 1), used as
``pad_token_id`` in the fourth setting: a pad id that is also an ordinary, generable token."""

SETTINGS = (
    Setting("T=1.0", 1.0),
    Setting("T=0.7", 0.7),
    Setting("top-k=20, T=1.0", 1.0, 20),
    Setting(f"T=1.0, pad_token_id={PAD_DEMO_TOKEN}", 1.0, pad_token_id=PAD_DEMO_TOKEN),
)
CONTROL = Setting("ensemble w=0.5, T=1.0 (control)", 1.0, None, hf.ENSEMBLE_WEIGHT)
PROCESSING_TOL = 1e-3
"""Largest TV allowed between the engine's processed rows and ours (float32 rounding is ~1e-6)."""


# --------------------------------------------------------------------------- the engine


def generate_new_tokens(pair, prompt: list[int], setting: Setting, max_new_tokens: int) -> tuple:
    """One ``generate(assistant_model=draft)`` call; its new tokens."""
    x = torch.tensor([prompt])
    out = pair.target.generate(
        input_ids=x,
        attention_mask=torch.ones_like(x),
        assistant_model=pair.draft,
        max_new_tokens=max_new_tokens,
        **setting.generate_kwargs(),
    )
    new = tuple(int(t) for t in out[0, len(prompt) :].tolist())
    if len(new) != max_new_tokens:
        raise RuntimeError(f"generate returned {len(new)} new tokens, asked for {max_new_tokens}")
    return new


def sample_generations(pair, prompt, setting: Setting, n: int, m: int, seed: int) -> list[tuple]:
    torch.manual_seed(seed)
    return [generate_new_tokens(pair, prompt, setting, m) for _ in range(n)]


# --------------------------------------------------------------------------- the exact law


def last_logits(model, contexts: list[list[int]], chunk: int = 256) -> np.ndarray:
    """float32 logits after each context (all of one length), in batched uncached forwards."""
    rows = []
    for start in range(0, len(contexts), chunk):
        x = torch.tensor(contexts[start : start + chunk])
        rows.append(model(input_ids=x).logits[:, -1, :].float().numpy())
    return np.concatenate(rows)


def exact_law(target, prompt: list[int], setting: Setting, m: int, n: int) -> dict:
    """prefix -> the target's processed next-token distribution, for every prefix expanded.

    Depth by depth: all prefixes with positive probability when there are at most MAX_CONTEXTS,
    else the most probable ones among those with n * P(prefix) >= 2 * MIN_CELL_COUNT (a prefix
    rarer than that could not be split into testable cells anyway).
    """
    cond: dict[tuple, np.ndarray] = {}
    level = {(): 1.0}
    for depth in range(m):
        expand = sorted(level, key=lambda pre: -level[pre])
        if len(expand) > MAX_CONTEXTS:
            expand = [pre for pre in expand[:MAX_CONTEXTS] if n * level[pre] >= 2 * MIN_CELL_COUNT]
        if not expand:
            break
        rows = last_logits(target, [prompt + list(pre) for pre in expand])
        nxt = {}
        for pre, row in zip(expand, rows):
            cond[pre] = setting.process(row)
            if depth + 1 < m:
                for t in np.flatnonzero(cond[pre]):
                    nxt[pre + (int(t),)] = level[pre] * cond[pre][t]
        level = nxt
    return cond


def _bucket(prefix: tuple, m: int) -> tuple:
    """The cell 'prefix, then anything': -1 marks the free positions."""
    return prefix + (-1,) * (m - len(prefix))


def cells(cond: dict, m: int, n: int) -> dict[tuple, float]:
    """An exact partition of the m-token sequences into cells with expected count >= 5 at n.

    A leaf (a whole sequence) keeps its own cell when n * P >= MIN_CELL_COUNT; what its prefix
    does not keep goes to the prefix's rest cell ``_bucket(prefix)``, which itself moves up to the
    parent's when too small. The root's rest cell keeps whatever is left.
    """
    out: dict[tuple, float] = {}

    def walk(prefix: tuple, mass: float) -> float:
        rest = 0.0
        vec = cond.get(prefix)
        if vec is None:
            rest = mass
        else:
            for t in np.flatnonzero(vec):
                child, child_mass = prefix + (int(t),), mass * float(vec[t])
                if len(child) < m:
                    rest += walk(child, child_mass)
                elif n * child_mass >= MIN_CELL_COUNT:
                    out[child] = child_mass
                else:
                    rest += child_mass
        if prefix and n * rest < MIN_CELL_COUNT:
            return rest
        if rest > 0:
            out[_bucket(prefix, m)] = rest
        return 0.0

    walk((), 1.0)
    return out


def cell_of(sample: tuple, cond: dict, partition: dict) -> tuple:
    """The cell a generated sequence falls in; the sequence itself when the law gives it 0."""
    m = len(sample)
    for j in range(m):
        vec = cond.get(sample[:j])
        if vec is None:
            break
        if not 0 <= sample[j] < vec.size or vec[sample[j]] == 0:
            return sample  # impossible under the target: absent from the expected cells
    for j in range(m, -1, -1):
        key = _bucket(sample[:j], m)
        if key in partition:
            return key
    raise AssertionError(f"no cell holds {sample}")  # the root's rest cell always exists


def distribution_test(samples: list[tuple], cond: dict, partition: dict, rate: float) -> dict:
    mapped = [cell_of(s, cond, partition) for s in samples]
    test = stats.chi_square_test(mapped, partition, false_fail_rate=rate)
    n = len(samples)
    return {
        "n": n,
        "cells": len(partition),
        "passed": bool(test.passed),
        "p_value": float(test.p_value if test.p_value is not None else 0.0),
        "per_check_rate": rate,
        "tv": stats.tv_distance(stats.empirical_distribution(mapped), partition),
        "min_discrepancy": stats.min_discrepancy_chi_square(n, partition, rate, FALSE_PASS_RATE),
        "detail": test.detail,
    }


# --------------------------------------------------------------------------- acceptance


@dataclass
class Round:
    ids: list[int]  # context and the drafts
    drafted: int
    accepted: int
    p_engine: np.ndarray  # the engine's processed target rows at the draft positions
    q_engine: np.ndarray  # the engine's processed draft rows


@contextmanager
def recording_rounds():
    """Wrap transformers' ``_speculative_sampling`` (looked up in its module at each call by
    ``_assisted_decoding``) to record every verification round; the original is put back."""
    original = hf_generation._speculative_sampling
    rounds: list[Round] = []

    def recorder(candidate_input_ids, candidate_logits, candidate_length, new_logits, *args, **kwargs):
        valid, n_matches = original(
            candidate_input_ids, candidate_logits, candidate_length, new_logits, *args, **kwargs
        )
        c = int(candidate_length)
        rounds.append(
            Round(
                candidate_input_ids[0].tolist(),
                c,
                int(n_matches),
                new_logits[0, :c].double().softmax(-1).numpy(),
                candidate_logits[0].double().softmax(-1).numpy(),
            )
        )
        return valid, n_matches

    hf_generation._speculative_sampling = recorder
    try:
        yield rounds
    finally:
        hf_generation._speculative_sampling = original


def _tv(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a - b).sum())


def teacher_forced_alphas(pair, setting: Setting, rnd: Round) -> tuple[np.ndarray, float, float]:
    """alpha_i per draft position from uncached forwards of the round's context and drafts,
    processed as requested; and the largest TV of the engine's target rows, and of its draft
    rows, from ours."""
    start = len(rnd.ids) - rnd.drafted - 1  # the row predicting the first draft
    x = torch.tensor([rnd.ids])
    p_rows = pair.target(input_ids=x).logits[0, start : start + rnd.drafted].float().numpy()
    q_rows = pair.draft(input_ids=x).logits[0, start : start + rnd.drafted].float().numpy()
    alphas, p_tv, q_tv = [], 0.0, 0.0
    for i in range(rnd.drafted):
        p, q = setting.process(p_rows[i]), setting.process(q_rows[i])
        alphas.append(float(np.minimum(p, q).sum()))
        p_tv = max(p_tv, _tv(p, rnd.p_engine[i]))
        q_tv = max(q_tv, _tv(q, rnd.q_engine[i]))
    return np.array(alphas), p_tv, q_tv


def acceptance_z_test(accepted: np.ndarray, alphas: np.ndarray) -> float:
    """Two-sided p-value of sum(accepted - alpha) = 0 (martingale CLT, variance sum a (1 - a))."""
    diff = float(np.sum(accepted - alphas))
    var = float(np.sum(alphas * (1.0 - alphas)))
    if var <= 0:
        return 1.0 if abs(diff) < 1e-9 else 0.0
    return float(2.0 * norm.sf(abs(diff) / math.sqrt(var)))


def measure_acceptance(pair, prompt, setting: Setting, n_gen: int, k: int, seed: int, rate: float) -> dict:
    """Acceptance per draft position (measured, predicted, the engine's own alpha) and one
    z-test over every verified draft of the setting (per-position p-values are descriptive)."""
    torch.manual_seed(seed)
    with recording_rounds() as rounds:
        for _ in range(n_gen):
            generate_new_tokens(pair, prompt, setting, ACCEPTANCE_NEW_TOKENS)
    by_pos = [{"acc": [], "alpha": [], "engine": []} for _ in range(k)]
    p_tv = q_tv = 0.0
    for rnd in rounds:
        alphas, round_p_tv, round_q_tv = teacher_forced_alphas(pair, setting, rnd)
        p_tv, q_tv = max(p_tv, round_p_tv), max(q_tv, round_q_tv)
        for i in range(min(rnd.drafted, rnd.accepted + 1)):  # positions verified this round
            pos = by_pos[i]
            pos["acc"].append(float(rnd.accepted > i))
            pos["alpha"].append(alphas[i])
            pos["engine"].append(float(np.minimum(rnd.p_engine[i], rnd.q_engine[i]).sum()))
    out = {
        "rounds": len(rounds),
        "target_processing_tv_max": p_tv,
        "draft_processing_tv_max": q_tv,
        "rounds_per_position": [],
        "alpha_predicted": [],
        "acceptance_measured": [],
        "alpha_engine": [],
        "acceptance_p_values": [],
    }
    for pos in by_pos:
        acc, alpha = np.array(pos["acc"]), np.array(pos["alpha"])
        out["rounds_per_position"].append(len(acc))
        out["alpha_predicted"].append(float(alpha.mean()) if len(acc) else None)
        out["acceptance_measured"].append(float(acc.mean()) if len(acc) else None)
        out["alpha_engine"].append(float(np.mean(pos["engine"])) if len(acc) else None)
        out["acceptance_p_values"].append(acceptance_z_test(acc, alpha) if len(acc) >= MIN_ROUNDS else None)
    acc = np.concatenate([pos["acc"] for pos in by_pos])
    alpha = np.concatenate([pos["alpha"] for pos in by_pos])
    out["verified_drafts"] = int(acc.size)
    out["acceptance_mean_measured"] = float(acc.mean()) if acc.size else None
    out["alpha_mean_predicted"] = float(alpha.mean()) if acc.size else None
    out["acceptance_p_value"] = acceptance_z_test(acc, alpha) if acc.size >= MIN_ROUNDS else None
    out["acceptance_per_check_rate"] = rate
    out["acceptance_passed"] = out["acceptance_p_value"] is None or out["acceptance_p_value"] >= rate
    return out


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
    "CASE_PREFIX",
    "CONTROL",
    "SETTINGS",
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
