"""The kernel interface's subject side: what runs in the subject's process (specverify.battery.runner).

``kernel_rows_task`` runs the kernel on rows of a case's instances with given uniforms (or a
seeded generator: chunk c's from ``battery.stream(node, c)``, a node of the check's tree), in
chunks of bounded memory, checking each call's contract (``validate_outputs``: shapes, integer
ids, the accepted prefix equal to the drafts, the emitted token in the vocabulary, -1 padding,
inputs untouched); ``kernel_counts_task`` does the same for the statistics and sends back only
the counts of (accepted, emitted token).
``as_round_sampler`` wraps a kernel in the handout's round interface (B = 1), so that the round
battery can judge the same kernel.
"""

from __future__ import annotations

import inspect

import numpy as np

from ...battery.guards import ContractBreach, call_subject, message_of, reading
from ...battery.seed_tree import stream
from ...common.tables import counted
from . import cases as kc

GENERATOR_NAMES = ("generator", "rng", "gen")


def uses_generator(kernel) -> bool:
    try:
        names = [p.name for p in inspect.signature(kernel).parameters.values()]
    except (TypeError, ValueError):
        return False
    return len(names) >= 4 and names[3] in GENERATOR_NAMES


def _as(arrays: str, x, device: str = "cpu"):
    if arrays == "torch":
        import torch

        return torch.from_numpy(np.ascontiguousarray(x)).to(device)
    return np.ascontiguousarray(x)


def check_device(device: str) -> str:
    """ "cpu", or "cuda" / "cuda:N" where torch sees CUDA; ArgumentError naming ``device`` for
    another value, MissingExtra without torch, NoCuda on a machine without CUDA."""
    from ...errors import ArgumentError, MissingExtra, NoCuda

    if device == "cpu":
        return device
    if not isinstance(device, str) or not (device == "cuda" or device.startswith("cuda:")):
        raise ArgumentError(f"device: must be cpu, cuda or cuda:N, got {device!r}")
    try:
        import torch
    except ImportError:
        raise MissingExtra("device: cuda needs torch (pip install 'specverify[models]')") from None
    if not torch.cuda.is_available():
        raise NoCuda(f"device: {device} asked for, but CUDA is not available on this machine")
    return device


