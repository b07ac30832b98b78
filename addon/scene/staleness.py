"""Whether an object's fit result is out of date: a fingerprint of the fit's inputs, kept with
the result at write-back and compared with the scene's as the panel draws (main thread).

What counts, one digest per part (:data:`PARTS`):

- ``targets``: which targets (object or shape key, by name) at which frames; each target
  object's transform, parents, constraints and animation (F-curves, drivers, NLA), its
  modifiers' settings and its mesh (coordinates, edges, faces, shape keys); a shape-key
  target's coordinates; for footage, the clip, tracking object, camera (its placement as a
  target's), the track bindings and each track's markers;
- ``settings``: what the fit matches and how closely: the model, the parameters fitted and
  their ties, the loss, the tolerances, the start values, Ignore Unsupported Settings, the
  footage's robust threshold, and the weight maps fitted (kind, regions, smoothness, output
  group) with their regions' painted weights;
- ``mesh``: the cloth's mesh as the simulation starts from it: vertex count and rest
  coordinates, edges, faces, its shape keys (other than targets) and the modifiers above the
  simulation's;
- ``motion``: where the cloth is: its transform, parents, constraints and animation (the pin
  goals follow them);
- ``frame_range``: the simulation's cache range.

Not counted: the simulation modifier's own settings (Apply and Revert write the fitted values
there, and a bake switches it off), the bake, the iteration limit, time budget and device
(how long and where a fit runs, not what it matches), other vertex groups' weights (the
write-back of a map writes its own group), and what other
objects a modifier, constraint or driver refers to (named, not followed).

An animated channel counts by its F-curve, never by its value at the current frame, so
scrubbing the timeline leaves a result as it was. The datablock digests are cached and dropped
when a depsgraph update names one of the datablocks they read (:func:`forget`, from the
handlers :func:`install_handlers` adds); a 65,000-vertex target costs a few milliseconds
once after each edit of it, nothing while it is unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

import bpy
import numpy as np
from bpy.app.handlers import persistent

from ..errors import FitInputError
from ..mesh_read import vertex_group_weights
from ..models.registry import object_model, scene_model
from ..request import FitRequest, following, request_from_object
from .input_digest import (
    Deps,
    clip_digest,
    dep,
    mesh_digest,
    modifiers_digest,
    object_digest,
    placement_digest,
)

PARTS = ("targets", "settings", "mesh", "motion", "frame_range")
PART_LABELS = {
    "targets": "targets",
    "settings": "fit settings",
    "mesh": "cloth mesh",
    "motion": "cloth motion",
    "frame_range": "frame range",
}
FINGERPRINT_KEY = "fingerprint"  # where a result record keeps its fingerprint

# (kind, name, detail) -> (digest, the datablocks it read)
_cache: dict[tuple[str, str, str], tuple[str, Deps]] = {}


def _digest(data: Any) -> str:
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest()


def _cached(key: tuple[str, str, str], compute: Callable[[Deps], str]) -> str:
    found = _cache.get(key)
    if found is None:
        deps: Deps = set()
        found = (compute(deps), deps)
        _cache[key] = found
    return found[0]


def forget(updated: set[tuple[str, str]] | None = None) -> None:
    """Drop the cached digests that read any of ``updated`` ((ID type, full name)); all of
    them with None."""
    if updated is None:
        _cache.clear()
        return
    for key in [k for k, (_, deps) in _cache.items() if deps & updated]:
        del _cache[key]


def fit_fingerprint(ob: bpy.types.Object, request: FitRequest | None = None) -> dict[str, str]:
    """Part -> digest of the fit's inputs (see the module docstring): of ``request`` (the one a
    fit ran), or of the object's panel settings. Never raises: settings the add-on cannot read
    (start values that are not JSON) give a digest of the error."""
    if request is None:
        try:
            request = request_from_object(ob)
        except FitInputError as e:
            unreadable = _digest(["unreadable", str(e)])
            cloth = _cloth_parts(ob, object_model(ob).name, ())
            return {**cloth, "targets": unreadable, "settings": unreadable}
    skip = [t.shape_key for t in request.targets if t.shape_key]
    return {
        **_cloth_parts(ob, request.model, skip),
        "targets": _targets_digest(ob, request),
        "settings": _settings_digest(request, _region_weights(ob, request)),
    }


def _region_weights(ob: bpy.types.Object, request: FitRequest) -> list[str]:
    """The painted weights of every map region's vertex group (a digest each)."""
    names = [name for asked in request.maps for name in asked.regions]
    if not names or ob.type != "MESH":
        return []
    return [hashlib.sha1(vertex_group_weights(ob.data, ob, name).tobytes()).hexdigest() for name in names]


def _settings_digest(request: FitRequest, region_weights: list[str]) -> str:
    footage = request.footage
    maps = [dataclasses.asdict(asked) for asked in request.maps]
    # without maps the digest is what it was before maps existed (older results stay current)
    extra = {"maps": maps, "region_weights": region_weights} if maps else {}
    return _digest(
        {
            **extra,
            "model": request.model,
            "fit": sorted(request.fit),
            "ties": request.ties,
            "loss": request.loss,
            "tolerance_m": request.tolerance_m,
            "tolerance_px": request.tolerance_px,
            "start_values": request.start_values,
            "allow_unmodeled": request.allow_unmodeled,
            "huber_px": footage.huber_px if footage is not None else None,
        }
    )


