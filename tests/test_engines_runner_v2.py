"""vLLM's model runner v2 sampler, and the Triton interpreter controls it is judged with.

The controls (``adapters.kernels.triton_interpreter``) are pinned on tiny kernels written here:
the libdevice shim, ``tl.rand`` and a Triton-written generator answered from host tables, any
other random call refused, everything restored afterwards. The rows are pinned, when vllm 0.33.0
is cached, against the token-wise rule row by row (``reference_kernel``) and a block-verification
reference written here (Sun et al., arXiv 2403.10444), and against deliberately wrong wrappers
(the wrong temperature, the seed mapping dropped). Every assertion is deterministic: fixed inputs,
fixed uniforms, no sampling, so no false-fail rate to state. Interpreted Triton is slow, so the
batches are small (V <= 6, B <= 8)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_engines_offline import random_batch, reference_kernel  # noqa: E402

from specverify.engines import loader  # noqa: E402

tl = libdevice = hash_uniform = None
"""Set by the ``kernels`` fixture once triton imports interpreted: the interpreter re-executes a
kernel's source in its module's globals, so the names it uses must be module globals."""


def interpreted_triton():
    """triton under the interpreter (the engines cache's or the environment's), else skip."""
    try:
        loader.ensure_triton(install=False)
    except loader.Unavailable as exc:
        pytest.skip(str(exc))
    import triton

    return triton


@pytest.fixture(scope="module")
def kernels():
    """Tiny kernels: log1p of a block, tl.rand of a block, tl.randint, a Triton-written generator."""
    triton = interpreted_triton()
    import triton.language as tl
    import triton.language.extra.libdevice as libdevice

    # interpreted kernels are re-executed from their source in this module's globals
    globals().update(tl=tl, libdevice=libdevice, hash_uniform=triton.jit(_hash_uniform))

    @triton.jit
    def log1p_kernel(x_ptr, out_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(out_ptr + offs, libdevice.log1p(tl.load(x_ptr + offs)))

    @triton.jit
    def rand_kernel(out_ptr, seed, N: tl.constexpr):
        row = tl.program_id(0)
        tl.store(out_ptr + row * N + tl.arange(0, N), tl.rand(seed + row, tl.arange(0, N)))

    @triton.jit
    def randint_kernel(out_ptr, seed):
        tl.store(out_ptr, tl.randint(seed, 0).to(tl.float32))

    @triton.jit
    def generator_kernel(out_ptr, seed, N: tl.constexpr):
        tl.store(out_ptr + tl.arange(0, N), hash_uniform(seed, 3, tl.arange(0, N)))

    return log1p_kernel, rand_kernel, randint_kernel, generator_kernel


def _hash_uniform(seed, pos, offset):
    """A counter-based uniform written in Triton, as vLLM's ``murmur3_uniform32`` is."""
    return ((seed * 31 + pos * 7 + offset) % 97).to(tl.float32) / 97.0


def test_libdevice_log1p_is_a_stub_and_the_shim_answers_it_for_the_run_only(kernels):
    """Under triton 3.9.0's interpreter ``libdevice.log1p`` returns None (the kernel fails); with
    the shim it is NumPy's log1p in float32; afterwards the stub is back."""
    import triton.language.extra.libdevice as libdevice

    from specverify.adapters.kernels.triton_interpreter import libdevice_shim

    log1p_kernel = kernels[0]
    stub = libdevice.log1p
    x = torch.tensor([0.0, 0.5, -0.5, 1e-7], dtype=torch.float32)
    out = torch.zeros(4)
    if stub(np.float32(1.0)) is None:
        with pytest.raises(Exception, match="None"):
            log1p_kernel[(1,)](x, out, N=4)
    with libdevice_shim() as shim:
        log1p_kernel[(1,)](x, out, N=4)
    assert "log1p" in shim.shimmed and libdevice.log1p is stub
    np.testing.assert_array_equal(out.numpy(), np.log1p(x.numpy()))


def test_tl_rand_is_answered_from_seed_and_offset_and_other_draws_are_refused(kernels):
    """``tl.rand(seed, offset)`` returns the table's uniforms for the host values of (seed,
    offset), per program; ``tl.randint`` raises naming it; ``tl.rand`` is restored afterwards."""
    import triton.language as tl

    from specverify.adapters.kernels.triton_interpreter import ControlledTritonDraws

    _, rand_kernel, randint_kernel, _ = kernels
    original = tl.rand
    out = torch.zeros(2, 4)
    with ControlledTritonDraws(lambda seeds, offsets: seeds * 0.1 + offsets * 0.01) as draws:
        rand_kernel[(2,)](out, 5, N=4)
    want = np.array([[0.5 + i * 0.01 for i in range(4)], [0.6 + i * 0.01 for i in range(4)]], np.float32)
    np.testing.assert_array_equal(out.numpy(), want)
    assert draws.answered["tl.rand"] == 2 and tl.rand is original
    with pytest.raises(Exception, match="tl.randint beyond the controlled uniforms"):
        with ControlledTritonDraws(lambda seeds, offsets: offsets):
            randint_kernel[(1,)](out, 1)
    assert tl.rand is original


