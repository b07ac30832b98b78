"""The force fields acting on a cloth, read for the model (``ClothParams.force_fields``) or
named when the model does not simulate them.

Simulated: Wind and Force fields of Point or Plane shape with the Sphere falloff (power,
minimum and maximum distance), any Z direction, flow, wind factor and strength, standing
still (neither the field object nor its parents animated). Anything else a field acting on
the cloth uses is refused by name.
"""

from __future__ import annotations

from collections.abc import Iterator

import bpy

from ....warp_core.models.blender_cloth.fields import FIELD_COLUMNS, FORCE, PLANE, POINT, WIND
from .coverage import FIELD_WEIGHTS

_TYPES = {"WIND": WIND, "FORCE": FORCE}
_SHAPES = {"POINT": POINT, "PLANE": PLANE}
_Z = {"BOTH": 0.0, "POSITIVE": 1.0, "NEGATIVE": 2.0}


def acting_fields(
    scene: bpy.types.Scene, mod: bpy.types.ClothModifier
) -> Iterator[tuple[bpy.types.Object, float]]:
    """(field object, effector weight all * its type's) of every field that acts on the cloth."""
    ob = mod.id_data
    w = mod.settings.effector_weights
    pool = w.collection.all_objects if w.collection is not None else scene.objects
    for o in sorted(pool, key=lambda o: o.name):
        field = o.field
        if o == ob or field is None or field.type == "NONE":
            continue
        name = FIELD_WEIGHTS.get(field.type)
        own = float(getattr(w, name)) if name else 1.0  # a field type newer than this list
        weight = float(w.all) * own
        if weight != 0.0:
            yield o, weight


def unsupported(o: bpy.types.Object, weight: float, mod: bpy.types.ClothModifier) -> str | None:
    """Why the model cannot simulate this field acting on the cloth, or None."""
    field = o.field
    kind = field.type.replace("_", " ").title()
    where = f"Force Field '{o.name}' ({kind}"
    if field.type not in _TYPES:
        w = mod.settings.effector_weights
        name = FIELD_WEIGHTS.get(field.type)
        own = float(getattr(w, name)) if name else 1.0
        return (
            f"{where}) acts on the cloth (effector_weights.all {w.all:g}, "
            f"effector_weights.{name or field.type.lower()} {own:g}); Wind and Force fields are simulated"
        )
    if field.shape not in _SHAPES:
        return f"{where}) has shape {field.shape.title()} (field.shape); Point and Plane are simulated"
    if field.falloff_type != "SPHERE":
        return (
            f"{where}) has the {field.falloff_type.title()} falloff (field.falloff_type); Sphere is simulated"
        )
    if field.noise != 0.0:
        return f"{where}) has noise {field.noise:g} (field.noise)"
    if field.use_absorption:
        return f"{where}) uses absorption (field.use_absorption)"
    if any(p.animation_data is not None and p.animation_data.action is not None for p in _lineage(o)):
        return f"{where}) is animated; fields standing still are simulated"
    return None


def field_rows(scene: bpy.types.Scene, mod: bpy.types.ClothModifier) -> tuple[tuple[float, ...], ...]:
    """The simulated fields acting on the cloth as rows of ``FIELD_COLUMNS`` (the others are
    left out: the input check refuses them unless overridden)."""
    rows = []
    for o, weight in acting_fields(scene, mod):
        if unsupported(o, weight, mod) is not None:
            continue
        f = o.field
        m = o.matrix_world
        z = m.col[2].xyz.normalized()
        row = {
            "type": _TYPES[f.type],
            "shape": _SHAPES[f.shape],
            "origin_x": m.translation.x,
            "origin_y": m.translation.y,
            "origin_z": m.translation.z,
            "normal_x": z.x,
            "normal_y": z.y,
            "normal_z": z.z,
            "strength": f.strength,
            "flow": f.flow,
            "wind_factor": f.wind_factor,
            "weight": weight,
            "z_direction": _Z[f.z_direction],
            "use_min": float(f.use_min_distance),
            "min_distance": f.distance_min,
            "use_max": float(f.use_max_distance),
            "max_distance": f.distance_max,
            "power": f.falloff_power,
            "gravitation": float(f.use_gravity_falloff),
            "apply_to_location": float(f.apply_to_location),
        }
        rows.append(tuple(float(row[c]) for c in FIELD_COLUMNS))
    return tuple(rows)


def _lineage(o: bpy.types.Object) -> Iterator[bpy.types.Object]:
    while o is not None:
        yield o
        o = o.parent
