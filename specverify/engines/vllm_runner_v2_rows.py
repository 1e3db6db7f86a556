"""vLLM's model runner v2 sampler (``pins.VLLM_RUNNER_V2``: the default verification path of vLLM
0.33 unless a feature it lacks is on): ``rejection_sample(target_logits, draft_logits,
draft_sampled, cu_num_logits, pos, idx_mapping, expanded_idx_mapping, expanded_local_pos,
temperature, seed, num_speculative_steps, synthetic_conditional_rates, use_fp64,
use_block_verification, ..., fly_window_size, ...) -> (sampled, num_sampled)`` in
``v1/worker/gpu/spec_decode/rejection_sampler_utils.py``, Triton only, run under the interpreter.

What it takes: logits. ``target_logits`` [num_logits, V] after temperature (the runner applies
it before the call) and ``draft_logits`` [max_num_reqs, num_speculative_steps, V] before it (the
kernels divide by ``temperature[req]``); the wrappers pass log p and log q (-inf where a
probability is 0) at temperature 1, so the kernels' softmax gives p and q back. One logit row
per draft and one for the bonus position, requests ragged by ``cu_num_logits``; the token before
each request's first draft leads its slice of ``draft_sampled`` (the kernel reads draft i at
``start + i + 1``).

Its randomness is drawn inside the kernels from (seed, position), not through torch:

* the coins: ``tl.rand(seed, pos)`` (``tl_rand32``, clamped to at least 4.66e-10), with the
  request's seed in standard mode and ``seed ^ (i << 32)`` (``spec_step_seed``) in block mode;
  accept draft i iff ``log p(x) > log u + log q(x)`` (standard), ``u <= h_i`` (block, every
  position drawn; the last success is the accepted length);
* the recovered or bonus token: a Gumbel race, ``argmax(residual_logits + g)`` with
  ``g = -log(-log(1 - u_t))`` and ``u_t = murmur3_uniform32(seed, pos, t)`` per token t (a hash
  written in Triton, gumbel.py), over ``log max(p - q, 0)`` in log space (``libdevice.log1p``,
  a stub returning None under triton 3.9.0's interpreter: ``adapters.kernels.triton_interpreter
  .libdevice_shim`` answers it with NumPy's) or ``log max(p_tau p - q, 0)`` in block mode.

``ControlledTritonDraws`` answers both from the wrapper's own layout (seed b + ``SEED_BASE`` per
request, position i per logit row): a draw at a (seed, position) the wrapper did not lay out
raises. The kernel rows take the coins from the explicit uniforms and, at each position j of a
request, the per-token uniforms ``u_t = 1 - exp(-E_t)`` with E the exponential race of
``vllm.race_noise``'s construction over w = max(p_j - q_j, 0) (or p_k at the bonus position):
the Gumbel race then picks the token the final uniform selects by inverse CDF of w whenever the
engine's residual is w up to a common scale within ``vllm.RACE_MARGIN``. Unlike V1's one
exponential row per request, the noise is keyed by position, so every position gets its own race
and one call suffices. The round row takes every uniform from the round's rng (genuine noise: the
race is the engine's own sample).

Loading: ``vllm_loading.load_vllm``, the loader V1's rows use, with no stand-in of its own: the
file and the same-wheel modules it imports (gumbel.py, fly.py, ``vllm.triton_utils``, the
watermark draw and its philox PRF, ``vllm.envs``...) run from the wheel as they are, and only what
the loader's generic rule names is stood in for (here vLLM's config machinery, ``vllm.config``;
vLLM's logger and platform by the overrides that hold for every release). The loaded modules are
kept for the process (``loaded_runner_v2``), so the four rows load the wheel once.
"""

from __future__ import annotations

import contextlib

from . import pins
from .engine_probes import kernel_probe, round_probe
from .engine_row import Built, Engine
from .row_budgets import CHAIN_FIRST_CASES, NEEDS_TRITON, SLOW_ROUND, TRITON_KERNEL, stopping_at_first

