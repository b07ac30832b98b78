"""The batch command's inputs read before any fit: the scene file, the preset to start from,
and errors of the add-on's checks as the one-line usage errors of exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import bpy

from ...warp_core.errors import one_line
from ...warp_core.presets.files import load_preset_file
from ..errors import FitInputError
from ..models.registry import scene_model
from ..presets import find_preset
from ..request import parse_start_values
from .args import UsageError, not_a_file

T = TypeVar("T")


def as_usage_error(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)``, its FitInputError turned into a UsageError."""
    try:
        return function(*args)
    except FitInputError as e:
        raise UsageError(str(e)) from e


def scene_path(given: str | None) -> Path:
    """The input file: the scene argument, else the file Blender has open."""
    if given:
        path = Path(given).expanduser().resolve()
        if not path.is_file():
            raise UsageError(not_a_file(given, path))
        return path
    if not bpy.data.filepath:
        raise UsageError("no scene file given")
    return Path(bpy.data.filepath).resolve()


def open_scene(path: Path, given: str | None) -> None:
    """Open ``path`` unless Blender has it open already."""
    current = Path(bpy.data.filepath).resolve() if bpy.data.filepath else None
    if current != path:
        try:
            bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
        except RuntimeError as e:
            raise UsageError(f"cannot open {given}: {one_line(e)}") from e


def is_preset_file(given: str) -> bool:
    """``--preset`` names a file when it has a folder in it or ends in .json; else a preset."""
    return "/" in given or "\\" in given or given.lower().endswith(".json")


def preset_values(given: str) -> dict[str, Any]:
    """``--preset``: the start values of a preset file or of the preset of that name."""
    try:
        preset = load_preset_file(Path(given).expanduser()) if is_preset_file(given) else find_preset(given)
    except (LookupError, ValueError, OSError) as e:
        raise UsageError(f"preset '{given}': {one_line(e)}") from e
    fields = as_usage_error(scene_model, preset.model).settings_fields
    return as_usage_error(parse_start_values, json.dumps(dict(preset.values)), f"preset '{given}'", fields)
