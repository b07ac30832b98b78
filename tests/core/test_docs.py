"""The docs: README.md short and for users, docs/ whose generated parts are the source's, every
batch flag, exit code, report field and refusal message in the reference, every command block
marked, every link resolving, and the benchmarks' results file written and rendered.

The generated parts are made by ``./dev docs`` (``tools/make_docs.py``); the checks here read the
source on their own, so a part the generator missed fails too. Running the commands shown in
the docs is ``tests/blender/test_doc_commands.py``; the batch flags as the parser has them,
``tests/blender/test_docs_reference.py``.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS = REPO_ROOT / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import code_map  # noqa: E402
import doc_checks  # noqa: E402
import make_docs  # noqa: E402
import refusals  # noqa: E402

README = REPO_ROOT / "README.md"
HEADLESS = REPO_ROOT / "docs" / "headless.md"
TROUBLESHOOTING = REPO_ROOT / "docs" / "troubleshooting.md"
SCHEMA = json.loads((REPO_ROOT / "assets" / "report.schema.json").read_text(encoding="utf-8"))
RUN_DEV_DOCS = "run ./dev docs"


def block(page: Path, name: str) -> str:
    blocks = make_docs.page_blocks(page.read_text(encoding="utf-8"))
    assert name in blocks, f"{page.name} has no generated part '{name}': {RUN_DEV_DOCS}"
    return blocks[name]


# -- README: short, for users ---------------------------------------------------------------------


def test_the_readme_is_short_and_points_to_the_guide() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "](docs/index.md)" in text and "](docs/getting-started.md)" in text
    for needed in ("./dev demo", "./dev test", "batch.py", "Install from Disk", "Turing", "R580"):
        assert needed in text, needed


TYPED_FIGURES = {
    "a time in ms or µs": re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|µs)\b"),
    "a time in seconds": re.compile(r"\b\d+\.\d+\s?s\b"),
    "a count of scenes matched": re.compile(r"\b\d+ / \d+\b"),
    "a robustness seed": re.compile(r"(?<![-\w])seeds? \d+"),
}


@pytest.mark.parametrize("page", doc_checks.doc_pages(REPO_ROOT), ids=lambda p: p.name)
def test_no_measured_figure_is_typed_into_the_docs(page: Path) -> None:
    """Measured results come from the benchmarks' own files (docs/benchmarks.md), not prose."""
    if page.name == "benchmarks.md":
        return
    text = page.read_text(encoding="utf-8")
    found = [f"{what}: {m.group(0)!r}" for what, rx in TYPED_FIGURES.items() for m in rx.finditer(text)]
    assert not found, f"{page.name}: {found}; measured figures belong in bench/results/ (docs/benchmarks.md)"


# -- commands and links ---------------------------------------------------------------------------


def test_every_command_block_says_whether_it_runs() -> None:
    problems = [p for page in doc_checks.doc_pages(REPO_ROOT) for p in doc_checks.command_blocks(page)[1]]
    assert not problems, "\n".join(problems)


def test_the_docs_show_commands_that_run() -> None:
    blocks = [b for page in doc_checks.doc_pages(REPO_ROOT) for b in doc_checks.command_blocks(page)[0]]
    ran = {c for b in blocks if b.run for c in b.commands}
    assert "./dev demo" in ran and ".venv/bin/python batch.py --help" in ran
    assert any(c.startswith(".venv/bin/python batch.py out/demo/demo.blend") for c in ran)  # a first fit


def test_every_link_resolves() -> None:
    problems = doc_checks.broken_links(REPO_ROOT)
    assert not problems, "\n".join(problems)


def test_the_link_checker_sees_broken_links(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "# Top\n\n[ok](docs/a.md#a-heading) [gone](docs/b.md) [bad anchor](docs/a.md#nope)\n"
        "`[code](not/a/link)`\n\n```\n[in a block](missing.md)\n```\n",
        encoding="utf-8",
    )
    (tmp_path / "docs" / "a.md").write_text("# A heading\n\n[up](../README.md#top)\n", encoding="utf-8")
    problems = doc_checks.broken_links(tmp_path)
    assert len(problems) == 2, problems
    assert "docs/b.md: no such file" in problems[0] and "no heading '#nope'" in problems[1]


