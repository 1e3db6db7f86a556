"""How a report reads: the text of a ``check`` report, for people.

``human`` is what ``python -m specverify check`` prints (``api.Report.text()``): the verdict
first, then each finding, the controls, the smallest counterexample and what ran.
``failure_message`` is ``assert_exact``'s AssertionError and the JUnit failure text: the verdict,
each finding, the counterexample's distributions side by side (``counterexample_lines``; a loop
counterexample's logit tables: ``loop_model_lines``). Everything here reads ``Report.to_dict()``,
the JSON ``check --json`` prints, so the words come from the same object as the JSON; nothing
here runs a battery. ``VERDICT_WORDS`` is the one verdict vocabulary (EXACT / NOT EXACT /
INCONCLUSIVE).
"""

from __future__ import annotations

from collections import Counter

VERDICT_WORDS = {True: "EXACT", False: "NOT EXACT", None: "INCONCLUSIVE"}


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
        f"window {ce['window']} token(s), prefix {ce['prefix']}, model {ce['model']}, TV {tv:.4g}"
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
        lines.append(f"    ... {len(dist) - rows} more sequence(s)")
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
    cases = coverage.get("cases", [])
    if not cases:
        return coverage["summary"]
    words = ", ".join(f"{n} {o}" for o, n in Counter(c["origin"] for c in cases).items())
    judged = ", ".join(f"{n} by {j}" for j, n in Counter(c["judged"] for c in cases).items())
    return f"{coverage['summary']}; ran {len(cases)} cases ({words}; {judged})"


def human(report: dict) -> str:
    """The ``check`` command's human report of ``Report.to_dict()``: the verdict first."""
    eff = {True: "efficient", False: "NOT efficient", None: "efficiency not established"}[report["efficient"]]
    lines = [
        f"{report['target']}: {VERDICT_WORDS[report['exact']]}, {eff} "
        f"({len(report['findings'])} finding(s), {report['seconds']:.1f} s, budget "
        f"{report['budget']}: {coverage_words(report['coverage'])})"
    ]
    lines += finding_lines(report)
    for c in report.get("controls", []):
        lines.append(
            f"  control {c['target']} ({c['claim']}): {VERDICT_WORDS[c['exact']]}"
            f"{'' if c['flagged'] else ' (must be NOT EXACT)'}, {len(c['findings'])} finding(s)"
        )
    ce = report["counterexample"]
    if ce:
        tv = ce.get("exact_tv", ce.get("empirical_tv"))
        if "requests" in ce:
            lines.append(
                f"  smallest model ({ce['method']}): vocab {ce['vocab_size']}, k={ce['k']}, "
                f"window {ce['window']}, {ce['model']}, TV {tv:.4g}"
            )
            lines += loop_model_lines(ce, "    ")
            lines.append(f"    requests {ce['requests']}; shows [{ce['kind']}] {ce['check']}: {ce['message']}")
        else:
            lines.append(
                f"  smallest model ({ce['method']}): vocab {ce['vocab_size']}, k={ce['k']}, "
                f"window {ce['window']}, {ce['model']} p={ce['p']} q={ce['q']}, TV {tv:.4g}"
            )
        for row in ce["distributions"][:8]:
            lines.append(f"    {row['tokens']}: sampler {row['sampler']:.6f}  target {row['target']:.6f}")
    return "\n".join(lines + run_lines(report)) + "\n"


def run_lines(report: dict) -> list[str]:
    """The human report's closing lines: what the sampler printed, what ran."""
    lines = []
    if report["output"]:
        lines.append("the sampler printed (last lines):")
        lines += [f"  | {line}" for line in report["output"].splitlines()[-8:]]
    return lines + ["ran:"] + [f"  {line}" for line in report["ran"]]
