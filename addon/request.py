"""What one fit is asked to do: the request (from the panel settings or the batch
arguments), and the request with the scene read, ready to run in any thread."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import bpy

from ..warp_core.fit import FitProblem, FitSettings
from ..warp_core.fit.problem.maps import parameters_set_by
from ..warp_core.models import get_model
from ..warp_core.presets.schema import FLOAT32_SMALLEST_NORMAL
from .errors import FitInputError
from .models.base import SceneModel, resolve_ties
from .models.registry import object_model, parameter_names


@dataclass
class TargetSpec:
    """A target: a mesh object evaluated at ``frame``, or a shape key of the cloth object."""

    frame: int
    object_name: str = ""
    shape_key: str = ""

    def describe(self) -> str:
        if self.shape_key:
            return f"shape key '{self.shape_key}' at frame {self.frame}"
        return f"'{self.object_name}' at frame {self.frame}"


@dataclass
class BindingSpec:
    """Where a track sits on the cloth: a triangle's vertices and barycentric coordinates
    (``how``: BUNDLE, RAY or VERTEX, for the binding list)."""

    track: str
    how: str
    vertices: tuple[int, int, int]
    barycentric: tuple[float, float, float]
    weight: float = 1.0


@dataclass
class FootageSpec:
    """Footage targets: the markers of a Movie Clip's tracking object seen by a camera."""

    clip: str
    tracking_object: str = ""  # "": the clip's camera tracks
    camera: str = ""  # "": the scene camera
    huber_px: float = 2.0
    bindings: list[BindingSpec] = field(default_factory=list)  # empty: bound automatically


@dataclass
class MapRequest:
    """A weight map to fit (``--fit-map KIND[:GROUP]``, the Maps sub-panel): made by the batch
    arguments and the panel settings, read by the scene export (the regions' weights) and the
    write-back (the group). ``regions`` names painted vertex groups of the cloth, one value
    each; empty for a free map (one weight per vertex, with ``smoothness`` its prior)."""

    kind: str  # "structural", "shear" or "bending"
    group: str = ""  # the vertex group the fitted weights go to; "": the modifier's, or a new one
    regions: list[str] = field(default_factory=list)
    smoothness: float | None = None  # None: the fit's default

    def describe(self) -> str:
        how = f"regions {', '.join(self.regions)}" if self.regions else "free"
        return f"the {self.kind} map ({how})"


@dataclass
class FitRequest:
    """Everything that decides one object's fit, from the panel settings or batch arguments."""

    object_name: str
    model: str  # "blender_cloth" or "soft_body"
    fit: list[str]
    ties: dict[str, str]
    targets: list[TargetSpec]
    loss: str  # "vertex" or "surface"
    max_iterations: int = 30
    time_budget_s: float | None = None
    tolerance_m: float | None = None  # RMSE that counts as matched; None: automatic
    device: str = "AUTO"  # "AUTO", "cpu", "cuda" or "cuda:N"
    start_values: dict[str, Any] = field(default_factory=dict)
    allow_unmodeled: bool = False  # fit despite settings the model does not simulate
    footage: FootageSpec | None = None  # footage targets instead of ``targets``
    tolerance_px: float | None = None  # reprojection RMSE that counts as matched; None: 1 px
    maps: list[MapRequest] = field(default_factory=list)  # weight maps fitted as well


@dataclass
class PreparedFit:
    """A request with the scene exported: ready for ``warp_core.fit.fit`` in any thread."""

    request: FitRequest
    problem: FitProblem
    settings: FitSettings
    modifier_values: dict[str, Any]  # the modifier's values at export time
    cache_range: tuple[int, int]
    warnings: list[str] = field(default_factory=list)  # unsimulated settings the fit ran with


def following(request: FitRequest, lead: FitRequest) -> FitRequest:
    """``request`` as a member of a shared fit led by ``lead``: the lead's parameters, ties and
    run settings; FitInputError when the two objects use different models."""
    if request.model != lead.model:
        raise FitInputError(
            f"'{request.object_name}' uses another model than '{lead.object_name}': a shared material "
            "is fitted for objects of one model"
        )
    return dataclasses.replace(
        request,
        fit=list(lead.fit),
        ties=dict(lead.ties),
        max_iterations=lead.max_iterations,
        time_budget_s=lead.time_budget_s,
        tolerance_m=lead.tolerance_m,
        tolerance_px=lead.tolerance_px,
        device=lead.device,
    )


def fitted_parameters(settings: Any, model: SceneModel) -> tuple[list[str], dict[str, str]]:
    """(free parameters, ties follower -> leader) from the check boxes and tie options of
    ``settings`` (``Object.fit_to_target``)."""
    chosen = [n for n in parameter_names(model.name) if getattr(settings, f"fit_{n}")]
    ties_on = {tie.key: bool(getattr(settings, tie.key)) for tie in model.ties}
    return resolve_ties(chosen, ties_on, model.ties)