def test_a_triton_written_generator_is_answered_by_module_and_name(kernels):
    """A generator the kernel's module defines (as vLLM's gumbel.py does murmur3) is answered
    from the host values of its arguments while the controls are on (refused when its answer is
    None), and is itself afterwards."""
    from specverify.adapters.kernels.triton_interpreter import ControlledTritonDraws

    generator_kernel = kernels[3]
    module = sys.modules[__name__]
    own = module.hash_uniform
    out = torch.zeros(4)
    generator_kernel[(1,)](out, 2, N=4)
    np.testing.assert_allclose(out.numpy(), ((2 * 31 + 3 * 7 + np.arange(4)) % 97) / 97.0, rtol=1e-6)
    with ControlledTritonDraws(generators={(module, "hash_uniform"): lambda s, p, o: (o + s + p) / 10.0}) as draws:
        generator_kernel[(1,)](out, 2, N=4)
    np.testing.assert_allclose(out.numpy(), (np.arange(4) + 5) / 10.0, rtol=1e-6)
    assert draws.answered[f"{__name__}.hash_uniform"] == 1 and module.hash_uniform is own
    with pytest.raises(Exception, match="hash_uniform beyond the controlled uniforms"):
        with ControlledTritonDraws(generators={(module, "hash_uniform"): None}):  # refused
            generator_kernel[(1,)](out, 2, N=4)
    assert module.hash_uniform is own


def test_the_controls_refuse_to_act_outside_the_interpreter(monkeypatch):
    from specverify.adapters.kernels.triton_interpreter import (
        CachedLanguagePatch,
        ControlledTritonDraws,
        libdevice_shim,
    )

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    for control in (ControlledTritonDraws(lambda s, o: o), libdevice_shim(), CachedLanguagePatch()):
        with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
            with control:
                pass


def test_the_cached_language_patch_gives_the_same_outputs(kernels):
    """A kernel calling a device function gives the same values with the grid's patch cached."""
    from specverify.adapters.kernels.triton_interpreter import CachedLanguagePatch

    generator_kernel = kernels[3]
    plain, cached = torch.zeros(4), torch.zeros(4)
    generator_kernel[(1,)](plain, 9, N=4)
    with CachedLanguagePatch():
        generator_kernel[(1,)](cached, 9, N=4)
    assert torch.equal(plain, cached)


# ----------------------------------------------------------------------------- the rows, vllm 0.33.0


@pytest.fixture(scope="module")
def runner_v2():
    """(rejection_sampler_utils, gumbel) of vllm 0.33.0 from the cache (skip when not cached)."""
    from specverify.engines import pins
    from specverify.engines import vllm_runner_v2_rows as R

    interpreted_triton()
    if not loader.is_cached(*pins.VLLM_RUNNER_V2, pins.VLLM_RUNNER_V2_FILES):
        pytest.skip("vllm 0.33.0 is not cached (python -m specverify.engines --engine vllm-v2-rejection fetches it)")
    try:
        return R.load_runner_v2(download=False)
    except loader.Unavailable as exc:
        pytest.skip(str(exc))


def test_runner_v2_loads_through_the_generic_rule_with_no_stand_in_of_its_own(runner_v2):
    """The runner-v2 sampler is loaded by ``vllm_loading.load_vllm`` (V1's loader): vLLM's Triton
    names and the watermark draw run from the wheel, and the only stand-ins are those the
    generic rule names (config machinery), once per process for the four rows."""
    from specverify.engines import vllm_runner_v2_rows as R

    loaded = R.loaded_runner_v2(download=False)
    assert R.load_runner_v2(download=False)[0] is runner_v2[0] is loaded.module
    assert set(loaded.standins) and all(why.startswith("config machinery") for why in loaded.standins.values())
    for real in ("vllm.triton_utils", "vllm.v1.worker.gpu.sample.watermark", R.MODULES[0], R.MODULES[1]):
        assert real in loaded.modules and real not in loaded.standins
        assert not getattr(loaded.modules[real], "__specverify_standin__", False)


def ragged_batch(seed: int):
    ids, q, p, u = random_batch(seed, 8, 2, 5)
    ids[:2, 1] = -1
    ids[2, :] = -1
    return ids, q, p, u


