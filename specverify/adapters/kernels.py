"""Engines' verification-kernel calling conventions, adapted to the canonical kernel interface.

The canonical kernel (p = target, q = draft, k = drafted tokens per row)::

    kernel(draft_ids, draft_probs, target_probs, uniforms) -> (output_ids, num_accepted)

* ``draft_ids`` int [B, k]; a row with k_b < k drafts is padded with -1 at positions k_b..;
* ``draft_probs`` float32 [B, k, V] (q rows); ``target_probs`` float32 [B, k + 1, V] (p; row i is
  conditioned on drafts[:i]; for a ragged row, row k_b is its bonus row);
* ``uniforms`` float32 [B, k + 1] in [0, 1): column i < k is the acceptance coin of draft i,
  column k the uniform the emitted token (recovered at the first rejection, or bonus) is drawn
  from by inverse CDF in vocabulary order; OR a ``numpy.random.Generator`` / ``torch.Generator``;
* returns ``output_ids`` int64 [B, k + 1] (accepted drafts, the emitted token, then -1) and
  ``num_accepted`` int64 [B], as NumPy arrays when ``draft_ids`` is a NumPy array, else tensors.

Each engine convention gets a ``from_<engine>`` function (engine-convention callable -> canonical
kernel) and a ``to_<engine>`` function (canonical kernel -> engine convention, for tests). Only the
boundary is converted here: argument names and order, dtypes, uniform ranges, ragged layouts.
No engine code is copied; the engine's callable is an argument, so nothing here imports vllm,
sglang, flashinfer or tensorrt_llm.

=============  ===========================================  =========  ========================
engine         callable (source)                            uniforms   randomness
=============  ===========================================  =========  ========================
vLLM V0        ``RejectionSampler.forward`` (vllm 0.8.5,    [0, 1)     own: torch.Generator per
               model_executor/layers/rejection_sampler.py            row in ``seeded_seqs``;
               :62-157)                                              bonus drawn by the caller
vLLM V1        ``rejection_sample`` (vllm 0.8.5,            [0, 1)     own: ``sampling_metadata
               v1/sample/rejection_sampler.py:135-232)                .generators``; bonus
                                                                     drawn by the caller
FlashInfer     ``flashinfer.sampling.chain_speculative_     (0, 1]     own: ``generator`` (curand
               sampling`` (generator API)                            Philox)
SGLang chain   ``chain_speculative_sampling_triton``        [0, 1)     inputs: ``uniform_samples``
               (sglang 0.5.23, kernels/ops/speculative/              and ``uniform_samples_for_
               reject_sampling.py:242-295)                           final_sampling``
TRT-LLM torch  ``get_rejected_indices`` + ``sample_         [0, 1)     own: ``generator``
               rejected`` (tensorrt_llm/_torch/pyexecutor/           (torch.rand, multinomial);
               sampling_utils.py)                                    bonus drawn by the caller
=============  ===========================================  =========  ========================

Generator conventions cannot take canonical uniforms: their adapted kernels raise ``ValueError``
when given an array and need a generator. A NumPy generator is turned into one
``torch.Generator`` seeded from ``rng.integers(2**63)``. Where the engine samples the bonus token
outside its kernel (vLLM V0 and V1, TRT-LLM), the adapter draws it with ``torch.multinomial`` from
``target_probs[b, k_b]`` and that generator, before calling the engine. Engines without ragged
rows (V0, FlashInfer, SGLang, TRT-LLM per request) are called once per group of rows with equal
k_b; V0 and TRT-LLM never run verification for k_b = 0, so those rows get the adapter's bonus.

It is over 700 lines because the five engines' ``from_`` / ``to_`` pairs are written over the
same private conversions (``_tensor``, ``_uniforms``, ``_draw`` for the bonus token,
``by_draft_count`` for engines without ragged rows, ``engine_output``, ``finish_canonical``) and are
compared in the one table above: a module per engine would make those conversions a public API
shared by five files and split the table from the code it describes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch

__all__ = [
    "CanonicalBatch",
    "check_canonical_inputs",
    "accepted_from_output",
    "by_draft_count",
    "engine_output",
    "finish_canonical",
    "torch_generator",
    "vllm_v1_sampling_metadata",
    "vllm_v1_ragged_inputs",
    "from_vllm_v0",
    "to_vllm_v0",
    "from_vllm_v1",
    "to_vllm_v1",
    "from_flashinfer",
    "to_flashinfer",
    "from_sglang_chain",
    "to_sglang_chain",
    "from_trtllm",
    "to_trtllm",
]

Kernel = Callable[..., tuple]


# ----------------------------------------------------------------------------- canonical side


@dataclass(frozen=True)
class CanonicalBatch:
    """Validated canonical inputs as CPU-or-device torch tensors.

    ``counts`` [B] holds each row's k_b; exactly one of ``uniforms`` / ``generator`` is set.
    """

    draft_ids: torch.Tensor  # int64 [B, k]
    draft_probs: torch.Tensor  # float32 [B, k, V]
    target_probs: torch.Tensor  # float32 [B, k + 1, V]
    counts: torch.Tensor  # int64 [B]
    uniforms: torch.Tensor | None  # float32 [B, k + 1]
    generator: torch.Generator | None
    numpy_out: bool

    @property
    def shape(self) -> tuple[int, int, int]:
        """(B, k, V)."""
        return tuple(self.draft_probs.shape)


def _tensor(x, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    raise ValueError(f"{name} must be a numpy array or a torch tensor, got {type(x).__name__}")


def _expect_shape(t: torch.Tensor, name: str, shape: tuple) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {list(shape)}, got {list(t.shape)}")


def torch_generator(rng) -> torch.Generator:
    """A ``torch.Generator`` for ``rng``: itself, or one seeded from a NumPy generator's draw."""
    if isinstance(rng, torch.Generator):
        return rng
    if isinstance(rng, np.random.Generator):
        return torch.Generator().manual_seed(int(rng.integers(2**63)))
    raise ValueError(f"uniforms must be an array or a numpy/torch generator, got {type(rng).__name__}")


