"""Engine calling conventions (specverify.adapters.kernels) against the canonical exact rule.

For each engine the project's own exact rule is written here in that engine's calling convention
(argument names, order, dtypes, layout and randomness as documented in the adapter; written from
the contract, not from the engine's code), wrapped with the adapter and compared with a canonical
per-row reference: identical outputs for the uniform-input convention (SGLang), the output law
by chi-square for generator conventions (vLLM V0/V1, FlashInfer, TensorRT-LLM).
"""

from collections import defaultdict

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from specverify.adapters import kernels as K

# Each chi-square test fails a correct kernel with probability 1e-6 (its p-value threshold);
# seeds are fixed, so the outcome is deterministic.
FALSE_FAIL = 1e-6


# ----------------------------------------------------------------------------- canonical reference


def _inverse_cdf(weights: np.ndarray, u: float) -> int:
    cdf = np.cumsum(weights)
    return int(min(np.searchsorted(cdf, u * cdf[-1], side="right"), len(weights) - 1))


def reference_kernel(draft_ids, draft_probs, target_probs, uniforms):
    """The canonical exact rule, one row at a time: accept iff u*q < p, residual / bonus by
    inverse CDF with the last uniform, bonus from row k_b."""
    as_np = isinstance(draft_ids, np.ndarray)
    ids, q, p = (np.asarray(torch.as_tensor(a)) for a in (draft_ids, draft_probs, target_probs))
    b, k = ids.shape
    if isinstance(uniforms, torch.Generator):
        u = torch.rand((b, k + 1), generator=uniforms).numpy()
    elif isinstance(uniforms, np.random.Generator):
        u = uniforms.random((b, k + 1), dtype=np.float32)
    else:
        u = np.asarray(torch.as_tensor(uniforms))
    out = np.full((b, k + 1), -1, dtype=np.int64)
    acc = np.zeros(b, dtype=np.int64)
    for row in range(b):
        kb = int((ids[row] >= 0).sum())
        n = 0
        while n < kb:
            x = ids[row, n]
            if float(u[row, n]) * float(q[row, n, x]) < float(p[row, n, x]):
                out[row, n] = x
                n += 1
            else:
                break
        if n < kb:
            weights = np.maximum(p[row, n].astype(np.float64) - q[row, n].astype(np.float64), 0)
        else:
            weights = p[row, kb].astype(np.float64)
        out[row, n] = _inverse_cdf(weights, float(u[row, k]))
        acc[row] = n
    if as_np:
        return out, acc
    return torch.from_numpy(out), torch.from_numpy(acc)


def analytic_law(ids_row, q, p, kb) -> dict:
    """P(num_accepted = n, emitted token = t) for one row under the exact rule."""
    law: dict = defaultdict(float)
    reach = 1.0
    for i in range(kb):
        x = int(ids_row[i])
        accept = min(1.0, float(p[i, x]) / float(q[i, x]))
        residual = np.maximum(p[i].astype(np.float64) - q[i].astype(np.float64), 0)
        if residual.sum() > 0:
            for t in range(len(residual)):
                law[(i, t)] += reach * (1 - accept) * residual[t] / residual.sum()
        reach *= accept
    for t in range(p.shape[1]):
        law[(kb, t)] += reach * float(p[kb, t])
    return law


# ----------------------------------------------------------------------------- instances


def random_instance(rng, batch, k, vocab, ragged=True):
    """Random p, q (float32, some exact zeros) and drafts drawn from q; ragged -1 padding."""
    q = rng.dirichlet(np.full(vocab, 0.7), size=(batch, k)).astype(np.float32)
    p = rng.dirichlet(np.full(vocab, 0.7), size=(batch, k + 1)).astype(np.float32)
    q[rng.random(q.shape) < 0.1] = 0
    p[rng.random(p.shape) < 0.1] = 0
    q[..., 0] += 1e-3  # every q row keeps some mass
    p[..., -1] += 1e-3
    q /= q.sum(-1, keepdims=True)
    p /= p.sum(-1, keepdims=True)
    ids = np.array(
        [[rng.choice(vocab, p=q[b, i] / q[b, i].sum()) for i in range(k)] for b in range(batch)], dtype=np.int64
    ).reshape(batch, k)
    if ragged:
        for b in range(batch):
            ids[b, rng.integers(0, k + 1) :] = -1
    uniforms = rng.random((batch, k + 1), dtype=np.float32)
    return ids, q, p, uniforms


