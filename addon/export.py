"""Scene data -> plain arrays: the cloth modifier's input mesh, pin goals and settings.

Thin bpy side, no physics. Everything is returned in world space (metres), the space
Blender's cloth solver works in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import bpy
import numpy as np

from ..warp_core.mesh import ClothMesh
from ..warp_core.models.blender_cloth.params import CLOTH_SETTINGS_FIELDS, ClothParams


def find_cloth_modifier(ob: bpy.types.Object) -> bpy.types.ClothModifier | None:
    """The first cloth modifier of ``ob``, or None."""
    for mod in getattr(ob, "modifiers", ()):
        if mod.type == "CLOTH":
            return mod
    return None


def cache_frame_range(mod: bpy.types.ClothModifier) -> tuple[int, int]:
    """(start, end) of the modifier's point cache: the start frame is the rest state."""
    return int(mod.point_cache.frame_start), int(mod.point_cache.frame_end)


def export_cloth_params(mod: bpy.types.ClothModifier, scene: bpy.types.Scene) -> ClothParams:
    """The modifier's ``ClothSettings`` as :class:`ClothParams`.

    ``gravity`` is what the solver applies before its internal 0.001 factor:
    ``scene.gravity * effector_weights.gravity`` when the scene's gravity is on, else 0.
    (``ClothSettings.gravity`` is never read by Blender's solver.)
    """
    s = mod.settings
    if scene.use_gravity:
        w = float(s.effector_weights.gravity)
        gravity = tuple(float(g) * w for g in scene.gravity)
    else:
        gravity = (0.0, 0.0, 0.0)
    values = {name: getattr(s, name) for name in CLOTH_SETTINGS_FIELDS}
    values["quality"] = int(values["quality"])
    values["time_scale"] = float(values["time_scale"])
    values["bending_model"] = str(values["bending_model"])
    return ClothParams(**values, gravity=gravity)


