"""The kernel judged exactly from its uniforms, one case at a time (``exact_case``): the scans'
law of every instance against the rule's, the q(x) = 0 drafts, the edges, the instances whose
output does not factorize by statistics, and every row of batches of each of ``case.batches``
sizes against its instance's function of its own uniforms (``batch_rows``).
"""

from __future__ import annotations

import numpy as np

from ...common.tables import counted
from . import cases as kc
from .edges import KernelEdges
from .plan import kernel_stream, measured_tv_words, tolerance


class KernelExact(KernelEdges):
    """One case judged from its uniforms, its batch rows included."""

    def exact_case(self, case: kc.KernelCase) -> None:
        laws = [b for b in range(case.n) if not case.q_zero(b)]
        accept_pts = np.full((case.n, case.k), np.nan, dtype=np.float32)
        coin = self.coin_pieces(case, list(range(case.n)), accept_pts)
        emission, bases = self.emission_pieces(case, list(range(case.n)), accept_pts, coin)
        for b in range(case.n):
            if case.q_zero(b):
                self.q_zero_behaviour(case, b, coin, emission)
        self.note_order(case, coin, emission)
        bad = self.spot_check(case, laws, coin, emission)
        if bad and self.scan_batch > 1:
            bad = self.measure_again(case, sorted(bad), accept_pts, coin, emission, bases)
        stat, measured = [], []
        for b in laws:
            got = None if b in bad else self.kernel_law(case, b, coin, emission)
            if got is None:
                stat.append(b)
            else:
                measured.append(self.judge_law(case, b, got, "exact"))
        if stat:
            self.result.ran.append(
                f"exact: {case.name}: {counted(len(stat), 'instance')} whose output is not a "
                f"function of the first rejection and the final uniform; by statistics"
            )
            self.statistics(case, stat, uniforms=True)
        self.edges(case, range(case.n), accept_pts, bases)
        self.result.ran.append(
            f"exact from uniforms: {case.name} ({case.shape_text()}), "
            f"{counted(len(laws), 'law')}, {measured_tv_words(measured, tolerance(case))}"
        )
        if case.batches:
            skip = {b for b in range(case.n) if case.q_zero(b)} | bad | set(stat)
            self.batch_rows(case, coin, emission, skip)

    def predicted(self, case, rows: np.ndarray, U: np.ndarray, coin, emission) -> np.ndarray:
        """The labels (nacc * (V + 1) + token + 1) the instances' pieces give batch rows ``rows``
        at uniforms ``U`` [C, B, k + 1] (-1 where the pieces do not say)."""
        k = case.k
        want = np.full(U.shape[:2], -1, dtype=np.int64)
        for b in np.unique(rows).tolist():
            at = rows == b
            u = U[:, at].reshape(-1, k + 1)
            j, alive = np.zeros(len(u), dtype=np.int64), np.ones(len(u), dtype=bool)
            for i in range(len(case.drafts(b))):
                ok = coin[(b, i)].label_at(u[:, i]) == 1 if (b, i) in coin else np.zeros(len(u), bool)
                alive &= ok
                j += alive
            got = np.full(len(u), -1, dtype=np.int64)
            for jj in np.unique(j).tolist():
                if (b, jj) in emission:
                    got[j == jj] = emission[(b, jj)].label_at(u[j == jj, k])
            want[:, at] = got.reshape(len(U), -1)
        return want

    def batch_rows(self, case, coin, emission, skip: set) -> None:
        """Every row of batches of B rows (each of ``case.batches``; row r instance r mod n) on
        ``batch_calls`` uniform sets, against its instance's function of its own uniforms (the
        pieces its law was measured from, at small batches). Where rows disagree, the law where
        they sit (``law_where_it_sits``) of the first disagreeing row of each batch size in turn,
        ``rescans`` rows a case: a distribution finding where it differs from the rule's; rows
        left unmeasured with no such finding are a shortfall. Deterministic (no false-fail): a
        row that reads another row's inputs or uniforms disagrees on most uniform sets."""
        V, k, calls = case.vocab_size, case.k, self.budget.batch_calls
        checked, disagreeing = 0, []  # (B, rows, U, wrong [C, B]) of the sizes with disagreeing rows
        for B in case.batches:
            rows = np.arange(B) % case.n
            U = np.random.default_rng(kernel_stream(self.seed, "batch rows", B)).random((calls, B, k + 1), np.float32)
            out, nacc = self.batches(case, rows, U)
            got = nacc * (V + 1) + np.take_along_axis(out, nacc[..., None], axis=2)[..., 0] + 1
            want = self.predicted(case, rows, U, coin, emission)
            want[:, np.isin(rows, list(skip))] = -1
            checked += int((want >= 0).any(axis=0).sum())
            if ((want >= 0) & (got != want)).any():
                disagreeing.append((B, rows, U, (want >= 0) & (got != want)))
        before = len(self.result.flagged())
        for B, rows, U, wrong in disagreeing[: self.budget.rescans]:
            r = int(np.flatnonzero(wrong.any(axis=0))[0])
            c = int(np.flatnonzero(wrong[:, r])[0])
            self.law_where_it_sits(
                case, int(rows[r]), rows, U[c], r, f"{case.labels[rows[r]]}, row {r} of a batch of {B}"
            )
        total = sum(int(w.any(axis=0).sum()) for *_, w in disagreeing)
        measured = min(len(disagreeing), self.budget.rescans)
        if total > measured and len(self.result.flagged()) == before:
            self.result.shortfalls.append(
                f"{case.name}: {total - measured} batch rows disagree with their instance's function; "
                f"their law where they sit not measured"
            )
        self.result.ran.append(
            f"batch rows: {case.name}: batches of {', '.join(map(str, case.batches))} rows, {calls} calls each: "
            f"{checked:,} rows against their instance's function of its own uniforms, {total} disagree"
        )


__all__ = ["KernelExact"]
