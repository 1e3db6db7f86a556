"""MLX-LM's row (pinned ``pins.MLX_LM``, run with ``pins.MLX``): the speculative loop of mlx-lm
0.32.2, ``mlx_lm/generate.py : speculative_generate_step(prompt, model, draft_model, *,
num_draft_tokens, max_tokens, sampler, ...)``, one round of it judged as a round sampler.

What the loop does (generate.py, the ``while True`` body): the draft model samples k tokens with
``sampler``; the target model is run once on them and ``sampler`` draws one target token at
each of the k + 1 positions; the drafts are accepted while each equals the target's token at
its position, and the first target token that differs (or the bonus) is emitted. Every emitted
token is a draw from the target given what precedes it, so the output law is the target's
(exact), but a draft is kept only when a fresh target draw happens to equal it: acceptance
sum_x p(x) q(x) per position, never more than the rejection rule's sum_x min(p(x), q(x)) (lower
tokens per round: reported as efficiency, not a failure; cf. lablup/mlxcel#902).

How the row runs it (``mlx_round``): the models are ``ChainModel``: an mlx-lm model in the
interface the loop calls (``model(tokens[None], cache=cache)`` -> logits [1, n, V], ``layers``
for ``make_prompt_cache``, the real ``KVCache`` trimmed by the loop), whose logits are log p_fn
and log q_fn of the round battery's models at each position, read back from the cache's offset
(so the loop's rewinds are obeyed). Budget: ``row_budgets.SLOW_ROUND`` (a round is a few small mlx calls,
about 25 ms on a shared core; mlx's key is not followed by the enumerator, so every case is
judged by statistics). The sampler is mlx-lm's own ``make_sampler(temp=1.0)``
(``mx.random.categorical``), mlx's global key seeded from the round's rng before each round.
The loop runs with ``num_draft_tokens = k`` and ``max_tokens = k + 1``, a BOS token 0 before the
prefix, and is closed after the first token that is not a draft (the round's end). Everything
of the round is mlx-lm's code on mlx; nothing is torch.

Install: ``mlx==0.32.4`` and ``mlx-cpu==0.32.4`` (the CPU backend's libraries; on Linux neither
imports alone) go into ``<cache>/site`` with ``pip --no-deps`` (``ensure_mlx``), as
``loader.ensure_triton`` installs triton. mlx-lm is unpacked from its wheel (all its ``.py``
files; ``generate.py`` imports its siblings, which load for real); its package ``__init__`` (which
imports the converter and the server) is not run. Stand-in: ``transformers`` (and its
``tokenization_utils_base``), with only the tokenizer class names mlx-lm's ``generate.py`` and
``tokenizer_utils.py`` import (``transformers_standins``): the loop never tokenizes, and importing
transformers costs 10-40 s here.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import zipfile

import numpy as np

from . import loader, pins
from .engine_row import Built, Engine
from .row_budgets import SLOW_ROUND

PACKAGE, VERSION, FILES = pins.MLX_LM
MLX_VERSION = pins.MLX[1]
BOS = 0
"""The token before the prefix: the loop needs a non-empty prompt; the models ignore it."""
FEEDS = "log p and log q per position (ChainModel), mlx-lm's make_sampler(temp=1.0), k drafts, max_tokens k + 1"
"""What the MLX-LM wrapper feeds the loop, in words."""
PARAMETERS = ("prompt", "model", "draft_model", "stream", "num_draft_tokens", "max_tokens", "sampler")
"""``speculative_generate_step``'s parameters the wrapper is written for (checked at build)."""


