"""The arithmetic of a thorough campaign of round samplers: its budget, its runs, and the hours
they take.

``campaign_runs`` (``round.cases``) counts the sampler runs a campaign that sees TV X on every
case needs (its budget: ``campaign_budget``, the round section of ``tv=X``); ``campaign_table``
is the README's campaign line ("Scale out"): N subjects x M cases = R runs and their hours on one
machine and on W workers, at the rate ``measure_runs_per_second`` measures on the reference
sampler. A module of the interfaces layer beside the registry, so that ``specverify.surface.api``
re-exports these names without naming the round interface's modules.
"""

from __future__ import annotations

from ..samplers.chain import speculative_step
from .round import cases as round_cases
from .round import tasks as round_tasks
from .round.cases import campaign_budget, campaign_runs


def campaign_table(
    subjects: int, tv: float = 1e-3, budget: str = "thorough", runs_per_second: float | None = None, cores: int = 2
) -> str:
    """The README's campaign line: N subjects x M cases at TV ``tv`` = R runs, and the hours they
    take on one ``cores``-core machine and on W one-core workers, at ``runs_per_second`` per core
    (measured on the reference sampler when None). The mutant report's line, with its own
    subjects: ``specverify.mutants.report.campaign_line``."""
    c = campaign_runs(tv, budget)
    rate = runs_per_second or measure_runs_per_second()
    total = subjects * c["runs"]
    core_hours = total / rate / 3600
    return (
        f"{subjects} subjects x {c['cases']} cases at TV {tv:g} = {total:.3g} runs "
        f"({c['runs']:.3g} per subject: {c['looks']} looks, the last at {c['n_max']:,} runs per "
        f"case; per-check false-fail rate {c['per_check_false_fail_rate']:.2g}). At {rate:,.0f} "
        f"runs per core-second: {duration(core_hours / cores)} on one {cores}-core machine, "
        f"about {duration(core_hours)} / W on W one-core workers (W up to {subjects}: one task "
        f"per subject; {duration(core_hours / subjects)} per subject)"
    )


def duration(hours: float) -> str:
    """A time in the unit that reads best: "1,290 hours", "2.5 hours", "12 minutes", "40 s"
    (never "0 hours")."""
    if hours >= 10:
        return f"{hours:,.0f} hours"
    if hours >= 1:
        return f"{hours:.1f} hours"
    if hours * 60 >= 1:
        return f"{hours * 60:.0f} minutes"
    return f"{hours * 3600:.2g} s"


def measure_runs_per_second(seconds: float = 2.0) -> float:
    """Runs of the reference sampler per CPU-second (process time, so a loaded machine does not
    lower it), on the thorough budget's cases, through the battery's guard, in this process."""
    import time

    import numpy as np

    cases = round_cases.battery("thorough")
    rng = np.random.default_rng(0)
    n, t0 = 0, time.process_time()
    while time.process_time() - t0 < seconds:
        for case in cases:
            round_tasks.sample_first_tokens(speculative_step, case, 20, rng)
            n += 20
    return n / (time.process_time() - t0)


__all__ = ["campaign_budget", "campaign_runs", "campaign_table", "duration", "measure_runs_per_second"]
