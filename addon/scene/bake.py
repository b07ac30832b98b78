"""Bake the fitted cloth to a ``.pc2`` point cache played back by a Mesh Cache modifier.

The cache holds the simulated (deformed) cloth in object space: the Mesh Cache modifier
replaces the cloth modifier in the stack (inserted right below it, with the cloth
switched off in viewport and render) so that modifiers below the cloth still apply, and
the object's own transform, animated or not, places it in the world. Unbake restores the
stack exactly; the ``.pc2`` file stays on disk.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bpy
import numpy as np

from ...warp_core.errors import one_line
from ...warp_core.fit import FitObjective
from ...warp_core.io import remove_stale_temporaries
from ...warp_core.models import get_model
from ...warp_core.pc2 import write_pc2
from ..errors import FitInputError
from ..models.registry import object_model
from ..request import request_from_object
from ..warp_setup import resolve_device
from .checks import check_object
from .prepare import prepare_fit

CACHE_MODIFIER_NAME = "Fit to Target Bake"
ERROR_ATTRIBUTE = "fit_error"
CACHE_FOLDER = "fit_cache"


class BakeError(FitInputError):
    """The bake cannot run; nothing was written."""


@dataclass
class BakeInfo:
    filepath: str  # absolute path of the .pc2
    stored_path: str  # as written into the Mesh Cache modifier (relative "//" when possible)
    frame_start: int
    frame_end: int
    temporary: bool  # written to a temp folder because the .blend is not saved
    max_error_m: float | None = None  # of the error colours, when written
    warnings: tuple[str, ...] = ()  # what the scene will not play as baked

    @property
    def message(self) -> str:
        where = self.filepath
        text = f"Baked frames {self.frame_start}-{self.frame_end} to {where}"
        if self.temporary:
            text = (
                f"The .blend file is not saved: baked frames {self.frame_start}-{self.frame_end} to the "
                f"temporary file {where}; save the .blend and bake again to keep the cache next to it"
            )
        if self.max_error_m is not None:
            text += f" (error colours: red = {self.max_error_m * 1000.0:.3g} mm)"
        return "; ".join([text, *self.warnings])


def is_baked(ob: bpy.types.Object) -> bool:
    return bool(getattr(ob, "fit_to_target", None) and ob.fit_to_target.bake_json)


def bake_filename(name: str) -> str:
    """The ``.pc2`` file name of an object: its name made safe for any file system, plus a
    short hash of the exact name, so that "A B" and "A_B" (or "Cloth" and "cloth" on a
    case-insensitive disk) never share a cache. Stable from run to run."""
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{bpy.path.clean_name(name)}-{digest}.pc2"


def _stored_path(path: Path) -> str:
    """``path`` as the modifier should keep it: relative to the .blend ("//...") when the
    .blend has a path, so the scene still finds its cache when the folder moves."""
    if not bpy.data.filepath:
        return str(path)
    try:
        return bpy.path.relpath(str(path))
    except ValueError:  # another drive (Windows): no relative path exists
        return str(path)


def cache_path(ob: bpy.types.Object, directory: str | None = None) -> tuple[Path, str, bool]:
    """(absolute path, path for the modifier, temporary) of the object's ``.pc2``."""
    filename = bake_filename(ob.name)
    if directory:
        path = Path(bpy.path.abspath(directory)).resolve() / filename
        return path, _stored_path(path), False
    if bpy.data.filepath:
        stored = f"//{CACHE_FOLDER}/{filename}"
        return Path(bpy.path.abspath(stored)).resolve(), stored, False
    path = Path(tempfile.gettempdir()) / "fit_to_target" / CACHE_FOLDER / filename
    return path, str(path), True


