"""Material presets: small JSON documents of a model's settings, never executed.

A preset file::

    {
      "schema": 1,
      "name": "Denim",
      "model": "blender_cloth",
      "values": {"quality": 12, "mass": 1.0, "tension_stiffness": 40.0, ...},
      "notes": "optional free text",
      "provenance": {"source_blend": "...", "target_frames": [11, 21], "fit_rmse_m": 0.002, ...}
    }

``values`` holds any subset of the fields its ``model`` knows (``MODEL_KEYS``): its continuous
parameters (floats within their hard limits; for ``blender_cloth`` Blender's, mass > 0) and
the whole-number solver settings the fitted values depend on (``INTEGER_RANGES``: cloth
``quality``, substeps per frame; soft-body ``substeps``, ``iterations``, ``lattice_cells``).
Fields a preset leaves out are left alone when it is applied.

This module is the schema: the :class:`Preset`, its validation and its JSON text. Everything
read is validated strictly: the size first (64 KiB at most), then the JSON (no NaN/Infinity,
no duplicate keys), every key and every value. Each rejection is a :class:`PresetError`
naming the source and the problem. Files and folders are :mod:`.files`.
"""

from __future__ import annotations

import json
import math
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..models import get_model
from ..models.base import onto_bounds, within_bounds

SCHEMA_VERSION = 1
MODEL = "blender_cloth"
MAX_FILE_BYTES = 64 * 1024
MAX_NAME_LENGTH = 64
MAX_NOTES_LENGTH = 4000
MAX_TEXT_LENGTH = 1024  # provenance strings
MAX_LIST_LENGTH = 10000  # provenance lists (target frames, parameter names)
PRESET_SUFFIX = ".json"

QUALITY_RANGE = (1, 80)  # Blender's quality slider; larger values make a preset a trap
# whole-number settings a preset may hold, with their ranges
INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "quality": QUALITY_RANGE,
    "substeps": (1, 256),
    "iterations": (1, 1000),
    "lattice_cells": (1, 256),
}
# model -> its whole-number settings that presets keep
_MODEL_INTEGERS: dict[str, tuple[str, ...]] = {
    "blender_cloth": ("quality",),
    "soft_body": ("substeps", "iterations", "lattice_cells"),
}
# each model's continuous parameters, in its order, with their hard limits
MODEL_BOUNDS: dict[str, dict[str, tuple[float, float]]] = {
    name: {p.name: p.bounds for p in get_model(name).parameters} for name in _MODEL_INTEGERS
}
# keys allowed in ``values`` of each model, in the order they are written
MODEL_KEYS: dict[str, tuple[str, ...]] = {
    name: (*_MODEL_INTEGERS[name], *MODEL_BOUNDS[name]) for name in _MODEL_INTEGERS
}
PARAMETER_BOUNDS: dict[str, tuple[float, float]] = MODEL_BOUNDS[MODEL]
VALUE_KEYS: tuple[str, ...] = MODEL_KEYS[MODEL]
"""Keys allowed in the ``values`` of a ``blender_cloth`` preset, in the order they are written."""

TOP_LEVEL_KEYS = ("schema", "name", "model", "values", "notes", "provenance")
REQUIRED_KEYS = ("schema", "name", "model", "values")

# provenance key -> kind of value
PROVENANCE_KEYS: dict[str, str] = {
    "source_blend": "text",
    "object": "text",
    "target_frames": "frames",
    "fit_rmse_m": "length",
    "fit_max_error_m": "length",
    "fit_seconds": "length",
    "date": "text",
    "addon_version": "text",
    "device": "text",
    "drape_test": "text",
    "start": "text",
    "fit_parameters": "names",
    "reference_values": "values",
    "shared_objects": "texts",  # every object of a shared-material fit
    # a preset fitted from fabric lab numbers: the numbers (weight_gsm, bending_length_mm, ...),
    # what each virtual test rig read at the fitted values, the mesh edge it was fitted for,
    # and where published numbers came from
    "lab_numbers": "measures",
    "rig_readings": "measures",
    "mesh_edge_m": "length",
    "source": "text",
}
MAX_MEASURES = 64  # names in a provenance "measures" object


class PresetError(UserError, ValueError):
    """A preset that cannot be read, written or used; the message names the file and the problem."""


@dataclass(frozen=True)
class Preset:
    """One material preset. ``values`` maps the settings of ``model`` to numbers (the
    whole-number settings as ints, the rest floats). ``builtin`` presets ship with the add-on and
    cannot be renamed or deleted; ``path`` is the file it was read from, if any."""

    name: str
    values: dict[str, float]
    notes: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    model: str = MODEL
    builtin: bool = False
    path: Path | None = None

    @property
    def parameters(self) -> dict[str, float]:
        """The continuous parameters only (what a fit can start from), in the model's order."""
        return {k: float(self.values[k]) for k in MODEL_BOUNDS[self.model] if k in self.values}

    @property
    def quality(self) -> int | None:
        q = self.values.get("quality")
        return None if q is None else int(q)

    def to_dict(self) -> dict[str, Any]:
        """The file's content (without ``builtin`` and ``path``, which are not stored)."""
        d: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "name": self.name,
            "model": self.model,
            "values": {k: self.values[k] for k in MODEL_KEYS.get(self.model, ()) if k in self.values},
        }
        if self.notes:
            d["notes"] = self.notes
        if self.provenance:
            d["provenance"] = dict(self.provenance)
        return d


