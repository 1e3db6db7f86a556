"""Loop subjects for tests/test_loop_generated.py: each is the reference loop
(``specverify.samplers.reference_loop``) wrong in one place that the loop's core cases do not reach, so
those cases alone call each of them exact. Each is a few lines: ``loop_with`` with one step swapped, or a
wrapper that changes what one kind of request gets.

Module-level functions, so that the battery's subject process can run them by fork or by name.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specverify.laws.requests import Output
from specverify.samplers import reference_loop as ref
from specverify.samplers.chain import accepts, sample

# -- seeds ----------------------------------------------------------------------------------------


def _reseeding_drafter(s, draft, n, vocab):
    if s.params.seed is not None:  # a fresh generator every round: every round replays one stream
        s.rng = np.random.default_rng(s.params.seed)
    return ref.draft_tokens(s, draft, n, vocab)


def reseeds_every_round(target, draft, requests, k, rng):
    """A seeded request's generator is re-created from its seed at the start of every round."""
    return ref.loop_with(target, draft, requests, k, rng, drafter=_reseeding_drafter)


def seeded_ignores_target(target, draft, requests, k, rng):
    """A seeded request's tokens are drawn uniformly from the vocabulary (its own generator, its
    stop ids and max_tokens honoured): reproducible, and blind to the target."""
    vocab = len(np.asarray(target(requests[0].prompt))) if requests else 0
    outs = ref.generate(target, draft, requests, k, rng)
    for i, r in enumerate(requests):
        if r.params.seed is None:
            continue
        g, out = np.random.default_rng(r.params.seed), []
        while not ref.finished(tuple(out), r.params):
            out.append(int(g.integers(vocab)))
        outs[i] = list(out)
    return outs


def _shared_seed_rngs(requests, rng):
    streams: dict = {}  # one generator per seed value: two requests with one seed share a stream
    return [
        rng if r.params.seed is None else streams.setdefault(r.params.seed, np.random.default_rng(r.params.seed))
        for r in requests
    ]


def same_seed_shares_a_stream(target, draft, requests, k, rng):
    """Requests with the same seed in one batch draw from one generator."""
    return ref.loop_with(target, draft, requests, k, rng, rngs=_shared_seed_rngs)


# -- max_tokens 0 and stop ids in the prompt --------------------------------------------------------


def max_tokens_zero_emits_one(target, draft, requests, k, rng):
    """A do-while loop: a request with max_tokens = 0 still gets one round (one token)."""
    fixed = [replace(r, params=replace(r.params, max_tokens=1)) if r.params.max_tokens == 0 else r for r in requests]
    return ref.generate(target, draft, fixed, k, rng)


def prompt_stop_ends_the_request(target, draft, requests, k, rng):
    """The stop test reads the last token of prompt + output: a prompt that ends with a stop id
    ends its request at once, with no tokens."""
    live = [i for i, r in enumerate(requests) if r.prompt[-1] not in r.params.stop_token_ids]
    outs = ref.generate(target, draft, [requests[i] for i in live], k, rng)
    result = [Output((), (), 0, 0) for _ in requests]
    for i, o in zip(live, outs):
        result[i] = o
    return result


# -- wrong only at k >= 3, vocabulary >= 4, prompts >= 3 tokens, max_tokens >= 4 ----------------------


def _raw_target_row(s, logits, drafts, i, n):  # the request's params not applied to the target rows
    return ref.processed_row(s, logits, drafts, i, temperature=1.0, top_k=None, top_p=1.0, min_p=0.0, logit_bias={})


def wrong_at_k3(target, draft, requests, k, rng):
    """k >= 3 switches to a fast path that verifies against the target's rows without the
    request's temperature, top-k / top-p / min-p and logit bias."""
    return ref.loop_with(target, draft, requests, k, rng, **({"trow": _raw_target_row} if k >= 3 else {}))


TILE = 4


