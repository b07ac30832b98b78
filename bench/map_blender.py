"""The Blender side of the weight-map benchmark (needs ``bpy``): build each scene with its
hidden map and let Blender's own cloth make the targets; reset the cloth to Blender's
defaults and export the fits' problems through the add-on; write a fit back through the
add-on and replay it with Blender's cloth.

The cloth, its pins and targets are built as the robustness benchmark builds them
(``robustness_blender``). The hidden map is set as an artist would: the kind's vertex group
holds ``(s_v - min) / (max - min)`` and the modifier's base is the smallest stiffness, its
Max the largest (compression as tension). The fits are asked for through the object's Fit
settings (the Weight Map panel for the map, the Parameters check boxes for the uniform
value), read by the add-on's ``request_from_object`` and exported by its ``prepare_fit``.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import numpy as np
from map_scenes import MapScene, group_weights, hidden_stiffness, region_weights
from robustness_blender import (
    CLOTH,
    AddonSide,
    add_targets,
    build_cloth,
    load_addon_side,
    read_targets,
    run_cloth,
    shape_measures,
)
from robustness_scenes import SceneSpec

HIDDEN = "Hidden"  # the group of the hidden map while Blender makes the targets
# kind -> the modifier's base fields, their Max fields and the field naming the group
BASES = {"structural": ("tension_stiffness", "compression_stiffness"), "bending": ("bending_stiffness",)}
MAXIMA = {
    "structural": ("tension_stiffness_max", "compression_stiffness_max"),
    "bending": ("bending_stiffness_max",),
}
GROUP_FIELDS = {"structural": "vertex_group_structural_stiffness", "bending": "vertex_group_bending"}


@dataclass
class MapSide:
    """The add-on's modules the benchmark drives: made by :func:`load_map_side`, read here
    and by ``bench/maps.py`` (the fit engine of the same package, so problems and results
    are its classes)."""

    base: AddonSide  # the robustness benchmark's modules (prepare, request, problem files, fit)
    write_back: ModuleType  # addon.scene.write_back


def load_map_side() -> MapSide:
    base = load_addon_side()
    package = base.prepare.__name__.split(".")[0]
    return MapSide(base, importlib.import_module(f"{package}.addon.scene.write_back"))


@dataclass
class Generated:
    """What :func:`generate` made for one scene: read by ``bench/maps.py`` (fits, replays)."""

    blend: Path
    map_problem: Path
    uniform_problem: Path
    map_fit: Any  # the add-on's PreparedFit of the map
    uniform_fit: Any  # the add-on's PreparedFit of the best uniform value
    hidden: np.ndarray  # the hidden stiffness per vertex
    motion_m: float
    vertices: int


def rest_positions(scene: MapScene, side: MapSide) -> np.ndarray:
    """The sheet's vertices at rest (object space, centred on the origin)."""
    return side.base.mesh.grid_mesh(scene.grid, scene.grid, scene.size_m, scene.size_m).vertices


def paint(ob: bpy.types.Object, name: str, weights: np.ndarray, every_vertex: bool = False) -> None:
    """A vertex group ``name`` holding ``weights``: the painted vertices only (weight > 0), as
    a brush leaves them, or ``every_vertex`` (the hidden map: Blender's cloth reads a vertex
    outside its group otherwise)."""
    group = ob.vertex_groups.new(name=name)
    for index in range(len(weights)) if every_vertex else np.flatnonzero(weights > 0.0):
        group.add([int(index)], float(weights[index]), "REPLACE")


def set_hidden_map(ob: bpy.types.Object, scene: MapScene, stiffness: np.ndarray) -> None:
    """The kind's group with the hidden weights, the base at the smallest and the Max at the
    largest stiffness (bases first: Blender raises a Max set below its base)."""
    weights, low, high = group_weights(stiffness)
    paint(ob, HIDDEN, weights, every_vertex=True)
    settings = ob.modifiers[CLOTH].settings
    for name in BASES[scene.kind]:
        setattr(settings, name, low)
    for name in MAXIMA[scene.kind]:
        setattr(settings, name, high)
    setattr(settings, GROUP_FIELDS[scene.kind], HIDDEN)


def clear_hidden_map(ob: bpy.types.Object, scene: MapScene, defaults: dict[str, float]) -> None:
    """Blender's defaults back (bases before Max) and no group: what a user starts from."""
    settings = ob.modifiers[CLOTH].settings
    for name in (*BASES[scene.kind], *MAXIMA[scene.kind]):
        setattr(settings, name, defaults[name])
    setattr(settings, GROUP_FIELDS[scene.kind], "")
    ob.vertex_groups.remove(ob.vertex_groups[HIDDEN])