def check_canonical_inputs(draft_ids, draft_probs, target_probs, uniforms) -> CanonicalBatch:
    """Validate canonical kernel inputs and convert them; ``ValueError`` names the bad argument.

    Checks: ``draft_ids`` 2-D integers [B, k] whose -1 padding is a suffix of each row and whose
    other ids lie in [0, V); ``draft_probs`` [B, k, V]; ``target_probs`` [B, k + 1, V];
    ``uniforms`` [B, k + 1] in [0, 1), or a generator.
    """
    ids = _tensor(draft_ids, "draft_ids")
    q = _tensor(draft_probs, "draft_probs")
    p = _tensor(target_probs, "target_probs")
    if ids.dim() != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(f"draft_ids must be a 2-D integer array [B, k], got {ids.dtype} of shape {list(ids.shape)}")
    if q.dim() != 3:
        raise ValueError(f"draft_probs must be 3-D [B, k, V], got shape {list(q.shape)}")
    batch, k = ids.shape
    vocab = q.shape[2]
    _expect_shape(q, "draft_probs", (batch, k, vocab))
    _expect_shape(p, "target_probs", (batch, k + 1, vocab))
    ids = ids.to(torch.int64)
    present = ids >= 0
    counts = present.sum(dim=1)
    positions = torch.arange(k, device=ids.device)
    if bool((present != (positions < counts[:, None])).any()) or bool((ids < -1).any()):
        raise ValueError("draft_ids: each row must hold its k_b drafts first, then -1 padding")
    if bool((ids >= vocab).any()):
        raise ValueError(f"draft_ids must lie in [0, V) = [0, {vocab})")
    u = gen = None
    if isinstance(uniforms, (np.ndarray, torch.Tensor)):
        u = _tensor(uniforms, "uniforms").to(torch.float32)
        _expect_shape(u, "uniforms", (batch, k + 1))
        if bool(((u < 0) | (u >= 1)).any()):
            raise ValueError("uniforms must lie in [0, 1)")
    else:
        gen = torch_generator(uniforms)
    return CanonicalBatch(
        ids, q.to(torch.float32), p.to(torch.float32), counts, u, gen, isinstance(draft_ids, np.ndarray)
    )


def _require_generator(batch: CanonicalBatch, engine: str) -> torch.Generator:
    if batch.generator is None:
        raise ValueError(
            f"uniforms: {engine} draws its own randomness; pass a numpy or torch "
            "generator instead of an array of uniforms"
        )
    return batch.generator


def _uniforms(batch: CanonicalBatch) -> torch.Tensor:
    """The batch's uniforms, drawn in [0, 1) from its generator when it has no array."""
    if batch.uniforms is not None:
        return batch.uniforms
    b, k, _ = batch.shape
    return torch.rand((b, k + 1), generator=batch.generator, dtype=torch.float32)


def _draw(probs: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """One index per row of ``probs`` [n, V] (``torch.multinomial``), int64 [n]."""
    if probs.shape[0] == 0:
        return torch.zeros(0, dtype=torch.int64, device=probs.device)
    return torch.multinomial(probs.double(), 1, generator=gen).squeeze(1)


def accepted_from_output(out: torch.Tensor) -> torch.Tensor:
    """Accepted drafts per row of a -1 padded output: its leading non -1 entries, minus one."""
    return (out != -1).to(torch.int64).cumprod(dim=1).sum(dim=1) - 1


def engine_output(out, name: str, shape: tuple) -> torch.Tensor:
    """An engine's output ``out`` as a tensor of ``shape``; ValueError naming the engine function
    ``name`` when it has another shape."""
    out = _tensor(out, name)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name} returned shape {list(out.shape)}, expected {list(shape)}")
    return out.to(torch.int64)


