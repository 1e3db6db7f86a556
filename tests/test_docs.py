"""The documentation against the code: README.md is a front page (short, set-up first, two set-up
commands), its counts match the mutant catalogue, every relative link and every module path the
docs name exists, every command the README shows is a real command whose ``--help`` exits 0, and
the README's tour commands exit as the README says they do.

The child processes import this checkout (PYTHONPATH = the repository root), as in
tests/test_entry_points.py."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
DOC_FILES = [README, *sorted(DOCS.rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def section(markdown: str, heading: str) -> str:
    """The text under ``## heading`` up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert match, f"no '## {heading}' section"
    return match.group(1)


def bash_blocks(markdown: str) -> list[str]:
    return [body for lang, body in FENCE.findall(markdown) if lang == "bash"]


def run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECVERIFY_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        HYPOTHESIS_PROFILE="ci",
        MPLBACKEND="Agg",
    )
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


# ----------------------------------------------------------------------------- the front page


def test_readme_is_a_front_page():
    lines = text(README).splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
    assert lines[0].startswith("# ") and lines[1] == "", lines[:2]
    first = lines[2]  # the "what it is" paragraph, before any section, table, list or code
    assert first and not first.startswith(("#", "|", "-", "*", "```", ">", "!")), first
    paragraph = " ".join(lines[2 : lines.index("", 2)])
    assert "speculative" in paragraph and "exact" in paragraph, paragraph
    headings = [line for line in lines if line.startswith("## ")]
    assert headings and headings[0] == "## Set-up", headings


def test_setup_is_exactly_two_commands_install_and_report_then_tox():
    blocks = bash_blocks(section(text(README), "Set-up"))
    assert len(blocks) == 2, blocks
    install, tests = (b.strip() for b in blocks)
    assert "\n" not in install and "\n" not in tests, blocks  # one command line each
    assert re.fullmatch(r"python -m pip install -e \. && specverify mutants report", install), install
    assert re.fullmatch(r"(python -m )?pip install (tox|\"tox>=4\") && tox -e cpu", tests), tests


# ----------------------------------------------------------------------------- counts


def catalogue_counts() -> dict[str | None, tuple[int, int]]:
    """(mutants, controls) in all (key None) and per interface; a control's effect is "exact"
    (specverify.mutants.mutant_table.summary tells them apart the same way)."""
    from specverify.mutants import ALL

    counts = {}
    for interface in (None, "round", "loop", "kernel"):
        subset = [m for m in ALL if interface is None or m.interface == interface]
        counts[interface] = (sum(m.effect != "exact" for m in subset), sum(m.effect == "exact" for m in subset))
    return counts


STATED = re.compile(
    r"\b(\d+) (?:(round|loop|kernel) )?mutants(?:,| and) (\d+) "
    r"(?:exact |round |loop |kernel )?controls"
)
SUMMARY = re.compile(r"(\d+)/(\d+) mutants killed, (\d+)/(\d+) controls passed")


def stated_counts(markdown: str) -> list[tuple[str | None, int, int]]:
    flat = " ".join(markdown.split())  # a count may wrap across lines
    found = [(m.group(2), int(m.group(1)), int(m.group(3))) for m in STATED.finditer(flat)]
    for m in SUMMARY.finditer(flat):
        killed, mutants, passed, controls = map(int, m.groups())
        assert killed == mutants and passed == controls, m.group(0)  # the docs show a clean report
        found.append((None, mutants, controls))
    return found


@pytest.mark.parametrize("path", [README, DOCS / "MUTANTS.md"], ids=lambda p: p.name)
def test_stated_mutant_and_control_counts_match_the_catalogue(path):
    counts = catalogue_counts()
    found = stated_counts(text(path))
    assert any(interface is None for interface, _, _ in found), f"{path.name} states no overall count"
    for interface, mutants, controls in found:
        assert (mutants, controls) == counts[interface], (path.name, interface, counts)


def test_every_count_in_the_docs_matches_the_catalogue():
    counts = catalogue_counts()
    for path in DOC_FILES:
        for interface, mutants, controls in stated_counts(text(path)):
            assert (mutants, controls) == counts[interface], (path.name, interface, counts)