def ensure_mlx(install: bool = True) -> str:
    """``mlx.core`` importable (``<cache>/site`` on ``sys.path``); its version. Installs
    ``mlx`` and ``mlx-cpu`` of ``pins.MLX`` there (no deps) when missing and ``install``, else
    loader.Unavailable (one line)."""
    site = loader.cache_root() / "site"
    if site.is_dir() and str(site) not in sys.path:
        sys.path.append(str(site))
    try:
        import mlx.core as mx
    except ImportError as first:
        if not install:
            raise loader.Unavailable(
                f"mlx is not importable ({first}) and installing it is off; run without --offline to install "
                f"mlx=={MLX_VERSION} and mlx-cpu=={MLX_VERSION} into the cache"
            ) from None
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(loader.cache_dir() / "site")]
        cmd += [f"mlx=={MLX_VERSION}", f"mlx-cpu=={MLX_VERSION}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise loader.Unavailable(f"mlx=={MLX_VERSION}: pip install failed ({exc})") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            raise loader.Unavailable(f"mlx=={MLX_VERSION}: pip install failed ({last})") from None
        if str(site) not in sys.path:
            sys.path.append(str(site))
        importlib.invalidate_caches()
        try:
            import mlx.core as mx
        except ImportError as exc:
            raise loader.Unavailable(f"mlx does not import after installing it: {exc}") from None
    return mx.__version__


class Tokenizer:
    """Stand-in for the transformers tokenizer classes mlx-lm names at import
    (``PreTrainedTokenizer``, ``PreTrainedTokenizerFast``, ``PreTrainedTokenizerBase``,
    ``AutoTokenizer``): the loop takes token ids and never touches a tokenizer."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("stand-in: mlx-lm's tokenizer is not used by the speculative loop")

    from_pretrained = classmethod(__init__)

    @classmethod
    def register(cls, *args, **kwargs) -> None:
        """``AutoTokenizer.register`` (tokenizer_utils.py registers its newline tokenizer at
        import): nothing to register with, as no tokenizer is ever built."""


def transformers_standins() -> dict:
    """``transformers`` and ``transformers.tokenization_utils_base`` as stand-ins holding only the
    tokenizer class names mlx-lm imports (``Tokenizer``): importing transformers itself takes
    10-40 s here and nothing of it runs in the loop."""
    names = ("PreTrainedTokenizer", "PreTrainedTokenizerFast", "PreTrainedTokenizerBase", "AutoTokenizer")
    doc = "stand-in: tokenizer class names only (the speculative loop takes token ids)"
    return {
        "transformers": loader.standin("transformers", doc, **dict.fromkeys(names, Tokenizer)),
        "transformers.tokenization_utils_base": loader.standin(
            "transformers.tokenization_utils_base", doc, PreTrainedTokenizerBase=Tokenizer
        ),
    }


def load_mlx_lm(download: bool = True):
    """(``mlx_lm.generate``, ``mlx_lm.sample_utils``) from the wheel: every ``mlx_lm/*.py`` file
    unpacked, ``generate.py`` loaded under its real name (its siblings import for real, the
    package ``__init__`` does not run). loader.Unavailable (one line) when it cannot be had."""
    ensure_mlx(install=download)
    wheel = loader.wheel_file(PACKAGE, VERSION, download)
    with zipfile.ZipFile(wheel) as z:
        members = tuple(n for n in z.namelist() if n.startswith("mlx_lm/") and n.endswith(".py"))
    root = loader.fetch(PACKAGE, VERSION, members, download)
    generate = loader.load("mlx_lm.generate", root, transformers_standins())
    return generate, sys.modules["mlx_lm.sample_utils"]


def tiny_llama(vocab: int, seed: int):
    """A tiny random llama (one layer, hidden size 16) built from mlx-lm's own ``ModelArgs``
    (``mlx_lm/models/llama.py``, loaded from the unpacked wheel; no download of weights): the
    kind of model the loop runs on in practice, for the tests that run it end to end."""
    import mlx.core as mx

    root = loader.unpacked_dir(PACKAGE, VERSION)
    llama = loader.load("mlx_lm.models.llama", root)
    args = llama.ModelArgs(
        model_type="llama",
        hidden_size=16,
        num_hidden_layers=1,
        intermediate_size=32,
        num_attention_heads=2,
        rms_norm_eps=1e-5,
        vocab_size=vocab,
    )
    mx.random.seed(seed)
    model = llama.Model(args)
    mx.eval(model.parameters())
    return model


class ChainModel:
    """An mlx-lm model over a probability function: ``model(tokens [1, n], cache=[KVCache])``
    returns logits [1, n, V], log ``prob_fn`` of the context ending at each input token (the BOS
    token dropped). The context is the tokens fed so far, cut to the cache's offset before each
    call, so a trimmed cache forgets the rejected tokens as the loop means it to."""

    def __init__(self, prob_fn):
        self.prob_fn = prob_fn
        self.layers = [None]  # one layer: make_prompt_cache gives one KVCache
        self.tokens: list[int] = []

    def __call__(self, inputs, cache=None):
        import mlx.core as mx

        new = [int(t) for t in np.asarray(inputs).reshape(-1)]
        start = cache[0].offset
        self.tokens = self.tokens[:start] + new
        blank = mx.zeros((1, 1, len(new), 1))
        cache[0].update_and_fetch(blank, blank)
        with np.errstate(divide="ignore"):
            rows = [
                np.log(np.asarray(self.prob_fn(tuple(self.tokens[1 : i + 1])), np.float64))
                for i in range(start, len(self.tokens))
            ]
        return mx.array(np.stack(rows).astype(np.float32))[None]


def mlx_round(speculative_generate_step, make_sampler):
    """A round sampler ``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]`` around the
    loop (module docstring); ``speculative_step.verify`` is None (the loop draws its own drafts)."""
    import mlx.core as mx

    sampler = make_sampler(temp=1.0)

    def speculative_step(p_fn, q_fn, prefix, k, rng):
        mx.random.seed(int(rng.integers(2**32)))
        prompt = mx.array([BOS, *(int(t) for t in prefix)], dtype=mx.uint32)
        loop = speculative_generate_step(
            prompt, ChainModel(p_fn), ChainModel(q_fn), num_draft_tokens=k, max_tokens=k + 1, sampler=sampler
        )
        out = []
        try:
            for token, _, from_draft in loop:
                out.append(int(token))
                if not from_draft:
                    break
        finally:
            loop.close()
        return out

    return speculative_step


def _mlx(download: bool = True) -> Built:
    from .signatures import check_parameters

    generate, sample_utils = load_mlx_lm(download=download)
    label = f"mlx-lm {VERSION} speculative_generate_step"
    check_parameters(generate.speculative_generate_step, PARAMETERS, label, FEEDS)
    return Built(mlx_round(generate.speculative_generate_step, sample_utils.make_sampler), None, "")


MLX_ROWS = [
    Engine(
        "mlx-lm-speculative",
        PACKAGE,
        VERSION,
        f"speculative_generate_step (mlx_lm/generate.py), one round (round wrapper, B = 1); feeds {FEEDS}",
        "round",
        "exact",
        "mlx's global key (mx.random.categorical in make_sampler), seeded from the round's rng; drafts drawn "
        "by the loop from q",
        _mlx,
        SLOW_ROUND,
        files=FILES,
        needs=(f"mlx=={MLX_VERSION} + mlx-cpu=={MLX_VERSION} (pip --no-deps into the cache if missing)",),
    ),
]