def bake_object(
    scene: bpy.types.Scene,
    ob: bpy.types.Object,
    directory: str | None = None,
    device: str | None = None,
    error_colors: bool | None = None,
    error_frame: int | None = None,
    depsgraph: bpy.types.Depsgraph | None = None,
    write_cache: Callable[[Path, np.ndarray, int], None] | None = None,
) -> BakeInfo:
    """Simulate the cloth with its modifier's current settings from the cache start to the
    last of the cache end, the scene end and the object's target frames (those of its fit
    settings and of its last fit), and play it back through a Mesh Cache modifier. A target
    frame outside the scene's frame range is warned about (``BakeInfo.warnings``).

    Everything is computed and the file written before the first change to the scene, so
    a failure (BakeError, one line) leaves the scene as it was. ``write_cache(path, samples,
    start frame)``, when given, writes the cache instead of :func:`write_pc2` (the batch
    command stages it, to be renamed into place with the saved .blend); raising there (a
    signal) abandons the bake with the scene unchanged.
    """
    mod = check_object(ob)
    model = object_model(ob)
    s = ob.fit_to_target
    start, cache_end = model.cache_frame_range(mod)
    targets = target_frames(ob)
    end = max(int(cache_end), int(scene.frame_end), *targets)
    if end <= start:
        raise BakeError(
            f"the cloth cache and the scene end by frame {end}, not after the cache start {start}: "
            "nothing to bake"
        )
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    device = resolve_device(device if device is not None else s.device)
    error_colors = s.bake_error_colors if error_colors is None else error_colors

    frames = list(range(start, end + 1))
    sampler = model.frame_sampler(scene, ob, mod, depsgraph)
    saved = scene.frame_current, scene.frame_subframe
    try:
        scene.frame_set(start)
        try:
            mesh = model.read_geometry(ob, depsgraph)
            model.check_geometry(mesh)
            with sampler:
                goals, matrices = model.sample_goals(ob, depsgraph, scene, frames, on_frame=sampler)
        except ValueError as e:
            raise BakeError(one_line(e)) from e
    finally:
        scene.frame_set(saved[0], subframe=saved[1])
    try:
        params = sampler.settings(model.read_settings(mod, scene))
        sim = get_model(model.name).build(mesh, params, device, model.precision, start_frame=start)
        world = sim.rollout(end, None, goals).numpy()
    except ValueError as e:
        raise BakeError(f"'{ob.name}': {one_line(e)}") from e
    if not np.isfinite(world).all():
        raise BakeError(f"'{ob.name}': the simulation diverged; nothing was baked")

    # Mesh Cache reads object-space coordinates: undo the object's transform frame by frame
    inverse = np.linalg.inv(matrices)
    local = np.einsum("fij,fnj->fni", inverse[:, :3, :3], world) + inverse[:, None, :3, 3]

    colors = None
    max_error = None
    if error_colors:
        colors, max_error = _error_colors(scene, ob, params.values(), error_frame, depsgraph)

    path, stored, temporary = cache_path(ob, directory)
    remove_stale_temporaries(path.parent)  # of earlier bakes killed while writing
    try:
        if write_cache is None:
            write_pc2(path, local, start_frame=start)
        else:
            write_cache(path, local, start)
    except OSError as e:
        raise BakeError(f"cannot write {path}: {e.strerror or e}") from e

    # -- scene writes from here on
    state = json.loads(s.bake_json) if s.bake_json else {}
    cache = ob.modifiers.get(state.get("modifier", "")) if state else None
    if cache is None or cache.type != "MESH_CACHE":
        cache = ob.modifiers.new(CACHE_MODIFIER_NAME, "MESH_CACHE")
        state = {
            "modifier": cache.name,
            "cloth_modifier": mod.name,
            "cloth_show_viewport": bool(mod.show_viewport),
            "cloth_show_render": bool(mod.show_render),
        }
    here = ob.modifiers.find(cache.name)
    below_cloth = ob.modifiers.find(mod.name) + (1 if here > ob.modifiers.find(mod.name) else 0)
    if here != below_cloth:
        ob.modifiers.move(here, below_cloth)
    cache.cache_format = "PC2"
    cache.filepath = stored
    cache.time_mode = "FRAME"
    cache.play_mode = "SCENE"
    cache.frame_start = float(start)
    cache.frame_scale = 1.0
    cache.deform_mode = "OVERWRITE"
    cache.interpolation = "LINEAR"
    cache.forward_axis = "POS_Y"
    cache.up_axis = "POS_Z"
    cache.factor = 1.0
    mod.show_viewport = False
    mod.show_render = False
    state.update(filepath=str(path), frame_start=start, frame_end=end, error_attribute="")
    if colors is not None:
        attr = ob.data.color_attributes.get(ERROR_ATTRIBUTE)
        if attr is not None and (attr.domain != "POINT" or attr.data_type != "FLOAT_COLOR"):
            ob.data.color_attributes.remove(attr)
            attr = None
        if attr is None:
            attr = ob.data.color_attributes.new(ERROR_ATTRIBUTE, "FLOAT_COLOR", "POINT")
        attr.data.foreach_set("color", colors.astype(np.float32).ravel())
        ob.data.color_attributes.active_color = attr
        state["error_attribute"] = ERROR_ATTRIBUTE
        state["max_error_m"] = max_error
    s.bake_json = json.dumps(state)
    warnings = scene_range_warnings(scene, ob, targets)
    return BakeInfo(str(path), stored, start, end, temporary, max_error, warnings)