def export_cloth_mesh(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> ClothMesh:
    """The mesh entering the cloth modifier at the current frame, in world space.

    Edges keep Blender's order and polygons their loop order (both decide the order of
    Blender's springs). Pin weights come from the modifier's pin group
    (``settings.vertex_group_mass``), 0 for vertices outside it.
    """
    mod = _require_cloth(ob)
    if _input_is_object_data(ob, mod, depsgraph):
        # Nothing above the cloth changes the mesh: read it directly and leave the
        # modifier stack (and with it an unbaked cloth cache) untouched.
        ob_eval = ob.evaluated_get(depsgraph)
        return _read_mesh(ob.data, _matrix(ob_eval), mod.settings.vertex_group_mass, ob)
    with _cloth_input_stack(ob, mod, depsgraph):
        ob_eval = ob.evaluated_get(depsgraph)
        return _read_mesh(ob_eval.data, _matrix(ob_eval), mod.settings.vertex_group_mass, ob)


def sample_pin_goals(
    ob: bpy.types.Object,
    depsgraph: bpy.types.Depsgraph,
    scene: bpy.types.Scene,
    frames: Sequence[float],
) -> np.ndarray:
    """World positions (F, N, 3) of the cloth modifier's input mesh at each frame.

    This is what Blender's cloth uses as pin goals: the object moved by its transform
    animation, parents, shape keys and every modifier above the cloth modifier.
    The scene frame and the modifier flags are restored afterwards.
    """
    return sample_cloth_input(ob, depsgraph, scene, frames)[0]


def sample_cloth_input(
    ob: bpy.types.Object,
    depsgraph: bpy.types.Depsgraph,
    scene: bpy.types.Scene,
    frames: Sequence[float],
    on_frame: Callable[[int, float], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Pin goals (F, N, 3) as :func:`sample_pin_goals`, and the object's world matrices (F, 4, 4).

    ``on_frame(k, frame)`` is called with the scene at ``frames[k]``, e.g. to read target
    objects in the same pass. The cloth modifier is off during the pass, so stepping
    through the frames never runs Blender's own solver.
    """
    mod = _require_cloth(ob)
    frame, subframe = scene.frame_current, scene.frame_subframe
    goals: list[np.ndarray] = []
    matrices: list[np.ndarray] = []
    try:
        with _cloth_input_stack(ob, mod, depsgraph):
            for k, f in enumerate(frames):
                whole = math.floor(f)
                scene.frame_set(int(whole), subframe=float(f - whole))
                ob_eval = ob.evaluated_get(depsgraph)
                matrix = _matrix(ob_eval)
                goals.append(_world_positions(ob_eval.data, matrix))
                matrices.append(matrix)
                if on_frame is not None:
                    on_frame(k, f)
    finally:
        scene.frame_set(frame, subframe=subframe)
    n = len(goals[0]) if goals else 0
    if any(len(g) != n for g in goals):
        raise ValueError(f"{ob.name}: the cloth input mesh changes its vertex count between frames")
    if not goals:
        return np.zeros((0, n, 3)), np.zeros((0, 4, 4))
    return np.stack(goals), np.stack(matrices)


# -- helpers -------------------------------------------------------------------------


def _require_cloth(ob: bpy.types.Object) -> bpy.types.ClothModifier:
    mod = find_cloth_modifier(ob)
    if mod is None:
        raise ValueError(f"{ob.name} has no cloth modifier")
    return mod


def _visibility_flag(depsgraph: bpy.types.Depsgraph) -> str:
    return "show_render" if depsgraph.mode == "RENDER" else "show_viewport"


def _input_is_object_data(
    ob: bpy.types.Object, mod: bpy.types.ClothModifier, depsgraph: bpy.types.Depsgraph
) -> bool:
    """True when no shape key and no enabled modifier sits above the cloth modifier."""
    flag = _visibility_flag(depsgraph)
    above = ob.modifiers[: ob.modifiers.find(mod.name)]
    return ob.data.shape_keys is None and not any(getattr(m, flag) for m in above)


@contextmanager
def _cloth_input_stack(
    ob: bpy.types.Object, mod: bpy.types.ClothModifier, depsgraph: bpy.types.Depsgraph
) -> Iterator[None]:
    """Evaluate ``ob`` with the cloth modifier and everything below it disabled.

    The Python API only gives the final result of a modifier stack. With the cloth
    modifier and the modifiers after it switched off, that final result is the mesh the
    cloth modifier receives: the geometry Blender builds the cloth from at the start frame
    and the pin goals at every frame, not the simulated output nor a subdivided copy of it.
    Note: any change to the stack marks an unbaked cloth cache outdated (a baked one is
    kept), exactly as when a user toggles a modifier.
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


def _matrix(ob_eval: bpy.types.Object) -> np.ndarray:
    return np.array(ob_eval.matrix_world, dtype=np.float64)


def _world_positions(me: bpy.types.Mesh, matrix: np.ndarray) -> np.ndarray:
    co = np.empty(len(me.vertices) * 3, dtype=np.float32)
    me.vertices.foreach_get("co", co)
    return co.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]


def _read_mesh(me: bpy.types.Mesh, matrix: np.ndarray, pin_group: str, ob: bpy.types.Object) -> ClothMesh:
    vertices = _world_positions(me, matrix)

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

    pin_weights = _pin_weights(me, ob, pin_group)
    return ClothMesh(vertices, polygon_vertices, offsets, edges.reshape(-1, 2), pin_weights)


def _pin_weights(me: bpy.types.Mesh, ob: bpy.types.Object, pin_group: str) -> np.ndarray:
    weights = np.zeros(len(me.vertices), dtype=np.float64)
    index = ob.vertex_groups.find(pin_group) if pin_group else -1
    if index < 0:
        return weights
    # Vertex-group weights have no foreach_get access; this runs once per export.
    for v in me.vertices:
        for g in v.groups:
            if g.group == index:
                weights[v.index] = g.weight
                break
    return weights
