"""The Blender side of the robustness benchmark (needs ``bpy``): build each scene and let
Blender's own cloth make its targets (``generate``), and run Blender's cloth again with the
fitted values (``replay``).

The problem files are exported through the add-on's own code (``prepare_fit``, as the batch
command does), so the benchmark fits exactly what a user's scene would hand the fit.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import bpy
import numpy as np
from robustness_scenes import GeneratedScene, PinMotion, SceneSpec

REPO = Path(__file__).resolve().parent.parent
CLOTH = "Cloth"
PIN_GROUP = "Pin"


@dataclass
class AddonSide:
    """The add-on's modules, imported from the registered extension package."""

    cloth_scene: ModuleType  # addon.models.blender_cloth.scene_model
    mesh_read: ModuleType
    prepare: ModuleType
    request: ModuleType
    problem_io: ModuleType
    fit: ModuleType  # warp_core.fit
    mesh: ModuleType  # warp_core.mesh
    parameter_names: list[str]


def load_addon_side() -> AddonSide:
    sys.path.insert(0, str(REPO))
    import warp as wp

    import batch  # the repository's headless entry point knows how to load the add-on

    wp.config.log_level = wp.LOG_WARNING
    package = batch.load_addon().__name__

    def module(name: str) -> ModuleType:
        return importlib.import_module(f"{package}.{name}")

    models = module("warp_core.models")
    return AddonSide(
        cloth_scene=module("addon.models.blender_cloth.scene_model"),
        mesh_read=module("addon.mesh_read"),
        prepare=module("addon.scene.prepare"),
        request=module("addon.request"),
        problem_io=module("warp_core.fit.problem.files"),
        fit=module("warp_core.fit"),
        mesh=module("warp_core.mesh"),
        parameter_names=[p.name for p in models.get_model("blender_cloth").parameters],
    )


# -- building a scene ---------------------------------------------------------------------------
def pinned_vertices(vertices: np.ndarray, kind: str) -> list[int]:
    """The pin group: the +y edge row (two rows when clamped), or its two corners."""
    x, y = np.round(vertices[:, 0], 9), np.round(vertices[:, 1], 9)
    rows = np.unique(y)
    if kind == "two_rows":
        chosen = np.isin(y, rows[-2:])
    elif kind == "two_corners":
        chosen = (y == rows[-1]) & ((x == x.min()) | (x == x.max()))
    else:
        chosen = y == rows[-1]
    return np.flatnonzero(chosen).tolist()


def mesh_object(name: str, vertices: np.ndarray, polygons: list[list[int]]) -> bpy.types.Object:
    # from_pydata keeps vertex, edge and face order (they decide the order of Blender's springs)
    me = bpy.data.meshes.new(name)
    me.from_pydata(np.asarray(vertices, dtype=np.float64).tolist(), [], polygons)
    me.update()
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    return ob


def animate(ob: bpy.types.Object, motion: PinMotion) -> None:
    """Keyframe a move and a turn about z from frame 1 (at rest) to ``motion.end_frame``."""
    keys = ((1, (0.0, 0.0, 0.0), 0.0), (motion.end_frame, motion.offset_m, motion.turn_rad))
    for frame, offset, turn in keys:
        ob.location = offset
        ob.rotation_euler = (0.0, 0.0, turn)
        ob.keyframe_insert("location", frame=frame)
        ob.keyframe_insert("rotation_euler", frame=frame)


def build_cloth(spec: SceneSpec, side: AddonSide) -> tuple[bpy.types.Object, list[list[int]]]:
    """The cloth object with its pins and pin animation, and its polygons."""
    mesh = side.mesh.grid_mesh(spec.grid, spec.grid, spec.size_m, spec.size_m, triangulate=spec.triangles)
    polygons = [p.tolist() for p in mesh.polygons()]
    ob = mesh_object(CLOTH, mesh.vertices, polygons)
    ob.vertex_groups.new(name=PIN_GROUP).add(pinned_vertices(mesh.vertices, spec.pins), 1.0, "REPLACE")
    if spec.pins == "animated_object":
        animate(ob, spec.motion)
    elif spec.pins == "hooked_empty":
        # the pin group hangs on an empty that moves: a handle dragging the cloth by one edge
        handle = bpy.data.objects.new("Handle", None)
        bpy.context.scene.collection.objects.link(handle)
        animate(handle, spec.motion)
        hook = ob.modifiers.new("Hook", "HOOK")
        hook.object = handle
        hook.vertex_group = PIN_GROUP
    mod = ob.modifiers.new(CLOTH, "CLOTH")
    mod.settings.vertex_group_mass = PIN_GROUP
    mod.settings.quality = spec.quality
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, spec.last_frame
    return ob, polygons


def run_cloth(ob: bpy.types.Object, frames: list[int], side: AddonSide) -> dict[int, np.ndarray]:
    """World positions at ``frames`` (and at the cache start) from Blender's own cloth.

    Every frame from the cache start is stepped: skipping frames would run one big step.
    """
    mod = side.cloth_scene.find_cloth_modifier(ob)
    start = int(mod.point_cache.frame_start)
    scene = bpy.context.scene
    depsgraph = bpy.context.evaluated_depsgraph_get()
    shapes = {}
    for frame in range(start, max(frames) + 1):
        scene.frame_set(frame)
        if frame == start or frame in frames:
            ob_eval = ob.evaluated_get(depsgraph)
            matrix = side.mesh_read.object_matrix(ob_eval)
            shapes[frame] = side.mesh_read.world_positions(ob_eval.data.vertices, matrix)
    return shapes


