"""The kernel contract: shapes, ids, the accepted prefix equal to the drafts, -1 padding, inputs
left untouched (``kernel.tasks.validate_outputs``, in the subject's process), the same uniforms (or
generator seed) giving the same outputs, and batch rows independent of their order. A kernel that
fails on NumPy arrays for a reason that reads as wanting torch tensors is judged with torch tensors.
"""

from __future__ import annotations

import numpy as np

from ...battery.core import Finding
from ...battery.guards import ContractBreach
from . import cases as kc
from .calls import KernelCalls
from .tasks import kind_task


def numpy_type_error(message: str) -> bool:
    """Whether a breach's message reads as a kernel that wants torch tensors (its raise site,
    " (at FILE:LINE in FUNCTION)", aside: a file named numpy_kernel.py says nothing)."""
    words = message.rsplit(" (at ", 1)[0]
    return any(w in words for w in ("TypeError", "AttributeError", "numpy"))


def torch_available() -> bool:
    """Whether torch imports here."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


class KernelContract(KernelCalls):
    """The contract on the run's first case, first of the checks (``KernelBattery.run``)."""

    def contract(self, case: kc.KernelCase) -> bool:
        self.generator = self.call(kind_task, seconds=10.0)
        inst = np.repeat(np.arange(case.n), 8)
        u = None if self.generator else self.contract_rng.random((len(inst), case.k + 1), dtype=np.float32)
        order = self.contract_rng.permutation(len(inst))
        try:
            first = self.rows(case, inst, u, generators=self.generators, order=order)
        except ContractBreach as exc:
            if not numpy_type_error(str(exc)) or not torch_available():
                self.breach(str(exc), case)
                return False
            self.arrays = "torch"
            try:
                first = self.rows(case, inst, u, generators=self.generators, order=order)
            except ContractBreach as exc2:
                self.breach(f"{exc2} (with torch tensors; with NumPy arrays: {exc})", case)
                return False
            self.result.ran.append("contract: fails on NumPy arrays; judged with torch tensors (CPU)")
        again = self.rows(case, inst, u, generators=self.generators, order=order)
        same = all(np.array_equal(a, b) for a, b in zip(first, again))
        self.statistical = self.generator
        if not same and self.generator:
            self.result.findings.append(
                Finding(
                    "rng",
                    "contract",
                    "the same generator seed gave different outputs: the kernel "
                    "draws randomness besides its generator (a seeded request would not replay)",
                    case.name,
                )
            )
        elif not same:
            self.result.findings.append(
                Finding(
                    "rng",
                    "contract",
                    "the same uniforms gave different outputs: the kernel draws "
                    "randomness besides its uniforms; judged by statistics",
                    case.name,
                )
            )
            self.statistical = True
        elif not self.generator:
            moved = self.rows(case, inst, u, generators=self.generators)  # the same rows in another batch order
            differ = [int(r) for r in np.flatnonzero((moved[0] != first[0]).any(axis=1) | (moved[1] != first[1]))]
            if differ:
                r = differ[0]
                self.breach(
                    f"batch rows are not independent: row {case.labels[inst[r]]} with the same uniforms "
                    f"gave {first[0][r].tolist()} in one batch order and {moved[0][r].tolist()} in "
                    f"another ({len(differ)} of {len(inst)} rows differ): a row reads another row's "
                    f"inputs",
                    case,
                )
                return False
        kind = "a generator" if self.generator else "explicit uniforms"
        self.result.ran.append(f"contract: {case.name}: {len(inst)} rows twice, {kind}, {self.arrays} arrays")
        return True


__all__ = ["KernelContract", "numpy_type_error", "torch_available"]
