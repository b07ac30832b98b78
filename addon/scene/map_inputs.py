"""A fit request's weight maps read from the object (main thread): each region's painted
vertex group as one weight per vertex of the mesh the fit simulates."""

from __future__ import annotations

import bpy

from ...warp_core.fit.problem.maps import DEFAULT_SMOOTHNESS, MapSpec
from ..errors import FitInputError
from ..mesh_read import vertex_group_weights
from ..models.registry import scene_model
from ..request import FitRequest


def map_specs(ob: bpy.types.Object, request: FitRequest, vertex_count: int) -> list[MapSpec]:
    """The problem's maps for ``request.maps``; FitInputError naming the object and what to
    change where a map cannot be fitted as asked."""
    if not request.maps:
        return []
    model = scene_model(request.model)
    ranges = model.map_kinds
    specs = []
    for asked in request.maps:
        if asked.kind not in ranges:
            fitted = ", ".join(ranges) or "none"
            raise FitInputError(
                f"'{ob.name}': the {asked.kind} map cannot be fitted with this model (maps it fits: {fitted})"
            )
        if len(ob.data.vertices) != vertex_count:
            raise FitInputError(
                f"'{ob.name}': modifiers above the {model.modifier_label} modifier change its vertices "
                f"({len(ob.data.vertices)} in the mesh, {vertex_count} simulated), so a vertex group "
                f"cannot hold its map; apply them or move them below the {model.modifier_label} modifier"
            )
        regions = {}
        for name in asked.regions:
            if name not in ob.vertex_groups:
                raise FitInputError(
                    f"'{ob.name}' has no vertex group '{name}' for a region of {asked.describe()}: "
                    "paint it or remove it from the regions"
                )
            regions[name] = vertex_group_weights(ob.data, ob, name)
        smoothness = DEFAULT_SMOOTHNESS if asked.smoothness is None else float(asked.smoothness)
        specs.append(MapSpec(kind=asked.kind, regions=regions, smoothness=smoothness))
    return specs
