"""The loop interface as the registry hands it out (``interfaces.get("loop")``): a whole
generation loop ``generate(target, draft, requests, k, rng) -> outputs``, judged by the loop
battery (``loop.battery``). A thin object over that module satisfying
``interfaces.protocol.Interface``; a loop subject may declare its own cases
(``loop.battery.CASES_ATTRIBUTE``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...battery.budgets import LoopBudget
from ...battery.core import BatteryResult
from ...common.validation import with_overrides
from ..protocol import InterfaceDefaults
from . import battery


class LoopInterface(InterfaceDefaults):
    """``interfaces.protocol.Interface`` for generation loops: declared cases, one process, no
    units (the loop battery runs whole)."""

    NAME = battery.NAME
    PARAMETERS = battery.PARAMETERS
    ALIASES = battery.ALIASES

    def budget(self, budget: Any, overrides: Mapping[str, Any] | None = None) -> LoopBudget:
        return with_overrides(self.NAME, battery.get_budget(budget), dict(overrides or {}))

    def coverage(self, budget: Any) -> str:
        return battery.coverage(budget)

    def reach(self, budget: Any) -> dict[str, int]:
        return battery.reach(budget)

    def subject_cases(self, subject: Any) -> tuple[Any, ...] | None:
        return battery.subject_cases(subject)

    def declared_cases(self, cases: Any) -> tuple[Any, ...]:
        return battery.declared_cases(cases)

    def declared_coverage(self, budget: Any, cases: Sequence[Any], from_subject: bool) -> str:
        return battery.declared_coverage(budget, cases, from_subject)

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
        reference: Any = None,
        **overrides: Any,
    ) -> BatteryResult:
        """``loop.battery.run`` (``workers`` and ``units``: the loop battery runs whole, in one
        process; ``reference``: the engine's own target-only path, ``loop.own_reference``)."""
        if device is not None:
            self.device(device)
        return battery.run(
            subject,
            budget,
            seed,
            deadline=deadline,
            stop_on_first=stop_on_first,
            aim=aim,
            cases=cases,
            reference=reference,
            **overrides,
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
        reference: Any = None,
    ) -> dict[str, Any] | None:
        return battery.counterexample(subject, budget, seed, result, aim=aim, cases=cases, reference=reference)


INTERFACE = LoopInterface()
"""The loop interface, as ``interfaces.get("loop")`` returns it."""

__all__ = ["INTERFACE", "LoopInterface"]
