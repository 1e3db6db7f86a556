"""Rounding is not a bias: exact laws judged at the subject's own working precision.

The enumerator gives a subject's output law exactly; a sampler that computes in float32,
bfloat16 or float16 differs from the target's law by rounding long before the float64 floor
``EXACT_TV_TOL`` (1e-9). This module is the one policy every interface and every engine row
judges an exact TV with (p = target, q = draft, k = drafted tokens, m = the window's tokens):

1. **The working precision**, observed or stated. While the enumerator follows a subject it notes
   the dtypes of the numbers the subject's random decisions are made against (``note``): NumPy
   thresholds compared with a uniform and ``rng.choice`` weights (``laws.exact``), torch's
   ``rand`` dtype, the tensors compared with a random value and ``multinomial``'s weights
   (``laws.torch_random``). The law comes back as an ``ObservedLaw`` carrying them. The judged
   precision (``working_precision``) is the widest precision below float64 seen (float64 is what
   the battery's own p and q rows are, so seeing it says nothing about the subject), else
   float64. A float16 ratio inside float32 code is judged at float32, the rest of its code. The
   user may state it (``stated``: ``--precision``, ``api.check(precision=)``, the fixture); a
   stated precision wins.
2. **The yardstick**: on the same case, the law of the token-wise rule (Leviathan et al., arXiv
   2211.17192; ``samplers.chain``) carried out in that precision (``rule_in``: p and q rows,
   the ratio, the residual and every cumulative sum rounded to it after each operation, each
   uniform on its grid, 2^-24 for float32 as torch.rand and NumPy's float32 random draw it), and
   its TV from the exact law (``yardstick``): what rounding alone produces there.
3. **The decision** (``judge_law``): a subject's exact TV within ``MULTIPLE`` x max(yardstick,
   ``floor``) is "exact at float32 rounding (TV a; the rule in float32: b)"; above it a finding
   with both figures. ``MULTIPLE`` is 4: a subject orders its operations its own way (a cumulative
   sum forwards or pairwise, p / q or p * (1 / q), normalising p or scaling u by the sum), each
   of which rounds a threshold once or twice more than the rule does (a factor up to 3); the
   floor (one unit roundoff per token of the window) covers a case whose rows the precision
   holds exactly, where the rule's own TV is 0. At float64 the allowance is ``EXACT_TV_TOL``,
   as before. Where the rule in that precision cannot be enumerated (and for the kernel
   interface, whose law comes from explicit uniforms), ``analytic_bound`` stands in: 4 unit
   roundoffs per threshold (k coins and a cumulative sum per token of the support) per round.

bfloat16 is emulated by rounding to 8 significant bits, half to even (``round_to``), which is
what ``torch.Tensor.to(torch.bfloat16)`` does to a float32; float16 and float32 are NumPy's.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import exact
from .precision import (
    SIGNIFICAND_BITS,
    check_precision,
    stated_precision,
    unobserved,
    working_precision,
)
from .stats import total_variation

EXACT_TV_TOL = 1e-9
"""The float64 floor: a correct float64 sampler's exact TV is ~1e-15; above 1e-9 is a bias."""

MULTIPLE = 4.0
"""How far past the rule's own rounding (or the floor) a subject's exact TV may go (docstring)."""


def unit_roundoff(precision: str) -> float:
    """2^-t for a t-bit significand: the relative error of one rounding (float32: 6.0e-8), and
    the step of that precision's uniforms in [0, 1) (torch.rand, NumPy's float32 random)."""
    return 2.0 ** -SIGNIFICAND_BITS[check_precision("precision", precision)]


# ------------------------------------------------------------------------- the rule in a precision


def round_to(x, precision: str) -> np.ndarray:
    """``x`` rounded to ``precision`` (to nearest, ties to even), as float64 values. bfloat16:
    the significand cut to 8 bits by ``frexp`` / ``rint``, as torch's float32 -> bfloat16."""
    a = np.asarray(x, dtype=np.float64)
    if precision == "float64":
        return a
    if precision == "bfloat16":
        mantissa, exponent = np.frexp(a)
        return np.ldexp(np.rint(mantissa * 2.0**8) / 2.0**8, exponent)
    return a.astype(precision).astype(np.float64)