SEED_BASE = 0x5EED
"""Request b's seed is ``SEED_BASE + b``."""
SYNTHETIC_RATES = 0.7
"""The synthetic row's conditional acceptance rate at every position."""
FLY_WINDOW = 1
"""The FLy row's ``fly_window_size`` (vLLM has no default; at most k - 1 positions defer)."""
MODULES = (
    "vllm.v1.worker.gpu.sample.gumbel",
    "vllm.v1.spec_decode.fly",
    "vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils",
)
"""The wheel's modules the rows use: the Gumbel noise (whose draws are answered), FLy, and the
sampler loaded (``pins.VLLM_RUNNER_V2_FILES``; ``loaded_runner_v2`` brings in the rest)."""


def loaded_runner_v2(download: bool = True):
    """``vllm_loading.load_vllm`` of the runner-v2 sampler at ``pins.VLLM_RUNNER_V2`` (the file and
    its same-wheel imports, the generic stand-in rule only), loaded once per process;
    ``download`` False: the cache only (loader.Unavailable when the wheel is not there)."""
    from . import loader
    from .vllm_loading import load_vllm

    key = (str(loader.cache_root()), pins.VLLM_RUNNER_V2[1])
    if key not in LOADED:
        loader.ensure_triton(install=download)
        LOADED[key] = load_vllm(MODULES[-1], pins.VLLM_RUNNER_V2[1], download)
    return LOADED[key]


LOADED: dict = {}
"""(cache root, version) -> the ``wheel_import.Loaded`` runner-v2 sampler (``loaded_runner_v2``)."""


def load_runner_v2(download: bool = True):
    """(rejection_sampler_utils module, gumbel module) from the wheel, interpreted
    (``loaded_runner_v2``)."""
    loaded = loaded_runner_v2(download)
    return loaded.module, loaded.modules[MODULES[0]]


FED = (
    "target_logits",
    "draft_logits",
    "draft_sampled",
    "cu_num_logits",
    "pos",
    "idx_mapping",
    "expanded_idx_mapping",
    "expanded_local_pos",
    "temperature",
    "seed",
    "num_speculative_steps",
    "synthetic_conditional_rates",
    "use_block_verification",
    "fly_window_size",
)
"""The parameters the wrappers pass by name: logits (log p, log q), temperature 1, a seed per request."""


def check_contract(module, gumbel, kernel=None) -> None:
    """The loaded ``rejection_sample`` takes what the wrappers feed (``FED``, by name) and gives
    the known answers on two k = 1, V = 3 inputs: a draft with p(x) = 1 is accepted and the bonus
    of a one-hot p_1 follows it ([0, 2]); a draft with p(x) = 0 is rejected and the residual's one
    token is emitted ([1]). loader.Unavailable (one line) naming the mismatch otherwise, so a
    wrapper feeding the wrong quantity is an adapter error, never a verdict. ``kernel``: the
    wrapper checked (default ``uniforms_kernel(module, gumbel)``)."""
    import inspect

    import numpy as np

    from .loader import Unavailable

    params = inspect.signature(module.rejection_sample).parameters
    missing = [name for name in FED if name not in params]
    if missing:
        raise Unavailable(
            f"vllm {pins.VLLM_RUNNER_V2[1]} runner-v2 rejection_sample takes ({', '.join(params)}); "
            f"this row feeds {', '.join(missing)}, which it does not take"
        )
    kernel = kernel or uniforms_kernel(module, gumbel)
    ids = np.zeros((2, 1), np.int64)
    q = np.array([[[0.5, 0.5, 0.0]], [[0.5, 0.5, 0.0]]], np.float32)
    p = np.array([[[1, 0, 0], [0, 0, 1]], [[0, 1, 0], [0, 0, 1]]], np.float32)
    out, _ = kernel(ids, q, p, np.full((2, 2), 0.5, np.float32))
    if out.tolist() != [[0, 2], [1, -1]]:
        raise Unavailable(
            "runner-v2 rejection_sample fed log p / log q at temperature 1 gives "
            f"{out.tolist()} where the rule gives [[0, 2], [1, -1]]: the row's contract does not hold"
        )