def by_draft_count(batch: CanonicalBatch, run_group) -> tuple[torch.Tensor, torch.Tensor]:
    """Call ``run_group(rows, k_b)`` per group of rows with equal k_b; assemble canonical output.

    ``run_group`` returns (output_ids [n, k_b + 1], num_accepted [n]) for the group's rows.
    """
    b, k, _ = batch.shape
    out = torch.full((b, k + 1), -1, dtype=torch.int64, device=batch.draft_ids.device)
    acc = torch.zeros(b, dtype=torch.int64, device=batch.draft_ids.device)
    for kb in sorted(set(batch.counts.tolist())):
        rows = torch.nonzero(batch.counts == kb).squeeze(1)
        group_out, group_acc = run_group(rows, kb)
        out[rows, : kb + 1] = group_out
        acc[rows] = group_acc
    return out, acc


def finish_canonical(batch: CanonicalBatch, out: torch.Tensor, acc: torch.Tensor):
    """The canonical kernel's (output_ids, num_accepted), as NumPy arrays when its inputs were."""
    if batch.numpy_out:
        return out.cpu().numpy(), acc.cpu().numpy()
    return out, acc


def _rows_by_generator(batch_size: int, generators: dict, default) -> dict:
    """Row indices grouped by generator object: {id: (generator, [rows])}."""
    groups: dict = {}
    for row in range(batch_size):
        gen = generators.get(row, default)
        groups.setdefault(id(gen), (gen, []))[1].append(row)
    return groups


# ----------------------------------------------------------------------------- vLLM V0


def from_vllm_v0(forward: Callable) -> Kernel:
    """Canonical kernel from vLLM V0's ``RejectionSampler.forward`` (a generator kernel).

    Engine (vllm 0.8.5, model_executor/layers/rejection_sampler.py:62-157)::

        forward(target_with_bonus_probs[B, k+1, V] f32, bonus_token_ids[B, 1] i64,
                draft_probs[B, k, V] f32, draft_token_ids[B, k] i64,
                seeded_seqs: dict[int, torch.Generator] | None = None) -> [B, k+1] i64, -1 padded

    Accepts iff ``torch.rand < min(1, p/q)`` (:293-299), uniforms in [0, 1), one
    ``torch.Generator`` per seeded row (:229-250); the recovered token is an exponential race over
    ``clamp(p - q, min=finfo.tiny)`` (:347, :374-400). The engine does not sample the bonus: the
    adapter draws it from ``target_probs[:, k_b]`` with the generator and passes it as
    ``bonus_token_ids``. Every row gets the same generator in ``seeded_seqs`` (its rows draw from
    it one after another). Fixed k only: rows are grouped by k_b, and k_b = 0 rows (no
    verification in V0) emit the bonus. ``num_accepted`` is derived from the output.
    """

    def kernel(draft_ids, draft_probs, target_probs, generator):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, generator)
        gen = _require_generator(batch, "vLLM V0 RejectionSampler.forward")

        def run(rows, kb):
            target = batch.target_probs[rows, : kb + 1].contiguous()
            bonus = _draw(target[:, kb], gen).unsqueeze(1)
            if kb == 0:
                return bonus, torch.zeros(len(rows), dtype=torch.int64)
            out = forward(
                target,
                bonus,
                batch.draft_probs[rows, :kb].contiguous(),
                batch.draft_ids[rows, :kb].contiguous(),
                {i: gen for i in range(len(rows))},
            )
            out = engine_output(out, "RejectionSampler.forward", (len(rows), kb + 1))
            return out, accepted_from_output(out)

        return finish_canonical(batch, *by_draft_count(batch, run))

    return kernel


