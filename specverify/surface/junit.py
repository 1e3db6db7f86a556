"""JUnit XML for CI (``check --junit-xml FILE``, ``mutants report --junit-xml FILE``): one
<testcase> per subject, a <failure> carrying the finding when it is not what it should be, an
<error> when it could not be judged (inconclusive, a timeout, a target that would not load).
Standard library only; written atomically (specverify.common.files)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass


@dataclass
class Case:
    name: str
    classname: str
    seconds: float
    outcome: str = "passed"  # passed | failure | error | skipped
    message: str = ""  # one line: the finding
    text: str = ""  # the whole report of the subject


def to_xml(suite: str, cases: list[Case]) -> str:
    suites = ET.Element("testsuites")
    root = ET.SubElement(
        suites,
        "testsuite",
        {
            "name": _clean(suite),
            "tests": str(len(cases)),
            "failures": str(sum(c.outcome == "failure" for c in cases)),
            "errors": str(sum(c.outcome == "error" for c in cases)),
            "skipped": str(sum(c.outcome == "skipped" for c in cases)),
            "time": f"{sum(c.seconds for c in cases):.3f}",
        },
    )
    for c in cases:
        el = ET.SubElement(
            root, "testcase", {"classname": _clean(c.classname), "name": _clean(c.name), "time": f"{c.seconds:.3f}"}
        )
        if c.outcome != "passed":
            kind = {"failure": "failure", "error": "error", "skipped": "skipped"}[c.outcome]
            child = ET.SubElement(el, kind, {"message": _clean(c.message.splitlines()[0] if c.message else "")})
            child.text = _clean(c.text)
        elif c.text:
            ET.SubElement(el, "system-out").text = _clean(c.text)
    suites.set("tests", root.attrib["tests"])
    suites.set("failures", root.attrib["failures"])
    suites.set("errors", root.attrib["errors"])
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _clean(text: str) -> str:
    """Text XML 1.0 can hold, encodable as UTF-8 (a sampler may print or raise anything, a file name
    may not decode): most control characters become U+FFFD, a lone surrogate (``"\\ud800"`` in a
    message, ``"\\udcff"`` from an undecodable file name) its backslash escape."""
    text = str.__str__(text) if isinstance(text, str) else str(text)
    return "".join(_clean_char(ch) for ch in text)


def _clean_char(ch: str) -> str:
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    if code in (0xFFFE, 0xFFFF) or (code < 0x20 and ch not in "\t\n\r"):
        return "\ufffd"
    return ch


def write(path: str, suite: str, cases: list[Case], what: str) -> int:
    """Write the XML atomically: 0, or 2 with one line on stderr (files.write_or_report)."""
    from ..common.files import write_or_report

    return write_or_report(path, to_xml(suite, cases), what)


__all__ = ["Case", "to_xml", "write"]