def call_inputs(batch_ids, q, p, counts, temperature: float = 1.0, seeds=None, logits: bool = True) -> dict:
    """``rejection_sample``'s tensors for a batch: ``batch_ids`` [B, k] (-1 padded), ``q`` [B, k,
    V] and ``p`` [B, k + 1, V] probabilities, ``counts`` [B] drafts per row. Request b's logit
    rows are p_0..p_{k_b}, its positions 0..k_b, its seed ``seeds[b]`` (default SEED_BASE + b).
    ``logits`` False feeds the probabilities themselves (a deliberately wrong wrapper's)."""
    import torch

    b, k, v = q.shape
    counts = [int(c) for c in counts]
    rows, sampled, pos, owner = [], [], [], []
    cu = [0]
    for r, kb in enumerate(counts):
        rows.append(p[r, : kb + 1])
        sampled += [0] + [int(x) for x in batch_ids[r, :kb]]
        pos += list(range(kb + 1))
        owner += [r] * (kb + 1)
        cu.append(cu[-1] + kb + 1)
    fed = torch.log if logits else (lambda x: x)
    with torch.no_grad():
        target = fed(torch.cat(rows).to(torch.float32)).contiguous()
        draft = fed(q.to(torch.float32)).contiguous() if k else torch.zeros((b, 1, v))
    seeds = [SEED_BASE + r for r in range(b)] if seeds is None else list(seeds)
    return dict(
        target_logits=target,
        draft_logits=draft,
        draft_sampled=torch.tensor(sampled, dtype=torch.int64),
        cu_num_logits=torch.tensor(cu, dtype=torch.int32),
        pos=torch.tensor(pos, dtype=torch.int64),
        idx_mapping=torch.arange(b, dtype=torch.int32),
        expanded_idx_mapping=torch.tensor(owner, dtype=torch.int32),
        expanded_local_pos=torch.tensor(pos, dtype=torch.int32),
        temperature=torch.full((b,), float(temperature), dtype=torch.float32),
        seed=torch.tensor(seeds, dtype=torch.int64),
        num_speculative_steps=max(k, 1),
    )


def coin_table(seeds, counts, coins, block: bool) -> dict:
    """{(seed the kernel passes to tl.rand, position): coin}: request r's draft i at position i
    reads ``coins[r][i]``; block mode's seed is ``seed ^ (i << 32)`` (``spec_step_seed``)."""
    table = {}
    for r, (seed, kb) in enumerate(zip(seeds, counts)):
        for i in range(int(kb)):
            table[(int(seed) ^ (i << 32) if block else int(seed), i)] = float(coins[r][i])
    return table


def answer_coins(table: dict):
    """``tl.rand``'s answer from ``coin_table``; RuntimeError for a draw not laid out."""
    import numpy as np

    def rand(seeds, offsets):
        seeds = np.broadcast_to(seeds, offsets.shape)
        try:
            return np.array([table[(int(s), int(o))] for s, o in zip(seeds, offsets)], np.float32)
        except KeyError as exc:
            raise RuntimeError(f"tl.rand at (seed, offset) {exc} that the wrapper laid no coin out for") from None

    return rand


def answer_tokens(table: dict):
    """``murmur3_uniform32(seed, pos, token ids)``'s answer: the row ``table[(seed, pos)]`` at the
    token ids; RuntimeError for a (seed, position) not laid out."""
    import numpy as np

    def uniform(seed, pos, offset):
        key = (int(seed.reshape(-1)[0]), int(pos.reshape(-1)[0]))
        if key not in table:
            raise RuntimeError(f"murmur3_uniform32 at (seed, pos) {key} that the wrapper laid no noise out for")
        row = table[key]
        return row[np.clip(offset.astype(np.int64), 0, len(row) - 1)].astype(np.float32)

    return uniform


