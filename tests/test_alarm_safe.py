"""An interrupting alarm never lands in bookkeeping that must run to its end, and a followed torch
run never outlives its run (``common.alarm_safe``, ``battery.guards.time_limit``,
``laws.torch_random.Interception``). Deterministic: no statistics."""

from __future__ import annotations

import time

import pytest

from specverify.battery.guards import GuardStopped, time_limit
from specverify.common.alarm_safe import in_unalarmed, unalarmed
from specverify.laws.exact import enumerate_distribution


@unalarmed
def _bookkeeping(done: list) -> None:
    end = time.monotonic() + 0.2
    while time.monotonic() < end:
        pass
    done.append(True)


def test_an_alarm_waits_for_marked_code_then_lands():
    done: list = []
    with pytest.raises(GuardStopped, match="body did not return within 0.05 s"):
        with time_limit(0.05, "body", GuardStopped):
            _bookkeeping(done)  # runs past the limit: the alarm must not land inside it
            time.sleep(2)  # the deferred alarm lands here
    assert done == [True]


def test_unmarked_code_is_interrupted():
    import sys

    assert not in_unalarmed(sys._getframe())
    done: list = []

    def plain():
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            pass
        done.append(True)

    with pytest.raises(GuardStopped):
        with time_limit(0.05, "body", GuardStopped):
            plain()
    assert done == []


def test_a_mode_the_subject_leaves_does_not_keep_the_run_alive():
    """A subject that pushes a TorchFunctionMode and never pops it (as ``torch.set_default_device``
    does, or a ``with`` interrupted in its exit) must not leave the enumerator's mode behind: the
    next enumeration's seeded draws would be answered by the dead run ("not seeded")."""
    torch = pytest.importorskip("torch")
    from torch.overrides import TorchFunctionMode

    depth = torch._C._len_torch_function_stack()

    def leaves_a_mode(rng):
        TorchFunctionMode().__enter__()
        return 0

    assert enumerate_distribution(leaves_a_mode) == {0: 1.0}
    assert torch._C._len_torch_function_stack() == depth

    def seeded_coin(rng):
        g = torch.Generator().manual_seed(int(rng.integers(2**63)))
        return bool(torch.rand((), generator=g, dtype=torch.float64) < 0.25)

    got = enumerate_distribution(seeded_coin)
    assert got.keys() == {False, True} and abs(got[True] - 0.25) < 1e-12
