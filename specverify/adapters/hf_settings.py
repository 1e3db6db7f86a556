"""What the tiny-Qwen check of ``generate(assistant_model=draft, do_sample=True)`` runs
(``hf_generate``): its prompt, window and k, its sampling settings (``SETTINGS``, and the biased
``CONTROL``), and one ``generate`` call (``generate_new_tokens``). Importing it imports torch and
transformers (``models.loading.torch_modules``: a missing torch is one clear error)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..laws import stats
from ..laws.processing import process_logits
from ..models.loading import torch_modules
from . import hf

torch, transformers = torch_modules()
import transformers.generation.utils as hf_generation  # noqa: E402, F401 - after torch_modules(): a missing torch is one clear error

PROMPT = "def mean(xs):"


NEW_TOKENS = 3


K = 4


ACCEPTANCE_NEW_TOKENS = 24


FALSE_FAIL_RATE = stats.DEFAULT_FALSE_FAIL_RATE


FALSE_PASS_RATE = 0.01


@dataclass(frozen=True)
class Setting:
    name: str
    temperature: float
    top_k: int | None = None
    ensemble_weight: float | None = None
    pad_token_id: int | None = None

    def generate_kwargs(self) -> dict:
        """Sampling options for ``generate``; top_k=0 disables transformers' default top-k of 50."""
        out = {"do_sample": True, "temperature": self.temperature, "top_k": self.top_k or 0, "top_p": 1.0}
        if self.ensemble_weight is not None:
            out["assistant_ensemble_weight"] = self.ensemble_weight
        if self.pad_token_id is not None:
            out["pad_token_id"] = self.pad_token_id
        return out

    def process(self, logits) -> np.ndarray:
        return process_logits(logits, self.temperature, self.top_k)


PAD_DEMO_TOKEN = 52
"""The default tiny pair's most likely first token after PROMPT (p = 0.28 at T = 1), used as
``pad_token_id`` in the fourth setting: a pad id that is also an ordinary, generable token."""


SETTINGS = (
    Setting("T=1.0", 1.0),
    Setting("T=0.7", 0.7),
    Setting("top-k=20, T=1.0", 1.0, 20),
    Setting(f"T=1.0, pad_token_id={PAD_DEMO_TOKEN}", 1.0, pad_token_id=PAD_DEMO_TOKEN),
)


CONTROL = Setting("ensemble w=0.5, T=1.0 (control)", 1.0, None, hf.ENSEMBLE_WEIGHT)


PROCESSING_TOL = 1e-3
"""Largest TV allowed between the engine's processed rows and ours (float32 rounding is ~1e-6)."""


def generate_new_tokens(pair, prompt: list[int], setting: Setting, max_new_tokens: int) -> tuple:
    """One ``generate(assistant_model=draft)`` call; its new tokens."""
    x = torch.tensor([prompt])
    out = pair.target.generate(
        input_ids=x,
        attention_mask=torch.ones_like(x),
        assistant_model=pair.draft,
        max_new_tokens=max_new_tokens,
        **setting.generate_kwargs(),
    )
    new = tuple(int(t) for t in out[0, len(prompt) :].tolist())
    if len(new) != max_new_tokens:
        raise RuntimeError(f"generate returned {len(new)} new tokens, asked for {max_new_tokens}")
    return new


def sample_generations(pair, prompt, setting: Setting, n: int, m: int, seed: int) -> list[tuple]:
    torch.manual_seed(seed)
    return [generate_new_tokens(pair, prompt, setting, m) for _ in range(n)]
