"""A row's verdict: the engine's Report under its budget (``judge``; rounding is told apart from a
finding by the one policy, ``laws.rounding``, inside the battery), and the table's words for the verdict, the power, how it was
reached, the reach, the efficiency and the edges."""

from __future__ import annotations

from dataclasses import replace

from .engine_row import Engine


def judge(engine: Engine, subject, budget: str, seed: int = 0, workers: int = 1):
    """The engine's Report under budget ``budget`` (its per-engine overrides applied). ``workers``:
    processes of a round row's subject that share its enumerations and sampled runs (the report
    is the same with 1 or N); a kernel row runs in one. A kernel budget's ``kernel_cases`` (name
    prefixes, ``chosen_cases``) runs those of the battery's cases only; its reach is theirs."""
    from ..interfaces.kernel import battery as KI
    from ..interfaces.round import cases as round_cases
    from ..surface import api

    spec = dict(engine.budgets.get(budget, {"base": budget}))
    base = spec.pop("base", budget)
    stop = spec.pop("stop_on_first", False)
    counterexample = engine.expected != "exact" or engine.interface == "kernel"
    if engine.interface == "kernel":
        chosen = spec.pop("kernel_cases", None)
        kb = replace(KI.get_budget(base), name=f"{budget}-{engine.name}", **spec)
        result = KI.run(subject, kb, seed, stop_on_first=stop, cases=chosen_cases(kb, seed, chosen))
        return api.Report(
            target=engine.name,
            seed=seed,
            budget=kb.name,
            coverage=KI.coverage(kb),
            false_fail_rate=kb.false_fail_rate,
            result=result,
        )
    rb = replace(round_cases.get_budget(base), name=f"{budget}-{engine.name}", **spec)
    return api.check(
        subject,
        budget=rb,
        seed=seed,
        interface="round",
        counterexample=counterexample,
        target=engine.name,
        progress=False,  # the engines command reports its own progress
        workers=workers,
    )


def chosen_cases(kb, seed: int, prefixes: tuple[str, ...] | None):
    """The kernel battery's cases at ``kb`` whose names start with one of ``prefixes``, in the
    order of ``prefixes`` (the first is the one the contract runs on); None (the budget's own
    cases) when ``prefixes`` is None. A prefix no case has is a ValueError naming it."""
    if prefixes is None:
        return None
    from ..interfaces.kernel import plan

    every = plan.cases(kb, seed)
    chosen = []
    for prefix in prefixes:
        found = [c for c in every if c.name.startswith(prefix)]
        if not found:
            raise ValueError(f"cases: no kernel case at budget {kb.name} starts with {prefix!r}")
        chosen += found
    return chosen


def how_text(report, interface: str) -> str:
    """How the row's power was reached: the cases whose law was had exactly (enumerated, or from
    explicit uniforms) and those judged by statistics alone, with the TV those see."""
    cases = report.to_dict()["coverage"]["cases"]
    exact = [c for c in cases if c.get("judged") in ("enumeration", "exact from uniforms")]
    stat = [c for c in cases if c.get("judged") in ("chi-square", "binned chi-square")]
    words = []
    if exact:
        law = "exact from explicit uniforms" if interface == "kernel" else "exact law"
        tv = report.result.exact_tv_max
        words.append(f"{law}: {len(exact)} cases" + (f" (largest TV {tv:.2g})" if tv is not None else ""))
    if stat:
        seen = [c["detect_tv"] for c in stat if c.get("detect_tv") is not None]
        words.append(f"statistics: {len(stat)} cases" + (f" (see TV >= {max(seen):.3g})" if seen else ""))
    return "; ".join(words) or "none (not judged)"


def reach_text(reach: dict, note: str = "") -> str:
    """The reach box of a row's run in words (``interfaces.reach_words``: each swept dimension's
    largest value, e.g. ``k <= 6, batch <= 65, dense V <= 1,024``): what its "exact" covers;
    ``note`` (``row_reach``'s) says when the box is that of the cases run, not the budget's."""
    from ..interfaces import reach_words

    words = reach_words(reach or {})
    return f"reach{f' ({note})' if note else ''}: {words}" if words else ""


def row_reach(engine: Engine, budget: str, report) -> tuple[dict, str]:
    """(reach box, note) of a row's run: the battery's reach (its budget's sweeps), or, for a row
    that stops at its first finding (its budget's ``stop_on_first``), the box of the cases it
    ran (largest k, V and batch of the coverage entries) with a note saying so: the budget's
    sweeps past the first finding were not run, so they are not claimed."""
    coverage = report.to_dict()["coverage"]
    if not engine.budgets.get(budget, {}).get("stop_on_first"):
        return coverage["reach"], ""
    cases = coverage["cases"]
    box = {
        "k": max((c.get("k", 0) for c in cases), default=0),
        "V": max((c.get("vocab", 0) for c in cases), default=0),
        "batch": max((b for c in cases for b in c.get("batches", [])), default=0),
    }
    return box, f"run until its first finding: {len(cases)} case{'s' if len(cases) != 1 else ''}"


def power_text(result) -> str:
    if result.power:
        worst = max(p.get("min_tv", p.get("min_detectable_tv", float("nan"))) for p in result.power)
        runs = sum(p["runs"] for p in result.power)
        return f"statistics: sees TV >= {worst:.3g} per case ({len(result.power)} cases, {runs:,} rows/rounds)"
    if result.exact_tv_max is not None:
        return f"exact (no sampling noise): largest TV {result.exact_tv_max:.2g}"
    return "none (not judged)"


def efficiency_text(result) -> str:
    pairs = list(result.mean_tokens_per_round.values())
    if not pairs:
        return "n/a"
    got, want = sum(a for a, _ in pairs), sum(b for _, b in pairs)
    return f"{got / want:.3f}x the token-wise rule's tokens/round ({len(pairs)} cases)" if want else "n/a"


def verdict_text(engine: Engine, report) -> str:
    e = report.exact
    dist = [f for f in report.findings if f.kind == "distribution"]
    if engine.expected == "different-rule" and dist and not [f for f in report.findings if f.kind == "contract"]:
        return (
            "differs from the token-wise rule given drafts (block verification is a different rule; "
            "see the round row for its marginal law)"
        )
    word = {True: "exact", False: "not exact", None: "inconclusive"}[e]
    if e is False and engine.expected == "lossy":
        word += " (lossy by design)"
    return word


def edge_text(report) -> str:
    edges = [f for f in report.findings if f.kind == "edge"]
    if not edges:
        return ""
    kinds: dict = {}
    for f in edges:
        kinds.setdefault(f.check, f.message)
    return "; ".join(f"battery {k} ({sum(f.check == k for f in edges)}x): {m[:160]}" for k, m in kinds.items())


def short_counterexample(cx: dict | None) -> dict | None:
    if not cx:
        return None
    keep = {
        k: cx[k]
        for k in ("method", "model", "vocab_size", "k", "draft_ids", "p", "q", "exact_tv", "empirical_tv", "samples")
        if k in cx
    }
    keep["distributions"] = cx.get("distributions", [])[:6]
    return keep
