"""Every refusal message the add-on and the batch command can give, read from the source.

    python tools/refusals.py            print each message template with where it is raised

A refusal is a one-line error that stops a fit, a bake, a preset or the batch command and
says what to change. They are found by reading the source (``ast``, nothing is imported):

- every ``raise`` of the project's user errors (``FitInputError``, ``BakeError``,
  ``UsageError``, ``FitError``, ``PresetError``, ``OutputPathError``, ``DeviceError`` and the preset
  library's ``invalid(...)``) and of ``argparse.ArgumentTypeError``, anywhere;
- every ``raise ValueError(...)`` under ``addon/`` and in the core modules whose checks the
  add-on passes on as refusals (``CHECKED_CORE``);
- every ``operator.report({"ERROR"}, ...)`` and ``poll_message_set(...)`` with a message
  written in place, and the batch command's ``self.error(...)``/``run.error(...)`` lines (a
  step that failed).

A message is kept as a template: the text as written, each ``{...}`` of an f-string shown
as ``…``. Messages that only pass another error on (``str(e)``) are the other error's.
"""

from __future__ import annotations

import ast
import itertools
import math
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HOLE = "…"
TREES = ("addon", "warp_core")
USER_ERRORS = frozenset(
    {
        "FitInputError",
        "BakeError",
        "UsageError",
        "FitError",
        "PresetError",
        "OutputPathError",
        "UserError",
        "DeviceError",
        "ArgumentTypeError",
        "invalid",
    }
)
# Core modules whose ValueErrors reach the user as refusals: the add-on and the batch command
# turn them into one-line errors (scene/prepare.py, scene/checks.py, FitProblem.validate).
# A module, a folder, or "module::function" for a module whose other checks guard its callers.
CHECKED_CORE = (
    "warp_core/fit/problem/rules.py",
    "warp_core/fit/problem/problem.py",
    "warp_core/fit/problem/files.py",
    "warp_core/fit/shared.py",
    "warp_core/models/blender_cloth/params.py",
    "warp_core/models/blender_cloth/topology.py",
    "warp_core/models/blender_cloth/corners.py",
    "warp_core/models/blender_cloth/colliders.py",
    "warp_core/models/blender_cloth/pressure.py",
    "warp_core/models/soft_body/params.py",
    "warp_core/models/soft_body/lattice.py",
    "warp_core/targets/vertex.py::check_target",
    "warp_core/targets/surface.py::check_target",
    "warp_core/targets/mesh_checks.py",
    "warp_core/tracks/",
    "warp_core/presets/",
)
MAX_VARIANTS = 64  # more combinations of a message's names than this: shown with holes
MIN_LETTERS = 4  # fewer letters of its own than this: the message only passes another one on


@dataclass(frozen=True)
class Refusal:
    """One message template and where it is raised."""

    path: str  # relative to the repository root, POSIX
    line: int
    template: str


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _assignments(scope: ast.AST, after: int = 0, before: int | None = None) -> dict[str, list[ast.expr]]:
    """Names assigned a value in ``scope`` (a function or module) between lines ``after`` and
    ``before`` (exclusive), each value."""
    found: dict[str, list[ast.expr]] = {}
    # a module's own names are its top-level ones (not a class's fields or a function's locals)
    nodes = scope.body if isinstance(scope, ast.Module) else ast.walk(scope)
    for node in nodes:
        if not (after < getattr(node, "lineno", 0) < (before or 10**9)):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            found.setdefault(node.target.id, []).append(node.value)
    return found


def _local_names(scope: ast.AST, line: int) -> dict[str, list[ast.expr]]:
    """The values a name used by the message at ``line`` can hold: the assignments since the
    scope's previous ``raise`` (a name set again for a later message is that message's)."""
    raises = [n.lineno for n in ast.walk(scope) if isinstance(n, ast.Raise) and n.lineno < line]
    recent = _assignments(scope, max(raises, default=0), line)
    return {**_assignments(scope, 0, line), **recent}


def templates(node: ast.expr, names: dict[str, list[ast.expr]], depth: int = 0) -> list[str]:
    """The texts a message expression can have, each ``{...}`` as ``…``. A local name takes
    each value it is assigned, the same one everywhere in one text."""
    used = list(dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in names))
    others = {k: v for k, v in names.items() if k not in used}
    options = [_values(names[name], others, depth) for name in used]
    if math.prod(len(o) for o in options) > MAX_VARIANTS:
        return _render(node, {})
    out: list[str] = []
    for combo in itertools.product(*options):
        out += _render(node, dict(zip(used, combo, strict=True)))
    return list(dict.fromkeys(out))


