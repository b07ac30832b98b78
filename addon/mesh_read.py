"""Scene data -> plain arrays, for any model: world positions, triangles, a mesh's polygons
and edges in Blender's order, vertex-group weights, and a modifier's input mesh.

Thin bpy side, no physics. Everything is in world space (metres).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import bpy
import numpy as np

from ..warp_core.mesh import ClothMesh
from .scene.steps import Step, StepGenerator


def object_matrix(ob_eval: bpy.types.Object) -> np.ndarray:
    return np.array(ob_eval.matrix_world, dtype=np.float64)


def world_positions(points: Any, matrix: np.ndarray) -> np.ndarray:
    """(N, 3) float64 world positions of ``points`` (a mesh's ``vertices`` or a shape key's
    ``data``: anything with a ``co`` per item) under the 4x4 ``matrix``."""
    co = np.empty(len(points) * 3, dtype=np.float32)
    points.foreach_get("co", co)
    with np.errstate(invalid="ignore", over="ignore"):  # a non-finite point is refused by name later
        return co.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]


def triangles(me: bpy.types.Mesh) -> np.ndarray:
    tris = np.empty(len(me.loop_triangles) * 3, dtype=np.int32)
    me.loop_triangles.foreach_get("vertices", tris)
    return tris.reshape(-1, 3)


def read_mesh(me: bpy.types.Mesh, matrix: np.ndarray, pin_weights: np.ndarray) -> ClothMesh:
    """World-space vertices, polygons in their loop order and edges in Blender's order (both
    decide the order of Blender's springs)."""
    vertices = world_positions(me.vertices, matrix)

    n_poly = len(me.polygons)
    loop_start = np.empty(n_poly, dtype=np.int32)
    loop_total = np.empty(n_poly, dtype=np.int32)
    me.polygons.foreach_get("loop_start", loop_start)
    me.polygons.foreach_get("loop_total", loop_total)
    corner_vert = np.empty(len(me.loops), dtype=np.int32)
    me.loops.foreach_get("vertex_index", corner_vert)
    offsets = np.zeros(n_poly + 1, dtype=np.int32)
    np.cumsum(loop_total, out=offsets[1:])
    # corners of polygon p are loops loop_start[p] .. loop_start[p] + loop_total[p] - 1
    corner = np.repeat(loop_start - offsets[:-1], loop_total) + np.arange(offsets[-1], dtype=np.int32)
    polygon_vertices = corner_vert[corner]

    edges = np.empty(len(me.edges) * 2, dtype=np.int32)
    me.edges.foreach_get("vertices", edges)
    return ClothMesh(vertices, polygon_vertices, offsets, edges.reshape(-1, 2), pin_weights)


def vertex_group_weights(me: bpy.types.Mesh, ob: bpy.types.Object, group: str) -> np.ndarray:
    """Each vertex's weight in the vertex group called ``group`` (0 outside it, or without one)."""
    weights = np.zeros(len(me.vertices), dtype=np.float64)
    index = ob.vertex_groups.find(group) if group else -1
    if index < 0:
        return weights
    # Vertex-group weights have no foreach_get access; this runs once per export.
    for v in me.vertices:
        for g in v.groups:
            if g.group == index:
                weights[v.index] = g.weight
                break
    return weights


def _visibility_flag(depsgraph: bpy.types.Depsgraph) -> str:
    return "show_render" if depsgraph.mode == "RENDER" else "show_viewport"


def input_is_object_data(
    ob: bpy.types.Object, mod: bpy.types.Modifier, depsgraph: bpy.types.Depsgraph
) -> bool:
    """True when no shape key and no enabled modifier sits above ``mod``."""
    flag = _visibility_flag(depsgraph)
    above = ob.modifiers[: ob.modifiers.find(mod.name)]
    return ob.data.shape_keys is None and not any(getattr(m, flag) for m in above)


@contextmanager
def modifier_input_stack(
    ob: bpy.types.Object, mod: bpy.types.Modifier, depsgraph: bpy.types.Depsgraph
) -> Iterator[None]:
    """Evaluate ``ob`` with ``mod`` and everything below it disabled.

    The Python API only gives the final result of a modifier stack. With the modifier and
    the modifiers after it switched off, that final result is the mesh the modifier
    receives: the geometry a simulation is built from at its start frame and the pin goals
    at every frame, not the simulated output nor a subdivided copy of it.
    Note: any change to the stack marks an unbaked simulation cache outdated (a baked one
    is kept), exactly as when a user toggles a modifier.
    """
    flag = _visibility_flag(depsgraph)
    tail = list(ob.modifiers)[ob.modifiers.find(mod.name) :]
    saved = [bool(getattr(m, flag)) for m in tail]
    try:
        for m in tail:
            if getattr(m, flag):
                setattr(m, flag, False)
        depsgraph.update()
        yield
    finally:
        for m, was in zip(tail, saved, strict=True):
            if bool(getattr(m, flag)) != was:
                setattr(m, flag, was)
        depsgraph.update()


def sample_modifier_input_steps(
    ob: bpy.types.Object,
    mod: bpy.types.Modifier,
    depsgraph: bpy.types.Depsgraph,
    scene: bpy.types.Scene,
    frames: Sequence[float],
    on_frame: Callable[[int, float], None] | None = None,
) -> StepGenerator[tuple[np.ndarray, np.ndarray]]:
    """World positions (F, N, 3) of the mesh entering ``mod`` at each of ``frames`` (the
    object moved by its transform animation, parents, shape keys and every modifier above
    ``mod``: the pin goals of a simulation), and the object's world matrices (F, 4, 4), one
    frame per step (``scene/steps.py``): a ``Step`` after each frame, "frame 37 of 250" (the
    scene's frame numbers).

    ``on_frame(k, frame)`` is called with the scene at ``frames[k]``. ``mod`` is off during
    the pass, so stepping through the frames never runs Blender's own solver. The scene
    frame and the modifier flags are restored, also when the steps are closed halfway."""
    frame, subframe = scene.frame_current, scene.frame_subframe
    goals: list[np.ndarray] = []
    matrices: list[np.ndarray] = []
    last = f"{frames[-1]:g}" if len(frames) else ""
    with modifier_input_stack(ob, mod, depsgraph):
        try:
            for k, f in enumerate(frames):
                whole = math.floor(f)
                scene.frame_set(int(whole), subframe=float(f - whole))
                ob_eval = ob.evaluated_get(depsgraph)
                matrix = object_matrix(ob_eval)
                goals.append(world_positions(ob_eval.data.vertices, matrix))
                matrices.append(matrix)
                if on_frame is not None:
                    on_frame(k, f)
                yield Step(k + 1, len(frames), f"frame {f:g} of {last}")
        finally:
            # back at the caller's frame before the modifier is on again: switched on at the
            # pass's last frame, a cloth starts from there as if the timeline jumped, and
            # Blender's own run from the cache start then falls differently (and through
            # its colliders) until a setting of the cloth changes
            scene.frame_set(frame, subframe=subframe)
    n = len(goals[0]) if goals else 0
    if any(len(g) != n for g in goals):
        raise ValueError(
            f"{ob.name}: the mesh entering the {mod.name} modifier changes its vertex count between frames"
        )
    if not goals:
        return np.zeros((0, n, 3)), np.zeros((0, 4, 4))
    return np.stack(goals), np.stack(matrices)
