"""Test helpers around Blender's own cloth solver (real ``bpy`` module).

Build a cloth object from a :class:`ClothMesh`, step Blender's simulation frame by frame
and read its result, and export the scene through the add-on's ``addon.models.blender_cloth.scene_model``.

The repository is imported as a package (the way Blender imports an extension), so that
``addon``'s relative imports of ``warp_core`` work. ``warp_core`` is taken from that same
package here, so meshes built by these helpers and meshes exported by the add-on are
instances of the same ``ClothMesh`` class.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_NAME = "fit_to_target"  # the extension id (blender_manifest.toml)


def addon_package() -> ModuleType:
    """The repository root imported as a package.

    Uses ``blender_env``'s importer when pytest has loaded it, else reuses a package
    already imported from the repository root under any name, else imports it as
    ``fit_to_target`` through a symlink in a temporary directory (the checkout's
    directory name need not be a valid package name).
    """
    env = sys.modules.get("blender_env")
    if env is not None:
        return env.import_addon_package()
    init = (REPO_ROOT / "__init__.py").resolve()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if "." not in name and file and Path(file).resolve() == init:
            return module
    link_dir = Path(tempfile.mkdtemp(prefix="fit_to_target_pkg_"))
    (link_dir / PACKAGE_NAME).symlink_to(REPO_ROOT, target_is_directory=True)
    sys.path.insert(0, str(link_dir))
    return importlib.import_module(PACKAGE_NAME)


_PACKAGE = addon_package()
cloth_scene = importlib.import_module(f"{_PACKAGE.__name__}.addon.models.blender_cloth.scene_model")
_mesh_module = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.mesh")
_params_module = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.models.blender_cloth.params")
ClothMesh = _mesh_module.ClothMesh
ClothParams = _params_module.ClothParams
grid_mesh = _mesh_module.grid_mesh


def reset_scene() -> bpy.types.Scene:
    """An empty factory-settings scene (invalidates every previously held bpy reference)."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    return bpy.context.scene


def make_cloth_object(
    mesh: ClothMesh,
    name: str = "Cloth",
    pin_weights: np.ndarray | None = None,
    settings: dict | None = None,
    location: Iterable[float] = (0.0, 0.0, 0.0),
    frame_end: int = 250,
) -> bpy.types.Object:
    """A mesh object built with ``Mesh.from_pydata`` (keeps polygon and corner order) with a
    cloth modifier; cache from frame 1 to ``frame_end``.

    ``pin_weights`` (default: ``mesh.pin_weights``) go into a vertex group "pin" (only
    weights > 0) which becomes the modifier's pin group. ``settings`` maps
    ``ClothSettings`` field names to values.
    """
    polygons = [p.tolist() for p in mesh.polygons()]
    face_edges = {frozenset((p[k], p[k - 1])) for p in polygons for k in range(len(p))}
    loose = [tuple(e) for e in mesh.edges.tolist() if frozenset(e) not in face_edges]

    me = bpy.data.meshes.new(name)
    me.from_pydata(np.asarray(mesh.vertices, dtype=np.float64).tolist(), loose, polygons)
    ob = bpy.data.objects.new(name, me)
    ob.location = tuple(location)
    bpy.context.scene.collection.objects.link(ob)

    weights = np.asarray(mesh.pin_weights if pin_weights is None else pin_weights, dtype=np.float64)
    if weights.shape != (len(mesh.vertices),):
        raise ValueError(f"pin_weights must have shape ({len(mesh.vertices)},), got {weights.shape}")
    mod = ob.modifiers.new("Cloth", "CLOTH")
    if np.any(weights > 0.0):
        group = ob.vertex_groups.new(name="pin")
        for w in np.unique(weights[weights > 0.0]):
            group.add(np.flatnonzero(weights == w).tolist(), float(w), "REPLACE")
        mod.settings.vertex_group_mass = "pin"
    for key, value in (settings or {}).items():
        if not hasattr(mod.settings, key):
            raise AttributeError(f"ClothSettings has no field {key!r}")
        setattr(mod.settings, key, value)
    mod.point_cache.frame_start = 1
    mod.point_cache.frame_end = frame_end
    return ob


