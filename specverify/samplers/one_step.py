"""One round of the rule with a single draft (k = 1) on explicit rows p (target) and q (draft):
its exact output law, and counts of n sampled rounds.

A round with k = 1 drafts x ~ q, accepts it with probability min(1, p(x) / q(x)) and otherwise
emits a token from norm(max(0, p - q)) (Leviathan, Kalman, Matias 2023, arXiv 2211.17192,
Algorithm 1; Chen et al. 2023, arXiv 2302.01318, Algorithm 2). The first token it emits has the
law

    P(y) = min(p(y), q(y)) + (1 - alpha) * norm(max(0, p - q))(y),   alpha = sum(min(p, q)),

which is p itself (the theorem both papers prove). ``one_step_output_distribution`` evaluates that
law from the rule's own pieces (``chain.residual``); ``sample_one_step`` runs the rule
(``chain.verify``) n times. Both serve checks on real rows, a language model's teacher-forced
next-token distributions over 150k tokens (``gpu_validation/test_qwen_pair.py``,
``tests/test_models_tiny.py``), where no enumeration over prefixes is possible.
"""

from __future__ import annotations

import numpy as np

from ..common.validation import check_k, check_prob_vector, check_same_length
from .chain import residual, sample, verify


def checked_rows(p, q) -> tuple[np.ndarray, np.ndarray]:
    """p and q as float64 probability vectors of one length, or a ValueError naming the argument."""
    p, q = check_prob_vector("p", p), check_prob_vector("q", q)
    check_same_length("p", p, "q", q)
    return p, q


def one_step_output_distribution(p, q) -> np.ndarray:
    """The exact law of the first token one round with k = 1 emits on rows p and q:
    min(p, q) + (1 - alpha) * residual(p, q), with alpha = sum(min(p, q)).

    Equal to p (up to float rounding, ~1e-16 per entry) for the exact rule; a checker compares it
    with p. p and q are validated as probability vectors of one length (ValueError otherwise).
    """
    p, q = checked_rows(p, q)
    overlap = np.minimum(p, q)
    return overlap + (1.0 - overlap.sum()) * residual(p, q)


def sample_one_step(p, q, n: int, rng) -> np.ndarray:
    """Counts, per token of p's vocabulary, of the first token emitted by ``n`` independent
    rounds of the rule (``chain.verify``) with one draft x ~ q each, drawn from ``rng`` (a
    ``numpy.random.Generator``, or an int seed).

    The rounds run on the union of the supports of p and q only: a token outside both is never
    drafted, accepted or emitted, so a 150k-token row costs no more than its top-k. Under the
    exact rule the counts are multinomial(n, p), which a chi-square test can judge.
    """
    p, q = checked_rows(p, q)
    n = check_k(n, "n")
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    support = np.flatnonzero((p > 0) | (q > 0))
    ps, qs = p[support] / p[support].sum(), q[support] / q[support].sum()
    counts = np.zeros(p.size, dtype=np.int64)
    for _ in range(n):
        x = sample(qs, rng)
        accepted, token = verify([ps, ps], [qs], [x], rng)
        counts[support[x if accepted else token]] += 1
    return counts
