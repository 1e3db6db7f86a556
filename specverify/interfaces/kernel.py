"""The kernel interface: a batched verification kernel, as engines ship them.

    kernel(draft_ids, draft_probs, target_probs, uniforms) -> (output_ids, num_accepted)

- ``draft_ids`` int64 [B, k]: the drafts; a row with k_b < k drafts is padded with -1.
- ``draft_probs`` float32 [B, k, V]: the q rows the drafts claim to be drawn from.
- ``target_probs`` float32 [B, k + 1, V]: the p rows, row i conditioned on drafts[:i]; a ragged
  row's bonus row is k_b.
- ``uniforms`` float32 [B, k + 1] in [0, 1): column i < k is draft i's acceptance coin, the last
  column the uniform the emitted token (recovered or bonus) is read from by inverse CDF in
  vocabulary order. A kernel whose fourth parameter is named ``generator`` (or ``rng``) gets a
  ``numpy.random.Generator`` / ``torch.Generator`` instead and draws its own.
- returns ``output_ids`` [B, k + 1] (the accepted drafts, the emitted token, then -1) and
  ``num_accepted`` [B]. NumPy arrays by default; torch tensors when the kernel fails on NumPy
  input (it is retried once with torch, and the report says so).

How it is judged (``run``), the claimed rule being the token-wise one (Leviathan et al., arXiv
2211.17192, Algorithm 1; batched as vLLM's and SGLang's kernels do):

1. **contract**: shapes, ids, the accepted prefix equal to the drafts, -1 padding, inputs left
   untouched, the same uniforms giving the same outputs.
2. **exact from uniforms** (kernels that take uniforms): along each coin, and along the final
   uniform given each accepted count, the output is found piece by piece on the float32 grid
   (``specverify.laws.uniform_cells``: the rule's thresholds probed on both sides and in the middle,
   any change bisected to neighbouring floats); the law is the product of the pieces' measures,
   compared with ``kernel_cases.rule_law`` (TV above ``tolerance``: a distribution finding). A
   spot check of random uniform rows against that factorization guards its assumption (the
   output depends on coins only through the first rejection); where it fails the instance is
   judged by statistics.
3. **measure-zero events**: u = 0 and u = 1 - 2^-24 on every coin and final uniform; what a
   kernel does there (a p(x) = 0 draft accepted, a p >= q draft rejected, a token of zero
   probability emitted) is reported with its probability on the float32 grid (kind "edge"),
   separately from the law; so is what it does with a draft whose q(x) = 0.
4. **statistics at kernel speed** (generator kernels, or where the factorization failed):
   ``n_min`` to ``n_max`` rows per instance per look, Pearson chi-square on (accepted, token)
   with cells below 5 expected pooled, the false-fail rate split over instances and looks.

Over 500 lines because the battery's steps (contract, scans, edges, statistics) share one run's
state (the accept points the scans find, the findings); the cases (``kernel_cases``) and what runs
in the subject's process (``kernel_tasks``) are their own modules.
"""

from __future__ import annotations

import numpy as np

from ..battery import budgets, runner
from ..battery.budgets import KernelBudget
from ..battery.core import (
    POWER_FALSE_PASS_RATE,
    Battery,
    BatteryResult,
    ContractBreach,
    Finding,
    run_in_subject,
    stopping_kinds,
    stream,
)
from ..common.tables import counted
from ..laws import stats
from ..laws.uniform_cells import FLOAT32_ONE_MINUS, probe_points, segments
from . import kernel_cases as kc
from .kernel_tasks import (
    GENERATOR_NAMES,
    as_round_sampler,
    check_device,
    kernel_counts_task,
    kernel_rows_task,
    kind_task,
    uses_generator,
    validate_outputs,
)

NAME = "kernel"
PARAMETERS = ("draft_ids", "draft_probs", "target_probs", "uniforms")
ALIASES = {
    "draft_ids": ("draft_token_ids",),
    "draft_probs": ("q",),
    "target_probs": ("p",),
    "uniforms": ("generator", "rng", "uniform_samples", "gen"),
}
GRID_PROBABILITY = 2.0**-24
"""One float32 value's probability under ``torch.rand`` (multiples of 2^-24 in [0, 1))."""


