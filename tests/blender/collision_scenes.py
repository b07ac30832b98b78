"""Scenes where Blender's cloth meets Collision objects, Blender's own result in each, and the
inputs the add-on reads from them (through its real reading path).

Each builder starts from an empty scene and returns (scene, cloth object): a 12 x 12 sheet
of 1 m with Blender's default cloth settings unless stated, cache from frame 1 to ``FRAMES``.
The colliders keep the Collision modifier's defaults (Single Sided on).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import bpy
import numpy as np
from addon_scenes import addon_module
from blender_ref import (
    ClothMesh,
    ClothParams,
    grid_mesh,
    make_cloth_object,
    pin_row_weights,
    reset_scene,
    set_linear_interpolation,
)
from blender_ref import run_blender_cloth as _run_from_cache_start

FRAMES = 60
SHEET = dict(nx=12, ny=12, size_x=1.0, size_y=1.0)
registry = addon_module("models.registry")
steps = addon_module("scene.steps")


def _collider(ob: bpy.types.Object) -> bpy.types.Object:
    """``ob`` with a Collision modifier, Blender's defaults."""
    ob.modifiers.new("Collision", "COLLISION")
    return ob


def _cloth(z: float, pins: bool = False) -> bpy.types.Object:
    mesh = grid_mesh(SHEET["nx"], SHEET["ny"], SHEET["size_x"], SHEET["size_y"])
    weights = pin_row_weights(mesh, rows=1, side="+y") if pins else np.zeros(mesh.vertex_count)
    return make_cloth_object(mesh, pin_weights=weights, location=(0.0, 0.0, z), frame_end=FRAMES)


def _finish(ob: bpy.types.Object) -> tuple[bpy.types.Scene, bpy.types.Object]:
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    scene.frame_set(1)
    return scene, ob


def sheet_on_cube() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """A sheet 0.3 m above a cube of 0.6 m (smaller than the sheet, so it drapes over the
    four edges)."""
    reset_scene()
    bpy.ops.mesh.primitive_cube_add(size=0.6, location=(0.0, 0.0, 0.0))
    _collider(bpy.context.object).name = "Cube"
    return _finish(_cloth(0.6))


def sheet_lands_on_cube() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """A sheet 0.2 m above a cube of 1.4 m (larger than the sheet): it lands flat on the top."""
    reset_scene()
    bpy.ops.mesh.primitive_cube_add(size=1.4, location=(0.0, 0.0, 0.0))
    _collider(bpy.context.object).name = "Cube"
    return _finish(_cloth(0.9))


def drape_on_sphere() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """A sheet falling from 0.3 m above a UV sphere of radius 0.5 (32 segments, 16 rings)."""
    reset_scene()
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(0.0, 0.0, 0.0))
    _collider(bpy.context.object).name = "Sphere"
    return _finish(_cloth(0.8))


def moving_plane() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """A sheet 5 cm above a 2 m plane that rises 0.3 m and turns 20 degrees about z from
    frame 1 to ``FRAMES`` (linear keys), lifting the sheet and dragging it round by friction."""
    reset_scene()
    bpy.ops.mesh.primitive_plane_add(size=2.0, location=(0.0, 0.0, 0.0))
    plane = _collider(bpy.context.object)
    plane.name = "Plane"
    plane.keyframe_insert("location", frame=1)
    plane.keyframe_insert("rotation_euler", frame=1)
    plane.location = (0.0, 0.0, 0.3)
    plane.rotation_euler = (0.0, 0.0, math.radians(20.0))
    plane.keyframe_insert("location", frame=FRAMES)
    plane.keyframe_insert("rotation_euler", frame=FRAMES)
    set_linear_interpolation(plane)
    return _finish(_cloth(0.05))


def deforming_collider() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """A sheet pinned along its +y edge, 10 cm above a 2 m grid (16 x 16 faces) whose shape
    key "bump" (a 0.35 m hump under the sheet's middle) goes from 0 to 1 over the frames."""
    reset_scene()
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=16, y_subdivisions=16, size=2.0)
    ground = _collider(bpy.context.object)
    ground.name = "Ground"
    ground.shape_key_add(name="Basis")
    bump = ground.shape_key_add(name="bump", from_mix=False)
    for point in bump.data:
        r2 = point.co.x**2 + point.co.y**2
        point.co.z += 0.35 * math.exp(-r2 / 0.25**2)
    bump.value = 0.0
    bump.keyframe_insert("value", frame=1)
    bump.value = 1.0
    bump.keyframe_insert("value", frame=FRAMES)
    set_linear_interpolation(ground.data.shape_keys)
    return _finish(_cloth(0.1, pins=True))


