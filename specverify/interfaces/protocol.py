"""What every subject interface provides: the contract between the registry and the batteries.

``Interface`` is a ``typing.Protocol``: the registry (``specverify.interfaces.get``) returns an
object that satisfies it for each name of ``interfaces.NAMES``, and everything above the registry
(``surface/``: the ``check`` command, the API, the pytest plugin) uses only the registry and this
contract, never a named interface's modules. A new interface is one new package in
``interfaces/`` with an ``interface.py`` whose ``INTERFACE`` satisfies ``Interface``, and its
name in ``interfaces.NAMES``; nothing above the registry learns its name.

An interface owns:

- detection: ``NAME``, ``PARAMETERS`` (the parameter names its subjects use, called positionally
  in this order) and ``ALIASES`` (other spellings of the same parameters); the registry scores a
  function by them (``interfaces.score``, ``interfaces.detect``);
- its budget: ``budget(budget, overrides)`` turns what a caller gave (a name of
  ``battery.budgets.NAMES``, ``tv=X``, or a budget object) into its own section, once, with the
  caller's overrides of its fields checked and applied; ``coverage`` and ``reach`` say what
  that section runs;
- the cases a subject declares instead of the standard ones (``subject_cases``,
  ``declared_cases``, ``declared_coverage``; an interface that takes none says so);
- the device its subjects' tensors live on (``device``; CPU only unless it says otherwise);
- the run: ``run(subject, budget, seed, ...) -> BatteryResult``, never raising for a broken
  subject; ``counterexample`` (the smallest model that shows a finding, as a dict the report
  prints); ``units`` (independent pieces of a run for the Ray executor; their finished results
  come back through ``run(units=...)``).

``InterfaceDefaults`` is what an interface inherits for the parts it does not have (declared
cases, a device, units).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import InterfaceError

if TYPE_CHECKING:
    from ..battery.core import BatteryResult

Unit = tuple[Callable[..., Any], tuple[Any, ...]]
"""An independent piece of a battery run (``(function, arguments)``), run as its own task."""


@runtime_checkable
class Interface(Protocol):
    """One kind of subject: how it is told from its signature, budgeted, called and judged."""

    NAME: str
    PARAMETERS: tuple[str, ...]
    ALIASES: Mapping[str, tuple[str, ...]]

    def budget(self, budget: Any, overrides: Mapping[str, Any] | None = None) -> Any:
        """This interface's section of ``budget`` (a name, ``tv=X``, a budget object of this
        interface's class as it is, another interface's object by its name) with ``overrides``
        replacing its fields; InterfaceError for an unknown name, ArgumentError /
        ArgumentTypeError for a bad override, each naming it."""
        ...

    def coverage(self, budget: Any) -> str:
        """What a run at ``budget`` (a resolved section) covers, in one line."""
        ...

    def reach(self, budget: Any) -> dict[str, int]:
        """The largest value each swept dimension reaches at ``budget``."""
        ...

    def subject_cases(self, subject: Callable[..., Any]) -> tuple[Any, ...] | None:
        """The cases ``subject`` declares for itself (read where it lives), or None."""
        ...

    def declared_cases(self, cases: Any) -> tuple[Any, ...]:
        """A caller's ``cases`` as this interface runs them; InterfaceError when they are not
        cases of its own or it runs its own cases only."""
        ...

    def declared_coverage(self, budget: Any, cases: Sequence[Any], from_subject: bool) -> str:
        """The coverage words of a run on declared ``cases`` (the subject's own, or a caller's)."""
        ...

    def device(self, device: str) -> str:
        """``device`` when this interface's subjects can run there; InterfaceError (a usage
        error) when its subjects run on the CPU only, EnvironmentProblem when this machine lacks
        what the device needs."""
        ...

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
        """Every check on every case at ``budget``; never raises for a broken subject (its
        breaches are findings). ``units``: the finished results of ``units``' pieces, replayed;
        ``workers``: processes that may share the run (an interface that runs whole ignores it)."""
        ...

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
        """The smallest model that shows ``result``'s findings, as the report prints it; None
        without one."""
        ...

    def units(self, load: Callable[[], Any], budget: Any, stop_on_first: bool | tuple[str, ...] = False) -> list[Unit]:
        """The run's independent pieces for the Ray executor (``load`` starts the subject where a
        piece runs); empty when the battery runs whole."""
        ...


class InterfaceDefaults:
    """The parts an interface may lack: no declared cases, the CPU only, no units."""

    NAME = "?"

    def subject_cases(self, subject: Callable[..., Any]) -> tuple[Any, ...] | None:
        return None

    def declared_cases(self, cases: Any) -> tuple[Any, ...]:
        raise InterfaceError(f"cases: the {self.NAME} interface runs its own cases only")

    def declared_coverage(self, budget: Any, cases: Sequence[Any], from_subject: bool) -> str:
        raise InterfaceError(f"cases: the {self.NAME} interface runs its own cases only")

    def device(self, device: str) -> str:
        raise InterfaceError(f"device: only kernels run on a device; this subject is judged as a {self.NAME}")

    def units(self, load: Callable[[], Any], budget: Any, stop_on_first: bool | tuple[str, ...] = False) -> list[Unit]:
        return []


__all__ = ["Interface", "InterfaceDefaults", "Unit"]
