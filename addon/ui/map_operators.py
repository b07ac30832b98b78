"""The + and - of the Weight Map sub-panel's region list: add a region (the cloth's active
vertex group, when not listed yet) and remove the selected one."""

from __future__ import annotations

from typing import Any

import bpy


class _RegionListOperator:
    """Either operator on the active object's region list: ``change`` edits the object's fit
    settings, returning an error message or "" (reported, and the operator cancelled)."""

    bl_options = {"REGISTER", "UNDO"}

    def change(self, ob: bpy.types.Object, settings: Any) -> str:
        raise NotImplementedError

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        if ob is None or ob.type != "MESH" or getattr(ob, "fit_to_target", None) is None:
            error = "Select the cloth mesh whose weight map the regions belong to"
        else:
            error = self.change(ob, ob.fit_to_target)
        if error:
            self.report({"ERROR"}, error)
            return {"CANCELLED"}
        return {"FINISHED"}


class OBJECT_OT_fit_to_target_add_map_region(_RegionListOperator, bpy.types.Operator):
    """Add a region to the weight map: the cloth's active vertex group if not listed yet, else an empty row"""

    bl_idname = "object.fit_to_target_add_map_region"
    bl_label = "Add Fit Map Region"

    def change(self, ob: bpy.types.Object, settings: Any) -> str:
        listed = {entry.group for entry in settings.map_regions}
        active = ob.vertex_groups.active
        entry = settings.map_regions.add()
        if active is not None and active.name not in listed and active.name != settings.map_group:
            entry.group = active.name
        settings.active_map_region_index = len(settings.map_regions) - 1
        return ""


class OBJECT_OT_fit_to_target_remove_map_region(_RegionListOperator, bpy.types.Operator):
    """Remove the selected region from the weight map (its vertex group stays)"""

    bl_idname = "object.fit_to_target_remove_map_region"
    bl_label = "Remove Fit Map Region"

    def change(self, ob: bpy.types.Object, settings: Any) -> str:
        index = settings.active_map_region_index
        if not 0 <= index < len(settings.map_regions):
            return f"'{ob.name}' has no region selected in its weight map: pick one in the list"
        settings.map_regions.remove(index)
        settings.active_map_region_index = max(0, min(index, len(settings.map_regions) - 1))
        return ""


classes = (OBJECT_OT_fit_to_target_add_map_region, OBJECT_OT_fit_to_target_remove_map_region)
