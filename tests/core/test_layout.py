"""The layout rules that keep the code readable, checked on the source (no imports, no bpy).

- ``bpy`` is imported only under ``addon/`` (and by the two scripts Blender itself runs);
- no import cycles between the project's modules, function-level imports included, and none
  through the imports under ``if TYPE_CHECKING:`` either;
- no module over MAX_MODULE_LINES lines, except files of Warp kernels (``*kernels*.py``);
- no Python function with more than MAX_PARAMETERS parameters besides ``self``/``cls``
  (Warp kernels and ``@wp.func`` helpers take their arrays and are exempt);
- no module reaches into another's private names (``other._name``, ``from x import _name``);
- the fit engine (``warp_core/fit/``) never names a model: models are found by name at run time;
- only ``warp_core/targets/`` tells one kind of target, or one unit, from another;
- every module of ``addon/`` and ``warp_core/`` says what it is for in a docstring, and the code
  map in docs/code-map.md is the one ``tools/code_map.py`` makes from the tree (``./dev docs``).
"""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest
from layout_rules import (
    MAX_MODULE_LINES,
    MAX_PARAMETERS,
    PACKAGES,
    REPO_ROOT,
    TARGETS_PACKAGE,
    all_cycles,
    find_cycle,
    import_graph,
    imports,
    is_warp_kernel,
    kind_branches,
    load_code_map,
    model_name_uses,
    private_access_offenders,
    project_files,
    read,
    registered_models,
    relative,
    source_files,
)

BLENDER_SCRIPTS = {"batch.py", "assets/make_demo.py"}


def test_bpy_is_imported_only_on_the_blender_side() -> None:
    offenders = []
    for path in source_files():
        rel = relative(path)
        if rel.startswith(("addon/", "bench/")) or rel in BLENDER_SCRIPTS:
            continue
        if any(imp.target.split(".")[0] == "bpy" for imp in imports(path)):
            offenders.append(rel)
    assert not offenders, f"bpy imported outside addon/: {offenders}"


def test_tools_import_neither_bpy_nor_warp() -> None:
    offenders = []
    for path in sorted((REPO_ROOT / "tools").rglob("*.py")):
        for imp in imports(path):
            if imp.target.split(".")[0] in ("bpy", "warp"):
                offenders.append(f"{relative(path)}:{imp.line}: {imp.target}")
    assert not offenders, f"tools/ runs without Blender or Warp: {offenders}"


