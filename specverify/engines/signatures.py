"""What a row's wrapper feeds, checked against the loaded engine function before any verdict:
``check_parameters`` compares the function's parameter names with the ones the wrapper was
written for, so that a release that renamed or reordered them (vLLM's ``target_probs`` ->
``target_logits``) is one line naming the function and what the row feeds, never a verdict on
inputs the function does not take."""

from __future__ import annotations

import inspect

from .loader import Unavailable


def check_parameters(fn, names: tuple[str, ...], label: str, feeds: str) -> None:
    """loader.Unavailable (one line) unless ``fn``'s parameters start with ``names`` (in order;
    keyword-only ones count in their declared order). ``label`` names the function and its
    release, ``feeds`` says what the row's wrapper passes."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError) as exc:
        raise Unavailable(f"{label}: no signature to check the row's inputs against ({exc})") from None
    if params and params[0] == "self":
        params = params[1:]
    if params[: len(names)] != list(names):
        raise Unavailable(
            f"adapter error: {label} takes ({', '.join(params)}); this row feeds {feeds} as "
            f"({', '.join(names)}): not judged"
        )
