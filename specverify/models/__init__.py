"""Real draft/target pairs: loading, the KV-cached speculative loop, and predict-vs-measure.

Needs the ``models`` extra (torch, transformers, accelerate, gguf): ``pip install -e '.[models]'``.
Import the submodules (``specverify.models.decoding`` ...) directly; this package imports nothing
heavy so that ``import specverify`` stays NumPy-only.
"""

__all__ = ["loading", "decoding", "measure"]
