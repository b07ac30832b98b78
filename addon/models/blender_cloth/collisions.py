"""The Collision objects a cloth meets and its collision settings, read as Blender's cloth
finds and samples them (``collision.cc``, ``MOD_collision.cc``).

Blender lists the colliders in the order of the view layer's bases (of the collision
collection's objects when one is set), one level into instanced collections, and keeps
those whose Collision modifier is on and whose ``collision.use`` is set. Each collider's
Collision modifier stores its mesh in world space once per frame, as it is at the
modifier's place in the stack; the cloth moves it linearly from the previous frame's within
each substep. :class:`ColliderSampler` reads the same meshes frame by frame in the pass that
samples the pin goals.
"""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np

from ....warp_core.models.blender_cloth import ClothParams
from ....warp_core.models.blender_cloth.colliders import ClothCollider
from ...mesh_read import object_matrix, triangles, vertex_group_weights, world_positions


def collision_objects(
    scene: bpy.types.Scene,
    ob: bpy.types.Object,
    mod: bpy.types.ClothModifier,
    view_layer: bpy.types.ViewLayer | None = None,
) -> list[bpy.types.Object]:
    """The objects the cloth collides with, in Blender's order; none when the cloth's
    Object Collisions are off. ``view_layer``: the one the scene is evaluated for (the
    context's when it belongs to ``scene``, else the scene's first)."""
    c = mod.collision_settings
    if not c.use_collision:
        return []
    if c.collection is not None:
        bases = _collection_bases(c.collection)
    else:
        bases = _view_layer_bases(view_layer or _view_layer_of(scene))
    found = []
    for base in bases:
        found += [o for o in _with_instanced(base) if _collides(o, ob)]
    return found


def collision_settings_values(
    ob: bpy.types.Object, mod: bpy.types.ClothModifier, me: bpy.types.Mesh | None = None
) -> dict[str, Any]:
    """The cloth's ``collision_settings`` as ClothParams fields: object collisions and self
    collisions. ``me``: the mesh entering the cloth modifier (the object's own mesh when
    None), whose vertices of weight > 0 in the object-collision group collide with no object,
    and those in the self-collision group with no part of the cloth (a triangle of only such
    vertices, as Blender flags them)."""
    c = mod.collision_settings
    me = me if me is not None else ob.data
    weights = vertex_group_weights(me, ob, c.vertex_group_object_collisions)
    self_weights = vertex_group_weights(me, ob, c.vertex_group_self_collisions)
    return {
        "distance_min": float(c.distance_min),
        "impulse_clamp": float(c.impulse_clamp),
        "collision_quality": int(c.collision_quality),
        "collision_excluded": tuple(int(i) for i in np.flatnonzero(weights > 0.0)),
        "use_self_collision": bool(c.use_self_collision),
        "self_distance_min": float(c.self_distance_min),
        "self_friction": float(c.self_friction),
        "self_impulse_clamp": float(c.self_impulse_clamp),
        "self_collision_excluded": tuple(int(i) for i in np.flatnonzero(self_weights > 0.0)),
    }