def _values(values: list[ast.expr], names: dict[str, list[ast.expr]], depth: int) -> list[str]:
    """The texts a name's assigned values can have (a hole when none is text)."""
    if depth > 3:
        return [HOLE]
    found = [t for value in values for t in templates(value, names, depth + 1)]
    return list(dict.fromkeys(found)) if any(t != HOLE for t in found) else [HOLE]


def _render(node: ast.expr, bound: dict[str, str]) -> list[str]:
    """The texts of ``node`` with each name in ``bound`` as its text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        return [bound.get(node.id, HOLE)]
    if isinstance(node, ast.FormattedValue):
        return _render(node.value, bound) if isinstance(node.value, ast.Name | ast.IfExp) else [HOLE]
    if isinstance(node, ast.JoinedStr):
        parts = [_render(v, bound) for v in node.values]
        return ["".join(p) for p in itertools.product(*parts)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [a + b for a in _render(node.left, bound) for b in _render(node.right, bound)]
    if isinstance(node, ast.IfExp):
        return _render(node.body, bound) + _render(node.orelse, bound)
    return [HOLE]


def normal(text: str) -> str:
    """A template on one line, whitespace collapsed, holes merged."""
    text = " ".join(text.split())
    while HOLE + HOLE in text:
        text = text.replace(HOLE + HOLE, HOLE)
    return text


def own_words(template: str) -> bool:
    return sum(c.isalpha() for c in template.replace(HOLE, "")) >= MIN_LETTERS


def _message_arg(call: ast.Call, kind: str) -> ast.expr | None:
    """The argument of ``call`` that holds the message, by the kind of call."""
    if kind == "invalid":
        return call.args[1] if len(call.args) > 1 else None
    if kind == "report":
        return call.args[1] if len(call.args) > 1 else None
    return call.args[0] if call.args else None


def _is_error_report(call: ast.Call) -> bool:
    """``self.report({"ERROR"}, ...)`` (a warning is no refusal)."""
    if _name(call.func) != "report" or not call.args or not isinstance(call.args[0], ast.Set):
        return False
    return any(isinstance(e, ast.Constant) and e.value == "ERROR" for e in call.args[0].elts)


def value_errors_checked(rel: str, function: str) -> bool:
    """Whether ``raise ValueError`` in ``function`` of module ``rel`` is a refusal."""
    if rel.startswith("addon/"):
        return True
    for entry in CHECKED_CORE:
        path, _, only = entry.partition("::")
        if (rel == path or (path.endswith("/") and rel.startswith(path))) and only in ("", function):
            return True
    return False


def _is_self_error(call: ast.Call) -> bool:
    """``self.error(...)`` or ``run.error(...)``: the batch command's one-line error of a failed
    step (exit 3)."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "error" and _name(func.value) in ("self", "run")


