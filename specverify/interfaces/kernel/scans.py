"""The kernel's exact law from uniforms, piece by piece: along each coin, and along the final
uniform given each accepted count, the output is found on the float32 grid
(``specverify.laws.uniform_cells``: the rule's thresholds probed on both sides and in the middle,
any change bisected to neighbouring floats); the law is the product of the pieces' measures. A
spot check of random uniform rows guards the factorization's assumption (the output depends on
coins only through the first rejection); where it fails the instances are scanned again one row a
call (``measure_again``), and a row's law where it sits in a batch is measured the same way
(``law_where_it_sits``).
"""

from __future__ import annotations

import numpy as np

from ...common.tables import counted
from ...laws.uniform_cells import probe_points, segments
from . import cases as kc
from .plan import grid_points, row_bytes
from .statistics import KernelStatistics


def piece_point(start: float, measure: float) -> np.float32:
    """A float32 uniform inside the piece [start, start + measure): its middle, or the float32
    just below the piece's end when the middle rounds up to it (a one-point piece just below 1
    would otherwise give u = 1.0, outside [0, 1))."""
    middle = np.float32(start + measure / 2)
    end = np.float32(start + measure)
    return middle if middle < end else max(np.float32(start), np.nextafter(end, np.float32(0)))


class KernelScans(KernelStatistics):
    """The scans along the uniforms and the laws they give (a law that does not factorize is
    left to ``KernelStatistics``)."""

    def coin_pieces(self, case, insts, accept_pts):
        """For every (instance, position) reachable under the kernel: the pieces of 'draft i
        accepted' along coin i; ``accept_pts`` [n, k] is filled with a point of each accept set."""
        k = case.k
        pieces: dict = {}
        for i in range(k):
            probs = [
                (b, i)
                for b in insts
                if i < len(case.drafts(b)) and all(not np.isnan(accept_pts[b, j]) for j in range(i))
            ]
            if not probs:
                break
            probes = [
                probe_points([kc.acceptance(case.p[b, i], case.q[b, i], case.drafts(b)[i])], grid_points(case))
                for b, _ in probs
            ]

            def evaluate(ids, vals, probs=probs, i=i):
                u = np.full((len(ids), k + 1), 0.5, dtype=np.float32)
                bs = np.array([probs[j][0] for j in ids], dtype=np.int64)
                u[:, :i] = accept_pts[bs, :i]
                u[:, i] = vals
                _, nacc = self.rows(case, bs, u, batch=self.scan_batch)
                return (nacc > i).astype(np.int64)

            for (b, _), pc in zip(probs, segments(evaluate, probes)):
                pieces[(b, i)] = pc
                acc = [(m, s) for s, lab, m in zip(pc.starts, pc.labels, pc.measures()) if lab == 1]
                if acc:
                    m, s = max(acc, key=lambda t: t[0])
                    accept_pts[b, i] = piece_point(s, m)
        return pieces

    def emission_pieces(self, case, insts, accept_pts, coin):
        """For every (instance, accepted count j) the kernel reaches: the pieces of its output
        along the final uniform, with coins < j in their accept sets and coin j rejecting."""
        V, k = case.vocab_size, case.k
        probs, bases = [], []
        for b in insts:
            kb = len(case.drafts(b))
            for j in range(kb + 1):
                if any(np.isnan(accept_pts[b, i]) for i in range(j)):
                    break
                base = np.full(k + 1, 0.5, dtype=np.float32)
                base[:j] = accept_pts[b, :j]
                if j < kb:
                    pc = coin[(b, j)]
                    rej = [(m, s) for s, lab, m in zip(pc.starts, pc.labels, pc.measures()) if lab == 0]
                    if not rej:
                        continue
                    m, s = max(rej, key=lambda t: t[0])
                    base[j] = piece_point(s, m)
                probs.append((b, j))
                bases.append(base)
        probes = [probe_points(kc.emission_breakpoints(case, b, j), grid_points(case)) for b, j in probs]
        stacked = np.array(bases)

        def evaluate(ids, vals):
            u = stacked[ids].copy()
            u[:, k] = vals
            bs = np.array([probs[j][0] for j in ids], dtype=np.int64)
            out, nacc = self.rows(case, bs, u, batch=self.scan_batch)
            return nacc * (V + 1) + out[np.arange(len(ids)), nacc] + 1

        return dict(zip(probs, segments(evaluate, probes))), dict(zip(probs, stacked))

    def kernel_law(self, case, b, coin, emission) -> dict | None:
        """{(j, y): probability} from the pieces; None if an emission piece has another count."""
        V, reach = case.vocab_size, 1.0
        law: dict[tuple[int, int], float] = {}
        kb = len(case.drafts(b))
        for j in range(kb + 1):
            accept = (
                1.0 if j == kb else float(sum(m for lab, m in zip(coin[(b, j)].labels, coin[(b, j)].measures()) if lab))
            )
            stop = reach * (1.0 - accept) if j < kb else reach
            if stop > 0:
                if (b, j) not in emission:
                    return None
                for label, m in emission[(b, j)].law().items():
                    n, y = divmod(label, V + 1)
                    if n != j:
                        return None
                    law[(j, y - 1)] = law.get((j, y - 1), 0.0) + stop * m
            reach *= accept
            if reach == 0:
                break
        return law

    def spot_check(self, case, insts, coin, emission) -> set:
        """Instances whose random uniform rows disagree with the factorized law's prediction."""
        V, k = case.vocab_size, case.k
        n = min(self.budget.spot_rows, max(32, self.budget.spot_bytes // row_bytes(case)))
        inst = np.repeat(np.array(insts, dtype=np.int64), n)
        u = self.spot_rng.random((len(inst), k + 1), dtype=np.float32)
        out, nacc = self.rows(case, inst, u, batch=self.scan_batch)
        bad = set()
        for r, b in enumerate(inst.tolist()):
            kb = len(case.drafts(b))
            j = 0
            while j < kb and (b, j) in coin and coin[(b, j)].label_at([u[r, j]])[0] == 1:
                j += 1
            if (b, j) not in emission:
                bad.add(b) if int(nacc[r]) != j else None
                continue
            want = int(emission[(b, j)].label_at([u[r, k]])[0])
            if int(nacc[r]) * (V + 1) + int(out[r, nacc[r]]) + 1 != want:
                bad.add(b)
        return bad

    def measure_again(self, case, insts: list, accept_pts, coin, emission, bases) -> set:
        """Instances whose random rows disagreed with their pieces, scanned again one row a call
        (batch position 0: a kernel whose rows depend on where they sit in the scans' batches of
        ``scan_rows`` then shows a function, and the batch rows judge the rest); their pieces
        replaced in ``coin`` / ``emission`` / ``bases``; the instances that still disagree."""
        again = np.full_like(accept_pts, np.nan)
        self.scan_batch = 1
        try:
            coin2 = self.coin_pieces(case, insts, again)
            emission2, bases2 = self.emission_pieces(case, insts, again, coin2)
            bad = self.spot_check(case, insts, coin2, emission2)
        finally:
            self.scan_batch = self.budget.scan_rows
        for pieces, fresh in ((coin, coin2), (emission, emission2), (bases, bases2)):
            for key in [key for key in pieces if key[0] in insts]:
                del pieces[key]
            pieces.update(fresh)
        accept_pts[insts] = again[insts]
        self.result.ran.append(
            f"exact: {case.name}: {counted(len(insts), 'instance')} disagreed with their pieces at batches of "
            f"{self.budget.scan_rows} rows; measured again one row a call ({len(bad)} still disagree)"
        )
        return bad

    def law_where_it_sits(self, case, b: int, rows, uniforms, position: int, label: str) -> None:
        """Instance b's law at ``position`` of the batch ``rows`` (instance ids) with the other
        rows' uniforms held at ``uniforms``: the scans run with only that row's uniforms varied,
        one call per probe, and the law is judged as any (``judge_law``, named ``label``). Rows of
        more than ``spot_bytes`` together, or a law that does not factorize, are a shortfall."""
        if len(rows) * row_bytes(case) > self.budget.spot_bytes:
            self.result.shortfalls.append(f"{case.name}: {label}: its batch is too large to measure its law there")
            return
        self.pinned = (np.asarray(rows), np.asarray(uniforms, dtype=np.float32), position)
        try:
            accept_pts = np.full((case.n, case.k), np.nan, dtype=np.float32)
            coin = self.coin_pieces(case, [b], accept_pts)
            emission, _ = self.emission_pieces(case, [b], accept_pts, coin)
            got = self.kernel_law(case, b, coin, emission)
        finally:
            self.pinned = None
        if got is None:
            self.result.shortfalls.append(
                f"{case.name}: {label}: its output there is not a function of its own uniforms"
            )
            return
        tv = self.judge_law(case, b, got, "exact", label=label)
        self.result.ran.append(f"where it sits: {case.name}: {label}: TV {tv:.3g} from the rule's law")


__all__ = ["KernelScans"]
