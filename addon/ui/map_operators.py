"""The + and - of the Weight Map sub-panel's region list: add a region (the cloth's active
vertex group, when not listed yet) and remove the selected one."""

from __future__ import annotations

import bpy


def _regions_of(context: bpy.types.Context) -> tuple[bpy.types.Object | None, str]:
    """The active object when it is a mesh with fit settings, else None and why."""
    ob = context.active_object
    if ob is None or ob.type != "MESH" or getattr(ob, "fit_to_target", None) is None:
        return None, "Select the cloth mesh whose weight map the regions belong to"
    return ob, ""


class OBJECT_OT_fit_to_target_add_map_region(bpy.types.Operator):
    """Add a region to the weight map: the cloth's active vertex group if not listed yet, else an empty row"""

    bl_idname = "object.fit_to_target_add_map_region"
    bl_label = "Add Fit Map Region"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob, why = _regions_of(context)
        if ob is None:
            self.report({"ERROR"}, why)
            return {"CANCELLED"}
        s = ob.fit_to_target
        listed = {entry.group for entry in s.map_regions}
        active = ob.vertex_groups.active
        entry = s.map_regions.add()
        if active is not None and active.name not in listed and active.name != s.map_group:
            entry.group = active.name
        s.active_map_region_index = len(s.map_regions) - 1
        return {"FINISHED"}


class OBJECT_OT_fit_to_target_remove_map_region(bpy.types.Operator):
    """Remove the selected region from the weight map (its vertex group stays)"""

    bl_idname = "object.fit_to_target_remove_map_region"
    bl_label = "Remove Fit Map Region"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob, why = _regions_of(context)
        if ob is None:
            self.report({"ERROR"}, why)
            return {"CANCELLED"}
        s = ob.fit_to_target
        index = s.active_map_region_index
        if not 0 <= index < len(s.map_regions):
            self.report(
                {"ERROR"}, f"'{ob.name}' has no region selected in its weight map: pick one in the list"
            )
            return {"CANCELLED"}
        s.map_regions.remove(index)
        s.active_map_region_index = max(0, min(index, len(s.map_regions) - 1))
        return {"FINISHED"}


classes = (OBJECT_OT_fit_to_target_add_map_region, OBJECT_OT_fit_to_target_remove_map_region)
