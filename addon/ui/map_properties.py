"""The weight-map settings of ``Object.fit_to_target``: which stiffness map the fit finds, by
painted regions or per vertex, and the vertex group it goes to (the Weight Map sub-panel).

:data:`MAP_SETTINGS` holds the properties :mod:`.properties` adds to its settings group;
:class:`FIT_PG_map_region` is registered with that group, before it. Only a model with maps
(``SceneModel.map_kinds``) shows or uses them; the Map menu lists its model's kinds.

No ``from __future__ import annotations`` here: Blender reads the property definitions
from the class annotations, which must stay objects, not strings.
"""

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    StringProperty,
)

from ...warp_core.fit.problem.maps import DEFAULT_SMOOTHNESS
from ..errors import FitInputError
from ..models.registry import object_model, scene_model, scene_models

# model name -> the Map menu's items, (identifier, label, description, number): the kinds its
# scene side offers (``SceneModel.map_targets``), numbered by their place. Kept here: Blender
# reads the strings of a callback's items after it returns, so they must stay referenced.
_KIND_ITEMS: dict[str, list[tuple[str, str, str, int]]] = {}


def map_kind_items(model_name: str) -> list[tuple[str, str, str, int]]:
    """The Map menu's items for the model called ``model_name`` (none for a model without maps)."""
    if model_name not in _KIND_ITEMS:
        try:
            targets = scene_model(model_name).map_targets
        except FitInputError:
            targets = {}
        offered = [(kind, t) for kind, t in targets.items() if t.offered]
        _KIND_ITEMS[model_name] = [
            (kind.upper(), t.label, t.description, number) for number, (kind, t) in enumerate(offered)
        ]
    return _KIND_ITEMS[model_name]


def _kind_items(settings, context):
    # the object's model's kinds; a number past them (another model's kind) reads as ""
    return map_kind_items(object_model(settings.id_data).name)


MAP_MODE_ITEMS = [
    (
        "REGIONS",
        "Regions",
        "One value per painted vertex group of the object, blended across borders as painted",
    ),
    (
        "FREE",
        "Free",
        "One weight per vertex, kept smooth by the Smoothness setting",
    ),
]


def map_kind_order() -> list[str]:
    """Every model's map kinds, in the menus' order (the cloth's first)."""
    return list(dict.fromkeys(kind for model in scene_models() for kind in model.map_targets))


def map_kind_label(kind: str) -> str:
    """Blender's name of a map kind ("structural" -> "Structural"); the kind itself when unknown."""
    targets = (model.map_targets.get(kind) for model in scene_models())
    return next((t.label for t in targets if t is not None), kind)


def has_maps(model_name: str) -> bool:
    """Whether the add-on fits and writes back weight maps of the model called ``model_name``
    (``SceneModel.map_kinds``)."""
    try:
        return bool(scene_model(model_name).map_kinds)
    except FitInputError:
        return False


class FIT_PG_map_region(bpy.types.PropertyGroup):
    """One region of a weight map: a painted vertex group of the object, given one value."""

    group: StringProperty(
        name="Region",
        description="A vertex group of the object painted where the region lies; the fit finds one value "
        "for it",
    )


MAP_SETTINGS = {
    "map_fit": BoolProperty(
        name="Fit Map",
        description="Also fit a weight map: the weights of one of the vertex groups the model reads (a Cloth "
        "modifier's stiffness groups, a soft body's Stiffness or Damping Group), and its base and Max values",
        default=False,
    ),
    "map_kind": EnumProperty(
        name="Map",
        description="Which weight map of the object's model the fit finds (the vertex group it blends by)",
        items=_kind_items,
        default=0,
    ),
    "map_mode": EnumProperty(
        name="Mode",
        description="How the map is found: one value per painted region, or one weight per vertex",
        items=MAP_MODE_ITEMS,
        default="REGIONS",
    ),
    "map_regions": CollectionProperty(
        type=FIT_PG_map_region,
        name="Regions",
        description="The painted vertex groups of the object whose value the fit finds, one value each",
    ),
    "active_map_region_index": IntProperty(
        name="Active Region", description="The region selected in the list", default=0
    ),
    "map_smoothness": FloatProperty(
        name="Smoothness",
        description="How strongly neighbouring weights are kept alike: higher gives a smoother map with "
        "fewer details, lower follows the targets more closely",
        default=DEFAULT_SMOOTHNESS,
        min=0.0,
        soft_max=1.0,  # at 1 a difference across an edge costs what a vertex's own misfit does
        precision=4,
        step=0.1,
    ),
    "map_group": StringProperty(
        name="Output Group",
        description="The vertex group the fitted weights are written to; empty: the group the model "
        "names for this map, or a new one named after it",
        default="",
    ),
}
