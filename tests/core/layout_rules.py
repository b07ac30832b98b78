"""The checks behind ``test_layout.py``, read from the source with ``ast`` (nothing of the
project is imported, so no bpy and no Warp).

Each detector takes source text (or a dict of relative path -> source text) and returns what
it found, so the tests can run it on the tree and on small snippets alike.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("warp_core", "addon")  # the extension's code, besides the root modules
ROOT_MODULES = ("__init__.py", "batch.py", "build.py")
SOURCE_DIRS = (*PACKAGES, "bench", "assets", "tools")
# Scripts that run inside Blender as entry points, not modules of the extension.
BLENDER_SCRIPTS = {"batch.py", "assets/make_demo.py"}
MAX_MODULE_LINES = 400
MAX_PARAMETERS = 8
# The only place that may tell one kind of target, or one unit of distance, from another.
TARGETS_PACKAGE = "warp_core/targets/"
TARGET_WORDS = frozenset({"vertex", "surface", "tracks", "px", "m"})
KIND_OR_UNIT = re.compile(r"(kind|unit)s?$")
SELF_NAMES = ("self", "cls")


class Import(NamedTuple):
    target: str  # absolute dotted module
    names: list[str]  # the names of `from target import ...`; [] for `import target`
    line: int
    type_checking: bool  # inside an `if TYPE_CHECKING:` block


def source_files() -> list[Path]:
    files = [REPO_ROOT / name for name in ROOT_MODULES]
    for directory in SOURCE_DIRS:
        files += sorted((REPO_ROOT / directory).rglob("*.py"))
    return [f for f in files if "__pycache__" not in f.parts]


def project_files() -> list[Path]:
    """The extension's own modules: the root modules, ``warp_core/`` and ``addon/``."""
    return [f for f in source_files() if f.name in ROOT_MODULES or relative(f).startswith(PACKAGES)]


def relative(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def module_of(rel: str) -> str:
    """Dotted name within the repository root package (the root ``__init__.py`` is ``""``)."""
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for annotations only)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def imports_in(tree: ast.AST, rel: str) -> Iterator[Import]:
    """Every import of the module at ``rel``, function-level and TYPE_CHECKING ones included;
    relative imports are resolved against the module's package."""
    guarded = type_checking_nodes(tree)
    here = module_of(rel).split(".") if module_of(rel) else []
    package = here if rel.endswith("__init__.py") else here[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, [], node.lineno, id(node) in guarded)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names = [alias.name for alias in node.names]
            yield Import(target, names, node.lineno, id(node) in guarded)


def imports(path: Path) -> list[Import]:
    return list(imports_in(ast.parse(read(path)), relative(path)))


