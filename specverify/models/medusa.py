"""A Medusa-style head: the frozen target drafts its own token t + 2 (Cai et al. 2024, arXiv 2401.10774).

Notation: p = the target's next-token distribution, q = the drafter's, k = drafted tokens per
round (here k = 1), alpha = sum_x min(p(x), q(x)).

The head
--------
``MedusaHead`` is a residual block, as Medusa's heads are, on the target's last hidden state h_t
(position t), feeding the TARGET's own, frozen LM head:

    q_head(. | x_<=t) = softmax(LM_head(h'_t)),   h'_t = h_t + W2 SiLU(W1 h_t + b1) + b2,

W1: hidden -> intermediate (default intermediate = hidden), W2, b2 zero-initialised
(``n_blocks`` such blocks in sequence). In transformers 5.x the base model's
``last_hidden_state`` (= ``output_hidden_states[-1]``) of Qwen2 / Llama is taken AFTER the final
RMSNorm, and ``lm_head(last_hidden_state)`` is bit-identical to the model's logits (checked in
tests/test_models_medusa.py), so no norm is re-applied. With W2 = b2 = 0 the head is the identity:
the untrained head proposes the target's own next-token distribution p_{t+1} as its guess for
token t + 2 ("say the next token again"), the baseline that training must beat. Medusa-1 gives
each head its own copy of the LM head; here only the block is trained and saved (2 hidden x
intermediate + hidden + intermediate parameters: 4.7 M for the 1.5B's hidden 1536), the LM head
stays the target's.

Training data and the loss
--------------------------
``collect_training_data``: the target generates text from prompts (sampled at T = 0.7 by
default, greedy at T = 0); at every generated position t we keep h_t and the target's own
distribution p_{t+2} = p(. | x_<=t+1) (the logit row at t + 1, at temperature 1), as its top-K
log-probabilities (K = ``top_k_targets``; None keeps the full row, needed for alpha).

``train_head`` minimises the self-distillation loss of Medusa-2 (arXiv 2401.10774, sec. 2.3.2),
the mean over positions of

    KL(p~_{t+2} || q_head(. | h_t)),    p~ = p_{t+2} restricted to its top K and renormalised,

with Adam. Why soft targets rather than the generated token x_{t+2}: the token is one draw from
p_{t+2}, and E[-log q(x_{t+2})] = CE(p_{t+2}, q), so both losses have the same minimiser but the
soft one is that expectation taken exactly (Rao-Blackwellised): the same data carries the whole
distribution instead of one sample of it, with less gradient noise. And alpha is a property of
the whole distribution: 1 - alpha = TV(p, q) <= sqrt(KL(p || q) / 2) (Pinsker), so lowering KL
raises a lower bound on alpha, while a hard label only says where one sample landed. The head
cannot see x_{t+1}; the minimiser of E[KL] over q is the mixture E_{x_{t+1}}[p_{t+2}] over the
text's law of x_{t+1}, so the head is tuned to the temperature the training text was sampled at.

Decoding (``medusa_generate``)
------------------------------
A one-token drafter (k = 1), no separate draft model. Invariant between rounds: the target's
KV cache holds every token but the last, ids[-1] at position m, and the draft x for position
m + 1 was proposed by the head on h_{m-1}, a hidden state of the accepted prefix. One target
forward over [ids[-1], x] gives p at position m + 1 (row 0) and at m + 2 given x (row 1), and the
hidden states h_m, h_{m+1}. ``decoding.verify_rows`` (``samplers.chain.verify``; at temperature 0
``samplers.greedy.greedy_verify``) accepts x with probability min(1, p(x)/q(x));
on acceptance the bonus token comes from row 1 and the next draft from the head on h_{m+1};
on rejection the residual norm(max(0, p - q)) gives the token at m + 1, x's cache entry is
cropped, and the next draft comes from the head on h_m. Why it is exact: q depends only on the
accepted prefix (h_m, h_{m-1} were computed on a cache that holds exactly that prefix) and on
fresh randomness, and p and q are processed alike (temperature, top-k, top-p), which is all the
chain rule needs for every emitted token to follow p (Leviathan et al. 2023, arXiv 2211.17192,
Theorem 1); stopping at ``max_new_tokens`` truncates the stream, which keeps its law. At
temperature 0 the draft is the head's argmax and is kept iff it equals the target's argmax, so the
output is target-only greedy decoding, up to near-ties between the 2-row and the 1-row forward
(the caveat ``decoding.compare_greedy`` classifies). A pass is one target forward (the prefill
is not counted); every pass emits 1 or 2 tokens.

Measured (2-core shared CPU, fp32, Qwen2.5-Coder-1.5B-Instruct GGUF, one run, 2026-11-30)::

    python -m specverify.models train-head --target $SPECVERIFY_REAL_DIR \
        --target-gguf qwen2.5-coder-1.5b-instruct.gguf --device cpu --out /work/heads/HEAD.pt \
        --positions 400 --eval-positions 100 --epochs 3 --seed 0 --generate-prompts 1 --json

400 training positions (7 rollouts at T = 0.7, 247 s, partly on a CPU busy with other jobs),
100 held-out positions (2 rollouts of held-out prompts), training 21 s. Held out: top-1 on the
t + 2 greedy token 0.00 untrained -> 0.32 trained; alpha 0.013 -> 0.279 (T = 1) and
0.008 -> 0.293 (T = 0.7); KL 12.3 -> 6.2 (training KL 1.65: it overfits at 400 positions).
``medusa_generate`` greedy on one held-out prompt, 32 tokens: identical to target-only,
1.14 tokens per pass, 4.14 tokens/s against 4.24 target-only. On the tiny random pair held-out
top-1 stays at noise level (its text has no structure to learn; tests/test_models_medusa.py).

It is over 550 lines because about 85 of them are this docstring and 20 the prompt lists, and
because the head, its save format, the training data, the loss, the evaluation and
``medusa_generate`` share one convention stated once above (h_t after the final norm, fed to the
target's own frozen LM head, proposing token t + 2), which a split would leave to each file to
restate. The ``train-head`` command over them is ``models.head_command``.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import time
from dataclasses import dataclass, field

import numpy as np

from ..common.files import atomic_path
from ..common.validation import check_int, check_k
from ..laws.processing import check_sampling, process_logits
from ..samplers.greedy import argmax_token
from . import decoding, loading, model_calls
from .loading import torch_modules

FORMAT = "specverify-medusa-head/1"
TRAIN_PROMPTS = [
    "Add type hints to this function:\n\ndef scale(values, factor):\n    return [v * factor for v in values]",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Explain what a hash map is in two sentences.",
    "Write a function that checks whether a string is a palindrome.",
    "Add a docstring to this function:\n\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))",
    "Write a Python class for a stack with push, pop and peek.",
    "What is the difference between a list and a tuple in Python?",
    "Write a function that merges two sorted lists into one sorted list.",
    "Rewrite this loop as a list comprehension:\n\nsquares = []\nfor i in range(10):\n    squares.append(i * i)",
    "Write a function that counts the vowels in a string.",
    "Explain recursion to a beginner programmer.",
    "Write a SQL query that returns the ten most recent orders.",
]
HELD_OUT_PROMPTS = [
    "Fix the bug in this function:\n\ndef mean(xs):\n    return sum(xs) / len(xs) if xs else sum(xs) / 0",
    "Write a function that flattens a nested list.",
    "Write a Python function that reads a CSV file and returns the rows as dicts.",
    "What does the `yield` keyword do in Python?",
]


# ---------------------------------------------------------------------------- the head


def _head_class():
    torch, _ = torch_modules()

    class MedusaHead(torch.nn.Module):
        """n_blocks residual blocks h + W2 SiLU(W1 h + b1) + b2 on the target's (post-norm) last
        hidden state; W2, b2 start at 0, so the head starts as the identity.

        ``logits(target, hidden)`` feeds the result to the target's own frozen LM head and
        predicts token t + 2 from the hidden state at t. ``meta`` is saved with the weights.
        """

        def __init__(
            self,
            hidden_size: int,
            vocab_size: int,
            n_blocks: int = 1,
            intermediate_size: int | None = None,
            meta: dict | None = None,
        ):
            super().__init__()
            self.hidden_size = check_int("hidden_size", hidden_size, 1)
            self.vocab_size = check_int("vocab_size", vocab_size, 1)
            self.n_blocks = check_int("n_blocks", n_blocks, 1)
            self.intermediate_size = check_int("intermediate_size", intermediate_size or hidden_size, 1)
            self.up = torch.nn.ModuleList(
                torch.nn.Linear(self.hidden_size, self.intermediate_size) for _ in range(self.n_blocks)
            )
            self.down = torch.nn.ModuleList(
                torch.nn.Linear(self.intermediate_size, self.hidden_size) for _ in range(self.n_blocks)
            )
            for block in self.down:
                torch.nn.init.zeros_(block.weight)
                torch.nn.init.zeros_(block.bias)
            self.meta = dict(meta or {})

        def forward(self, hidden):
            for up, down in zip(self.up, self.down):
                hidden = hidden + down(torch.nn.functional.silu(up(hidden)))
            return hidden

        def logits(self, target, hidden):
            """Logits (full LM-head width) of token t + 2; gradients reach only the head."""
            lm = target.get_output_embeddings()
            bias = None if getattr(lm, "bias", None) is None else lm.bias.detach()
            hidden = hidden.to(device=lm.weight.device, dtype=lm.weight.dtype)
            return torch.nn.functional.linear(self(hidden), lm.weight.detach(), bias)

    return MedusaHead


_HEAD_CLASS = None


def _head_cls():
    global _HEAD_CLASS
    if _HEAD_CLASS is None:
        _HEAD_CLASS = _head_class()
    return _HEAD_CLASS


def __getattr__(name):
    """``medusa.MedusaHead`` is built on first access, so importing this module needs no torch."""
    if name == "MedusaHead":
        return _head_cls()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def head_for(target, n_blocks: int = 1, intermediate_size: int | None = None, seed: int = 0, **meta):
    """An untrained head shaped for ``target`` (hidden size and LM-head width of its config)."""
    cfg = target.config
    meta.setdefault("target_name", getattr(cfg, "_name_or_path", "") or type(target).__name__)
    torch, _ = torch_modules()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # W1's random init; W2 = 0 keeps the head the identity anyway
        head = _head_cls()(cfg.hidden_size, _lm_width(target), n_blocks, intermediate_size, meta)
    lm = target.get_output_embeddings()
    return head.to(device=lm.weight.device, dtype=lm.weight.dtype)


def _lm_width(target) -> int:
    return int(target.get_output_embeddings().weight.shape[0])


def check_head_matches(head, target) -> None:
    """ValueError naming ``head`` when its shapes do not fit ``target``."""
    hidden, width = int(target.config.hidden_size), _lm_width(target)
    if head.hidden_size != hidden:
        raise ValueError(
            f"head: hidden size {head.hidden_size} does not match the target's {hidden} "
            f"(trained for {head.meta.get('target_name', 'another model')!r}?)"
        )
    if head.vocab_size != width:
        raise ValueError(
            f"head: vocabulary (LM-head width) {head.vocab_size} does not match the "
            f"target's {width} (trained for {head.meta.get('target_name', 'another model')!r}?)"
        )


# ---------------------------------------------------------------------------- save / load


def save_head(head, path) -> None:
    """torch.save of {"format", "meta", "state_dict"} to ``path``, atomically (``files.atomic_path``:
    a temporary file in the same folder, then os.replace), so a reader never sees half a head.
    The bytes are serialised in memory first: torch.save refuses some temporary names (a path
    without a suffix gives ".tmp-XXXX", which it calls an invalid file name)."""
    import io

    torch, _ = torch_modules()
    meta = dict(
        head.meta,
        hidden_size=head.hidden_size,
        vocab_size=head.vocab_size,
        n_blocks=head.n_blocks,
        intermediate_size=head.intermediate_size,
    )
    payload = {
        "format": FORMAT,
        "meta": json.loads(json.dumps(meta, default=json_default)),
        "state_dict": {k: v.detach().cpu().clone() for k, v in head.state_dict().items()},
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getvalue())


HEAD_KEYS = ("format", "meta", "state_dict")
"""The entries of a saved head."""
META_KEYS = ("hidden_size", "vocab_size")
"""The entries of a head's ``meta`` that loading needs (``n_blocks``, ``intermediate_size``
default to 1 and hidden_size)."""


def load_head(path, target=None, name: str = "path"):
    """The head saved at ``path`` (on CPU, or on ``target``'s device and dtype when given).

    ValueError, naming ``name`` (the argument: "path", or "--head" for the CLI) and the file,
    when the file cannot be read, is not a saved head, lacks an entry (``state_dict``, ``meta``
    or one of its ``META_KEYS``), holds entries of the wrong type or weights that do not fit its
    metadata; or, ``target`` given, "head: ..." when its hidden size or vocabulary does not match
    the target's. Loaded with ``weights_only=True``: no pickled code runs.
    """
    torch, _ = torch_modules()
    where = repr(str(path))
    if os.path.isdir(path):
        raise ValueError(f"{name}: {where} is a folder, not a saved head file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (
        OSError,
        RuntimeError,
        EOFError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        pickle.UnpicklingError,
    ) as exc:
        cause = " ".join(str(exc).split())[:200]
        raise ValueError(f"{name}: cannot read a head from {where} ({type(exc).__name__}: {cause})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{name}: {where} is not a saved Medusa head (format {FORMAT!r})")
    missing = [key for key in HEAD_KEYS if key not in payload]
    if missing:
        raise ValueError(
            f"{name}: {where} has no {' and no '.join(map(repr, missing))} entry "
            f"(a saved head holds {', '.join(HEAD_KEYS)}; save it with train-head)"
        )
    meta, state = payload["meta"], payload["state_dict"]
    if not isinstance(meta, dict):
        raise ValueError(f"{name}: {where} has a 'meta' entry of type {type(meta).__name__}, not a dict")
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f"{name}: {where} has a 'state_dict' entry that is not a dict of tensors")
    missing = [key for key in META_KEYS if key not in meta]
    if missing:
        raise ValueError(f"{name}: {where} has no {' and no '.join(map(repr, missing))} in its 'meta' entry")
    try:
        head = _head_cls()(
            meta["hidden_size"], meta["vocab_size"], meta.get("n_blocks", 1), meta.get("intermediate_size"), dict(meta)
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: {where} has bad head metadata ({exc})") from None
    try:
        head.load_state_dict(state)
    except (RuntimeError, TypeError, ValueError) as exc:
        cause = " ".join(str(exc).split())[:300]
        raise ValueError(f"{name}: the weights in {where} do not fit its metadata ({cause})") from None
    if target is not None:
        check_head_matches(head, target)  # "head: ..." (the head does not fit this target)
        lm = target.get_output_embeddings()
        head = head.to(device=lm.weight.device, dtype=lm.weight.dtype)
    return head.eval()


def json_default(x):
    """A head's meta and ``train-head``'s figures in JSON: NumPy numbers as numbers, anything else
    as its str."""
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return str(x)


# ---------------------------------------------------------------------------- target forwards


def _hidden(target, token_ids: list[int], cache):
    """Last hidden states [len(token_ids), hidden] (post final norm) after what ``cache`` holds."""
    torch, _ = torch_modules()
    base = target.base_model
    x = torch.tensor([token_ids], dtype=torch.long, device=target.device)
    out = base(input_ids=x, use_cache=True, **{model_calls.cache_kwarg(base): cache})
    return out.last_hidden_state[0]


def _lm(target, hidden, width: int):
    return target.get_output_embeddings()(hidden)[..., :width].float()


def _rollout(target, prompt: list[int], n_new: int, temperature: float, rng, width: int, eos):
    """The target generates up to n_new tokens; returns (ids, hidden [n, H], logit rows [n, W])
    where hidden[i] is at position len(prompt) - 1 + i and rows[i] predicts the token after it."""
    torch, _ = torch_modules()
    cache = model_calls.new_cache(target)
    ids, feed, hs, rows = list(prompt), list(prompt), [], []
    for _ in range(n_new):
        h = _hidden(target, feed, cache)[-1:]
        row = _lm(target, h, width)[0]
        hs.append(h[0].float().cpu())
        rows.append(row.cpu())
        token = decoding.sample_token(row, temperature, None, None, rng)
        ids.append(token)
        feed = [token]
        if token == eos:
            break
    return ids, torch.stack(hs), torch.stack(rows)


# ---------------------------------------------------------------------------- data


@dataclass
class HeadData:
    """Positions of target-generated text: h_t and the target's p_{t+2} (temperature 1).

    ``logp[i]`` are log p_{t+2} at ``idx[i]`` (its top K, most likely first); when the full rows
    were kept, ``full`` is True, ``idx`` is None and ``logp[i]`` is the whole row in id order.
    ``greedy[i]`` is argmax p_{t+2}.
    """

    hidden: object  # torch float32 [N, H]
    idx: object  # torch int64 [N, K], or None for full rows
    logp: object  # torch float32 [N, K]
    greedy: object  # torch int64 [N]
    width: int
    full: bool
    n_sequences: int
    wall_s: float
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.hidden.shape[0])

    @property
    def target_mass(self) -> float:
        """Mean mass of p_{t+2} inside the kept ids (1.0 for full rows)."""
        return float(self.logp.double().exp().sum(-1).mean())


def collect_training_data(
    target,
    tokenizer,
    prompts,
    n_positions: int,
    max_new_tokens: int = 64,
    temperature: float = 0.7,
    top_k_targets: int | None = 64,
    seed: int = 0,
    vocab_size: int | None = None,
    eos_token_id=None,
    progress=None,
) -> HeadData:
    """Text generated by the target itself from ``prompts`` and, at each generated position t,
    (h_t, p_{t+2}): up to ``n_positions`` positions.

    Each rollout generates ``max_new_tokens`` tokens (fewer at ``eos_token_id``) and yields one
    position fewer. At temperature > 0 the prompts are cycled with fresh draws until
    ``n_positions`` are collected; at temperature 0 (greedy) a repeat would give the same text,
    so each prompt is used once and fewer positions may come back (``len(data)`` says how many).
    ``top_k_targets`` keeps the K most likely ids of each p_{t+2} (None: the full row, which
    ``evaluate_head`` needs for alpha). ``vocab_size``: logits compared (default: the model's
    width; pass ``len(tokenizer)`` to drop padded ids). ``progress(n, n_positions)``, when given,
    is called after each rollout.
    """
    torch, _ = torch_modules()
    n_positions = check_int("n_positions", n_positions, 1)
    n_new = check_int("max_new_tokens", max_new_tokens, 2)
    t, _, _ = check_sampling(temperature)
    if top_k_targets is not None:
        check_int("top_k_targets", top_k_targets, 1)
    prompts = list(prompts)
    if not prompts:
        raise ValueError("prompts: at least one prompt is needed")
    width = model_calls.logit_width(target, vocab_size)
    k = width if top_k_targets is None else min(top_k_targets, width)
    rng = np.random.default_rng(seed)
    hs, idx, logp, greedy = [], [], [], []
    n, n_seq, start = 0, 0, time.perf_counter()
    with torch.no_grad():
        while n < n_positions and not (t == 0 and n_seq == len(prompts)):
            text = prompts[n_seq % len(prompts)]
            prompt = loading.prompt_ids(tokenizer, text) if isinstance(text, str) else model_calls.prompt_list(text)
            _, h, rows = _rollout(target, prompt, n_new, t, rng, width, eos_token_id)
            n_seq += 1
            h, rows = h[:-1], rows[1:]  # h_t with the row that predicts t + 2
            if len(h) == 0:
                continue
            lp = torch.log_softmax(rows.double(), -1).float()
            top = torch.topk(lp, k, dim=-1) if k < width else None
            hs.append(h)
            if top is not None:
                idx.append(top.indices)
            logp.append(top.values if top is not None else lp)
            greedy.append(rows.argmax(-1))
            n += len(h)
            if progress is not None:
                progress(min(n, n_positions), n_positions)
    if n == 0:
        raise ValueError("prompts: the target stopped at once on every prompt; no position to learn from")
    cat = lambda xs: torch.cat(xs)[:n_positions]  # noqa: E731
    return HeadData(
        cat(hs),
        cat(idx) if idx else None,
        cat(logp),
        cat(greedy),
        width,
        k == width,
        n_seq,
        time.perf_counter() - start,
        {"temperature": t, "max_new_tokens": n_new, "top_k_targets": k, "seed": seed},
    )


# ---------------------------------------------------------------------------- training


def _kl(head, target, data: HeadData, rows, width: int):
    """Mean KL(p~_{t+2} || q_head) over ``rows`` of ``data`` (p~: kept ids, renormalised)."""
    torch, _ = torch_modules()
    lm = head.logits(target, data.hidden[rows].to(target.device))[:, :width].float()
    logq = torch.log_softmax(lm, -1)
    if data.idx is not None:
        logq = logq.gather(1, data.idx[rows].to(lm.device))
    logp = torch.log_softmax(data.logp[rows].to(lm.device), -1)  # renormalise to the kept ids
    return (logp.exp() * (logp - logq)).sum(-1).mean()


def head_loss(head, target, data: HeadData, batch_size: int = 256) -> float:
    """The loss ``train_head`` minimises, averaged over every position of ``data``."""
    torch, _ = torch_modules()
    total = 0.0
    with torch.no_grad():
        for lo in range(0, len(data), batch_size):
            rows = torch.arange(lo, min(lo + batch_size, len(data)))
            total += float(_kl(head, target, data, rows, data.width)) * len(rows)
    return total / len(data)


def train_head(
    head, target, data: HeadData, epochs: int = 3, lr: float = 1e-3, batch_size: int = 64, seed: int = 0
) -> dict:
    """Adam on the mean KL(p~_{t+2} || q_head) (see the module docstring), the target frozen.

    Returns {"loss_before", "loss_per_epoch" (mean training loss after each epoch, over all
    positions), "wall_s"}; the head is trained in place and left in eval mode.
    """
    torch, _ = torch_modules()
    check_head_matches(head, target)
    epochs = check_int("epochs", epochs, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr: must be a finite number > 0, got {lr!r}")
    if len(data) == 0:
        raise ValueError("data: no positions to train on")
    start = time.perf_counter()
    history = {"loss_before": head_loss(head, target, data), "loss_per_epoch": []}
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        head.train()
        order = torch.randperm(len(data), generator=gen)
        for lo in range(0, len(data), batch_size):
            loss = _kl(head, target, data, order[lo : lo + batch_size], data.width)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        head.eval()
        history["loss_per_epoch"].append(head_loss(head, target, data))
    history["wall_s"] = time.perf_counter() - start
    head.meta.update(
        positions=len(data),
        epochs=epochs,
        lr=lr,
        seed=seed,
        loss_before=history["loss_before"],
        loss_after=history["loss_per_epoch"][-1],
    )
    return history


# ---------------------------------------------------------------------------- evaluation


def evaluate_head(
    head,
    target,
    data: HeadData,
    temperatures=(1.0, 0.7),
    top_k=None,
    top_p=None,
    batch_size: int = 64,
    per_position: bool = False,
) -> dict:
    """On held-out positions (``data`` collected with ``top_k_targets=None``, teacher-forced on
    target-generated text): top-1 agreement of the head with the target's greedy token t + 2,
    and alpha = mean over positions of sum_x min(p_{t+2}(x), q_head(x)), p and q processed alike
    at each temperature in ``temperatures`` (with ``top_k`` / ``top_p``). Top-1 and the loss need
    only top-K rows; alpha needs the full rows.

    Returns {"positions", "top1", "alpha": {temperature: alpha}, "loss"}; with
    ``per_position``, also "hits" (bool array) and "alphas" ({temperature: float64 array}).
    """
    torch, _ = torch_modules()
    check_head_matches(head, target)
    temps = [check_sampling(t, top_k, top_p)[0] for t in temperatures]
    if temps and not data.full:
        raise ValueError(
            "data: alpha needs full target rows; collect it with top_k_targets=None "
            "(or pass temperatures=() for top-1 and loss only)"
        )
    if any(t == 0 for t in temps):
        raise ValueError("temperatures: alpha at temperature 0 is the top-1 agreement; pass T > 0")
    hits, alphas = [], {t: [] for t in temps}
    with torch.no_grad():
        for lo in range(0, len(data), batch_size):
            rows = torch.arange(lo, min(lo + batch_size, len(data)))
            q_logits = head.logits(target, data.hidden[rows].to(target.device))[:, : data.width].float().cpu()
            hits.append((q_logits.argmax(-1) == data.greedy[rows]).numpy())
            p_logp = data.logp[rows].numpy()  # full rows, ids in order
            q_np = q_logits.numpy()
            for t in temps:
                alphas[t] += [
                    float(np.minimum(process_logits(p, t, top_k, top_p), process_logits(q, t, top_k, top_p)).sum())
                    for p, q in zip(p_logp, q_np)
                ]
    hits = np.concatenate(hits)
    alphas = {t: np.array(a) for t, a in alphas.items()}
    out = {
        "positions": len(data),
        "top1": float(hits.mean()),
        "alpha": {t: float(a.mean()) for t, a in alphas.items()},
        "loss": head_loss(head, target, data),
    }
    if per_position:
        out.update(hits=hits, alphas=alphas)
    return out


# ---------------------------------------------------------------------------- decoding


def _propose(head, target, hidden, width, t, top_k, top_p, rng):
    """(draft token, q) from the head on one hidden state; q is None at greedy."""
    row = head.logits(target, hidden[None])[0, :width].float()
    if t == 0:
        return argmax_token(row), None
    q = process_logits(row.cpu().numpy(), t, top_k, top_p)
    return int(rng.choice(width, p=q)), q


def medusa_generate(
    target,
    head,
    input_ids,
    max_new_tokens,
    temperature=0.0,
    top_k=None,
    top_p=None,
    rng=None,
    vocab_size=None,
    eos_token_id=None,
) -> decoding.Generation:
    """Speculative decoding with the target's own Medusa head as a one-token drafter (k = 1).

    The output is distributed exactly as the target's (temperature, top-k, top-p applied alike to
    p and q), and at temperature 0 it is target-only greedy decoding; why, in the module
    docstring. Stats: rounds = target passes (prefill not counted), drafted, accepted, rejections,
    emitted (before the cut to ``max_new_tokens``).
    """
    torch, _ = torch_modules()
    t, top_k, top_p = check_sampling(temperature, top_k, top_p)
    n_new = check_k(max_new_tokens, "max_new_tokens")
    check_head_matches(head, target)
    ids = model_calls.prompt_list(input_ids)
    n_prompt, width = len(ids), model_calls.logit_width(target, vocab_size)
    rng = decoding.as_rng(rng)
    stats = decoding.DecodeStats()
    cache = model_calls.new_cache(target)

    def done() -> bool:
        return len(ids) - n_prompt >= n_new or (eos_token_id is not None and eos_token_id in ids[n_prompt:])

    with torch.no_grad():
        start = time.perf_counter()
        draft = None
        if len(ids) > 1:  # the cache holds ids[:-1]; the head on h at ids[-2] drafts ids[-1]'s successor
            draft = _propose(head, target, _hidden(target, ids[:-1], cache)[-1], width, t, top_k, top_p, rng)
        while not done():
            feed = [ids[-1]] + ([draft[0]] if draft else [])
            hidden = _hidden(target, feed, cache)
            rows = _lm(target, hidden, width)
            if draft is None:
                ids.append(decoding.sample_token(rows[0], t, top_k, top_p, rng))
                h_next, added = hidden[0], 1
            else:
                x, q = draft
                j, token = decoding.verify_rows(rows, [x], [q], t, top_k, top_p, rng)
                ids += [x, token] if j else [token]
                if not j:
                    model_calls.crop_to(cache, len(ids) - 1)  # drop the rejected draft's keys and values
                h_next, added = hidden[j], 1 + j
                stats.drafted += 1
                stats.accepted += j
                stats.rejections += 1 - j
            stats.rounds += 1
            stats.emitted += added
            draft = None if done() else _propose(head, target, h_next, width, t, top_k, top_p, rng)
        stats.wall_s = time.perf_counter() - start
    return decoding.Generation(decoding.finish_ids(ids, n_prompt, n_new, eos_token_id), n_prompt, stats)
