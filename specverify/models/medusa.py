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

Here: the head and the target forwards it reads (``hidden_states``, ``lm_rows``, ``rollout``), and
``medusa_generate``. Its file format is ``medusa_files``' (``save_head``, ``load_head``), its
training data, loss and held-out figures ``medusa_training``'s; the ``train-head`` command over
them is ``models.head_command``.
"""

from __future__ import annotations

import time

from ..common.validation import check_int, check_k
from ..laws.processing import check_sampling, process_logits
from ..samplers.greedy import argmax_token
from . import decoding, model_calls
from .loading import torch_modules

# ---------------------------------------------------------------------------- the head


def _build_head_class():
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


def head_class():
    global _HEAD_CLASS
    if _HEAD_CLASS is None:
        _HEAD_CLASS = _build_head_class()
    return _HEAD_CLASS


def __getattr__(name):
    """``medusa.MedusaHead`` is built on first access, so importing this module needs no torch."""
    if name == "MedusaHead":
        return head_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def head_for(target, n_blocks: int = 1, intermediate_size: int | None = None, seed: int = 0, **meta):
    """An untrained head shaped for ``target`` (hidden size and LM-head width of its config)."""
    cfg = target.config
    meta.setdefault("target_name", getattr(cfg, "_name_or_path", "") or type(target).__name__)
    torch, _ = torch_modules()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # W1's random init; W2 = 0 keeps the head the identity anyway
        head = head_class()(cfg.hidden_size, lm_width(target), n_blocks, intermediate_size, meta)
    lm = target.get_output_embeddings()
    return head.to(device=lm.weight.device, dtype=lm.weight.dtype)


def lm_width(target) -> int:
    return int(target.get_output_embeddings().weight.shape[0])


def check_head_matches(head, target) -> None:
    """ValueError naming ``head`` when its shapes do not fit ``target``."""
    hidden, width = int(target.config.hidden_size), lm_width(target)
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


# ---------------------------------------------------------------------------- target forwards


def hidden_states(target, token_ids: list[int], cache):
    """Last hidden states [len(token_ids), hidden] (post final norm) after what ``cache`` holds."""
    torch, _ = torch_modules()
    base = target.base_model
    x = torch.tensor([token_ids], dtype=torch.long, device=target.device)
    out = base(input_ids=x, use_cache=True, **{model_calls.cache_kwarg(base): cache})
    return out.last_hidden_state[0]


def lm_rows(target, hidden, width: int):
    return target.get_output_embeddings()(hidden)[..., :width].float()


def rollout(target, prompt: list[int], n_new: int, temperature: float, rng, width: int, eos):
    """The target generates up to n_new tokens; returns (ids, hidden [n, H], logit rows [n, W])
    where hidden[i] is at position len(prompt) - 1 + i and rows[i] predicts the token after it."""
    torch, _ = torch_modules()
    cache = model_calls.new_cache(target)
    ids, feed, hs, rows = list(prompt), list(prompt), [], []
    for _ in range(n_new):
        h = hidden_states(target, feed, cache)[-1:]
        row = lm_rows(target, h, width)[0]
        hs.append(h[0].float().cpu())
        rows.append(row.cpu())
        token = decoding.sample_token(row, temperature, None, None, rng)
        ids.append(token)
        feed = [token]
        if token == eos:
            break
    return ids, torch.stack(hs), torch.stack(rows)


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
            draft = _propose(head, target, hidden_states(target, ids[:-1], cache)[-1], width, t, top_k, top_p, rng)
        while not done():
            feed = [ids[-1]] + ([draft[0]] if draft else [])
            hidden = hidden_states(target, feed, cache)
            rows = lm_rows(target, hidden, width)
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
