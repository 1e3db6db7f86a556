"""How a report reads: the text of a ``check`` report, for people.

``human`` is what ``python -m specverify check`` prints (``api.Report.text()``): one short line
with the subject, the verdict and the seconds, then the budget's coverage, the reach and the
statistics' power, each finding in one line, the controls, the checks counted and the smallest
counterexample last; ``--verbose`` (``verbose=True``) lists every finding whole and each check
that ran. No line is longer than ``WIDTH`` (a longer one wraps, its continuation indented).
``failure_message`` is ``assert_exact``'s AssertionError and the JUnit failure text: the verdict,
each finding, the counterexample's distributions side by side (``counterexample_lines``; a loop
counterexample's logit tables: ``loop_model_lines``). Everything here reads ``Report.to_dict()``,
the JSON ``check --json`` prints, so the words come from the same object as the JSON; nothing
here runs a battery. ``VERDICT_WORDS`` is the one verdict vocabulary (EXACT / NOT EXACT /
INCONCLUSIVE).
"""

from __future__ import annotations

import re
from collections import Counter

from ..common.tables import WIDTH, counted, wrap
from ..interfaces import reach_words

VERDICT_WORDS = {True: "EXACT", False: "NOT EXACT", None: "INCONCLUSIVE"}
CANNOT_RUN_HERE = "CANNOT RUN HERE"
"""The words of an environment error (the report's ``environment``): not a verdict."""
EFFICIENCY_WORDS = {True: "efficient", False: "NOT efficient", None: "efficiency not established"}


def failure_message(report) -> str:
    """The verdict, every finding and shortfall, and the smallest counterexample side by side
    (of an ``api.Report`` or of its ``to_dict()``)."""
    d = report if isinstance(report, dict) else report.to_dict()
    lines = [
        f"{d['target']}: {VERDICT_WORDS[d['exact']]} (seed {d['seed']}, budget {d['budget']}, "
        f"false-fail rate {d['false_fail_rate']:g})"
    ]
    lines += finding_lines(d)
    ce = d["counterexample"]
    if ce:
        lines += counterexample_lines(ce)
    return "\n".join(lines)


def finding_lines(report: dict) -> list[str]:
    """One line per finding, then one per reason the verdict is inconclusive."""
    lines = []
    for f in report["findings"]:
        where = f" on {f['case']}" if f["case"] else ""
        lines.append(f"  [{f['kind']}] {f['check']}{where}: {f['message']}")
    return lines + [f"  [inconclusive] {s}" for s in report["shortfalls"]]


def counterexample_lines(ce: dict, rows: int = 16) -> list[str]:
    """The smallest model and its distributions side by side, the largest differences first."""
    tv = ce.get("exact_tv", ce.get("empirical_tv"))
    lines = [
        f"  smallest counterexample ({ce['method']}): vocab {ce['vocab_size']}, k={ce['k']}, "
        f"window {counted(ce['window'], 'token')}, prefix {ce['prefix']}, model {ce['model']}, TV {tv:.4g}"
    ]
    if "requests" in ce:  # a loop counterexample: p and q are logit tables; the requests and what they show
        lines += loop_model_lines(ce, "    ")
        lines += [f"    request {j}: prompt {r['prompt']}, params {r['params']}" for j, r in enumerate(ce["requests"])]
        lines.append(f"    shows [{ce['kind']}] {ce['check']}: {ce['message']}")
    else:
        lines += [f"    p = {ce['p']}", f"    q = {ce['q']}"]
    lines.append(f"    {'tokens':>12}  {'sampler':>10}  {'target':>10}  {'difference':>11}")
    dist = sorted(ce["distributions"], key=lambda r: -abs(r["sampler"] - r["target"]))
    for r in dist[:rows]:
        lines.append(
            f"    {' '.join(map(str, r['tokens'])):>12}  {r['sampler']:>10.6f}  "
            f"{r['target']:>10.6f}  {r['sampler'] - r['target']:>+11.6f}"
        )
    if len(dist) > rows:
        lines.append(f"    ... {counted(len(dist) - rows, 'more sequence', 'more sequences')}")
    return lines


