"""The cheap checks before anything is read from the scene: is this an object the fit can
use, and is the request complete? Each failure is one :class:`FitInputError` line."""

from __future__ import annotations

import bpy
import numpy as np

from ...warp_core.fit.problem.rules import MESH_LOSSES, check_loss_name, check_parameters, check_targets
from ..errors import FitInputError, setting
from ..models.registry import model_label, object_model, scene_model, scene_models
from ..request import FitRequest, request_from_object
from ..warp_setup import resolve_device

# how to give an object mesh targets, in the panel
_HOW_TO_ADD = "select a target mesh and press Add Current Frame"


def check_object(ob: bpy.types.Object | None) -> bpy.types.Modifier:
    """The modifier of the object's model (its Cloth modifier), or FitInputError saying why
    there is none."""
    if ob is None:
        raise FitInputError("No active object: select a mesh with a Cloth modifier")
    model = object_model(ob)
    label = model.modifier_label
    if ob.type != "MESH":
        raise FitInputError(f"'{ob.name}' is {_a(ob.type)} object, not a mesh with a {label} modifier")
    mod = model.find_modifier(ob)
    if mod is None:
        other = next((m for m in scene_models() if m is not model and m.find_modifier(ob) is not None), None)
        hint = ""
        if other is not None:
            hint = (
                f", or fit its {other.modifier_label} modifier with the {other.modifier_label} model "
                f"({setting(f'Model: {model_label(other.name)} in the panel', f'--model {other.name}')})"
            )
        raise FitInputError(f"'{ob.name}' has no {label} modifier: add one in Properties > Physics{hint}")
    return mod


