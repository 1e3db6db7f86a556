"""Round samplers wrong only where the fixed cases do not reach: importable as
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


TILE = 1024


def tiled_residual(p, q):
    """The residual max(p - q, 0) built tile by tile, as a kernel over vocabulary tiles of
    ``TILE`` ids would, with an off-by-one: each tile stops one id short, so the last id of every
    tile (1023, 2047, ...) never comes back from a rejection. Exact while V <= 1023."""
    out = np.zeros_like(p)
    for start in range(0, len(p), TILE):
        stop = min(start + TILE - 1, len(p))  # the bug: TILE - 1 ids per tile
        out[start:stop] = np.maximum(p[start:stop] - q[start:stop], 0.0)
    return out / out.sum()


def tile_off_by_one(p_fn, q_fn, prefix, k, rng):
    """The chain rule with ``tiled_residual`` at a rejection: wrong only where V > 1023."""
    prefix = tuple(prefix)
    out = []
    for _ in range(k):
        ctx = prefix + tuple(out)
        p, q = model_output("p_fn", p_fn, ctx), model_output("q_fn", q_fn, ctx)
        x = sample(q, rng)
        if not accepts(p, q, x, rng):
            return out + [int(rng.choice(len(p), p=tiled_residual(p, q)))]
        out.append(x)
    return out + [sample(model_output("p_fn", p_fn, prefix + tuple(out)), rng)]


def int16_ids(p_fn, q_fn, prefix, k, rng):
    """The exact rule, its token ids kept in int16 (a narrow id buffer): ids from 32768 wrap to
    negative values. Exact while V <= 32768."""
    from specverify.samplers.chain import speculative_step

    return [int(np.int16(np.uint16(t))) for t in speculative_step(p_fn, q_fn, prefix, k, rng)]


def int8_ids(p_fn, q_fn, prefix, k, rng):
    """As ``int16_ids`` with int8: ids from 128 wrap. Exact while V <= 128."""
    from specverify.samplers.chain import speculative_step

    return [
        int(np.int8(np.uint8(t % 256))) if t < 256 else int(t) for t in speculative_step(p_fn, q_fn, prefix, k, rng)
    ]