def add_targets(
    ob: bpy.types.Object, shapes: dict[int, np.ndarray], polygons: list[list[int]], frames: list[int]
) -> None:
    """One target mesh per frame in a "Targets" collection, added to the cloth's fit targets."""
    scene = bpy.context.scene
    collection = bpy.data.collections.new("Targets")
    scene.collection.children.link(collection)
    for frame in frames:
        target = mesh_object(f"Target.f{frame:03d}", shapes[frame], polygons)
        scene.collection.objects.unlink(target)
        collection.objects.link(target)
        target.display_type = "WIRE"
        target.hide_render = True
        item = ob.fit_to_target.targets.add()
        item.kind, item.object, item.frame = "OBJECT", target, frame


def choose_parameters(ob: bpy.types.Object, spec: SceneSpec, side: AddonSide) -> None:
    """Tick the fitted parameters in the object's Fit settings, as a user would."""
    s = ob.fit_to_target
    for name in side.parameter_names:
        setattr(s, f"fit_{name}", name in spec.fitted)
    s.tie_compression = True
    s.tie_damping = False


def shape_measures(
    shapes: dict[int, np.ndarray], edges: np.ndarray, frames: list[int]
) -> tuple[float, float]:
    """(largest displacement from rest, largest edge stretch) over the target frames."""
    rest = shapes[min(shapes)]
    rest_length = np.linalg.norm(rest[edges[:, 0]] - rest[edges[:, 1]], axis=1)
    motion, stretch = 0.0, 0.0
    for frame in frames:
        x = shapes[frame]
        motion = max(motion, float(np.linalg.norm(x - rest, axis=1).max()))
        length = np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1)
        stretch = max(stretch, float((length / rest_length).max()))
    return motion, stretch


def generate_scene(spec: SceneSpec, out: Path, side: AddonSide) -> GeneratedScene:
    """Build the scene with the true values, record Blender's targets, reset the cloth to
    Blender's defaults, save ``scene_NN.blend`` and export ``scene_NN.npz``."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, spec.last_frame
    ob, polygons = build_cloth(spec, side)
    mod = side.cloth_scene.find_cloth_modifier(ob)
    defaults = side.cloth_scene.modifier_values(mod, list(spec.truth))
    side.cloth_scene.set_modifier_values(mod, spec.truth)
    shapes = run_cloth(ob, spec.target_frames, side)
    side.cloth_scene.set_modifier_values(mod, defaults)  # what a user starts from
    add_targets(ob, shapes, polygons, spec.target_frames)
    choose_parameters(ob, spec, side)
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)

    request = side.request.request_from_object(ob)
    request.device = "cpu"  # the problem file does not keep the device; no GPU is needed here
    prepared = side.prepare.prepare_fit(scene, ob, request)
    side.problem_io.save_problem(prepared.problem, out / f"{spec.name}.npz")
    bpy.ops.wm.save_as_mainfile(filepath=str(out / f"{spec.name}.blend"), compress=True)
    motion, stretch = shape_measures(shapes, prepared.problem.mesh.edges, spec.target_frames)
    return GeneratedScene(spec, defaults, motion, stretch, prepared.problem.mesh.vertex_count)


# -- replay ---------------------------------------------------------------------------------------
def read_targets(npz: Path) -> dict[int, np.ndarray]:
    """The targets of a problem file, by frame (read as plain arrays: no Warp needed)."""
    with np.load(npz, allow_pickle=False) as data:
        meta = json.loads(data["meta"].tobytes().decode("utf-8"))
        return {int(f): data[f"target{k}_positions"] for k, f in enumerate(meta["target_frames"])}


def replay(out: Path, spec: SceneSpec, values: dict[str, float], side: AddonSide) -> tuple[float, float]:
    """(RMSE, max error) in metres of Blender's cloth with ``values`` against the targets."""
    bpy.ops.wm.open_mainfile(filepath=str(out / f"{spec.name}.blend"), load_ui=False)
    ob = bpy.data.objects[CLOTH]
    mod = side.cloth_scene.find_cloth_modifier(ob)
    side.cloth_scene.set_modifier_values(mod, values)
    targets = read_targets(out / f"{spec.name}.npz")
    shapes = run_cloth(ob, sorted(targets), side)
    errors = np.concatenate([np.linalg.norm(shapes[f] - t, axis=1) for f, t in targets.items()])
    return float(math.sqrt(np.mean(errors**2))), float(errors.max())


def model_rmse(out: Path, spec: SceneSpec, values: dict[str, float], side: AddonSide) -> float:
    """RMSE of the fit's own model (float64, CPU) with ``values``: how close a fit can get."""
    problem = side.problem_io.load_problem(out / f"{spec.name}.npz")
    objective = side.fit.FitObjective(problem, side.fit.FitSettings(device="cpu"), [])
    return float(objective.rmse(values))
