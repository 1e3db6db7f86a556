"""The contract a row checks before its verdict: what its wrapper feeds the engine's function, read
against the loaded function's signature and against one input whose answer is known.

Engines change what their functions take between releases (vLLM V1's ``rejection_sample`` took
``target_probs`` up to 0.15.1 and takes ``target_logits``, with the softmax inside, from 0.16.0
on). A wrapper that feeds the wrong quantity still gets outputs back, and a verdict on them would
be meaningless; so a row states what it feeds (:class:`Feeds`), :func:`check_feeds` compares that
with ``inspect.signature`` of the function it loaded, and :func:`check_known_answer` runs the
wrapped kernel on one case whose answer any exact verifier gives whatever its randomness. Any
mismatch is :class:`AdapterError`: an adapter error row naming the function, the release and the
mismatch ("vLLM 0.33.0 rejection_sample takes target_logits; this row feeds probabilities"),
never EXACT or NOT EXACT.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np


class AdapterError(Exception):
    """The row's wrapper and the loaded function disagree; the message is the row's one line."""


QUANTITY_WORDS = {"logits": "logits", "probs": "probabilities", "probabilities": "probabilities"}
"""What a parameter name says it takes: a name ending in ``_logits`` takes logits, ``_probs``
probabilities (the engines' own naming: ``target_logits``, ``target_probs``, ``draft_probs``)."""


def quantity_of(parameter: str) -> str | None:
    """``"logits"`` / ``"probabilities"`` as ``parameter``'s name says, None when it says neither."""
    last = parameter.rsplit("_", 1)[-1]
    return QUANTITY_WORDS.get(last)


@dataclass(frozen=True)
class Feeds:
    """What a row's wrapper feeds an engine function: ``quantities`` maps each parameter position
    the wrapper fills with a distribution to ``"logits"`` or ``"probabilities"``; ``passes``
    are the parameter names it passes by keyword; ``temperature`` and ``greedy_sentinel`` say
    in words what temperature it runs at and which value it must avoid (the engine's greedy
    marker); ``temperature_value`` / ``sentinel_value`` are those values when they are numbers."""

    function: str
    quantities: dict = field(default_factory=dict)  # position -> "logits" | "probabilities"
    positional: int = 0  # how many positional arguments it passes
    passes: tuple[str, ...] = ()
    temperature: str = ""
    temperature_value: float | None = None
    sentinel_value: float | None = None

    def words(self) -> str:
        """The feeds in one line, for the row."""
        fed = ", ".join(f"argument {i + 1}: {q}" for i, q in sorted(self.quantities.items()))
        parts = [f"{self.function} fed {fed}" if fed else self.function]
        if self.temperature:
            parts.append(f"temperature {self.temperature}")
        if self.sentinel_value is not None:
            parts.append(f"greedy sentinel {self.sentinel_value:g} avoided")
        if self.passes:
            parts.append("by keyword: " + ", ".join(self.passes))
        return "; ".join(parts)


def check_feeds(fn, feeds: Feeds, label: str) -> None:
    """AdapterError unless ``fn``'s signature takes what ``feeds`` states: each fed position's
    parameter names the quantity fed, every required parameter is filled, every keyword passed
    exists, and the temperature fed is not the engine's greedy sentinel. ``label`` names the
    release and function ("vLLM 0.33.0 rejection_sample")."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise AdapterError(f"{label}: no signature to check ({exc})") from None
    names = [p.name for p in params]
    for position, fed in sorted(feeds.quantities.items()):
        if position >= len(params):
            raise AdapterError(f"{label} takes {len(params)} arguments; this row feeds argument {position + 1}")
        takes = quantity_of(names[position])
        if takes is not None and takes != fed:
            raise AdapterError(f"{label} takes {names[position]}; this row feeds {fed}")
    required = [
        p.name
        for p in params[feeds.positional :]
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in feeds.passes
    ]
    if required:
        raise AdapterError(f"{label} requires {', '.join(required)}, which this row does not feed")
    if len(params) < feeds.positional and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise AdapterError(f"{label} takes {len(params)} arguments; this row passes {feeds.positional}")
    unknown = [n for n in feeds.passes if n not in names]
    if unknown and not any(p.kind == p.VAR_KEYWORD for p in params):
        raise AdapterError(f"{label} has no parameter {', '.join(unknown)}, which this row passes")
    if feeds.sentinel_value is not None and feeds.temperature_value == feeds.sentinel_value:
        raise AdapterError(
            f"{label} treats temperature {feeds.sentinel_value:g} as greedy; this row feeds temperature "
            f"{feeds.temperature_value:g}"
        )


def known_answer_case():
    """One canonical case every exact token-wise verifier answers the same whatever its draws:
    V = 3, k = 2; draft 0 is token 0 with p = q = one-hot(0) (accepted for any coin), draft 1 is
    token 1 with q = one-hot(1) and p = one-hot(2) (p(x) = 0: rejected for any coin above 0; the
    residual max(p - q, 0) is one-hot(2), so the recovered token is 2). Coins 0.5 and 0.1; the
    final uniform 0.5. -> (draft_ids, draft_probs, target_probs, uniforms, expected tokens
    [0, 2, -1], expected accepted 1). A wrapper that feeds probabilities where the engine takes
    logits sees softmax(one-hot) ~ (0.58, 0.21, 0.21) and accepts both drafts (0.21 >= 0.1)."""
    eye = np.eye(3, dtype=np.float32)
    draft_ids = np.array([[0, 1]], np.int64)
    q = np.stack([eye[0], eye[1]])[None]
    p = np.stack([eye[0], eye[2], np.full(3, 1 / 3, np.float32)])[None]
    u = np.array([[0.5, 0.1, 0.5]], np.float32)
    return draft_ids, q, p, u, [0, 2, -1], 1


def check_known_answer(kernel, label: str) -> None:
    """AdapterError unless the canonical uniforms ``kernel`` answers :func:`known_answer_case`
    as an exact verifier must (or raises on it: then the error, in one line)."""
    ids, q, p, u, tokens, accepted = known_answer_case()
    try:
        out, acc = kernel(ids, q, p, u)
    except Exception as exc:  # noqa: BLE001 - the wrapper failed on the known case: one line
        raise AdapterError(
            f"{label}: the wrapped call fails on the known-answer case: {type(exc).__name__}: "
            f"{(str(exc).splitlines() or [''])[0][:200]}"
        ) from None
    got, n = [int(t) for t in np.asarray(out)[0]], int(np.asarray(acc)[0])
    if got != tokens or n != accepted:
        raise AdapterError(
            f"{label}: on the known-answer case (accept 1 draft, then recover token 2) the wrapped call "
            f"gave tokens {got} with {n} accepted, not {tokens} with {accepted}: the row feeds the "
            "function something other than what it takes"
        )


def short_signature(fn) -> str:
    """``fn``'s signature in short: its name, the parameters up to the first with a default (the
    distributions by name, the rest counted), then the names of those with defaults."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return getattr(fn, "__name__", "?")
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    optional = [p.name for p in params if p.default is not inspect.Parameter.empty]
    shown = [n if quantity_of(n) else "." for n in required]
    compact: list[str] = []
    for n in shown:
        if n == "." and compact and compact[-1].startswith("."):
            compact[-1] += "."
        else:
            compact.append(n)
    text = ", ".join("…" if c.startswith(".") else c for c in compact)
    return (
        f"{getattr(fn, '__name__', '?')}({len(required)}: {text}"
        + (f"; {', '.join(optional)}" if optional else "")
        + ")"
    )