def test_runner_v2_standard_with_controlled_draws_is_the_rule_row_by_row(runner_v2):
    """vLLM 0.33.0's runner-v2 ``rejection_sample`` with its in-kernel draws answered from the
    uniforms gives the token-wise rule's output on ragged random rows, and the same again."""
    from specverify.engines import vllm_runner_v2_rows as R

    kernel = R.uniforms_kernel(*runner_v2)
    ids, q, p, u = ragged_batch(5)
    out, nacc = kernel(ids, q, p, u)
    want_out, want_nacc = reference_kernel(ids, q, p, u)
    np.testing.assert_array_equal(nacc, want_nacc)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(kernel(ids, q, p, u)[0], out)


@pytest.mark.parametrize("wrong", ["temperature", "seeds"])
def test_a_wrong_runner_v2_wrapper_is_not_the_rule(runner_v2, wrong):
    """Deliberately wrong wrappers: draft logits divided by temperature 2 (q flattened), or every
    request given request 0's seed (its coins and noise read for all: a draw past request 0's
    drafts finds no coin laid out and raises); each departs from the rule on the rows above."""
    from specverify.engines import vllm_runner_v2_rows as R

    if wrong == "temperature":
        kernel = R.uniforms_kernel(*runner_v2, temperature=2.0)
    else:
        kernel = R.uniforms_kernel(*runner_v2, seeds_of=lambda b: [R.SEED_BASE] * b)
    ids, q, p, u = ragged_batch(5)
    try:
        out, nacc = kernel(ids, q, p, u)
    except Exception as exc:  # noqa: BLE001 - the interpreter wraps the refusal
        assert wrong == "seeds" and "laid no coin out" in str(exc)
        return
    want_out, want_nacc = reference_kernel(ids, q, p, u)
    assert (out != want_out).any() or (nacc != want_nacc).any()


def block_reference(drafts, ps, qs, coins, noise):
    """Block verification (Sun et al., arXiv 2403.10444) as runner v2 lays it out: the running
    ratio r_i = min(1, r_{i-1} p_i(x_i) / q_i(x_i)); draft i (0-based) is a success when coin i
    <= h_i, h_i = m / (m + 1 - r_i) with m = sum max(r_i p_{i+1} - q_{i+1}, 0) (h = r_i at the
    last draft); the accepted length is the last success; then the Gumbel race (noise u per
    token, g = -log(-log(1 - u))) over max(r_tau-1 p_tau - q_tau, 0), or p_k after k successes."""
    k = len(drafts)
    ratio, r = 1.0, []
    for i, x in enumerate(drafts):
        ratio = min(1.0, ratio * ps[i][x] / qs[i][x]) if qs[i][x] > 0 else 0.0
        r.append(ratio)
    tau = 0
    for i in range(k):
        if i < k - 1:
            m = np.clip(r[i] * ps[i + 1] - qs[i + 1], 0, None).sum()
            h = m / (m + 1 - r[i]) if m + 1 - r[i] > 0 else 1.0
        else:
            h = r[i]
        tau = i + 1 if coins[i] <= h else tau
    w = ps[k] if tau == k else np.clip((r[tau - 1] if tau else 1.0) * ps[tau] - qs[tau], 0, None)
    with np.errstate(divide="ignore"):
        scores = np.log(w) - np.log(-np.log1p(-noise[tau].astype(np.float64)))
    return list(drafts[:tau]) + [int(np.argmax(scores))]


def test_runner_v2_block_round_is_block_verification(runner_v2):
    """The block round's call on given drafts, with coins and noise from a seed, emits what the
    block-verification reference emits with the same coins and noise."""
    from specverify.engines import rounds
    from specverify.engines import vllm_runner_v2_rows as R

    step = R.runner_v2_round(*runner_v2, use_block_verification=True)
    rng = np.random.default_rng(11)
    V, k = 5, 3
    for seed in range(4):
        qs = rng.dirichlet(np.ones(V), k)
        ps = rng.dirichlet(np.ones(V), k + 1)
        drafts = [int(rng.choice(V, p=row)) for row in qs]
        got = step.verify(drafts, list(ps), list(qs), None, seed)
        replay = np.random.default_rng(seed)
        coins = rounds.grid_uniforms(replay, k)
        noise = ((replay.integers(0, rounds.GRID, size=(k + 1, V)) + 0.5) / rounds.GRID).astype(np.float32)
        assert got == block_reference(drafts, ps, qs, coins, noise)


def test_the_contract_holds_for_0_33_and_a_wrapper_feeding_probabilities_is_an_adapter_error(runner_v2):
    """``check_contract`` passes on vllm 0.33.0; a wrapper that feeds probabilities where the
    function takes logits fails the known answers: one line naming the contract, no verdict."""
    from specverify.engines import vllm_runner_v2_rows as R

    R.check_contract(*runner_v2)
    with pytest.raises(loader.Unavailable, match="contract does not hold") as caught:
        R.check_contract(*runner_v2, kernel=R.uniforms_kernel(*runner_v2, logits=False))
    assert "\n" not in str(caught.value)
