"""Presets on the add-on side: the user's presets folder, Blender's own ``.py`` cloth
presets (read, never run), and a fit result turned into a preset.

The preset format and the library on disk are ``warp_core.presets``; this module knows
where Blender keeps things and what the add-on's fit records hold.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import bpy

from ..warp_core.presets.files import BUILTIN_DIR, list_presets
from ..warp_core.presets.files import find_preset as find_in_library
from ..warp_core.presets.schema import (
    MAX_FILE_BYTES,
    MAX_TEXT_LENGTH,
    MODEL,
    MODEL_KEYS,
    PROVENANCE_KEYS,
    VALUE_KEYS,
    Preset,
    PresetError,
    invalid,
    validate_preset,
)
from .extension import EXTENSION_PACKAGE
from .models.registry import object_model


def user_presets_dir(create: bool = True) -> Path:
    """The user presets folder: ``<extension user dir>/presets`` when installed as an
    extension, else ``<user scripts>/presets/fit_to_target`` (a checkout loaded as a
    plain package, as in the tests)."""
    try:
        path = bpy.utils.extension_path_user(EXTENSION_PACKAGE, path="presets", create=create)
    except ValueError:  # not an extension
        path = bpy.utils.user_resource("SCRIPTS", path="presets/fit_to_target", create=create)
    return Path(path)


def builtin_preset_names() -> list[str]:
    return [p.name for p in list_presets(BUILTIN_DIR, None)]


def all_presets(warnings: list[str] | None = None) -> list[Preset]:
    """Built-in presets, then the user's (broken user files skipped, described in ``warnings``)."""
    return list_presets(BUILTIN_DIR, user_presets_dir(create=False), warnings)


def find_preset(name: str) -> Preset:
    """The preset called ``name`` (case-insensitive), built-ins first, then the user's;
    PresetError if none. For the batch command: ``find_preset("Denim").values``."""
    return find_in_library(name, user_presets_dir(create=False))


# fit result summary key -> provenance key
_RESULT_PROVENANCE = {
    "blend_file": "source_blend",
    "object": "object",
    "target_frames": "target_frames",
    "rmse_m": "fit_rmse_m",
    "max_error_m": "fit_max_error_m",
    "seconds": "fit_seconds",
    "date": "date",
    "addon_version": "addon_version",
    "device": "device",
}


def preset_from_fit_result(
    name: str,
    result: dict[str, Any],
    base_values: dict[str, float] | None = None,
    notes: str = "",
) -> Preset:
    """A preset from a fit's summary (``result_json`` of an object, or one object of a batch
    report): ``base_values`` (the object's cloth settings, such as mass and quality, which the
    fitted values only make sense with), overridden by the fit's ``result["start_values"]``
    (settings the fit ran with instead of the modifier's, e.g. from a preset), overridden by
    the fitted ``result["params"]``; provenance from the summary."""
    if not isinstance(result, dict):
        raise PresetError("the fit result is not a JSON object")
    model = result.get("model", MODEL)
    if model not in MODEL_KEYS:
        known = ", ".join(repr(m) for m in MODEL_KEYS)
        raise PresetError(f"the fit used the {model!r} model; presets hold settings of {known}")
    keys = MODEL_KEYS[model]
    params = result.get("params")
    if not isinstance(params, dict) or not params:
        raise PresetError("the fit result has no fitted parameters")
    values: dict[str, float] = {k: v for k, v in (base_values or {}).items() if k in keys}
    unknown = [k for k in params if k not in keys]
    if unknown:
        raise PresetError(f"the fit result has parameter(s) presets do not know: {', '.join(unknown)}")
    start = result.get("start_values") or {}
    if isinstance(start, dict):
        values.update({k: v for k, v in start.items() if k in keys})
    values.update(params)
    provenance: dict[str, Any] = {}
    for src, dst in _RESULT_PROVENANCE.items():
        value = result.get(src)
        if value is None or value == "":
            continue
        if PROVENANCE_KEYS[dst] == "text":
            value = str(value)[:MAX_TEXT_LENGTH]
        provenance[dst] = value
    provenance["fit_parameters"] = [k for k in keys if k in params]
    shared = result.get("shared")
    if isinstance(shared, dict) and isinstance(shared.get("objects"), list):
        # one material fitted to several objects at once: every one of them is a source
        provenance["shared_objects"] = [str(n)[:MAX_TEXT_LENGTH] for n in shared["objects"]]
    return validate_preset(
        Preset(name=name, values=values, notes=notes, provenance=provenance, model=model), source=repr(name)
    )


def preset_values_of(ob: bpy.types.Object) -> dict[str, float]:
    """The fields presets of the object's model know, read from the object ({} without its
    modifier)."""
    model = object_model(ob)
    mod = model.find_modifier(ob)
    return {} if mod is None else model.current_values(mod, MODEL_KEYS[model.name])


def read_blender_cloth_preset(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings a Blender cloth preset (``presets/cloth/*.py``) assigns, read with ``ast``
    without running it: ``{field: value}`` for each ``bpy.context.cloth.settings.<field> =
    <literal>`` line. Any other statement than ``import bpy`` raises PresetError."""
    p = Path(path)
    if p.stat().st_size > MAX_FILE_BYTES:
        raise invalid(str(p), "too large for a Blender cloth preset")
    tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Import) and [a.name for a in node.names] == ["bpy"]:
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if (
                isinstance(target, ast.Attribute)
                and ast.unparse(target.value) == "bpy.context.cloth.settings"
            ):
                out[target.attr] = ast.literal_eval(node.value)
                continue
        raise invalid(str(p), f"unexpected statement at line {node.lineno}: {ast.unparse(node)[:60]}")
    return out


def blender_preset_values(settings: dict[str, Any]) -> dict[str, float]:
    """The part of a Blender cloth preset's settings that the ``blender_cloth`` model knows."""
    out: dict[str, float] = {}
    for key in VALUE_KEYS:
        if key in settings:
            out[key] = int(settings[key]) if key == "quality" else float(settings[key])
    return out
