"""The weight-map settings of ``Object.fit_to_target``: which stiffness map the fit finds, by
painted regions or per vertex, and the vertex group it goes to (the Weight Map sub-panel).

:data:`MAP_SETTINGS` holds the properties :mod:`.properties` adds to its settings group;
:class:`FIT_PG_map_region` is registered with that group, before it. Only a model with maps
(``Model.map_ranges``: Blender's cloth) shows or uses them.

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
from ..models.registry import scene_model

# (identifier, label, description): the groups of Blender's Cloth > Property Weights
MAP_KIND_ITEMS = [
    (
        "STRUCTURAL",
        "Structural",
        "Fit the weights of the Cloth's Structural Group (Property Weights), which scale tension and "
        "compression towards Max Tension and Max Compression",
    ),
    (
        "SHEAR",
        "Shear",
        "Fit the weights of the Cloth's Shear Group (Property Weights), which scale shear towards "
        "Max Shearing",
    ),
    (
        "BENDING",
        "Bending",
        "Fit the weights of the Cloth's Bending Group (Property Weights), which scale bending towards "
        "Max Bending",
    ),
]
MAP_MODE_ITEMS = [
    (
        "REGIONS",
        "Regions",
        "One stiffness per painted vertex group of the cloth, blended across borders as painted",
    ),
    (
        "FREE",
        "Free",
        "One weight per vertex, kept smooth by the Smoothness setting",
    ),
]


def map_kind_label(kind: str) -> str:
    """Blender's name of a map kind ("structural" -> "Structural"); the kind itself when unknown."""
    return next((label for key, label, _ in MAP_KIND_ITEMS if key == kind.upper()), kind)


def has_maps(model_name: str) -> bool:
    """Whether the add-on fits and writes back weight maps of the model called ``model_name``
    (``SceneModel.map_kinds``: Blender's cloth)."""
    try:
        return bool(scene_model(model_name).map_kinds)
    except FitInputError:
        return False


class FIT_PG_map_region(bpy.types.PropertyGroup):
    """One region of a weight map: a painted vertex group of the cloth, given one stiffness."""

    group: StringProperty(
        name="Region",
        description="A vertex group of the cloth painted where the region lies; the fit finds one stiffness "
        "for it",
    )


MAP_SETTINGS = {
    "map_fit": BoolProperty(
        name="Fit Map",
        description="Also fit a stiffness weight map: the weights of one of the Cloth modifier's stiffness "
        "vertex groups, and its base and Max values",
        default=False,
    ),
    "map_kind": EnumProperty(
        name="Map",
        description="Which stiffness vertex group of the Cloth modifier the fit finds the weights of",
        items=MAP_KIND_ITEMS,
        default="STRUCTURAL",
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
        description="The painted vertex groups of the cloth whose stiffness the fit finds, one value each",
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
        description="The vertex group the fitted weights are written to; empty: the group the Cloth modifier "
        "names for this stiffness, or a new one named after it",
        default="",
    ),
}
