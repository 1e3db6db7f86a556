"""The round judged against the engine's own target-only round (``reference=``, ``--reference``).

Without a reference a round case's law is the target's (``round.cases.target_distribution``).
With one (a function of the round's interface, ``(p_fn, q_fn, prefix, k, rng) -> list[int]``,
which may ignore the draft and k: e.g. one token drawn from ``p_fn(prefix)``), a case's law is the
reference's exact law of its first m tokens, enumerated in the reference's own process
(``round.tasks.enumerate_task``: the subject's task, the same guards and contract). The exact
detector and the chi-square judge every case against it. The engine-scale cases keep the
target's rows: they are ``p_fn``'s own rows, which a target-only round has no parameter to change.

A case the enumerator cannot follow on the reference is not judged (a shortfall); a reference
that raises, dies, hangs or returns junk is a finding on it (``check`` and ``kind`` "reference",
never a verdict on the subject) and a shortfall, and no case is judged against it after that.
Where the reference's law differs from the target's, a ``ran`` line says so (information).
"""

from __future__ import annotations

from typing import Any

from ...battery.core import Finding
from ...battery.guards import ContractBreach
from ...laws import exact
from .cases import Case, target_distribution
from .sampling import RoundSampling

CHECK = "reference"
"""The check and the kind of a finding on a broken reference (not a breaking kind)."""


class RoundReference(RoundSampling):
    """``wanted``: the law a round case is judged against (the target's, or the reference's)."""

    reference: Any = None
    """The engine's own target-only round (a started ``runner.Runner``), or None."""

    def wanted(self, case: Case) -> dict | None:
        """The case's law of its first m tokens: the target's without a reference, else the
        reference's (cached); None when the case cannot be judged against it (said)."""
        if self.reference is None:
            return target_distribution(case)
        cache = self.__dict__.setdefault("reference_laws", {})
        if id(case) not in cache:
            cache[id(case)] = (case, self.reference_law(case))
        return cache[id(case)][1]

    def reference_law(self, case: Case) -> dict | None:
        r = self.result
        if any(f.check == CHECK for f in r.findings):
            return None
        try:
            status, value = self.enumeration((case, self.budget), self.reference)
        except ContractBreach as exc:
            status, value = "breach", f"died: {exc}"
        if status == "ok":
            tv = exact.total_variation(value, target_distribution(case))
            if tv > 1e-9:
                r.ran.append(
                    f"reference differs: {case.name}: your target-only round's law is exact TV {tv:.4g} from the "
                    "target's (information, not a finding: the sampler is judged against your reference)"
                )
            return value
        if status == "not-enumerable":
            r.shortfalls.append(f"{case.name}: not judged: the enumerator cannot follow the reference ({value})")
            return None
        words = f"hangs: {value}" if status == "guard" else f"broke its contract: {value}"
        r.findings.append(Finding(CHECK, CHECK, f"the reference {words}", case.name))
        r.shortfalls.append(
            f"{case.name}: the reference (the engine's own target-only round) is broken; the sampler not judged "
            "against it from here on"
        )
        return None


__all__ = ["CHECK", "RoundReference"]