def check_scale(ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> None:
    """FitInputError naming the scale when the object's world transform (its own and its
    parents') has a zero scale: for a mesh whose world shape is refused, that is why."""
    matrix = ob.evaluated_get(depsgraph).matrix_world
    axes = np.linalg.svd(np.array(matrix, dtype=np.float64)[:3, :3], compute_uv=False)
    if axes.min() <= 1e-9 * max(float(axes.max()), 1e-300):
        scale = ", ".join(f"{v:g}" for v in matrix.to_scale())
        raise FitInputError(
            f"'{ob.name}' has a zero scale in the world (scale {scale}), which flattens its mesh where "
            "it is simulated; give it and its parents a non-zero scale (Object Properties > Transform)"
        )


def check_request(
    scene: bpy.types.Scene, ob: bpy.types.Object | None, request: FitRequest, check_device: bool = True
) -> tuple[bpy.types.Modifier, int, int]:
    """Cheap checks (no scene evaluation): returns (modifier, cache start, cache end)."""
    mod = check_object(ob)
    name = ob.name
    model = scene_model(request.model)
    try:
        check_parameters(model.name, request.fit, request.ties, has_maps=bool(request.maps))
        check_targets(request.footage is not None, bool(request.targets), f"'{name}'", _HOW_TO_ADD)
    except ValueError as e:
        raise FitInputError(str(e)) from e
    if request.footage is not None:
        if not request.footage.clip:
            raise FitInputError(f"'{name}' has no Movie Clip for its Tracks target: choose one")
        if bpy.data.movieclips.get(request.footage.clip) is None:
            raise FitInputError(f"there is no Movie Clip '{request.footage.clip}'")
    start, end = model.cache_frame_range(mod)
    seen: set[int] = set()
    for k, t in enumerate(request.targets, start=1):
        if t.shape_key:
            keys = ob.data.shape_keys
            if keys is None or t.shape_key not in keys.key_blocks:
                raise FitInputError(f"target {k}: '{name}' has no shape key '{t.shape_key}'")
            _check_target_key(ob, t.shape_key, animated_values=False)
        else:
            _check_target_object(ob, t.object_name, k)
        if not start < t.frame <= end:
            raise FitInputError(
                f"target frame {t.frame} is outside the {model.modifier_label.lower()} cache range "
                f"{start}-{end}: targets must lie after the cache start and no later than its end "
                f"(Physics > {model.modifier_label} > Cache)"
            )
        if t.frame in seen:
            raise FitInputError(f"two targets at frame {t.frame}: keep one per frame")
        seen.add(t.frame)
    try:
        check_loss_name(request.loss, MESH_LOSSES)
    except ValueError as e:
        raise FitInputError(str(e)) from e
    if request.max_iterations < 1:
        raise FitInputError("max iterations must be at least 1")
    check_maps(ob, request)
    unmodeled_warnings(scene, ob, mod, request)
    if check_device:
        resolve_device(request.device)
    return mod, start, end


def check_maps(ob: bpy.types.Object, request: FitRequest) -> None:
    """Each weight map's regions are vertex groups of the object, and none is the group the
    fitted weights would overwrite; a free map only where the model fits free maps."""
    for asked in request.maps:
        if not asked.regions and not scene_model(request.model).free_maps:
            raise FitInputError(
                f"'{ob.name}': the {request.model} model fits the {asked.kind} map by regions only, not "
                "free (one weight per vertex): choose Regions and add the painted vertex groups "
                "(--map-regions in the batch command)"
            )
        for region in asked.regions:
            if region not in ob.vertex_groups:
                raise FitInputError(
                    f"'{ob.name}' has no vertex group '{region}' for a region of the {asked.kind} map: "
                    "paint one of that name, or pick an existing group"
                )
        if asked.group and asked.group in asked.regions:
            raise FitInputError(
                f"'{ob.name}': the {asked.kind} map would write its weights over region '{asked.group}': "
                "choose another output group"
            )


def unmodeled_warnings(
    scene: bpy.types.Scene, ob: bpy.types.Object, mod: bpy.types.Modifier, request: FitRequest
) -> list[str]:
    """The settings in use that change the motion but are not simulated: FitInputError naming
    them, or with ``request.allow_unmodeled`` one warning each for the result record; then
    the model's cautions (simulated settings that keep a replay from matching closely)."""
    model = scene_model(request.model)
    found = model.unmodeled_settings(scene, ob, mod)
    if found and not request.allow_unmodeled:
        it = "it" if len(found) == 1 else "them"
        raise FitInputError(
            f"'{ob.name}': {'; '.join(found)}; the fit does not simulate {it}: turn {it} off for the fit, "
            f"or {setting('tick Ignore Unsupported Settings', 'pass --allow-unmodeled')} to fit anyway "
            "(the result then carries a warning)"
        )
    return [
        f"'{ob.name}': {what}; the fit does not simulate it, so the fitted values may make up for it"
        for what in found
    ] + [f"'{ob.name}': {caution}" for caution in model.cautions(mod)]


def check_rest_shape(ob: bpy.types.Object, request: FitRequest) -> None:
    """The shape-key targets of ``request`` with the key values of the current frame (the
    cache start frame, when the fit reads the scene)."""
    for t in request.targets:
        if t.shape_key:
            _check_target_key(ob, t.shape_key, animated_values=True)


def _check_target_key(ob: bpy.types.Object, key_name: str, animated_values: bool) -> None:
    """A target shape key must not deform the cloth it is the target of.

    A target key is read from its own coordinates, but with a value above 0 it also moves
    the cloth's rest shape towards the target (Blender 5.0 adds new keys at value 1.0), and
    the fit would start from the answer's neighbourhood with the wrong rest lengths."""
    keys = ob.data.shape_keys
    block = keys.key_blocks[key_name]
    if block == keys.reference_key or block.mute:
        return
    if not keys.use_relative:
        raise FitInputError(
            f"shape key '{key_name}' of '{ob.name}': absolute shape keys (Relative off) change the "
            "cloth's rest shape with Evaluation Time; use relative shape keys for targets"
        )
    if keys.animation_data is not None and not animated_values:
        return  # the value at the cache start frame decides: checked when the fit reads the scene
    if block.value > 0.0:
        raise FitInputError(
            f"shape key '{key_name}' of '{ob.name}' has value {block.value:g}, so it also deforms the "
            "cloth's rest shape: set its Value to 0 (the target is read from the key's own coordinates)"
        )


def _check_target_object(ob: bpy.types.Object, object_name: str, k: int) -> None:
    if not object_name:
        raise FitInputError(f"target {k} has no object: pick a target mesh")
    tob = bpy.data.objects.get(object_name)
    if tob is None:
        raise FitInputError(f"target object '{object_name}' does not exist")
    if tob.type != "MESH":
        raise FitInputError(f"target '{object_name}' is {_a(tob.type)} object, not a mesh")
    if tob == ob:
        raise FitInputError(f"target {k} is the cloth object itself: pick another mesh or a shape key")


def why_not_fittable(context: bpy.types.Context, busy: str | None) -> str | None:
    """One line saying why the Fit button is disabled, or None (for the panel; cheap).
    ``busy``: what is under way that keeps a fit from starting ("A fit is running"), or None
    (the caller knows the running work)."""
    if busy:
        return busy
    ob = context.active_object
    try:
        check_object(ob)
        check_request(context.scene, ob, request_from_object(ob), check_device=False)
    except FitInputError as e:
        return str(e)
    return None


def _a(kind: str) -> str:
    """'an empty', 'a curve': Blender's object type with its article."""
    word = kind.lower().replace("_", " ")
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"
