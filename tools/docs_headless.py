"""The generated parts of docs/headless.md: the batch command's flags and exit codes, the
core command's flags, and the report's fields.

- flags: what ``batch.py --help``, ``python -m warp_core fit --help`` and ``python -m
  warp_core fabric --help`` print (run in a child process with this Python, which needs
  ``bpy`` and ``warp``: ``./dev setup``);
- exit codes: the ``--help`` epilog, the ``EXIT_*`` constants of ``addon/cli/args.py`` and
  the codes the report's schema allows, so a code missing from any of them still shows;
- report fields: every property of ``assets/report.schema.json``, with its type and its
  description (the schema describes every field; a property that only refers to another
  definition's property, as the shared entry's fit summary does, is listed there).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
ARGS = "addon/cli/args.py"
CORE_MAIN = "warp_core/__main__.py"
SCHEMA = "assets/report.schema.json"
WIDE = "100000"  # COLUMNS for --help: one line per option and per help text


@dataclass(frozen=True)
class Option:
    """One argument as ``--help`` shows it."""

    invocation: str  # e.g. "--object NAME" or "-h, --help"
    help: str


def help_text(args: list[str], root: Path = REPO_ROOT) -> str:
    """What ``python ARGS`` prints, one line per option (a very wide terminal)."""
    env = {**os.environ, "COLUMNS": WIDE}
    done = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        what = " ".join(["python", *args])
        raise SystemExit(f"{what} failed ({done.returncode}); it needs ./dev setup:\n{done.stderr}")
    return done.stdout


def options(text: str) -> list[Option]:
    """The arguments of an argparse ``--help`` text, positional ones first."""
    found: list[Option] = []
    section = False
    for line in text.splitlines():
        if line and not line.startswith(" "):  # a heading, the usage, the epilog
            section = line in ("positional arguments:", "options:")
            continue
        if not section or not line.strip():
            continue
        if line.startswith("  ") and not line.startswith("   "):  # an invocation
            invocation, _, rest = line.strip().partition("  ")
            found.append(Option(invocation, rest.strip()))
        elif found:  # its help text, on the next line
            last = found[-1]
            found[-1] = Option(last.invocation, (last.help + " " + line.strip()).strip())
    return [o for o in found if o.help or o.invocation]


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def options_table(opts: list[Option]) -> str:
    lines = ["| argument | what it does |", "|---|---|"]
    lines += [f"| `{o.invocation}` | {cell(o.help)} |" for o in opts]
    return "\n".join(lines)


def epilog_codes(text: str) -> list[tuple[list[int], str]]:
    """``Exit codes: 0 ..., 2 ..., 130/143 ...`` as (codes, meaning) pairs."""
    start = text.find("Exit codes")
    if start < 0:
        return []
    body = text[start:].split(":", 1)[1].strip().split("\n\n")[0]
    body = " ".join(body.split()).rstrip(".").replace("``", "`")
    parts = re.split(r",\s+(?=\d+(?:/\d+)* )", body)
    pairs = []
    for part in parts:
        codes, _, meaning = part.partition(" ")
        pairs.append(([int(c) for c in codes.split("/")], meaning.strip()))
    return pairs


def exit_constants(path: Path) -> dict[str, tuple[int, str]]:
    """``EXIT_*`` constants of a module: name -> (value, its comment)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Name) and target.id.startswith("EXIT_")):
            continue
        if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)):
            continue
        comment = lines[node.lineno - 1].partition("#")[2].strip()
        k = node.lineno - 2
        above = []
        while not comment and k >= 0 and lines[k].lstrip().startswith("#"):
            above.insert(0, lines[k].lstrip("# ").strip())
            k -= 1
        found[target.id] = (node.value.value, comment or " ".join(above))
    return found


