"""Scenes where Blender's cloth meets itself among Collision objects: a sheet folding onto
itself on the ground, a pleated curtain pushed together by a moving plate, a sleeve
collapsing on the ground.

Each builder starts from an empty scene and returns (scene, cloth object): Blender's
default cloth settings with Self Collisions on at their defaults (distance 15 mm,
friction 5, no clamp, collision quality 2), cache from frame 1 to ``FRAMES``. The
colliders keep the Collision modifier's defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import bpy
import numpy as np
from blender_ref import ClothMesh, grid_mesh, make_cloth_object, reset_scene, set_linear_interpolation
from collision_scenes import FRAMES, _collider


def _ground() -> bpy.types.Object:
    """A 4 m Collision plane at z = 0."""
    bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, 0.0))
    ground = _collider(bpy.context.object)
    ground.name = "Ground"
    return ground


def _self_colliding_cloth(mesh: ClothMesh, pin_weights: np.ndarray | None = None) -> bpy.types.Object:
    ob = make_cloth_object(mesh, pin_weights=pin_weights, frame_end=FRAMES)
    ob.modifiers["Cloth"].collision_settings.use_self_collision = True
    return ob


def _finish(ob: bpy.types.Object) -> tuple[bpy.types.Scene, bpy.types.Object]:
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    scene.frame_set(1)
    return scene, ob


# 15 vertices across, so that a column lies on the fold; 7 cm up, so that the sheet falls
# onto the ground (the cloth's and the ground's distances, 15 + 20 mm) before it folds
FOLD = dict(nx=15, ny=8, size_x=1.0, size_y=0.5, angle=120.0, height=0.07)


def folded_sheet() -> ClothMesh:
    """A 1 x 0.5 m sheet (15 x 8 vertices) ``height`` above the ground, its +x half turned
    ``angle`` degrees up about the middle column (y axis), so that it leans back over the
    -x half. Built folded, so the fold is also the bending springs' rest angle."""
    mesh = grid_mesh(FOLD["nx"], FOLD["ny"], FOLD["size_x"], FOLD["size_y"])
    v = mesh.vertices.copy()
    a = math.radians(FOLD["angle"])
    x = np.maximum(v[:, 0], 0.0)
    v[:, 0] = np.where(v[:, 0] > 0.0, x * math.cos(a), v[:, 0])
    v[:, 2] = x * math.sin(a) + FOLD["height"]
    return ClothMesh.from_polygons(v, [p.tolist() for p in mesh.polygons()])


def sheet_folds_on_ground() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """``folded_sheet`` over a ground plane: the raised half falls over onto the lying one."""
    reset_scene()
    _ground()
    return _finish(_self_colliding_cloth(folded_sheet()))


CURTAIN = dict(nx=16, nz=10, width=1.0, height=0.8, top=1.0, pleat=0.03)
# the plate: thickness in x, bottom and top (below the pinned row), x at frames 1 and FRAMES
PLATE = dict(thickness=0.05, bottom=0.1, top=0.9, start_x=0.56, end_x=0.0)
# the walls stand this far in front of and behind the curtain: with the cloth's and the
# colliders' distances (15 + 20 mm) they leave the pleats (+-30 mm) just room to stand in,
# so the plate folds them up against each other rather than shoving the curtain aside
WALL = 0.07


def pleated_curtain() -> ClothMesh:
    """A curtain of ``width`` x ``height`` in the xz plane hanging from z = ``top``, its
    columns alternately ``pleat`` in front of and behind y = 0 (zigzag pleats, the rest
    shape), its top row pinned."""
    nx, nz = CURTAIN["nx"], CURTAIN["nz"]
    mesh = grid_mesh(nx, nz, CURTAIN["width"], CURTAIN["height"])
    v = mesh.vertices.copy()
    column = np.arange(mesh.vertex_count) % nx
    z = v[:, 1] + CURTAIN["top"] - CURTAIN["height"] / 2
    v[:, 1] = np.where(column % 2 == 0, CURTAIN["pleat"], -CURTAIN["pleat"])
    v[:, 2] = z
    weights = (np.arange(mesh.vertex_count) // nx == nz - 1).astype(np.float64)
    return ClothMesh.from_polygons(v, [p.tolist() for p in mesh.polygons()], pin_weights=weights)


def curtain_pushed_together() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """``pleated_curtain`` between two still walls ``WALL`` in front of and behind it, and
    a plate across that channel beside the curtain's +x edge that slides half the curtain's
    width in -x from frame 1 to ``FRAMES`` (linear keys), pushing the pleats together."""
    reset_scene()
    for side in (1.0, -1.0):
        # a plane turned upright, its normal (the side it keeps the cloth on) to the curtain
        bpy.ops.mesh.primitive_plane_add(
            size=2.0, location=(0.0, side * WALL, 0.5), rotation=(side * math.pi / 2, 0.0, 0.0)
        )
        _collider(bpy.context.object).name = "Front" if side > 0 else "Back"
    middle = (PLATE["bottom"] + PLATE["top"]) / 2
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(PLATE["start_x"], 0.0, middle))
    plate = _collider(bpy.context.object)
    plate.name = "Plate"
    plate.scale = (PLATE["thickness"], 2.0 * WALL, PLATE["top"] - PLATE["bottom"])
    plate.keyframe_insert("location", frame=1)
    plate.location.x = PLATE["end_x"]
    plate.keyframe_insert("location", frame=FRAMES)
    set_linear_interpolation(plate)
    return _finish(_self_colliding_cloth(pleated_curtain()))


# 10 cm up, so that it lands on the ground: started 3 cm up, inside the cloth's and the
# ground's distances (35 mm), the model was 9.4e-3 of the motion from Blender, against
# 4.1e-3 from here
SLEEVE = dict(around=12, rings=12, radius=0.15, length=0.8, height=0.1)


def sleeve() -> ClothMesh:
    """An open tube (no caps) of ``radius`` and ``length`` along x, ``around`` vertices
    round each of its ``rings`` rings, its lowest line ``height`` above the ground."""
    n, m, r = SLEEVE["around"], SLEEVE["rings"], SLEEVE["radius"]
    phi = 2.0 * math.pi * (np.arange(n) + 0.5) / n  # no vertex straight down or up
    xs = np.linspace(-SLEEVE["length"] / 2, SLEEVE["length"] / 2, m)
    low = r * math.cos(math.pi / n)
    v = np.array([(x, r * math.sin(p), low + SLEEVE["height"] - r * math.cos(p)) for x in xs for p in phi])
    polygons = [
        [k * n + i, k * n + (i + 1) % n, (k + 1) * n + (i + 1) % n, (k + 1) * n + i]
        for k in range(m - 1)
        for i in range(n)
    ]
    return ClothMesh.from_polygons(v, polygons)


def sleeve_collapses_on_ground() -> tuple[bpy.types.Scene, bpy.types.Object]:
    """``sleeve`` lying on a ground plane: its upper wall falls onto its lower one."""
    reset_scene()
    _ground()
    return _finish(_self_colliding_cloth(sleeve()))


SCENES: dict[str, Callable[[], tuple[bpy.types.Scene, bpy.types.Object]]] = {
    "sheet_folds_on_ground": sheet_folds_on_ground,
    "curtain_pushed_together": curtain_pushed_together,
    "sleeve_collapses_on_ground": sleeve_collapses_on_ground,
}
