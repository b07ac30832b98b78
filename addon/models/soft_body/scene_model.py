"""The ``soft_body`` model in the scene: a mesh with a Soft Body modifier, simulated as a
tetrahedral Neo-Hookean body on Newton's VBD instead of Blender's edge springs.

What is read from Blender: the mesh entering the Soft Body modifier (world space), its goal
vertex group (weights above the object's Pin Above threshold are pinned and follow the
animated mesh), the modifier's cache range, gravity times its effector weight, the frame
rate, and the Collision objects of its collision collection (or the scene) as rigid
colliders. Blender's own soft-body settings (goal stiffness, edge springs, ...) belong to
its own model and are not read. The fitted values are kept on the object
(``Object.fit_to_target_soft_body``); Blender cannot replay them, the bake can.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import bpy
import numpy as np

from ....warp_core.mesh import ClothMesh
from ....warp_core.models.base import onto_bounds
from ....warp_core.models.soft_body.params import PARAMETER_BOUNDS, SETTINGS_FIELDS, Collider, SoftBodyParams
from ...mesh_read import (
    input_is_object_data,
    modifier_input_stack,
    object_matrix,
    read_mesh,
    sample_modifier_input_steps,
    triangles,
    vertex_group_weights,
)
from ...scene.steps import StepGenerator
from ..base import NoFrameSampler, as_type_of, plain
from ..blender_cloth.fields import acting_fields
from ..parameter_rows import draw_parameter_groups
from .map_targets import MAP_TARGETS
from .panel_rows import GROUPS, MAP_GROUPS, draw_simulation

NAME = "soft_body"
DEFAULT_FIT = ("young_modulus", "damping")
# goal weights this close to 0 or 1 count as "free" and "pinned" without a warning
_GOAL_SLACK = 1e-3
# modifiers that change a collider's shape over time: a collider moves rigidly only
_DEFORMING = {
    "ARMATURE",
    "CAST",
    "CURVE",
    "DISPLACE",
    "HOOK",
    "LATTICE",
    "MESH_DEFORM",
    "SIMPLE_DEFORM",
    "SMOOTH",
    "SURFACE_DEFORM",
    "WARP",
    "WAVE",
    "CLOTH",
    "SOFT_BODY",
    "MESH_CACHE",
    "NODES",
    "MESH_SEQUENCE_CACHE",
    "OCEAN",
    "LAPLACIANDEFORM",
    "CORRECTIVE_SMOOTH",
    "SHRINKWRAP",
}


def find_soft_body_modifier(ob: bpy.types.Object) -> bpy.types.SoftBodyModifier | None:
    for mod in getattr(ob, "modifiers", ()):
        if mod.type == "SOFT_BODY":
            return mod
    return None


def _require(ob: bpy.types.Object) -> bpy.types.SoftBodyModifier:
    mod = find_soft_body_modifier(ob)
    if mod is None:
        raise ValueError(f"{ob.name} has no Soft Body modifier")
    return mod


def model_settings(ob: bpy.types.Object) -> Any:
    """The object's ``fit_to_target_soft_body`` (the model's values)."""
    return ob.fit_to_target_soft_body


def colliders_of(scene: bpy.types.Scene, ob: bpy.types.Object, mod: bpy.types.SoftBodyModifier) -> list:
    """Objects with a Collision modifier in the modifier's collision collection (the scene
    when none is set), sorted by name."""
    coll = mod.settings.collision_collection
    pool = coll.all_objects if coll is not None else scene.objects
    return sorted(
        (o for o in pool if o != ob and o.type == "MESH" and any(m.type == "COLLISION" for m in o.modifiers)),
        key=lambda o: o.name,
    )


def read_colliders(
    scene: bpy.types.Scene, ob: bpy.types.Object, mod: bpy.types.SoftBodyModifier
) -> tuple[Collider, ...]:
    """Each collider's evaluated mesh (object space, at the cache start) and its world matrix
    at every frame of the cache (one matrix when it does not move). Main thread; the scene
    frame is restored and the Soft Body modifier is off while frames are stepped."""
    found = colliders_of(scene, ob, mod)
    if not found:
        return ()
    depsgraph = bpy.context.evaluated_depsgraph_get()
    start, end = cache_frame_range(mod)
    meshes = {}
    for o in found:
        o_eval = o.evaluated_get(depsgraph)
        me = o_eval.to_mesh()
        try:
            co = np.empty(len(me.vertices) * 3, dtype=np.float32)
            me.vertices.foreach_get("co", co)
            meshes[o.name] = (co.reshape(-1, 3).astype(np.float64), triangles(me))
        finally:
            o_eval.to_mesh_clear()
    animated = [o for o in found if _moves(o)]
    matrices = {o.name: [object_matrix(o.evaluated_get(depsgraph))] for o in found}
    if animated:
        matrices.update({o.name: [] for o in animated})
        saved = scene.frame_current, scene.frame_subframe
        try:
            with modifier_input_stack(ob, mod, depsgraph):
                for f in range(start, end + 1):
                    scene.frame_set(f)
                    for o in animated:
                        matrices[o.name].append(object_matrix(o.evaluated_get(depsgraph)))
        finally:
            scene.frame_set(saved[0], subframe=saved[1])
    friction = float(model_settings(ob).friction)
    return tuple(
        Collider(o.name, meshes[o.name][0], meshes[o.name][1], np.stack(matrices[o.name]), friction)
        for o in found
    )


def _moves(o: bpy.types.Object) -> bool:
    """Whether the object's transform may change over time (animation, parent, constraints)."""
    while o is not None:
        if o.animation_data is not None or len(o.constraints) > 0:
            return True
        o = o.parent
    return False


