"""Digests (short hashes) of what a fit reads from the scene's datablocks: a mesh's geometry,
an object's transform and animation, its modifiers and constraints, a movie clip's markers
(main thread; read, never written).

Each digest is computed from the datablock's own inputs, not from its state at the current
frame: an animated channel counts by its F-curve, not by the value it has now, so scrubbing
the timeline never changes a digest, while a key moved, a transform changed or a vertex
edited does. Each digest comes with the datablocks it read (``Deps``), so a cache can drop it
when one of them changes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import bpy
import numpy as np

# (ID type, full name) of each datablock a digest read, as depsgraph updates name them
Deps = set[tuple[str, str]]

# transform channels of an object; an animated one counts by its F-curve instead
TRANSFORM_PROPS = (
    "location",
    "rotation_mode",
    "rotation_euler",
    "rotation_quaternion",
    "rotation_axis_angle",
    "scale",
    "delta_location",
    "delta_rotation_euler",
    "delta_rotation_quaternion",
    "delta_scale",
)


def dep(id_block: bpy.types.ID) -> tuple[str, str]:
    return (id_block.id_type, id_block.name_full)


def plain(value: Any) -> Any:
    """A property value as plain data for a digest: numbers, strings, lists; an ID by its full
    name; anything else (a struct) None, as its text would hold a memory address."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bpy.types.ID):
        return value.name_full
    if isinstance(value, set | frozenset):
        return sorted(value)
    if isinstance(value, bpy.types.bpy_struct):
        return None
    try:
        return [plain(v) for v in value]
    except TypeError:
        return None


def rna_values(struct: bpy.types.bpy_struct, skip: Iterable[str] = ()) -> list[Any]:
    """(identifier, value) of every property of ``struct`` but collections and nested
    structs, in definition order: a modifier's or a constraint's settings."""
    skipped = {"rna_type", *skip}
    out = []
    for prop in struct.bl_rna.properties:
        if prop.identifier in skipped or prop.type == "COLLECTION":
            continue
        try:
            value = getattr(struct, prop.identifier)
        except (AttributeError, RuntimeError):
            continue
        out.append((prop.identifier, plain(value)))
    custom = getattr(struct, "keys", None)  # a Geometry Nodes modifier's inputs live here
    if callable(custom):
        try:
            out += [(key, plain(struct[key])) for key in sorted(custom())]
        except (TypeError, KeyError):
            pass
    return out


def _array(collection: Any, attribute: str, dtype: type, width: int) -> bytes:
    data = np.empty(len(collection) * width, dtype=dtype)
    collection.foreach_get(attribute, data)
    return data.tobytes()


def mesh_digest(h: Any, me: bpy.types.Mesh, deps: Deps, skip_keys: Iterable[str] = ()) -> None:
    """The mesh's vertex coordinates, edges and faces (their corners in order), then its
    shape keys but ``skip_keys``: each key's coordinates and settings, the keys' animation."""
    deps.add(dep(me))
    h.update(f"mesh {len(me.vertices)} {len(me.edges)} {len(me.polygons)}".encode())
    for name, dtype, width, collection, attribute in _GEOMETRY:
        stored = me.attributes.get(name)
        if stored is not None and stored.data_type == dtype[0]:  # read whole: 20x faster
            h.update(_array(stored.data, dtype[1], dtype[2], width))
        else:
            h.update(_array(getattr(me, collection), attribute, dtype[2], width))
    h.update(_array(me.polygons, "loop_total", np.int32, 1))  # no attribute holds the face sizes
    keys = me.shape_keys
    if keys is None:
        return
    deps.add(dep(keys))
    skipped = set(skip_keys)
    animated = animated_paths(keys)
    h.update(repr((keys.use_relative, keys.eval_time if "eval_time" not in animated else None)).encode())
    for block in keys.key_blocks:
        if block.name in skipped:
            continue
        value = None if f'key_blocks["{block.name}"].value' in animated else block.value
        settings = (block.name, value, block.mute, block.relative_key.name, block.vertex_group)
        h.update(repr(settings).encode())
        h.update(_array(block.data, "co", np.float32, 3))
    animation_digest(h, keys, deps)


# a mesh's geometry as Blender 5.0 stores it: (attribute, (its data type, the value to read,
# the numpy type), values per item, and the slower per-item collection that gives the same)
_GEOMETRY = (
    ("position", ("FLOAT_VECTOR", "vector", np.float32), 3, "vertices", "co"),
    (".edge_verts", ("INT32_2D", "value", np.int32), 2, "edges", "vertices"),
    (".corner_vert", ("INT", "value", np.int32), 1, "loops", "vertex_index"),
)


