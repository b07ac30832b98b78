"""What the Weight Map sub-panel of Fit to Target draws: Fit Map in its header, then which
stiffness map, Regions or Free, the region list (painted vertex groups of the cloth), the
smoothness of a free map and the vertex group the weights go to. Greyed while Fit Map is off.

Shown only for a model with maps (Blender's cloth): see :func:`shows_maps`."""

from __future__ import annotations

import bpy

from ...warp_core.models import get_model
from ..models.registry import object_model
from .labels import model_labels
from .map_properties import has_maps
from .text_wrap import wrapped_label


class FIT_UL_map_regions(bpy.types.UIList):
    """Region list: a vertex group of the cloth per row, searched among its groups."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0):
        ob = data.id_data
        row = layout.row(align=True)
        # a name that is not (or no longer) a group of the cloth: shown red, the fit refuses it
        row.alert = bool(item.group) and item.group not in ob.vertex_groups
        row.prop_search(item, "group", ob, "vertex_groups", text="", icon="GROUP_VERTEX")


def shows_maps(ob: bpy.types.Object) -> bool:
    """Whether the object's model fits weight maps (``SceneModel.map_kinds``)."""
    return has_maps(object_model(ob).name)


def output_group_line(ob: bpy.types.Object) -> str:
    """Where the fitted weights will go, when the Output Group is left empty: the group the
    model's field names for the kind (``MapTarget.group_field``), or the new group the write
    makes ("" when a group is chosen, or no kind is)."""
    s = ob.fit_to_target
    model = object_model(ob)
    target = model.map_targets.get(s.map_kind.lower())
    if s.map_group or target is None:
        return ""
    holder = model.map_holder(ob) if model.find_modifier(ob) is not None else None
    named = getattr(holder, target.group_field, "") if holder is not None else ""
    if named and named in ob.vertex_groups:
        return f"Writes to '{named}', {target.group_label}"
    return f"Writes to a new group '{target.new_group}'"


def range_line(model_name: str, kind: str) -> str:
    """The modifier settings a ``kind`` map sets besides its weights, in Blender's words:
    "Sets Tension Stiffness (weight 0) and Max Tension (weight 1)"."""
    span = get_model(model_name).map_ranges[kind]
    label = model_labels(model_name)

    def names(fields: tuple[str, ...]) -> str:
        return " and ".join(label.get(name, name) for name in fields)

    return f"Sets {names(span.base)} (weight 0), {names(span.top)} (weight 1)"


def draw_map_header(layout: bpy.types.UILayout, ob: bpy.types.Object) -> None:
    """The Fit Map check box, as Blender's sub-panels with a switch draw it."""
    if not shows_maps(ob):
        return
    layout.prop(ob.fit_to_target, "map_fit", text="")


def draw_maps(layout: bpy.types.UILayout, ob: bpy.types.Object, width_chars: int) -> None:
    """The map's settings (see the module docstring), greyed while Fit Map is off; nothing
    for a model without maps (the sub-panel is hidden then, but a draw never fails)."""
    if not shows_maps(ob):
        return
    s = ob.fit_to_target
    layout.active = s.map_fit
    layout.prop(s, "map_kind")
    model_name, kind = object_model(ob).name, s.map_kind.lower()
    if kind in get_model(model_name).map_ranges:
        wrapped_label(layout, range_line(model_name, kind), width_chars, icon="BLANK1")
    layout.row().prop(s, "map_mode", expand=True)
    if s.map_mode == "REGIONS":
        row = layout.row()
        row.template_list("FIT_UL_map_regions", "", s, "map_regions", s, "active_map_region_index", rows=3)
        col = row.column(align=True)
        col.operator("object.fit_to_target_add_map_region", text="", icon="ADD")
        col.operator("object.fit_to_target_remove_map_region", text="", icon="REMOVE")
        if not s.map_regions:
            text = "Add the painted vertex groups whose value the fit finds, one value each"
            wrapped_label(layout, text, width_chars, icon="INFO")
    else:
        layout.prop(s, "map_smoothness")
    layout.prop_search(s, "map_group", ob, "vertex_groups", icon="GROUP_VERTEX")
    line = output_group_line(ob)
    if line:
        wrapped_label(layout, line, width_chars, icon="BLANK1")
