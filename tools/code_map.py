"""The code map of docs/code-map.md, generated from the tree.

    python tools/code_map.py            print the map
    python tools/code_map.py --write    replace the map in docs/code-map.md with it (./dev map, ./dev docs)
    python tools/code_map.py --check    exit 1 when docs/code-map.md's map is not the tree's

One line per module of the root, ``addon/``, ``warp_core/``, ``bench/`` and ``tools/`` (a
package as its folder), and one per test folder, each with the first line of its docstring.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DOC = "docs/code-map.md"
HEADING = "## The map"
FENCE = "```"
ROOT_MODULES = ("__init__.py", "batch.py", "build.py")
TREES = ("addon", "warp_core", "bench", "tools")  # every module listed
FOLDERS_ONLY = ("tests/core", "tests/blender")  # one line for the folder
# Folders that are not packages: no __init__.py docstring to take their role from.
FOLDER_ROLES = {
    "bench": "benchmarks; each records its latest run for docs/benchmarks.md; not run by the tests",
    "tools": "developer tools: the generated parts of the docs (./dev docs, ./dev map)",
    "tests/core": "no bpy: physics, gradients, optimizers, losses, layout rules",
    "tests/blender": "real bpy: Blender's own cloth as reference, the add-on, batch, presets",
}
INDENT = "  "


def role(path: Path) -> str:
    """The first line of a module's docstring ("" without one)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    return doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""


def has_modules(folder: Path) -> bool:
    return any("__pycache__" not in p.parts for p in folder.rglob("*.py"))


def folder_entries(root: Path, folder: Path, depth: int) -> list[tuple[str, str]]:
    """(indented name, role) for a folder and, below it, each of its modules and folders."""
    rel = folder.relative_to(root).as_posix()
    init = folder / "__init__.py"
    own = role(init) if init.is_file() else FOLDER_ROLES.get(rel, "")
    entries = [(INDENT * depth + (folder.name if depth else rel) + "/", own)]
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        if child.is_dir() and child.name != "__pycache__" and has_modules(child):
            entries += folder_entries(root, child, depth + 1)
        elif child.is_file() and child.suffix == ".py" and child.name != "__init__.py":
            entries.append((INDENT * (depth + 1) + child.name, role(child)))
    return entries


def entries(root: Path) -> list[tuple[str, str]]:
    found = [(name, role(root / name)) for name in ROOT_MODULES if (root / name).is_file()]
    for tree in TREES:
        if (root / tree).is_dir():
            found += folder_entries(root, root / tree, 0)
    for folder in FOLDERS_ONLY:
        if (root / folder).is_dir():
            found.append((folder + "/", FOLDER_ROLES.get(folder, "")))
    return found


def generate(root: Path = REPO_ROOT) -> str:
    """The map: one line per entry, the roles aligned in one column."""
    found = entries(root)
    width = max(len(name) for name, _ in found) + 2
    return "\n".join(f"{name:<{width}}{text}".rstrip() for name, text in found) + "\n"


def block_span(lines: list[str]) -> tuple[int, int]:
    """Indices of the fence lines around the map: the first fenced block after the heading."""
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == HEADING)
        opening = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(FENCE))
        closing = next(i for i in range(opening + 1, len(lines)) if lines[i].startswith(FENCE))
    except StopIteration:
        raise SystemExit(f"{DOC}: no fenced block after '{HEADING}'") from None
    return opening, closing


def doc_block(text: str) -> str:
    """The map as the page has it (without the fences)."""
    lines = text.splitlines()
    opening, closing = block_span(lines)
    return "".join(line + "\n" for line in lines[opening + 1 : closing])


def with_block(text: str, block: str) -> str:
    """The page's text with the map replaced by ``block``; everything else kept."""
    lines = text.splitlines(keepends=True)
    opening, closing = block_span([line.rstrip("\n") for line in lines])
    return "".join(lines[: opening + 1]) + block + "".join(lines[closing:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"replace the map in {DOC}")
    mode.add_argument("--check", action="store_true", help=f"exit 1 when {DOC}'s map differs")
    args = parser.parse_args(argv)
    block = generate(REPO_ROOT)
    page = REPO_ROOT / DOC
    if args.write:
        text = page.read_text(encoding="utf-8")
        new = with_block(text, block)
        if new != text:
            page.write_text(new, encoding="utf-8")
        print(f"{DOC}: code map {'updated' if new != text else 'already up to date'}", file=sys.stderr)
    elif args.check:
        have = doc_block(page.read_text(encoding="utf-8"))
        if have != block:
            diff = difflib.unified_diff(have.splitlines(True), block.splitlines(True), DOC, "tree")
            sys.stdout.writelines(diff)
            print(f"{DOC}: the code map is not the tree's: run ./dev docs (or ./dev map)", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
