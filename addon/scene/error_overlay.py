"""The fit error in the viewport without a bake: the cloth simulated with its modifier's current
values, each vertex coloured by its distance to the target (on the tolerance's fixed scale,
:mod:`.error_ramp`), and the 3D viewports switched to show that colour (main thread).

The colours are of one target frame: the current frame when a target is there, else the
nearest target frame (the earlier of two as near). Footage targets colour each tracked vertex
(the one nearest its track's bound point) by the track's RMS pixel error over the clip, on the
pixel tolerance; vertices no track is bound to are grey.

The tolerance is the panel's when one is set, else the last fit's, else the automatic one a
fit would take for this target frame. What the overlay changed (the viewports' shading, the
active colour attribute) is kept on the object (``error_overlay_json``) and put back by
:func:`hide_error`, also after the .blend was saved and opened again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np

from ...warp_core.fit import FitObjective
from ...warp_core.fit.verdict.outcome import fit_scales
from ...warp_core.targets.units import unit_of
from ..errors import FitInputError
from ..request import request_from_object
from .checks import check_object
from .error_ramp import LEGEND, error_ramp
from .prepare import prepare_fit
from .records import read_record

ERROR_ATTRIBUTE = "fit_error"  # the bake's error colours use the same attribute
SHADING = ("SOLID", "VERTEX")  # the viewport's shading type and colour type ("Attribute")


@dataclass
class OverlayInfo:
    """What :func:`show_error` coloured. Made by it; read by the Show Fit Error operator (its
    report) and kept, as JSON, for the legend and :func:`hide_error`."""

    frame: int | None  # the target frame coloured (None: footage, over the whole clip)
    asked_frame: int  # the scene frame when it was asked for
    tolerance: float  # in the unit
    unit: str  # the unit's symbol
    max_error: float  # in the unit, over the compared vertices
    counts: tuple[int, int, int]  # vertices within 1x, 1x-10x, and from 10x the tolerance

    @property
    def message(self) -> str:
        u = unit_of(self.unit)
        where = "over the clip's markers" if self.frame is None else f"at frame {self.frame}"
        if self.frame is not None and self.frame != self.asked_frame:
            where += f" (the target frame nearest frame {self.asked_frame})"
        green, mid, red = self.counts
        return (
            f"Fit error {where}: largest {u.format(self.max_error)}; {green} vertices within the "
            f"tolerance {u.format(self.tolerance)}, {mid} up to 10x, {red} beyond"
        )


def nearest_target_frame(frames: list[int], frame: int) -> int:
    """``frame`` when it is one of ``frames``, else the nearest (the earlier of two as near)."""
    return min(frames, key=lambda f: (abs(f - frame), f))


def recorded_tolerances(ob: bpy.types.Object) -> dict[str, float]:
    """The tolerance of the object's last fit by unit symbol ({"m": 0.001}); main thread."""
    record = read_record(ob) or {}
    unit = unit_of(record.get("unit"))
    last = record.get(f"tolerance_{unit.symbol}")
    return {unit.symbol: float(last)} if isinstance(last, int | float) and last > 0.0 else {}


def scale_tolerance(recorded: dict[str, float], objective: FitObjective, settings: Any) -> float:
    """The tolerance error colours are scaled by: the panel's when one is set, else the last
    fit's (``recorded``, from :func:`recorded_tolerances`), else the automatic one a fit
    would take. Pure: any thread."""
    unit = objective.unit
    asked = getattr(settings, unit.tolerance_field)
    if asked is None and unit.symbol in recorded:
        return recorded[unit.symbol]
    scales = fit_scales(
        objective.motion(),
        objective.coordinate_scale(),
        settings.precision,
        asked,
        settings.rmse_tolerance_m,
        unit,
        objective.noise_rmse(),
    )
    return float(scales.tolerance)


def vertex_errors(
    scene: bpy.types.Scene, ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph
) -> tuple[np.ndarray, OverlayInfo]:
    """The error of each vertex (NaN where nothing is compared) with the modifier's current
    values, and what was measured (counts left at 0). FitInputError when there is no target."""
    check_object(ob)
    request = request_from_object(ob, start_values={})
    asked = int(scene.frame_current)
    frame = None
    if request.footage is None:
        if not request.targets:
            raise FitInputError(f"'{ob.name}' has no targets: add one to see the fit error")
        frame = nearest_target_frame(sorted({t.frame for t in request.targets}), asked)
        request.targets = [t for t in request.targets if t.frame == frame]
    prepared = prepare_fit(scene, ob, request, depsgraph)
    objective = FitObjective(prepared.problem, prepared.settings, [])
    values = prepared.problem.model_settings.values()
    try:
        if frame is not None:
            error = np.asarray(objective.errors(values)[frame], dtype=np.float64)
        else:
            by_track = objective.track_errors(values)
            error = np.full(prepared.problem.mesh.vertex_count, np.nan)
            for b in prepared.problem.tracks.bindings:
                v = b.vertices[int(np.argmax(b.barycentric))]
                error[v] = np.fmax(error[v], by_track.get(b.track, np.nan))
    except FloatingPointError as e:
        raise FitInputError(f"'{ob.name}': {e}: nothing to colour") from e
    tolerance = scale_tolerance(recorded_tolerances(ob), objective, prepared.settings)
    top = float(np.nanmax(error)) if np.isfinite(error).any() else 0.0
    return error, OverlayInfo(frame, asked, tolerance, objective.unit.symbol, top, (0, 0, 0))


