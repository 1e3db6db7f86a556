"""The engines table's newer rows, offline: LMDeploy 0.18.0 (torch backend and Triton kernels),
SGLang 0.5.23's ``blockwise_rejection_torch`` and MLX-LM 0.32.2's speculative loop, each wrapper
pinned against a reference and against a deliberately wrong wrapper, plus the skip lines.

Each test that runs an engine's code loads it from the project's cache, fetching the wheel (and
triton or mlx) the first time; it skips, with the reason, only when that cannot be done here.
The kernel wrappers are compared with the token-wise rule (``reference_kernel``) row by row on
random batches with explicit uniforms: deterministic, no false-fail rate. The MLX round's
checks are statistical; each states its false-fail rate."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).parent))
from test_engines_offline import random_batch, reference_kernel  # noqa: E402

from specverify.engines import BY_NAME, ENGINES, ONE_MINUS_F32, kernel_probe, loader, pins, run_probes  # noqa: E402


def loaded(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, or a skip naming why the engine cannot be had here."""
    try:
        return fn(*args, **kwargs)
    except loader.Unavailable as exc:
        pytest.skip(str(exc))


def ragged_batch(seed: int, rows: int = 24):
    """A random batch with k = 3 and some rows of k_b = 2 and 1; no coin is exactly 0 (there
    the engines' p / q >= u accepts a p(x) = 0 draft, which the rule does not: the probes')."""
    ids, q, p, u = random_batch(seed, rows, 3, 5)
    ids[:3, 2] = -1
    ids[3:5, 1:] = -1
    u[u == 0] = 0.5
    return ids, q, p, u


def same_as_the_rule(kernel, batch) -> bool:
    out, nacc = kernel(*batch)
    want_out, want_nacc = reference_kernel(*batch)
    return bool(np.array_equal(out, want_out) and np.array_equal(nacc, want_nacc))


# ----------------------------------------------------------------------------- LMDeploy


@pytest.fixture(scope="module")
def lmdeploy_impls():
    from specverify.engines import lmdeploy_rows as L

    return {triton: loaded(L.load_lmdeploy, triton=triton) for triton in (False, True)}


@pytest.mark.parametrize("triton", [False, True], ids=["torch", "triton"])
def test_lmdeploy_with_controlled_draws_is_the_rule_row_by_row(lmdeploy_impls, triton):
    """LMDeploy's own ``forward`` (torch backend, or the CUDA backend's Triton kernels
    interpreted) with its float64 torch.rand and its exponential row answered from the uniforms
    gives the token-wise rule's output on every row; the wrapper that feeds probabilities where
    ``forward`` takes logits does not."""
    from specverify.engines.lmdeploy_rows import lmdeploy_uniforms_kernel

    forward = lmdeploy_impls[triton]().forward
    batch = ragged_batch(5, 8 if triton else 24)  # interpreted Triton: a program per row and position
    assert same_as_the_rule(lmdeploy_uniforms_kernel(forward), batch)
    assert not same_as_the_rule(lmdeploy_uniforms_kernel(forward, feed_probabilities=True), batch)


def test_lmdeploy_probes_accept_a_zero_probability_draft_at_u_zero(lmdeploy_impls):
    """LMDeploy tests p / q >= u: at u = 0 it accepts a draft the target gives 0; from an empty
    residual its race over zeros emits token 0 (as vLLM V1's does)."""
    from specverify.engines.lmdeploy_rows import lmdeploy_uniforms_kernel

    kernel = lmdeploy_uniforms_kernel(lmdeploy_impls[False]().forward)
    facts = run_probes(kernel_probe(kernel, explicit=True), ONE_MINUS_F32, n=8)
    assert facts["p0_u0"]["accept_rate"] == 1.0
    assert facts["empty_residual"]["emitted_after_rejection"] == [0]


# ----------------------------------------------------------------------------- SGLang blockwise


@pytest.fixture(scope="module")
def blockwise():
    from specverify.engines import sglang_rows as S

    return loaded(S.load_blockwise).blockwise_rejection_torch


def test_sglang_blockwise_with_controlled_draws_is_the_rule_row_by_row(blockwise):
    """``blockwise_rejection_torch`` with its coins and Gumbel row answered from the uniforms
    gives the rule's output on every row (the bonus token too: it samples that itself); the
    wrapper whose Gumbel row races the position after the engine's does not."""
    from specverify.engines.sglang_rows import blockwise_uniforms_kernel

    batch = ragged_batch(6)
    assert same_as_the_rule(blockwise_uniforms_kernel(blockwise), batch)
    assert not same_as_the_rule(blockwise_uniforms_kernel(blockwise, wrong_gumbel=True), batch)


