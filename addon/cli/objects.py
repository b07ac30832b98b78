"""Which objects the batch command fits, and each one's request: its panel settings with
the command line's choices laid over them."""

from __future__ import annotations

import argparse
from typing import Any

import bpy

from ..errors import FitInputError
from ..models.base import resolve_ties
from ..models.registry import MODEL_NAMES, object_model, scene_model
from ..request import FitRequest, FootageSpec, TargetSpec, footage_from_settings, request_from_object
from ..scene.checks import check_object
from .args import UsageError


def pick_objects(
    scene: bpy.types.Scene, names: list[str], targets: list[TargetSpec], model: str | None = None
) -> list[bpy.types.Object]:
    """``--object`` names, else every object of the scene with the model's modifier (``model``,
    else each object's own choice) when ``--target`` is given, else every mesh object with
    targets in its Fit settings (sorted by name)."""
    if names:
        objects = []
        for name in dict.fromkeys(names):
            ob = bpy.data.objects.get(name)
            if ob is None:
                raise UsageError(f"no object named '{name}'")
            if scene.objects.get(name) is None:
                raise UsageError(f"object '{name}' is not in scene '{scene.name}'")
            objects.append(ob)
        return objects
    target_names = {t.object_name for t in targets}
    if targets:
        # no saved settings needed: every cloth object of the scene gets the given targets
        objects = [
            o
            for o in scene.objects
            if o.type == "MESH"
            and o.name not in target_names
            and (scene_model(model) if model else object_model(o)).find_modifier(o)
        ]
    else:
        objects = [o for o in scene.objects if o.type == "MESH" and len(o.fit_to_target.targets) > 0]
    if not objects:
        raise UsageError("nothing to fit: no object has fit targets (use --object and --target)")
    return sorted(objects, key=lambda o: o.name)


def request_for(
    ob: bpy.types.Object,
    args: argparse.Namespace,
    chosen: list[str] | None,
    targets: list[TargetSpec],
    device: str | None,
    start_values: dict[str, Any] | None,
    tracks: tuple[str, str] | None = None,
) -> FitRequest:
    """The object's request from its panel settings, with the arguments applied (``--model``
    first: it becomes the object's model choice). ``tracks`` (clip, tracking object) make
    the footage the targets, seen through ``--camera``, else the object's Camera, else the
    scene camera; the object's binding list is used when it was made for that clip and
    tracking object, else the tracks are bound automatically."""
    if args.model:
        ob.fit_to_target.model = next(k for k, name in MODEL_NAMES.items() if name == args.model)
    try:
        check_object(ob)
        request = request_from_object(ob)
    except FitInputError as e:
        raise UsageError(str(e) if ob.name in str(e) else f"{ob.name}: {e}") from e
    if chosen is not None or args.no_ties:
        s = ob.fit_to_target
        ties = object_model(ob).ties
        base = chosen if chosen is not None else list(request.fit) + list(request.ties)
        ties_on = {tie.key: (not args.no_ties) and bool(getattr(s, tie.key)) for tie in ties}
        request.fit, request.ties = resolve_ties(base, ties_on, ties)
    if targets:
        request.targets = list(targets)
    if tracks is not None:
        s = ob.fit_to_target
        same = s.clip is not None and (s.clip.name, s.tracking_object) == tracks
        kept = request.footage.bindings if request.footage is not None and same else []
        if same and request.footage is None:
            kept = footage_from_settings(s, force=True).bindings
        request.targets = []
        camera = s.camera.name if s.camera is not None else ""
        request.footage = FootageSpec(tracks[0], tracks[1], camera, float(s.huber_px), kept)
    if args.camera:
        if request.footage is None:
            raise UsageError(f"--camera: '{ob.name}' is not fitted to tracks (use --target-tracks)")
        camera = bpy.data.objects.get(args.camera)
        if camera is None or camera.type != "CAMERA":
            raise UsageError(f"--camera {args.camera}: the scene file has no camera named '{args.camera}'")
        request.footage.camera = args.camera
    if args.tolerance_px is not None:
        request.tolerance_px = args.tolerance_px
    if device is not None:
        request.device = device
    if args.max_iters is not None:
        request.max_iterations = args.max_iters
    if args.time_budget is not None:
        request.time_budget_s = args.time_budget
    if args.tolerance is not None:
        request.tolerance_m = args.tolerance
    if args.loss is not None:
        request.loss = args.loss
    if start_values is not None:
        request.start_values = dict(start_values)
    if args.allow_unmodeled:
        request.allow_unmodeled = True
    return request
