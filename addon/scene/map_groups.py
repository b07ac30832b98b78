"""A fitted weight map as the cloth's stiffness or shrinking vertex group, undone bit for bit.

Blender's cloth reads each map from the vertex group that a ``ClothSettings`` field names
(``vertex_group_structural_stiffness`` and the others, see
``addon/models/blender_cloth/scene_model.py``), scaled towards that kind's maxima.
:func:`write_map` puts the weights there and returns a :class:`GroupState` holding all it
replaced; :func:`restore_map` puts that back bit for bit. The state turns into JSON, so it
can be kept on the object between the two like the add-on's other previous values.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import bpy
import numpy as np

from ...warp_core.models.blender_cloth.maps import MAP_FIELDS, MAP_KINDS
from ..errors import FitInputError
from ..models.blender_cloth.scene_model import VERTEX_GROUPS, find_cloth_modifier

# kind -> the ClothSettings maxima its weights scale towards (Blender's Cloth panel shows
# them beside the group: Max Tension and Max Compression share the structural group)
MAX_FIELDS: dict[str, tuple[str, ...]] = {
    "structural": ("tension_stiffness_max", "compression_stiffness_max"),
    "shear": ("shear_stiffness_max",),
    "bending": ("bending_stiffness_max",),
    "shrink": ("shrink_max",),
}
# maximum -> the minimum Blender raises it to when set below (its RNA setters clamp so)
MIN_FIELDS: dict[str, str] = {
    "tension_stiffness_max": "tension_stiffness",
    "compression_stiffness_max": "compression_stiffness",
    "shear_stiffness_max": "shear_stiffness",
    "bending_stiffness_max": "bending_stiffness",
}
# kind -> the name of a group the write makes where the modifier names none
GROUP_NAMES: dict[str, str] = {
    "structural": "Fit Structural Stiffness",
    "shear": "Fit Shear Stiffness",
    "bending": "Fit Bending Stiffness",
    "shrink": "Fit Shrinking",
}


@dataclass
class GroupState:
    """What one :func:`write_map` replaced: made by it, read by :func:`restore_map`, kept in
    between as JSON (:meth:`to_json`, :meth:`from_json`), e.g. on the object.

    Weights are Blender's float32 values held as Python floats, which JSON keeps exactly.
    """

    kind: str  # the map kind ("structural", "shear", "bending", "shrink")
    setting: str  # the ClothSettings field naming the group, e.g. "vertex_group_bending"
    previous_setting: str  # what that field held before ("" for none, or a missing group's name)
    group: str  # the group written
    # the group's weights before (vertex index -> weight, only its members); None: the write
    # made the group
    previous_weights: dict[int, float] | None
    previous_max: dict[str, float] = field(default_factory=dict)  # the kind's maxima before
    previous_active_index: int = -1  # the object's active vertex group before

    def to_json(self) -> str:
        """The state as a JSON object (vertex indices become the keys' strings)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> GroupState:
        """The state :meth:`to_json` wrote; ValueError where ``text`` is not one."""
        try:
            data: dict[str, Any] = json.loads(text)
            weights = data["previous_weights"]
            return cls(
                kind=str(data["kind"]),
                setting=str(data["setting"]),
                previous_setting=str(data["previous_setting"]),
                group=str(data["group"]),
                previous_weights=None
                if weights is None
                else {int(index): float(w) for index, w in weights.items()},
                previous_max={str(name): float(v) for name, v in data["previous_max"].items()},
                previous_active_index=int(data["previous_active_index"]),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"Not a stored vertex-group state: {error}") from error


def write_map(
    ob: bpy.types.Object,
    kind: str,
    weights: np.ndarray,
    max_values: dict[str, float] | None = None,
    group_name: str = "",
) -> GroupState:
    """Write ``weights`` (one per vertex of the object's mesh, in [0, 1]) as the ``kind``
    map of its cloth, and ``max_values`` (some of the kind's maxima, :data:`MAX_FIELDS`)
    into the modifier; the state to undo it with :func:`restore_map`.

    The group is ``group_name`` where given (replaced in place where it exists, else made);
    else the one the modifier names for the kind where it exists; else a new one named after
    the kind (:data:`GROUP_NAMES`, made unique by Blender if taken). The modifier is pointed
    at it. Every vertex joins the group, those of weight 0 too. FitInputError, with nothing
    changed, on bad input.
    """
    mod = _require_cloth(ob)
    values = _checked_weights(ob, kind, weights)
    maxima = _checked_max_values(ob, mod, kind, max_values or {})
    settings = mod.settings
    setting = VERTEX_GROUPS[MAP_FIELDS[kind]]
    named = getattr(settings, setting)
    wanted = group_name or named
    existing = ob.vertex_groups.get(wanted) if wanted else None
    state = GroupState(
        kind=kind,
        setting=setting,
        previous_setting=named,
        group=existing.name if existing is not None else "",
        previous_weights=group_weights(ob, existing) if existing is not None else None,
        previous_max={name: float(getattr(settings, name)) for name in MAX_FIELDS[kind]},
        previous_active_index=ob.vertex_groups.active_index,
    )
    try:
        new_name = group_name or GROUP_NAMES[kind]
        group = existing if existing is not None else ob.vertex_groups.new(name=new_name)
        state.group = group.name
        _assign(group, values)
        for name, value in maxima.items():
            setattr(settings, name, value)
        # a new group, or one the modifier named that had gone: the modifier reads it now
        # (the weights' and the field's updates both reset the cloth's cache)
        if named != group.name:
            setattr(settings, setting, group.name)
    except Exception:
        # a write that failed half way leaves the scene as it found it
        restore_map(ob, state)
        raise
    return state


def restore_map(ob: bpy.types.Object, state: GroupState) -> None:
    """Undo the :func:`write_map` that returned ``state``: the group's previous members and
    weights (or no group, where the write made it), the modifier's field and the maxima,
    bit for bit. FitInputError, with nothing changed, where the object no longer fits."""
    mod = _require_cloth(ob)
    if state.kind not in MAP_KINDS or state.setting != VERTEX_GROUPS[MAP_FIELDS[state.kind]]:
        raise FitInputError(
            f"{ob.name}: the stored vertex-group state is for map {state.kind!r} and field "
            f"{state.setting!r}, which do not belong together; it cannot be restored"
        )
    group = ob.vertex_groups.get(state.group) if state.group else None
    if state.previous_weights is not None:
        if group is None:
            raise FitInputError(
                f"{ob.name} has no vertex group {state.group!r} any more; rename the group "
                f"back to {state.group!r} to restore its weights"
            )
        count = len(ob.data.vertices)
        if any(index >= count for index in state.previous_weights):
            raise FitInputError(
                f"{ob.name}: the mesh has {count} vertices now, fewer than when the map was "
                f"written; undo the mesh edit to restore group {state.group!r}"
            )
    settings = mod.settings
    if state.previous_weights is None:
        if group is not None:
            ob.vertex_groups.remove(group)
    else:
        _restore_weights(ob, group, state.previous_weights)
    for name, value in state.previous_max.items():
        setattr(settings, name, value)
    if getattr(settings, state.setting) != state.previous_setting:
        setattr(settings, state.setting, state.previous_setting)
    if state.previous_active_index < len(ob.vertex_groups):
        ob.vertex_groups.active_index = state.previous_active_index


def group_weights(ob: bpy.types.Object, group: bpy.types.VertexGroup) -> dict[int, float]:
    """vertex index -> weight of the members of ``group`` (one of ``ob``'s vertex groups)."""
    index = group.index
    weights: dict[int, float] = {}
    # vertex-group weights have no foreach_get access: one pass over the vertices
    for v in ob.data.vertices:
        for g in v.groups:
            if g.group == index:
                weights[v.index] = float(g.weight)
                break
    return weights


def _require_cloth(ob: bpy.types.Object) -> bpy.types.ClothModifier:
    name = getattr(ob, "name", repr(ob))
    if getattr(ob, "type", None) != "MESH":
        raise FitInputError(
            f"{name} is not a mesh object; pick the mesh with the Cloth modifier to write a weight map to"
        )
    mod = find_cloth_modifier(ob)
    if mod is None:
        raise FitInputError(f"{name} has no Cloth modifier; add one to give it a weight map")
    if ob.mode == "EDIT":
        raise FitInputError(f"{name} is in Edit Mode; leave Edit Mode to write its vertex group weights")
    if ob.data.library is not None:
        raise FitInputError(
            f"{name}'s mesh is linked from a library; make it local to write its vertex groups"
        )
    return mod


def _checked_weights(ob: bpy.types.Object, kind: str, weights: np.ndarray) -> np.ndarray:
    if kind not in MAP_KINDS:
        raise FitInputError(f"{ob.name}: unknown map {kind!r}; use one of {', '.join(MAP_KINDS)}")
    try:
        values = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise FitInputError(f"{ob.name}: the {kind} weights are not numbers ({error})") from error
    count = len(ob.data.vertices)
    if values.shape != (count,):
        raise FitInputError(
            f"{ob.name}: the {kind} map has {values.size} weights in shape {values.shape}; its mesh "
            f"has {count} vertices, give one weight per vertex"
        )
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise FitInputError(
            f"{ob.name}: the {kind} weight of vertex {int(bad[0])} is {values[bad[0]]} "
            f"({bad.size} not finite); give finite weights"
        )
    outside = np.flatnonzero((values < 0.0) | (values > 1.0))
    if outside.size:
        raise FitInputError(
            f"{ob.name}: the {kind} weight of vertex {int(outside[0])} is {values[outside[0]]:g} "
            f"({outside.size} outside [0, 1]); vertex group weights run from 0 to 1"
        )
    return values


def _checked_max_values(
    ob: bpy.types.Object, mod: bpy.types.ClothModifier, kind: str, max_values: dict[str, float]
) -> dict[str, float]:
    allowed = MAX_FIELDS[kind]
    checked: dict[str, float] = {}
    for name, value in max_values.items():
        if name not in allowed:
            raise FitInputError(
                f"{ob.name}: {name!r} is not a maximum of the {kind} map; use {', '.join(allowed)}"
            )
        prop = mod.settings.bl_rna.properties[name]
        number = float(value)
        # Blender would clamp a value outside the field's range without a word
        if not math.isfinite(number) or not prop.hard_min <= number <= prop.hard_max:
            raise FitInputError(
                f"{ob.name}: {name} = {value} is outside Blender's range "
                f"[{prop.hard_min:g}, {prop.hard_max:g}]; give a value within it"
            )
        low = MIN_FIELDS.get(name)
        # compared as Blender holds both, in float32: a Max equal to its minimum as written
        # (a map whose fitted range is one value) is not below the minimum's rounding
        if low is not None and np.float32(number) < np.float32(getattr(mod.settings, low)):
            raise FitInputError(
                f"{ob.name}: {name} = {value} is below {low} ({getattr(mod.settings, low):g}), "
                f"which Blender would raise it to; give at least {low}"
            )
        checked[name] = number
    return checked


def _assign(group: bpy.types.VertexGroup, values: np.ndarray) -> None:
    # one ``add`` call per distinct weight (as float32, what Blender stores), not per vertex
    stored = values.astype(np.float32)
    for w in np.unique(stored):
        group.add(np.flatnonzero(stored == w).tolist(), float(w), "REPLACE")


def _restore_weights(ob: bpy.types.Object, group: bpy.types.VertexGroup, previous: dict[int, float]) -> None:
    members = group_weights(ob, group)
    extra = sorted(set(members) - set(previous))
    if extra:
        group.remove(extra)
    by_weight: dict[float, list[int]] = {}
    for index, w in previous.items():
        by_weight.setdefault(w, []).append(index)
    for w, indices in by_weight.items():
        # Python floats read from float32 weights: storing them back is exact
        group.add(indices, w, "REPLACE")
