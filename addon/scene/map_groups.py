"""A fitted weight map as the vertex group its model reads it from, undone bit for bit.

Each scene side declares where its maps go (``SceneModel.map_targets``, a
:class:`~..models.base.MapTarget` per kind, on the struct ``SceneModel.map_holder`` gives):
Blender's cloth reads each map from the vertex group a ``ClothSettings`` field names
(``vertex_group_structural_stiffness`` and the others), scaled towards that kind's maxima;
the soft body from the groups its model values name (``young_modulus_group``,
``damping_group``), blended towards ``young_modulus_max`` and ``damping_max``.
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

from ..errors import FitInputError
from ..models.base import MapTarget, SceneModel
from ..models.registry import DEFAULT_MODEL, object_model, scene_model


@dataclass
class GroupState:
    """What one :func:`write_map` replaced: made by it, read by :func:`restore_map`, kept in
    between as JSON (:meth:`to_json`, :meth:`from_json`), e.g. on the object.

    Weights are Blender's float32 values held as Python floats, which JSON keeps exactly.
    """

    kind: str  # the map kind ("structural", "stiffness", ...: ``SceneModel.map_targets``)
    setting: str  # the field naming the group, e.g. "vertex_group_bending" (``MapTarget.group_field``)
    previous_setting: str  # what that field held before ("" for none, or a missing group's name)
    group: str  # the group written
    # the group's weights before (vertex index -> weight, only its members); None: the write
    # made the group
    previous_weights: dict[int, float] | None
    previous_max: dict[str, float] = field(default_factory=dict)  # the kind's maxima before
    previous_active_index: int = -1  # the object's active vertex group before
    model: str = DEFAULT_MODEL  # the scene side whose map it was (``SceneModel.name``)

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
                model=str(data.get("model", DEFAULT_MODEL)),
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
    map of the object's model, and ``max_values`` (some of the kind's maxima,
    ``MapTarget.max_fields``) into the struct holding them; the state to undo it with
    :func:`restore_map`.

    The group is ``group_name`` where given (replaced in place where it exists, else made);
    else the one the kind's field names where it exists; else a new one named after the kind
    (``MapTarget.new_group``, made unique by Blender if taken). The field is pointed at it.
    Every vertex joins the group, those of weight 0 too. FitInputError, with nothing
    changed, on bad input.
    """
    model = object_model(ob)
    holder = _require_holder(ob, model)
    target = _target(ob, model, kind)
    values = _checked_weights(ob, kind, weights)
    maxima = _checked_max_values(ob, holder, kind, target, max_values or {})
    setting = target.group_field
    named = getattr(holder, setting)
    wanted = group_name or named
    existing = ob.vertex_groups.get(wanted) if wanted else None
    state = GroupState(
        kind=kind,
        setting=setting,
        previous_setting=named,
        group=existing.name if existing is not None else "",
        previous_weights=group_weights(ob, existing) if existing is not None else None,
        previous_max={name: float(getattr(holder, name)) for name in target.max_fields},
        previous_active_index=ob.vertex_groups.active_index,
        model=model.name,
    )
    try:
        new_name = group_name or target.new_group
        group = existing if existing is not None else ob.vertex_groups.new(name=new_name)
        state.group = group.name
        _assign(group, values)
        for name, value in maxima.items():
            setattr(holder, name, value)
        # a new group, or one the field named that had gone: the model reads it now
        # (the weights' and the field's updates both reset a cloth's cache)
        if named != group.name:
            setattr(holder, setting, group.name)
    except Exception:
        # a write that failed half way leaves the scene as it found it
        restore_map(ob, state)
        raise
    return state


def restore_map(ob: bpy.types.Object, state: GroupState) -> None:
    """Undo the :func:`write_map` that returned ``state``: the group's previous members and
    weights (or no group, where the write made it), the field naming it and the maxima,
    bit for bit. FitInputError, with nothing changed, where the object no longer fits."""
    model = scene_model(state.model)
    holder = _require_holder(ob, model)
    target = model.map_targets.get(state.kind)
    if target is None or state.setting != target.group_field:
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
    if state.previous_weights is None:
        if group is not None:
            ob.vertex_groups.remove(group)
    else:
        _restore_weights(ob, group, state.previous_weights)
    for name, value in state.previous_max.items():
        setattr(holder, name, value)
    if getattr(holder, state.setting) != state.previous_setting:
        setattr(holder, state.setting, state.previous_setting)
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


def _require_holder(ob: bpy.types.Object, model: SceneModel) -> Any:
    """The struct holding the object's map fields (``SceneModel.map_holder``); FitInputError
    where the object cannot take a weight map."""
    name = getattr(ob, "name", repr(ob))
    label = model.modifier_label
    if getattr(ob, "type", None) != "MESH":
        raise FitInputError(
            f"{name} is not a mesh object; pick the mesh with the {label} modifier to write a weight map to"
        )
    holder = model.map_holder(ob) if model.find_modifier(ob) is not None else None
    if holder is None:
        raise FitInputError(f"{name} has no {label} modifier; add one to give it a weight map")
    if ob.mode == "EDIT":
        raise FitInputError(f"{name} is in Edit Mode; leave Edit Mode to write its vertex group weights")
    if ob.data.library is not None:
        raise FitInputError(
            f"{name}'s mesh is linked from a library; make it local to write its vertex groups"
        )
    return holder


def _target(ob: bpy.types.Object, model: SceneModel, kind: str) -> MapTarget:
    target = model.map_targets.get(kind)
    if target is None:
        raise FitInputError(
            f"{ob.name}: unknown map {kind!r} for the {model.name} model; use one of "
            f"{', '.join(model.map_targets)}"
        )
    return target


def _checked_weights(ob: bpy.types.Object, kind: str, weights: np.ndarray) -> np.ndarray:
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
    ob: bpy.types.Object, holder: Any, kind: str, target: MapTarget, max_values: dict[str, float]
) -> dict[str, float]:
    allowed = target.max_fields
    minima = dict(target.min_fields)
    checked: dict[str, float] = {}
    for name, value in max_values.items():
        if name not in allowed:
            raise FitInputError(
                f"{ob.name}: {name!r} is not a maximum of the {kind} map; use {', '.join(allowed)}"
            )
        prop = holder.bl_rna.properties[name]
        number = float(value)
        # Blender would clamp a value outside the field's range without a word
        if not math.isfinite(number) or not prop.hard_min <= number <= prop.hard_max:
            raise FitInputError(
                f"{ob.name}: {name} = {value} is outside Blender's range "
                f"[{prop.hard_min:g}, {prop.hard_max:g}]; give a value within it"
            )
        low = minima.get(name)
        # compared as Blender holds both, in float32: a Max equal to its minimum as written
        # (a map whose fitted range is one value) is not below the minimum's rounding
        if low is not None and np.float32(number) < np.float32(getattr(holder, low)):
            raise FitInputError(
                f"{ob.name}: {name} = {value} is below {low} ({getattr(holder, low):g}), "
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