def running_sum(w: np.ndarray, precision: str) -> np.ndarray:
    """The cumulative sums of ``w``, each partial sum rounded to ``precision`` (a sequential scan:
    NumPy's ``add.accumulate`` in float32 or float16 adds in order and rounds each sum; float64
    exactly as in the loop; bfloat16, which NumPy lacks, by the loop)."""
    if precision != "bfloat16":
        return np.add.accumulate(np.asarray(w, dtype=np.float64).astype(precision)).astype(np.float64)
    out, total = np.empty(len(w)), 0.0
    for i, x in enumerate(w.tolist()):
        total = float(round_to(total + x, precision))
        out[i] = total
    return out


def coin(u, threshold: float, precision: str) -> bool:
    """u < threshold for u on ``precision``'s grid of [0, 1) (steps of ``unit_roundoff``): the
    continuous u below ``threshold`` rounded up to the grid."""
    h = unit_roundoff(precision)
    return u < math.ceil(float(threshold) / h) * h


def draw(w: np.ndarray, rng, precision: str):
    """One token by the inverse CDF of ``w`` in ``precision``: the cumulative sums and their
    quotients by the total rounded to it, one uniform on its grid; the first id of positive
    weight whose threshold the uniform is below (``coin``), else the last such id. Drawn as the
    categorical law that walk has (``inverse_cdf_law``), by ``rng.choice``: the same law, and the
    enumerator sums over it where nothing reads it (``laws.summed_draws``) rather than branching
    once per threshold, so the rule in a precision is enumerable at engine vocabularies."""
    w = np.asarray(w, dtype=np.float64)
    return rng.choice(len(w), p=inverse_cdf_law(w.tobytes(), precision))


@functools.lru_cache(maxsize=256)
def inverse_cdf_law(row: bytes, precision: str) -> np.ndarray:
    """The law of ``draw`` on the row whose float64 bytes are ``row``: id i of positive weight
    gets the uniform's mass between the running maximum of the grid thresholds (``coin``'s
    ceiling to the grid) before it and its own; the last such id the rest up to 1."""
    w = np.frombuffer(row, dtype=np.float64)
    cdf = running_sum(round_to(w, precision), precision)
    h = unit_roundoff(precision)
    edges = np.ceil(round_to(cdf / cdf[-1], precision) / h) * h
    positive = np.flatnonzero(w > 0)
    reached = np.minimum(np.maximum.accumulate(edges[positive]), 1.0)
    reached[-1] = 1.0
    law = np.zeros(len(w))
    law[positive] = np.diff(reached, prepend=0.0)
    return law


def rule_in(precision: str):
    """The token-wise rule (``samplers.chain.speculative_step``) carried out in ``precision``: a
    round sampler ``(p_fn, q_fn, prefix, k, rng) -> tokens`` whose p and q rows, acceptance
    ratio, residual, cumulative sums and uniforms are all of that precision."""
    check_precision("precision", precision)

    def row(fn, context):
        return round_to(fn(context), precision)

    def speculative_step(p_fn, q_fn, prefix, k, rng):
        prefix = tuple(prefix)
        drafts: list[int] = []
        qs: list[np.ndarray] = []
        for _ in range(k):
            qs.append(row(q_fn, prefix + tuple(drafts)))
            drafts.append(draw(qs[-1], rng, precision))
        for i, x in enumerate(drafts):
            p = row(p_fn, prefix + tuple(drafts[:i]))
            ratio = round_to(p[x] / qs[i][x], precision)
            if not coin(rng.random(), min(1.0, float(ratio)), precision):
                residual = round_to(np.maximum(p - qs[i], 0.0), precision)
                return drafts[:i] + [draw(residual if residual.sum() > 0 else p, rng, precision)]
        return drafts + [draw(row(p_fn, prefix + tuple(drafts)), rng, precision)]

    speculative_step.__name__ = f"rule_in_{precision}"
    return speculative_step


def yardstick(p_fn, q_fn, prefix, k: int, m: int, precision: str, target: dict, *, max_paths: int = 200_000):
    """TV between ``target`` (the exact law of the first m tokens) and the law of ``rule_in(
    precision)`` on the same case: what rounding alone produces there. None when the rule in
    that precision cannot be enumerated within ``max_paths``."""
    with unobserved():
        try:
            law = exact.sampler_distribution(rule_in(precision), p_fn, q_fn, prefix, k, m, max_paths=max_paths)
        except exact.NotEnumerable:
            return None
    return total_variation(law, target)