def to_vllm_v0(kernel: Kernel) -> Callable:
    """vLLM V0's ``RejectionSampler.forward`` signature around a canonical generator kernel.

    Rows are grouped by their ``seeded_seqs`` generator (unseeded rows share torch's default CPU
    generator, as V0's unseeded ``torch.rand``) and the kernel is called once per group. Where a
    row accepts all k drafts, its last token is replaced by ``bonus_token_ids`` (V0 emits the
    caller's bonus, never one of its own).
    """

    def forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=None):
        q = _tensor(draft_probs, "draft_probs")
        if q.dim() != 3:
            raise ValueError(f"draft_probs must be 3-D [B, k, V], got shape {list(q.shape)}")
        b, k, v = q.shape
        target_with_bonus_probs = _tensor(target_with_bonus_probs, "target_with_bonus_probs")
        draft_token_ids = _tensor(draft_token_ids, "draft_token_ids")
        bonus_token_ids = _tensor(bonus_token_ids, "bonus_token_ids")
        _expect_shape(target_with_bonus_probs, "target_with_bonus_probs", (b, k + 1, v))
        _expect_shape(draft_token_ids, "draft_token_ids", (b, k))
        _expect_shape(bonus_token_ids, "bonus_token_ids", (b, 1))
        out = torch.full((b, k + 1), -1, dtype=torch.int64)
        for gen, rows in _rows_by_generator(b, seeded_seqs or {}, torch.default_generator).values():
            idx = torch.tensor(rows)
            ids, acc = kernel(draft_token_ids[idx], q[idx], target_with_bonus_probs[idx], gen)
            ids, acc = _tensor(ids, "kernel").to(torch.int64), _tensor(acc, "kernel").long()
            ids[acc == k, k] = bonus_token_ids[idx][acc == k, 0].to(torch.int64)
            out[idx] = ids
        return out

    return forward


# ----------------------------------------------------------------------------- vLLM V1


def vllm_v1_sampling_metadata(batch_size: int, generator: torch.Generator, device=None) -> SimpleNamespace:
    """Minimal stand-in for vLLM V1's ``SamplingMetadata`` as ``rejection_sample`` reads it.

    vllm 0.8.5 v1/sample/rejection_sampler.py reads ``all_greedy`` (:174, :191), ``all_random``
    (:178), ``temperature`` (:177, compared with GREEDY_TEMPERATURE = -1 into ``is_greedy``) and
    ``generators`` (:199 -> ``generate_uniform_probs``, :410 in ``sample_recovered_tokens``).
    ``top_k`` / ``top_p`` are read only by ``compute_probs`` (:275, :282) and are ``None`` here.
    Every row uses ``generator``.
    """
    return SimpleNamespace(
        all_greedy=False,
        all_random=True,
        temperature=torch.ones(batch_size, dtype=torch.float32, device=device),
        generators={i: generator for i in range(batch_size)},
        top_k=None,
        top_p=None,
    )


def vllm_v1_ragged_inputs(batch: CanonicalBatch, bonus: torch.Tensor) -> tuple:
    """V1 ``rejection_sample``'s arguments before ``sampling_metadata`` for a canonical batch, in
    its ragged layout (v1/sample/rejection_sampler.py:135-150): every row's present drafts and
    their q and p rows flattened, the rows' draft counts, k, their cumulative sums, and ``bonus``
    [B] as the bonus token ids [B, 1] int32."""
    k = batch.shape[1]
    present = batch.draft_ids >= 0
    return (
        batch.draft_ids[present].to(torch.int32).contiguous(),
        batch.counts.tolist(),
        k,
        torch.cumsum(batch.counts, 0).to(torch.int32),
        batch.draft_probs[present].contiguous(),
        batch.target_probs[:, :k][present].contiguous(),
        bonus.to(torch.int32).reshape(-1, 1).contiguous(),
    )


def from_vllm_v1(rejection_sample: Callable) -> Kernel:
    """Canonical kernel from vLLM V1's ragged ``rejection_sample`` (a generator kernel).

    Engine (vllm 0.8.5, v1/sample/rejection_sampler.py:135-232)::

        rejection_sample(draft_token_ids[N] i32, num_draft_tokens: list[int], max_spec_len: int,
                         cu_num_draft_tokens[B] i32, draft_probs[N, V] f32 | None,
                         target_probs[N, V] f32, bonus_token_ids[B, 1] i32,
                         sampling_metadata) -> [B, max_spec_len + 1] i32, -1 padded

    N = sum k_b: the canonical padded rows are flattened in row order and
    ``cu_num_draft_tokens`` is the inclusive cumulative sum of k_b. Accepts iff
    ``q > 0 and p / q >= u`` (:524), u = ``torch.rand`` in [0, 1) per draft, from the request's
    generator (:337-384); the recovered token is ``argmax(max(p - q, 0) / E)`` with one
    exponential row E per request (:401-412, :618-624). Bonus-row probabilities are not passed:
    the adapter draws ``bonus_token_ids`` from ``target_probs[b, k_b]`` with the generator.
    ``sampling_metadata`` is :func:`vllm_v1_sampling_metadata`. ``max_spec_len`` = k.
    """

    def kernel(draft_ids, draft_probs, target_probs, generator):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, generator)
        gen = _require_generator(batch, "vLLM V1 rejection_sample")
        b, k, _ = batch.shape
        bonus = _draw(batch.target_probs[torch.arange(b), batch.counts], gen)
        out = rejection_sample(
            *vllm_v1_ragged_inputs(batch, bonus), vllm_v1_sampling_metadata(b, gen, batch.target_probs.device)
        )
        out = engine_output(out, "rejection_sample", (b, k + 1))
        return finish_canonical(batch, out, accepted_from_output(out))

    return kernel


