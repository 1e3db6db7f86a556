"""The round interface as the registry hands it out (``interfaces.get("round")``): the handout's
``speculative_step(p_fn, q_fn, prefix, k, rng) -> list[int]``, judged by the round battery
(``round.battery``). A thin object over that module satisfying ``interfaces.protocol.Interface``;
the battery itself, its cases and its units live in the package's other modules."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...battery.core import BatteryResult
from ...common.validation import with_overrides
from ..protocol import InterfaceDefaults, Unit
from . import battery
from .cases import Budget, get_budget


class RoundInterface(InterfaceDefaults):
    """``interfaces.protocol.Interface`` for round samplers: several worker processes may share
    a run (``workers``), and its case enumerations are units for the Ray executor."""

    NAME = battery.NAME
    PARAMETERS = battery.PARAMETERS
    ALIASES = battery.ALIASES

    def budget(self, budget: Any, overrides: Mapping[str, Any] | None = None) -> Budget:
        return with_overrides(self.NAME, get_budget(budget), dict(overrides or {}))

    def coverage(self, budget: Any) -> str:
        return battery.coverage(budget)

    def reach(self, budget: Any) -> dict[str, int]:
        return battery.reach(budget)

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
        """``round.battery.run``; ``reference``: the engine's own target-only round
        (``round.own_reference``); ``units``: enumerations computed by other tasks, replayed
        (``round.units.prefetched``), what their processes printed and their seconds added."""
        from .units import merge_output, prefetched

        if cases is not None:
            self.declared_cases(cases)
        if device is not None:
            self.device(device)
        if units:
            overrides["prefetched"] = prefetched(units)
        result = battery.run(
            subject,
            budget,
            seed,
            deadline=deadline,
            stop_on_first=stop_on_first,
            aim=aim,
            workers=workers,
            reference=reference,
            **overrides,
        )
        if units:
            merge_output(result, units)
        return result

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
        return battery.counterexample(subject, budget, seed, result, aim=aim, reference=reference)

    def units(self, load: Callable[[], Any], budget: Any, stop_on_first: bool | tuple[str, ...] = False) -> list[Unit]:
        return battery.units(load, budget, stop_on_first)


INTERFACE = RoundInterface()
"""The round interface, as ``interfaces.get("round")`` returns it."""

__all__ = ["INTERFACE", "RoundInterface"]
