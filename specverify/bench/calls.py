"""Calls per verdict: how many times the round battery calls a subject at each budget.

``specverify bench calls [--budgets quick,standard[,thorough]] [--forms ...] [--json]`` runs
``specverify check`` (``surface.api.check``, no counterexample search) on three forms of
Leviathan et al.'s rule (arXiv 2211.17192), each exact:

- ``rng.choice``: the reference rule, ``specverify.samplers.chain.speculative_step`` (under the
  enumerator its tokens are ``rng.choice`` draws and its coins ``rng.random() < ratio``);
- ``inverse CDF``: every token by ``searchsorted(cumsum(w), rng.random())`` and the coins
  ``u * q(x) < p(x)`` (``samplers.inverse_cdf.speculative_step``);
- ``torch``: the inverse-CDF form in torch, ``torch.searchsorted`` and ``cumsum > u`` then
  ``argmax`` from a seeded ``torch.Generator`` (``samplers.torch_inverse_cdf.torch_speculative_step``);

and prints, per form and budget, the subject calls the verdict cost, the cases the enumerator
judged out of all, the verdict and the seconds, beside the figures measured before the enumerator
followed inverse-CDF code (``BEFORE``). Calls are counted by a counter around the subject: each
call appends one byte to a file named in the subject's environment (``CALLS_FILE_VARIABLE``),
so enumeration runs, contract rounds and sampled runs all count, in whichever process makes them.

Thorough takes minutes per form (its sampled runs are ten times standard's): it runs only when
``--budgets`` names it. The counts depend on the budgets and the seed, not on the machine; the
seconds are this machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from contextlib import contextmanager

CALLS_FILE_VARIABLE = "SPECVERIFY_BENCH_CALLS_FILE"
"""The environment variable naming the file each counted subject call appends one byte to."""

BUDGETS = ("quick", "standard", "thorough")
DEFAULT_BUDGETS = ("quick", "standard")
"""Thorough only when asked: minutes per form."""

FORMS = {
    "rng.choice": "specverify.bench.calls:counted_choice_form",
    "inverse CDF": "specverify.bench.calls:counted_inverse_cdf_form",
    "torch": "specverify.bench.calls:counted_torch_form",
}
"""Form -> the counted subject's TARGET."""

BEFORE: dict[str, dict[str, int]] = {
    "rng.choice": {"quick": 11_629, "standard": 53_301, "thorough": 512_772},
    "inverse CDF": {"standard": 465_774},
}
"""Calls per verdict before the enumerator followed inverse-CDF and threshold code and before the
cross-checks were resized, as the issue that asked for this benchmark measured them on the code
of that time (2 cores, one byte written per subject call): the rule with ``rng.choice`` at each
budget, and its inverse-CDF form at standard (then not enumerable on any of its 47 cases)."""


def count_call() -> None:
    """One subject call counted: a byte appended to the file ``CALLS_FILE_VARIABLE`` names (none
    named: nothing)."""
    path = os.environ.get(CALLS_FILE_VARIABLE)
    if path:
        with open(path, "ab") as f:
            f.write(b".")


@contextmanager
def counted_calls(**environment: str):
    """For the body: a fresh file named by ``CALLS_FILE_VARIABLE`` (and ``environment``'s
    variables set), so that a counted subject's calls append to it; yields a function giving the
    calls counted so far. The environment is restored and the file removed after."""
    fd, path = tempfile.mkstemp(prefix="specverify-calls-")
    os.close(fd)
    settings = {CALLS_FILE_VARIABLE: path, **environment}
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield lambda: os.path.getsize(path)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        os.unlink(path)


def counted_choice_form(p_fn, q_fn, prefix, k, rng):
    """The reference rule (``samplers.chain.speculative_step``), counted."""
    from ..samplers.chain import speculative_step

    count_call()
    return speculative_step(p_fn, q_fn, prefix, k, rng)


def counted_inverse_cdf_form(p_fn, q_fn, prefix, k, rng):
    """The rule by inverse CDF in NumPy (``samplers.inverse_cdf.speculative_step``), counted."""
    from ..samplers.inverse_cdf import speculative_step

    count_call()
    return speculative_step(p_fn, q_fn, prefix, k, rng)


def __getattr__(name: str):
    """``counted_torch_form``: the rule by inverse CDF in torch
    (``samplers.torch_inverse_cdf.torch_speculative_step``), counted. Made on first access, so
    that torch loads when the subject's process loads its TARGET, never in the benchmark's own
    process, and its first call is not held up by torch's import."""
    if name != "counted_torch_form":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ..samplers.torch_inverse_cdf import torch_speculative_step

    def counted_torch_form(p_fn, q_fn, prefix, k, rng):
        count_call()
        return torch_speculative_step(p_fn, q_fn, prefix, k, rng)

    globals()[name] = counted_torch_form
    return counted_torch_form


def measure(form: str, budget: str) -> dict:
    """One verdict of ``form`` at ``budget``: its subject calls, cases enumerated, verdict, seconds."""
    from ..surface.api import check

    with counted_calls() as calls_so_far:
        t0 = time.perf_counter()
        report = check(FORMS[form], budget=budget, counterexample=False)
        seconds = time.perf_counter() - t0
        calls = calls_so_far()
    cases = report.to_dict()["coverage"]["cases"]
    return {
        "form": form,
        "budget": budget,
        "calls": calls,
        "before": BEFORE.get(form, {}).get(budget),
        "enumerated": sum(c.get("judged") == "enumeration" for c in cases),
        "cases": len(cases),
        "exact": report.exact,
        "seconds": seconds,
    }


def table(rows: list[dict]) -> str:
    """The rows as text: calls now beside calls before, cases enumerated, verdict, seconds."""
    lines = [f"{'form':<12} {'budget':<9} {'calls':>9} {'before':>9} {'enumerated':>11} {'verdict':>9} {'s':>7}"]
    for r in rows:
        before = f"{r['before']:,}" if r["before"] else "-"
        verdict = {True: "EXACT", False: "NOT EXACT", None: "INCONCL."}[r["exact"]]
        enumerated = f"{r['enumerated']}/{r['cases']}"
        lines.append(
            f"{r['form']:<12} {r['budget']:<9} {r['calls']:>9,} {before:>9} {enumerated:>11} {verdict:>9} "
            f"{r['seconds']:>7.1f}"
        )
    return "\n".join(lines)


def _names(text: str, allowed, what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{what}: {', '.join(unknown) or 'none'} (choose from {', '.join(allowed)})")
    return names


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="specverify bench calls", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--budgets",
        type=lambda s: _names(s, BUDGETS, "--budgets"),
        default=list(DEFAULT_BUDGETS),
        help="comma-separated budgets (default quick,standard; thorough takes minutes per form)",
    )
    ap.add_argument(
        "--forms",
        type=lambda s: _names(s, FORMS, "--forms"),
        default=list(FORMS),
        help=f"comma-separated forms (default all: {','.join(FORMS)})",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON list")
    args = ap.parse_args(argv)
    rows = [measure(form, budget) for form in args.forms for budget in args.budgets]
    print(json.dumps(rows) if args.json else table(rows))
    return 0 if all(r["exact"] is True for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