def to_vllm_v1(kernel: Kernel) -> Callable:
    """vLLM V1's ``rejection_sample`` signature around a canonical generator kernel.

    The ragged rows are padded back to [B, max_spec_len]; each row's bonus target row (which V1
    does not pass) is a one-hot at its ``bonus_token_ids`` entry, and that token replaces the
    kernel's last token where all drafts are accepted. ``draft_probs=None`` (n-gram) becomes a
    one-hot q at each draft, V1's q := 1 (rejection_sampler.py:513). Rows are grouped by their
    ``sampling_metadata.generators`` entry (unseeded rows: torch's default CPU generator). Only
    ``all_random`` metadata is supported.
    """

    def rejection_sample(
        draft_token_ids,
        num_draft_tokens,
        max_spec_len,
        cu_num_draft_tokens,
        draft_probs,
        target_probs,
        bonus_token_ids,
        sampling_metadata,
    ):
        counts = torch.as_tensor(list(num_draft_tokens), dtype=torch.int64)
        b, n = len(counts), int(counts.sum())
        ids = _tensor(draft_token_ids, "draft_token_ids")
        p = _tensor(target_probs, "target_probs")
        _expect_shape(ids, "draft_token_ids", (n,))
        if p.dim() != 2 or p.shape[0] != n:
            raise ValueError(f"target_probs must have shape [N={n}, V], got {list(p.shape)}")
        v = p.shape[1]
        cu = _tensor(cu_num_draft_tokens, "cu_num_draft_tokens").to(torch.int64)
        if not torch.equal(cu, torch.cumsum(counts, 0)):
            raise ValueError("cu_num_draft_tokens must be the cumulative sum of num_draft_tokens")
        if b and int(counts.max()) > max_spec_len:
            raise ValueError("max_spec_len must be at least max(num_draft_tokens)")
        bonus_token_ids = _tensor(bonus_token_ids, "bonus_token_ids")
        _expect_shape(bonus_token_ids, "bonus_token_ids", (b, 1))
        if not getattr(sampling_metadata, "all_random", False):
            raise ValueError("sampling_metadata: only all_random batches are supported")
        if draft_probs is None:
            q = torch.nn.functional.one_hot(ids.long(), v).to(torch.float32)
        else:
            q = _tensor(draft_probs, "draft_probs")
            _expect_shape(q, "draft_probs", (n, v))
        k = int(max_spec_len)
        present = torch.arange(k)[None, :] < counts[:, None]
        pad_ids = torch.full((b, k), -1, dtype=torch.int64)
        pad_ids[present] = ids.long()
        pad_q = torch.zeros((b, k, v), dtype=torch.float32)
        pad_q[present] = q.float()
        pad_p = torch.zeros((b, k + 1, v), dtype=torch.float32)
        pad_p[:, :k][present] = p.float()
        bonus = bonus_token_ids[:, 0].long()
        pad_p[torch.arange(b), counts] = torch.nn.functional.one_hot(bonus, v).float()
        out = torch.full((b, k + 1), -1, dtype=torch.int32)
        generators = dict(sampling_metadata.generators)
        for gen, rows in _rows_by_generator(b, generators, torch.default_generator).values():
            idx = torch.tensor(rows)
            got, acc = kernel(pad_ids[idx], pad_q[idx], pad_p[idx], gen)
            got, acc = _tensor(got, "kernel").to(torch.int64), _tensor(acc, "kernel").long()
            full = acc == counts[idx]
            got[full, counts[idx][full]] = bonus[idx][full]
            out[idx] = got.to(torch.int32)
        return out

    return rejection_sample


# ----------------------------------------------------------------------------- FlashInfer