def pinned_over_sphere() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """A sheet pinned along its +y edge, 10 cm above a still UV sphere of radius 0.5 whose
    top is 5 cm below it: the free part swings down onto the sphere and hangs over it."""
    reset_scene()
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(0.0, 0.0, -0.45))
    _collider(bpy.context.object).name = "Sphere"
    return _finish(_cloth(0.1, pins=True))


def drape_over_table() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """A sheet 8 cm above a table top of 0.7 x 0.7 m (a box 1 m high): it lands and its
    edges drape over the table's."""
    reset_scene()
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, -0.5))
    bpy.context.object.scale = (0.7, 0.7, 1.0)
    _collider(bpy.context.object).name = "Table"
    return _finish(_cloth(0.08))


def drop_on_sphere() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """A sheet 10 cm above the top of a UV sphere of radius 0.5: it lands on the top and
    slides off round it."""
    reset_scene()
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(0.0, 0.0, 0.0))
    _collider(bpy.context.object).name = "Sphere"
    return _finish(_cloth(0.6))


def deforming_collider_quality_1() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """``deforming_collider`` at collision quality 1."""
    scene, ob = deforming_collider()
    registry.scene_model("blender_cloth").find_modifier(ob).collision_settings.collision_quality = 1
    return scene, ob


SCENES: dict[str, Callable[[], tuple[bpy.types.Scene, bpy.types.Object]]] = {
    "sheet_lands_on_cube": sheet_lands_on_cube,
    "sheet_on_cube": sheet_on_cube,
    "drop_on_sphere": drop_on_sphere,
    "drape_on_sphere": drape_on_sphere,
    "moving_plane": moving_plane,
    "deforming_collider": deforming_collider,
    "pinned_over_sphere": pinned_over_sphere,
    "deforming_collider_quality_1": deforming_collider_quality_1,
}


def run_blender_cloth(scene: bpy.types.Scene, ob: bpy.types.Object, frames: int = FRAMES) -> np.ndarray:
    """Blender's cloth over ``frames`` frames from the cache start, (frames, N, 3) world space
    (index 0: the start frame, the rest state).

    Every frame is stepped in order from the cache start: each Collision modifier keeps the
    mesh of the frame it last saw and moves the collider from there to the new frame's. Run
    it on a freshly built scene: once the timeline has jumped past the start with the cloth
    on (frame 1 -> 30 -> 1), Blender's next run from the start falls differently (faster,
    and through its colliders) until a cloth setting changes.
    """
    mod = registry.scene_model("blender_cloth").find_modifier(ob)
    start = int(mod.point_cache.frame_start)
    if bpy.context.scene != scene:
        raise ValueError("run the cloth of the context's scene")
    return _run_from_cache_start(ob, start + frames - 1)


def export_problem_inputs(
    scene: bpy.types.Scene, ob: bpy.types.Object, frames: int = FRAMES
) -> tuple[ClothMesh, ClothParams, np.ndarray]:
    """(mesh, params with the colliders, goals (frames, N, 3)) as the add-on's fit reads them
    (``prepare_fit``'s steps: the model's geometry, its goal pass with the collider sampler,
    its settings), over ``frames`` frames from the cache start. The scene frame is restored."""
    model = registry.scene_model("blender_cloth")
    mod = model.find_modifier(ob)
    start = model.cache_frame_range(mod)[0]
    depsgraph = bpy.context.evaluated_depsgraph_get()
    sampler = model.frame_sampler(scene, ob, mod, depsgraph)
    saved = scene.frame_current, scene.frame_subframe
    try:
        scene.frame_set(start)
        mesh = model.read_geometry(ob, depsgraph)
        with sampler:
            sampled = list(range(start, start + frames))
            goals, _ = steps.run_blocking(model.sample_goals_steps(ob, depsgraph, scene, sampled, sampler))
    finally:
        scene.frame_set(saved[0], subframe=saved[1])
    return mesh, sampler.settings(model.read_settings(mod, scene)), goals


def blender_nudged(name: str, nudge_m: float = 1e-6) -> np.ndarray:
    """Blender's result for the scene ``name`` with the cloth started ``nudge_m`` higher: how
    far Blender's own cloth moves under a change no scene setting could make."""
    scene, ob = SCENES[name]()
    ob.location.z += nudge_m
    return run_blender_cloth(scene, ob)


@functools.cache
def collision_case(name: str) -> tuple[ClothMesh, ClothParams, np.ndarray, np.ndarray]:
    """(mesh, params, goals, Blender's positions (FRAMES, N, 3)) of the scene ``name`` (a key
    of ``SCENES``): what a comparison of the model with Blender's cloth needs. Built once per
    process; the scene is left built (the next test's empty scene replaces it)."""
    scene, ob = SCENES[name]()
    blender = run_blender_cloth(scene, ob)
    mesh, params, goals = export_problem_inputs(scene, ob)
    return mesh, params, goals, blender