def request_from_object(ob: bpy.types.Object, **overrides: Any) -> FitRequest:
    """The request the object's panel settings describe; keyword arguments replace fields."""
    s = ob.fit_to_target
    model = object_model(ob)
    fit, ties = fitted_parameters(s, model)
    targets = [
        TargetSpec(
            frame=int(t.frame),
            object_name=(t.object.name if t.object is not None else "") if t.kind == "OBJECT" else "",
            shape_key=t.shape_key if t.kind == "SHAPE_KEY" else "",
        )
        for t in s.targets
    ]
    footage = footage_from_settings(s)
    maps = map_requests(s, model)
    # a tie's follower that a map sets (compression with a structural map) follows the map
    ties = {
        follower: leader
        for follower, leader in ties.items()
        if follower not in map_settings(maps, model.name)
    }
    request = FitRequest(
        object_name=ob.name,
        model=model.name,
        fit=fit,
        ties=ties,
        targets=[] if footage is not None else targets,
        loss=s.loss.lower(),
        max_iterations=int(s.max_iterations),
        time_budget_s=float(s.time_budget) if s.use_time_budget else None,
        tolerance_m=None if s.use_auto_tolerance else float(s.tolerance),
        device=s.device,
        start_values=parse_start_values(s.start_values_json, ob.name, model.settings_fields),
        allow_unmodeled=bool(s.allow_unmodeled),
        footage=footage,
        tolerance_px=None if s.use_auto_tolerance_px else float(s.tolerance_px),
        maps=maps,
    )
    for key, value in overrides.items():
        if value is not None:
            setattr(request, key, value)
    return request


def map_requests(settings: Any, model: SceneModel) -> list[MapRequest]:
    """The weight map the Weight Map settings of ``settings`` (``Object.fit_to_target``) ask
    for: none while Fit Map is off or for a model without maps; FitInputError for Regions
    with no region or a row without a vertex group (whether each group exists is
    ``checks.check_maps``'s, for the batch command's maps too)."""
    if not settings.map_fit or not model.map_kinds:
        return []
    kind, name = settings.map_kind.lower(), settings.id_data.name
    if kind not in model.map_kinds:  # the menu's choice was another model's kind
        raise FitInputError(
            f"'{name}': pick the map to fit in Weight Map (the {model.name} model fits "
            f"{', '.join(model.map_kinds)})"
        )
    if settings.map_mode == "FREE":
        # the float32 setting as the decimal it was typed as (0.01, not 0.0099999998)
        smoothness = float(f"{settings.map_smoothness:.7g}")
        return [MapRequest(kind, settings.map_group, [], smoothness)]
    regions = [entry.group for entry in settings.map_regions]
    if not regions:
        raise FitInputError(
            f"'{name}': the {kind} map in Regions mode has no regions: add the painted vertex groups "
            "with + in Weight Map, or choose Free"
        )
    if "" in regions:
        raise FitInputError(
            f"'{name}': region {regions.index('') + 1} of the {kind} map names no vertex group: pick one, "
            "or remove the row"
        )
    twice = next((group for k, group in enumerate(regions) if group in regions[:k]), None)
    if twice is not None:
        raise FitInputError(f"'{name}': region '{twice}' is listed twice in the {kind} map: remove one")
    return [MapRequest(kind, settings.map_group, regions)]


def map_settings(maps: list[MapRequest], model_name: str) -> set[str]:
    """The modifier settings ``maps`` set (``parameters_set_by``): not fitted or tied besides."""
    model = get_model(model_name)
    return {name for m in maps for name in parameters_set_by(model, m.kind, not m.regions)}


def footage_from_settings(s: Any, force: bool = False) -> FootageSpec | None:
    """The footage targets of ``Object.fit_to_target`` when its target source is Tracks (or
    with ``force``, whatever the source)."""
    if s.target_source != "TRACKS" and not force:
        return None
    bindings = [
        BindingSpec(b.track, b.how, tuple(b.triangle), tuple(b.barycentric), float(b.weight))
        for b in s.bindings
        if b.use and b.how != "NONE"
    ]
    if s.bindings and not bindings:
        raise FitInputError("every track binding is switched off or unbound: tick at least one bound track")
    return FootageSpec(
        clip=s.clip.name if s.clip is not None else "",
        tracking_object=s.tracking_object,
        camera=s.camera.name if s.camera is not None else "",
        huber_px=float(s.huber_px),
        bindings=bindings,
    )


def parse_start_values(text: str, object_name: str, fields: Collection[str]) -> dict[str, Any]:
    """The JSON ``{setting: value}`` a fit starts from instead of the modifier's values;
    ``fields`` are the settings the model knows."""
    if not text.strip():
        return {}
    where = f"{object_name}: " if object_name else ""
    try:
        values = json.loads(text)
    except ValueError as e:
        raise FitInputError(f"{where}start values are not valid JSON ({e})") from e
    if not isinstance(values, dict):
        raise FitInputError(f"{where}start values must be a JSON object {{parameter: value}}")
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise FitInputError(f"{where}unknown parameter(s) in the start values: {', '.join(unknown)}")
    for key, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise FitInputError(f"{where}start value {key} = {value!r} is not a finite number")
        if isinstance(value, float) and value != 0.0 and abs(value) < FLOAT32_SMALLEST_NORMAL:
            # Blender's settings are float32: it would store 0 (a mass of 0, a fit that cannot move)
            raise FitInputError(
                f"{where}start value {key} = {value!r} is too small for Blender's float32 settings"
            )
    return values