def world_positions(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None = None) -> np.ndarray:
    """(N, 3) world positions of the evaluated mesh (the cloth result at the current frame)."""
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    ob_eval = ob.evaluated_get(depsgraph)
    me = ob_eval.data
    co = np.empty(len(me.vertices) * 3, dtype=np.float32)
    me.vertices.foreach_get("co", co)
    m = np.array(ob_eval.matrix_world, dtype=np.float64)
    return co.reshape(-1, 3).astype(np.float64) @ m[:3, :3].T + m[:3, 3]


def run_blender_cloth(ob: bpy.types.Object, frame_end: int, frame_start: int | None = None) -> np.ndarray:
    """Blender's cloth result, (frame_end - start + 1, N, 3) world positions.

    Steps every frame from the cache start (skipping frames would run one big step) and
    reads the evaluated mesh. Index 0 is the start frame, the rest state. ``frame_start``,
    when given, becomes the cache start; the cache end is extended to ``frame_end`` if
    needed.
    """
    mod = cloth_scene.find_cloth_modifier(ob)
    if mod is None:
        raise ValueError(f"{ob.name} has no cloth modifier")
    if frame_start is not None and mod.point_cache.frame_start != frame_start:
        mod.point_cache.frame_start = frame_start
    if mod.point_cache.frame_end < frame_end:
        mod.point_cache.frame_end = frame_end
    start = mod.point_cache.frame_start
    scene = bpy.context.scene
    depsgraph = bpy.context.evaluated_depsgraph_get()
    frames = []
    for f in range(start, frame_end + 1):
        scene.frame_set(f)
        frames.append(world_positions(ob, depsgraph))
    return np.stack(frames)


def _row_coordinates(mesh: ClothMesh, axis: int, decimals: int = 9) -> np.ndarray:
    return np.round(np.asarray(mesh.vertices)[:, axis], decimals)


def pin_row_weights(mesh: ClothMesh, rows: int = 1, side: str = "+y") -> np.ndarray:
    """Weights 1.0 on the outermost ``rows`` rows of vertices on ``side`` ("+y", "-y", "+x",
    "-x"), 0 elsewhere."""
    if side not in ("+x", "-x", "+y", "-y"):
        raise ValueError(f"side must be one of +x, -x, +y, -y, got {side!r}")
    coord = _row_coordinates(mesh, "xy".index(side[1]))
    values = np.unique(coord)
    chosen = values[-rows:] if side[0] == "+" else values[:rows]
    return np.isin(coord, chosen).astype(np.float64)


def corner_pin_weights(mesh: ClothMesh) -> np.ndarray:
    """Weights 1.0 on the four corners of the mesh's XY bounding box, 0 elsewhere."""
    x, y = _row_coordinates(mesh, 0), _row_coordinates(mesh, 1)
    on_x = (x == x.min()) | (x == x.max())
    on_y = (y == y.min()) | (y == y.max())
    return (on_x & on_y).astype(np.float64)


def set_linear_interpolation(id_data: bpy.types.ID) -> None:
    """Make every keyframe of ``id_data``'s action linear (Blender 4.4+ layered actions)."""
    from bpy_extras import anim_utils

    channelbag = anim_utils.action_get_channelbag_for_slot(
        id_data.animation_data.action, id_data.animation_data.action_slot
    )
    for fcurve in channelbag.fcurves:
        for point in fcurve.keyframe_points:
            point.interpolation = "LINEAR"
        fcurve.update()


def move_and_turn(ob: bpy.types.Object, frame_end: int = 20) -> None:
    """Keyframe ``ob`` to slide 0.6 m in x, rise 0.3 m and turn 0.8 rad about z between
    frame 1 and ``frame_end``, so its pinned vertices drag the cloth; leaves frame 1 current."""
    ob.keyframe_insert("location", frame=1)
    ob.keyframe_insert("rotation_euler", frame=1)
    ob.location = (0.6, 0.0, 0.3)
    ob.rotation_euler = (0.0, 0.0, 0.8)
    ob.keyframe_insert("location", frame=frame_end)
    ob.keyframe_insert("rotation_euler", frame=frame_end)
    bpy.context.scene.frame_set(1)