class ColliderSampler:
    """Collects the colliders' world-space meshes at each frame of the goal pass.

    Used as a context manager around the pass (modifiers after a collider's Collision
    modifier are off meanwhile, as they do not shape what the cloth meets) and called as its
    ``on_frame(k, frame)``, with ``k = 0`` at the cache start frame and the frames
    consecutive. At ``k = 0`` the cloth modifier is off, so the cloth object's evaluated
    mesh is its input mesh, which the object-collision group is read from.
    """

    def __init__(
        self,
        scene: bpy.types.Scene,
        ob: bpy.types.Object,
        mod: bpy.types.ClothModifier,
        depsgraph: bpy.types.Depsgraph,
    ) -> None:
        self.ob, self.mod, self.depsgraph = ob, mod, depsgraph
        self.objects = collision_objects(scene, ob, mod, depsgraph.view_layer)
        self.frames: list[float] = []
        self.triangles: list[np.ndarray] = []
        self.positions: list[list[np.ndarray]] = [[] for _ in self.objects]
        self.collision_values: dict[str, Any] | None = None
        self._switched: list[bpy.types.Modifier] = []

    def __enter__(self) -> ColliderSampler:
        seen = set()
        for o in self.objects:
            if o.as_pointer() in seen:
                continue
            seen.add(o.as_pointer())
            after = list(o.modifiers)[o.modifiers.find(_collision_modifier(o).name) + 1 :]
            for m in after:
                if m.show_viewport:
                    m.show_viewport = False
                    self._switched.append(m)
        return self

    def __exit__(self, *exc: object) -> None:
        for m in self._switched:
            m.show_viewport = True
        self._switched.clear()

    def __call__(self, k: int, frame: float) -> None:
        if k == 0:
            me = self.ob.evaluated_get(self.depsgraph).data
            self.collision_values = collision_settings_values(self.ob, self.mod, me)
        self.frames.append(frame)
        for i, o in enumerate(self.objects):
            o_eval = o.evaluated_get(self.depsgraph)
            me = o_eval.data
            if k == 0:
                self.triangles.append(triangles(me))
            samples = self.positions[i]
            if samples and len(me.vertices) != len(samples[0]):
                first = f"{len(samples[0])} at frame {self.frames[0]:g}"
                now = f"{len(me.vertices)} at {frame:g}"
                raise ValueError(
                    f"Collision object '{o.name}' changes its vertex count between frames ({first}, {now}): "
                    "colliders of changing topology are not simulated"
                )
            x = world_positions(me.vertices, object_matrix(o_eval))
            # a collider standing still shares one array over its frames
            samples.append(samples[-1] if samples and np.array_equal(samples[-1], x) else x)

    def colliders(self) -> tuple[ClothCollider, ...]:
        """What was sampled, one :class:`ClothCollider` each; frames after a collider's
        last change are left out (past its last sample a collider stands still)."""
        if len(self.triangles) != len(self.objects):
            raise ValueError("the colliders were not sampled at the cache start frame")
        if any(f != self.frames[0] + k for k, f in enumerate(self.frames)):
            raise ValueError("colliders must be sampled at consecutive whole frames from the cache start")
        found = []
        for o, tris, samples in zip(self.objects, self.triangles, self.positions, strict=True):
            last = max((k for k in range(1, len(samples)) if samples[k] is not samples[k - 1]), default=0)
            s = o.collision
            found.append(
                ClothCollider(
                    name=o.name,
                    triangles=tris,
                    positions=np.stack(samples[: last + 1]),
                    thickness_outer=float(s.thickness_outer),
                    friction=float(s.cloth_friction),
                    use_culling=bool(s.use_culling),
                    use_normal=bool(s.use_normal),
                )
            )
        return tuple(found)

    def settings(self, params: ClothParams) -> ClothParams:
        """``params`` with the sampled colliders and the cloth's collision settings."""
        values = dict(self.collision_values or collision_settings_values(self.ob, self.mod))
        return params.replace(colliders=self.colliders(), **values)


def _collision_modifier(o: bpy.types.Object) -> bpy.types.Modifier | None:
    # Blender allows one Collision modifier per object and looks up the first
    return next((m for m in o.modifiers if m.type == "COLLISION"), None)


def _collides(o: bpy.types.Object, cloth: bpy.types.Object) -> bool:
    m = _collision_modifier(o)
    # a Collision modifier that is off keeps no mesh, and the cloth skips the object
    return m is not None and m.show_viewport and o.type == "MESH" and bool(o.collision.use) and o != cloth


def _with_instanced(o: bpy.types.Object) -> list[bpy.types.Object]:
    """The object, then the objects of the collection it instances (Blender adds those,
    at their own transforms, whatever their visibility)."""
    inner = list(o.instance_collection.all_objects) if o.instance_collection is not None else []
    return [o, *inner]


def _view_layer_of(scene: bpy.types.Scene) -> bpy.types.ViewLayer:
    current = bpy.context.view_layer
    if current is not None and any(v == current for v in scene.view_layers):
        return current
    return scene.view_layers[0]


def _view_layer_bases(view_layer: bpy.types.ViewLayer) -> list[bpy.types.Object]:
    """The view layer's objects enabled in the viewport, in base order: not disabled
    themselves, and in a collection neither excluded nor disabled on the way down (the
    eye icons, which only hide, do not count)."""
    enabled: set[int] = set()

    def walk(layer: bpy.types.LayerCollection, disabled: bool) -> None:
        if layer.exclude:
            return
        disabled = disabled or layer.collection.hide_viewport
        if not disabled:
            enabled.update(o.as_pointer() for o in layer.collection.objects)
        for child in layer.children:
            walk(child, disabled)

    walk(view_layer.layer_collection, False)
    return [o for o in view_layer.objects if o.as_pointer() in enabled and not o.hide_viewport]


def _collection_bases(collection: bpy.types.Collection) -> list[bpy.types.Object]:
    """The collection's objects, recursively, in Blender's order, except those only in
    collections disabled in the viewport (here the objects' own flags do not count)."""
    enabled: set[int] = set()

    def walk(c: bpy.types.Collection, disabled: bool) -> None:
        disabled = disabled or c.hide_viewport
        if not disabled:
            enabled.update(o.as_pointer() for o in c.objects)
        for child in c.children:
            walk(child, disabled)

    walk(collection, False)
    return [o for o in collection.all_objects if o.as_pointer() in enabled]