def analytic_bound(precision: str, k: int, support: int, rounds: int = 1) -> float:
    """The TV a kernel computing in ``precision`` can reach by rounding alone: each of the rule's
    thresholds (k coins, a cumulative sum per token of positive target probability) moved by up
    to 4 unit roundoffs, per round of the window. float32, one round: the kernel interface's
    tolerance, 4 * 2^-24 * (k + 1 + support)."""
    return 4 * unit_roundoff(precision) * (k + 1 + support) * rounds


def floor(precision: str, m: int) -> float:
    """The least rounding a window of m tokens is allowed: one unit roundoff per token."""
    return unit_roundoff(precision) * m


# ------------------------------------------------------------------------- the decision


@dataclass
class Judgement:
    """One exact TV judged at a precision: ``allowed`` the largest TV that is rounding there,
    ``rule_tv`` the yardstick (None: not computed, below 1e-9 or at float64, or the rule not
    enumerable: then ``analytic_bound``), ``how`` "stated" or "observed"."""

    tv: float
    precision: str
    how: str
    allowed: float
    rule_tv: float | None = None

    @property
    def exact(self) -> bool:
        return self.tv <= self.allowed

    def rule_words(self) -> str:
        """ "the rule in float32: 3.1e-08" (or the bound used instead)."""
        if self.rule_tv is not None:
            return f"the rule in {self.precision}: {self.rule_tv:.2g}"
        if self.precision == "float64":
            return f"float64 floor {EXACT_TV_TOL:g}"
        return f"the rule in {self.precision} not enumerable: analytic bound {self.allowed:.2g}"

    def words(self) -> str:
        """ "exact at float32 rounding (TV 4e-08; the rule in float32: 3.1e-08)" or the finding's
        words with both figures and the allowance."""
        if self.exact:
            return f"exact at {self.precision} rounding (TV {self.tv:.2g}; {self.rule_words()})"
        return (
            f"exact output distribution differs from the target's: TV {self.tv:.4g}, above {self.precision} "
            f"rounding ({self.rule_words()}; allowed {self.allowed:.2g} = {MULTIPLE:g} x max(that, "
            f"{floor(self.precision, 1):.2g} per token))"
        )

    def evidence(self) -> dict:
        return {
            "precision": self.precision,
            "precision_from": self.how,
            "rule_tv": self.rule_tv,
            "allowed": self.allowed,
        }


def chosen_precision(law) -> tuple[str, str]:
    """(precision, "stated" | "observed") for an exact law of a subject (an ``ObservedLaw``)."""
    said = stated_precision()
    if said is not None:
        return said, "stated"
    return working_precision(getattr(law, "precisions", ())), "observed"


def judge_law(tv: float, law, target: dict, p_fn, q_fn, prefix, k: int, m: int, *, max_paths: int = 200_000):
    """Judge a subject's exact TV on a case (``law`` its exact law, ``target`` the target's): at
    float64, or at or below ``EXACT_TV_TOL``, the float64 floor; else against the rule in the
    chosen precision (``yardstick``), or ``analytic_bound`` where that cannot be enumerated."""
    precision, how = chosen_precision(law)
    if precision == "float64" or tv <= EXACT_TV_TOL:
        return Judgement(tv, precision, how, max(EXACT_TV_TOL, MULTIPLE * floor(precision, m)))
    rule_tv = yardstick(p_fn, q_fn, prefix, k, m, precision, target, max_paths=max_paths)
    if rule_tv is None:
        support = max(int(np.count_nonzero(np.asarray(p_fn(tuple(prefix))))), 1)
        return Judgement(tv, precision, how, analytic_bound(precision, k, support, m))
    return Judgement(tv, precision, how, max(EXACT_TV_TOL, MULTIPLE * max(rule_tv, floor(precision, m))), rule_tv)


def longest_window(outcomes) -> int:
    """The most tokens in one of ``outcomes`` (token tuples, or tuples of them: a batch's), at least 1."""
    best = 1
    for o in outcomes:
        if isinstance(o, tuple) and o and all(isinstance(x, tuple) for x in o):
            best = max(best, *(len(x) for x in o))
        elif isinstance(o, tuple):
            best = max(best, len(o))
    return best