def exit_code_table(
    described: list[tuple[list[int], str]], constants: dict[str, tuple[int, str]], allowed: list[int]
) -> str:
    """One row per exit code: the ``--help`` epilog's rows, then any constant or report code
    it does not describe (with the constant's comment)."""
    rows = [
        (codes, meaning, [n for n, (v, _) in constants.items() if v in codes]) for codes, meaning in described
    ]
    seen = {c for codes, _, _ in rows for c in codes}
    for name, (value, comment) in constants.items():
        if value not in seen:
            rows.append(([value], comment, [name]))
            seen.add(value)
    for value in allowed:
        if value not in seen:
            rows.append(([value], "(not described by `--help`)", []))
            seen.add(value)
    lines = ["| code | meaning | constant |", "|---|---|---|"]
    for codes, meaning, names in sorted(rows, key=lambda r: r[0][0]):
        shown = ", ".join(f"`{c}`" for c in codes)
        lines.append(f"| {shown} | {cell(meaning)} | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(lines)


def _resolve(schema: dict[str, Any], ref: str) -> dict[str, Any]:
    """The node a local ``$ref`` ("#/$defs/...") points at."""
    node: Any = schema
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _type(node: dict[str, Any], schema: dict[str, Any]) -> str:
    if "$ref" in node:
        ref = node["$ref"]
        name = ref.rsplit("/", 1)[-1]
        if ref == f"#/$defs/{name}" and name in ("length", "values"):
            return {"length": "number ≥ 0 or null", "values": "object: parameter → number ≥ 0"}[name]
        target = _resolve(schema, ref)
        return "object" if "properties" in target else _type(target, schema)
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v).strip(chr(34))}`" for v in node["enum"])
    kinds = node.get("type", "any")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    text = " or ".join(
        "array of " + _type(node.get("items", {}), schema) if k == "array" else k for k in kinds
    )
    if isinstance(node.get("additionalProperties"), dict):
        text = "object: name → " + _type(node["additionalProperties"], schema)
    if "minimum" in node:
        text += f" ≥ {node['minimum']}"
    if "maximum" in node:
        text += f", ≤ {node['maximum']}"
    return text


def _ref(prop: dict[str, Any]) -> str:
    """The definition a property (its array's items, or its map's values) refers to, or ""."""
    for node in (prop, prop.get("items", {}), prop.get("additionalProperties")):
        name = node.get("$ref", "").removeprefix("#/$defs/") if isinstance(node, dict) else ""
        if name and "/" not in name:  # a definition, not a property inside one
            return name
    return ""


def _child(prefix: str, prop: dict[str, Any]) -> str:
    """The path prefix of a property's own fields: ``a[].`` (array), ``a.*.`` (map), ``a.``."""
    if prop.get("type") == "array":
        return prefix + "[]."
    if isinstance(prop.get("additionalProperties"), dict):
        return prefix + ".*."
    return prefix + "."


def _owners(schema: dict[str, Any]) -> dict[str, str]:
    """Each object definition's path nearest the top (breadth first): where it is listed."""
    defs = schema.get("$defs", {})
    owners: dict[str, str] = {}
    queue: list[tuple[dict[str, Any], str]] = [(schema, "")]
    while queue:
        node, prefix = queue.pop(0)
        for name, prop in node.get("properties", {}).items():
            ref = _ref(prop)
            target = defs.get(ref, prop) if ref else prop
            if "properties" not in target or (ref and ref in owners):
                continue
            path = prefix + name
            if ref:
                owners[ref] = path
            queue.append((target, _child(path, prop)))
    return owners


def report_fields(schema: dict[str, Any]) -> list[tuple[str, str, bool, str]]:
    """(path, type, required, description) of every property, depth first; an object
    definition used in several places is listed where it is nearest the top, and a property
    that is only a reference to another definition's property (no description of its own)
    is left to that one's row."""
    defs = schema.get("$defs", {})
    owners = _owners(schema)
    rows: list[tuple[str, str, bool, str]] = []

    def walk(node: dict[str, Any], prefix: str) -> None:
        required = set(node.get("required", ()))
        for name, prop in node.get("properties", {}).items():
            if "/properties/" in prop.get("$ref", "") and "description" not in prop:
                continue
            path, ref = prefix + name, _ref(prop)
            target = defs.get(ref, {}) if ref else prop
            text = prop.get("description") or target.get("description") or ""
            kind = _type(prop, schema)
            expand = "properties" in target and (not ref or owners.get(ref) == path)
            if "properties" in target and not expand:
                kind = f"{kind}, as `{owners[ref]}`"
            rows.append((path, kind, name in required, text))
            if expand:
                walk(target, _child(path, prop))

    walk(schema, "")
    return rows


def report_table(schema: dict[str, Any]) -> str:
    lines = ["| field | type | always | what it holds |", "|---|---|---|---|"]
    for path, kind, required, text in report_fields(schema):
        lines.append(f"| `{path}` | {cell(kind)} | {'yes' if required else ''} | {cell(text)} |")
    return "\n".join(lines)


def blocks(root: Path = REPO_ROOT) -> dict[str, str]:
    """The generated blocks of docs/headless.md, by name."""
    batch_help = help_text(["batch.py", "--help"], root)
    core_help = help_text(["-m", "warp_core", "fit", "--help"], root)
    fabric_help = help_text(["-m", "warp_core", "fabric", "--help"], root)
    schema = json.loads((root / SCHEMA).read_text(encoding="utf-8"))
    exit_code = schema["properties"]["exit_code"]
    allowed = exit_code.get("enum") or exit_code.get("examples", [])
    core_doc = ast.get_docstring(ast.parse((root / CORE_MAIN).read_text(encoding="utf-8"))) or ""
    source = "*Generated by `./dev docs` from {}; do not edit.*\n\n"
    return {
        "batch-flags": source.format("`python batch.py --help` (`addon/cli/args.py`)")
        + options_table(options(batch_help)),
        "batch-exit-codes": source.format(f"`python batch.py --help`, `{ARGS}` and `{SCHEMA}`")
        + exit_code_table(epilog_codes(batch_help), exit_constants(root / ARGS), allowed),
        "core-flags": source.format("`python -m warp_core fit --help`") + options_table(options(core_help)),
        "core-exit-codes": source.format(f"the docstring of `{CORE_MAIN}`")
        + exit_code_table(epilog_codes(core_doc), {}, []),
        "fabric-flags": source.format("`python -m warp_core fabric --help`")
        + options_table(options(fabric_help)),
        "report-fields": source.format(f"`{SCHEMA}`") + report_table(schema),
    }