def gumbel_uniforms(E):
    """Per-token uniforms u = 1 - exp(-E) (float32, within murmur3_uniform32's range (0, 1)), so
    that the engine's g = -log(-log(1 - u)) is -log E: its race is then argmax(w_engine / E)."""
    import numpy as np

    u = -np.expm1(-np.asarray(E, np.float64))
    return np.clip(u, 2.0**-33, 1.0 - 2.0**-24).astype(np.float32)


def race_rows(w, final):
    """The exponential rows E [n, V] whose race over ``w`` [n, V] picks the token ``final`` [n]
    selects by inverse CDF (``vllm.race_noise``'s construction): E = w on w's support, +inf off
    it, w / (1 + RACE_MARGIN) at the chosen token; an all-zero row gets E = 1 but at the id
    ``final`` selects uniformly."""
    import torch

    from .vllm import RACE_MARGIN, inverse_cdf

    chosen = inverse_cdf(w, final)
    noise = torch.where(w > 0, w, torch.full_like(w, float("inf")))
    rows = torch.arange(w.shape[0])
    noise[rows, chosen] = w[rows, chosen] / (1 + RACE_MARGIN)
    empty = w.sum(dim=1) == 0
    if bool(empty.any()):
        v = w.shape[1]
        uniform_id = (final[empty].double() * v).long().clamp(max=v - 1)
        noise[empty] = 1.0
        noise[torch.nonzero(empty).squeeze(1), uniform_id] = 1.0 / (1 + RACE_MARGIN)
    return noise


def noise_table(batch, seeds) -> dict:
    """{(seed, position): per-token uniforms} for every position j <= k_b of every request: the
    race over max(p_j - q_j, 0) at a draft position, over p_{k_b} at the bonus position, each
    picking the final uniform's inverse-CDF token (``race_rows``)."""
    import torch

    b, k, _ = batch.shape
    final = batch.uniforms[:, -1]
    table = {}
    for j in range(k + 1):
        at = min(j, k - 1)
        residual = torch.clamp(batch.target_probs[:, j] - batch.draft_probs[:, at], min=0) if k else None
        bonus = j == batch.counts
        w = torch.where(bonus[:, None], batch.target_probs[:, j], residual) if k else batch.target_probs[:, j]
        E = race_rows(w.double(), final)
        for r in range(b):
            if j <= int(batch.counts[r]):
                table[(int(seeds[r]), j)] = gumbel_uniforms(E[r].numpy())
    return table


def controlled_call(module, gumbel, inputs: dict, coins: dict, noise: dict, **options):
    """One ``rejection_sample`` call with its coins and Gumbel uniforms answered from ``coins`` /
    ``noise`` and libdevice shimmed; (sampled [B, k + 1] with -1 after each row's tokens, number
    of accepted drafts [B]), int64."""
    import numpy as np
    import torch

    from ..adapters.kernels.triton_interpreter import CachedLanguagePatch, ControlledTritonDraws, libdevice_shim

    generators = {(gumbel, "murmur3_uniform32"): answer_tokens(noise), (gumbel, "murmur3_uniform64"): None}
    draws = ControlledTritonDraws(answer_coins(coins), generators)  # use_fp64's draw: refused
    active = next((loaded for loaded in LOADED.values() if loaded.module is module), None)
    with draws, libdevice_shim(), CachedLanguagePatch(), np.errstate(invalid="ignore", divide="ignore"):
        with active.active() if active is not None else contextlib.nullcontext():
            sampled, num_sampled = module.rejection_sample(**inputs, **options)
    n = num_sampled.to(torch.int64)
    cols = torch.arange(sampled.shape[1])
    return torch.where(cols[None] < n[:, None], sampled, torch.full_like(sampled, -1)), n - 1