KERNEL_BUDGETS = budgets.view("kernel")
"""The kernel sections of the named budgets (``budgets.TABLE``), by name."""


def get_budget(budget) -> KernelBudget:
    """The kernel section of a budget (``budgets.section``): by name (another interface's budget
    too), ``tv=X`` (statistics sized to see TV X), or a KernelBudget as it is; an unknown name is
    an InterfaceError naming ``budget`` and the budgets there are."""
    return budgets.section("kernel", budget)


ENGINE_VOCABS = (1024, 4097, 33_024, 152_064)
"""The vocabularies a drawn engine-scale kernel case picks from (tiles, int16, Qwen2.5's)."""

KERNEL_STREAMS = ("generated cases", "contract", "spot checks", "statistics", "engine-scale case", "aimed cases")
"""The kernel battery's random streams (``battery.stream``: nodes of ``SeedSequence(seed)``'s
tree), child by child: 0 the generated cases (grandchild i for case i), 1 the contract's uniforms
and batch orders (its node ``(1, 0)`` seeds a generator kernel's contract rows: chunk c from
``(1, 0, c)``), 2 the spot checks' uniforms, 3 the sequential chi-square, one node per (case,
instance, look): ``(3, i, b, j)`` for instance b of case i of the run's cases at look j
(``kernel_tasks.kernel_counts_task``: its uniforms from the node's child 0, a generator kernel's
chunk c from ``(…, 1, c)``), 4 the drawn engine-scale case, 5 the aimed cases (grandchild i for
the i-th k)."""


def kernel_stream(seed: int, purpose: str, *path: int) -> np.random.SeedSequence:
    """The node ``(KERNEL_STREAMS.index(purpose), *path)`` of ``SeedSequence(seed)``'s tree."""
    return stream(seed, KERNEL_STREAMS.index(purpose), *path)


def cases(budget: KernelBudget, seed: int, aim=None) -> list[kc.KernelCase]:
    """The fixed cases, ``budget.generated`` drawn from ``kernel_stream(seed, "generated cases")``,
    with ``engine_scale`` one ``kc.sparse_engine_case`` drawn from ``"engine-scale case"`` (V from
    ``ENGINE_VOCABS``, k 1 to 8, either side), and with an ``interfaces.Aim`` the aimed cases from
    ``"aimed cases"`` (``KERNEL_STREAMS``)."""
    fixed = [kc.every_draft_case(), kc.adversarial_case(), kc.ragged_case()]
    drawn = kc.generated_cases(kernel_stream(seed, "generated cases"), budget.generated)
    if budget.engine_scale:
        fixed += [kc.dense_case(budget.dense_vocab, n=1), kc.tile_boundary_case(), kc.wide_ids_case()]
        rng = np.random.default_rng(kernel_stream(seed, "engine-scale case"))
        V, k = int(rng.choice(ENGINE_VOCABS)), int(rng.integers(1, 9))
        side = ("residual", "draft")[int(rng.integers(2))]
        drawn.append(kc.sparse_engine_case(rng, V, k, side, f"generated engine scale V{V} {side}, k={k}"))
    aimed = kc.aimed_cases(kernel_stream(seed, "aimed cases"), aim.vocab, aim.ks) if aim else []
    return fixed + drawn + aimed


def coverage(budget) -> str:
    b = get_budget(budget)
    scale = "V up to 152,064, k up to 8, " if b.engine_scale else ""
    big = (
        f" + dense rows (V {b.dense_vocab}, k 8), tile boundaries (V 4097), wide ids (V 33,024)"
        if b.engine_scale
        else ""
    )
    drawn = " (+ 1 at engine scale: V from 1,024 to 152,064, k 1-8, sparse rows)" if b.engine_scale else ""
    return (
        f"kernel battery: 3 fixed cases{big} + {b.generated} generated{drawn}, {scale}exact from "
        f"uniforms on the float32 grid; statistics "
        f"(generator kernels) see TV {b.detect_tv:g} per instance, {max(b.detect_tv, b.detect_tv_large):g} "
        f"where a row exceeds {b.large_row_bytes // 1024} KiB"
    )