def test_the_command_blocks_are_read_with_their_markers(tmp_path: Path) -> None:
    page = tmp_path / "README.md"
    page.write_text(
        "<!-- doc-test: run -->\n```console\n$ echo one \\\n  two\nout\n$ true\n```\n\n"
        "<!-- doc-test: skip needs-gpu: a CUDA device -->\n```console\n$ gpu-thing\n```\n\n"
        "```console\n$ unmarked\n```\n\n<!-- doc-test: skip someday -->\n```console\n$ x\n```\n"
        "```bash\nls\n```\n",
        encoding="utf-8",
    )
    blocks, problems = doc_checks.command_blocks(page, tmp_path)
    assert [(b.run, b.reason, b.commands) for b in blocks] == [
        (True, "", ("echo one two", "true")),
        (False, "needs-gpu", ("gpu-thing",)),
    ]
    assert len(problems) == 3 and "no <!-- doc-test" in problems[0] and "someday" in problems[1]
    assert "```bash" in problems[2]


# -- the generated parts --------------------------------------------------------------------------


def test_the_generated_parts_are_the_sources() -> None:
    stale = make_docs.stale(REPO_ROOT)
    assert not stale, f"stale generated docs: {', '.join(stale)}: {RUN_DEV_DOCS}"


def _exit_constants() -> dict[str, int]:
    tree = ast.parse((REPO_ROOT / "addon" / "cli" / "args.py").read_text(encoding="utf-8"))
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id.startswith("EXIT_")
        and isinstance(node.value, ast.Constant)
    }


def test_every_exit_code_is_in_the_reference() -> None:
    table = block(HEADLESS, "batch-exit-codes")
    exit_code = SCHEMA["properties"]["exit_code"]
    codes = set(_exit_constants().values()) | set(exit_code.get("enum") or exit_code["examples"]) | {143}
    missing = sorted(c for c in codes if f"`{c}`" not in table)
    assert not missing, f"exit codes missing from docs/headless.md: {missing}: {RUN_DEV_DOCS}"
    names = [n for n in _exit_constants() if f"`{n}`" not in table]
    assert not names, f"{names} missing from docs/headless.md: {RUN_DEV_DOCS}"


def _properties(node: Any, path: str = "") -> Iterator[str]:
    """Every property name of the schema, at any depth (definitions included)."""
    if isinstance(node, dict):
        for name, value in node.get("properties", {}).items():
            yield name
            yield from _properties(value)
        for key, value in node.items():
            if key != "properties":
                yield from _properties(value)
    elif isinstance(node, list):
        for value in node:
            yield from _properties(value)


def test_every_report_field_is_in_the_reference() -> None:
    table = block(HEADLESS, "report-fields")
    shown = set(re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE))
    ends = {path.rsplit(".", 1)[-1].removesuffix("[]") for path in shown}
    missing = sorted({name for name in _properties(SCHEMA) if name not in ends})
    assert not missing, f"report fields missing from docs/headless.md: {missing}: {RUN_DEV_DOCS}"
    assert {"objects[].outcome", "objects[].contacts.frames", "shared.determined_jointly"} <= shown


def test_every_refusal_message_is_in_troubleshooting() -> None:
    page = TROUBLESHOOTING.read_text(encoding="utf-8")
    missing = sorted({r.template for r in refusals.refusals(REPO_ROOT)} - set(_code_spans(page)))
    assert not missing, "messages missing from docs/troubleshooting.md: {}: {}".format(
        "; ".join(missing[:10]), RUN_DEV_DOCS
    )


def _code_spans(text: str) -> list[str]:
    return [m.group(2).strip() for m in re.finditer(r"(`+)(.+?)\1", text)]


