"""SGLang, EAGLE-1 and Medusa 0.1: loaders (files from the pinned wheels, no stand-ins needed
beyond the empty parent packages; EAGLE's module imports ``transformers`` logits processors at
the top, used only by its callers: a stand-in with those five names is inserted when
``transformers`` is not installed)."""

from __future__ import annotations

import importlib.util

from . import loader
from .pins import EAGLE, MEDUSA, SGLANG


def load_sglang(root=None, download: bool = True):
    """SGLang's reject_sampling module; ``download`` False: the cache only (no wheel or triton
    is fetched; loader.Unavailable when one is missing)."""
    loader.ensure_triton(install=download)
    package, version, files = SGLANG
    root = root or loader.fetch(package, version, files, download)
    return loader.load("sglang.kernels.ops.speculative.reject_sampling", root)


def eagle_standins() -> dict:
    if importlib.util.find_spec("transformers") is not None:
        return {}
    names = (
        "LogitsProcessorList",
        "RepetitionPenaltyLogitsProcessor",
        "TemperatureLogitsWarper",
        "TopKLogitsWarper",
        "TopPLogitsWarper",
    )
    mods = {
        n: loader.standin(n, "stand-in parent: transformers is not installed")
        for n in ("transformers", "transformers.generation")
    }
    mods["transformers.generation.logits_process"] = loader.standin(
        "transformers.generation.logits_process",
        "stand-in: the names eagle/model/utils.py imports (used only by prepare_logits_processor)",
        **{n: type(n, (), {}) for n in names},
    )
    return mods


def load_eagle(root=None, download: bool = True):
    """EAGLE-1's eagle/model/utils.py; ``download`` False: the cache only."""
    package, version, files = EAGLE
    root = root or loader.fetch(package, version, files, download)
    return loader.load("eagle.model.utils", root, eagle_standins())


def load_medusa(root=None, download: bool = True):
    """Medusa 0.1's medusa/model/utils.py; ``download`` False: the cache only."""
    package, version, files = MEDUSA
    root = root or loader.fetch(package, version, files, download)
    return loader.load("medusa.model.utils", root)