def _calls(tree: ast.Module, rel: str) -> list[tuple[ast.Call, str, ast.AST]]:
    """(call, kind, enclosing scope) for every message-giving call of a module."""
    found: list[tuple[ast.Call, str, ast.AST]] = []

    def visit(node: ast.AST, scope: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else scope
            if isinstance(child, ast.Raise) and isinstance(child.exc, ast.Call):
                kind = _name(child.exc.func)
                function = getattr(scope, "name", "")
                if kind in USER_ERRORS or (kind == "ValueError" and value_errors_checked(rel, function)):
                    found.append((child.exc, kind, scope))
            elif isinstance(child, ast.Call):
                if _is_error_report(child):
                    found.append((child, "report", scope))
                elif rel.startswith("addon/cli/") and _is_self_error(child):
                    found.append((child, "error", scope))
                elif _name(child.func) == "poll_message_set":
                    found.append((child, "poll", scope))
            visit(child, inner)

    visit(tree, tree)
    return found


def module_refusals(path: Path, root: Path = REPO_ROOT) -> list[Refusal]:
    rel = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_names = _assignments(tree)
    out: list[Refusal] = []
    for call, kind, scope in _calls(tree, rel):
        arg = _message_arg(call, kind)
        if arg is None:
            continue
        names = {**module_names, **_local_names(scope, call.lineno)}
        for text in dict.fromkeys(normal(t) for t in templates(arg, names)):
            if own_words(text):
                out.append(Refusal(rel, call.lineno, text))
    return out


def refusals(root: Path = REPO_ROOT) -> list[Refusal]:
    """Every refusal template of the add-on, the batch command and the core checks they use,
    by file and line."""
    found: list[Refusal] = []
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found += module_refusals(path, root)
    return found


# The sections of docs/troubleshooting.md, each with the modules whose messages it explains
# (the longest matching path wins; a module in none of them goes to OTHER).
TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "batch-command",
        (
            "addon/cli/args.py",
            "addon/cli/objects.py",
            "addon/cli/run.py",
            "addon/cli/inputs.py",
            "addon/cli/writes.py",
        ),
    ),
    ("farm", ("addon/cli/apply.py",)),
    ("output-files", ("addon/cli/paths.py", "warp_core/io.py")),
    (
        "before-a-fit",
        (
            "addon/scene/checks.py",
            "addon/scene/prepare.py",
            "addon/mesh_read.py",
            "addon/models/registry.py",
            "addon/models/blender_cloth/",
            "warp_core/fit/problem/",
            "warp_core/targets/",
        ),
    ),
    ("meshes", ("warp_core/models/blender_cloth/topology.py", "warp_core/models/blender_cloth/corners.py")),
    (
        "cloth-settings",
        (
            "warp_core/models/blender_cloth/",
            "addon/models/blender_cloth/collisions.py",
        ),
    ),
    ("start-values", ("addon/request.py",)),
    ("soft-bodies", ("warp_core/models/soft_body/", "addon/models/soft_body/")),
    ("footage", ("addon/scene/footage.py", "addon/ui/tracks_ui.py", "warp_core/tracks/")),
    ("shared", ("warp_core/fit/shared.py",)),
    (
        "running-a-fit",
        (
            "addon/ui/fit_operators.py",
            "addon/ui/fit_results.py",
            "addon/session.py",
            "addon/warp_setup.py",
            "warp_core/devices.py",
            "warp_core/fit/engine.py",
            "warp_core/fit/stages.py",
        ),
    ),
    (
        "panel-buttons",
        (
            "addon/scene/write_back.py",
            "addon/scene/map_groups.py",
            "addon/ui/object_operators.py",
            "addon/scene/bake.py",
            "addon/scene/bake_colors.py",
            "addon/ui/bake_operators.py",
            "addon/ui/result_operators.py",
            "addon/scene/error_overlay.py",
            "addon/ui/physics_link.py",
        ),
    ),
    ("presets", ("warp_core/presets/", "addon/presets.py", "addon/ui/preset_operators.py")),
    ("problem-files", ("warp_core/fit/problem/files.py",)),
)
OTHER = "other"
BLOCK = "refusals:"  # the page's generated blocks are refusals:<topic>


def topic(path: str) -> str:
    """The section of the page that explains the messages of module ``path``."""
    best, length = OTHER, 0
    for name, paths in TOPICS:
        for prefix in paths:
            if (path == prefix or (prefix.endswith("/") and path.startswith(prefix))) and len(
                prefix
            ) > length:
                best, length = name, len(prefix)
    return best


def code(text: str) -> str:
    """``text`` as Markdown inline code."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def blocks(root: Path = REPO_ROOT) -> dict[str, str]:
    """The page's generated blocks: per topic, every message with the modules it comes from."""
    by_topic: dict[str, dict[str, list[str]]] = {name: {} for name, _ in TOPICS}
    by_topic[OTHER] = {}
    for r in refusals(root):
        paths = by_topic[topic(r.path)].setdefault(r.template, [])
        if r.path not in paths:
            paths.append(r.path)
    out = {}
    for name, messages in by_topic.items():
        lines = ["*Generated by `./dev docs` from the source (`tools/refusals.py`); do not edit.*", ""]
        lines += [
            f"- {code(template)} ({', '.join(f'`{p}`' for p in paths)})"
            for template, paths in sorted(messages.items(), key=lambda m: m[0].casefold())
        ] or ["- (none)"]
        out[BLOCK + name] = "\n".join(lines)
    return out


def main() -> int:
    for r in refusals():
        print(f"{r.path}:{r.line}: [{topic(r.path)}] {r.template}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