def animated_paths(id_block: bpy.types.ID) -> set[str]:
    """The data paths an action or a driver of the datablock animates."""
    ad = id_block.animation_data
    if ad is None:
        return set()
    return {fcurve.data_path for fcurve in [*_action_fcurves(ad), *ad.drivers]}


def _action_fcurves(animation_data: Any) -> list[Any]:
    """Every F-curve of the animation's actions: its action's (all layers, strips and slots)
    and its NLA strips' actions'."""
    actions = [animation_data.action] + [
        strip.action for track in animation_data.nla_tracks for strip in track.strips
    ]
    found = []
    for action in actions:
        if action is None:
            continue
        for layer in action.layers:
            for strip in layer.strips:
                for bag in getattr(strip, "channelbags", ()):
                    found += list(bag.fcurves)
    return found


def animation_digest(h: Any, id_block: bpy.types.ID, deps: Deps) -> None:
    """The datablock's animation: each F-curve's keys (position, handles, interpolation),
    modifiers and drivers, and the NLA strips' timing."""
    ad = id_block.animation_data
    if ad is None:
        return
    if ad.action is not None:
        deps.add(dep(ad.action))
        h.update(f"action {ad.action.name_full} {getattr(ad.action_slot, 'identifier', '')}".encode())
    for track in ad.nla_tracks:
        for strip in track.strips:
            if strip.action is not None:
                deps.add(dep(strip.action))
            timing = (track.mute, strip.mute, strip.frame_start, strip.frame_end, strip.influence)
            h.update(repr((plain(strip.action), strip.blend_type, timing)).encode())
    for fcurve in [*_action_fcurves(ad), *ad.drivers]:
        points = fcurve.keyframe_points
        h.update(f"fcurve {fcurve.data_path} {fcurve.array_index} {fcurve.mute} {len(points)}".encode())
        for attribute in ("co", "handle_left", "handle_right"):
            h.update(_array(points, attribute, np.float32, 2))
        h.update(repr([(p.interpolation, p.easing) for p in points]).encode())
        h.update(repr([rna_values(m) for m in fcurve.modifiers]).encode())
    for fcurve in ad.drivers:  # the expression and what it reads (not the values read)
        driver = fcurve.driver
        targets = [
            (v.name, v.type, [(plain(t.id), t.data_path) for t in v.targets]) for v in driver.variables
        ]
        h.update(repr((driver.type, driver.expression, targets)).encode())


def placement_digest(h: Any, ob: bpy.types.Object, deps: Deps) -> None:
    """Where the object is: its transform channels (an animated one by its F-curve), its
    animation, constraints, and its parents' placement, up the chain."""
    seen = set()
    while ob is not None and ob.name_full not in seen:
        seen.add(ob.name_full)
        deps.add(dep(ob))
        animated = animated_paths(ob)
        values = [(p, None if p in animated else plain(getattr(ob, p))) for p in TRANSFORM_PROPS]
        parent = (plain(ob.parent), ob.parent_type, ob.parent_bone, plain(ob.matrix_parent_inverse))
        h.update(repr((ob.name_full, values, parent)).encode())
        h.update(repr([rna_values(c) for c in ob.constraints]).encode())
        animation_digest(h, ob, deps)
        ob = ob.parent


def modifiers_digest(h: Any, modifiers: Iterable[bpy.types.Modifier]) -> None:
    """Each modifier's type and settings, in stack order."""
    for mod in modifiers:
        h.update(repr((mod.type, rna_values(mod))).encode())


def object_digest(ob: bpy.types.Object, deps: Deps) -> str:
    """A target object's inputs besides its mesh (:func:`mesh_digest`): its placement and its
    modifiers."""
    h = hashlib.sha1()
    placement_digest(h, ob, deps)
    modifiers_digest(h, ob.modifiers)
    return h.hexdigest()


def clip_digest(clip: bpy.types.MovieClip, tracking_object: str, deps: Deps) -> str:
    """A movie clip's tracking data for a fit: the lens, each track's markers (frame, position,
    muted) of the tracking object (the camera's tracks when ``tracking_object`` is empty)."""
    deps.add(dep(clip))
    h = hashlib.sha1()
    tracking = clip.tracking
    h.update(repr((clip.name_full, tuple(clip.size), rna_values(tracking.camera))).encode())
    owner = tracking.objects.get(tracking_object) if tracking_object else None
    tracks = owner.tracks if owner is not None else tracking.tracks
    for track in tracks:
        markers = track.markers
        h.update(f"track {track.name} {len(markers)}".encode())
        h.update(_array(markers, "frame", np.int32, 1))
        h.update(_array(markers, "co", np.float32, 2))
        h.update(_array(markers, "mute", np.bool_, 1))
        if track.has_bundle:
            h.update(np.asarray(track.bundle, dtype=np.float32).tobytes())
    return h.hexdigest()