def tolerance(case: kc.KernelCase) -> float:
    """The TV a float32 kernel's rounding can reach on the case: each of the rule's thresholds
    (k coins, and a cumulative sum per token of positive target probability) may move by a few
    float32 ulps (2^-24 near 1)."""
    support = int((case.p > 0).sum(axis=2).max())
    return 4 * GRID_PROBABILITY * (case.k + 1 + support)


def measured_tv_words(measured: list[float], tol: float) -> str:
    """The largest TV measured exactly on a case's laws beside the tolerance it is held to
    (``tolerance``): "TV 3e-08 measured, tolerance 4.8e-07"; with no law measured exactly (all
    judged by statistics), the tolerance alone, said so."""
    if not measured:
        return f"no law measured exactly (TV tolerance {tol:.2g})"
    return f"TV {max(measured):.2g} measured, tolerance {tol:.2g}"


def row_bytes(case: kc.KernelCase) -> int:
    """The bytes of one row of the kernel's inputs (float32 q and p rows)."""
    return 4 * (2 * case.k + 1) * case.vocab_size


def detect_tv_for(case: kc.KernelCase, budget: KernelBudget) -> float:
    """The TV statistics must see on the case: ``detect_tv``, or ``detect_tv_large`` for rows
    above ``large_row_bytes`` (10^5 rows of V = 33k are gigabytes)."""
    return (
        budget.detect_tv if row_bytes(case) <= budget.large_row_bytes else max(budget.detect_tv, budget.detect_tv_large)
    )


def planned_looks(
    want: dict, budget: KernelBudget, checks: int, detect_tv: float | None = None
) -> tuple[list[int], float]:
    """(the look sizes, the false-fail rate per look) of one instance's sequential chi-square:
    looks n_min, 2 n_min, ... up to the first that sees ``detect_tv`` (power 1 -
    POWER_FALSE_PASS_RATE) or ``n_max``; half the budget's false-fail rate split over ``checks``
    instances and every planned look (solved together: the split depends on the count)."""
    n_looks = 1
    while True:
        per_check = stats.split_budget(budget.false_fail_rate / 2, checks * n_looks)
        need = stats.min_num_samples_chi_square(detect_tv or budget.detect_tv, want, per_check, POWER_FALSE_PASS_RATE)
        sizes = [min(budget.n_min, need)]
        while sizes[-1] < min(need, budget.n_max) and sizes[-1] * 2 <= budget.n_max:
            sizes.append(sizes[-1] * 2)
        if len(sizes) <= n_looks:
            return sizes, per_check
        n_looks = len(sizes)


# --------------------------------------------------------------------------- the battery