def uniforms_kernel(
    module,
    gumbel,
    temperature: float = 1.0,
    seeds_of=None,
    synthetic_rate: float | None = None,
    logits: bool = True,
    **options,
):
    """Canonical kernel with explicit uniforms around ``rejection_sample`` (module docstring):
    ``(draft_ids, draft_probs, target_probs, uniforms) -> (output_ids, num_accepted)``. The
    coins are the uniforms' first k_b columns; the Gumbel uniforms at each position race to the
    final uniform's inverse-CDF token. ``options``: ``rejection_sample``'s keywords
    (``use_block_verification``, ``fly_window_size``); ``synthetic_rate``: synthetic mode with that
    conditional rate at every position (``synthetic_conditional_rates``, one per speculative step);
    ``temperature``, ``seeds_of`` (B -> the seeds passed) and ``logits`` (False: probabilities
    fed as logits) exist for the deliberately wrong wrappers of the tests."""
    import torch

    from ..adapters.kernels import check_canonical_inputs, finish_canonical

    block = bool(options.get("use_block_verification"))

    def kernel(draft_ids, draft_probs, target_probs, uniforms):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, uniforms)
        if batch.uniforms is None:
            raise ValueError("uniforms: this kernel takes explicit uniforms [B, k + 1], not a generator")
        b = batch.draft_ids.shape[0]
        own = [SEED_BASE + r for r in range(b)]
        passed = own if seeds_of is None else list(seeds_of(b))
        inputs = call_inputs(
            batch.draft_ids, batch.draft_probs, batch.target_probs, batch.counts, temperature, passed, logits
        )
        coins = coin_table(own, batch.counts.tolist(), batch.uniforms.tolist(), block)
        extra = dict(options)
        if synthetic_rate is not None:
            steps = inputs["num_speculative_steps"]
            extra["synthetic_conditional_rates"] = torch.full((steps,), float(synthetic_rate), dtype=torch.float32)
        out, acc = controlled_call(module, gumbel, inputs, coins, noise_table(batch, own), **extra)
        full = out.new_full((b, batch.draft_ids.shape[1] + 1), -1)
        full[:, : out.shape[1]] = out[:, : full.shape[1]]
        return finish_canonical(batch, full, acc)

    return kernel


def runner_v2_round(module, gumbel, **options):
    """A round sampler around ``rejection_sample`` (B = 1; ``options`` as ``uniforms_kernel``'s):
    k drafts from q, then the coins (float32 grid) and a Gumbel uniform per position and token
    from the round's rng, so the verdict is on the engine's own law (its marginal law, judged by
    statistics). ``speculative_step.verify(drafts, ps, qs, coin, seed)``: the call on given
    drafts with every coin ``coin`` (None: drawn) and noise from ``seed``, for the probes."""
    import numpy as np
    import torch

    from .rounds import GRID, draft, grid_uniforms, targets

    block = bool(options.get("use_block_verification"))

    def run(drafts, ps, qs, coins, rng) -> list[int]:
        k, v = len(drafts), len(ps[0])
        ids = torch.tensor([drafts if k else []], dtype=torch.int64).reshape(1, k)
        q = torch.tensor(np.asarray(qs, np.float64).reshape(1, k, v), dtype=torch.float32)
        p = torch.tensor(np.asarray(ps, np.float64)[None], dtype=torch.float32)
        inputs = call_inputs(ids, q, p, [k])
        seed = SEED_BASE
        table = coin_table([seed], [k], [coins], block)
        u = (rng.integers(0, GRID, size=(k + 1, v)) + 0.5) / GRID
        noise = {(seed, j): u[j].astype(np.float32) for j in range(k + 1)}
        out, acc = controlled_call(module, gumbel, inputs, table, noise, **options)
        return [int(t) for t in out[0, : int(acc[0]) + 1]]

    def verify(drafts, ps, qs, coin=None, seed: int = 0):
        rng = np.random.default_rng(seed)
        coins = grid_uniforms(rng, len(drafts)) if coin is None else [float(coin)] * len(drafts)
        return run(list(drafts), ps, qs, coins, rng)

    def speculative_step(p_fn, q_fn, prefix, k, rng):
        prefix = tuple(prefix)
        drafts, qs = draft(q_fn, prefix, k, rng)
        return run(drafts, targets(p_fn, prefix, drafts), qs, grid_uniforms(rng, k), rng)

    speculative_step.verify = verify
    return speculative_step


