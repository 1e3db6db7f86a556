"""How often transformers' assisted generation accepts a draft, against what drafting from the
requested q predicts: every verification round recorded (``recording_rounds`` wraps
``_speculative_sampling``), alpha_i per draft position from uncached teacher-forced forwards
(``teacher_forced_alphas``, with the TV between the engine's processed rows and ours), and a
martingale z-test on accepted - alpha_i (``acceptance_z_test``, ``measure_acceptance``). Part of
``hf_generate``'s check."""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from .hf_settings import ACCEPTANCE_NEW_TOKENS, Setting, generate_new_tokens, hf_generation, torch

MIN_ROUNDS = 30  # fewer verified drafts at a position: no z-test there


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