def _targets_digest(ob: bpy.types.Object, request: FitRequest) -> str:
    parts: list[Any] = []
    for t in request.targets:
        if t.shape_key:
            parts.append((t.frame, "key", t.shape_key, _shape_key_digest(ob, t.shape_key)))
        else:
            parts.append((t.frame, "object", t.object_name, _target_object_digest(t.object_name)))
    footage = request.footage
    if footage is not None:
        clip = bpy.data.movieclips.get(footage.clip)
        camera = bpy.data.objects.get(footage.camera) if footage.camera else bpy.context.scene.camera
        bindings = [(b.track, b.how, b.vertices, b.barycentric, b.weight) for b in footage.bindings]
        clip_key = ("clip", footage.clip, footage.tracking_object)
        markers = (
            _cached(clip_key, lambda deps: clip_digest(clip, footage.tracking_object, deps)) if clip else None
        )
        parts.append((footage.clip, footage.tracking_object, bindings, markers, _camera_digest(camera)))
    return _digest(parts)


def _target_object_digest(name: str) -> list[str | None] | None:
    """A target object's placement and modifiers, and its mesh: two digests, so that moving a
    large target reads its transform again, not its mesh."""
    target = bpy.data.objects.get(name)
    if target is None:
        return None
    return [
        _cached(("object", target.name_full, ""), lambda deps: object_digest(target, deps)),
        _data_digest(target),
    ]


def _data_digest(ob: bpy.types.Object, skip_keys: Any = ()) -> str | None:
    """The object's mesh (its shape keys but ``skip_keys``), cached by the mesh's name."""
    me = ob.data
    if not isinstance(me, bpy.types.Mesh):
        return None

    def compute(deps: Deps) -> str:
        h = hashlib.sha1()
        mesh_digest(h, me, deps, skip_keys)
        return h.hexdigest()

    return _cached(("mesh", me.name_full, json.dumps(sorted(skip_keys))), compute)


def _camera_digest(camera: bpy.types.Object | None) -> list[str] | None:
    if camera is None:
        return None
    key = ("placement", camera.name_full, "")
    return [camera.name_full, _cached(key, lambda deps: _placement(camera, deps))]


def _shape_key_digest(ob: bpy.types.Object, name: str) -> str | None:
    keys = ob.data.shape_keys if ob.type == "MESH" else None
    block = keys.key_blocks.get(name) if keys is not None else None
    if block is None:
        return None

    def compute(deps: Deps) -> str:
        deps.add(dep(keys))
        co = np.empty(len(block.data) * 3, dtype=np.float32)
        block.data.foreach_get("co", co)
        return hashlib.sha1(co.tobytes()).hexdigest()

    return _cached(("key", keys.name_full, name), compute)


def _placement(ob: bpy.types.Object, deps: Deps) -> str:
    h = hashlib.sha1()
    placement_digest(h, ob, deps)
    return h.hexdigest()


def _cloth_parts(ob: bpy.types.Object, model_name: str, skip_keys: Any) -> dict[str, str]:
    """The parts of the cloth object itself: its mesh, motion and cache range."""
    model = scene_model(model_name)
    mod = model.find_modifier(ob)
    above = list(ob.modifiers)[: list(ob.modifiers).index(mod)] if mod is not None else []
    detail = mod.name if mod is not None else ""

    def modifiers(deps: Deps) -> str:
        deps.add(dep(ob))
        h = hashlib.sha1()
        modifiers_digest(h, above)
        return h.hexdigest()

    frames = model.cache_frame_range(mod) if mod is not None else None  # none: refused by the fit
    above_digest = _cached(("modifiers", ob.name_full, detail), modifiers)
    return {
        "mesh": _digest([above_digest, _data_digest(ob, skip_keys)]),
        "motion": _cached(("placement", ob.name_full, ""), lambda deps: _placement(ob, deps)),
        "frame_range": _digest(list(frames) if frames is not None else None),
    }


def changed_parts(ob: bpy.types.Object, record: dict[str, Any]) -> list[str] | None:
    """The labels (:data:`PART_LABELS`) of what changed since the fit whose result ``record``
    is, in :data:`PARTS` order; [] when nothing did; None when the record keeps no fingerprint
    (older results, or results applied from a batch report of another scene)."""
    stored = record.get(FINGERPRINT_KEY)
    if not isinstance(stored, dict):
        return None
    now = fit_fingerprint(ob, _shared_request(ob, record))
    return [PART_LABELS[part] for part in PARTS if stored.get(part) != now.get(part)]


def _shared_request(ob: bpy.types.Object, record: dict[str, Any]) -> FitRequest | None:
    """For a member of a shared fit, the request its panel settings make as that fit made it:
    the lead's (the run's first object's) parameters, ties and tolerances (None otherwise,
    or when a request cannot be made: :func:`fit_fingerprint` says so)."""
    names = record.get("run_objects") or []
    lead = bpy.data.objects.get(names[0]) if record.get("shared") and names else None
    if lead is None or lead == ob or getattr(lead, "fit_to_target", None) is None:
        return None
    try:
        return following(request_from_object(ob), request_from_object(lead))
    except FitInputError:
        return None


# -- keeping the cache honest -----------------------------------------------------------------


@persistent
def _on_depsgraph_update(_scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    updated = set()
    for update in depsgraph.updates:
        original = getattr(update.id, "original", None) or update.id
        try:
            updated.add(dep(original))
        except (AttributeError, ReferenceError):
            continue
    forget(updated)


@persistent
def _on_reload(*_args: Any) -> None:
    forget()


_HANDLERS = (
    ("depsgraph_update_post", _on_depsgraph_update),
    ("load_post", _on_reload),
    ("undo_post", _on_reload),
    ("redo_post", _on_reload),
)


def install_handlers() -> None:
    """Drop cached digests when the scene changes (depsgraph updates), a file is opened, or an
    undo or redo replaces the data; idempotent."""
    for name, handler in _HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if handler not in handlers:
            handlers.append(handler)


def remove_handlers() -> None:
    for name, handler in _HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while handler in handlers:
            handlers.remove(handler)
    forget()