def stated_allowance(k: int, vocab: int, tokens: int) -> float:
    """The TV allowed by rounding where no reference in a precision can be run on the case (the
    loop interface, whose laws come through a whole generation loop): ``EXACT_TV_TOL`` unless a
    precision is stated (``check --precision``), then ``analytic_bound`` over the window."""
    said = stated_precision()
    if said is None or said == "float64":
        return EXACT_TV_TOL
    return max(EXACT_TV_TOL, analytic_bound(said, k, vocab, max(tokens, 1)))


def mean_gap_allowed(law, k: int) -> float:
    """How far an exact mean round length may sit from the rule's by rounding: a round length
    lies in 1..k + 1, so the gap is at most k times the round-length law's TV, each of the k
    coins moved by ``MULTIPLE`` unit roundoffs; at float64 ``EXACT_TV_TOL``."""
    precision, _ = chosen_precision(law)
    if precision == "float64":
        return EXACT_TV_TOL
    return max(EXACT_TV_TOL, k * k * MULTIPLE * unit_roundoff(precision))


def tally(summary: dict, judgement: Judgement) -> None:
    """Add one judged case to a battery's ``rounding`` summary (``BatteryResult.rounding``):
    the precisions judged at, the cases exact only at rounding, their largest TV and rule TV."""
    summary.setdefault("precision", judgement.precision)
    summary.setdefault("precision_from", judgement.how)
    if judgement.precision != summary["precision"]:
        summary["precision"] = working_precision([summary["precision"], judgement.precision])
    if judgement.exact and judgement.tv > EXACT_TV_TOL:
        summary["rounding_cases"] = summary.get("rounding_cases", 0) + 1
        summary["largest_tv"] = max(summary.get("largest_tv", 0.0), judgement.tv)
        if judgement.rule_tv is not None:
            summary["largest_rule_tv"] = max(summary.get("largest_rule_tv", 0.0), judgement.rule_tv)
        ratio = judgement.tv / (judgement.allowed / MULTIPLE)  # of max(the rule's TV, the floor) on its case
        summary["largest_ratio"] = max(summary.get("largest_ratio", 0.0), ratio)
    if not judgement.exact:
        summary["above_cases"] = summary.get("above_cases", 0) + 1
        if judgement.tv > summary.get("above_tv", 0.0):  # the worst finding, with both figures
            summary.update(above_tv=judgement.tv, above_rule_tv=judgement.rule_tv, above_allowed=judgement.allowed)


def summary_words(summary: dict) -> str:
    """The report's line: "judged at float32 (observed): 12 exact cases within float32 rounding
    (largest TV 4e-08; the rule in float32: 3.1e-08); rounding this small is invisible to the
    sampled cases, the exact cases settled it"; "" when nothing was judged exactly."""
    if not summary:
        return ""
    p = summary["precision"]
    head = f"judged at {p} ({summary.get('precision_from', 'observed')})"
    parts = []
    n = summary.get("rounding_cases", 0)
    if n:
        rule = summary.get("largest_rule_tv")
        rule = f"; the rule in {p}: {rule:.2g}" if rule is not None else ""
        parts.append(
            f"{n} exact case{'s' if n != 1 else ''} within {p} rounding (largest TV "
            f"{summary['largest_tv']:.2g}{rule}; on its own case a TV is at most {summary.get('largest_ratio', 0):.2g}x "
            f"the rule's or the floor, of {MULTIPLE:g}x allowed); rounding this small is invisible to the sampled "
            "cases, the exact cases settled it"
        )
    above = summary.get("above_cases", 0)
    if above and p != "float64":
        rule = summary.get("above_rule_tv")
        rule = f"the rule in {p}: {rule:.2g}" if rule is not None else "no rule enumerable: analytic bound"
        parts.append(
            f"{above} exact case{'s' if above != 1 else ''} above {p} rounding (largest TV {summary['above_tv']:.2g}; "
            f"{rule} on its case, allowed {summary['above_allowed']:.2g})"
        )
    return f"{head}: {'; '.join(parts)}" if parts else head


__all__ = [
    "EXACT_TV_TOL",
    "MULTIPLE",
    "Judgement",
    "analytic_bound",
    "chosen_precision",
    "coin",
    "draw",
    "floor",
    "judge_law",
    "longest_window",
    "mean_gap_allowed",
    "round_to",
    "rule_in",
    "running_sum",
    "stated_allowance",
    "summary_words",
    "tally",
    "unit_roundoff",
    "yardstick",
]