def ramp_weights(mesh: ClothMesh) -> np.ndarray:
    """Vertex-group weights from 0 to 1 across the sheet in x, with every seventh vertex left
    out of the group (weight 0 there, as Blender gives a vertex outside the group)."""
    x = mesh.vertices[:, 0]
    weights = (x - x.min()) / np.ptp(x)
    weights[::7] = 0.0
    return weights


def add_cloth_group(ob: bpy.types.Object, name: str, weights: np.ndarray, setting: str) -> None:
    """A vertex group ``name`` holding the vertices of weight > 0, set as the cloth's ``setting``
    (e.g. ``vertex_group_shrink``)."""
    group = ob.vertex_groups.new(name=name)
    for index in np.flatnonzero(weights > 0.0):
        group.add([int(index)], float(weights[index]), "REPLACE")
    setattr(cloth_scene.find_cloth_modifier(ob).settings, setting, name)


def relative_deviation(ours: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """(max |ours - reference| / largest displacement of the reference, that displacement)."""
    displacement = float(np.abs(reference - reference[0]).max())
    return float(np.abs(ours - reference).max()) / displacement, displacement


def model_deviation(
    mesh: ClothMesh, params: ClothParams, reference: np.ndarray, goals: np.ndarray | None = None
) -> tuple[float, float]:
    """Our model (CPU, float64) with ``params`` over the frames of ``reference`` (Blender's run
    from frame 1) against it: ``relative_deviation``."""
    simulator = addon_package().warp_core.ClothSimulator(mesh, params, device="cpu")
    return relative_deviation(simulator.simulate(len(reference), None, goals), reference)


def replay_rmse(ob: bpy.types.Object, reference: np.ndarray, frames: list[int]) -> float:
    """RMSE over ``frames`` of Blender's cloth re-simulated now against ``reference``."""
    replay = run_blender_cloth(ob, max(frames))
    errors = np.concatenate([np.linalg.norm(replay[f - 1] - reference[f - 1], axis=1) for f in frames])
    return float(np.sqrt(np.mean(errors**2)))


def export_from_blender(ob: bpy.types.Object) -> tuple[ClothMesh, ClothParams]:
    """The object's cloth input mesh and settings as exported by the add-on."""
    mod = cloth_scene.find_cloth_modifier(ob)
    if mod is None:
        raise ValueError(f"{ob.name} has no cloth modifier")
    depsgraph = bpy.context.evaluated_depsgraph_get()
    mesh = cloth_scene.export_cloth_mesh(ob, depsgraph)
    return mesh, cloth_scene.export_cloth_params(mod, bpy.context.scene)


def fit_tension_bending(ob: bpy.types.Object, frames: list[int]) -> tuple[Any, float]:
    """Tension (compression tied) and bending fitted from Blender's defaults to Blender's own
    run of ``ob`` (its modifier holds the true values) at ``frames``, the input mesh sampled
    as pin goals every frame; then the fitted values written to the modifier and Blender run
    again: (the fit result, the replay's RMSE in metres)."""
    fit_module = addon_package().warp_core.fit
    scene = bpy.context.scene
    reference = run_blender_cloth(ob, max(frames))
    scene.frame_set(1)
    mesh, params = export_from_blender(ob)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    goals = cloth_scene.sample_pin_goals(ob, depsgraph, scene, list(range(1, max(frames) + 1)))
    start = params.replace(tension_stiffness=15.0, compression_stiffness=15.0, bending_stiffness=0.5)
    problem = fit_module.FitProblem(
        mesh,
        start,
        [fit_module.Target(f, reference[f - 1]) for f in frames],
        free_parameters=["tension_stiffness", "bending_stiffness"],
        ties={"compression_stiffness": "tension_stiffness"},
        goals=goals,
    )
    result = fit_module.fit(problem, fit_module.FitSettings())
    cloth_scene.set_modifier_values(cloth_scene.find_cloth_modifier(ob), dict(result.params))
    return result, replay_rmse(ob, reference, frames)
