"""The bake's error colours: a per-vertex colour attribute on the fit tolerance's fixed scale
(:func:`.error_ramp.error_ramp`: green within it, red from 10x), from the fit's own error
measure at the baked values.

The targets are exported as a fit would (stepped, main thread), the errors evaluated off
the main thread; the attribute is written with the bake's other scene writes.
"""

from __future__ import annotations

import functools

import bpy
import numpy as np

from ...warp_core.fit import FitObjective
from ..errors import FitInputError
from ..request import PreparedFit, request_from_object
from .error_overlay import recorded_tolerances, scale_tolerance
from .error_ramp import error_ramp
from .prepare import prepare_fit_steps
from .steps import OffMainThread, StepGenerator

ERROR_ATTRIBUTE = "fit_error"


def error_colors_steps(
    scene: bpy.types.Scene,
    ob: bpy.types.Object,
    values: dict[str, float],
    frame: int | None,
    depsgraph: bpy.types.Depsgraph,
) -> StepGenerator[tuple[np.ndarray, float]]:
    """Per-vertex RGBA and the tolerance it is scaled by (m, or px), as stepped work: at a target frame
    (``frame``, else the object's Error Frame, else its last target), each vertex by its
    distance to the target; for footage targets, each tracked vertex by its track's RMS
    pixel error over the clip (the vertex nearest the track's bound point; untracked
    vertices green). FitInputError when there is no target to colour by."""
    request = request_from_object(ob, start_values={})
    recorded = recorded_tolerances(ob)
    if request.footage is not None:
        prepared = yield from prepare_fit_steps(scene, ob, request, depsgraph)
        work = functools.partial(_track_errors, prepared, values, recorded)
        return (yield OffMainThread(work, "error colours"))
    if not request.targets:
        raise FitInputError("error colours need a target: add one or switch Error Colors off")
    frame = frame or ob.fit_to_target.error_frame or max(t.frame for t in request.targets)
    request.targets = [t for t in request.targets if t.frame == frame]
    if not request.targets:
        raise FitInputError(f"error colours: no target at frame {frame}")
    prepared = yield from prepare_fit_steps(scene, ob, request, depsgraph)
    work = functools.partial(_target_errors, prepared, values, frame, recorded)
    return (yield OffMainThread(work, "error colours"))


def _target_errors(
    prepared: PreparedFit, values: dict[str, float], frame: int, recorded: dict[str, float]
) -> tuple[np.ndarray, float]:
    objective = FitObjective(prepared.problem, prepared.settings, [])
    tolerance = scale_tolerance(recorded, objective, prepared.settings)
    return error_ramp(objective.errors(values)[frame], tolerance), tolerance


def _track_errors(
    prepared: PreparedFit, values: dict[str, float], recorded: dict[str, float]
) -> tuple[np.ndarray, float]:
    objective = FitObjective(prepared.problem, prepared.settings, [])
    tolerance = scale_tolerance(recorded, objective, prepared.settings)
    by_track = objective.track_errors(values)
    error = np.full(prepared.problem.mesh.vertex_count, np.nan)  # grey: no track there
    for b in prepared.problem.tracks.bindings:
        v = b.vertices[int(np.argmax(b.barycentric))]
        error[v] = np.fmax(error[v], by_track.get(b.track, np.nan))
    return error_ramp(error, tolerance), tolerance


def write_error_colors(ob: bpy.types.Object, colors: np.ndarray) -> str:
    """Write ``colors`` into the object's point colour attribute (made, or remade when of
    another kind) and make it the active colour; returns its name."""
    attr = ob.data.color_attributes.get(ERROR_ATTRIBUTE)
    if attr is not None and (attr.domain != "POINT" or attr.data_type != "FLOAT_COLOR"):
        ob.data.color_attributes.remove(attr)
        attr = None
    if attr is None:
        attr = ob.data.color_attributes.new(ERROR_ATTRIBUTE, "FLOAT_COLOR", "POINT")
    attr.data.foreach_set("color", colors.astype(np.float32).ravel())
    ob.data.color_attributes.active_color = attr
    return ERROR_ATTRIBUTE
