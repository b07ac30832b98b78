"""The ``blender_cloth`` model in the scene: Blender's Cloth modifier.

Reads what Blender's cloth solver starts from (the modifier's input mesh and pin group, the
pin goals at every frame, its ``ClothSettings``) and writes fitted values back into the same
``ClothSettings`` fields. World space (metres), the space Blender's cloth solver works in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import bpy
import numpy as np

from ....warp_core.mesh import ClothMesh
from ....warp_core.models import get_model
from ....warp_core.models.blender_cloth import CLOTH_SETTINGS_FIELDS, ClothParams
from ....warp_core.models.blender_cloth.topology import validate_mesh
from ...mesh_read import (
    input_is_object_data,
    modifier_input_stack,
    object_matrix,
    read_mesh,
    sample_modifier_input_steps,
    vertex_group_weights,
)
from ...scene.steps import StepGenerator, run_blocking
from ..base import TieOption, as_type_of, plain
from ..parameter_rows import draw_parameter_groups
from .collisions import ColliderSampler, collision_settings_values
from .fields import field_rows
from .map_targets import MAP_TARGETS
from .panel_rows import GROUPS
from .unmodeled import cautions, unmodeled_settings

NAME = "blender_cloth"

# Fitted unless the user says otherwise: the two a clamped or draped sheet shows best.
DEFAULT_FIT = ("tension_stiffness", "bending_stiffness")

TIES = (
    TieOption(
        "tie_compression",
        "Compression = Tension",
        "Fit one stiffness for stretching and compression (Blender's default keeps them equal)",
        ("tension_stiffness", "compression_stiffness"),
    ),
    TieOption(
        "tie_damping",
        "Dampings Together",
        "Fit one value for tension, compression and shear damping",
        ("tension_damping", "compression_damping", "shear_damping"),
    ),
)


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
    (``ClothSettings.gravity`` is never read by Blender's solver.) The collision settings
    come from ``collision_settings``; the colliders need the frames of a fit, so they are
    left empty here (see :class:`~.collisions.ColliderSampler`).
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
    fields = field_rows(scene, mod)
    collision = collision_settings_values(mod.id_data, mod)
    return ClothParams(
        **values, **collision, gravity=gravity, force_fields=fields, fps=float(scene.render.fps)
    )


def export_cloth_mesh(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> ClothMesh:
    """The mesh entering the cloth modifier at the current frame, in world space.

    Edges keep Blender's order and polygons their loop order (both decide the order of
    Blender's springs). Pin weights come from the modifier's pin group
    (``settings.vertex_group_mass``), 0 for vertices outside it; the stiffness and shrinking
    groups' weights the same way, None where a group is not set.
    """
    mod = _require_cloth(ob)
    if input_is_object_data(ob, mod, depsgraph):
        # Nothing above the cloth changes the mesh: read it directly and leave the
        # modifier stack (and with it an unbaked cloth cache) untouched.
        matrix = object_matrix(ob.evaluated_get(depsgraph))
        return _read_cloth_mesh(ob, mod, ob.data, matrix)
    with modifier_input_stack(ob, mod, depsgraph):
        ob_eval = ob.evaluated_get(depsgraph)
        return _read_cloth_mesh(ob, mod, ob_eval.data, object_matrix(ob_eval))


# ClothMesh field <- ClothSettings property naming the vertex group
VERTEX_GROUPS: dict[str, str] = {
    "structural_stiffness_weight": "vertex_group_structural_stiffness",
    "shear_stiffness_weight": "vertex_group_shear_stiffness",
    "bending_stiffness_weight": "vertex_group_bending",
    "shrink_weight": "vertex_group_shrink",
}


def _read_cloth_mesh(
    ob: bpy.types.Object, mod: bpy.types.ClothModifier, me: bpy.types.Mesh, matrix: np.ndarray
) -> ClothMesh:
    mesh = read_mesh(me, matrix, vertex_group_weights(me, ob, mod.settings.vertex_group_mass))
    for field, prop in VERTEX_GROUPS.items():
        group = getattr(mod.settings, prop)
        # a name that matches no group of the object makes Blender read no weights either
        if group and group in ob.vertex_groups:
            setattr(mesh, field, vertex_group_weights(me, ob, group))
    return mesh


def check_cloth_mesh(mesh: ClothMesh) -> None:
    """What neither Blender's cloth nor this model can simulate, found before any fit:
    ValueError naming it (no faces, a single vertex, loose vertices, zero-area or duplicate
    faces, edges of three or more faces, a polygon corner past 170 degrees or pointing in)."""
    validate_mesh(mesh)


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
    return run_blocking(sample_cloth_input_steps(ob, depsgraph, scene, frames))[0]


def sample_cloth_input_steps(
    ob: bpy.types.Object,
    depsgraph: bpy.types.Depsgraph,
    scene: bpy.types.Scene,
    frames: Sequence[float],
    on_frame: Callable[[int, float], None] | None = None,
) -> StepGenerator[tuple[np.ndarray, np.ndarray]]:
    """Pin goals (F, N, 3) as :func:`sample_pin_goals`, and the object's world matrices
    (F, 4, 4), a frame per step (``addon/scene/steps.py``). ``on_frame(k, frame)`` is called
    with the scene at ``frames[k]``, e.g. to read target objects in the same pass; the cloth
    modifier is off during the pass, so stepping through the frames never runs Blender's
    own solver."""
    return sample_modifier_input_steps(ob, _require_cloth(ob), depsgraph, scene, frames, on_frame)


def modifier_values(mod: bpy.types.ClothModifier, names: Sequence[str]) -> dict[str, Any]:
    """The ``ClothSettings`` values of ``names`` as plain Python numbers (JSON-ready)."""
    return {name: plain(getattr(mod.settings, name)) for name in names}


def set_modifier_values(mod: bpy.types.ClothModifier, values: dict[str, Any]) -> None:
    """Write ``values`` into the ``ClothSettings``, each as the type of its field."""
    for name, value in values.items():
        setattr(mod.settings, name, as_type_of(getattr(mod.settings, name), value))


def draw_parameters(layout: bpy.types.UILayout, settings: Any, fitted: dict[str, float]) -> None:
    """The Parameters rows: grouped as Blender's Cloth panel, each a check box beside the
    modifier's value (and the fitted one), the tie options in their groups."""
    mod = find_cloth_modifier(settings.id_data)
    draw_parameter_groups(layout, settings, GROUPS, mod.settings if mod is not None else None, fitted)