# ---------------------------------------------------------------------------- validation


def invalid(source: str, problem: str) -> PresetError:
    """The error for ``source`` (a file, or a preset's name) and one problem with it."""
    return PresetError(f"preset {source}: {problem}")


FLOAT32_SMALLEST_NORMAL = 2.0**-126  # 1.18e-38: below it float32 loses precision, then becomes 0


def name_key(name: str) -> str:
    """What makes two preset names the same: compatibility forms folded (full-width letters,
    ligatures) and case ignored, so "Ｃｏｔｔｏｎ" and "COTTON" are both "cotton"."""
    return unicodedata.normalize("NFKC", name).casefold()


def _has_control(text: str) -> bool:
    return any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") for c in text)


def check_name(name: Any, source: str = "(new preset)") -> str:
    """Return ``name`` if it is a valid preset name, else raise :class:`PresetError`."""
    if not isinstance(name, str):
        raise invalid(source, f"name must be a string, got {type(name).__name__}")
    if not name.strip():
        raise invalid(source, "name is empty")
    if len(name) > MAX_NAME_LENGTH:
        raise invalid(source, f"name is {len(name)} characters long, at most {MAX_NAME_LENGTH} are allowed")
    if name != name.strip():
        raise invalid(source, f"name {name!r} starts or ends with white space")
    if "/" in name or "\\" in name:
        raise invalid(source, f"name {name!r} contains a path separator")
    if ".." in name:
        raise invalid(source, f"name {name!r} contains '..'")
    if _has_control(name):
        raise invalid(source, f"name {name!r} contains control or invisible characters")
    return name


def _number(key: str, value: Any, source: str, where: str = "values") -> float:
    # bool is an int subclass: true/false are not numbers here
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(source, f"{where}.{key} must be a number, got {json.dumps(value)[:40]}")
    try:
        number = float(value)
    except OverflowError:
        raise invalid(source, f"{where}.{key} = {str(value)[:40]} is not a finite number") from None
    if not math.isfinite(number):
        raise invalid(source, f"{where}.{key} is not a finite number")
    return number


def _check_values(values: Any, source: str, where: str = "values", model: str = MODEL) -> dict[str, float]:
    keys, bounds = MODEL_KEYS[model], MODEL_BOUNDS[model]
    what = "cloth settings" if model == MODEL else f"{model} settings"
    if not isinstance(values, dict):
        raise invalid(source, f"{where} must be an object of field: number, got {type(values).__name__}")
    if not values:
        raise invalid(source, f"{where} is empty: a preset sets at least one {what[:-1]}")
    unknown = [k for k in values if k not in keys]
    if unknown:
        raise invalid(
            source,
            f"unknown key(s) in {where}: {', '.join(repr(k) for k in unknown)}; "
            f"known {what}: {', '.join(keys)}",
        )
    out: dict[str, float] = {}
    for key in keys:
        if key not in values:
            continue
        raw = values[key]
        if key in INTEGER_RANGES:
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise invalid(source, f"{where}.{key} must be an integer, got {json.dumps(raw)[:40]}")
            lo, hi = INTEGER_RANGES[key]
            if not lo <= raw <= hi:
                raise invalid(source, f"{where}.{key} = {raw} is outside [{lo}, {hi}]")
            out[key] = raw
            continue
        number = _number(key, raw, source, where)
        lo, hi = bounds[key]
        if number != 0.0 and abs(number) < FLOAT32_SMALLEST_NORMAL:
            # Blender keeps these settings in float32: such a value would be stored as 0 or a
            # denormal (a mass of 0, a fit that cannot move)
            raise invalid(
                source,
                f"{where}.{key} = {number!r} is too small for Blender's float32 settings (nonzero values "
                f"must be at least {FLOAT32_SMALLEST_NORMAL:g}); Blender would store 0",
            )
        # compared as Blender stores it (float32): a value read back from Blender at a bound,
        # such as a Poisson ratio of 0.49 (0.49000000953674316), is that bound
        if not within_bounds(number, (lo, hi)):
            raise invalid(source, f"{where}.{key} = {number:g} is outside Blender's range [{lo:g}, {hi:g}]")
        number = onto_bounds(number, (lo, hi))
        if key == "mass" and number <= 0.0:
            raise invalid(source, f"{where}.mass must be > 0, got {number:g}")
        out[key] = number
    return out


