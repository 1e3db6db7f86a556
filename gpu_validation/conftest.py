"""The GPU stage's pair: the real Qwen2.5 pair, or a tiny random Qwen2 pair for CI.

``SPECVERIFY_STAGE_PAIR`` picks which pair the same tests run on:

- ``real`` (the default; ``tox -e gpu``): the handout's pair on CUDA. Without torch, CUDA or the
  weights every test skips with one line per reason, and nothing fails.
  ``SPECVERIFY_REAL_CPU=1`` runs it on the CPU (fp32) instead, for the local GGUF pair of
  ../shared/tools/real-pair. Weights count as available when (a) SPECVERIFY_REAL_DIR,
  SPECVERIFY_REAL_TARGET_GGUF and SPECVERIFY_REAL_DRAFT_GGUF name two existing GGUF files, (b)
  both handout ids (Qwen/Qwen2.5-1.5B-Instruct, Qwen/Qwen2.5-0.5B-Instruct) are in the local
  Hugging Face cache, or (c) SPECVERIFY_ALLOW_DOWNLOAD=1 says the hub may be asked. Nothing here
  downloads by itself.
- ``tiny`` (``tox -e cpu``, every CI run): ``specverify.models.loading.tiny_pair(seed=0)``, a
  random Qwen2 pair built from a config (nothing downloaded), on CUDA when there is one
  (``SPECVERIFY_STAGE_DEVICE=cpu`` or ``cuda`` forces it), scaled down (``TINY_SCALE``). It
  never skips: a missing library, a renamed function or a drafter that cannot run fails.

Four variables size a run (``SIZE_VARIABLES``; each a positive integer, a bad one is refused
before anything runs), for a CPU run of the real pair that must end in reasonable time:
``SPECVERIFY_NEW_TOKENS`` the answers' length (default 64 real, 24 tiny),
``SPECVERIFY_TABLE_PROMPTS`` the table's prompts per workload (3 real, 1 tiny; at most 6, the
edit workload's built-in prompts), ``SPECVERIFY_TABLE_REPEATS`` its timing repeats (20 real, 3 tiny) and
``SPECVERIFY_HEAD_POSITIONS`` the Medusa head's training positions (256 real, 128 tiny). The tests in
``test_kernel_cuda.py`` need CUDA only (no weights) and skip with one line without it, under
either pair. Torch is imported only inside fixtures, so collection never fails without it.
"""

import os
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

DEFAULT_TARGET = "Qwen/Qwen2.5-1.5B-Instruct"
DEFAULT_DRAFT = "Qwen/Qwen2.5-0.5B-Instruct"
PAIRS = ("real", "tiny")
HERE = Path(__file__).resolve().parent
CUDA_ONLY = ("test_kernel_cuda.py",)


@dataclass(frozen=True)
class Scale:
    """How much of the stage to run: answer length, the table's prompts per workload and timing
    repeats, the Medusa head's training positions, and whether greedy output must be identical
    to target-only's with no near-tie excused (``exact_greedy``)."""

    new_tokens: int
    table_prompts: int
    table_repeats: int
    head_positions: int
    exact_greedy: bool


REAL_SCALE = Scale(new_tokens=64, table_prompts=3, table_repeats=20, head_positions=256, exact_greedy=False)
TINY_SCALE = Scale(new_tokens=24, table_prompts=1, table_repeats=3, head_positions=128, exact_greedy=True)
"""The tiny pair in fp32: its smallest gap between the top two target logits over the stage's
reference positions is orders of magnitude above fp32 rounding (the greedy test prints it), so
the cached and the batched forwards cannot flip an argmax: greedy equality must hold exactly."""


SIZE_VARIABLES = {
    "new_tokens": "SPECVERIFY_NEW_TOKENS",
    "table_prompts": "SPECVERIFY_TABLE_PROMPTS",
    "table_repeats": "SPECVERIFY_TABLE_REPEATS",
    "head_positions": "SPECVERIFY_HEAD_POSITIONS",
}
"""The environment variables that size a run, by the Scale field each one overrides."""


def sized(scale: Scale) -> Scale:
    """``scale`` with each field of SIZE_VARIABLES that is set in the environment replaced by its
    value, a positive integer (anything else is refused, naming the variable). For a CPU run of
    the real pair: fewer tokens, prompts, repeats or head positions change how long the stage
    takes and how much each figure averages over, not what a test checks."""
    changes = {}
    for field, variable in SIZE_VARIABLES.items():
        text = os.environ.get(variable)
        if text is None:
            continue
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise pytest.UsageError(f"{variable}: expected a positive integer, got {text!r}")
        changes[field] = value
    return replace(scale, **changes)


def stage_pair_kind() -> str:
    """``real`` or ``tiny``, from SPECVERIFY_STAGE_PAIR (default ``real``); anything else is refused."""
    kind = os.environ.get("SPECVERIFY_STAGE_PAIR", "real")
    if kind not in PAIRS:
        raise pytest.UsageError(f"SPECVERIFY_STAGE_PAIR: expected one of {PAIRS}, got {kind!r}")
    return kind


