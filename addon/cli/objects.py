"""Which objects the batch command fits, and each one's request: its panel settings with
the command line's choices laid over them."""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

import bpy

from ..errors import FitInputError
from ..models.base import resolve_ties
from ..models.registry import MODEL_NAMES, object_model, scene_model
from ..request import (
    FitRequest,
    FootageSpec,
    MapRequest,
    TargetSpec,
    footage_from_settings,
    map_settings,
    request_from_object,
)
from ..scene.checks import check_object
from .args import MAP_KINDS, UsageError


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
    maps: list[MapRequest] | None = None,
) -> FitRequest:
    """The object's request from its panel settings, with the arguments applied (``--model``
    first: it becomes the object's model choice). ``tracks`` (clip, tracking object) make
    the footage the targets, seen through ``--camera``, else the object's Camera, else the
    scene camera; the object's binding list is used when it was made for that clip and
    tracking object, else the tracks are bound automatically. ``maps`` (:func:`map_requests`)
    replace the object's own; without ``chosen`` they are all the fit moves."""
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
    if maps:
        _with_maps(ob, request, maps, chosen is None)
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


def map_requests(args: argparse.Namespace, chosen: list[str] | None) -> list[MapRequest]:
    """The maps of ``--fit-map``, ``--map-regions`` and ``--map-smoothness``, the same for every
    object; UsageError naming the option and what to change. ``chosen`` (``--fit``) may not
    hold a parameter a map sets."""
    if not args.fit_map:
        for option in ("--map-regions", "--map-smoothness"):
            if getattr(args, option[2:].replace("-", "_")) is not None:
                raise UsageError(
                    f"{option} describes the maps of --fit-map: add --fit-map KIND or leave out {option}"
                )
        return []
    if args.shared:
        raise UsageError(
            "--fit-map fits each object's own map: leave out --shared, or fit the objects one by one"
        )
    regions = _regions(args.map_regions) if args.map_regions is not None else []
    smoothness = args.map_smoothness
    if smoothness is not None and regions:
        raise UsageError(
            "--map-smoothness is the prior of a free map, and --map-regions makes each map one value per "
            "region: leave out one of them"
        )
    if smoothness is not None and not (math.isfinite(smoothness) and smoothness >= 0.0):
        raise UsageError(
            f"--map-smoothness {smoothness:g}: give a finite number of at least 0 (0: no smoothing)"
        )
    maps: list[MapRequest] = []
    for spec in args.fit_map:
        kind, colon, group = spec.partition(":")
        if kind == "shrink":
            raise UsageError(
                f"--fit-map {spec}: the shrink group changes the cloth's rest lengths, which the fit takes "
                f"as given, so it is not fitted; choose from {', '.join(MAP_KINDS)}"
            )
        if kind not in MAP_KINDS:
            raise UsageError(
                f"--fit-map {spec}: unknown map kind '{kind}'; choose from {', '.join(MAP_KINDS)}"
            )
        if colon and not group:
            raise UsageError(
                f"--fit-map {spec}: no group after ':'; name the vertex group to write, or leave out ':' "
                "for the modifier's group"
            )
        if any(m.kind == kind for m in maps):
            raise UsageError(f"--fit-map {kind} is given twice: fit each map kind once")
        if group in regions:
            raise UsageError(
                f"--fit-map {spec}: '{group}' is a region (--map-regions), whose painting the fitted weights "
                "would replace: write them to another group"
            )
        same = next((m for m in maps if group and m.group == group), None)
        if same is not None:
            raise UsageError(
                f"--fit-map {spec}: the {same.kind} map is written to '{group}' too: give each map its "
                "own group"
            )
        maps.append(MapRequest(kind, group, list(regions), smoothness))
    if not regions and len(maps) > 1:
        raise UsageError(
            f"--fit-map {', '.join(m.kind for m in maps)}: without --map-regions each map is free, and a "
            "free map is fitted alone: give one --fit-map, or paint regions and list them in --map-regions"
        )
    set_by_maps = {name for model in MODEL_NAMES.values() for name in map_settings(maps, model)}
    clash = [name for name in chosen or [] if name in set_by_maps]
    if clash:
        them = "it" if len(clash) == 1 else "them"
        raise UsageError(
            f"--fit {','.join(clash)}: the fitted map sets {them} (the range its weights span); leave {them} "
            "out of --fit"
        )
    return maps


def _regions(text: str) -> list[str]:
    """``--map-regions G1,G2,...``: vertex group names, once each."""
    names = [name.strip() for name in text.split(",")]
    if "" in names:
        raise UsageError(
            f"--map-regions {text}: an empty region name; list the painted vertex groups separated by "
            "commas (e.g. Collar,Body)"
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"--map-regions: {', '.join(twice)} listed twice; list each region once")
    bad = [name for name in names if ":" in name]
    if bad:
        raise UsageError(f"--map-regions: the region name '{bad[0]}' has a ':'; rename the vertex group")
    return names


def _with_maps(ob: bpy.types.Object, request: FitRequest, maps: list[MapRequest], alone: bool) -> None:
    """``request`` fitting ``maps`` (``alone``: nothing else); a tie's follower a map sets
    follows the map instead."""
    fitted = scene_model(request.model).map_kinds
    other = [m.kind for m in maps if m.kind not in fitted]
    if other:
        which = f"only {', '.join(fitted)}" if fitted else "no weight map"
        raise UsageError(
            f"--fit-map {other[0]}: '{ob.name}' is fitted with the {request.model} model, which fits "
            f"{which}: leave out --fit-map, or --object another object"
        )
    request.maps = [dataclasses.replace(m, regions=list(m.regions)) for m in maps]
    if alone:
        request.fit, request.ties = [], {}
    derived = map_settings(maps, request.model)
    request.ties = {follower: leader for follower, leader in request.ties.items() if follower not in derived}
