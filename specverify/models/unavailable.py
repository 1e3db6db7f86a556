"""Drafters that cannot run in a measurement setting, and the table row that says why.

``models.measure`` asks ``unavailable_reason`` before it runs each drafter of a (workload, mode);
a drafter with a reason gets ``unavailable_row`` instead of a crash: the row names the workload,
the mode and the drafter, every measured field is None, and ``unavailable`` holds the reason. So a
table asked for every drafter (``drafters=tuple(measure.DRAFTERS)``) always has one row per
drafter, and a reader sees what was left out and why.

Today one drafter has a requirement: ``medusa`` drafts with a trained head on the target
(``models.medusa``; ``python -m specverify.models train-head`` trains one, ``measure --head``
or ``measure(..., head=...)`` passes it).
"""

from __future__ import annotations

MEDUSA_NEEDS_A_HEAD = (
    "needs a trained Medusa head: pass head= (measure --head HEAD.pt), trained by "
    "python -m specverify.models train-head"
)


def medusa_reason(setting) -> str | None:
    """Why the Medusa drafter cannot run in ``setting`` (no head), or None."""
    return MEDUSA_NEEDS_A_HEAD if setting.head is None else None


REQUIREMENTS = {"medusa": medusa_reason}
"""Drafter name -> a function of the setting giving why it cannot run there, or None."""


def unavailable_reason(setting, drafter: str) -> str | None:
    """Why ``drafter`` cannot run in ``setting`` (a ``measure.Setting``), or None when it can."""
    check = REQUIREMENTS.get(drafter)
    return check(setting) if check else None


def mode_label(temperature: float) -> str:
    """The table's mode column: ``greedy`` at temperature 0, else ``T=<temperature>``."""
    return "greedy" if temperature == 0 else f"T={temperature:g}"


def unavailable_row(setting, drafter: str, reason: str, fields) -> dict:
    """The row of a drafter left out: ``fields`` (the table's required fields) all None but the
    workload, mode and drafter, and ``unavailable`` = ``reason``."""
    row: dict = dict.fromkeys(fields)
    row.update(
        workload=setting.workload,
        mode=mode_label(setting.temperature),
        drafter=drafter,
        n_prompts=len(setting.prompts),
        unavailable=reason,
    )
    return row
