"""transformers' own speculative-sampling step behind the handout's sampler interface.

``transformers.generation.utils._speculative_sampling`` is the verification step of
``generate(assistant_model=..., do_sample=True)`` (Leviathan et al. 2023, arXiv 2211.17192,
Algorithm 1). Its letters are not ours, so they are converted here, at the boundary, and nowhere
else:

================================  ============================================================
transformers                      specverify
================================  ============================================================
``candidate_input_ids`` (last      the k drafts x_1..x_k, sampled here from q with ``rng.choice``
``candidate_length`` ids)
``candidate_logits`` [1, k, V]    log q at the k draft positions (the assistant = our q)
``new_logits`` [1, k + 1, V]      log p at the k + 1 target positions (the model = our p);
                                  ``p`` / ``p_i`` inside the function are our p as well
``q`` / ``q_i`` inside            our q
``n_matches``, ``valid_tokens``   accepted drafts j, and the j + 1 emitted tokens
================================  ============================================================

The logits are log-probabilities in float64, so the function's softmax gives back p and q to
rounding, and log 0 = -inf gives probability 0 exactly (a zero in q is never drafted; a zero in p
gives the ratio p_i / q_i = 0, a certain rejection up to the uniform being exactly 0, see below).

Randomness: the function draws from torch's *global* CPU generator (``torch.rand_like``,
``torch.multinomial``). Each round seeds it from ``rng.integers(2**63)`` inside
``torch.random.fork_rng``, so the caller's global torch state is untouched and the run is
reproducible from the numpy seed. The exact enumerator cannot follow torch's randomness
(``integers`` over 2**63 outcomes raises ``NotEnumerable``), so the checker tests these adapters
with calibrated statistics.

``ensemble_speculative_step`` passes ``assistant_ensemble_weight`` = 0.5 (DIVERSE static ensemble
verification, arXiv 2604.07622 as cited in the transformers source), which accepts against
v = w p + (1 - w) q instead of p: a deliberate relaxation, so the checker must call it inexact.
transformers' w weighs the *target*; at w = 0.5 that equals the brief's p' = (1 - w) p + w q.
Where the installed transformers lacks the argument, the documented behaviour is reproduced by
handing the unmodified function log v at the k draft positions and log p at the bonus position:
its ratio becomes v / q, its residual norm(max(0, v - q)) = norm(max(0, w (p - q))) equals the
built-in one, and the bonus comes from p, as in the built-in mode.

Found in transformers 5.24.0 (``demo_zero_uniform_acceptance``): the acceptance test is
``r_i <= probability_ratio`` with ``r_i = torch.rand_like(...)`` in [0, 1). When r_i is exactly
0.0 (probability 2**-24 per draw in float32, the dtype ``generate`` verifies in) a draft whose
target probability is 0 is accepted: under top-k / top-p a draft outside the target's kept set is
emitted although the target forbids it. ``r_i < probability_ratio`` would be exact.
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager

import numpy as np

from ..common.validation import check_k, check_same_length
from ..laws.random_elements import decide_deferred
from ..laws.summed_draws import as_token
from ..models.loading import torch_modules
from ..samplers.chain import draft, model_output, verify

torch, transformers = torch_modules()
from transformers.generation.utils import _speculative_sampling  # noqa: E402 - after torch_modules(): a missing torch is one clear error

from ..laws.torch_random import read_deferred  # noqa: E402 - imports torch

TRANSFORMERS_VERSION = transformers.__version__
ENSEMBLE_WEIGHT = 0.5
"""transformers' ``assistant_ensemble_weight``: the weight of the target p in v = w p + (1 - w) q."""

_PARAMS = inspect.signature(_speculative_sampling).parameters
HAS_ENSEMBLE = "assistant_ensemble_weight" in _PARAMS
"""Whether the installed transformers has the ensemble mode built in (5.x does; 4.x does not)."""
_HAS_IS_DONE = "is_done_candidate" in _PARAMS  # transformers 4.x: a round that ended on EOS