def test_the_import_graph_and_cycle_finder_work() -> None:
    graph = import_graph(type_checking=False)
    # relative imports resolved: the registry imports the protocols from .base
    assert "warp_core.models.base" in graph["warp_core.models"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    two_cycles = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c", "a"}, "f": {"a"}}
    assert all_cycles(two_cycles) == [["a", "b", "a"], ["c", "d", "e", "c"]]
    assert all_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = import_graph(type_checking=False)
    assert len(graph) > 20 and sum(map(len, graph.values())) > 30  # the parser found the imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycles_through_type_checking_imports() -> None:
    runtime = import_graph(type_checking=False)
    graph = import_graph(type_checking=True)

    def edge(a: str, b: str) -> str:
        return f"{a} -> {b}" + ("" if b in runtime[a] else " (under TYPE_CHECKING)")

    cycles = ["; ".join(edge(a, b) for a, b in zip(c, c[1:], strict=False)) for c in all_cycles(graph)]
    assert not cycles, "import cycles, TYPE_CHECKING imports counted:\n" + "\n".join(cycles)


@pytest.mark.parametrize("path", source_files(), ids=relative)
def test_module_size(path: Path) -> None:
    if "kernels" in path.name:
        return  # files of Warp kernels: each kernel takes its arrays, and they belong together
    lines = len(read(path).splitlines())
    assert lines <= MAX_MODULE_LINES, f"{relative(path)} has {lines} lines: split it by role"


@pytest.mark.parametrize("path", source_files(), ids=relative)
def test_function_parameter_count(path: Path) -> None:
    if "kernels" in path.name:
        return
    too_long = []
    for node in ast.walk(ast.parse(read(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or is_warp_kernel(node):
            continue
        a = node.args
        names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        count = len([n for n in names if n not in ("self", "cls")])
        if count > MAX_PARAMETERS:
            too_long.append(f"{node.name} ({count}, line {node.lineno})")
    assert not too_long, f"{relative(path)}: functions with more than {MAX_PARAMETERS} parameters: {too_long}"


def test_the_private_access_detector_works() -> None:
    owner = (
        "import dataclasses\n_TABLE = {}\n"
        "def _helper(): pass\n"
        "@dataclasses.dataclass\nclass A:\n    _field: int = 0\n    _CACHE = None\n"
        "    def __init__(self): self._state = 1\n"
        "    def same(self, other): return other._state + A._CACHE + _helper()\n"
    )
    user = (
        "import sys\nfrom .owner import A, _helper\nfrom . import owner\n"
        "class B(A):\n    def run(self):\n        super()._helper2(); self._state; type(self)._CACHE\n"
        "def go(a):\n    return a._state, owner._TABLE, a._field, sys._getframe(), a._replace(x=1)\n"
    )
    found = private_access_offenders({"pkg/owner.py": owner, "pkg/user.py": user})
    assert found == [
        "pkg/user.py:2: from pkg.owner import _helper",
        "pkg/user.py:8: a._field",
        "pkg/user.py:8: a._state",
        "pkg/user.py:8: owner._TABLE",
    ]
    # a name the accessing module defines itself is its own, even if another defines it too
    assert private_access_offenders({"a.py": "x._n = 1\n_n = 0", "b.py": "_n = 1"}) == []


def test_no_module_reaches_into_another_modules_private_names() -> None:
    found = private_access_offenders({relative(p): read(p) for p in project_files()})
    assert not found, "private names used outside the module that defines them:\n" + "\n".join(found)


def test_the_model_name_detector_works() -> None:
    source = (
        '"""Fits any model, blender_cloth included."""\n'
        "from ..models.blender_cloth import params  # blender_cloth\n"
        "def f(soft_body=1):\n"
        '    """Not blender_cloth."""\n'
        '    return get_model("blender_cloth"), x.soft_body, "soft_body_x", "models.soft_body"\n'
    )
    assert model_name_uses(source, ["blender_cloth", "soft_body"]) == [
        (2, "blender_cloth"),
        (3, "soft_body"),
        (5, "'blender_cloth'"),
        (5, "'models.soft_body'"),
        (5, "soft_body"),
    ]


def test_the_fit_engine_names_no_model() -> None:
    models = registered_models()
    assert "blender_cloth" in models and "soft_body" in models
    found = []
    for path in sorted((REPO_ROOT / "warp_core" / "fit").rglob("*.py")):
        found += [f"{relative(path)}:{line}: {what}" for line, what in model_name_uses(read(path), models)]
    assert not found, "warp_core/fit/ names a model (models are looked up by name):\n" + "\n".join(found)


def test_the_target_kind_detector_works() -> None:
    source = (
        'if self.kind == "vertex" or problem.loss_kind != "surface": pass\n'
        'ok = record.get("unit") == "px" and "m" == scales.unit and kind in ("tracks", "x")\n'
        'fine = kind == "other" or name == "px" or record.get("name") == "m" or self.kind == other\n'
        'also = record["kind"] == "tracks" or "vertex" in target_kinds\n'
        'match objective.kind:\n    case "surface": pass\n    case _: pass\n'
    )
    assert [line for line, _ in kind_branches(source)] == [1, 1, 2, 2, 2, 4, 4, 6]


def test_only_the_targets_package_branches_on_target_kinds_and_units() -> None:
    found = []
    for path in sorted(p for p in project_files() if relative(p).startswith(PACKAGES)):
        rel = relative(path)
        if rel.startswith(TARGETS_PACKAGE) or "kernels" in path.name:
            continue
        found += [f"{rel}:{line}: {code}" for line, code in kind_branches(read(path))]
    assert not found, f"branches on a target kind or unit outside {TARGETS_PACKAGE}:\n" + "\n".join(found)


def test_every_module_has_a_docstring() -> None:
    missing = [
        relative(path)
        for path in project_files()
        if relative(path).startswith(PACKAGES) and not ast.get_docstring(ast.parse(read(path)))
    ]
    assert not missing, f"modules without a docstring saying what they are for: {missing}"


def test_the_code_map_lists_every_module() -> None:
    """docs/code-map.md lists every module with its docstring's first line: a module missing
    from the map, one the tree no longer has, or a stale line fails."""
    code_map = load_code_map()
    want = code_map.generate(REPO_ROOT)
    have = code_map.doc_block((REPO_ROOT / code_map.DOC).read_text(encoding="utf-8"))
    diff = difflib.unified_diff(have.splitlines(), want.splitlines(), code_map.DOC, "tree", lineterm="")
    diff = "\n".join(diff)
    if have != want:
        pytest.fail(f"{code_map.DOC}'s code map is not the tree's: run ./dev docs\n{diff}", pytrace=False)