class KernelBattery(Battery):
    """One run of the kernel checks on one subject (the parent's side; ``battery.Battery``'s
    ``call``, ``now`` and ``breach``)."""

    def __init__(self, subject: runner.Runner, budget: KernelBudget, seed: int, deadline: float | None):
        super().__init__(subject, budget, seed, deadline)
        self.aim = None  # interfaces.Aim: the user's vocabulary and k (cases' aimed ones)
        self.contract_rng = np.random.default_rng(kernel_stream(seed, "contract"))
        self.spot_rng = np.random.default_rng(kernel_stream(seed, "spot checks"))
        self.generators = kernel_stream(seed, "contract", 0)  # a generator kernel's contract rows
        self.case_index = 0  # the case judged now, in the run's order (its statistics' streams)
        self.arrays = "numpy" if budget.device == "cpu" else "torch"  # on a GPU: torch tensors there
        self.generator = False  # the kernel draws from a generator (its fourth parameter's name)
        self.statistical = False  # judged by statistics: a generator, or uniforms that do not replay
        self.flagged_instances: list = []  # (V*k, case, b, got, want, tv, method)
        self.stat_checks = 1  # instances the statistics' false-fail rate is split over (set by run)

    def chunk_rows(self, case: kc.KernelCase) -> int:
        per_row = 4 * (2 * case.k + 1) * case.vocab_size + 8 * (2 * case.k + 1)
        return max(1, self.budget.chunk_bytes // per_row)

    def rows(self, case: kc.KernelCase, inst: np.ndarray, uniforms, generators=None, order: np.ndarray | None = None):
        """The kernel's (out, nacc) on instance rows ``inst``, in a shuffled order (so that
        neighbouring batch rows belong to different instances and problems), or in ``order``."""
        if order is None:
            order = self.contract_rng.permutation(len(inst))
        u = None if uniforms is None else np.asarray(uniforms, dtype=np.float32)[order]
        chunks = -(-len(inst) // self.chunk_rows(case))
        got = self.call(
            kernel_rows_task,
            case,
            np.asarray(inst)[order],
            u,
            self.arrays,
            self.chunk_rows(case),
            generators,
            self.budget.device,
            seconds=self.budget.call_limit_s * chunks,
        )
        if got[0] == "breach":
            raise ContractBreach(got[1])
        out, nacc = np.empty_like(got[1]), np.empty_like(got[2])
        out[order], nacc[order] = got[1], got[2]
        return out, nacc

    # -- contract ------------------------------------------------------------------------------
    def contract(self, case: kc.KernelCase) -> bool:
        self.generator = self.call(kind_task, seconds=10.0)
        inst = np.repeat(np.arange(case.n), 8)
        u = None if self.generator else self.contract_rng.random((len(inst), case.k + 1), dtype=np.float32)
        order = self.contract_rng.permutation(len(inst))
        try:
            first = self.rows(case, inst, u, generators=self.generators, order=order)
        except ContractBreach as exc:
            if not _numpy_type_error(str(exc)) or not _torch_available():
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

    # -- exact from uniforms --------------------------------------------------------------------
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
            probes = [probe_points([kc.acceptance(case.p[b, i], case.q[b, i], case.drafts(b)[i])]) for b, _ in probs]

            def evaluate(ids, vals, probs=probs, i=i):
                u = np.full((len(ids), k + 1), 0.5, dtype=np.float32)
                bs = np.array([probs[j][0] for j in ids], dtype=np.int64)
                u[:, :i] = accept_pts[bs, :i]
                u[:, i] = vals
                _, nacc = self.rows(case, bs, u)
                return (nacc > i).astype(np.int64)

            for (b, _), pc in zip(probs, segments(evaluate, probes)):
                pieces[(b, i)] = pc
                acc = [(m, s) for s, lab, m in zip(pc.starts, pc.labels, pc.measures()) if lab == 1]
                if acc:
                    m, s = max(acc, key=lambda t: t[0])
                    accept_pts[b, i] = np.float32(s + m / 2)
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
                    base[j] = np.float32(s + m / 2)
                probs.append((b, j))
                bases.append(base)
        probes = [probe_points(kc.emission_breakpoints(case, b, j)) for b, j in probs]
        bases = np.array(bases)

        def evaluate(ids, vals):
            u = bases[ids].copy()
            u[:, k] = vals
            bs = np.array([probs[j][0] for j in ids], dtype=np.int64)
            out, nacc = self.rows(case, bs, u)
            return nacc * (V + 1) + out[np.arange(len(ids)), nacc] + 1

        return dict(zip(probs, segments(evaluate, probes))), dict(zip(probs, bases))

    def kernel_law(self, case, b, coin, emission) -> dict | None:
        """{(j, y): probability} from the pieces; None if an emission piece has another count."""
        V, law, reach = case.vocab_size, {}, 1.0
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
        out, nacc = self.rows(case, inst, u)
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

    def edges(self, case, insts, accept_pts, bases):
        """Measure-zero probes: u = 0 and 1 - 2^-24 on each coin and each final uniform."""
        k = case.k
        rows, what = [], []
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
                    what.append(("coin", b, i, u_i, q > 0 and u_i * q < p))
            for (bb, j), base in bases.items():
                if bb != b:
                    continue
                for u_k in (0.0, float(FLOAT32_ONE_MINUS)):
                    u = base.copy()
                    u[k] = u_k
                    rows.append((b, u))
                    what.append(("final", b, j, f"final uniform {u_k:.8g}", None))
        if not rows:
            return
        out, nacc = self.rows(case, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
        for r, (kind, b, i, u_i, rule_accepts) in enumerate(what):
            n = int(nacc[r])
            if kind == "coin":
                if (n > i) != rule_accepts:
                    x = case.drafts(b)[i]
                    p, q = float(case.p[b, i, x]), float(case.q[b, i, x])
                    verb = "accepts" if n > i else "rejects"
                    self.edge(
                        case,
                        b,
                        f"{verb} draft {x} at position {i} (p(x) = {p:.3g}, q(x) = {q:.3g}) when "
                        f"its coin is {u_i:.8g}, where u q(x) < p(x) says otherwise (probability 2^-24 "
                        f"per such draft on the float32 grid; then emits "
                        f"{list(case.drafts(b)[:n]) + [int(out[r, n])]})",
                        "measure-zero",
                    )
            else:
                xs, y = case.drafts(b), int(out[r, n])
                w = kc.emission_weights(case.p[b, n], case.q[b, n] if n < len(xs) else None)
                if w[y] <= 0:
                    self.edge(
                        case,
                        b,
                        f"emits token {y}, of probability 0, at accepted count {n} with "
                        f"{u_i} (probability 2^-24 on the float32 grid)",
                        "measure-zero",
                    )

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
        and, once rejected, what is emitted when the residual is empty (the reference: from p)."""
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
        if (b, i) not in emission or np.maximum(case.p[b, i].astype(np.float64) - case.q[b, i], 0).sum() > 0:
            return
        want = kc.emission_weights(case.p[b, i], case.q[b, i])  # p itself: the residual is empty
        got = np.zeros(case.vocab_size)
        for label, m in emission[(b, i)].law().items():
            n, y = divmod(label, case.vocab_size + 1)
            if n == i and 0 <= y - 1 < case.vocab_size:
                got[y - 1] += m
        if 0.5 * np.abs(got - want).sum() > tolerance(case):
            top = [int(t) for t in np.argsort(-got)[:3] if got[t] > 0]
            self.edge(
                case,
                b,
                f"after rejecting it the residual max(p - q, 0) is empty; emits tokens {top} "
                f"(TV {0.5 * np.abs(got - want).sum():.3g} from p, which the reference emits from)",
                "degenerate-residual",
            )

    def edge(self, case, b, message, check):
        self.result.findings.append(Finding(check, "edge", f"{case.labels[b]}: {message}", case.name, {"instance": b}))

    def judge_law(self, case, b, got: dict, method: str, n: int | None = None, biased: bool | None = None) -> float:
        """Compare the kernel's law given instance b's drafts (exact, or empirical with the
        chi-square's verdict ``biased``) with the rule's; a distribution finding if it differs.
        Returns the TV between the two laws."""
        want = kc.rule_law(case, b)
        tv = stats.tv_distance(got, want)
        r = self.result
        if method == "exact":
            r.exact_tv_max = max(r.exact_tv_max or 0.0, tv)
            biased = tv > tolerance(case)
        if biased:
            r.findings.append(
                Finding(
                    "exact-tv" if method == "exact" else "chi-square",
                    "distribution",
                    f"{case.labels[b]}: the output law given the drafts differs from the token-wise rule's "
                    f"(TV {tv:.3g}{', ' + method if method != 'exact' else ''})",
                    case.name,
                    {"instance": b, "tv": tv},
                )
            )
            self.flagged_instances.append((case.vocab_size * case.k, case, b, got, want, tv, method, n))
        got_len = sum((j + 1) * v for (j, _), v in got.items())
        want_len = sum((j + 1) * v for (j, _), v in want.items())
        r.mean_tokens_per_round[f"{case.name}: {case.labels[b]}"] = (got_len, want_len)
        return tv

    def exact_case(self, case: kc.KernelCase) -> None:
        laws = [b for b in range(case.n) if not case.q_zero(b)]
        accept_pts = np.full((case.n, case.k), np.nan, dtype=np.float32)
        coin = self.coin_pieces(case, list(range(case.n)), accept_pts)
        emission, bases = self.emission_pieces(case, list(range(case.n)), accept_pts, coin)
        for b in range(case.n):
            if case.q_zero(b):
                self.q_zero_behaviour(case, b, coin, emission)
        self.edges(case, range(case.n), accept_pts, bases)
        self.note_order(case, coin, emission)
        bad = self.spot_check(case, laws, coin, emission)
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
        self.result.ran.append(
            f"exact from uniforms: {case.name} ({case.shape_text()}), "
            f"{counted(len(laws), 'law')}, {measured_tv_words(measured, tolerance(case))}"
        )

    # -- statistics -----------------------------------------------------------------------------
    def statistics(self, case: kc.KernelCase, insts: list, uniforms: bool = False) -> None:
        """The sequential chi-square on each instance: looks at n_min, 2 n_min, ... rows, until
        a look fails, or the power reaches the budget's ``detect_tv``, or ``n_max``; every look
        draws from its own node, ``kernel_stream(seed, "statistics", case, instance, look)``."""
        b_ = self.budget
        for b in insts:
            want = {f"{j} {y}": v for (j, y), v in kc.rule_law(case, b).items()}
            detect = detect_tv_for(case, b_)
            sizes, per_check = planned_looks(want, b_, max(1, self.stat_checks), detect)
            counts: dict = {}
            done, result = 0, None
            for look, n in enumerate(sizes):
                chunks = -(-(n - done) // self.chunk_rows(case))
                node = kernel_stream(self.seed, "statistics", self.case_index, b, look)
                got = self.call(
                    kernel_counts_task,
                    case,
                    b,
                    n - done,
                    node,
                    self.arrays,
                    self.chunk_rows(case),
                    self.generator,
                    self.budget.device,
                    seconds=self.budget.call_limit_s * chunks,
                )
                if got[0] == "breach":
                    raise ContractBreach(got[1])
                for (j, y), c in got[1].items():
                    counts[f"{j} {y}"] = counts.get(f"{j} {y}", 0) + c
                done = n
                result = stats.chi_square_test(counts, want, false_fail_rate=per_check)
                if (
                    not result.passed
                    or stats.min_discrepancy_chi_square(done, want, per_check, POWER_FALSE_PASS_RATE) <= detect
                ):
                    break
            power = stats.min_discrepancy_chi_square(done, want, per_check, POWER_FALSE_PASS_RATE)
            self.result.power.append({"case": f"{case.name}: {case.labels[b]}", "runs": done, "min_tv": power})
            r = self.result
            r.chi2_p_value_min = min(r.chi2_p_value_min if r.chi2_p_value_min is not None else 1.0, result.p_value)
            got = {tuple(map(int, key.split())): c / done for key, c in counts.items()}
            if not result.passed:
                r.samples_to_detect = done if r.samples_to_detect is None else min(r.samples_to_detect, done)
            elif power > detect:
                r.shortfalls.append(
                    f"{case.name}: {case.labels[b]}: {done} rows see TV {power:.3g}, not the budget's {detect:g}"
                )
            self.judge_law(case, b, got, "statistical", done, biased=not result.passed)
            self.result.ran.append(
                f"statistics: {case.name}: {case.labels[b]}: {done:,} rows, "
                f"sees TV {power:.3g} (false-fail {per_check:.2g} per look)"
            )

    # -- all -------------------------------------------------------------------------------------
    def run(self, stop_on_first: bool = False, only=None) -> BatteryResult:
        all_cases = cases(self.budget, self.seed, self.aim) if only is None else list(only)
        if not self.contract(all_cases[0]):
            self.result.ran.append("contract: breached; the remaining checks skipped")
            return self.result
        self.stat_checks = sum(c.n for c in all_cases)
        for i, case in enumerate(all_cases):
            self.case_index = i
            try:
                if self.statistical:
                    self.statistics(case, [b for b in range(case.n) if not case.q_zero(b)])
                else:
                    self.exact_case(case)
            except ContractBreach as exc:
                self.breach(str(exc), case)
                return self.result
            self.cover(case)
            if stop_on_first and self.result.flagged(stopping_kinds(stop_on_first)):
                break
        return self.result

    def cover(self, case) -> None:
        """The case's ``coverage_entry``: origin from its name (aimed, generated, else fixed),
        judged exactly from the uniforms, or by statistics for a kernel that draws its own."""
        origin = (
            "aimed"
            if case.name.startswith("aimed")
            else ("generated" if case.name.startswith("generated") else "fixed")
        )
        seen = [row for row in self.result.power if str(row.get("case", "")).startswith(f"{case.name}: ")]
        self.result.cover(
            name=case.name,
            origin=origin,
            vocab=case.vocab_size,
            k=case.k,
            tokens=case.k + 1,
            judged="chi-square" if self.statistical else "exact from uniforms",
            runs=sum(row.get("runs", 0) for row in seen) or None,
            detect_tv=max((row["min_tv"] for row in seen), default=None),
            instances=case.n,
        )


def _numpy_type_error(message: str) -> bool:
    """Whether a breach's message reads as a kernel that wants torch tensors (its raise site,
    " (at FILE:LINE in FUNCTION)", aside: a file named numpy_kernel.py says nothing)."""
    words = message.rsplit(" (at ", 1)[0]
    return any(w in words for w in ("TypeError", "AttributeError", "numpy"))


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------- the interface


def run(
    subject,
    budget,
    seed: int,
    *,
    deadline=None,
    stop_on_first: bool = False,
    prefetched: dict | None = None,
    cases=None,
    aim=None,
    **overrides,
) -> BatteryResult:
    """Every kernel check on every case (``cases``: these ``KernelCase`` instead of the
    budget's; ``aim``: an ``interfaces.Aim`` adds cases at the user's vocabulary and k); never
    raises for a broken subject. ``overrides`` replace fields of the kernel budget; an unknown
    one is a ValueError naming it."""
    from ..common.validation import check_seed, with_overrides

    seed = check_seed(seed)
    b = get_budget(budget)
    b = with_overrides("kernel", b, overrides)
    check_device(b.device)
    holder: list = []

    def make(handle):
        battery = KernelBattery(handle, b, seed, deadline)
        battery.aim = aim
        holder.append(battery)
        return battery

    result = run_in_subject(subject, make, lambda battery: battery.run(stop_on_first, cases))
    if holder and holder[0].flagged_instances:
        result.counterexample = describe(min(holder[0].flagged_instances, key=lambda t: t[0]))
    return result


def counterexample(subject, budget, seed: int, result: BatteryResult, aim=None) -> dict | None:
    """The smallest flagged instance, found during the run (its tensors and laws side by side)."""
    return result.counterexample


def _row(v: np.ndarray, limit: int = 8):
    if len(v) <= limit:
        return [round(float(x), 6) for x in v]
    top = np.argsort(-v)[:limit]
    return {int(i): round(float(v[i]), 6) for i in sorted(top)}


def describe(flagged) -> dict:
    """A finding as a kernel developer reads it: the instance's tensors (their names) and the
    laws of (accepted drafts, emitted token) side by side."""
    _, case, b, got, want, tv, method, n = flagged
    xs = case.drafts(b)
    keys = sorted(set(got) | set(want), key=lambda key: -abs(got.get(key, 0) - want.get(key, 0)))
    return {
        "method": "exact" if method == "exact" else "statistical",
        "vocab_size": case.vocab_size,
        "k": case.k,
        "window": case.k + 1,
        "prefix": [],
        "model": f"{case.name}: {case.labels[b]}",
        "draft_ids": list(xs),
        "p": [_row(case.p[b, i]) for i in range(len(xs) + 1)],
        "q": [_row(case.q[b, i]) for i in range(len(xs))],
        ("exact_tv" if method == "exact" else "empirical_tv"): tv,
        "samples": n,
        "distributions": [
            {
                "tokens": list(xs[:j]) + [y],
                "sampler": round(float(got.get((j, y), 0.0)), 9),
                "target": round(float(want.get((j, y), 0.0)), 9),
            }
            for j, y in keys[:64]
        ],
    }


def units(load, budget, stop_on_first: bool = False) -> list[tuple]:
    """None: the kernel battery runs whole (its calls are already batched)."""
    return []


__all__ = [
    "ALIASES",
    "GENERATOR_NAMES",
    "KERNEL_BUDGETS",
    "KERNEL_STREAMS",
    "as_round_sampler",
    "KernelBattery",
    "KernelBudget",
    "NAME",
    "PARAMETERS",
    "cases",
    "counterexample",
    "coverage",
    "get_budget",
    "kernel_rows_task",
    "kernel_stream",
    "run",
    "tolerance",
    "units",
    "uses_generator",
    "validate_outputs",
]