def from_flashinfer(chain_speculative_sampling: Callable) -> Kernel:
    """Canonical kernel from FlashInfer's ``chain_speculative_sampling`` (a generator kernel).

    Engine (flashinfer/sampling.py, the generator API; vLLM 0.8.5's V0 still calls the older
    form taking ``uniform_samples`` third, rejection_sampler.py:126-131)::

        chain_speculative_sampling(draft_probs[B, k, V] f32, draft_token_ids[B, k] i32,
                                   target_probs[B, k+1, V] f32,
                                   maybe_output_accepted_token_num=None,
                                   maybe_output_emitted_draft_token_num=None,
                                   deterministic=True, generator=None, seed=None, offset=None)
            -> (output_token_ids[B, k+1] i32 -1 padded, accepted_token_num[B],
                emitted_draft_token_num[B])

    The CUDA kernel (include/flashinfer/sampling.cuh, ``ChainSpeculativeSampling``) draws
    ``u = curand_uniform(...)`` in **(0, 1]** from a Philox state seeded by ``generator`` and
    accepts iff ``u * q < p`` (its own letters are swapped: its ``p`` is our q); it samples the
    recovered token from relu(p - q) and the bonus from p in-kernel. ``accepted_token_num`` counts
    drafts accepted independently (past the first rejection too), so ``num_accepted`` is derived
    from the output instead. Fixed k: rows are grouped by k_b.
    """

    def kernel(draft_ids, draft_probs, target_probs, generator):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, generator)
        gen = _require_generator(batch, "FlashInfer chain_speculative_sampling")

        def run(rows, kb):
            result = chain_speculative_sampling(
                batch.draft_probs[rows, :kb].contiguous(),
                batch.draft_ids[rows, :kb].to(torch.int32).contiguous(),
                batch.target_probs[rows, : kb + 1].contiguous(),
                deterministic=True,
                generator=gen,
            )
            out = result[0] if isinstance(result, tuple) else result
            out = engine_output(out, "chain_speculative_sampling", (len(rows), kb + 1))
            return out, accepted_from_output(out)

        return finish_canonical(batch, *by_draft_count(batch, run))

    return kernel


def to_flashinfer(kernel: Kernel) -> Callable:
    """FlashInfer's ``chain_speculative_sampling`` signature around a canonical generator kernel.

    Returns int32 outputs like FlashInfer. Both counters report the number of drafts accepted
    before the first rejection (a canonical kernel does not test drafts past it, so FlashInfer's
    independent ``accepted_token_num`` is not available); given buffers are added to in place.
    ``generator=None`` uses torch's default CPU generator; ``seed`` / ``offset`` are refused.
    """

    def chain_speculative_sampling(
        draft_probs,
        draft_token_ids,
        target_probs,
        maybe_output_accepted_token_num=None,
        maybe_output_emitted_draft_token_num=None,
        deterministic=True,
        generator=None,
        seed=None,
        offset=None,
    ):
        if seed is not None or offset is not None:
            raise ValueError("seed/offset: pass a torch.Generator as generator instead")
        ids = _tensor(draft_token_ids, "draft_token_ids")
        if ids.dim() != 2:
            raise ValueError(f"draft_token_ids must be 2-D [B, k], got {list(ids.shape)}")
        out, acc = kernel(
            ids.long(), draft_probs, target_probs, generator if generator is not None else torch.default_generator
        )
        out = _tensor(out, "kernel").to(torch.int32)
        acc = _tensor(acc, "kernel").to(torch.int32)
        accepted = maybe_output_accepted_token_num
        emitted = maybe_output_emitted_draft_token_num
        accepted = acc.clone() if accepted is None else accepted.add_(acc)
        emitted = acc.clone() if emitted is None else emitted.add_(acc)
        return out, accepted, emitted

    return chain_speculative_sampling


# ----------------------------------------------------------------------------- SGLang