def test_blockwise_draws_answer_two_rands_and_the_gumbel_log_and_refuse_others():
    from specverify.engines.sglang_rows import blockwise_draws

    coins, noise = torch.tensor([[0.25, 0.5]]), torch.tensor([[1e-9, 2.0, float("inf")]])
    with blockwise_draws(coins, noise) as mode:
        got = torch.rand((1, 2), generator=torch.Generator())
        gumbel = -torch.log(-torch.log(torch.rand((1, 3))))
        with pytest.raises(RuntimeError, match="randn"):
            torch.randn(3)
    assert torch.equal(got, coins) and mode.answered == ["rand", "rand", "log"]
    assert torch.equal(gumbel, -torch.log(noise))  # E's low bits kept: 1e-9 would be lost through float32 U


def test_the_chain_kernel_never_reads_its_thresholds(tmp_path):
    """sglang 0.5.23's ``chain_speculative_sampling_triton`` takes ``threshold_single`` and
    ``threshold_acc`` and never passes them to its Triton kernel (read from the wheel's source);
    ``unused_parameters`` itself is pinned on a small file first."""
    from specverify.engines.sglang_rows import CHAIN_FILE, CHAIN_UNUSED, unused_parameters

    src = tmp_path / "f.py"
    src.write_text("def f(a, b, *, c):\n    return g(a, key=c)\n")
    assert unused_parameters(src, "f") == ["b"]
    with pytest.raises(ValueError, match="function"):
        unused_parameters(src, "h")
    root = loaded(loader.fetch, pins.SGLANG[0], pins.SGLANG[1], (CHAIN_FILE,))
    unused = unused_parameters(root / CHAIN_FILE, "chain_speculative_sampling_triton")
    assert set(CHAIN_UNUSED) <= set(unused)


# ----------------------------------------------------------------------------- MLX-LM


@pytest.fixture(scope="module")
def mlx_loop():
    from specverify.engines import mlx_rows as M

    generate, sample_utils = loaded(M.load_mlx_lm)
    return generate.speculative_generate_step, sample_utils.make_sampler


def rounds(step, p, q, k, n, seed=0):
    rng = np.random.default_rng(seed)
    return [step(lambda pre: p, lambda pre: q, (), k, rng) for _ in range(n)]


def test_mlx_round_follows_the_target_with_lower_acceptance(mlx_loop):
    """One round of mlx-lm's loop on ChainModels: with p = q = (1/2, 1/2, 0) and k = 1 the first
    token is 0 or 1 (never the p = 0 token), a draft is kept when a fresh target draw equals it
    (rate sum p q = 1/2, where the rule keeps all); 300 rounds. The acceptance bound 0.75 is 8.7
    standard deviations above 1/2 (false-fail rate < 1e-17); the first token's frequency of 0 is
    within 0.5 +- 0.2 (6.9 sd: < 1e-11). The wrapper with target and draft swapped follows q,
    seen on a one-hot pair where the right one never emits q's token."""
    from specverify.engines.mlx_rows import mlx_round

    step = mlx_round(*mlx_loop)
    half = np.array([0.5, 0.5, 0.0])
    outs = rounds(step, half, half, 1, 300)
    assert {o[0] for o in outs} <= {0, 1} and all(1 <= len(o) <= 2 for o in outs)
    assert np.mean([len(o) - 1 for o in outs]) < 0.75
    assert abs(np.mean([o[0] == 0 for o in outs]) - 0.5) < 0.2
    p, q = np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0])
    assert all(o == [1] for o in rounds(step, p, q, 2, 20))
    swapped = mlx_round(*mlx_loop)
    assert all(o[0] == 0 for o in [swapped(lambda pre: q, lambda pre: p, (), 2, np.random.default_rng(1))])