def show_error(context: bpy.types.Context, ob: bpy.types.Object) -> OverlayInfo:
    """Colour the object's vertices by their fit error (attribute ``fit_error``, POINT,
    FLOAT_COLOR, made the active colour) and switch every 3D viewport of the open windows to
    solid shading by attribute colour. Everything is measured before the first change: a
    refusal (FitInputError) leaves the scene as it was."""
    if ob.mode == "EDIT":  # the colours would be written to a mesh Edit Mode is about to replace
        raise FitInputError(f"'{ob.name}' is in Edit Mode: leave it to see the fit error")
    error, info = vertex_errors(context.scene, ob, context.evaluated_depsgraph_get())
    ratio = error / info.tolerance
    info.counts = (
        int(np.sum(ratio <= 1.0)),
        int(np.sum((ratio > 1.0) & (ratio < 10.0))),
        int(np.sum(ratio >= 10.0)),
    )
    colors = error_ramp(error, info.tolerance)
    s = ob.fit_to_target
    state = json.loads(s.error_overlay_json) if s.error_overlay_json else {}
    attributes = ob.data.color_attributes
    if not state:
        active = attributes.active_color
        state["previous_active_color"] = active.name if active is not None else ""
        state["shading"] = []
    attr = attributes.get(ERROR_ATTRIBUTE)
    if attr is not None and (attr.domain != "POINT" or attr.data_type != "FLOAT_COLOR"):
        attributes.remove(attr)
        attr = None
    if attr is None:
        attr = attributes.new(ERROR_ATTRIBUTE, "FLOAT_COLOR", "POINT")
    attr.data.foreach_set("color", colors.ravel())
    attributes.active_color = attr
    ob.data.update()
    state["shading"] = _switch_viewports(context, ob, state["shading"])
    state.update(
        frame=info.frame,
        asked_frame=info.asked_frame,
        tolerance=info.tolerance,
        unit=info.unit,
        max_error=info.max_error,
        counts=list(info.counts),
    )
    s.error_overlay_json = json.dumps(state)
    return info


def overlay_state(ob: bpy.types.Object) -> dict[str, Any] | None:
    """What :func:`show_error` keeps on the object while its colours are shown, else None."""
    text = getattr(getattr(ob, "fit_to_target", None), "error_overlay_json", "")
    if not text:
        return None
    try:
        state = json.loads(text)
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def legend_rows(state: dict[str, Any]) -> list[tuple[str, str, tuple[float, ...]]]:
    """(colour name, the error it stands for, RGBA) of each colour of the scale."""
    unit = unit_of(state.get("unit"))
    tolerance = float(state.get("tolerance") or 0.0)
    rows = []
    for (name, factor, rgba), text in zip(LEGEND, ("up to", "at", "from"), strict=True):
        rows.append((name, f"{text} {unit.format(factor * tolerance)} ({factor:g}x tolerance)", rgba))
    return rows


def _areas(context: bpy.types.Context) -> list[tuple[str, int, bpy.types.Area]]:
    """(screen name, area index, area) of every 3D viewport of the open windows."""
    found = []
    for window in getattr(context.window_manager, "windows", ()):
        screen = window.screen
        for index, area in enumerate(screen.areas):
            if area.type == "VIEW_3D":
                found.append((screen.name, index, area))
    return found


def _others_memory(ob: bpy.types.Object) -> dict[tuple[str, int], dict[str, Any]]:
    """The shading other objects' overlays remember, by (screen, area)."""
    memory = {}
    for other in bpy.data.objects:
        state = overlay_state(other) if other != ob else None
        for entry in (state or {}).get("shading") or []:
            memory.setdefault((entry["screen"], entry["area"]), entry)
    return memory


def _switch_viewports(context: bpy.types.Context, ob: bpy.types.Object, kept: list[dict]) -> list[dict]:
    remembered = {(e["screen"], e["area"]): e for e in kept}
    others = _others_memory(ob)
    for screen, index, area in _areas(context):
        shading = area.spaces.active.shading
        key = (screen, index)
        if key not in remembered:
            # a viewport another overlay switched keeps that one's memory of how it was
            previous = others.get(key) or {"type": shading.type, "color_type": shading.color_type}
            remembered[key] = {"screen": screen, "area": index, **_shading_of(previous)}
        shading.type, shading.color_type = SHADING
        area.tag_redraw()
    return list(remembered.values())


def _shading_of(entry: dict[str, Any]) -> dict[str, str]:
    return {"type": entry["type"], "color_type": entry["color_type"]}


def hide_error(ob: bpy.types.Object) -> bool:
    """Remove the error colours and put back the active colour attribute and, unless another
    object's overlay still shows, each viewport's shading (where the artist has not changed
    it since). False when the object shows no error overlay."""
    state = overlay_state(ob)
    if state is None:
        return False
    others = _others_memory(ob)
    for entry in state.get("shading") or []:
        screen = bpy.data.screens.get(entry["screen"])
        mine = (entry["screen"], entry["area"]) not in others
        if screen is None or not mine or entry["area"] >= len(screen.areas):
            continue
        area = screen.areas[entry["area"]]
        if area.type != "VIEW_3D":
            continue
        shading = area.spaces.active.shading
        if (shading.type, shading.color_type) == SHADING:
            shading.type, shading.color_type = entry["type"], entry["color_type"]
            area.tag_redraw()
    if ob.type == "MESH":
        attributes = ob.data.color_attributes
        attr = attributes.get(ERROR_ATTRIBUTE)
        if attr is not None:
            attributes.remove(attr)
        previous = attributes.get(state.get("previous_active_color") or "")
        if previous is not None:
            attributes.active_color = previous
        ob.data.update()
    ob.fit_to_target.error_overlay_json = ""
    return True
