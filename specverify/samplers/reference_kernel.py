"""The reference verification kernel: chain speculative sampling for a whole batch at once.

The rule is Leviathan, Kalman, Matias 2023 (arXiv 2211.17192, Algorithm 1) and Chen et al. 2023
(arXiv 2302.01318); notation p = target, q = draft, k = drafted tokens per row.

Contract (the kernel interface; ``specverify.interfaces.kernel.battery`` judges kernels against it)::

    kernel(draft_ids, draft_probs, target_probs, uniforms) -> (output_ids, num_accepted)

- ``draft_ids``: int64 [B, k], the drafted tokens. A row with k_b < k drafts is padded with -1
  at positions k_b.. (ragged rows); -1 may appear only as a suffix.
- ``draft_probs``: float32 [B, k, V], the q rows the drafts were sampled from.
- ``target_probs``: float32 [B, k + 1, V], the p rows; row i is conditioned on drafts[:i]; for a
  ragged row, row k_b is its bonus row.
- ``uniforms``: float32 [B, k + 1] in [0, 1): column i < k is the acceptance coin of draft i;
  column k (the last, even for ragged rows) is the one uniform the emitted token is drawn from by
  inverse CDF in vocabulary order. Or a ``numpy.random.Generator`` / ``_torch().Generator``, from
  which the kernel draws ``g.random((B, k + 1), dtype=np.float32)`` / ``_torch().rand(B, k + 1,
  generator=g)``.
- Arrays are all NumPy arrays or all torch tensors (CPU or CUDA, one device); the outputs are of
  the same kind (and device).
- Probabilities must be finite and nonnegative, and every row the rule reads (q rows 0..k_b - 1,
  p rows 0..k_b) must sum to 1 within 1e-4; the padding rows of a ragged row are not read.
- Returns ``output_ids`` int64 [B, k + 1] (the accepted drafts, then the recovered or bonus
  token, then -1 padding) and ``num_accepted`` int64 [B] in 0..k_b.

The rule: accept draft x at position i iff ``u_i * q_i(x) < p_i(x)`` (that is u_i < min(1,
p_i(x) / q_i(x)) without a division; strict, so a draft with p(x) = 0 is never accepted), and only
when q_i(x) > 0: a drafted token q gives no mass to was not drawn from q, and is rejected, as
vLLM V1 and SGLang do (vLLM V0 and TensorRT-LLM accept it: p / 0 = inf). At the first rejection emit a
token from the residual max(p_i - q_i, 0) and stop; if all k_b drafts are accepted emit the bonus
from p at row k_b. A token from an unnormalized nonnegative row w and the final uniform u is the
smallest y with ``u * sum(w) < cumsum(w)[y]`` (sum(w) taken as the last cumsum entry), so a
zero-weight token is never emitted. A residual that is all zero (probability 0 unless the inputs
are adversarial) is replaced by p_i itself, as ``specverify.samplers.chain.residual`` does.
Comparisons and cumsums are computed in float64 from the inputs, so the reference is exact to
float64 on float32 inputs (``u * q`` of two float32 numbers is exact in float64).

This is ``chain.verify``'s batched form
-----------------------------------------
``reference_kernel`` on one row (B = 1) emits exactly what ``specverify.samplers.chain.verify``
emits when chain.verify's ``rng.random()`` returns the coins ``uniforms[0, :k]`` in order and its
``rng.choice(n, p=w)`` is an inverse CDF with ``uniforms[0, k]`` (up to ties of measure zero:
chain.verify divides ``u < p / q`` and normalizes the residual before the cumsum).
``tests/test_kernel_reference.py`` pins this. The batch is vectorized: no Python loop over rows.

The pieces are exported so that a mutant kernel (``specverify.mutants.kernel_mutants``) swaps exactly one
of them: ``prepare`` (validation and float64 conversion into a ``Batch``), ``accept_mask``,
``first_rejection``, ``residual_weights``, ``inverse_cdf`` and ``verify_batch`` (the rule, with
each piece a keyword parameter whose default is the reference's). ``prepare``, ``Batch``,
``draw_uniforms`` and the array backends are ``specverify.samplers.kernel_batch``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .kernel_batch import PAD, Batch, is_torch, prepare, torch_module

# ----------------------------------------------------------------------------------------------
# The pieces of the rule


def accept_mask(u, px, qx):
    """Accept iff ``q(x) > 0`` and ``u * q(x) < p(x)``: u < min(1, p(x) / q(x)) without
    dividing (strict), a token q cannot have drafted rejected.

    Leviathan et al. (arXiv 2211.17192) Algorithm 1; all three arrays share one shape.
    """
    return (qx > 0) & (u * qx < px)


def first_rejection(accept):
    """[B] the number of leading True entries of each row of ``accept`` [B, k] (the accepted
    drafts j): the position of the first rejection, or k if there is none."""
    if is_torch(accept):
        return accept.to(torch_module().int64).cumprod(-1).sum(-1)
    return np.cumprod(accept.astype(np.int64), axis=-1).sum(-1)


def residual_weights(p, q):
    """max(p - q, 0) rowwise (unnormalized), or p itself where that row is all zero.

    The residual distribution of Leviathan et al. (arXiv 2211.17192); the all-zero fallback is
    ``specverify.samplers.chain.residual``'s choice (a rejection there had probability 0).
    """
    if is_torch(p):
        r = (p - q).clamp_(min=0.0)
        return torch_module().where((r.sum(-1) > 0)[..., None], r, p)
    r = np.subtract(p, q)
    np.maximum(r, 0.0, out=r)
    empty = ~(r.sum(-1) > 0)
    if empty.any():  # a rejection of probability 0: p itself on those rows
        r[empty] = p[empty]
    return r


def inverse_cdf(weights, u):
    """[...] the smallest y with ``u * sum(w) < cumsum(w)[y]`` for each row w of ``weights``.

    ``weights`` [..., V] is nonnegative and unnormalized, with sum(w) > 0; ``u`` [...] in [0, 1).
    sum(w) is the last cumsum entry, so y < V always and a zero-weight token is never emitted.
    """
    c = weights.cumsum(-1)
    threshold = u * c[..., -1]
    return (c <= threshold[..., None]).sum(-1)


def assemble(batch: Batch, accepted, token):
    """(output_ids [B, k + 1], num_accepted [B]): drafts[:j], then ``token`` at j, then -1."""
    ops, k = batch.ops, batch.k
    positions = ops.arange(k + 1, batch.ids)[None, :]
    drafts = ops.concat([batch.ids, ops.full((batch.ids.shape[0], 1), PAD, batch.ids)], 1)
    j = ops.to_int64(accepted)[:, None]
    pad = ops.full(tuple(drafts.shape), PAD, drafts)
    out = ops.where(positions < j, drafts, ops.where(positions == j, ops.to_int64(token)[:, None], pad))
    return out, ops.to_int64(accepted)


def rows_at(batch: Batch, j):
    """(p_j, q_j) [B, V]: the target and draft rows at position j[b] of each row (q's index is
    clipped to k - 1: a row with j = k has no q row and is not rejected)."""
    ops, k = batch.ops, batch.k
    return ops.take_row(batch.p, j), ops.take_row(batch.q, ops.where(j < k, j, j * 0 + k - 1))


def verify_batch(
    batch: Batch,
    *,
    accept: Callable | None = None,
    first: Callable = first_rejection,
    rows: Callable = rows_at,
    residual: Callable = residual_weights,
    recover: Callable = inverse_cdf,
    bonus: Callable = inverse_cdf,
    recover_uniform: Callable | None = None,
):
    """The rule on a validated ``Batch``: (output_ids [B, k + 1], num_accepted [B]).

    Each keyword is one piece, defaulting to the reference's:
      accept(batch) -> [B, k] bool (default ``accept_mask(batch.coins, batch.px, batch.qx)``;
        padding positions are masked to False afterwards);
      first(accept) -> [B] accepted drafts j;
      rows(batch, j) -> (p_j, q_j), the rows the residual is built from (default ``rows_at``);
      residual(p_j, q_j) -> [B, V] weights after a rejection;
      recover(weights, u) / bonus(weights, u) -> [B] the emitted token after a rejection / after
        all k_b acceptances;
      recover_uniform(batch, j) -> [B] the uniform of the recovered token (default the last
        column, ``batch.final``).
    """
    ops = batch.ops
    if batch.k == 0:  # nothing drafted: every row emits its bonus from p at row 0
        j = ops.to_int64(batch.lengths)
        return assemble(batch, j, ops.to_int64(bonus(ops.take_row(batch.p, j), batch.final)))
    ok = (accept(batch) if accept is not None else accept_mask(batch.coins, batch.px, batch.qx)) & batch.valid
    j = ops.to_int64(first(ok))
    j = ops.where(j < batch.lengths, j, batch.lengths)
    rejected = j < batch.lengths
    p_j, q_j = rows(batch, j)
    u_rec = batch.final if recover_uniform is None else recover_uniform(batch, j)
    own = residual is residual_weights and recover is inverse_cdf and bonus is inverse_cdf
    if own and batch.p.shape[-1] >= WIDE_ROWS:
        return assemble(batch, j, _reference_tokens(batch, j, rejected, p_j, q_j, u_rec))
    recovered = recover(residual(p_j, q_j), u_rec)
    emitted = bonus(ops.take_row(batch.p, j), batch.final)
    token = ops.where(rejected, ops.to_int64(recovered), ops.to_int64(emitted))
    return assemble(batch, j, token)


def _reference_tokens(batch: Batch, j, rejected, p_j, q_j, u_rec):
    """[B] the emitted tokens of the reference's own pieces, each computed only on the rows that
    emit it: the recovered token on the rejected rows, the bonus on the others. The pieces are
    rowwise, so the tokens are those of computing both on every row and choosing (the general
    path of ``verify_batch``, which a replaced piece takes), at about half the work."""
    ops = batch.ops
    token = ops.to_int64(j * 0)
    if bool(rejected.any()):
        token[rejected] = ops.to_int64(inverse_cdf(residual_weights(p_j[rejected], q_j[rejected]), u_rec[rejected]))
    kept = ~rejected
    if bool(kept.any()):
        token[kept] = ops.to_int64(inverse_cdf(batch.p[kept, j[kept]], batch.final[kept]))
    return token


WIDE_ROWS = 64
"""From this vocabulary on, ``verify_batch`` computes each emitted token only on the rows that
emit it (``_reference_tokens``); below it, indexing the rows costs more than it saves."""


def reference_kernel(draft_ids, draft_probs, target_probs, uniforms):
    """The exact rule for a batch (see the module docstring for the contract):
    (output_ids int64 [B, k + 1], num_accepted int64 [B]), of the inputs' kind and device.

    ``chain.verify``'s batched form: Leviathan et al. arXiv 2211.17192, Chen et al. 2302.01318.
    """
    return verify_batch(prepare(draft_ids, draft_probs, target_probs, uniforms))


def reference_generator_kernel(draft_ids, draft_probs, target_probs, generator):
    """``reference_kernel`` whose fourth parameter is named ``generator``: the kernel battery
    passes such kernels a ``numpy.random.Generator`` / ``torch.Generator`` (drawn from as
    ``draw_uniforms`` says) instead of explicit uniforms."""
    return reference_kernel(draft_ids, draft_probs, target_probs, generator)


__all__ = [
    "accept_mask",
    "assemble",
    "first_rejection",
    "inverse_cdf",
    "reference_generator_kernel",
    "reference_kernel",
    "residual_weights",
    "rows_at",
    "verify_batch",
]