def _check_text(key: str, value: Any, source: str, limit: int, multiline: bool = False) -> str:
    if not isinstance(value, str):
        raise invalid(source, f"{key} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise invalid(source, f"{key} is {len(value)} characters long, at most {limit} are allowed")
    text = value.replace("\n", "").replace("\t", "") if multiline else value
    if _has_control(text):
        raise invalid(source, f"{key} contains control characters")
    return value


def _check_provenance(prov: Any, source: str, model: str = MODEL) -> dict[str, Any]:
    if not isinstance(prov, dict):
        raise invalid(source, f"provenance must be an object, got {type(prov).__name__}")
    unknown = [k for k in prov if k not in PROVENANCE_KEYS]
    if unknown:
        raise invalid(
            source,
            f"unknown key(s) in provenance: {', '.join(repr(k) for k in unknown)}; "
            f"known: {', '.join(PROVENANCE_KEYS)}",
        )
    out: dict[str, Any] = {}
    for key, kind in PROVENANCE_KEYS.items():
        if key not in prov:
            continue
        value = prov[key]
        where = f"provenance.{key}"
        if kind == "text":
            out[key] = _check_text(where, value, source, MAX_TEXT_LENGTH)
        elif kind == "length":
            number = _number(key, value, source, "provenance")
            if number < 0.0:
                raise invalid(source, f"{where} must be >= 0, got {number:g}")
            out[key] = number
        elif kind == "frames":
            if not isinstance(value, list) or len(value) > MAX_LIST_LENGTH:
                raise invalid(source, f"{where} must be a list of frame numbers")
            if any(isinstance(f, bool) or not isinstance(f, int) for f in value):
                raise invalid(source, f"{where} must contain integers only")
            out[key] = list(value)
        elif kind == "names":
            if not isinstance(value, list) or len(value) > MAX_LIST_LENGTH:
                raise invalid(source, f"{where} must be a list of parameter names")
            bad = [n for n in value if n not in MODEL_KEYS[model]]
            if bad:
                raise invalid(source, f"{where} has unknown parameter(s) {', '.join(map(repr, bad))}")
            out[key] = list(value)
        elif kind == "measures":
            if not isinstance(value, dict) or len(value) > MAX_MEASURES:
                raise invalid(source, f"{where} must be an object of at most {MAX_MEASURES} named numbers")
            out[key] = {
                _check_text(where, name, source, 64): _number(str(name), number, source, where)
                for name, number in value.items()
            }
        elif kind == "texts":
            if not isinstance(value, list) or len(value) > MAX_LIST_LENGTH:
                raise invalid(source, f"{where} must be a list of names")
            out[key] = [_check_text(where, v, source, MAX_TEXT_LENGTH) for v in value]
        else:  # values
            out[key] = _check_values(value, source, where, model)
    return out


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not allowed (numbers must be finite)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for key, value in pairs:
        if key in d:
            raise ValueError(f"duplicate key {key!r}")
        d[key] = value
    return d


def parse_preset(text: str, source: str = "<string>", builtin: bool = False) -> Preset:
    """Validate and parse a preset's JSON text. ``source`` (the file) appears in every error."""
    if not isinstance(text, str):
        raise invalid(source, "content must be text")
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise invalid(source, f"larger than {MAX_FILE_BYTES // 1024} KiB; not a preset")
    try:
        data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as e:
        raise invalid(source, f"not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise invalid(source, f"must be a JSON object, got {type(data).__name__}")
    unknown = [k for k in data if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise invalid(
            source,
            f"unknown key(s) {', '.join(repr(k) for k in unknown)}; known: {', '.join(TOP_LEVEL_KEYS)}",
        )
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise invalid(source, f"missing key(s) {', '.join(repr(k) for k in missing)}")
    schema = data["schema"]
    if isinstance(schema, bool) or schema != SCHEMA_VERSION or not isinstance(schema, int):
        raise invalid(
            source, f"schema {json.dumps(schema)[:40]} is not supported (this version reads schema 1)"
        )
    model = data["model"]
    if not isinstance(model, str) or model not in MODEL_KEYS:
        known = ", ".join(repr(m) for m in MODEL_KEYS)
        raise invalid(source, f"model {json.dumps(model)[:60]} is not supported (expected one of {known})")
    name = check_name(data["name"], source)
    values = _check_values(data["values"], source, model=model)
    notes = _check_text("notes", data.get("notes", ""), source, MAX_NOTES_LENGTH, multiline=True)
    provenance = _check_provenance(data.get("provenance", {}), source, model)
    return Preset(name=name, values=values, notes=notes, provenance=provenance, model=model, builtin=builtin)


def validate_preset(preset: Preset, source: str | None = None) -> Preset:
    """Run a :class:`Preset` built in code through the same checks as a file (returns a
    normalized copy)."""
    try:
        text = json.dumps(preset.to_dict(), allow_nan=False)
    except ValueError:
        raise invalid(source or repr(preset.name), "has a value that is not a finite number") from None
    except TypeError as e:
        raise invalid(source or repr(preset.name), f"cannot be written as JSON ({e})") from None
    checked = parse_preset(text, source or repr(preset.name), builtin=preset.builtin)
    return replace(checked, path=preset.path)


def preset_to_json(preset: Preset) -> str:
    """The file content of ``preset`` (validated; keys in a fixed order; ends with a newline)."""
    checked = validate_preset(preset)
    return json.dumps(checked.to_dict(), indent=2, allow_nan=False, ensure_ascii=False) + "\n"
