"""The kernel's measure-zero events and the rule's order along the uniforms: u = 0 and
u = 1 - 2^-24 on every coin and final uniform, where what a kernel does (a p(x) = 0 draft
accepted, a p >= q draft rejected, a token of zero probability emitted) is reported with its
probability on the float32 grid (kind "edge"), separately from the law, but only where the row
keeps to the rule at interior uniforms of the same cell (``INTERIOR``); what a kernel does with a
draft whose q(x) = 0; and a note when it maps its uniforms to outcomes in another order than the
rule's.
"""

from __future__ import annotations

import numpy as np

from ...battery.core import Finding
from ...laws.uniform_cells import FLOAT32_ONE_MINUS
from . import cases as kc
from .plan import GRID_PROBABILITY, tolerance
from .scans import KernelScans

INTERIOR = (1 / 16, 1 / 4, 1 / 2, 3 / 4, 15 / 16)
"""Where across its rule cell an edge probe's deviation is probed again before it is called
measure-zero (``KernelBattery.deviation_inside``)."""


class KernelEdges(KernelScans):
    """The edge probes, the q(x) = 0 drafts and the order note."""

    def edges(self, case, insts, accept_pts, bases):
        """Measure-zero probes: u = 0 and 1 - 2^-24 on each coin and each final uniform. A row
        that deviates there is reported as a measure-zero event only if it keeps to the rule at
        interior uniforms of the same cell, in the same batch (``deviation_inside``)."""
        k = case.k
        rows: list[tuple[int, np.ndarray]] = []
        what: list[tuple[str, int, int, float, bool | None]] = []  # (kind, instance, index, u, coin or None)
        for b in insts:
            xs = case.drafts(b)
            for i, x in enumerate(xs):
                if any(np.isnan(accept_pts[b, j]) for j in range(i)):
                    break
                p, q = float(case.p[b, i, x]), float(case.q[b, i, x])
                if q <= 0:  # not a draw from q: q_zero_behaviour reports it
                    continue
                for u_i in (0.0, float(FLOAT32_ONE_MINUS)):
                    u = np.full(k + 1, 0.5, np.float32)
                    u[:i], u[i] = accept_pts[b, :i], u_i
                    rows.append((b, u))
                    what.append(("coin", b, i, u_i, u_i * q < p))
            for (bb, j), base in bases.items():
                if bb != b:
                    continue
                for u_k in (0.0, float(FLOAT32_ONE_MINUS)):
                    u = base.copy()
                    u[k] = u_k
                    rows.append((b, u))
                    what.append(("final", b, j, u_k, None))
        if not rows:
            return
        inst, U = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
        order = self.contract_rng.permutation(len(rows))
        out, nacc = self.rows(case, inst, U, order=order)
        deviating = [r for r, w in enumerate(what) if self.deviates(case, w, out[r], int(nacc[r]))]
        inside = self.deviation_inside(case, inst, U, order, what, deviating)
        for r in deviating:
            if r not in inside:
                self.measure_zero_event(case, what[r], out[r], int(nacc[r]))

    @staticmethod
    def deviates(case, what, out_row, n: int) -> bool:
        """Whether a row's output breaks the rule's decision of its probe ``what``: a coin decided
        the other way, or a token of probability 0 emitted."""
        kind, b, i, _, rule_accepts = what
        if kind == "coin":
            return (n > i) != rule_accepts
        xs = case.drafts(b)
        w = kc.emission_weights(case.p[b, n], case.q[b, n] if n < len(xs) else None)
        return bool(w[int(out_row[n])] <= 0)

    def measure_zero_event(self, case, what, out_row, n: int) -> None:
        kind, b, i, u, _ = what
        if kind == "coin":
            x = case.drafts(b)[i]
            p, q = float(case.p[b, i, x]), float(case.q[b, i, x])
            verb = "accepts" if n > i else "rejects"
            self.edge(
                case,
                b,
                f"{verb} draft {x} at position {i} (p(x) = {p:.3g}, q(x) = {q:.3g}) when "
                f"its coin is {u:.8g}, where u q(x) < p(x) says otherwise (probability 2^-24 "
                f"per such draft on the float32 grid; then emits "
                f"{list(case.drafts(b)[:n]) + [int(out_row[n])]})",
                "measure-zero",
            )
        else:
            self.edge(
                case,
                b,
                f"emits token {int(out_row[n])}, of probability 0, at accepted count {n} with "
                f"final uniform {u:.8g} (probability 2^-24 on the float32 grid)",
                "measure-zero",
            )

    @staticmethod
    def rule_cell(case, what) -> tuple[int, float, float]:
        """(the uniform's column, lo, hi): the cell of the rule around an edge probe, on which the
        rule decides as at the probe: [0, t) or [t, 1) for a coin with acceptance t; the emitted
        token's interval of the cumulative sum for the final uniform."""
        kind, b, i, u, rule_accepts = what
        if kind == "coin":
            t = min(1.0, kc.acceptance(case.p[b, i], case.q[b, i], case.drafts(b)[i]))
            return i, *((0.0, t) if rule_accepts else (t, 1.0))
        xs = case.drafts(b)
        c = np.cumsum(kc.emission_weights(case.p[b, i], case.q[b, i] if i < len(xs) else None))
        y = min(int(np.searchsorted(c, u * c[-1], side="right")), len(c) - 1)
        return case.k, (float(c[y - 1] / c[-1]) if y else 0.0), float(c[y] / c[-1])

    def deviation_inside(self, case, inst, U, order, what, deviating) -> set:
        """The deviating edge rows that deviate at interior uniforms of the same cell too
        (``INTERIOR`` of the way across it, the row's batch unchanged): not measure-zero. Their
        law where they sit is measured (``law_where_it_sits``, up to ``rescans`` rows a case): a
        distribution finding where it differs from the rule's, else the deviation is another
        order along the uniform (noted); rows past the cap are a shortfall."""
        flagged = {b for _, c, b, *_ in self.flagged_instances if c is case}
        flagged |= {b for b in range(case.n) if case.q_zero(b)}  # no law: q_zero_behaviour judges them
        if not deviating:
            return set()
        cells = {r: self.rule_cell(case, what[r]) for r in deviating}
        inside = set()
        for f in INTERIOR:
            moved = U.copy()
            for r, (col, lo, hi) in cells.items():
                moved[r, col] = min(np.float32(lo + (hi - lo) * f), np.nextafter(np.float32(hi), np.float32(0)))
            out, nacc = self.rows(case, inst, moved, order=order)
            inside |= {r for r in deviating if self.deviates(case, what[r], out[r], int(nacc[r]))}
        measure = sorted(r for r in inside if inst[r] not in flagged)  # the others' law is a finding already
        chunk = self.chunk_rows(case)
        where = np.argsort(order)
        for n, r in enumerate(measure):
            if n >= self.budget.rescans:
                self.result.shortfalls.append(
                    f"{case.name}: {len(measure) - n} more edge rows deviate at interior uniforms too; "
                    f"their law where they sit not measured (the first {n} were)"
                )
                break
            start = int(where[r]) // chunk * chunk
            members = order[start : start + chunk]
            label = f"{case.labels[inst[r]]}, row {int(where[r]) - start} of a batch of {len(members)} edge probes"
            self.law_where_it_sits(case, int(inst[r]), inst[members], U[members], int(where[r]) - start, label)
        return inside

    def note_order(self, case, coin, emission) -> None:
        """Say so when the kernel maps a uniform to outcomes in another order than the rule's
        (accept below the threshold; tokens in vocabulary order along the last uniform): its law
        may still be the rule's, but its measure-zero points and its replay of another engine's
        uniforms differ."""
        V, moved = case.vocab_size, 0.0
        for (b, i), pc in coin.items():
            if case.q_zero(b):  # q_zero_behaviour reports these
                continue
            t = kc.acceptance(case.p[b, i], case.q[b, i], case.drafts(b)[i])
            ends = np.append(pc.starts[1:].astype(np.float64), 1.0)
            for lo, hi, lab in zip(pc.starts.astype(np.float64), ends, pc.labels):
                inside = max(0.0, min(hi, t) - lo)  # the rule accepts on [0, t)
                moved += (hi - lo - inside) if lab == 1 else inside
        for (b, j), pc in emission.items():
            xs = case.drafts(b)
            c = np.cumsum(kc.emission_weights(case.p[b, j], case.q[b, j] if j < len(xs) else None))
            mids = (pc.starts.astype(np.float64) + np.append(pc.starts[1:].astype(np.float64), 1.0)) / 2
            rule = np.minimum(np.searchsorted(c, mids * c[-1], side="right"), V - 1)
            moved += float(pc.measures()[(pc.labels % (V + 1)) - 1 != rule].sum())
        if moved > tolerance(case) * max(1, len(coin) + len(emission)):
            self.result.ran.append(
                f"order: {case.name}: the kernel maps its uniforms to outcomes in another "
                f"order than the rule's (measure {moved:.3g} placed elsewhere along the "
                f"uniforms; judged by its law)"
            )

    def q_zero_behaviour(self, case, b, coin, emission) -> None:
        """A drafted token with q(x) = 0: accepted (an edge finding: the reference rejects it),
        and, once rejected, what is emitted: from the residual max(p - q, 0) (another law is a
        distribution finding), or, when that is empty, from p (another choice is an edge finding:
        the engines' fallbacks differ)."""
        i = next(i for i, x in enumerate(case.drafts(b)) if case.q[b, i, x] <= 0)
        if (b, i) not in coin:
            return
        x = case.drafts(b)[i]
        pc = coin[(b, i)]
        acc = float(sum(m for lab, m in zip(pc.labels, pc.measures()) if lab))
        if acc >= GRID_PROBABILITY:  # below: a float32 grid point, the measure-zero probes' to report
            self.edge(
                case,
                b,
                f"accepts drafted token {x}, whose q(x) = 0 (p(x) = {case.p[b, i, x]:.3g}), with "
                f"probability {acc:.6g}; the reference rejects it (p / 0 is not a ratio)",
                "q-zero-draft",
            )
        if (b, i) not in emission:
            return
        empty = np.maximum(case.p[b, i].astype(np.float64) - case.q[b, i], 0).sum() <= 0
        want = kc.emission_weights(case.p[b, i], case.q[b, i])  # the residual, or p where it is empty
        got = np.zeros(case.vocab_size)
        for label, m in emission[(b, i)].law().items():
            n, y = divmod(label, case.vocab_size + 1)
            if n == i and 0 <= y - 1 < case.vocab_size:
                got[y - 1] += m
        tv = 0.5 * np.abs(got - want).sum()
        if tv <= tolerance(case):
            return
        top = [int(t) for t in np.argsort(-got)[:3] if got[t] > 0]
        if empty:
            self.edge(
                case,
                b,
                f"after rejecting it the residual max(p - q, 0) is empty; emits tokens {top} "
                f"(TV {tv:.3g} from p, which the reference emits from)",
                "degenerate-residual",
            )
            return
        self.result.findings.append(
            Finding(
                "exact-tv",
                "distribution",
                f"{case.labels[b]}: after rejecting drafted token {x} (q(x) = 0) emits tokens {top}: TV {tv:.3g} "
                f"from the residual max(p - q, 0), which a rejection samples from",
                case.name,
                {"instance": b, "tv": tv},
            )
        )


__all__ = ["INTERIOR", "KernelEdges"]
