"""EAGLE-1's own ``evaluate_posterior`` (eagle-llm 1.2.1, unmodified, from the engines' cache:
``python -m specverify.engines --engine eagle1`` downloads it) wrapped in the round interface
with float32 logits and draft probabilities, as a chain (``eagle1_float32``) and as a top-2 tree
(``eagle1_tree_float32``), for the rounding policy (``specverify.laws.rounding``): exact at
float32 rounding. EAGLE and torch load when this module is imported (in the subject's process,
before any timed call); without the cached wheel the import fails with the loader's message.
"""

from __future__ import annotations

import torch

from specverify.engines import others, rounds
from specverify.laws.exact import SubrunMemo
from specverify.laws.random_elements import decide_deferred
from specverify.laws.torch_random import read_deferred


def _eagle_module():
    return others.load_eagle(download=False)


def _float32_inputs(args: dict) -> dict:
    """EAGLE's arguments with every floating tensor in float32 (logits, q rows, draft probs)."""

    def f32(x):
        return x.to(torch.float32) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    return {name: [f32(t) for t in v] if name == "op" else f32(v) for name, v in args.items()}


def _eagle_step(tree: bool):
    """EAGLE-1's ``evaluate_posterior`` in a round sampler (as ``engines.rounds.eagle_round`` and
    ``eagle_tree_round`` wrap it, float32 inputs, ``multinomial`` of EAGLE's own float32
    ``sample_p``), one per shape, its engine call shared across paths (``SubrunMemo``)."""
    if tree in _STEPS:
        return _STEPS[tree]
    module, memo = _eagle_module(), SubrunMemo()

    def engine_tokens(paths, args, seed):
        with rounds.python_random(module, None, seed):
            best, accept_length, sample_p = module.evaluate_posterior(**_float32_inputs(args))
        n = int(accept_length)
        gen = torch.Generator().manual_seed(seed)
        token = read_deferred(torch.multinomial(sample_p.reshape(-1), 1, generator=gen))
        return tuple(int(x) for x in paths[int(best)][:n]) + tuple(token)

    def speculative_step(p_fn, q_fn, prefix, k, rng):
        prefix = tuple(prefix)
        if tree and k > 0:
            paths, rows, second = rounds.draft_top2_tree(q_fn, prefix, k, rng)
            ps = [rounds.targets(p_fn, prefix, path) for path in paths]
            args = rounds.eagle_tree_inputs(paths, ps, rows, second)
            key = rounds.call_key([x for path in paths for x in path], ps, rows, second)
        else:
            drafts, qs = rounds.draft(q_fn, prefix, k, rng)
            ps = rounds.targets(p_fn, prefix, drafts)
            paths, args, key = [drafts], rounds.eagle_chain_inputs(drafts, ps, qs), rounds.call_key(drafts, ps, qs)
        call = lambda: engine_tokens(paths, args, int(rng.integers(1 << 62)))  # noqa: E731
        return decide_deferred(memo.run(rng, lambda: key, call), rng)

    _STEPS[tree] = speculative_step
    return speculative_step


def eagle1_float32(p_fn, q_fn, prefix, k, rng):
    """EAGLE-1's ``evaluate_posterior`` on a chain, float32 inputs (needs the cached wheel)."""
    return _eagle_step(tree=False)(p_fn, q_fn, prefix, k, rng)


def eagle1_tree_float32(p_fn, q_fn, prefix, k, rng):
    """EAGLE-1's ``evaluate_posterior`` on a top-2 tree, float32 inputs (needs the cached wheel)."""
    return _eagle_step(tree=True)(p_fn, q_fn, prefix, k, rng)


_STEPS: dict = {}
for _tree in (False, True):  # EAGLE loaded now, not on the first timed call
    _eagle_step(_tree)
