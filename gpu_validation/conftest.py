"""GPU stage: runs only with torch, a CUDA device and the Qwen2.5 pair; otherwise one skip line.

SPECVERIFY_REAL_CPU=1 runs the same tests on the CPU (fp32) instead, for the local real pair of
../shared/tools/real-pair; SPECVERIFY_NEW_TOKENS shortens the answers (default 64).

Weights count as available when (a) SPECVERIFY_REAL_DIR, SPECVERIFY_REAL_TARGET_GGUF and
SPECVERIFY_REAL_DRAFT_GGUF name two existing GGUF files, (b) both handout ids
(Qwen/Qwen2.5-1.5B-Instruct, Qwen/Qwen2.5-0.5B-Instruct) are in the local Hugging Face cache, or
(c) SPECVERIFY_ALLOW_DOWNLOAD=1 says the hub may be asked. Nothing here downloads by itself.
The test module imports torch only inside fixtures, so collection never fails without it.
"""

import os
from pathlib import Path

import pytest

DEFAULT_TARGET = "Qwen/Qwen2.5-1.5B-Instruct"
DEFAULT_DRAFT = "Qwen/Qwen2.5-0.5B-Instruct"


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


def unavailable_reason():
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


def on_cpu_by_request() -> bool:
    return os.environ.get("SPECVERIFY_REAL_CPU") == "1"


HERE = Path(__file__).resolve().parent


def cuda_unavailable_reason():
    """Why the CUDA-only tests (no model weights: test_kernel_cuda.py) cannot run, or None."""
    try:
        import torch
    except ImportError as exc:
        return f"GPU stage skipped: torch not installed ({exc}); pip install -e '.[models]'"
    if not torch.cuda.is_available():
        return "GPU stage skipped: CUDA is not available on this machine (kernel tests need no weights)"
    return None


CUDA_ONLY = ("test_kernel_cuda.py",)


def pytest_collection_modifyitems(config, items):
    """Skip this folder's tests only: the hook sees every collected item of the session. The
    kernel tests need CUDA only; the pair tests need the Qwen2.5 weights too."""
    mine = [item for item in items if HERE in Path(str(item.path)).resolve().parents]
    reasons = {}
    for item in mine:
        cuda_only = Path(str(item.path)).name in CUDA_ONLY
        if cuda_only not in reasons:
            reasons[cuda_only] = cuda_unavailable_reason() if cuda_only else unavailable_reason()
        if reasons[cuda_only] is not None:
            item.add_marker(pytest.mark.skip(reason=reasons[cuda_only]))


@pytest.fixture(scope="session")
def qwen_pair():
    import torch

    from specverify.models import loading

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return loading.load_pair(device=device, **pair_source())
