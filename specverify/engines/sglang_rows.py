"""SGLang's rows (pinned ``pins.SGLANG``): its Triton chain kernel token-wise, with block
verification as a kernel (law given drafts: a different rule) and as a round (marginal law)."""

from __future__ import annotations

from types import SimpleNamespace

from . import pins
from .engine_probes import kernel_probe
from .engine_row import Built, Engine
from .row_budgets import CHAIN_FIRST_CASES, FAST_KERNEL, NEEDS_TRITON, SLOW_ROUND, TRITON_KERNEL, stopping_at_first


def _sglang(block: bool, download: bool = True):
    from functools import partial

    from ..adapters.kernels import from_sglang_chain
    from . import others, rounds

    module = others.load_sglang(download=download)
    fn = module.chain_speculative_sampling_triton
    if block:
        step = rounds.sglang_chain_round(fn, block_verification=True)
        kernel = from_sglang_chain(partial(fn, block_verification=True))
        return Built(step, kernel_probe(kernel, explicit=True), "explicit uniforms (inputs)")
    kernel = from_sglang_chain(fn)

    def chain_kernel(draft_ids, draft_probs, target_probs, uniforms):
        return kernel(draft_ids, draft_probs, target_probs, uniforms)

    return Built(chain_kernel, kernel_probe(chain_kernel, explicit=True), "explicit uniforms (inputs)")


def _sglang_block_kernel(download: bool = True):
    from functools import partial

    from ..adapters.kernels import from_sglang_chain
    from . import others

    module = others.load_sglang(download=download)
    kernel = from_sglang_chain(partial(module.chain_speculative_sampling_triton, block_verification=True))

    def block_kernel(draft_ids, draft_probs, target_probs, uniforms):
        return kernel(draft_ids, draft_probs, target_probs, uniforms)

    return Built(block_kernel, kernel_probe(block_kernel, explicit=True), "explicit uniforms (inputs)")


SGLANG_ROWS = [
    Engine(
        "sglang-chain",
        *pins.SGLANG[:2],
        "chain_speculative_sampling_triton (kernels/ops/speculative/reject_sampling.py), token-wise",
        "kernel",
        "exact",
        "the caller's uniforms (uniform_samples, uniform_samples_for_final_sampling)",
        lambda download=True: _sglang(False, download),
        TRITON_KERNEL,
        files=pins.SGLANG[2],
        needs=NEEDS_TRITON,
    ),
    Engine(
        "sglang-block-kernel",
        *pins.SGLANG[:2],
        "chain_speculative_sampling_triton(block_verification=True), law given drafts",
        "kernel",
        "different-rule",
        "the caller's uniforms; one coin per position, reused for the pre-check and the acceptance test",
        _sglang_block_kernel,
        stopping_at_first(TRITON_KERNEL, CHAIN_FIRST_CASES),
        files=pins.SGLANG[2],
        needs=NEEDS_TRITON,
    ),
    Engine(
        "sglang-block-round",
        *pins.SGLANG[:2],
        "chain_speculative_sampling_triton(block_verification=True), marginal law (round wrapper, B = 1)",
        "round",
        "exact",
        "the caller's uniforms, drawn from the round's rng",
        lambda download=True: _sglang(True, download),
        SLOW_ROUND,
        files=pins.SGLANG[2],
        needs=NEEDS_TRITON,
    ),
]


# ----------------------------------------------------------------------------- the DSpark blockwise rule (torch)

BLOCKWISE_PACKAGE, BLOCKWISE_VERSION, BLOCKWISE_FILES = pins.SGLANG_BLOCKWISE
BLOCKWISE = "sglang.kernels.ops.speculative.dspark.blockwise_rejection"
DISPATCH = "sglang.kernels.ops.speculative.dspark.dispatch"
BLOCKWISE_FEEDS = "logits (log p, log q) at temperature 1, candidates [B, k + 1] with a root column"
"""What the blockwise wrapper feeds ``blockwise_rejection_torch``, in words."""
BLOCKWISE_PARAMETERS = (
    "candidates",
    "target_logits",
    "draft_logits",
    "target_temperatures",
    "draft_temperatures",
    "noise",
)
"""Its keyword parameters the wrapper is written for (checked at build: ``signatures``)."""
BLOCKWISE_NEEDS = (
    "torch",
    "the triton package importable (the file defines its Triton kernels at import; only its torch function runs)",
)
"""What the blockwise row needs: torch, and triton only to import the file (nothing is interpreted)."""
CHAIN_FILE = "sglang/kernels/ops/speculative/reject_sampling.py"
CHAIN_UNUSED = ("threshold_single", "threshold_acc")
"""Parameters ``chain_speculative_sampling_triton`` takes and never reads (sglang 0.5.23: neither
reaches ``speculative_sampling_classic_kernel``), so the chain row's thresholds cannot make it
lossy; ``unused_parameters`` reads it from the wheel."""


