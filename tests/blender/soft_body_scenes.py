"""Soft-body scenes for the add-on tests: a mesh with a Soft Body modifier fitted with the
``soft_body`` model, colliders, and targets made by the model itself or by Blender's own
Soft Body solver."""

from __future__ import annotations

import bpy
import numpy as np
from addon_scenes import add_target_meshes, addon_module
from blender_ref import world_positions

soft_scene = addon_module("models.soft_body.scene_model")

FRAME_END = 30


def soft_object(
    kind: str = "cube",
    name: str = "Jelly",
    size: float = 0.4,
    location: tuple[float, float, float] = (0.0, 0.0, 0.6),
    cells: int = 4,
    ground: bool = True,
    frame_end: int = FRAME_END,
) -> bpy.types.Object:
    """A cube (or Suzanne, ``kind="monkey"``) with a Soft Body modifier (Goal off) and the
    soft-body model chosen in its fit settings, dropped from ``location``."""
    if kind == "monkey":
        bpy.ops.mesh.primitive_monkey_add(size=size, location=location)
    else:
        bpy.ops.mesh.primitive_cube_add(size=size, location=location)
    ob = bpy.context.active_object
    ob.name = name
    mod = ob.modifiers.new("Softbody", "SOFT_BODY")
    mod.settings.use_goal = False
    mod.point_cache.frame_start = 1
    mod.point_cache.frame_end = frame_end
    bpy.context.scene.frame_start = 1
    bpy.context.scene.frame_end = frame_end
    ob.fit_to_target.model = "SOFT_BODY"
    s = ob.fit_to_target_soft_body
    s.lattice_cells = cells
    s.ground = ground
    s.ground_height = 0.0
    return ob


def collider_box(
    name: str = "Table", size: float = 0.5, location=(0.25, 0.0, 0.15), rotation=(0.0, 0.3, 0.0)
) -> bpy.types.Object:
    """A box with a Collision modifier (tilted, so the body lands on an edge and slides off)."""
    bpy.ops.mesh.primitive_cube_add(size=size, location=location, rotation=rotation)
    ob = bpy.context.active_object
    ob.name = name
    ob.modifiers.new("Collision", "COLLISION")
    return ob


def add_targets(ob: bpy.types.Object, trajectory: np.ndarray, frames: list[int]) -> list[bpy.types.Object]:
    """One world-space target mesh per frame from ``trajectory`` (index 0 = cache start)."""
    start = soft_scene.find_soft_body_modifier(ob).point_cache.frame_start
    return add_target_meshes(ob, trajectory, frames, start)


def blender_soft_body(ob: bpy.types.Object, frame_end: int) -> np.ndarray:
    """Blender's own Soft Body result, (frames, N, 3) world positions from the cache start."""
    mod = soft_scene.find_soft_body_modifier(ob)
    scene = bpy.context.scene
    depsgraph = bpy.context.evaluated_depsgraph_get()
    out = []
    for f in range(mod.point_cache.frame_start, frame_end + 1):
        scene.frame_set(f)
        out.append(world_positions(ob, depsgraph))
    scene.frame_set(mod.point_cache.frame_start)
    return np.stack(out)


def select_only(ob: bpy.types.Object) -> None:
    for o in bpy.context.view_layer.objects:
        o.select_set(False)
    ob.select_set(True)
    bpy.context.view_layer.objects.active = ob
