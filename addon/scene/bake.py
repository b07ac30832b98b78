"""Bake the fitted cloth to a ``.pc2`` point cache played back by a Mesh Cache modifier.

The cache holds the simulated (deformed) cloth in object space: the Mesh Cache modifier
replaces the cloth modifier in the stack (inserted right below it, with the cloth
switched off in viewport and render) so that modifiers below the cloth still apply, and
the object's own transform, animated or not, places it in the world. Unbake restores the
stack exactly; the ``.pc2`` file stays on disk.
"""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bpy
import numpy as np

from ...warp_core.errors import one_line
from ...warp_core.io import remove_stale_temporaries
from ...warp_core.mesh import ClothMesh
from ...warp_core.models import ModelSettings, get_model
from ...warp_core.pc2 import write_pc2
from ..errors import FitInputError
from ..models.registry import object_model
from ..warp_setup import resolve_device
from .bake_colors import ERROR_ATTRIBUTE as ERROR_ATTRIBUTE  # the colour attribute's name, kept here
from .bake_colors import error_colors_steps, write_error_colors
from .checks import check_object
from .prepare import sized_device
from .records import read_record
from .steps import OffMainThread, Step, StepGenerator, run_blocking, within

CACHE_MODIFIER_NAME = "Fit to Target Bake"
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
    error_tolerance: float | None = None  # the error colours' scale (m, or px for footage), when written
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
        if self.error_tolerance is not None:
            text += (
                f" (error colours: green within the tolerance {self.error_tolerance:.3g}, red from 10x it)"
            )
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
    """Simulate the cloth with its modifier's current settings over its cache range
    (:func:`bake_frame_range`) and play it back through a Mesh Cache modifier. A target
    frame outside the scene's frame range is warned about (``BakeInfo.warnings``).

    Everything is computed and the file written before the first change to the scene, so
    a failure (BakeError, one line) leaves the scene as it was. ``write_cache(path, samples,
    start frame)``, when given, writes the cache instead of :func:`write_pc2` (the batch
    command stages it, to be renamed into place with the saved .blend); raising there (a
    signal) abandons the bake with the scene unchanged. The blocking run of
    :func:`bake_object_steps`.
    """
    steps = bake_object_steps(scene, ob, directory, device, error_colors, error_frame, depsgraph, write_cache)
    return run_blocking(steps)


