"""SGLang, EAGLE-1 and Medusa 0.1: loaders (files from the pinned wheels, no stand-ins needed
beyond the empty parent packages; EAGLE's module imports ``transformers`` logits processors at
the top, used only by its callers: a stand-in with those five names is inserted when
``transformers`` is not installed)."""

from __future__ import annotations

import importlib.util

from . import loader

SGLANG = ("sglang", "0.5.23", ("sglang/kernels/ops/speculative/reject_sampling.py",))
EAGLE = ("eagle-llm", "1.2.1", ("eagle/model/utils.py",))
MEDUSA = ("medusa-llm", "0.1", ("medusa/model/utils.py",))


def load_sglang(root=None):
    loader.ensure_triton()
    package, version, files = SGLANG
    root = root or loader.fetch(package, version, files)
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


def load_eagle(root=None):
    package, version, files = EAGLE
    root = root or loader.fetch(package, version, files)
    return loader.load("eagle.model.utils", root, eagle_standins())


def load_medusa(root=None):
    package, version, files = MEDUSA
    root = root or loader.fetch(package, version, files)
    return loader.load("medusa.model.utils", root)