def cache_frame_range(mod: bpy.types.SoftBodyModifier) -> tuple[int, int]:
    return int(mod.point_cache.frame_start), int(mod.point_cache.frame_end)


def read_params(mod: bpy.types.SoftBodyModifier, scene: bpy.types.Scene) -> SoftBodyParams:
    """The object's model values, gravity (the scene's times the modifier's effector weight,
    0 when the scene's gravity is off), the frame rate and the colliders."""
    ob = mod.id_data
    s = model_settings(ob)
    values = {name: getattr(s, name) for name in SETTINGS_FIELDS}
    for name, bounds in PARAMETER_BOUNDS.items():
        values[name] = onto_bounds(float(values[name]), bounds)  # float32 0.49 is 0.49 again
    for name in ("substeps", "iterations", "lattice_cells"):
        values[name] = int(values[name])
    values["ground"] = bool(values["ground"])
    w = float(mod.settings.effector_weights.gravity)
    gravity = tuple(float(g) * w for g in scene.gravity) if scene.use_gravity else (0.0, 0.0, 0.0)
    fps = float(scene.render.fps) / float(scene.render.fps_base)
    return SoftBodyParams(**values, gravity=gravity, fps=fps, colliders=read_colliders(scene, ob, mod))


def read_geometry(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> ClothMesh:
    """The mesh entering the Soft Body modifier at the current frame, in world space, with
    the goal group's weights as pin weights (0 without Goal or without a group)."""
    mod = _require(ob)
    group = mod.settings.vertex_group_goal if mod.settings.use_goal else ""
    if input_is_object_data(ob, mod, depsgraph):
        mesh = read_mesh(
            ob.data, object_matrix(ob.evaluated_get(depsgraph)), vertex_group_weights(ob.data, ob, group)
        )
        return _with_material_groups(mesh, ob, ob.data)
    with modifier_input_stack(ob, mod, depsgraph):
        ob_eval = ob.evaluated_get(depsgraph)
        me = ob_eval.data
        mesh = read_mesh(me, object_matrix(ob_eval), vertex_group_weights(me, ob, group))
        return _with_material_groups(mesh, ob, me)


def _with_material_groups(mesh: ClothMesh, ob: bpy.types.Object, me: bpy.types.Mesh) -> ClothMesh:
    """``mesh`` with the weights of the object's stiffness and damping groups (None where no
    group is named); ValueError naming a group the object does not have."""
    values = model_settings(ob)
    for setting, field, label in MAP_GROUPS:
        name = getattr(values, setting)
        if not name:
            continue
        if name not in ob.vertex_groups:
            raise ValueError(
                f"{ob.name}: the {label} '{name}' is not a vertex group of the object; "
                "pick one of its groups or clear the field"
            )
        setattr(mesh, field, vertex_group_weights(me, ob, name))
    return mesh


def check_geometry(mesh: ClothMesh) -> None:
    """A soft body needs faces around a volume: ValueError naming what is missing."""
    if mesh.vertex_count == 0 or mesh.polygon_count == 0:
        raise ValueError("the mesh has no faces: a soft body needs a surface around a volume")
    if not np.isfinite(mesh.vertices).all():
        raise ValueError("the mesh has non-finite vertex coordinates")
    extent = np.ptp(mesh.vertices, axis=0)
    if extent.min() <= 1e-6 * max(float(extent.max()), 1e-300):
        raise ValueError(
            "the mesh is flat: a soft body needs a volume (give it thickness, e.g. Solidify, then apply it)"
        )


def unmodeled_settings(
    scene: bpy.types.Scene, ob: bpy.types.Object, mod: bpy.types.SoftBodyModifier
) -> list[str]:
    """One phrase per setting in use that changes the motion but is not simulated."""
    return list(_goal(ob, mod)) + list(_scene(scene, ob, mod))


def _goal(ob: bpy.types.Object, mod: bpy.types.SoftBodyModifier) -> Iterator[str]:
    s = mod.settings
    if not s.use_goal:
        return
    if not s.vertex_group_goal or s.vertex_group_goal not in ob.vertex_groups:
        yield (
            "Goal (settings.use_goal) is on without a goal vertex group, so Blender holds every vertex "
            f"at the default goal {s.goal_default:g}; set a goal group (weights above Pin Above pin) "
            "or turn Goal off"
        )
        return
    weights = vertex_group_weights(ob.data, ob, s.vertex_group_goal)
    soft = (weights > _GOAL_SLACK) & (weights < 1.0 - _GOAL_SLACK)
    if soft.any():
        yield (
            f"the goal group '{s.vertex_group_goal}' has {int(soft.sum())} weights between 0 and 1 "
            "(soft goals); this model pins weights above Pin Above and leaves the others free"
        )


def _scene(scene: bpy.types.Scene, ob: bpy.types.Object, mod: bpy.types.SoftBodyModifier) -> Iterator[str]:
    if mod.settings.use_self_collision:
        yield "Self Collision (settings.use_self_collision) is on"
    for o, weight in acting_fields(scene, mod):
        yield f"Force Field '{o.name}' ({o.field.type.title()}) acts on the soft body (weight {weight:g})"
    for o in colliders_of(scene, ob, mod):
        bent = [m.name for m in o.modifiers if m.type in _DEFORMING and (m.show_viewport or m.show_render)]
        keys = o.data.shape_keys
        if bent or (keys is not None and len(keys.key_blocks) > 1):
            what = f"modifier(s) {', '.join(bent)}" if bent else "shape keys"
            yield (
                f"Collision object '{o.name}' deforms ({what}); colliders are simulated as rigid "
                "moving shapes"
            )


def current_values(mod: bpy.types.SoftBodyModifier, names: Sequence[str]) -> dict[str, Any]:
    s = model_settings(mod.id_data)
    return {n: plain(getattr(s, n)) for n in names if hasattr(s, n)}


def write_values(mod: bpy.types.SoftBodyModifier, values: dict[str, Any]) -> None:
    s = model_settings(mod.id_data)
    for name, value in values.items():
        if name in SETTINGS_FIELDS:
            setattr(s, name, as_type_of(getattr(s, name), value))


def sample_goals_steps(
    ob: bpy.types.Object,
    depsgraph: bpy.types.Depsgraph,
    scene: bpy.types.Scene,
    frames: Sequence[float],
    on_frame: Callable[[int, float], None] | None = None,
) -> StepGenerator[tuple[np.ndarray, np.ndarray]]:
    """The input mesh at ``frames`` (the pins' goals) and the object's world matrices, a frame
    per step (``addon/scene/steps.py``)."""
    return sample_modifier_input_steps(ob, _require(ob), depsgraph, scene, frames, on_frame)


def draw_parameters(layout: bpy.types.UILayout, settings: Any, fitted: dict[str, float]) -> None:
    """The Parameters rows: a check box beside each material value of the object (and the
    fitted one), then the model's solver settings."""
    values = getattr(settings.id_data, "fit_to_target_soft_body", None)
    draw_parameter_groups(layout, settings, GROUPS, values, fitted)
    if values is not None:
        draw_simulation(layout, values)


class SoftBodyScene:
    """The ``SceneModel`` (``models/base.py``) of ``soft_body``: this module's functions."""

    name = NAME
    modifier_label = "Soft Body"
    settings_fields = SETTINGS_FIELDS
    default_fit = DEFAULT_FIT
    ties = ()
    parameter_groups = GROUPS
    precision = "float32"  # Newton's VBD runs in float32
    auto_device_by_size = False  # no crossover measured: Auto means the first CUDA device
    # the stiffness and damping maps, written into the groups the object's model values name
    map_kinds: tuple[str, ...] = tuple(MAP_TARGETS)
    map_targets = MAP_TARGETS
    free_maps = False  # the core fits a soft body's maps by regions only

    find_modifier = staticmethod(find_soft_body_modifier)
    cache_frame_range = staticmethod(cache_frame_range)
    read_settings = staticmethod(read_params)
    read_geometry = staticmethod(read_geometry)
    check_geometry = staticmethod(check_geometry)
    sample_goals_steps = staticmethod(sample_goals_steps)
    unmodeled_settings = staticmethod(unmodeled_settings)
    current_values = staticmethod(current_values)
    write_values = staticmethod(write_values)
    draw_parameters = staticmethod(draw_parameters)

    @staticmethod
    def map_holder(ob: bpy.types.Object) -> Any:
        return model_settings(ob)

    @staticmethod
    def cautions(mod: bpy.types.SoftBodyModifier) -> list[str]:
        return []

    @staticmethod
    def frame_sampler(
        scene: bpy.types.Scene,
        ob: bpy.types.Object,
        mod: bpy.types.SoftBodyModifier,
        depsgraph: bpy.types.Depsgraph,
    ) -> NoFrameSampler:
        # its colliders are read with its settings (read_params)
        return NoFrameSampler()


SCENE_MODEL = SoftBodyScene()
