"""The kernel interface as the registry hands it out (``interfaces.get("kernel")``): a batched
verification kernel ``kernel(draft_ids, draft_probs, target_probs, uniforms | generator) ->
(output_ids, num_accepted)``, judged by the kernel battery (``kernel.battery``). A thin object
over that module satisfying ``interfaces.protocol.Interface``; the only interface whose subjects
may run on a CUDA device."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...battery.budgets import KernelBudget
from ...battery.core import BatteryResult
from ...common.validation import with_overrides
from ..protocol import InterfaceDefaults
from . import battery
from .tasks import check_device


class KernelInterface(InterfaceDefaults):
    """``interfaces.protocol.Interface`` for kernels: a device (``cuda``), one process (its calls
    are already batched), no units; the counterexample is found during the run."""

    NAME = battery.NAME
    PARAMETERS = battery.PARAMETERS
    ALIASES = battery.ALIASES

    def budget(self, budget: Any, overrides: Mapping[str, Any] | None = None) -> KernelBudget:
        return with_overrides(self.NAME, battery.get_budget(budget), dict(overrides or {}))

    def coverage(self, budget: Any) -> str:
        return battery.coverage(budget)

    def reach(self, budget: Any) -> dict[str, int]:
        return battery.reach(budget)

    def device(self, device: str) -> str:
        """``kernel.tasks.check_device``: cpu, or cuda / cuda:N where torch sees CUDA."""
        return check_device(device)

    def run(
        self,
        subject: Any,
        budget: Any,
        seed: int,
        *,
        deadline: float | None = None,
        stop_on_first: bool | tuple[str, ...] = False,
        aim: Any = None,
        cases: Sequence[Any] | None = None,
        device: str | None = None,
        units: Sequence[dict[str, Any]] = (),
        workers: int = 1,
        **overrides: Any,
    ) -> BatteryResult:
        """``kernel.battery.run``; ``device``: the budget's ``device`` (checked by ``device``)."""
        if device is not None:
            overrides["device"] = self.device(device)
        return battery.run(
            subject, budget, seed, deadline=deadline, stop_on_first=stop_on_first, aim=aim, cases=cases, **overrides
        )

    def counterexample(
        self,
        subject: Any,
        budget: Any,
        seed: int,
        result: BatteryResult,
        *,
        aim: Any = None,
        cases: Sequence[Any] | None = None,
    ) -> dict[str, Any] | None:
        return battery.counterexample(subject, budget, seed, result, aim=aim)


INTERFACE = KernelInterface()
"""The kernel interface, as ``interfaces.get("kernel")`` returns it."""

__all__ = ["INTERFACE", "KernelInterface"]
