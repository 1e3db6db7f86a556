"""What decoding asks of a transformers causal LM, in one place, for transformers 4.x and 5.x
alike: a KV cache (``new_cache``, ``cache_length``, ``crop_to``; ``keep_slots`` for a tree's
accepted path), one forward over new tokens (``forward``, with ``logits_to_keep`` where the model
has it), a device sync for honest timings, a prompt as a list of ints, and the logit width
compared."""

from __future__ import annotations

import functools
import inspect

from .loading import torch_modules


@functools.lru_cache(maxsize=64)
def _forward_parameters(model_class) -> frozenset:
    """The class's forward parameters (the class's: an instance's forward may be compiled)."""
    return frozenset(inspect.signature(model_class.forward).parameters)


def cache_kwarg(model) -> str:
    """transformers >= 5 names the forward's cache argument ``cache``; 4.x ``past_key_values``."""
    return "cache" if "cache" in _forward_parameters(type(model)) else "past_key_values"


def new_cache(model, static_len: int | None = None):
    """A DynamicCache, or a StaticCache of ``static_len`` positions (for torch.compile on GPU)."""
    _, transformers = torch_modules()
    if static_len is not None:
        return transformers.StaticCache(config=model.config, max_cache_len=static_len)
    try:
        return transformers.DynamicCache(config=model.config)
    except TypeError:  # transformers 4.x: no config argument
        return transformers.DynamicCache()


def cache_length(cache) -> int:
    return int(cache.get_seq_length())


def crop_to(cache, length: int) -> None:
    """Drop cached positions past ``length``.

    ``crop(-n)`` removes n positions in transformers 4.x and 5.x alike; a positive argument means
    'keep this many' in 4.x and is refused in 5.x, and ``crop(0)`` empties a 4.x cache, so only a
    negative count is ever passed.
    """
    extra = cache_length(cache) - length
    if extra < 0:
        raise ValueError(f"length: cache holds {cache_length(cache)} positions, cannot crop to {length}")
    if extra > 0:
        cache.crop(-extra)


def accepts_logits_to_keep(model) -> bool:
    """Whether the model's forward can compute the LM head on the last rows only."""
    return "logits_to_keep" in _forward_parameters(type(model))


def forward(model, token_ids: list[int], cache, keep: int | None = None):
    """Logits (float32, [rows, width]) of feeding ``token_ids`` after what ``cache`` holds.

    ``keep`` = n computes the LM head on the last n positions only (transformers'
    ``logits_to_keep``; sliced afterwards on models without it): a prefill needs one row, a
    verification k + 1. None keeps every row.
    """
    torch, _ = torch_modules()
    ids = torch.tensor([token_ids], dtype=torch.long, device=model.device)
    kwargs = {cache_kwarg(model): cache}
    if keep is not None and accepts_logits_to_keep(model):
        kwargs["logits_to_keep"] = int(keep)
    out = model(input_ids=ids, use_cache=True, **kwargs)
    logits = out.logits[0] if keep is None else out.logits[0, -int(keep) :]
    return logits.float()


def synchronize(model) -> None:
    """Wait for the model's CUDA device (a no-op on CPU): timings read after it are honest."""
    torch, _ = torch_modules()
    if model.device.type == "cuda":
        torch.cuda.synchronize(model.device)


def prompt_list(input_ids) -> list[int]:
    """A prompt as a list of ints: from a list, a [1, n] nested list or a tensor / array."""
    if hasattr(input_ids, "tolist"):
        input_ids = input_ids.tolist()
    if input_ids and isinstance(input_ids[0], list):
        if len(input_ids) != 1:
            raise ValueError(f"input_ids: batch size must be 1, got {len(input_ids)}")
        input_ids = input_ids[0]
    ids = [int(i) for i in input_ids]
    if not ids:
        raise ValueError("input_ids: the prompt must hold at least one token")
    return ids


def logit_width(model, vocab_size) -> int:
    """The logits compared: the model's vocabulary, or ``vocab_size`` of them (checked)."""
    width = model.config.vocab_size
    if vocab_size is None:
        return width
    if not 1 <= vocab_size <= width:
        raise ValueError(f"vocab_size: must lie in 1..{width} (the model's logit width), got {vocab_size}")
    return int(vocab_size)


def _layers(cache):
    """(holder, keys, values) per layer: a 5.x ``cache.layers[i]`` with its ``keys`` / ``values``
    attributes, or (4.x) the cache with (``key_cache``, i) / (``value_cache``, i) list entries."""
    if hasattr(cache, "layers"):
        for layer in cache.layers:
            if getattr(layer, "is_sliding", False):
                raise ValueError("cache: sliding-window layers cannot be gathered to a tree path")
        return [(layer, "keys", "values") for layer in cache.layers]
    return [(cache, ("key_cache", i), ("value_cache", i)) for i in range(len(cache.key_cache))]


def _select(holder, name, index) -> None:
    if isinstance(name, tuple):
        tensors = getattr(holder, name[0])
        tensors[name[1]] = tensors[name[1]].index_select(-2, index)
    elif getattr(holder, name) is not None and getattr(holder, name).numel():
        setattr(holder, name, getattr(holder, name).index_select(-2, index))


def keep_slots(cache, keep: list[int]) -> None:
    """Keep only cache slots ``keep`` (increasing), gathered along the sequence dimension."""
    torch, _ = torch_modules()
    length = cache_length(cache)
    if any(not 0 <= s < length for s in keep) or any(a >= b for a, b in zip(keep, keep[1:])):
        raise ValueError(f"keep: must be increasing slots in 0..{length - 1}, got {keep}")
    if keep == list(range(len(keep))):
        crop_to(cache, len(keep))  # a prefix: crop, no copy
        return
    for holder, keys, values in _layers(cache):
        device = (getattr(holder, keys) if isinstance(keys, str) else holder.key_cache[0]).device
        index = torch.tensor(keep, dtype=torch.long, device=device)
        _select(holder, keys, index)
        _select(holder, values, index)