def _require_cloth(ob: bpy.types.Object) -> bpy.types.ClothModifier:
    mod = find_cloth_modifier(ob)
    if mod is None:
        raise ValueError(f"{ob.name} has no cloth modifier")
    return mod


class BlenderClothScene:
    """The ``SceneModel`` (``models/base.py``) of ``blender_cloth``."""

    name = NAME
    modifier_label = "Cloth"
    settings_fields = CLOTH_SETTINGS_FIELDS
    default_fit = DEFAULT_FIT
    ties = TIES
    parameter_groups = GROUPS
    precision = "float64"
    auto_device_by_size = True  # bench/device_crossover.py measures cloth fits
    map_kinds = tuple(get_model(NAME).map_ranges)  # written by addon/scene/map_groups.py
    map_targets = MAP_TARGETS  # where each kind's group and Max values are
    free_maps = True

    def find_modifier(self, ob: bpy.types.Object) -> bpy.types.ClothModifier | None:
        return find_cloth_modifier(ob)

    def map_holder(self, ob: bpy.types.Object) -> bpy.types.ClothSettings | None:
        mod = find_cloth_modifier(ob)
        return mod.settings if mod is not None else None

    def cache_frame_range(self, mod: bpy.types.ClothModifier) -> tuple[int, int]:
        return cache_frame_range(mod)

    def read_settings(self, mod: bpy.types.ClothModifier, scene: bpy.types.Scene) -> ClothParams:
        return export_cloth_params(mod, scene)

    def read_geometry(self, ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> ClothMesh:
        return export_cloth_mesh(ob, depsgraph)

    def check_geometry(self, mesh: ClothMesh) -> None:
        check_cloth_mesh(mesh)

    def sample_goals_steps(
        self,
        ob: bpy.types.Object,
        depsgraph: bpy.types.Depsgraph,
        scene: bpy.types.Scene,
        frames: Sequence[float],
        on_frame: Callable[[int, float], None] | None = None,
    ) -> StepGenerator[tuple[np.ndarray, np.ndarray]]:
        return sample_cloth_input_steps(ob, depsgraph, scene, frames, on_frame)

    def frame_sampler(
        self,
        scene: bpy.types.Scene,
        ob: bpy.types.Object,
        mod: bpy.types.ClothModifier,
        depsgraph: bpy.types.Depsgraph,
    ) -> ColliderSampler:
        return ColliderSampler(scene, ob, mod, depsgraph)

    def unmodeled_settings(
        self, scene: bpy.types.Scene, ob: bpy.types.Object, mod: bpy.types.ClothModifier
    ) -> list[str]:
        return unmodeled_settings(scene, ob, mod)

    def cautions(self, mod: bpy.types.ClothModifier) -> list[str]:
        return cautions(mod)

    def current_values(self, mod: bpy.types.ClothModifier, names: Sequence[str]) -> dict[str, Any]:
        return modifier_values(mod, names)

    def write_values(self, mod: bpy.types.ClothModifier, values: dict[str, Any]) -> None:
        set_modifier_values(mod, values)

    def draw_parameters(self, layout: bpy.types.UILayout, settings: Any, fitted: dict[str, float]) -> None:
        draw_parameters(layout, settings, fitted)


SCENE_MODEL = BlenderClothScene()
