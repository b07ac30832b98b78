"""The layout rules that keep the code readable, checked on the source (no imports, no bpy).

- ``bpy`` is imported only under ``addon/`` (and by the two scripts Blender itself runs);
- no import cycles between the project's modules, function-level imports included;
- no module over MAX_MODULE_LINES lines, except files of Warp kernels (``*kernels*.py``);
- no Python function with more than MAX_PARAMETERS parameters besides ``self``/``cls``
  (Warp kernels and ``@wp.func`` helpers take their arrays and are exempt).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("warp_core", "addon")  # the extension's code, besides the root __init__.py
ROOT_MODULES = ("__init__.py", "batch.py", "build.py")
SOURCE_DIRS = (*PACKAGES, "bench", "assets")
# Scripts that run inside Blender as entry points, not modules of the extension.
BLENDER_SCRIPTS = {"batch.py", "assets/make_demo.py"}
MAX_MODULE_LINES = 400
MAX_PARAMETERS = 8


def source_files() -> list[Path]:
    files = [REPO_ROOT / name for name in ROOT_MODULES]
    for directory in SOURCE_DIRS:
        files += sorted((REPO_ROOT / directory).rglob("*.py"))
    return [f for f in files if "__pycache__" not in f.parts]


def relative(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def module_name(path: Path) -> str:
    """Dotted name within the repository root package (the root __init__ is ``""``)."""
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for annotations only)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    return skipped


def imports(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(absolute module, imported names) for every import in the file, function-level ones
    included; relative imports are resolved against the file's package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = type_checking_nodes(tree)
    here = module_name(path).split(".") if module_name(path) else []
    package = here if is_package(path) else here[:-1]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, [alias.name for alias in node.names]


def import_graph() -> dict[str, set[str]]:
    """Edges between the project's own modules (``warp_core.*``, ``addon.*``)."""
    modules = {module_name(f): f for f in source_files() if f.parts[len(REPO_ROOT.parts)] in PACKAGES}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, names in imports(path):
            if target not in modules:
                continue
            for imported in names or [None]:
                # `from package import submodule` depends on the submodule, not the package
                sub = f"{target}.{imported}" if imported else None
                graph[name].add(sub if sub in modules else target)
            graph[name].discard(name)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def is_warp_kernel(function: ast.FunctionDef) -> bool:
    return any(ast.unparse(d).split("(")[0] in ("wp.kernel", "wp.func") for d in function.decorator_list)


def test_bpy_is_imported_only_on_the_blender_side() -> None:
    offenders = []
    for path in source_files():
        rel = relative(path)
        if rel.startswith(("addon/", "bench/")) or rel in BLENDER_SCRIPTS:
            continue
        if any(target.split(".")[0] == "bpy" for target, _ in imports(path)):
            offenders.append(rel)
    assert not offenders, f"bpy imported outside addon/: {offenders}"


def test_the_import_graph_and_cycle_finder_work() -> None:
    graph = import_graph()
    # relative imports resolved: the registry imports the protocols from .base
    assert "warp_core.models.base" in graph["warp_core.models"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 20 and sum(map(len, graph.values())) > 30  # the parser found the imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("path", source_files(), ids=relative)
def test_module_size(path: Path) -> None:
    if "kernels" in path.name:
        return  # files of Warp kernels: each kernel takes its arrays, and they belong together
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{relative(path)} has {lines} lines: split it by role"


@pytest.mark.parametrize("path", source_files(), ids=relative)
def test_function_parameter_count(path: Path) -> None:
    if "kernels" in path.name:
        return
    too_long = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or is_warp_kernel(node):
            continue
        a = node.args
        names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        count = len([n for n in names if n not in ("self", "cls")])
        if count > MAX_PARAMETERS:
            too_long.append(f"{node.name} ({count}, line {node.lineno})")
    assert not too_long, f"{relative(path)}: functions with more than {MAX_PARAMETERS} parameters: {too_long}"