def target_frames(ob: bpy.types.Object) -> list[int]:
    """The frames of the object's targets: its fit settings' and its last fit's (the batch
    command's ``--target`` replaces the first for the fit only)."""
    frames = {int(t.frame) for t in ob.fit_to_target.targets}
    try:
        record = json.loads(ob.fit_to_target.result_json or "{}")
        frames.update(int(f) for f in record.get("target_frames") or [])
    except (ValueError, TypeError, AttributeError):
        pass  # a record this version cannot read names no frames
    return sorted(frames)


def scene_range_warnings(scene: bpy.types.Scene, ob: bpy.types.Object, frames: list[int]) -> tuple[str, ...]:
    """Why the scene will not play the bake at some target frames: they lie outside its range."""
    first, last = int(scene.frame_start), int(scene.frame_end)
    outside = [f for f in frames if not first <= f <= last]
    if not outside:
        return ()
    listed = ", ".join(str(f) for f in outside)
    return (
        f"'{ob.name}': the scene's frame range {first}-{last} leaves out the target frame(s) {listed}: "
        "they are baked, but the scene does not play them; extend its frame range to include them "
        "(Output Properties > Frame Range)",
    )


def _error_colors(
    scene: bpy.types.Scene,
    ob: bpy.types.Object,
    values: dict[str, float],
    frame: int | None,
    depsgraph: bpy.types.Depsgraph,
) -> tuple[np.ndarray, float]:
    """Per-vertex RGBA, green (on target) to red (the largest error), at a target frame; for
    footage targets, each tracked vertex coloured by its track's RMS pixel error over the
    clip (the vertex nearest the track's bound point; untracked vertices green)."""
    request = request_from_object(ob, start_values={})
    if request.footage is not None:
        prepared = prepare_fit(scene, ob, request, depsgraph)
        objective = FitObjective(prepared.problem, prepared.settings, [])
        by_track = objective.track_errors(values)
        error = np.zeros(prepared.problem.mesh.vertex_count)
        for b in prepared.problem.tracks.bindings:
            v = b.vertices[int(np.argmax(b.barycentric))]
            error[v] = max(error[v], by_track.get(b.track, 0.0))
        return _ramp(error)
    if not request.targets:
        raise BakeError("error colours need a target: add one or switch Error Colors off")
    frame = frame or ob.fit_to_target.error_frame or max(t.frame for t in request.targets)
    request.targets = [t for t in request.targets if t.frame == frame]
    if not request.targets:
        raise BakeError(f"error colours: no target at frame {frame}")
    prepared = prepare_fit(scene, ob, request, depsgraph)
    objective = FitObjective(prepared.problem, prepared.settings, [])
    return _ramp(objective.errors(values)[frame])


def _ramp(error: np.ndarray) -> tuple[np.ndarray, float]:
    top = float(error.max())
    t = np.clip(error / top, 0.0, 1.0) if top > 0.0 else np.zeros_like(error)
    colors = np.stack([t, 1.0 - t, np.zeros_like(t), np.ones_like(t)], axis=1)
    return colors, top


def unbake_object(ob: bpy.types.Object) -> bool:
    """Remove the bake's Mesh Cache modifier and error colours, switch the cloth back on."""
    s = ob.fit_to_target
    if not s.bake_json:
        return False
    state = json.loads(s.bake_json)
    cache = ob.modifiers.get(state.get("modifier", ""))
    if cache is not None and cache.type == "MESH_CACHE":
        ob.modifiers.remove(cache)
    cloth = ob.modifiers.get(state.get("cloth_modifier", "")) or object_model(ob).find_modifier(ob)
    if cloth is not None:
        if cloth.show_viewport != state.get("cloth_show_viewport", True):
            cloth.show_viewport = state.get("cloth_show_viewport", True)
        if cloth.show_render != state.get("cloth_show_render", True):
            cloth.show_render = state.get("cloth_show_render", True)
    name = state.get("error_attribute")
    if name and ob.type == "MESH":
        attr = ob.data.color_attributes.get(name)
        if attr is not None:
            ob.data.color_attributes.remove(attr)
    s.bake_json = ""
    return True