def _gguf_pair():
    folder = os.environ.get("SPECVERIFY_REAL_DIR")
    names = [os.environ.get("SPECVERIFY_REAL_TARGET_GGUF"), os.environ.get("SPECVERIFY_REAL_DRAFT_GGUF")]
    if folder and all(names) and all((Path(folder) / n).is_file() for n in names):
        return {"target": folder, "draft": folder, "target_gguf": names[0], "draft_gguf": names[1]}
    return None


def _cached(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def pair_source():
    """Keyword arguments for specverify.models.loading.load_pair, or None when unavailable."""
    gguf = _gguf_pair()
    if gguf:
        return gguf
    allowed = os.environ.get("SPECVERIFY_ALLOW_DOWNLOAD") == "1"
    if allowed or (_cached(DEFAULT_TARGET) and _cached(DEFAULT_DRAFT)):
        return {"target": DEFAULT_TARGET, "draft": DEFAULT_DRAFT}
    return None


def on_cpu_by_request() -> bool:
    return os.environ.get("SPECVERIFY_REAL_CPU") == "1"


def unavailable_reason():
    """Why the pair tests cannot run, or None. The tiny pair always runs: its tests fail, never
    skip, on whatever is missing."""
    if stage_pair_kind() == "tiny":
        return None
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        return f"GPU stage skipped: torch/transformers not installed ({exc}); pip install -e '.[models]'"
    if not torch.cuda.is_available() and not on_cpu_by_request():
        return "GPU stage skipped: CUDA is not available on this machine (SPECVERIFY_REAL_CPU=1 runs it on the CPU)"
    if pair_source() is None:
        return (
            "GPU stage skipped: Qwen2.5 weights unavailable (not in the HF cache, no "
            "SPECVERIFY_REAL_DIR GGUF pair, SPECVERIFY_ALLOW_DOWNLOAD unset)"
        )
    return None


def cuda_unavailable_reason():
    """Why the CUDA-only tests (no model weights: test_kernel_cuda.py) cannot run, or None."""
    try:
        import torch
    except ImportError as exc:
        return f"GPU stage skipped: torch not installed ({exc}); pip install -e '.[models]'"
    if not torch.cuda.is_available():
        return "GPU stage skipped: CUDA is not available on this machine (kernel tests need no weights)"
    return None


def real_device() -> str:
    """Where the real pair runs: cuda when available, cpu on request (SPECVERIFY_REAL_CPU=1), else none."""
    try:
        import torch
    except ImportError:
        return "none"
    return "cuda" if torch.cuda.is_available() else "cpu" if on_cpu_by_request() else "none"


def pytest_report_header(config):
    kind = stage_pair_kind()
    device = stage_device() if kind == "tiny" else real_device()
    return f"gpu_validation: pair={kind} device={device} (from SPECVERIFY_STAGE_PAIR, SPECVERIFY_STAGE_DEVICE)"


def pytest_collection_modifyitems(config, items):
    """Skip this folder's tests only: the hook sees every collected item of the session. The
    kernel tests need CUDA only; the real pair's tests need the Qwen2.5 weights too."""
    mine = [item for item in items if HERE in Path(str(item.path)).resolve().parents]
    reasons = {}
    for item in mine:
        cuda_only = Path(str(item.path)).name in CUDA_ONLY
        if cuda_only not in reasons:
            reasons[cuda_only] = cuda_unavailable_reason() if cuda_only else unavailable_reason()
        if reasons[cuda_only] is not None:
            item.add_marker(pytest.mark.skip(reason=reasons[cuda_only]))


def stage_device() -> str:
    """Where the tiny pair runs: SPECVERIFY_STAGE_DEVICE, else cuda when available, else cpu."""
    chosen = os.environ.get("SPECVERIFY_STAGE_DEVICE")
    if chosen:
        return chosen
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass(frozen=True)
class Stage:
    """The pair the stage runs on, which one it is, and how much of the stage to run (its pair's
    default scale, sized by the environment: ``sized``)."""

    pair: object
    kind: str
    scale: Scale


def pytest_configure(config):
    """Refuse a bad SPECVERIFY_STAGE_PAIR or size variable before anything runs or skips."""
    stage_pair_kind()
    sized(REAL_SCALE)


def tiny_stage_pair():
    """``tiny_pair(seed=0)`` moved to ``stage_device()`` (fp32 wherever it runs)."""
    from specverify.models import loading

    pair = loading.tiny_pair(seed=0)
    device = stage_device()
    if device == "cpu":
        return pair
    return replace(pair, target=pair.target.to(device), draft=pair.draft.to(device), device=device)


@pytest.fixture(scope="session")
def stage():
    from specverify.models import loading

    if stage_pair_kind() == "tiny":
        return Stage(tiny_stage_pair(), "tiny", sized(TINY_SCALE))
    return Stage(loading.load_pair(device=real_device(), **pair_source()), "real", sized(REAL_SCALE))


@pytest.fixture(scope="module", autouse=True)
def one_thread_for_the_tiny_pair_on_cpu(request):
    """The tiny pair is launch-bound: on a shared CPU one thread is ~10x faster than several."""
    if stage_pair_kind() != "tiny" or stage_device() != "cpu" or Path(str(request.path)).name in CUDA_ONLY:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