def test_the_mutant_reports_table_lists_every_subject_of_the_catalogue():
    from specverify.mutants import ALL
    from specverify.mutants.report import BASELINE_ID, SANITY_ID

    table = section(text(DOCS / "MUTANTS.md"), "The whole report")
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in table.splitlines()
        if line.startswith("| ") and "/" in line.split("|")[1]
    }
    assert rows == {BASELINE_ID: "exact", SANITY_ID: "biased", **{m.id: m.effect for m in ALL}}, (
        "docs/MUTANTS.md's table is stale: regenerate it with specverify mutants report --format markdown"
    )


def test_the_loop_mutants_table_cites_what_the_catalogue_cites():
    from specverify.mutants import ALL

    loop = {m.id: m for m in ALL if m.interface == "loop"}
    catalogue = section(text(DOCS / "MUTANTS.md"), "The catalogue")
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in catalogue.splitlines()
        if line.startswith("| loop-")
    ]
    assert {r[0] for r in rows} == set(loop)
    for mutant_id, effect, reference in rows:
        assert (effect, reference) == (loop[mutant_id].effect, loop[mutant_id].reference or ""), mutant_id


# ----------------------------------------------------------------------------- links and names


def without_code(markdown: str) -> str:
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", markdown))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in FENCE.sub("", text(path)).splitlines() if line.startswith("#")}


def test_every_relative_link_points_to_an_existing_file_and_heading():
    checked = 0
    for path in DOC_FILES:
        for target in re.findall(r"\]\(([^)\s]+)\)", without_code(text(path))):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            assert resolved.exists(), f"{path.relative_to(ROOT)}: link to missing {target}"
            if anchor and resolved.suffix == ".md":
                assert anchor in anchors(resolved), f"{path.relative_to(ROOT)}: no heading #{anchor} in {file}"
            checked += 1
    assert checked > 40  # README's map and docs/README.md's index alone link every page


@pytest.mark.parametrize(
    "index, prefix", [(DOCS / "README.md", ""), (README, "docs/")], ids=["docs/README.md", "README.md"]
)
def test_the_index_and_the_readme_map_list_every_docs_page(index, prefix):
    pages = {f"{prefix}{p.name}" for p in DOCS.glob("*.md") if p != index}
    linked = set(re.findall(r"^\| \[[^]]+\]\(([^)#]+\.md)\)", text(index), re.M))
    assert pages <= linked, f"{index.name} does not list {sorted(pages - linked)}"


MODULE_PATH = re.compile(r"\bspecverify(?:\.[A-Za-z_]\w*)+")
FILE_PATH = re.compile(r"`((?:specverify|tests|gpu_validation|docs)/[\w./-]*)`")