def from_sglang_chain(chain_speculative_sampling_triton: Callable, block_verification: bool = False) -> Kernel:
    """Canonical kernel from SGLang's ``chain_speculative_sampling_triton`` (uniforms as inputs).

    Engine (sglang 0.5.23, kernels/ops/speculative/reject_sampling.py:242-295; the CUDA
    ``tree_speculative_sampling_target_only`` takes the same buffers)::

        chain_speculative_sampling_triton(
            predicts[B*(k+1)] i32 (out), accept_index[B, k+1] i32 (out),
            accept_token_num[B] i32 (out), candidates[B, k+1] i64, retrive_index[B, k+1] i64,
            retrive_next_token[B, k+1], retrive_next_sibling[B, k+1] (unused by the chain),
            uniform_samples[B, k+1] f32, uniform_samples_for_final_sampling[B] f32,
            target_probs[B, k+1, V] f32, draft_probs[B, k, V] f32, threshold_single,
            threshold_acc, deterministic, *, block_verification=False) -> None

    Mapping found in the source: ``candidates[:, 0]`` is the root (last verified token, never
    read by the chain kernel), ``candidates[:, s]`` for s >= 1 is draft s - 1; the coin of draft
    i is ``uniform_samples[:, i]`` (line 146 loads column ``step - 1``), so column k is unused;
    the emitted token uses ``uniform_samples_for_final_sampling[b]`` (line 166) by inverse CDF
    over ``max(p - q, 0)`` (or p when all are accepted; lines 175-239). Accepts iff
    ``q in (0, 1] and u * q < p`` (lines 148-149). Writes ``predicts[retrive_index[b, j]]`` for
    j <= num_accept, ``accept_index[b, j] = retrive_index[b, j]`` and ``accept_token_num[b]``.

    The adapter passes canonical ``uniforms[:, :k_b]`` then ``uniforms[:, k]`` as
    ``uniform_samples`` (the last column unused), ``uniforms[:, k]`` as
    ``uniform_samples_for_final_sampling``; ``retrive_index`` is ``arange(B*(k+1))`` so
    ``predicts`` reshapes to the canonical output, pre-filled with -1. Thresholds 1.0 (exact),
    ``deterministic=True``. Given a generator, the uniforms are drawn from it in [0, 1) first.
    ``block_verification=True`` passes SGLang's block-verification switch (another exact rule:
    its law given the drafts differs from the token-wise rule's; judge it on its marginal law).
    Fixed k: rows are grouped by k_b.
    """

    def kernel(draft_ids, draft_probs, target_probs, uniforms):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, uniforms)
        u = _uniforms(batch)
        k = batch.shape[1]

        def run(rows, kb):
            n, slots = len(rows), kb + 1
            candidates = torch.zeros((n, slots), dtype=torch.int64)
            candidates[:, 1:] = batch.draft_ids[rows, :kb]
            next_token = torch.arange(1, slots + 1, dtype=torch.int64).repeat(n, 1)
            next_token[:, -1] = -1
            predicts = torch.full((n * slots,), -1, dtype=torch.int32)
            accept_index = torch.full((n, slots), -1, dtype=torch.int32)
            accept_token_num = torch.zeros(n, dtype=torch.int32)
            chain_speculative_sampling_triton(
                predicts=predicts,
                accept_index=accept_index,
                accept_token_num=accept_token_num,
                candidates=candidates,
                retrive_index=torch.arange(n * slots, dtype=torch.int64).view(n, slots),
                retrive_next_token=next_token,
                retrive_next_sibling=torch.full((n, slots), -1, dtype=torch.int64),
                uniform_samples=torch.cat([u[rows, :kb], u[rows, k:]], dim=1).contiguous(),
                uniform_samples_for_final_sampling=u[rows, k].contiguous(),
                target_probs=batch.target_probs[rows, :slots].contiguous(),
                draft_probs=batch.draft_probs[rows, :kb].contiguous(),
                threshold_single=1.0,
                threshold_acc=1.0,
                deterministic=True,
                **({"block_verification": True} if block_verification else {}),
            )
            return predicts.view(n, slots).to(torch.int64), accept_token_num.to(torch.int64)

        return finish_canonical(batch, *by_draft_count(batch, run))

    return kernel


def to_sglang_chain(kernel: Kernel) -> Callable:
    """SGLang's ``chain_speculative_sampling_triton`` signature around a canonical kernel.

    Drafts are ``candidates[:, 1:]``; canonical uniforms are ``uniform_samples[:, :k]`` followed
    by ``uniform_samples_for_final_sampling``. Fills ``predicts``, ``accept_index`` and
    ``accept_token_num`` in place through ``retrive_index`` as the engine does. Only the exact
    chain rule is offered: thresholds other than 1.0 and ``block_verification`` are refused.
    """

    def chain_speculative_sampling_triton(
        predicts,
        accept_index,
        accept_token_num,
        candidates,
        retrive_index,
        retrive_next_token,
        retrive_next_sibling,
        uniform_samples,
        uniform_samples_for_final_sampling,
        target_probs,
        draft_probs,
        threshold_single,
        threshold_acc,
        deterministic,
        *,
        block_verification=False,
    ):
        if block_verification:
            raise ValueError("block_verification: only the token-by-token chain rule is offered")
        if threshold_single != 1.0 or threshold_acc != 1.0:
            raise ValueError("threshold_single/threshold_acc must be 1.0 (the exact rule)")
        cand = _tensor(candidates, "candidates")
        if cand.dim() != 2 or cand.shape[1] < 1:
            raise ValueError(f"candidates must be 2-D [B, k+1], got {list(cand.shape)}")
        b, slots = cand.shape
        k = slots - 1
        us = _tensor(uniform_samples, "uniform_samples")
        if us.dim() != 2 or us.shape[0] != b or us.shape[1] < k:
            raise ValueError(f"uniform_samples must have shape [B={b}, >= k={k}], got {list(us.shape)}")
        final = _tensor(uniform_samples_for_final_sampling, "uniform_samples_for_final_sampling")
        _expect_shape(final, "uniform_samples_for_final_sampling", (b,))
        _expect_shape(_tensor(retrive_index, "retrive_index"), "retrive_index", (b, slots))
        uniforms = torch.cat([us[:, :k].float(), final.float()[:, None]], dim=1)
        out, acc = kernel(cand[:, 1:].long(), draft_probs, target_probs, uniforms)
        out, acc = _tensor(out, "kernel").long(), _tensor(acc, "kernel").long()
        for row in range(b):
            n = int(acc[row])
            slots_written = retrive_index[row, : n + 1].long()
            predicts[slots_written] = out[row, : n + 1].to(predicts.dtype)
            accept_index[row, : n + 1] = slots_written.to(accept_index.dtype)
        accept_token_num.copy_(acc.to(accept_token_num.dtype))

    return chain_speculative_sampling_triton