def test_the_refusal_finder_finds_the_messages_users_see() -> None:
    found = {r.template: r.path for r in refusals.refusals(REPO_ROOT)}
    for template, path in {
        "no parameters to fit: choose at least one": "warp_core/fit/problem/rules.py",
        "--fit: no parameters given": "addon/cli/args.py",
        "two targets at frame …: keep one per frame": "addon/scene/checks.py",
        "No target selected": "addon/ui/object_operators.py",
        "mesh has no faces: cloth needs polygons": "warp_core/models/blender_cloth/topology.py",
    }.items():
        assert found.get(template) == path, template
    assert len(found) > 200  # every module's messages, not a few


def test_the_refusal_finder_reads_each_way_a_message_is_written(tmp_path: Path) -> None:
    module = tmp_path / "addon" / "thing.py"
    module.parent.mkdir()
    module.write_text(
        "def check(ob, n, op):\n"
        "    if n:\n"
        "        raise FitInputError(f\"'{ob.name}' has {n} faces: add one\")\n"
        "    text = 'a message held in a name'\n"
        "    raise ValueError(text)\n"
        "def other(op, subject, e):\n"
        "    op.report({'ERROR'}, 'Select the cloth first')\n"
        "    op.report({'WARNING'}, 'only a warning')\n"
        "    raise UsageError(f'{subject}: mixed kinds' if subject else 'mixed kinds, no subject')\n"
        "    raise FitInputError(str(e))\n"
        "    raise invalid(subject, 'is not a preset file')\n",
        encoding="utf-8",
    )
    assert [r.template for r in refusals.module_refusals(module, tmp_path)] == [
        "'…' has … faces: add one",
        "a message held in a name",
        "Select the cloth first",
        "…: mixed kinds",
        "mixed kinds, no subject",
        "is not a preset file",
    ]


# -- the code map and the benchmarks' results ------------------------------------------------------


def test_the_code_map_lists_a_new_module_and_its_docstring(tmp_path: Path) -> None:
    package = tmp_path / "warp_core"
    package.mkdir()
    (package / "__init__.py").write_text('"""The core."""\n', encoding="utf-8")
    (package / "fresh.py").write_text('"""A module just added.\n\nMore."""\n', encoding="utf-8")
    made = code_map.generate(tmp_path)
    assert re.search(r"^  fresh\.py +A module just added\.$", made, re.MULTILINE), made
    page = "## The map\n\n```\nwarp_core/  The core.\n```\n"
    assert code_map.doc_block(page) != made  # what tests/core/test_layout.py compares


def _bench_results() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_results_test", REPO_ROOT / "bench" / "results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_benchmark_records_its_latest_run_and_the_page_shows_it(tmp_path: Path) -> None:
    results = _bench_results()
    folder = tmp_path / "results"
    before = results.render(folder)
    for name in results.BENCHMARKS:
        assert f"Not run yet: there is no `bench/results/{name}.json`." in before
    path = results.record(
        "robustness",
        {"success (replay RMSE <= 1 mm)": "3/4 (75 %)", "seed": 99},
        (["#", "outcome"], [["0", "converged"], ["1", "misfit"]]),
        ["a note"],
        device="cpu, float64",
        results=folder,
    )
    data = json.loads(path.read_text(encoding="utf-8"))
    assert {"date", "commit", "machine", "command", "summary", "table", "notes"} <= set(data)
    assert data["machine"].endswith("cpu, float64") and data["command"].startswith("python ")
    page = results.render(folder)
    section = page[page.index("## robustness") : page.index("## many_parameters")]
    for shown in ("Latest run:", data["commit"], "| seed | 99 |", "| 1 | misfit |", "- a note"):
        assert shown in section, shown
    assert "Not run yet" in page[page.index("## many_parameters") :]
    assert "bench/robustness.py" not in page[page.index("## Not recorded yet") :]
    assert not list((REPO_ROOT / "bench" / "results").glob("*.tmp"))
