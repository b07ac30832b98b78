"""The generated parts of docs/headless.md: the batch command's flags and exit codes, the
core command's flags, and the report's fields.

- flags: what ``batch.py --help`` and ``python -m warp_core fit --help`` print (run in a
  child process with this Python, which needs ``bpy`` and ``warp``: ``./dev setup``);
- exit codes: the ``--help`` epilog, the ``EXIT_*`` constants of ``addon/cli/args.py`` and
  the codes the report's schema allows, so a code missing from any of them still shows;
- report fields: every property of ``assets/report.schema.json``, with its type and its
  description (``FIELD_NOTES`` for the fields the schema does not describe).
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

# What the report's fields hold, for those the schema gives no description of.
FIELD_NOTES = {
    "version": "the report format (1)",
    "addon_version": "the extension's version",
    "device": "where the fits ran (several, comma-separated, when the objects differ)",
    "blend_file": "the input .blend",
    "saved_to": "the fitted .blend (`--save`), or null",
    "status": "`ok`: every fit matched; `not_converged`: every fit ran, one or more does not match "
    "(exit 4); `failed`: a fit, bake or output failed (exit 3); `cancelled`: interrupted by a signal",
    "exit_code": "the exit code of the run (2 writes no report)",
    "date": "when the report was written (UTC, ISO 8601)",
    "objects": "one record per fitted object",
    "shared": "with `--shared`: the shared fit",
    "objects[].name": "the object",
    "objects[].model": "the material model it was fitted with",
    "objects[].status": "`ok` (the fit ran; see `outcome`), `failed` (see `error`) or `cancelled`",
    "objects[].error": "why the fit or its bake failed",
    "objects[].params": "every fitted and tied value after the fit",
    "objects[].initial_params": "the same values before the fit",
    "objects[].initial_loss": "the fit's objective at the start values",
    "objects[].final_loss": "the fit's objective at the fitted values",
    "objects[].rmse_m": "RMS distance to the targets after the fit, in metres",
    "objects[].initial_rmse_m": "the same before the fit",
    "objects[].max_error_m": "the largest distance of a vertex from its target after the fit",
    "objects[].iterations": "optimizer iterations",
    "objects[].seconds": "the fit's time",
    "objects[].warnings": "settings fitted anyway (`--allow-unmodeled`), values at a bound, cautions",
    "objects[].outcome": "`converged`, `misfit`, `stalled` or `failed`: see How a fit decides",
    "objects[].outcome_reason": "the outcome in words: by how much, and why",
    "objects[].tolerance_m": "the RMSE that counts as matching, in metres",
    "objects[].rmse_px": "a fit to footage: RMS reprojection error after the fit, in pixels",
    "objects[].initial_rmse_px": "the same before the fit",
    "objects[].max_error_px": "a fit to footage: the largest reprojection error",
    "objects[].motion_px": "a fit to footage: how far the markers move, RMS in pixels",
    "objects[].tolerance_px": "a fit to footage: the RMSE in pixels that counts as matching",
    "objects[].noise_rmse_px": "a fit to footage: the RMS the markers' own jitter explains",
    "objects[].device": "where this fit ran",
    "objects[].fit": "the fitted parameters",
    "objects[].target_frames": "the frames of the targets",
    "objects[].bake": "the `.pc2` file it was baked to (`--bake`)",
    "objects[].run_objects": "with `--shared`: every object of the shared fit",
    "objects[].contacts.frames": "frames in which the fitted motion touched a collider",
    "objects[].contacts.vertices": "how many cloth vertices touched one",
    "shared.objects": "the objects fitted together",
    "shared.params": "the one set of values fitted for all of them",
    "shared.initial_params": "the start values",
    "shared.rmse_m": "RMS distance to every object's targets",
    "shared.outcome": "the joint outcome: `converged` only when every object matches",
    "shared.outcome_reason": "the outcome in words",
    "shared.undetermined": "parameters the objects together do not determine",
    "shared.undetermined_alone": "object -> the parameters its targets alone would not determine",
    "shared.determined_jointly": "parameters determined only by the objects together",
    "shared.member_outcomes": "object -> its own outcome at the shared values",
    "shared.member_rmse_m": "object -> its own RMSE at the shared values",
}


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


def _type(node: dict[str, Any]) -> str:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return {"length": "number ≥ 0 or null", "values": "object: parameter → number ≥ 0"}.get(
            name, "object"
        )
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v).strip(chr(34))}`" for v in node["enum"])
    kinds = node.get("type", "any")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    text = " or ".join("array of " + _type(node.get("items", {})) if k == "array" else k for k in kinds)
    if isinstance(node.get("additionalProperties"), dict):
        text = "object: name → " + _type(node["additionalProperties"])
    if "minimum" in node:
        text += f" ≥ {node['minimum']}"
    return text


def _ref(prop: dict[str, Any]) -> str:
    """The definition a property (or its array's items) refers to, or ""."""
    ref = prop.get("$ref") or prop.get("items", {}).get("$ref", "")
    return ref.rsplit("/", 1)[-1]


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
            queue.append((target, path + ("[]." if prop.get("type") == "array" else ".")))
    return owners


def report_fields(schema: dict[str, Any]) -> list[tuple[str, str, bool, str]]:
    """(path, type, required, description) of every property, depth first; an object
    definition used in several places is listed where it is nearest the top."""
    defs = schema.get("$defs", {})
    owners = _owners(schema)
    rows: list[tuple[str, str, bool, str]] = []

    def walk(node: dict[str, Any], prefix: str) -> None:
        required = set(node.get("required", ()))
        for name, prop in node.get("properties", {}).items():
            path, ref = prefix + name, _ref(prop)
            target = defs.get(ref, {}) if ref else prop
            text = prop.get("description") or target.get("description") or FIELD_NOTES.get(path, "")
            kind = _type(prop)
            expand = "properties" in target and (not ref or owners.get(ref) == path)
            if "properties" in target and not expand:
                kind = f"{kind}, as `{owners[ref]}`"
            rows.append((path, kind, name in required, text))
            if expand:
                walk(target, path + ("[]." if prop.get("type") == "array" else "."))

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
    schema = json.loads((root / SCHEMA).read_text(encoding="utf-8"))
    allowed = schema["properties"]["exit_code"].get("enum", [])
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
        "report-fields": source.format(f"`{SCHEMA}`") + report_table(schema),
    }