LAW_K, LAW_V, LAW_ROWS = 3, 5, 100_000
ROW_TYPES = (3, 1, 0)  # k_b of rows 0, 1, 2 (mod 3): full, ragged and draft-free rows


def law_instance(rows=LAW_ROWS):
    """One p/q/draft triple repeated over ``rows`` rows whose k_b cycles through ROW_TYPES."""
    rng = np.random.default_rng(20240531)
    q = rng.dirichlet(np.full(LAW_V, 1.0), size=LAW_K).astype(np.float32)
    p = rng.dirichlet(np.full(LAW_V, 1.0), size=LAW_K + 1).astype(np.float32)
    ids = np.array([int(np.argmax(q[i])) for i in range(LAW_K)], dtype=np.int64)
    all_ids = np.tile(ids, (rows, 1))
    for row_type, kb in enumerate(ROW_TYPES):
        all_ids[row_type :: len(ROW_TYPES), kb:] = -1
    # Canonical target rows: row k_b is the row's bonus row (p rows shifted for ragged rows).
    target = np.tile(p, (rows, 1, 1))
    return (torch.from_numpy(all_ids), torch.from_numpy(np.tile(q, (rows, 1, 1))), torch.from_numpy(target), ids, q, p)


def assert_output_law(out, acc, ids, q, p):
    """Chi-square of each row type's (num_accepted, token) counts against the analytic law."""
    out, acc = np.asarray(torch.as_tensor(out)), np.asarray(torch.as_tensor(acc))
    for row_type, kb in enumerate(ROW_TYPES):
        o, a = out[row_type :: len(ROW_TYPES)], acc[row_type :: len(ROW_TYPES)]
        assert ((a >= 0) & (a <= kb)).all()
        tokens = o[np.arange(len(o)), a]
        assert (o[np.arange(o.shape[1])[None] > a[:, None]] == -1).all()
        for i in range(kb):
            assert (o[a > i, i] == ids[i]).all()
        law = analytic_law(ids, q, p, kb)
        cells = [(n, t) for n in range(kb + 1) for t in range(LAW_V)]
        counts = np.bincount(a * LAW_V + tokens, minlength=(kb + 1) * LAW_V)
        probs = np.array([law.get(c, 0.0) for c in cells])
        assert counts[probs == 0].sum() == 0, "a zero-probability outcome was emitted"
        expected = probs * len(o)
        small = (expected < 5) & (probs > 0)
        obs = np.append(counts[(probs > 0) & ~small], counts[small].sum())
        exp = np.append(expected[(probs > 0) & ~small], expected[small].sum())
        keep = exp > 0
        _, pvalue = chisquare(obs[keep], exp[keep] * obs.sum() / exp[keep].sum())
        assert pvalue > FALSE_FAIL, (kb, pvalue)


# ----------------------------------------------------------------------------- the exact rule in
# each engine's calling convention (written from the contracts documented in the adapter module)


def _first_rejection(ids, q, p, coins):
    """Accepted prefix length per row under ``coins * q(x) < p(x)``."""
    if ids.shape[1] == 0:
        return torch.zeros(ids.shape[0], dtype=torch.int64)
    qx = q.gather(2, ids.long().unsqueeze(2)).squeeze(2)
    px = p[:, : ids.shape[1]].gather(2, ids.long().unsqueeze(2)).squeeze(2)
    return (coins * qx < px).long().cumprod(1).sum(1)