def bake_object_steps(
    scene: bpy.types.Scene,
    ob: bpy.types.Object,
    directory: str | None = None,
    device: str | None = None,
    error_colors: bool | None = None,
    error_frame: int | None = None,
    depsgraph: bpy.types.Depsgraph | None = None,
    write_cache: Callable[[Path, np.ndarray, int], None] | None = None,
) -> StepGenerator[BakeInfo]:
    """:func:`bake_object` as stepped work (``scene/steps.py``): a ``Step`` per frame of the
    goal pass ("frame 37 of 250"; then those of the error colours' export), the simulation
    (and the error colours' evaluation) off the main thread ("simulating 250 frames"), then
    the file and the scene writes in one step. Closed before that step (Esc), the scene is
    as it was and no file is written."""
    mod = check_object(ob)
    model = object_model(ob)
    s = ob.fit_to_target
    start, end = bake_frame_range(ob)
    name, scene_name = ob.name, scene.name
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    device = device if device is not None else s.device
    resolve_device(device)  # a device that does not exist is refused before the scene is read
    error_colors = s.bake_error_colors if error_colors is None else error_colors

    frames = list(range(start, end + 1))
    n = len(frames)  # progress: the goal pass, the error colours' export, the simulation
    total = n * (3 if error_colors else 2)
    sampler = model.frame_sampler(scene, ob, mod, depsgraph)
    saved = scene.frame_current, scene.frame_subframe
    try:
        scene.frame_set(start)
        try:
            mesh = model.read_geometry(ob, depsgraph)
            model.check_geometry(mesh)
            with sampler:
                sampling = model.sample_goals_steps(ob, depsgraph, scene, frames, on_frame=sampler)
                goals, matrices = yield from within(sampling, 0, n, total)
        except ValueError as e:
            raise BakeError(one_line(e)) from e
    finally:
        scene.frame_set(saved[0], subframe=saved[1])
    try:
        params = sampler.settings(model.read_settings(mod, scene))
    except ValueError as e:
        raise BakeError(f"'{ob.name}': {one_line(e)}") from e

    colors = error_tolerance = None
    if error_colors:
        try:
            colors_steps = error_colors_steps(scene, ob, params.values(), error_frame, depsgraph)
            colors, error_tolerance = yield from within(colors_steps, n, n, total, "error colours: ")
        except FitInputError as e:
            raise BakeError(str(e)) from e

    what = f"simulating {n} frames"
    yield Step(total - n, total, what)
    device = sized_device(device, model, mesh.vertex_count)
    simulate = functools.partial(_simulate, model.name, model.precision, mesh, params, device, goals)
    try:
        world = yield OffMainThread(functools.partial(simulate, start, end), what)
    except ValueError as e:
        raise BakeError(f"'{name}': {one_line(e)}") from e
    if not np.isfinite(world).all():
        raise BakeError(f"'{name}': the simulation diverged; nothing was baked")
    yield Step(total, total, "writing the cache")
    # the scene was free meanwhile (a modal bake lets the artist work): find it again
    scene, ob = bpy.data.scenes.get(scene_name), bpy.data.objects.get(name)
    if scene is None or ob is None:
        raise BakeError(f"'{name}' or its scene '{scene_name}' no longer exists: nothing was baked")
    mod = check_object(ob)

    # Mesh Cache reads object-space coordinates: undo the object's transform frame by frame
    inverse = np.linalg.inv(matrices)
    local = np.einsum("fij,fnj->fni", inverse[:, :3, :3], world) + inverse[:, None, :3, 3]

    # the file and the scene writes in one step: stopped before it, nothing is written
    path, stored, temporary = cache_path(ob, directory)
    remove_stale_temporaries(path.parent)  # of earlier bakes killed while writing
    try:
        if write_cache is None:
            write_pc2(path, local, start_frame=start)
        else:
            write_cache(path, local, start)
    except OSError as e:
        raise BakeError(f"cannot write {path}: {e.strerror or e}") from e
    state = _play_cache(ob, mod, stored, start, end, str(path))
    if colors is not None:
        state.update(error_attribute=write_error_colors(ob, colors), error_tolerance=error_tolerance)
    ob.fit_to_target.bake_json = json.dumps(state)
    warnings = scene_range_warnings(scene, ob, target_frames(ob))
    return BakeInfo(str(path), stored, start, end, temporary, error_tolerance, warnings)


def _simulate(
    model_name: str,
    precision: str,
    mesh: ClothMesh,
    params: ModelSettings,
    device: str,
    goals: np.ndarray,
    start: int,
    end: int,
) -> np.ndarray:
    """World positions (frames, N, 3) of the model's run from ``start`` to ``end`` (no bpy:
    runs off the main thread)."""
    sim = get_model(model_name).build(mesh, params, device, precision, start_frame=start)
    return sim.rollout(end, None, goals).numpy()


def _play_cache(
    ob: bpy.types.Object, mod: bpy.types.Modifier, stored: str, start: int, end: int, filepath: str
) -> dict[str, Any]:
    """The scene writes of a bake: the Mesh Cache modifier right below the cloth, playing
    ``stored``, and the cloth switched off; returns the bake's state to keep on the object."""
    s = ob.fit_to_target
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
    state.update(filepath=filepath, frame_start=start, frame_end=end, error_attribute="")
    return state


def bake_frame_range(ob: bpy.types.Object) -> tuple[int, int]:
    """(first, last) frame a bake of ``ob`` covers: its simulation's cache range, extended
    to its last target frame when one lies beyond the cache end (the scene's frame range
    plays no part; :func:`scene_range_warnings` says what it leaves out). BakeError when
    nothing lies after the cache start."""
    mod = check_object(ob)
    model = object_model(ob)
    start, cache_end = model.cache_frame_range(mod)
    end = max([int(cache_end), *target_frames(ob)])
    if end <= start:
        raise BakeError(
            f"'{ob.name}': the {model.modifier_label} cache ends at frame {end}, not after its start "
            f"frame {start}: nothing to bake; set the cache's End after its Start"
        )
    return int(start), end


def target_frames(ob: bpy.types.Object) -> list[int]:
    """The frames of the object's targets: its fit settings' and its last fit's (the batch
    command's ``--target`` replaces the first for the fit only)."""
    frames = {int(t.frame) for t in ob.fit_to_target.targets}
    try:
        frames.update(int(f) for f in (read_record(ob) or {}).get("target_frames") or [])
    except (ValueError, TypeError):
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