def loop_model_lines(ce: dict, indent: str) -> list[str]:
    """A loop counterexample's models, one row per context: the target's and the draft's raw
    logits (a table row is chosen by the position modulo the table's period and the last token),
    then, where given, the processed target distribution p of the request's first output token."""
    lines = []
    if ce.get("method") == "binned":  # an engine-scale batch: the heaviest ids of its rows
        return [
            f"{indent}processed target p (heaviest ids) = {ce.get('p')}",
            f"{indent}draft q (heaviest ids) = {ce.get('q')}",
        ]
    for words, key in (("target logits", "p"), ("draft logits", "q")):
        table = ce.get(key)
        if not isinstance(table, list) or not table or not isinstance(table[0], list):
            lines.append(f"{indent}{words} = {table}")
            continue
        lines.append(f"{indent}{words} (row: position mod {len(table)}, last token):")
        for j, rows in enumerate(table):
            for last, row in enumerate(rows if isinstance(rows[0], list) else [rows]):
                lines.append(f"{indent}  [{j}, {last}]: " + " ".join(f"{x:.4g}" for x in row))
    if ce.get("processed_p"):
        lines.append(
            f"{indent}processed p of request {ce.get('request', 0)}'s first token: "
            + " ".join(f"{x:.4g}" for x in ce["processed_p"])
        )
    return lines


def coverage_words(coverage) -> str:
    """The budget's plan and how many cases ran, by origin and by how they were judged."""
    if isinstance(coverage, str):
        return coverage
    ran = cases_words(coverage)
    return f"{coverage['summary']}; {ran}" if ran else coverage["summary"]


def cases_words(coverage) -> str:
    """How many cases ran, by origin and by how they were judged ("ran 6 cases (4 fixed,
    2 generated; 6 by enumeration)"); "" when the coverage lists none."""
    cases = [] if isinstance(coverage, str) else coverage.get("cases", [])
    if not cases:
        return ""
    words = ", ".join(f"{n} {o}" for o, n in Counter(c["origin"] for c in cases).items())
    judged = ", ".join(f"{n} by {j}" for j, n in Counter(c["judged"] for c in cases).items())
    return f"ran {counted(len(cases), 'case')} ({words}; {judged})"


def verdict_label(exact: bool | None, efficient: bool | None) -> str:
    """The verdict in words: NOT EXACT alone for a biased sampler (its efficiency means
    nothing), else EXACT or INCONCLUSIVE with what is known of its efficiency."""
    if exact is False:
        return VERDICT_WORDS[False]
    return f"{VERDICT_WORDS[exact]}, {EFFICIENCY_WORDS[efficient]}"


def verdict_line(report: dict, width: int = WIDTH) -> str:
    """The human report's first line, within ``width``: the subject, the verdict, the seconds
    ("pkg.mod:fn: EXACT, efficient (1.3 s)"); a subject too long for it is shortened in the
    middle ("...") and given whole on the next line (``subject_lines``)."""
    label = CANNOT_RUN_HERE if report.get("environment") else verdict_label(report["exact"], report["efficient"])
    rounded = report.get("rounding") or {}
    if report["exact"] and rounded.get("rounding_cases"):  # laws.rounding: "EXACT at float32 rounding, ..."
        label = label.replace("EXACT", f"EXACT at {rounded['precision']} rounding", 1)
    tail = f": {label} ({report['seconds']:.1f} s)"
    return shortened(str(report["target"]), width - len(tail)) + tail


def shortened(text: str, width: int) -> str:
    """``text`` when it fits in ``width`` characters (at least 12), else its start and its end
    around "...", the end (a TARGET's function) kept longer."""
    width = max(12, width)
    if len(text) <= width:
        return text
    tail = (width - 3) * 2 // 3
    return text[: width - 3 - tail] + "..." + text[len(text) - tail :]


def subject_lines(report: dict, width: int = WIDTH) -> list[str]:
    """The subject whole, when ``verdict_line`` had to shorten it; else nothing."""
    target = str(report["target"])
    return [] if verdict_line(report, width).startswith(target + ": ") else [f"  subject: {target}"]


def coverage_lines(report: dict) -> list[str]:
    """What the budget planned, then what ran and how many findings it made."""
    coverage = report["coverage"]
    plan = coverage if isinstance(coverage, str) else coverage["summary"]
    ran = cases_words(coverage)
    findings = counted(len(report["findings"]), "finding")
    lines = [f"  budget {report['budget']}: {plan}"]
    reach = {} if isinstance(coverage, str) else coverage.get("reach") or {}
    if reach:
        lines.append(f"  reach: {reach_words(reach)}")
    return [*lines, f"  {ran}, {findings}" if ran else f"  {findings}"]