def _emitted(q, p, n_acc, gen):
    """Residual max(p - q, 0) at the first rejection, else p's bonus row, by multinomial."""
    n, k = q.shape[:2]
    rows = torch.arange(n)
    weights = p[rows, n_acc].double()
    if k:
        rejected = n_acc < k
        j = n_acc.clamp(max=k - 1)
        residual = (p[rows, j].double() - q[rows, j].double()).clamp(min=0)
        weights[rejected] = residual[rejected]
    return torch.multinomial(weights, 1, generator=gen).squeeze(1)


def fake_vllm_v0_forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=None):
    """vLLM V0 convention: fixed k, caller's bonus, one generator per seeded row."""
    b, k, _ = draft_probs.shape
    out = torch.full((b, k + 1), -1, dtype=torch.int64)
    groups: dict = {}
    for row in range(b):
        gen = (seeded_seqs or {}).get(row, torch.default_generator)
        groups.setdefault(id(gen), (gen, []))[1].append(row)
    for gen, rows in groups.values():
        idx = torch.tensor(rows)
        coins = torch.rand((len(rows), k), generator=gen)  # [0, 1)
        ids, q, p = draft_token_ids[idx], draft_probs[idx], target_with_bonus_probs[idx]
        n_acc = _first_rejection(ids, q, p, coins)
        token = _emitted(q, p, n_acc, gen)
        token = torch.where(n_acc == k, bonus_token_ids[idx, 0], token)
        block = torch.full((len(rows), k + 1), -1, dtype=torch.int64)
        for r in range(len(rows)):
            block[r, : n_acc[r]] = ids[r, : n_acc[r]]
            block[r, n_acc[r]] = token[r]
        out[idx] = block
    return out


def fake_vllm_v1_rejection_sample(
    draft_token_ids,
    num_draft_tokens,
    max_spec_len,
    cu_num_draft_tokens,
    draft_probs,
    target_probs,
    bonus_token_ids,
    sampling_metadata,
):
    """vLLM V1 convention: ragged flattened drafts, caller's bonus, metadata generators."""
    assert sampling_metadata.all_random and not sampling_metadata.all_greedy
    assert draft_token_ids.dtype == torch.int32 and cu_num_draft_tokens.dtype == torch.int32
    b, v = len(num_draft_tokens), target_probs.shape[1]
    counts = torch.tensor(num_draft_tokens)
    assert torch.equal(cu_num_draft_tokens.long(), counts.cumsum(0))
    present = torch.arange(max_spec_len)[None] < counts[:, None]
    ids = torch.zeros((b, max_spec_len), dtype=torch.int64)
    ids[present] = draft_token_ids.long()
    q = torch.zeros((b, max_spec_len, v))
    q[present] = draft_probs
    p = torch.ones((b, max_spec_len + 1, v))
    p[:, :max_spec_len][present] = target_probs
    out = torch.full((b, max_spec_len + 1), -1, dtype=torch.int32)
    gen = sampling_metadata.generators[0]
    assert all(g is gen for g in sampling_metadata.generators.values())
    coins = torch.rand((b, max_spec_len), generator=gen)
    n_acc = torch.minimum(_first_rejection(ids, q, p, coins), counts)  # stop at each k_b
    token = _emitted(q, p, n_acc, gen)
    token = torch.where(n_acc == counts, bonus_token_ids[:, 0].long(), token)
    for r in range(b):
        out[r, : n_acc[r]] = ids[r, : n_acc[r]].int()
        out[r, n_acc[r]] = token[r]
    return out


