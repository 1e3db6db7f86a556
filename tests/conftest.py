"""Fixtures shared by the tiny-model test modules (each module skips itself without torch)."""

import pytest


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models are launch-bound; on a shared 2-core machine one thread is ~10x faster."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def pair(one_thread):
    """The tiny random Qwen2 pair (``loading.tiny_pair(seed=0)``), one per module."""
    from specverify.models import loading

    return loading.tiny_pair(seed=0)


@pytest.fixture(scope="module")
def references(pair, request):
    """Target-only greedy generations of the module's ``PROMPTS`` (``NEW_TOKENS`` each) and the
    target's teacher-forced logits over them."""
    from specverify.models import decoding

    out = []
    for text in request.module.PROMPTS:
        gen = decoding.target_only_generate(
            pair.target, pair.tokenizer.encode(text), request.module.NEW_TOKENS, vocab_size=pair.vocab_size
        )
        out.append((gen, decoding.teacher_forced_logits(pair.target, gen.ids, pair.vocab_size)))
    return out
