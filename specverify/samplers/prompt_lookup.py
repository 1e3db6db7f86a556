"""Prompt lookup drafting: copy the continuation of the last n-gram from earlier in the prefix.

Prompt lookup decoding (Saxena 2023, github.com/apoorvumang/prompt-lookup-decoding; shipped as
``prompt_lookup_num_tokens`` in Hugging Face transformers and as the "ngram" speculator in vLLM)
needs no draft model: find the most recent earlier occurrence of the final n tokens of the
prefix (n = ``ngram``, falling back to shorter n-grams down to 1) and propose the up to k tokens
that followed it. With no match there are no drafts and the round emits one token from p.

The drafter is deterministic, so the distribution the drafts were "sampled" from is one-hot,
and the exact rule with q one-hot is: accept draft x with probability p(x), and on rejection
sample from norm(max(0, p - onehot(x))) = p with x removed (handout section 4, "greedy drafter,
sampled verification"; Leviathan et al., arXiv 2211.17192). Every draft of a round is a function
of the prefix at the start of the round, so the drafts at later positions are too, and the
single-chain proof applies position by position. Plugging in a draft model's softmax instead of
the one-hot vector would be biased. ``q_fn`` is ignored.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Sequence

import numpy as np

from ..common.validation import check_k
from ..laws.arrays import DistFn, Vector
from .chain import Rng, model_output, sample, verify_drafts
from .registry import register


def check_ngram(ngram: object) -> int:
    if isinstance(ngram, bool) or not isinstance(ngram, numbers.Integral) or int(ngram) < 1:
        raise ValueError(f"ngram: must be an integer >= 1, got {ngram!r}")
    return int(ngram)


def lookup_drafts(prefix: Sequence[int], k: int, ngram: int = 2) -> list[int]:
    """The up to k tokens after the last earlier occurrence of the prefix's final n tokens.

    Tries n = ngram, ngram - 1, ..., 1 and uses the first n that matches; [] when none does.
    The occurrence must start before the final n-gram itself (it may overlap it).
    """
    tokens = tuple(int(t) for t in prefix)
    for n in range(min(check_ngram(ngram), len(tokens) - 1), 0, -1):
        tail = tokens[-n:]
        for start in range(len(tokens) - n - 1, -1, -1):
            if tokens[start : start + n] == tail:
                return list(tokens[start + n : start + n + k])
    return []


def one_hot(x: int, vocab: int) -> Vector:
    q = np.zeros(vocab)
    q[x] = 1.0
    return q


def prompt_lookup_step(
    p_fn: DistFn, q_fn: DistFn, prefix: Sequence[int], k: int, rng: Rng, *, ngram: int = 2
) -> list[int]:
    """One prompt-lookup round: up to k copied drafts verified exactly, then one more token."""
    k = check_k(k)
    start = tuple(prefix)
    drafts = lookup_drafts(start, k, ngram)
    p = model_output("p_fn", p_fn, start)
    if not drafts:
        return [sample(p, rng)]
    if max(drafts) >= len(p):
        raise ValueError(f"prefix: token {max(drafts)} is outside p_fn's vocabulary of {len(p)}")
    qs = [one_hot(x, len(p)) for x in drafts]
    return verify_drafts(p_fn, start, drafts, qs, rng)


register("prompt-lookup", functools.partial(prompt_lookup_step, ngram=2))