class Struct:
    """Stand-in for ``msgspec.Struct`` (``RejectionNoise``' base): class keywords accepted
    (``frozen=True``), fields set from keyword arguments. msgspec is a serialisation library
    the rejection code never uses beyond this container."""

    def __init_subclass__(cls, **options):
        super().__init_subclass__()

    def __init__(self, **fields):
        for name, value in fields.items():
            object.__setattr__(self, name, value)


def load_blockwise(root=None, download: bool = True):
    """SGLang's ``dspark/blockwise_rejection.py`` module (its Triton kernels are defined, not run:
    the wrapper calls ``blockwise_rejection_torch``), with the same-wheel ``dispatch`` loaded for
    real and ``msgspec`` stood in (``Struct``). Triton must import (it is installed into the cache
    when missing and ``download``)."""
    from . import loader

    loader.ensure_triton(install=download)
    root = root or loader.fetch(BLOCKWISE_PACKAGE, BLOCKWISE_VERSION, BLOCKWISE_FILES, download)
    std = {"msgspec": loader.standin("msgspec", "stand-in: Struct only (a plain container)", Struct=Struct)}
    std[DISPATCH] = loader.load(DISPATCH, root, std)
    return loader.load(BLOCKWISE, root, std)


def blockwise_draws(coins, noise):
    """A mode for one ``blockwise_rejection_torch`` call: its first ``torch.rand`` ([B, k], the coins)
    returns ``coins``; its second ([B, V], the Gumbel uniforms U of ``-log(-log(U))``) returns a
    placeholder whose ``torch.log`` is answered exactly with ``-noise`` (log U = -E for the race's
    exponential row E, ``vllm.race_noise``), so argmax(residual + Gumbel) = argmax(log w - log E)
    is the race of ``vllm``'s docstring without float32 U losing E's low bits; any other draw
    raises RuntimeError naming it. Returns the ``TorchFunctionMode`` (a context manager; torch is
    imported here, not when the table is listed)."""
    import torch
    from torch.overrides import TorchFunctionMode

    from .vllm import RANDOM_DRAWS

    class Mode(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.answered: list[str] = []
            self.placeholder = None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.rand and len(self.answered) < 2:
                want = coins if not self.answered else noise
                size = kwargs.get("size", args[0] if len(args) == 1 else args)
                if torch.Size(size) != want.shape:
                    raise RuntimeError(f"torch.rand of size {list(size)}, expected {list(want.shape)}")
                self.answered.append("rand")
                if len(self.answered) == 1:
                    return coins.clone()
                self.placeholder = torch.exp(-noise)
                return self.placeholder
            if func is torch.log and self.placeholder is not None and args and args[0] is self.placeholder:
                self.answered.append("log")
                return -noise.clone()
            if func in RANDOM_DRAWS:
                raise RuntimeError(f"the engine drew {getattr(func, '__name__', func)} beyond the controlled uniforms")
            return func(*args, **kwargs)

    return Mode()


def blockwise_race_noise(batch, position, final):
    """``vllm.race_noise`` at each row's ``position``, except that a row whose every draft is
    accepted (``position`` = k_b) races over its bonus row p_{k_b}: the blockwise rule samples
    the bonus token with the same Gumbel row, where vLLM V1 takes it from the caller."""
    import torch

    from .vllm import RACE_MARGIN, inverse_cdf, race_noise

    noise = race_noise(batch, position, final)
    done = torch.nonzero(position >= batch.counts).squeeze(1)
    if len(done):
        w = batch.target_probs[done, batch.counts[done]]
        chosen = inverse_cdf(w, final[done])
        e = torch.where(w > 0, w, torch.full_like(w, float("inf")))
        e[torch.arange(len(done)), chosen] = w[torch.arange(len(done)), chosen] / (1 + RACE_MARGIN)
        noise[done] = e
    return noise


def blockwise_uniforms_kernel(blockwise_rejection_torch, wrong_gumbel: bool = False):
    """Canonical kernel with explicit uniforms around ``blockwise_rejection_torch`` (keyword
    arguments: ``candidates`` [B, k + 1] with a root column 0, ``target_logits`` [B (k + 1), V],
    ``draft_logits`` [B, k, V], temperatures 1, ``noise`` a key and counter; returns (accepted,
    emitted token, trim) per row). Its coins are the canonical ones; its Gumbel row makes the
    race at its own first rejection pick the final uniform's inverse-CDF token of max(p - q, 0)
    (p when all are accepted): the rule's first rejection is tried, and the call is made again
    for rows where the engine's differs. Rows are grouped by k_b. ``wrong_gumbel`` True is a
    deliberately wrong wrapper (the Gumbel row of the position after the engine's), for tests."""
    import torch

    from ..adapters.kernels import by_draft_count, check_canonical_inputs, finish_canonical
    from .vllm import race_where_rejected, rule_position

    def uniforms_kernel(draft_ids, draft_probs, target_probs, uniforms):
        batch = check_canonical_inputs(draft_ids, draft_probs, target_probs, uniforms)
        if batch.uniforms is None:
            raise ValueError("uniforms: this kernel takes explicit uniforms [B, k + 1], not a generator")
        final, guess = batch.uniforms[:, -1], rule_position(batch)
        V = batch.target_probs.shape[2]

        def call(rows, kb, position):
            n = len(rows)
            candidates = torch.cat([torch.zeros(n, 1, dtype=torch.int64), batch.draft_ids[rows, :kb]], 1)
            logits = torch.log(batch.target_probs[rows, : kb + 1]).reshape(n * (kb + 1), V).contiguous()
            noise = blockwise_race_noise(batch, (position + 1) if wrong_gumbel else position, final)[rows]
            counter = torch.zeros(1, dtype=torch.int64)
            with blockwise_draws(batch.uniforms[rows, :kb].contiguous(), noise.contiguous()):
                accepted, token, _ = blockwise_rejection_torch(
                    candidates=candidates,
                    target_logits=logits,
                    draft_logits=torch.log(batch.draft_probs[rows, :kb]).contiguous(),
                    target_temperatures=torch.ones(n),
                    draft_temperatures=torch.ones(n),
                    noise=SimpleNamespace(key=0, counter=counter),
                )
            accepted = torch.as_tensor(accepted).to(torch.int64)
            out = torch.full((n, kb + 1), -1, dtype=torch.int64)
            keep = torch.arange(kb + 1)[None] < accepted[:, None]
            out[:, :kb][keep[:, :kb]] = batch.draft_ids[rows, :kb][keep[:, :kb]]
            out[torch.arange(n), accepted] = torch.as_tensor(token).to(torch.int64)
            return out, accepted

        def run(rows, kb):
            if kb == 0:  # the blockwise rule needs a draft: a k_b = 0 row emits p_0 by inverse CDF
                from .vllm import inverse_cdf

                return inverse_cdf(batch.target_probs[rows, 0], final[rows]).unsqueeze(1), torch.zeros(
                    len(rows), dtype=torch.int64
                )
            return race_where_rejected(call, rows, kb, guess)

        return finish_canonical(batch, *by_draft_count(batch, run))

    return uniforms_kernel


def unused_parameters(path, function: str) -> list[str]:
    """The parameters of ``function`` in the Python file ``path`` that its body never reads."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(path).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
            used = {n.id for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            return [p for p in params if p not in used]
    raise ValueError(f"function: {function} is not defined in {path}")


def _blockwise(download: bool = True):
    from .signatures import check_parameters

    module = load_blockwise(download=download)
    label = f"sglang {BLOCKWISE_VERSION} blockwise_rejection_torch"
    check_parameters(module.blockwise_rejection_torch, BLOCKWISE_PARAMETERS, label, BLOCKWISE_FEEDS)
    kernel = blockwise_uniforms_kernel(module.blockwise_rejection_torch)
    return Built(
        kernel,
        kernel_probe(kernel, explicit=True),
        "controlled uniforms: the coins and the Gumbel row's log answered from the explicit uniforms "
        "(sglang_rows.blockwise_draws)",
    )


SGLANG_ROWS.append(
    Engine(
        "sglang-blockwise-torch",
        BLOCKWISE_PACKAGE,
        BLOCKWISE_VERSION,
        "blockwise_rejection_torch (kernels/ops/speculative/dspark/blockwise_rejection.py, torch; token-wise "
        f"rule in log space); feeds {BLOCKWISE_FEEDS}",
        "kernel",
        "exact",
        "counter-based: a torch.Generator seeded from (key, counter) draws the coins [B, k] and Gumbel "
        "uniforms [B, V]; here the coins are the explicit uniforms and the Gumbel row's log answers the race "
        "(margin 2^-8; vllm.race_noise)",
        _blockwise,
        FAST_KERNEL,
        files=pins.SGLANG_BLOCKWISE[2],
        needs=BLOCKWISE_NEEDS,
    )
)

SGLANG_ROWS.append(
    Engine(
        "sglang-tree-target-only",
        *pins.SGLANG[:2],
        "tree_speculative_sampling_target_only / verify_tree_greedy (CUDA JIT)",
        "kernel",
        "exact",
        "the caller's uniforms (coins, final uniform)",
        skip="sglang-tree-target-only: CUDA only (a CUDA JIT kernel), not run here; the GPU stage does not run "
        "it yet either (ENGINES-NOTES: no duplicate-sibling guard, threshold_single / threshold_acc < 1 lossy "
        "by design)",
        needs=("CUDA (not run on a CPU machine)",),
    )
)
