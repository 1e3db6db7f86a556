"""The probes every runnable row goes through besides the battery: the four k = 1, V = 4
instances where engines disagree (measure-zero coins, a drafted token with q(x) = 0, an empty
residual), run with the coin forced, described in words; and whether a seeded call replays."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from .engine_row import Engine

ONE_MINUS_F32 = float(np.float32(1.0) - np.float32(2.0**-24))
ONE_MINUS_F64 = 1.0 - 2.0**-53


PROBE_V = 4


def probe_cases() -> dict:
    """The four k = 1, V = 4 instances where engines disagree: (draft x, q row, p row, coin)."""
    f = np.float32
    return {
        "p0_u0": (0, f([0.5, 0.5, 0, 0]), f([0, 0.5, 0.5, 0]), 0.0),
        "pq_u1": (0, f([0.5, 0.5, 0, 0]), f([0.5, 0.5, 0, 0]), None),  # coin: the engine's largest
        "q0_draft": (0, f([0, 0.5, 0.5, 0]), f([0.25, 0.25, 0.25, 0.25]), 0.5),
        "empty_residual": (0, f([0, 0.5, 0.5, 0]), f([0, 0.5, 0.5, 0]), 0.5),
    }


def kernel_probe(kernel, coin_context=None, explicit: bool = False):
    """A probe for a canonical kernel: n rows of one k = 1 instance with the coin forced (explicit
    uniforms, or ``coin_context(value)`` injecting it into the engine) and the rest of the
    randomness free; -> [(accepted, emitted token)]."""

    def probe(x, q, p, coin, n):
        ids = np.full((n, 1), x, np.int64)
        qs = np.repeat(q[None, None], n, 0)
        bonus = np.full(PROBE_V, 1.0 / PROBE_V, np.float32)
        ps = np.repeat(np.stack([p, bonus])[None], n, 0)
        if explicit:
            u = np.stack([np.full(n, coin, np.float32), (np.arange(n, dtype=np.float32) + 0.5) / n], 1)
            out, nacc = kernel(ids, qs, ps, u)
        else:
            with coin_context(coin) if coin_context else nullcontext():
                out, nacc = kernel(ids, qs, ps, np.random.default_rng(0))
        out, nacc = np.asarray(out), np.asarray(nacc)
        return [(bool(a > 0), int(out[i, a])) for i, a in enumerate(nacc)]

    return probe


def round_probe(verify):
    """A probe for a round wrapper's ``verify(drafts, ps, qs, coins, seed)``."""

    def probe(x, q, p, coin, n):
        bonus = np.full(PROBE_V, 1.0 / PROBE_V)
        got = []
        for i in range(n):
            out = verify([x], [p.astype(np.float64), bonus], [q.astype(np.float64)], coin, i)
            got.append((len(out) == 2, int(out[-1]) if len(out) == 1 else int(out[1])))
        return got

    return probe


def replays(engine: Engine, subject) -> bool:
    """Whether two calls with the same seed give the same outputs (a seeded request replays):
    a kernel gets equal ``torch.Generator`` seeds (or the same uniforms), a round sampler equal
    NumPy seeds. Eight rows / rounds of a small V = 4, k = 2 instance."""
    import torch

    rng = np.random.default_rng(7)
    q = rng.dirichlet(np.ones(PROBE_V), (8, 2)).astype(np.float32)
    p = rng.dirichlet(np.ones(PROBE_V), (8, 3)).astype(np.float32)
    ids = np.stack([[rng.choice(PROBE_V, p=q[b, i] / q[b, i].sum()) for i in range(2)] for b in range(8)])
    u = rng.random((8, 3), dtype=np.float32)
    outs = []
    for _ in range(2):
        if engine.interface == "round":
            r = np.random.default_rng(11)

            def row(x):
                x = x.astype(np.float64)
                return x / x.sum()

            outs.append(
                [
                    subject(lambda pre: row(p[0, min(len(pre), 2)]), lambda pre: row(q[0, min(len(pre), 1)]), (), 2, r)
                    for _ in range(8)
                ]
            )
        else:
            from ..interfaces.kernel.battery import uses_generator

            arg = torch.Generator().manual_seed(11) if uses_generator(subject) else u
            out, nacc = subject(ids, q, p, arg)
            outs.append((np.asarray(out).tolist(), np.asarray(nacc).tolist()))
    return outs[0] == outs[1]


def run_probes(probe, one_minus: float, n: int = 64) -> dict:
    """What the engine does on each probe instance, in words, plus raw facts for JSON."""
    out = {}
    for name, (x, q, p, coin) in probe_cases().items():
        coin = one_minus if coin is None else coin
        try:
            got = probe(x, q, p, coin, n)
        except Exception as exc:  # noqa: BLE001 - an engine failing here is a behaviour
            out[name] = {"text": f"raises {type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"}
            continue
        acc = sum(a for a, _ in got) / len(got)
        emitted = sorted({t for a, t in got if not a})
        zero = [t for t in emitted if p[t] <= 0]
        out[name] = {
            "accept_rate": acc,
            "emitted_after_rejection": emitted,
            "zero_probability_emitted": zero,
            "coin": coin,
        }
    return out


def describe_probes(facts: dict, uniform_range: str) -> tuple[str, str]:
    """(measure-zero text, disagreement text) from ``run_probes`` facts."""

    def rate(name):
        f = facts.get(name, {})
        if "text" in f:
            return f["text"]
        a = f.get("accept_rate", 0.0)
        return "accepts" if a == 1 else "rejects" if a == 0 else f"accepts {a:.0%}"

    top = facts.get("pq_u1", {}).get("coin", ONE_MINUS_F32)
    top = "1 - 2^-53" if top == ONE_MINUS_F64 else "1 - 2^-24" if top == ONE_MINUS_F32 else f"{top:.10g}"
    mz = f"u = 0, p(x) = 0 < q(x): {rate('p0_u0')}; u = {top}, p = q: {rate('pq_u1')}"
    q0 = facts.get("q0_draft", {})
    er = facts.get("empty_residual", {})
    if "text" in q0:
        q0_text = q0["text"]
    else:
        q0_text = rate("q0_draft")
        if q0.get("accept_rate", 1) < 1:
            q0_text += f", then emits {q0['emitted_after_rejection']}"
    if "text" in er:
        er_text = er["text"]
    elif er.get("accept_rate", 0) == 1:
        er_text = "not reached (the q(x) = p(x) = 0 draft is accepted)"
    else:
        zero = er.get("zero_probability_emitted", [])
        er_text = f"emits {er.get('emitted_after_rejection')}" + (f" (p = 0 for {zero})" if zero else "")
    dis = f"q(x) = 0 draft (p(x) = .25): {q0_text}; empty residual (p = q, draft with p(x) = q(x) = 0): {er_text}"
    return mz, dis