def top_level_names(source: Path) -> set[str]:
    names = set()
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
                names.update(ast.literal_eval(node.value))  # the package's lazily loaded names
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def names_a_real_thing(dotted: str) -> bool:
    """``specverify.a.b[.name]``: a module of this checkout, or a top-level name of one (read
    from its source, nothing imported)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        source = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
        if source.exists():
            return i == len(parts) or parts[i] in top_level_names(source)
    return False


def test_every_module_path_the_docs_name_exists():
    stale = []
    for path in DOC_FILES:
        for dotted in set(MODULE_PATH.findall(text(path))):
            if dotted.rsplit(".", 1)[-1] in ("xml", "json", "md", "py", "png", "csv"):  # file names
                continue
            if not names_a_real_thing(dotted):
                stale.append(f"{path.relative_to(ROOT)}: {dotted}")
        for file in set(FILE_PATH.findall(text(path))):
            if not (ROOT / file).exists():
                stale.append(f"{path.relative_to(ROOT)}: {file}")
    assert not stale, "\n".join(sorted(stale))


def test_the_name_check_can_fail():
    assert names_a_real_thing("specverify.laws.optimal_acceptance.optimal_acceptance")
    assert names_a_real_thing("specverify.check")
    assert not names_a_real_thing("specverify.optimal")
    assert not names_a_real_thing("specverify.laws.requests.no_such_function")


# ----------------------------------------------------------------------------- commands


def shown_commands(markdown: str) -> list[list[str]]:
    """Each ``specverify ...`` / ``python -m specverify...`` command of the bash blocks, as the
    arguments after ``python -m`` (``specverify X`` is ``python -m specverify X``), comments cut."""
    commands = []
    for block in bash_blocks(markdown):
        for line in block.splitlines():
            for part in line.split(" # ")[0].split("&&"):
                words = shlex.split(part.strip().rstrip("\\"))
                if words[:1] == ["specverify"]:
                    commands.append(["specverify", *words[1:]])
                elif words[:2] == ["python", "-m"] and words[2:3] and words[2].startswith("specverify"):
                    commands.append(words[2:])
    return commands


def command_form(words: list[str]) -> tuple[str, ...]:
    """The module and subcommands a command names, options and targets left out:
    ``("specverify", "bench", "kernel")``, ``("specverify.mutants", "report")``."""
    from specverify.bench.__main__ import COMMANDS as BENCH
    from specverify.cli import COMMANDS

    module, rest = words[0], [w for w in words[1:] if not w.startswith("-")]
    if module == "specverify":
        assert rest and rest[0] in COMMANDS, f"unknown command: {' '.join(words)}"
        form = (module, rest[0])
        rest = rest[1:]
    else:
        assert (ROOT.joinpath(*module.split(".")) / "__main__.py").exists(), f"no such command: {module}"
        form = (module,)
    if form[-1] in ("bench", "specverify.bench") and rest and rest[0] in BENCH:
        form += (rest[0],)
    elif form[-1] in ("mutants", "specverify.mutants") and rest:
        assert rest[0] in ("report", "list"), words
        form += (rest[0],)
    elif form[-1] in ("models", "specverify.models") and rest:
        assert rest[0] in ("measure", "train-head"), words
        form += (rest[0],)
    return form


HELP_FORMS = [
    ("specverify",),
    ("specverify", "check"),
    ("specverify", "check-hf-generate"),
    ("specverify", "mutants"),
    ("specverify", "mutants", "report"),
    ("specverify", "mutants", "list"),
    ("specverify", "engines"),
    ("specverify", "bench"),
    ("specverify", "bench", "suite"),
    ("specverify", "bench", "kernel"),
    ("specverify", "bench", "hot-path"),
    ("specverify", "bench", "samplers"),
    ("specverify", "bench", "sweep-cost"),
    ("specverify", "bench", "determinism"),
    ("specverify", "bench", "calls"),
    ("specverify", "bench", "paced"),
    ("specverify", "experiments"),
    ("specverify", "models"),
    ("specverify", "models", "measure"),
    ("specverify", "models", "train-head"),
    ("specverify.mutants",),
    ("specverify.mutants", "report"),
    ("specverify.engines",),
    ("specverify.experiments",),
    ("specverify.models",),
    ("specverify.bench",),
    ("specverify.bench", "kernel"),
]


def test_every_command_the_readme_shows_is_known_and_its_help_is_tested():
    forms = {command_form(words) for words in shown_commands(text(README))}
    assert {("specverify", "check"), ("specverify", "mutants", "report"), ("specverify", "engines")} <= forms
    assert forms <= set(HELP_FORMS), forms - set(HELP_FORMS)


def test_every_command_the_docs_show_is_known():
    forms = {command_form(words) for path in DOC_FILES for words in shown_commands(text(path))}
    assert ("specverify", "bench", "samplers") in forms and ("specverify", "models", "measure") in forms
    assert forms <= set(HELP_FORMS), forms - set(HELP_FORMS)


def test_an_unknown_command_is_caught():
    with pytest.raises(AssertionError, match="unknown command"):
        command_form(["specverify", "frobnicate", "--help"])
    assert command_form(["specverify", "bench", "hot-path", "--against", "DIR"]) == ("specverify", "bench", "hot-path")


@pytest.mark.parametrize("form", HELP_FORMS, ids=" ".join)
def test_help_of_each_documented_command_exits_0(form):
    done = run(["-m", *form, "--help"], timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout, done.stdout


# ----------------------------------------------------------------------------- the tour, run

# Tour commands not run here, and where an equivalent runs:
# - `specverify mutants report` (the whole report, minutes): tests/test_entry_points.py runs
#   `mutants report --mutant ratio/inverted`, tests/test_mutants.py the catalogue's verdicts;
# - `specverify engines --engine vllm-v0-rejection` downloads a wheel: tests/test_engines_offline.py
#   judges the engines' calling conventions without a download, `tox -e engines` runs the rows;
# - the pytest tour (`specverify_check`, `--specverify-budget quick`): tests/test_pytest_plugin.py
#   runs a user's test file through pytest;
# - `tox -e cpu` is this suite.

EXIT_COMMENT = re.compile(r"#\s*exit (\d)")


def tour_checks() -> list[tuple[list[str], int]]:
    """The README's ``specverify check ... --budget quick   # exit N`` lines: (argv, N)."""
    found = []
    for block in bash_blocks(section(text(README), "A five-minute tour")):
        for line in block.splitlines():
            comment = EXIT_COMMENT.search(line)
            words = shlex.split(line.split("#")[0])
            if comment and words[:2] == ["specverify", "check"] and "quick" in words:
                found.append((words[1:], int(comment.group(1))))
    return found