def power_lines(report: dict) -> list[str]:
    """The statistical checks' power: how many ran, on how many runs, and the TV each sees
    (with the probability stated where the checks give it); nothing when none ran."""
    rows = report.get("power") or []
    tvs = [t for t in (row.get("min_detectable_tv", row.get("min_tv")) for row in rows) if t is not None]
    if not tvs:
        return []
    runs = sorted(int(row["runs"]) for row in rows if row.get("runs") is not None)
    each = "" if not runs else f" of {runs[0]:,} runs" if runs[0] == runs[-1] else f" of {runs[0]:,}-{runs[-1]:,} runs"
    chance = next((row["detection_probability"] for row in rows if "detection_probability" in row), None)
    sure = f" with probability {chance:g}" if chance is not None else ""
    return [
        f"  power: {counted(len(rows), 'statistical check')}{each}; each detects a TV >= {max(tvs):.3g} "
        f"(the keenest >= {min(tvs):.3g}){sure}"
    ]


def control_lines(report: dict) -> list[str]:
    """One line per control: its verdict, and whether it was flagged as it must be."""
    return [
        f"  control {c['target']} ({c['claim']}): {VERDICT_WORDS[c['exact']]}"
        f"{'' if c['flagged'] else ' (must be NOT EXACT)'}, {counted(len(c['findings']), 'finding')}"
        for c in report.get("controls", [])
    ]


def smallest_model_lines(ce: dict | None) -> list[str]:
    """The human report's smallest counterexample: its model, then its first distributions."""
    if not ce:
        return []
    tv = ce.get("exact_tv", ce.get("empirical_tv"))
    if "requests" in ce:
        lines = [
            f"  smallest model ({ce['method']}): vocab {ce['vocab_size']}, k={ce['k']}, "
            f"window {ce['window']}, {ce['model']}, TV {tv:.4g}"
        ]
        lines += loop_model_lines(ce, "    ")
        lines.append(f"    requests {ce['requests']}; shows [{ce['kind']}] {ce['check']}: {ce['message']}")
    else:
        lines = [
            f"  smallest model ({ce['method']}): vocab {ce['vocab_size']}, k={ce['k']}, "
            f"window {ce['window']}, {ce['model']} p={ce['p']} q={ce['q']}, TV {tv:.4g}"
        ]
    for row in ce["distributions"][:8]:
        lines.append(f"    {row['tokens']}: sampler {row['sampler']:.6f}  target {row['target']:.6f}")
    return lines


def human(report: dict, width: int = WIDTH, verbose: bool = False) -> str:
    """The ``check`` command's human report of ``Report.to_dict()``, every line within ``width``
    (``fit``). The short default (``short_lines``): the verdict line (``verdict_line``), the
    budget, the reach, the cases run, the power, every finding and every reason for an
    INCONCLUSIVE verdict in one line each, the checks run counted, and the smallest
    counterexample last. ``verbose``: the whole listing (``full_lines``), every finding whole,
    each check that ran, the counterexample still last. The JSON holds everything either way."""
    lines = full_lines(report, width) if verbose else short_lines(report, width)
    return "\n".join(fit(lines, width)) + "\n"


def head_lines(report: dict, width: int) -> list[str]:
    """The verdict line, the subject whole when it was shortened, why it cannot run here."""
    lines = [verdict_line(report, width), *subject_lines(report, width)]
    if report.get("environment"):
        lines += [f"  cannot run here: {report['environment']}"]
    return lines


def short_lines(report: dict, width: int = WIDTH) -> list[str]:
    """The default report (``human``): about 10 lines for an EXACT verdict, one more per finding,
    the counterexample last."""
    lines = head_lines(report, width) + coverage_lines(report) + power_lines(report)
    lines += [one_line(line, width) for line in finding_lines(report)] + verdict_reason_lines(report)
    lines += rounding_lines(report) + reference_lines(report) + control_lines(report)
    lines += run_lines(report, printed=PRINTED_SHORT, checks=False)
    lines += checks_summary_lines(report)
    return lines + smallest_model_lines(report["counterexample"])


