"""Round samplers wrong only where the fixed cases do not reach (issue 22): importable as
TARGET strings (tests/generated_subjects.py:NAME) for tests/test_generated_cases.py."""

import numpy as np

from specverify.samplers.chain import accepts, model_output, recover, sample

TOP = 8


def truncated_q_drafts(p_fn, q_fn, prefix, k, rng):
    """Drafts drawn from q truncated to its top 8 ids (engines do this for speed) while the ratio
    uses the full q: exact while V <= 8, biased beyond."""
    prefix = tuple(prefix)
    out = []
    for _ in range(k):
        ctx = prefix + tuple(out)
        p, q = model_output("p_fn", p_fn, ctx), model_output("q_fn", q_fn, ctx)
        top = np.argsort(-q)[:TOP]
        draw = np.zeros_like(q)
        draw[top] = q[top]
        x = int(rng.choice(len(q), p=draw / draw.sum()))
        if not accepts(p, q, x, rng):
            return out + [recover(p, q, rng)]
        out.append(x)
    return out + [sample(model_output("p_fn", p_fn, prefix + tuple(out)), rng)]