def ask_uniform(ob: bpy.types.Object, scene: MapScene, side: MapSide) -> None:
    """The Fit settings of the best uniform value: the kind's base (compression tied), no map."""
    s = ob.fit_to_target
    for name in side.base.parameter_names:
        setattr(s, f"fit_{name}", name == BASES[scene.kind][0])
    s.tie_compression = True
    s.tie_damping = False
    s.map_fit = False


def ask_map(ob: bpy.types.Object, scene: MapScene, side: MapSide) -> None:
    """The Weight Map settings of the scene's map (its regions, or free) and no parameter."""
    s = ob.fit_to_target
    for name in side.base.parameter_names:
        setattr(s, f"fit_{name}", False)
    s.map_fit = True
    s.map_kind = scene.kind.upper()
    s.map_mode = "REGIONS" if scene.mode == "regions" else "FREE"
    s.map_regions.clear()
    for name in scene.truth if scene.mode == "regions" else ():
        s.map_regions.add().group = name


def prepare(ob: bpy.types.Object, side: MapSide) -> Any:
    """The add-on's PreparedFit of what the object's Fit settings ask for, on the CPU."""
    request = side.base.request.request_from_object(ob)
    request.device = "cpu"  # the problem file does not keep the device
    return side.base.prepare.prepare_fit(bpy.context.scene, ob, request)


def generate(scene: MapScene, out: Path, side: MapSide) -> Generated:
    """Build ``scene`` with its hidden map, let Blender's cloth make the targets, reset the
    cloth and export both fits; saves ``NAME.blend``, ``NAME.map.npz`` and ``NAME.uniform.npz``."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    bscene = bpy.context.scene
    bscene.frame_start, bscene.frame_end = 1, scene.last_frame
    frames, motion = scene.target_frames, scene.motion
    spec = SceneSpec(0, scene.grid, scene.size_m, False, scene.pins, scene.quality, frames, [], {}, motion)
    ob, polygons = build_cloth(spec, side.base)
    ob.modifiers[CLOTH].settings.mass = scene.mass_kg
    rest = rest_positions(scene, side)
    if scene.mode == "regions":
        for name, weights in region_weights(scene, rest).items():
            paint(ob, name, weights)
    hidden = hidden_stiffness(scene, rest)
    settings = ob.modifiers[CLOTH].settings
    defaults = {n: float(getattr(settings, n)) for n in (*BASES[scene.kind], *MAXIMA[scene.kind])}
    set_hidden_map(ob, scene, hidden)
    shapes = run_cloth(ob, scene.target_frames, side.base)
    clear_hidden_map(ob, scene, defaults)
    add_targets(ob, shapes, polygons, scene.target_frames)
    bscene.frame_set(1)
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)

    ask_uniform(ob, scene, side)
    uniform_fit = prepare(ob, side)
    ask_map(ob, scene, side)
    map_fit = prepare(ob, side)
    paths = [out / f"{scene.name}.{suffix}" for suffix in ("blend", "map.npz", "uniform.npz")]
    side.base.problem_io.save_problem(map_fit.problem, paths[1])
    side.base.problem_io.save_problem(uniform_fit.problem, paths[2])
    bpy.ops.wm.save_as_mainfile(filepath=str(paths[0]), compress=True)
    motion, _ = shape_measures(shapes, map_fit.problem.mesh.edges, scene.target_frames)
    return Generated(*paths, map_fit, uniform_fit, hidden, motion, map_fit.problem.mesh.vertex_count)


def replay(
    blend: Path, problem: Path, prepared: Any, result: Any, side: MapSide
) -> tuple[float, float, dict[str, Any]]:
    """(RMSE, max error, the record) of Blender's cloth against the targets of ``problem``
    after the add-on's write-back of ``result`` (its values into the modifier, its map into
    a vertex group) into a fresh copy of the scene."""
    bpy.ops.wm.open_mainfile(filepath=str(blend), load_ui=False)
    ob = bpy.data.objects[CLOTH]
    record = side.write_back.write_back(ob, prepared, result)
    for kind, entry in (record.get("maps") or {}).items():
        named = getattr(ob.modifiers[CLOTH].settings, GROUP_FIELDS[kind])
        if named != entry["group"] or named not in ob.vertex_groups:
            raise RuntimeError(f"the {kind} map went to {entry['group']!r}, the modifier reads {named!r}")
    targets = read_targets(problem)
    shapes = run_cloth(ob, sorted(targets), side.base)
    errors = np.concatenate([np.linalg.norm(shapes[f] - t, axis=1) for f, t in targets.items()])
    return float(math.sqrt(np.mean(errors**2))), float(errors.max()), record