def _log_probs(rows) -> torch.Tensor:
    """[1, len(rows), V] float64 logits whose softmax is each row; log 0 = -inf on purpose."""
    with np.errstate(divide="ignore"):
        return torch.from_numpy(np.log(np.stack(rows)))[None]


def _target_rows(p_fn, prefix: tuple, drafts: list[int], q0: np.ndarray) -> list[np.ndarray]:
    """p after the prefix and after each accepted-draft prefix: the k + 1 rows the target scores."""
    rows = [model_output("p_fn", p_fn, prefix + tuple(drafts[:i])) for i in range(len(drafts) + 1)]
    for p in rows:
        check_same_length("p_fn output", p, "q_fn output", q0)
    return rows


def _mixed_rows(ps: list[np.ndarray], qs: list[np.ndarray], weight: float) -> list[np.ndarray]:
    """v = w p + (1 - w) q at the draft positions, p at the bonus position (the fallback mode)."""
    return [weight * p + (1.0 - weight) * q for p, q in zip(ps, qs)] + [ps[-1]]


@contextmanager
def single_threaded():
    """torch on one intra-op thread for the body, then the caller's setting again.

    The tensors here are a few rows of a few entries: torch's thread pool costs more than the
    work. Measured on a loaded 2-core machine: 0.3 ms per round on one thread, 6 ms on two.
    Results do not depend on the thread count.
    """
    n = torch.get_num_threads()
    if n != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if n != 1:
            torch.set_num_threads(n)


@contextmanager
def engine_context(draft, k: int):
    """Constant k drafts a round, no confidence early stop, transformers' warnings quiet, one
    torch thread, global torch RNG restored: everything put back afterwards."""
    cfg = draft.generation_config
    names = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")
    saved = {name: getattr(cfg, name, None) for name in names}
    verbosity = transformers.logging.get_verbosity()
    cfg.num_assistant_tokens, cfg.num_assistant_tokens_schedule = k, "constant"
    cfg.assistant_confidence_threshold = 0.0
    transformers.logging.set_verbosity_error()
    try:
        with single_threaded(), torch.random.fork_rng(devices=[]), torch.no_grad():
            yield
    finally:
        for name, value in saved.items():
            setattr(cfg, name, value)
        transformers.logging.set_verbosity(verbosity)


def call_hf(candidate_ids, candidate_logits, new_logits, seed: int, weight: float | None = None):
    """transformers' ``_speculative_sampling`` with torch's global generator seeded, then restored.

    Returns (valid_tokens [1, j + 1], n_matches j) as the function does.
    """
    kwargs = {"assistant_ensemble_weight": weight} if weight is not None else {}
    if _HAS_IS_DONE:
        kwargs["is_done_candidate"] = False
    with single_threaded(), torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        return _speculative_sampling(candidate_ids, candidate_logits, candidate_ids.shape[1], new_logits, **kwargs)


def _hf_round(p_fn, q_fn, prefix, k, rng, weight: float | None, built_in: bool = HAS_ENSEMBLE):
    """One round through ``call_hf``; ``built_in=False`` hands the ensemble rule's mixed rows to
    the plain function."""
    k = check_k(k)
    prefix = tuple(prefix)
    drafts, qs = draft(q_fn, prefix, k, rng)  # x_i ~ q(. | prefix, x_<i): genuinely sampled
    ps = _target_rows(p_fn, prefix, drafts, qs[0])
    seed = int(rng.integers(2**63))
    if weight is not None and not built_in:
        target_rows, weight = _mixed_rows(ps, qs, weight), None
    else:
        target_rows = ps
    # The engine reads only the last candidate_length ids, so the drafts alone are passed.
    valid, _ = call_hf(torch.tensor([drafts]), _log_probs(qs), _log_probs(target_rows), seed, weight)
    # the last token undecided while enumerated: summed over, not branched on (laws.summed_draws)
    return [as_token(t) for t in decide_deferred(read_deferred(valid[0]), rng)]


def speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]:
    """One round of transformers' lossless speculative sampling (1 to k + 1 tokens)."""
    return _hf_round(p_fn, q_fn, prefix, k, rng, None)