def full_lines(report: dict, width: int = WIDTH) -> list[str]:
    """The whole listing (``check --verbose``): the short report's parts with every finding
    whole, the sampler's last printed lines, each check that ran, the counterexample last."""
    lines = head_lines(report, width) + coverage_lines(report) + power_lines(report)
    lines += finding_lines(report) + verdict_reason_lines(report) + control_lines(report)
    lines += run_lines(report)
    return lines + smallest_model_lines(report["counterexample"])


PRINTED_SHORT = 3
"""The sampler's last printed lines the short report shows (``--verbose``: 8)."""

RNG_REASON = "  why INCONCLUSIVE: it does not draw from rng, so no enumeration; statistics cannot prove exactness"
"""The one line that says why a sampler whose only finding is not drawing from ``rng`` is
INCONCLUSIVE, not NOT EXACT: the handout's contract (all randomness from ``rng``) is broken,
but that alone biases nothing; it takes away the exact enumeration, and the verdict is what
statistics can say (docs/CHECK.md's verdict table)."""


def verdict_reason_lines(report: dict) -> list[str]:
    """``RNG_REASON`` when the verdict is INCONCLUSIVE and a finding says the sampler does not
    draw from its rng (its ``[contract]`` tag would otherwise read as a NOT EXACT); else none."""
    if report["exact"] is None and any(f["check"] == "rng" for f in report["findings"]):
        return [RNG_REASON]
    return []


def reference_lines(report: dict, shown: int = 3) -> list[str]:
    """Where a reference given with ``--reference`` differs from this project's definition (its
    ``reference differs:`` lines, information, not findings): the first ``shown``, then a count."""
    notes = [line for line in report["ran"] if line.startswith("reference differs: ")]
    more = [f"  ... and {len(notes) - shown} more (--verbose lists each)"] if len(notes) > shown else []
    return [one_line(f"  {line}") for line in notes[:shown]] + more


def rounding_lines(report: dict) -> list[str]:
    """The battery's ``rounding:`` line (``laws.rounding.summary_words``: the precision judged
    at, the cases exact at its rounding, the worst case above it with both TVs) when that
    precision is below float64; at float64 the findings say it all."""
    if (report.get("rounding") or {}).get("precision", "float64") == "float64":
        return []
    return [f"  {line}" for line in report["ran"] if line.startswith("rounding: ")]


def one_line(line: str, width: int = WIDTH) -> str:
    """``line`` cut to ``width`` characters at a word, ending "..." when cut (the whole line is
    in ``--verbose`` and the JSON)."""
    if len(line) <= width:
        return line
    cut = line[: width - 3]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip(" ,;:") + "..."


def checks_summary_lines(report: dict) -> list[str]:
    """One line counting the checks that ran, by detector ("checks run: contract 1, chi-square
    34, ..."), and that ``--verbose`` lists each."""
    ran = Counter(line.split(":", 1)[0] for line in report["ran"] if ":" in line)
    if not ran:
        return []
    return [f"  checks run: {', '.join(f'{name} {n}' for name, n in ran.items())} (--verbose lists each)"]


def fit(lines: list[str], width: int = WIDTH) -> list[str]:
    """``lines`` with each one longer than ``width`` wrapped (``tables.wrap``: at spaces, ", "
    and "/"), its continuation lines indented two more than it (a quoted "| " line keeps its
    bar)."""
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        match = re.match(r" *(?:\| )?", line)
        assert match is not None, "the pattern matches the empty string"
        lead = match.group()
        more = lead[:-2] + "|   " if lead.endswith("| ") else lead + "  "
        pieces = wrap(line[len(lead) :], max(20, width - len(more)))
        out += [lead + pieces[0]] + [more + p for p in pieces[1:]]
    return out


def run_lines(report: dict, printed: int = 8, checks: bool = True) -> list[str]:
    """What the sampler printed (its last ``printed`` lines), then, with ``checks``, what ran."""
    lines = []
    if report["output"]:
        lines.append("the sampler printed (last lines):")
        lines += [f"  | {line}" for line in report["output"].splitlines()[-printed:]]
    return lines + (["ran:"] + [f"  {line}" for line in report["ran"]] if checks else [])