# ----------------------------------------------------------------------------- rows

RANDOMNESS = (
    "tl.rand(seed, pos) coins and murmur3_uniform32(seed, pos, token) Gumbel noise drawn inside the Triton "
    "kernels, here answered by ControlledTritonDraws"
)


def _kernel_row(download: bool = True, **options):
    module, gumbel = load_runner_v2(download=download)
    check_contract(module, gumbel)
    kernel = uniforms_kernel(module, gumbel, **options)
    return Built(
        kernel,
        kernel_probe(kernel, explicit=True),
        "controlled uniforms: the kernels' tl.rand and murmur3 draws answered from the explicit uniforms "
        "(adapters.kernels.triton_interpreter.ControlledTritonDraws)",
    )


def _block_round(download: bool = True):
    module, gumbel = load_runner_v2(download=download)
    check_contract(module, gumbel)
    step = runner_v2_round(module, gumbel, use_block_verification=True)
    return Built(step, round_probe(step.verify), "the coin forced through ControlledTritonDraws; noise from the seed")


VLLM_RUNNER_V2_ROWS = [
    Engine(
        "vllm-v2-rejection",
        *pins.VLLM_RUNNER_V2,
        "rejection_sample (v1/worker/gpu/spec_decode/rejection_sampler_utils.py, model runner v2, Triton), "
        "standard: log p(x) > log u + log q(x), Gumbel race over log max(p - q, 0)",
        "kernel",
        "exact",
        RANDOMNESS + ": the coins, and per-token uniforms whose race picks the final uniform's inverse-CDF token "
        "of max(p - q, 0) at each position (margin 2^-8)",
        lambda download=True: _kernel_row(download),
        TRITON_KERNEL,
        files=pins.VLLM_RUNNER_V2_FILES,
        needs=NEEDS_TRITON,
    ),
    Engine(
        "vllm-v2-block-round",
        *pins.VLLM_RUNNER_V2,
        "rejection_sample(use_block_verification=True) (model runner v2, Triton), marginal law (round wrapper, B = 1)",
        "round",
        "exact",
        RANDOMNESS + ": coins and noise from the round's rng",
        _block_round,
        SLOW_ROUND,
        files=pins.VLLM_RUNNER_V2_FILES,
        needs=NEEDS_TRITON,
    ),
    Engine(
        "vllm-v2-synthetic",
        *pins.VLLM_RUNNER_V2,
        f"rejection_sample(synthetic_conditional_rates={SYNTHETIC_RATES} per position) (model runner v2): "
        "accept iff u < rate, whatever p and q",
        "kernel",
        "lossy",
        RANDOMNESS + ", as vllm-v2-rejection",
        lambda download=True: _kernel_row(download, synthetic_rate=SYNTHETIC_RATES),
        stopping_at_first(TRITON_KERNEL),
        files=pins.VLLM_RUNNER_V2_FILES,
        needs=NEEDS_TRITON,
    ),
    Engine(
        "vllm-v2-fly",
        *pins.VLLM_RUNNER_V2,
        f"rejection_sample(fly_window_size={FLY_WINDOW}) (model runner v2, FLy): a high-entropy rejection "
        "deferred when the next drafts are accepted",
        "kernel",
        "lossy",
        RANDOMNESS + ", as vllm-v2-rejection",
        lambda download=True: _kernel_row(download, fly_window_size=FLY_WINDOW),
        stopping_at_first(TRITON_KERNEL, CHAIN_FIRST_CASES),
        files=pins.VLLM_RUNNER_V2_FILES,
        needs=NEEDS_TRITON,
    ),
]