def ensemble_speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]:
    """One round of transformers' ``assistant_ensemble_weight=0.5`` mode: biased by design."""
    return _hf_round(p_fn, q_fn, prefix, k, rng, ENSEMBLE_WEIGHT)


def fallback_ensemble_speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]:
    """The documented ensemble rule through the plain function (what runs without the argument)."""
    return _hf_round(p_fn, q_fn, prefix, k, rng, ENSEMBLE_WEIGHT, built_in=False)


def documented_ensemble_step(p_fn, q_fn, prefix, k, rng, weight: float = ENSEMBLE_WEIGHT) -> list[int]:
    """The ensemble rule as transformers documents it, in NumPy, so the enumerator can follow it.

    The exact rule (``chain.verify``) on the fallback's rows: accept draft x with probability
    min(1, v(x) / q(x)), v = w p + (1 - w) q; on rejection draw from norm(max(0, v - q))
    (= norm(max(0, p - q)) to rounding); after k acceptances a bonus from p. Its exact output law
    (specverify.laws.exact) is what ``ensemble_speculative_step`` should sample, and its exact TV from
    the target is the bias the relaxation buys.
    """
    k = check_k(k)
    prefix = tuple(prefix)
    drafts, qs = draft(q_fn, prefix, k, rng)
    ps = _target_rows(p_fn, prefix, drafts, qs[0])
    j, token = verify(_mixed_rows(ps, qs, weight), qs, drafts, rng)
    return drafts[:j] + [token]


# --------------------------------------------------------------------------- the r_i <= ratio finding


def _first_zero_uniform(max_seeds: int, chunk: int) -> tuple[int, int] | None:
    """(seed, index) of the first float32 ``torch.rand`` draw that is exactly 0.0, or None."""
    for seed in range(max_seeds):
        torch.default_generator.manual_seed(seed)
        zeros = torch.nonzero(torch.rand(chunk) == 0.0).flatten()
        if zeros.numel():
            return seed, int(zeros[0])
    return None


def demo_zero_uniform_acceptance(max_seeds: int = 64, chunk: int = 2**24) -> dict:
    """Replay a uniform of exactly 0.0 into ``_speculative_sampling`` with p(draft) = 0.

    Draft token 1 with q = (0.5, 0.5) and p = (1, 0), float32 as ``generate`` verifies: an exact
    rule never emits token 1. Torch's CPU float32 uniform is k / 2**24 with k uniform on
    [0, 2**24), so r_i = 0 has probability 2**-24 ~ 6e-8; the search finds such a draw in torch's
    stream, consumes the draws before it, and calls the function. Global torch RNG restored.
    """
    q = torch.tensor([[[0.5, 0.5]]]).log()
    p = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]]).log()
    with torch.random.fork_rng(devices=[]):
        found = _first_zero_uniform(max_seeds, chunk)
        if found is None:
            return {"reproduced": False, "note": f"no zero uniform in {max_seeds} x {chunk} draws"}
        seed, index = found
        torch.default_generator.manual_seed(seed)
        torch.rand(index)  # consume the draws before the zero
        kwargs = {"is_done_candidate": False} if _HAS_IS_DONE else {}
        valid, n_matches = _speculative_sampling(torch.tensor([[1]]), q, 1, p, **kwargs)
    emitted = [int(t) for t in valid[0].tolist()]
    return {
        "transformers": TRANSFORMERS_VERSION,
        "seed": seed,
        "draws_before_zero": index,
        "target_p": [1.0, 0.0],
        "draft_q": [0.5, 0.5],
        "draft": 1,
        "emitted": emitted,
        "n_matches": int(n_matches),
        "accepted_zero_probability_draft": int(n_matches) == 1,
        "reproduced": True,
    }


__all__ = [
    "ENSEMBLE_WEIGHT",
    "HAS_ENSEMBLE",
    "TRANSFORMERS_VERSION",
    "call_hf",
    "demo_zero_uniform_acceptance",
    "documented_ensemble_step",
    "ensemble_speculative_step",
    "engine_context",
    "fallback_ensemble_speculative_step",
    "single_threaded",
    "speculative_step",
]