def import_graph(type_checking: bool) -> dict[str, set[str]]:
    """Edges between the project's own modules (``warp_core.*``, ``addon.*``); with
    ``type_checking`` the imports under ``if TYPE_CHECKING:`` count too."""
    modules = {module_of(relative(f)): f for f in source_files() if relative(f).startswith(PACKAGES)}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imp in imports(path):
            if imp.target not in modules or (imp.type_checking and not type_checking):
                continue
            for imported in imp.names or [None]:
                # `from package import submodule` depends on the submodule, not the package
                sub = f"{imp.target}.{imported}" if imported else None
                graph[name].add(sub if sub in modules else imp.target)
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


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other (Tarjan), each of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while (member := stack.pop()) != node:
                group.add(member)
            group.add(node)
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def all_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each group of modules that import each other."""
    cycles = []
    for group in strongly_connected(graph):
        cycle = find_cycle({node: graph[node] & group for node in group})
        assert cycle is not None
        cycles.append(cycle)
    return sorted(cycles)


def is_warp_kernel(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(ast.unparse(d).split("(")[0] in ("wp.kernel", "wp.func") for d in function.decorator_list)


def docstring_ids(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (of the module, classes, functions)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    found.add(id(first.value))
    return found


# -- private names -----------------------------------------------------------------------


def is_private(name: str) -> bool:
    """``_name``: one leading underscore (not ``__dunder__``, not a ``__mangled`` name)."""
    return len(name) > 1 and name.startswith("_") and not name.startswith("__")


def stored_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from stored_names(element)
    elif isinstance(target, ast.Starred):
        yield from stored_names(target.value)


def scope_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module or class body, through if/try/with/for blocks (not defs)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from scope_statements(getattr(stmt, field, []))
        for handler in getattr(stmt, "handlers", []):
            yield from scope_statements(handler.body)


def scope_names(body: list[ast.stmt]) -> Iterator[str]:
    for stmt in scope_statements(body):
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                yield from stored_names(target)
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):  # dataclass fields too
            yield from stored_names(stmt.target)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            yield from ((a.asname or a.name).split(".")[0] for a in stmt.names)


def is_self(expr: ast.expr) -> bool:
    """``self``, ``cls``, ``super()`` or ``type(self)``."""
    if isinstance(expr, ast.Name):
        return expr.id in SELF_NAMES
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        if expr.func.id == "super":
            return True
        return expr.func.id == "type" and len(expr.args) == 1 and is_self(expr.args[0])
    return False


def private_definitions(tree: ast.Module) -> set[str]:
    """The ``_names`` a module defines: module-level names, class attributes and dataclass
    fields, ``def``/``class`` names, and ``self._name``/``cls._name`` assignments."""
    names = set(scope_names(tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names.update(scope_names(node.body))
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and is_self(node.value):
            names.add(node.attr)
    return {name for name in names if is_private(name)}


def private_access_offenders(sources: dict[str, str]) -> list[str]:
    """``path:line: expr`` for every ``expr._name`` (``expr`` not self/cls/super()) whose
    ``_name`` is defined in another of ``sources``' modules and not in its own, and every
    ``from module import _name`` of one of ``sources``' modules. Names no module of
    ``sources`` defines (``sys._getframe``, a namedtuple's ``_replace``) are left alone."""
    trees = {rel: ast.parse(text) for rel, text in sources.items()}
    defined = {rel: private_definitions(tree) for rel, tree in trees.items()}
    modules = {module_of(rel) for rel in sources}
    offenders = []
    for rel, tree in trees.items():
        elsewhere = set().union(*(names for other, names in defined.items() if other != rel))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not is_private(node.attr) or is_self(node.value):
                continue
            if node.attr in elsewhere and node.attr not in defined[rel]:
                offenders.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
        for imp in imports_in(tree, rel):
            private = [name for name in imp.names if is_private(name)]
            if private and imp.target in modules:
                offenders.append(f"{rel}:{imp.line}: from {imp.target} import {', '.join(private)}")
    return sorted(offenders)


# -- model names in the fit engine --------------------------------------------------------


def registered_models() -> list[str]:
    """The built-in models: the folders of ``warp_core/models/`` with an ``__init__.py``."""
    models = REPO_ROOT / "warp_core" / "models"
    return sorted(p.parent.name for p in models.glob("*/__init__.py"))


def identifiers(node: ast.AST) -> Iterator[str]:
    """The names a node spells in code: names, attributes, defs, arguments, keywords, imports."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, ast.keyword) and node.arg:
        yield node.arg
    elif isinstance(node, ast.alias):
        yield from node.name.split(".")
        yield from [node.asname] if node.asname else []
    elif isinstance(node, ast.ImportFrom) and node.module:
        yield from node.module.split(".")


def model_name_uses(source: str, models: Iterable[str]) -> list[tuple[int, str]]:
    """(line, what) for each identifier, or string constant that is not a docstring, equal to
    one of ``models`` (a dotted string counts when one of its parts is)."""
    names = set(models)
    tree = ast.parse(source)
    docstrings = docstring_ids(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if names & {node.value, *node.value.split(".")}:
                found.append((line, repr(node.value)))
        found += [(line, name) for name in identifiers(node) if name in names]
    return sorted(set(found))


# -- target kinds and units -----------------------------------------------------------------


def names_kind_or_unit(expr: ast.expr) -> bool:
    """``kind``, ``x.loss_kind``, ``scales.unit``, ``record.get("unit")``, ``record["kind"]``."""
    if isinstance(expr, ast.Name):
        return bool(KIND_OR_UNIT.search(expr.id.lower()))
    if isinstance(expr, ast.Attribute):
        return bool(KIND_OR_UNIT.search(expr.attr.lower()))
    key: ast.expr | None = None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "get":
        key = expr.args[0] if expr.args else None
    elif isinstance(expr, ast.Subscript):
        key = expr.slice
    return (
        isinstance(key, ast.Constant) and isinstance(key.value, str) and bool(KIND_OR_UNIT.search(key.value))
    )


def target_words(expr: ast.expr) -> bool:
    """A string among the target kinds and units, or a tuple/list/set holding one."""
    if isinstance(expr, ast.Constant):
        return expr.value in TARGET_WORDS
    if isinstance(expr, ast.Tuple | ast.List | ast.Set):
        return any(target_words(element) for element in expr.elts)
    return False


def kind_branches(source: str) -> list[tuple[int, str]]:
    """(line, code) for each ==/!=/in/not in between a kind or unit and a target kind or unit
    (``objective.kind == "tracks"``, ``record.get("unit") == "px"``), and each ``match`` on a
    kind or unit with such a case."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, a, b in zip(node.ops, operands, operands[1:], strict=False):
                if not isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                    continue
                if (names_kind_or_unit(a) and target_words(b)) or (names_kind_or_unit(b) and target_words(a)):
                    found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Match) and names_kind_or_unit(node.subject):
            for case in node.cases:
                values = [p.value for p in ast.walk(case.pattern) if isinstance(p, ast.MatchValue)]
                if any(target_words(value) for value in values):
                    found.append((case.pattern.lineno, f"match {ast.unparse(node.subject)}"))
    return sorted(set(found))


def load_code_map() -> ModuleType:
    """``tools/code_map.py``, imported from its file (``tools/`` is not a package)."""
    path = REPO_ROOT / "tools" / "code_map.py"
    spec = importlib.util.spec_from_file_location("code_map", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