def _tiled_residual_verifier(s, ps, qs, drafts, draft):
    for i, (x, q) in enumerate(zip(drafts, qs)):
        if not accepts(ps[i], q, x, s.rng):
            r = np.maximum(ps[i] - q, 0.0)
            r[TILE - 1 :: TILE] = 0.0  # off by one at each tile's boundary: the tile's last id dropped
            if r.sum() <= 0:
                r = np.asarray(ps[i], dtype=np.float64).copy()
            return i, sample(r / r.sum(), s.rng)
    return len(drafts), sample(ps[len(drafts)], s.rng)


def wrong_at_vocab4(target, draft, requests, k, rng):
    """The residual max(p - q, 0) built in tiles of 4 ids, each tile's last id dropped: id 3 (and
    7, 11, ...) never recovered. Exact on vocabularies of 2 and 3."""
    return ref.loop_with(target, draft, requests, k, rng, verifier=_tiled_residual_verifier)


def wrong_at_prompt3(target, draft, requests, k, rng):
    """For prompts of 3 or more tokens the target is shown the context without its first token
    (a BOS dropped twice)."""

    def trow(s, logits, drafts, i, n):
        if len(s.request.prompt) >= 3:
            logits = np.asarray(target(s.context()[1:] + tuple(drafts[:i])))
        return ref.target_row(s, logits, drafts, i, n)

    return ref.loop_with(target, draft, requests, k, rng, trow=trow)


def _params_for_three(s, logits, drafts, i, n):  # a sampler state of 3 slots: from the 4th token on, raw
    if len(s.output) + i >= 3:
        return _raw_target_row(s, logits, drafts, i, n)
    return ref.target_row(s, logits, drafts, i, n)


def wrong_at_max_tokens4(target, draft, requests, k, rng):
    """The request's params are applied to its first 3 generated tokens only: from the 4th token on
    the target's rows are raw."""
    return ref.loop_with(target, draft, requests, k, rng, trow=_params_for_three)


# -- engine scale (the binned cases: scale_loop_cases) -----------------------------------------------

WIDE_TILE = 1024


def _wide_tiled_verifier(s, ps, qs, drafts, draft):
    for i, (x, q) in enumerate(zip(drafts, qs)):
        if not accepts(ps[i], q, x, s.rng):
            r = np.maximum(ps[i] - q, 0.0)
            r[WIDE_TILE - 1 :: WIDE_TILE] = 0.0  # each 1024-id tile's last id dropped from the residual
            if r.sum() <= 0:
                r = np.asarray(ps[i], dtype=np.float64).copy()
            return i, sample(r / r.sum(), s.rng)
    return len(drafts), sample(ps[len(drafts)], s.rng)


def wrong_past_vocab1024(target, draft, requests, k, rng):
    """The residual built in tiles of 1024 ids, each tile's last id (1023, 2047, ...) dropped:
    exact on every vocabulary of 1023 ids or fewer."""
    return ref.loop_with(target, draft, requests, k, rng, verifier=_wide_tiled_verifier)


def ids_int16(target, draft, requests, k, rng):
    """The reference loop with its output ids kept in int16: ids from 32768 wrap negative. Exact
    on vocabularies of 32768 or fewer ids (every budget's; caught when aimed at a wider one)."""
    outs = ref.generate(target, draft, requests, k, rng)
    return [replace(o, tokens=tuple(int(np.int16(np.uint16(t))) for t in o.tokens)) for o in outs]


SCALE_WRONG = {
    "wrong_past_vocab1024": wrong_past_vocab1024,
}
"""Loops wrong only at a vocabulary no fixed, edge or generated case has: the standard budget's
engine-scale batch catches them."""


WRONG = {
    "reseeds_every_round": reseeds_every_round,
    "seeded_ignores_target": seeded_ignores_target,
    "same_seed_shares_a_stream": same_seed_shares_a_stream,
    "max_tokens_zero_emits_one": max_tokens_zero_emits_one,
    "prompt_stop_ends_the_request": prompt_stop_ends_the_request,
    "wrong_at_k3": wrong_at_k3,
    "wrong_at_vocab4": wrong_at_vocab4,
    "wrong_at_prompt3": wrong_at_prompt3,
    "wrong_at_max_tokens4": wrong_at_max_tokens4,
}
"""Every subject, by name: each wrong only where the core cases do not reach."""