def test_mlx_chain_model_reads_the_context_back_from_the_trimmed_cache(mlx_loop):
    """A ChainModel's logits are log prob_fn of the context ending at each input token (BOS
    dropped), and after the cache is trimmed the dropped tokens are forgotten."""
    from specverify.engines.mlx_rows import ChainModel

    generate = sys.modules["mlx_lm.models.cache"]
    seen = []
    model = ChainModel(lambda ctx: seen.append(ctx) or np.array([0.25, 0.75]))
    cache = generate.make_prompt_cache(model)
    import mlx.core as mx

    logits = model(mx.array([[0, 1, 1]]), cache=cache)
    assert seen == [(), (1,), (1, 1)] and np.allclose(np.asarray(logits)[0, 0], np.log([0.25, 0.75]))
    generate.trim_prompt_cache(cache, 2)
    seen.clear()
    model(mx.array([[0]]), cache=cache)
    assert seen == [(0,)]


# ----------------------------------------------------------------------------- the table


def test_the_new_rows_are_declared_with_their_pins_and_the_skip_lines_say_why():
    names = {e.name for e in ENGINES}
    assert {
        "lmdeploy-rejection",
        "lmdeploy-rejection-triton",
        "mlx-lm-speculative",
        "sglang-blockwise-torch",
        "sglang-tree-target-only",
    } <= names
    assert (BY_NAME["lmdeploy-rejection"].version, BY_NAME["mlx-lm-speculative"].version) == ("0.18.0", "0.32.2")
    assert BY_NAME["mlx-lm-speculative"].interface == "round"
    assert all(BY_NAME[n].expected == "exact" for n in ("lmdeploy-rejection", "sglang-blockwise-torch"))
    assert "stub" in BY_NAME["tensorrt-llm"].skip and "unreachable" in BY_NAME["tensorrt-llm"].skip
    for gpu_only in ("flashinfer", "sglang-tree-target-only"):
        assert "CUDA only" in BY_NAME[gpu_only].skip and BY_NAME[gpu_only].build is None


def test_a_scan_point_inside_a_one_point_piece_below_1_stays_below_1():
    """The kernel scans pick a uniform inside each piece; a one-point piece [1 - 2^-24, 1)
    (blockwise's log-space rejection of p = q at the largest coin) must not give u = 1.0."""
    from specverify.interfaces.kernel.scans import piece_point

    top = float(np.float32(1) - np.float32(2.0**-24))
    assert piece_point(top, 2.0**-24) == np.float32(top)
    assert piece_point(0.25, 0.5) == np.float32(0.5)


def test_a_wrapper_written_for_logits_refuses_a_function_that_takes_probabilities():
    """``check_parameters`` (run by each new row at build) passes the signature the wrapper was
    written for and turns another one into one adapter-error line, never a verdict."""
    from specverify.engines.lmdeploy_rows import FEEDS, PARAMETERS
    from specverify.engines.signatures import check_parameters

    def forward(self, target_logits, draft_token_ids, bonus_token_ids, *, is_greedy, draft_probs=None): ...

    def older(self, target_probs, draft_token_ids, bonus_token_ids, *, is_greedy, draft_probs=None): ...

    check_parameters(forward, PARAMETERS, "forward", FEEDS)
    with pytest.raises(loader.Unavailable, match="adapter error: older takes \\(target_probs") as caught:
        check_parameters(older, PARAMETERS, "older", FEEDS)
    assert "feeds logits" in str(caught.value) and "\n" not in str(caught.value)


def test_mlx_loop_runs_on_tiny_random_llamas_and_a_self_draft_is_always_kept(mlx_loop):
    """mlx-lm's loop on two tiny random llamas from its ``ModelArgs`` (no download): every token
    is an id of the vocabulary; drafting with the target itself under greedy sampling keeps every
    draft (the first k tokens of each round come from the draft)."""
    import mlx.core as mx

    from specverify.engines.mlx_rows import tiny_llama

    speculative_generate_step, make_sampler = mlx_loop
    target, draft = tiny_llama(11, 0), tiny_llama(11, 1)
    prompt = mx.array([1, 2, 3], dtype=mx.uint32)
    mx.random.seed(0)
    sampled = list(
        speculative_generate_step(
            prompt, target, draft, num_draft_tokens=2, max_tokens=6, sampler=make_sampler(temp=1.0)
        )
    )
    assert len(sampled) == 6 and all(0 <= int(t) < 11 for t, _, _ in sampled)
    greedy = list(speculative_generate_step(prompt, target, target, num_draft_tokens=2, max_tokens=6))
    assert [d for _, _, d in greedy] == [True, True, False, True, True, False]
