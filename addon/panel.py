"""Sidebar panel (View3D > Sidebar > Fit)."""

import bpy


class FIT_PT_main(bpy.types.Panel):
    bl_idname = "FIT_PT_main"
    bl_label = "Fit to Target"
    bl_category = "Fit"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"

    def draw(self, context: bpy.types.Context) -> None:
        obj = context.active_object
        if obj is None:
            self.layout.label(text="No active object", icon="INFO")
        else:
            self.layout.label(text=f"Active: {obj.name} ({obj.type.lower()})", icon="OBJECT_DATA")


classes = (FIT_PT_main,)
