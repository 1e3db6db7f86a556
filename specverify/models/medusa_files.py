"""A Medusa head on disk: ``save_head`` (atomically, ``FORMAT``, its meta and state dict) and
``load_head`` (checked against a target when one is given, with one clear error for a file that
is not a head); ``json_default`` writes a head's meta and ``train-head``'s figures as JSON. The
head itself is ``medusa``'s."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np

from ..common.files import atomic_path
from .loading import torch_modules
from .medusa import check_head_matches, head_class

FORMAT = "specverify-medusa-head/1"


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
        head = head_class()(
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
