"""Loading vLLM's verification files from any release (0.8.5 to current) with
``wheel_import.load_following``: the file and the vLLM modules it imports run from the wheel as
they are; what cannot run here is stood in for by the loader's generic rule. Two overrides and
one fact hold for every release (not a list kept per release):

* ``vllm.logger``: ``init_logger(name)`` is ``logging.getLogger(name)`` (vLLM's logger sets up
  process-wide handlers);
* ``vllm.platforms``: the platform is this machine's CPU (``device_type = "cpu"``,
  ``simple_compile_backend = "eager"``; any other platform query answers a false placeholder:
  no CUDA, no ROCm), since vLLM's platform detection looks for a GPU driver;
* after ``vllm.triton_utils.importing`` runs, ``HAS_TRITON`` is True: vLLM's Triton gate
  (0.10 on) turns Triton off on a machine without an active GPU driver, but here its kernels
  run under Triton's interpreter (``TRITON_INTERPRET=1``, ``loader.ensure_triton``).
"""

from __future__ import annotations

import logging

from . import loader, wheel_import
from .wheel_import import Placeholder


class CpuPlatform(Placeholder):
    """vLLM's ``current_platform`` here: the CPU; other queries answer false placeholders."""

    device_type = "cpu"
    device_name = "cpu"
    simple_compile_backend = "eager"
    dispatch_key = "CPU"

    def __repr__(self):
        return "CpuPlatform (specverify stand-in)"


def vllm_overrides() -> dict:
    """The overrides that hold for every vLLM release (module docstring)."""
    return {
        "vllm.logger": loader.standin("vllm.logger", "stand-in: stdlib logging", init_logger=logging.getLogger),
        "vllm.platforms": loader.standin(
            "vllm.platforms", "stand-in: this machine's CPU as vLLM's platform", current_platform=CpuPlatform()
        ),
    }


VLLM_AFTER = {"vllm.triton_utils.importing": {"HAS_TRITON": True}}
"""Set after the module runs (module docstring: Triton runs here, interpreted)."""


def load_vllm(dotted: str, version: str, download: bool = True) -> wheel_import.Loaded:
    """vLLM ``version``'s module ``dotted`` loaded with the same-wheel modules it imports
    (``wheel_import.Loaded``); loader.Unavailable (one line) when the wheel is not there (and
    ``download`` is off or fails) or when ``dotted`` itself does not import."""
    wheel = loader.wheel_file("vllm", version, download)
    return wheel_import.load_following(dotted, "vllm", version, wheel, vllm_overrides(), VLLM_AFTER)
