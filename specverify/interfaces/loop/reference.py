"""The reference loop's law and tokens per pass on a loop case: the bar a subject is judged against.

``reference_law`` enumerates the reference loop (``samplers.reference_loop.generate``) in the
parent, its outputs read as a subject's are (``loop.tasks.read_outcome``); ``reference_rates`` (and
``tokens_per_pass_rates``) is its exact tokens per target pass per request, cached per case;
``tokens_per_pass_test`` compares sampled runs with it (one-sided: only a shortfall is a finding).
"""

from __future__ import annotations

import math

import numpy as np

from ...laws import exact
from .cases import LoopCase
from .tasks import read_outcome


def reference_law(case: LoopCase, max_paths: int) -> dict:
    """The reference loop's (``samplers.reference_loop.generate``) exact law of the case's outputs,
    read as a subject's are (``loop.tasks.read_outcome``); NotEnumerable past ``max_paths``."""
    from ...samplers.reference_loop import generate

    return exact.enumerate_distribution(
        lambda rng: read_outcome(
            generate(case.target, case.draft, list(case.requests), case.k, rng), len(case.requests), case.vocab_size
        ),
        max_paths=max_paths,
    )


def tokens_per_pass_rates(law: dict, n: int) -> list[float]:
    """Exact E[tokens] / E[tokens - accepted] per request (inf when every token was a draft)."""
    out = []
    for i in range(n):
        tokens = sum(w * len(o[i][0]) for o, w in law.items())
        passes = sum(w * (len(o[i][0]) - min(o[i][3], len(o[i][0]))) for o, w in law.items())
        out.append(tokens / passes if passes > 0 else (math.inf if tokens > 0 else 1.0))
    return out


def tokens_per_pass_test(tokens, passes, reference: float, rate: float, false_pass_rate: float) -> dict:
    """Sampled tokens per target pass, sum(tokens) / sum(passes) over n runs, against the
    reference loop's exact rate r: one-sided, only a shortfall is a finding. Per run D = tokens -
    r x passes has mean >= 0 when the subject's rate is r or more; z = mean(D) / (sd(D) / sqrt(n)),
    a finding when z < -z(``rate``) (normal approximation of the mean, its false-fail rate
    ``rate``; when D never varies, when mean(D) < 0). Returns ``measured``, ``z``, ``p_value``,
    ``passed`` and ``detects``: the shortfall in tokens per pass seen with probability
    1 - ``false_pass_rate``, (z(rate) + z(false_pass_rate)) sd(D) / sqrt(n) / mean(passes)."""
    from scipy.stats import norm

    t, q = np.asarray(tokens, dtype=np.float64), np.asarray(passes, dtype=np.float64)
    n, d = len(t), t - reference * q
    measured = float(t.sum() / q.sum()) if q.sum() > 0 else math.inf
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    mean = float(d.mean())
    if sd > 0:
        z = mean / (sd / math.sqrt(n))
        p_value, passed = float(norm.cdf(z)), bool(z >= norm.ppf(rate))
    else:
        z, p_value, passed = (0.0, 1.0, True) if mean >= -1e-9 else (-math.inf, 0.0, False)
    detects = (norm.isf(rate) + norm.isf(false_pass_rate)) * sd / math.sqrt(n) / max(float(q.mean()), 1e-12)
    return {"measured": measured, "z": z, "p_value": p_value, "passed": passed, "detects": float(detects), "runs": n}


REFERENCE_RATES: dict = {}
"""id(case) -> (case, its rates): the reference loop's tokens per pass, enumerated once a case
(the case kept, so that its id is not reused while it is cached)."""


def remember_rates(case: LoopCase, law: dict) -> None:
    """Cache ``case``'s tokens per pass from the reference loop's law ``law``, enumerated already."""
    REFERENCE_RATES[id(case)] = (case, tokens_per_pass_rates(law, len(case.requests)))


def reference_rates(case: LoopCase) -> list[float]:
    """The reference loop's tokens per target pass on the case, enumerated in the parent."""
    from ...samplers.reference_loop import generate

    key = id(case)
    if key not in REFERENCE_RATES:
        law = exact.enumerate_distribution(
            lambda rng: read_outcome(
                generate(case.target, case.draft, list(case.requests), case.k, rng), len(case.requests), case.vocab_size
            ),
            max_paths=1_000_000,
        )
        REFERENCE_RATES[key] = (case, tokens_per_pass_rates(law, len(case.requests)))
    return REFERENCE_RATES[key][1]


__all__ = [
    "REFERENCE_RATES",
    "reference_law",
    "reference_rates",
    "remember_rates",
    "tokens_per_pass_rates",
    "tokens_per_pass_test",
]