def _numpy(x, what: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except Exception as exc:  # noqa: BLE001 - junk from the subject
        raise ContractBreach(f"returned {what} that is not an array ({type(exc).__name__})") from None


def non_integer_outputs(out: np.ndarray, nacc: np.ndarray) -> str:
    """The outputs whose dtype is not an integer one, named with their dtypes ("num_accepted of
    dtype float32", "output_ids of dtype float64 and num_accepted of dtype bool"); "" when both are."""
    bad = [
        f"{name} of dtype {a.dtype}"
        for name, a in (("output_ids", out), ("num_accepted", nacc))
        if not np.issubdtype(a.dtype, np.integer)
    ]
    return " and ".join(bad)


def validate_outputs(result, drafts: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray]:
    """(output_ids, num_accepted) as int64 arrays, or ContractBreach saying what is wrong."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise ContractBreach(f"returned {type(result).__name__}, not (output_ids, num_accepted)")
    out, nacc = _numpy(result[0], "output_ids"), _numpy(result[1], "num_accepted")
    B, k = drafts.shape
    if out.shape != (B, k + 1) or nacc.reshape(-1).shape != (B,):
        raise ContractBreach(
            f"returned output_ids {out.shape} and num_accepted {nacc.shape}; expected ({B}, {k + 1}) and ({B},)"
        )
    not_integer = non_integer_outputs(out, nacc)
    if not_integer:
        raise ContractBreach(
            f"returned {not_integer}: output_ids (token ids) and num_accepted (counts) must be integer arrays"
        )
    out, nacc = out.astype(np.int64), nacc.reshape(-1).astype(np.int64)
    kb = (drafts >= 0).sum(axis=1)
    bad = (nacc < 0) | (nacc > kb)
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        raise ContractBreach(f"row {b}: num_accepted {int(nacc[b])} with {counted(int(kb[b]), 'draft')}")
    pos = np.arange(k + 1)
    prefix = pos[None, :] < nacc[:, None]
    padded = np.concatenate([drafts, np.full((B, 1), -1, dtype=drafts.dtype)], axis=1)  # np.pad: 10x slower
    wrong = prefix & (out[:, : k + 1] != padded)
    if wrong.any():
        b, i = map(int, np.argwhere(wrong)[0])
        raise ContractBreach(
            f"row {b}: output_ids[{i}] = {int(out[b, i])} with num_accepted "
            f"{int(nacc[b])}, but the draft there is {int(drafts[b, i])}"
        )
    emitted = out[np.arange(B), nacc]
    if ((emitted < 0) | (emitted >= V)).any():
        b = int(np.flatnonzero((emitted < 0) | (emitted >= V))[0])
        raise ContractBreach(f"row {b}: emitted token {int(emitted[b])}, outside the vocabulary [0, {V})")
    after = pos[None, :] > nacc[:, None]
    if (out[after] != -1).any():
        b, i = map(int, np.argwhere(after & (out != -1))[0])
        raise ContractBreach(
            f"row {b}: output_ids[{i}] = {int(out[b, i])} after the emitted token (must be -1 padding)"
        )
    return out, nacc


def _chunks(
    kernel,
    case: kc.KernelCase,
    rows: np.ndarray,
    uniforms,
    arrays: str,
    chunk_rows: int,
    generators,
    device: str,
    first: int = 0,
):
    """Yield (out, nacc) of the kernel on each chunk of ``rows`` (ContractBreach on a breach);
    without uniforms, chunk c's generator from ``stream(generators, first + c)``."""
    for c, start in enumerate(range(0, len(rows), chunk_rows), first):
        sel = rows[start : start + chunk_rows]
        drafts = case.draft_ids[sel]
        args = [_as(arrays, drafts, device), _as(arrays, case.q[sel], device), _as(arrays, case.p[sel], device)]
        kept = [a.clone() if arrays == "torch" else a.copy() for a in args]
        if uniforms is None:
            cs = stream(generators, c)
            if arrays == "torch":
                import torch

                gen = torch.Generator(device=device).manual_seed(int(cs.generate_state(1, np.uint64)[0] >> 1))
            else:
                gen = np.random.default_rng(cs)
            args.append(gen)
        else:
            args.append(_as(arrays, uniforms[start : start + chunk_rows].astype(np.float32), device))
        result = call_subject(kernel, tuple(args))
        with reading("its result"):  # whatever the returned objects raise when read is a finding
            checked = validate_outputs(result, drafts, case.vocab_size)
        for name, a, b in zip(("draft_ids", "draft_probs", "target_probs"), args, kept):
            if not (a.equal(b) if arrays == "torch" else np.array_equal(a, b)):
                raise ContractBreach(f"wrote into its input {name}")
        yield checked


def case_task(kernel, case: kc.KernelCase) -> int:
    """In the subject's process: nothing but receiving ``case`` (its vocabulary size back): what
    every task on the case costs besides its kernel calls, for a forecast."""
    return int(case.vocab_size)


def kernel_rows_task(
    kernel,
    case: kc.KernelCase,
    rows: np.ndarray,
    uniforms,
    arrays: str,
    chunk_rows: int,
    generators=None,
    device: str = "cpu",
):
    """In the subject's process: the kernel on instance rows ``rows`` with ``uniforms`` [R, k+1]
    (or, when None, chunk c with a generator seeded from ``stream(generators, c)``: an int seed
    or a ``SeedSequence`` node), in chunks; ("ok", out, nacc) or ("breach", what)."""
    try:
        got = list(_chunks(kernel, case, rows, uniforms, arrays, chunk_rows, generators, device))
    except ContractBreach as exc:
        return "breach", message_of(exc)
    return "ok", np.concatenate([o for o, _ in got]), np.concatenate([n for _, n in got])


def kernel_counts_task(
    kernel,
    case: kc.KernelCase,
    b: int,
    n: int,
    seed,
    arrays: str,
    chunk_rows: int,
    generator: bool,
    device: str = "cpu",
):
    """In the subject's process: n rows of instance b, counted by (accepted, emitted token):
    ("ok", {(j, y): count}) or ("breach", what). ``seed``: a ``SeedSequence`` node (the look's,
    ``kernel.KERNEL_STREAMS``) or an int: the uniforms are drawn from ``stream(seed, 0)``, or the
    kernel's own generator for the c-th chunk of ``chunk_rows`` rows seeded from
    ``stream(seed, 1, c)``. Only the counts cross the pipe: 10^6 rows cost a few kilobytes."""
    counts: dict = {}
    rng = np.random.default_rng(stream(seed, 0))
    try:
        for c, start in enumerate(range(0, n, chunk_rows)):
            m = min(chunk_rows, n - start)
            rows = np.full(m, b, dtype=np.int64)
            u = None if generator else rng.random((m, case.k + 1), dtype=np.float32)
            for out, nacc in _chunks(kernel, case, rows, u, arrays, m, stream(seed, 1), device, first=c):
                keys, freq = np.unique(
                    nacc * (case.vocab_size + 1) + out[np.arange(len(nacc)), nacc], return_counts=True
                )
                for key, c in zip(keys.tolist(), freq.tolist()):
                    j, y = divmod(key, case.vocab_size + 1)
                    counts[(j, y)] = counts.get((j, y), 0) + c
    except ContractBreach as exc:
        return "breach", message_of(exc)
    return "ok", counts


def kernel_batches_task(
    kernel, case: kc.KernelCase, rows: np.ndarray, uniforms: np.ndarray, arrays: str, device: str, keep=None
):
    """In the subject's process: one kernel call per uniform set ``uniforms[c]`` [B, k + 1], each
    on the same batch (instance rows ``rows`` [B], in that order: row r at batch position r);
    ("ok", out [C, B, k + 1], nacc [C, B]) or, with ``keep`` a position, only that row's
    ([C, 1, k + 1], [C, 1]); ("breach", what) on a breach."""
    outs, naccs = [], []
    try:
        for u in uniforms:
            for out, nacc in _chunks(kernel, case, rows, u, arrays, len(rows), None, device):
                outs.append(out if keep is None else out[keep : keep + 1])
                naccs.append(nacc if keep is None else nacc[keep : keep + 1])
    except ContractBreach as exc:
        return "breach", message_of(exc)
    return "ok", np.stack(outs), np.stack(naccs)


def pair_labels(out: np.ndarray, nacc: np.ndarray, offsets, V: int) -> dict:
    """{offset t: {(label of row r, label of row r + t): count}} over the disjoint pairs (r, r + t)
    of one batch, r in the even t-blocks (r // t even) and r + t < B; a row's label is
    nacc * (V + 1) + its emitted token."""
    labels = nacc * (V + 1) + out[np.arange(len(nacc)), nacc]
    got: dict = {}
    for t in offsets:
        r = np.arange(len(labels) - t)
        r = r[(r // t) % 2 == 0]
        keys, freq = np.unique(np.stack([labels[r], labels[r + t]], 1), axis=0, return_counts=True)
        got[t] = {(int(a), int(b)): int(c) for (a, b), c in zip(keys, freq)}
    return got


def kernel_pairs_task(
    kernel, case: kc.KernelCase, b: int, B: int, calls: int, seed, arrays: str, generator: bool, device: str, offsets
):
    """In the subject's process: ``calls`` batches of B identical rows (instance b), the uniforms
    of call c from ``stream(seed, 0, c)`` (a generator kernel's generator from ``stream(seed, 1, c)``),
    counted by ``pair_labels``: ("ok", {t: {(a, b): count}}) or ("breach", what)."""
    counts: dict = {t: {} for t in offsets}
    rows = np.full(B, b, dtype=np.int64)
    try:
        for c in range(calls):
            u = (
                None
                if generator
                else np.random.default_rng(stream(seed, 0, c)).random((B, case.k + 1), dtype=np.float32)
            )
            for out, nacc in _chunks(kernel, case, rows, u, arrays, B, stream(seed, 1), device, first=c):
                for t, got in pair_labels(out, nacc, offsets, case.vocab_size).items():
                    for key, n in got.items():
                        counts[t][key] = counts[t].get(key, 0) + n
    except ContractBreach as exc:
        return "breach", message_of(exc)
    return "ok", counts


def kind_task(kernel) -> bool:
    return uses_generator(kernel)


def as_round_sampler(kernel):
    """The handout's ``speculative_step(p_fn, q_fn, prefix, k, rng)`` over a kernel with B = 1:
    k drafts from q with ``rng`` (their q rows kept), the k + 1 target rows, k + 1 float32
    uniforms from ``rng`` (or a generator seeded from it), one kernel call; the accepted drafts
    and the emitted token. Lets the round battery judge a kernel as it judges any round."""
    from ...samplers.chain import draft

    generator = uses_generator(kernel)

    def speculative_step(p_fn, q_fn, prefix, k, rng):
        prefix = tuple(prefix)
        drafts, qs = draft(q_fn, prefix, k, rng)
        ps = [np.asarray(p_fn(prefix + tuple(drafts[:i])), dtype=np.float32) for i in range(k + 1)]
        u: np.random.Generator | np.ndarray  # the kernel's generator, or its uniforms
        if generator:
            u = np.random.default_rng(int(rng.integers(1 << 62)))
        else:
            u = np.array([[rng.random() for _ in range(k + 1)]], dtype=np.float32)
        out, nacc = validate_outputs(
            kernel(
                np.array([drafts], dtype=np.int64),
                np.array([qs], dtype=np.float32).reshape(1, k, -1),
                np.array([ps], dtype=np.float32),
                u,
            ),
            np.array([drafts], dtype=np.int64),
            len(ps[0]),
        )
        return [int(t) for t in out[0, : int(nacc[0]) + 1]]

    speculative_step.__name__ = getattr(kernel, "__name__", "kernel") + "_as_round"
    return speculative_step