# ----------------------------------------------------------------------------- TensorRT-LLM


def from_trtllm(get_rejected_indices: Callable, sample_rejected: Callable) -> Kernel:
    """Canonical kernel from TensorRT-LLM's torch-sampler pair (a generator kernel, per request).

    Engine (NVIDIA/TensorRT-LLM, tensorrt_llm/_torch/pyexecutor/sampling_utils.py; called by
    ``TorchSampler._process_draft_tokens_rejection_sampling`` in pyexecutor/sampler.py)::

        get_rejected_indices(draft_probs[k, V], target_probs[k+1, V], generator: torch.Generator,
                             draft_tokens: list[int]) -> rejected positions, ``.nonzero()`` [r, 1]
        sample_rejected(draft_probs[k, V], target_probs[k+1, V], generator,
                        num_accepted: int) -> int

    Rejects iff ``torch.rand(k, generator=generator) > min(1, p / q)`` (uniforms in [0, 1); its
    letters are swapped: its ``p`` is our q), i.e. accepts iff u <= p / q; the caller takes
    ``rejected[0]`` as the number accepted; ``sample_rejected`` draws
    ``torch.multinomial(relu(p - q))`` at that row. The bonus (no rejection) is the target
    sampler's own draw at step k, outside these functions: the adapter draws it from
    ``target_probs[b, k_b]``. Called once per row, as TRT-LLM does per request; k_b = 0 rows are
    not verified (``get_draft_token_length(request) > 0``) and emit the bonus.
    """

    def kernel(draft_ids, draft_probs, target_probs, generator):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, generator)
        gen = _require_generator(batch, "TensorRT-LLM get_rejected_indices/sample_rejected")
        b, k, _ = batch.shape
        out = torch.full((b, k + 1), -1, dtype=torch.int64)
        acc = torch.zeros(b, dtype=torch.int64)
        for row in range(b):
            kb = int(batch.counts[row])
            q, p = batch.draft_probs[row, :kb], batch.target_probs[row, : kb + 1]
            n = kb
            if kb:
                rejected = get_rejected_indices(q, p, gen, batch.draft_ids[row, :kb].tolist())
                n = int(rejected.reshape(-1)[0]) if rejected.numel() else kb
            token = int(sample_rejected(q, p, gen, n)) if n < kb else int(_draw(p[kb:], gen)[0])
            out[row, :n] = batch.draft_ids[row, :n]
            out[row, n] = token
            acc[row] = n
        return finish_canonical(batch, out, acc)

    return kernel


def to_trtllm(kernel: Kernel) -> tuple[Callable, Callable]:
    """TensorRT-LLM's ``(get_rejected_indices, sample_rejected)`` around a canonical kernel.

    ``get_rejected_indices`` runs the kernel on the one request and returns ``[[n]]`` (the first
    rejected position) or an empty [0, 1] tensor; TRT-LLM's own returns every independently
    rejected position but its caller reads only the first. ``sample_rejected`` returns the token
    the same kernel call emitted, so the pair must be called in TRT-LLM's order, for the same
    request and generator; anything else raises ``ValueError``.
    """
    last: dict = {}

    def get_rejected_indices(draft_probs, target_probs, generator, draft_tokens):
        q = _tensor(draft_probs, "draft_probs")
        if q.dim() != 2:
            raise ValueError(f"draft_probs must be 2-D [k, V], got {list(q.shape)}")
        k = q.shape[0]
        p = _tensor(target_probs, "target_probs")
        p = p.squeeze(0) if p.dim() == 3 else p
        if p.dim() != 2 or p.shape[0] < k + 1 or p.shape[1] != q.shape[1]:
            raise ValueError(f"target_probs must be [k+1={k + 1}, V], got {list(p.shape)}")
        ids = torch.as_tensor(list(draft_tokens)[:k], dtype=torch.int64)
        if ids.numel() != k:
            raise ValueError(f"draft_tokens must hold at least k={k} tokens")
        out, acc = kernel(ids[None], q[None], p[None, : k + 1], generator)
        n = int(_tensor(acc, "kernel")[0])
        last.clear()
        last.update(generator=generator, num_accepted=n, token=int(_tensor(out, "kernel")[0, n]))
        return torch.tensor([[n]]) if n < k else torch.zeros((0, 1), dtype=torch.int64)

    def sample_rejected(draft_probs, target_probs, generator, num_accepted):
        if last.get("generator") is not generator or last.get("num_accepted") != num_accepted:
            raise ValueError(
                "sample_rejected: call get_rejected_indices first for this request "
                "and pass its first rejected position as num_accepted"
            )
        return last["token"]

    return get_rejected_indices, sample_rejected