def test_the_tour_states_exit_codes_of_both_kinds():
    codes = [code for _, code in tour_checks()]
    assert 0 in codes and 1 in codes and len(codes) >= 4, codes


@pytest.mark.parametrize("argv, code", tour_checks(), ids=lambda v: v[1] if isinstance(v, list) else str(v))
def test_each_tour_check_exits_as_the_readme_says(argv, code):
    if "tests/readme_kernels.py" in " ".join(argv):
        pytest.importorskip("torch")  # its vLLM-style kernel takes a torch.Generator
    done = run(["-m", "specverify", *argv], timeout=120)
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-2000:]
    assert (": EXACT" in done.stdout) == (code == 0), done.stdout[:500]


def test_readme_verdict_table_matches_the_exit_codes():
    from specverify.common.command_line import EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE
    from specverify.errors import EXIT_CODES, VERDICTS

    rows = {}
    for line in section(text(README), "What the verdicts mean").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[2].isdigit():
            rows[cells[0]] = (cells[1].strip("`"), int(cells[2]), cells[3])
    assert {rows[v][0]: rows[v][1] for v in ("EXACT", "NOT EXACT", "INCONCLUSIVE")} == {
        {True: "true", False: "false", None: "null"}[k]: EXIT_CODES[v] for k, v in VERDICTS.items()
    }
    assert rows["usage error"][1] == EXIT_USAGE and rows["interrupted"][1] == EXIT_INTERRUPTED
    assert f"SIGTERM: {EXIT_TERMINATED}" in rows["interrupted"][2]


def first_table(markdown: str) -> list[str]:
    """The rows of the first table in ``markdown`` (its header, not its |---| line)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [line for line in lines[start:end] if line.startswith("| ")]


def test_the_readme_states_each_budgets_reach_as_the_interfaces_compute_it():
    from specverify.interfaces import NAMES, budget_reach, reach_words

    rows = first_table(section(text(README), "What each budget reaches"))
    assert rows[0] == "| budget | " + " | ".join(NAMES) + " |"
    want = {b: [reach_words(budget_reach(n, b)) for n in NAMES] for b in ("quick", "standard", "thorough")}
    got = {cells[0]: cells[1:] for cells in ([c.strip() for c in row.strip("|").split("|")] for row in rows[1:])}
    assert got == want


@pytest.mark.parametrize(
    "path, heading", [(README, "What each budget reaches"), (ROOT / "docs" / "BUDGETS.md", "Power per kind of case")]
)
def test_the_docs_state_each_budgets_power_per_kind_of_case_as_the_budgets_compute_it(path, heading):
    from specverify.interfaces.round.reach import POWER_KINDS, promised_power

    rows = [line for line in section(text(path), heading).splitlines() if line.startswith("| ")]
    header = "| budget | fixed | generated | swept | binned (per position) | cross-check |"
    assert header in rows and len(POWER_KINDS) == 5
    table = rows[rows.index(header) + 1 :]
    got = {cells[0]: cells[1:] for cells in ([c.strip() for c in row.strip("|").split("|")] for row in table)}
    want = {b: [f"{promised_power(b)[k]:g}" for k in POWER_KINDS] for b in ("quick", "standard", "thorough")}
    assert got == want