def fake_flashinfer_chain(
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
    """FlashInfer convention: coins in (0, 1], bonus sampled in the kernel, int32 outputs."""
    b, k, _ = draft_probs.shape
    coins = 1.0 - torch.rand((b, k), generator=generator)  # (0, 1], like curand_uniform
    n_acc = _first_rejection(draft_token_ids, draft_probs, target_probs, coins)
    token = _emitted(draft_probs, target_probs, n_acc, generator)
    out = torch.full((b, k + 1), -1, dtype=torch.int32)
    for r in range(b):
        out[r, : n_acc[r]] = draft_token_ids[r, : n_acc[r]]
        out[r, n_acc[r]] = token[r]
    return out, n_acc.int(), n_acc.int()


def fake_trtllm_get_rejected_indices(draft_probs, target_probs, generator, draft_tokens):
    """TRT-LLM convention: one request, [k, V] / [k+1, V], rejected positions via nonzero()."""
    k = draft_probs.size(0)
    tokens = torch.tensor(draft_tokens[:k], dtype=torch.int64)
    idx = torch.arange(k)
    u = torch.rand(k, generator=generator)
    accepted = u * draft_probs[idx, tokens] < target_probs.squeeze(0)[idx, tokens]
    return (~accepted).nonzero()


def fake_trtllm_sample_rejected(draft_probs, target_probs, generator, num_accepted):
    residual = (target_probs[num_accepted] - draft_probs[num_accepted]).clamp(min=0)
    return int(torch.multinomial(residual, 1, generator=generator).item())


def fake_sglang_chain(
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
    """SGLang chain convention: uniforms as inputs, outputs written through retrive_index."""
    assert threshold_single == 1.0 and threshold_acc == 1.0 and not block_verification
    b, slots = candidates.shape
    for row in range(b):
        last = int(retrive_index[row, 0])
        accept_index[row, 0] = last
        n = 0
        for step in range(1, slots):
            x = int(candidates[row, step])
            coin = float(uniform_samples[row, step - 1])
            qx, px = float(draft_probs[row, step - 1, x]), float(target_probs[row, step - 1, x])
            if not (0 < qx <= 1 and coin * qx < px):
                break
            predicts[last] = x
            n += 1
            last = int(retrive_index[row, step])
            accept_index[row, n] = last
        accept_token_num[row] = n
        weights = target_probs[row, n].double().numpy()
        if n < slots - 1:
            weights = np.maximum(weights - draft_probs[row, n].double().numpy(), 0)
        predicts[last] = _inverse_cdf(weights, float(uniform_samples_for_final_sampling[row]))


GENERATOR_ENGINES = {
    "vllm_v0": (lambda: K.from_vllm_v0(fake_vllm_v0_forward), lambda kernel: K.from_vllm_v0(K.to_vllm_v0(kernel))),
    "vllm_v1": (
        lambda: K.from_vllm_v1(fake_vllm_v1_rejection_sample),
        lambda kernel: K.from_vllm_v1(K.to_vllm_v1(kernel)),
    ),
    "flashinfer": (
        lambda: K.from_flashinfer(fake_flashinfer_chain),
        lambda kernel: K.from_flashinfer(K.to_flashinfer(kernel)),
    ),
    "trtllm": (
        lambda: K.from_trtllm(fake_trtllm_get_rejected_indices, fake_trtllm_sample_rejected),
        lambda kernel: K.from_trtllm(*K.to_trtllm(kernel)),
    ),
}


# ----------------------------------------------------------------------------- tests


def test_reference_matches_its_own_law():
    ids, q, p, ids0, q0, p0 = law_instance(rows=30_000)
    out, acc = reference_kernel(ids, q, p, torch.Generator().manual_seed(1))
    assert_output_law(out, acc, ids0, q0, p0)


def test_sglang_adapter_equals_reference_given_the_same_uniforms():
    rng = np.random.default_rng(7)
    kernel = K.from_sglang_chain(fake_sglang_chain)
    for _ in range(150):
        k, vocab = int(rng.integers(1, 5)), int(rng.integers(2, 7))
        ids, q, p, u = random_instance(rng, int(rng.integers(1, 7)), k, vocab)
        out, acc = kernel(ids, q, p, u)
        ref_out, ref_acc = reference_kernel(ids, q, p, u)
        assert isinstance(out, np.ndarray) and out.dtype == np.int64 and acc.dtype == np.int64
        np.testing.assert_array_equal(out, ref_out)
        np.testing.assert_array_equal(acc, ref_acc)


def test_sglang_inverse_matches_the_engine_convention_and_round_trips():
    rng = np.random.default_rng(8)
    engine_view = K.to_sglang_chain(reference_kernel)
    for _ in range(60):
        b, k, vocab = int(rng.integers(1, 6)), int(rng.integers(1, 5)), int(rng.integers(2, 6))
        ids, q, p, u = random_instance(rng, b, k, vocab, ragged=False)
        buffers = []
        for fn in (fake_sglang_chain, engine_view):
            candidates = torch.cat([torch.full((b, 1), 9), torch.from_numpy(ids)], dim=1)
            bufs = (
                torch.full((b * (k + 1),), -1, dtype=torch.int32),
                torch.full((b, k + 1), -1, dtype=torch.int32),
                torch.zeros(b, dtype=torch.int32),
            )
            fn(
                *bufs,
                candidates,
                torch.arange(b * (k + 1)).view(b, k + 1),
                None,
                None,
                torch.from_numpy(u),
                torch.from_numpy(u[:, k]),
                torch.from_numpy(p),
                torch.from_numpy(q),
                1.0,
                1.0,
                True,
            )
            buffers.append(bufs)
        for got, want in zip(buffers[1], buffers[0]):
            assert torch.equal(got, want)
        ids_r, q_r, p_r, u_r = random_instance(rng, b, k, vocab)
        out, acc = K.from_sglang_chain(engine_view)(ids_r, q_r, p_r, u_r)
        ref_out, ref_acc = reference_kernel(ids_r, q_r, p_r, u_r)
        np.testing.assert_array_equal(out, ref_out)
        np.testing.assert_array_equal(acc, ref_acc)


def test_sglang_adapter_draws_its_uniforms_from_a_generator():
    rng = np.random.default_rng(9)
    ids, q, p, _ = random_instance(rng, 5, 3, 4)
    kernel = K.from_sglang_chain(fake_sglang_chain)
    first = kernel(torch.from_numpy(ids), q, p, torch.Generator().manual_seed(3))
    again = kernel(torch.from_numpy(ids), q, p, torch.Generator().manual_seed(3))
    u = torch.rand((5, 4), generator=torch.Generator().manual_seed(3))
    assert isinstance(first[0], torch.Tensor)
    assert torch.equal(first[0], again[0])
    assert torch.equal(first[0], reference_kernel(torch.from_numpy(ids), q, p, u)[0])


@pytest.mark.parametrize("engine", sorted(GENERATOR_ENGINES))
def test_generator_engine_output_law(engine):
    ids, q, p, ids0, q0, p0 = law_instance()
    kernel = GENERATOR_ENGINES[engine][0]()
    out, acc = kernel(ids, q, p, torch.Generator().manual_seed(11))
    assert out.dtype == torch.int64 and out.shape == (LAW_ROWS, LAW_K + 1)
    assert_output_law(out, acc, ids0, q0, p0)


@pytest.mark.parametrize("engine", sorted(GENERATOR_ENGINES))
def test_generator_engine_inverse_round_trip_law(engine):
    ids, q, p, ids0, q0, p0 = law_instance(rows=20_000)
    kernel = GENERATOR_ENGINES[engine][1](reference_kernel)
    out, acc = kernel(ids.numpy(), q.numpy(), p.numpy(), np.random.default_rng(12))
    assert isinstance(out, np.ndarray) and out.dtype == np.int64
    assert_output_law(out, acc, ids0, q0, p0)


def test_output_law_check_catches_a_residual_bug():
    """Power: the rule fed q ~ 0 (draft probabilities ignored: accept always) fails the law."""

    def buggy_forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=None):
        return fake_vllm_v0_forward(
            target_with_bonus_probs, bonus_token_ids, torch.zeros_like(draft_probs) + 1e-9, draft_token_ids, seeded_seqs
        )

    ids, q, p, ids0, q0, p0 = law_instance(rows=30_000)
    out, acc = K.from_vllm_v0(buggy_forward)(ids, q, p, torch.Generator().manual_seed(5))
    with pytest.raises(AssertionError):
        assert_output_law(out, acc, ids0, q0, p0)


@pytest.mark.parametrize("engine", sorted(GENERATOR_ENGINES))
def test_generator_engines_refuse_an_array_of_uniforms(engine):
    ids, q, p, u = random_instance(np.random.default_rng(1), 3, 2, 4)
    with pytest.raises(ValueError, match="uniforms"):
        GENERATOR_ENGINES[engine][0]()(ids, q, p, u)


def test_vllm_v1_sampling_metadata_stand_in():
    gen = torch.Generator()
    meta = K.vllm_v1_sampling_metadata(3, gen)
    assert meta.all_random and not meta.all_greedy
    assert meta.temperature.shape == (3,) and not bool((meta.temperature == -1).any())
    assert all(meta.generators[i] is gen for i in range(3))


ALL_ADAPTERS = {
    **{name: makers[0] for name, makers in GENERATOR_ENGINES.items()},
    "sglang": lambda: K.from_sglang_chain(fake_sglang_chain),
}


@pytest.mark.parametrize("engine", sorted(ALL_ADAPTERS))
@pytest.mark.parametrize(
    "bad, name",
    [
        ("draft_probs", "draft_probs"),
        ("target_probs", "target_probs"),
        ("draft_ids", "draft_ids"),
        ("uniforms", "uniforms"),
        ("padding", "draft_ids"),
    ],
)
def test_bad_canonical_input_names_the_argument(engine, bad, name):
    ids, q, p, u = random_instance(np.random.default_rng(2), 3, 2, 4, ragged=False)
    args = {
        "draft_ids": ids,
        "draft_probs": q,
        "target_probs": p,
        "uniforms": u if engine == "sglang" else torch.Generator(),
    }
    if bad == "draft_ids":
        args["draft_ids"] = ids[:, 0]
    elif bad == "padding":
        args["draft_ids"] = np.array([[-1, 1], [0, 1], [1, 2]])
    elif bad == "uniforms":
        args["uniforms"] = u[:, :2] if engine == "sglang" else "seed"
    else:
        args[bad] = args[bad][:, :1]
    with pytest.raises(ValueError, match=name):  # positional: generator kernels call it generator
        ALL_ADAPTERS[engine]()(*args.values())


def test_engine_side_bad_inputs_name_the_argument():
    ids, q, p, u = (torch.from_numpy(a) for a in random_instance(np.random.default_rng(3), 2, 2, 4, ragged=False))
    with pytest.raises(ValueError, match="bonus_token_ids"):
        K.to_vllm_v0(reference_kernel)(p, torch.zeros(2, dtype=torch.int64), q, ids)
    with pytest.raises(ValueError, match="target_with_bonus_probs"):
        K.to_vllm_v0(reference_kernel)(p[:, :2], torch.zeros((2, 1), dtype=torch.int64), q, ids)
    meta = K.vllm_v1_sampling_metadata(2, torch.Generator())
    with pytest.raises(ValueError, match="cu_num_draft_tokens"):
        K.to_vllm_v1(reference_kernel)(
            ids.flatten().int(),
            [2, 2],
            2,
            torch.tensor([2, 3]),
            q.reshape(4, 4),
            p[:, :2].reshape(4, 4),
            torch.zeros((2, 1), dtype=torch.int32),
            meta,
        )
    bufs = (
        torch.zeros(6, dtype=torch.int32),
        torch.zeros((2, 3), dtype=torch.int32),
        torch.zeros(2, dtype=torch.int32),
    )
    cand = torch.cat([torch.zeros((2, 1), dtype=torch.int64), ids], dim=1)
    with pytest.raises(ValueError, match="uniform_samples_for_final_sampling"):
        K.to_sglang_chain(reference_kernel)(
            *bufs, cand, torch.arange(6).view(2, 3), None, None, u, u, p, q, 1.0, 1.0, True
        )
    with pytest.raises(ValueError, match="draft_probs"):
        K.to_trtllm(reference_kernel)[0](q[0, 0], p[0], torch.Generator(), [1, 2])
    _, sample_rejected = K.to_trtllm(reference_kernel)
    with pytest.raises(ValueError, match="get_rejected_indices"):
        sample_rejected(q[0], p[0], torch.Generator(), 0)
