"""The material preset menus and the "Material Presets" sub-panel of Fit to Target (the
preset menu sits in its header)."""

from __future__ import annotations

import bpy

from ...warp_core.presets.schema import Preset
from ..models.registry import object_model
from ..presets import all_presets
from .preset_operators import (
    FIT_OT_preset_apply,
    FIT_OT_preset_delete,
    FIT_OT_preset_export,
    FIT_OT_preset_import,
    FIT_OT_preset_rename,
    FIT_OT_preset_save_fitted,
    FIT_OT_preset_use_as_start,
)

PRESET_GROUPS = ("Blender", "Fitted by Fit to Target", "User")


def _group_label(preset: Preset) -> str:
    if not preset.builtin:
        return "User"
    return "Fitted by Fit to Target" if preset.provenance else "Blender"


def _draw_preset_list(
    layout: bpy.types.UILayout, operator: str, user_only: bool = False, icon: str = "NONE"
) -> list[str]:
    """One ``operator`` item per preset, grouped: Blender's, fitted built-ins, the user's."""
    warnings: list[str] = []
    presets = all_presets(warnings)
    if user_only:
        presets = [p for p in presets if not p.builtin]
        if not presets:
            layout.label(text="No user presets yet")
    first = True
    for label in PRESET_GROUPS:
        group = [p for p in presets if _group_label(p) == label]
        if not group:
            continue
        if not user_only:
            if not first:
                layout.separator()
            layout.label(text=label)
        first = False
        for preset in group:
            props = layout.operator(operator, text=preset.name, icon=icon)
            props.name = preset.name
    return warnings


class FIT_MT_presets(bpy.types.Menu):
    """Material presets: click one to apply it to the active object's cloth"""

    bl_idname = "FIT_MT_presets"
    bl_label = "Material Presets"

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        warnings = _draw_preset_list(layout, FIT_OT_preset_apply.bl_idname)
        layout.separator()
        layout.menu(FIT_MT_presets_start.bl_idname)
        layout.menu(FIT_MT_presets_export.bl_idname)
        layout.menu(FIT_MT_presets_rename.bl_idname)
        layout.menu(FIT_MT_presets_delete.bl_idname)
        layout.separator()
        layout.operator(FIT_OT_preset_save_fitted.bl_idname, text="Save Fitted as Preset...", icon="ADD")
        layout.operator(FIT_OT_preset_import.bl_idname, text="Import Preset...", icon="IMPORT")
        if warnings:
            layout.separator()
            layout.label(text=f"{len(warnings)} preset file(s) skipped (see the console)", icon="ERROR")


class FIT_MT_presets_start(bpy.types.Menu):
    bl_idname = "FIT_MT_presets_start"
    bl_label = "Use as Fit Start"

    def draw(self, context: bpy.types.Context) -> None:
        _draw_preset_list(self.layout, FIT_OT_preset_use_as_start.bl_idname)


class FIT_MT_presets_export(bpy.types.Menu):
    bl_idname = "FIT_MT_presets_export"
    bl_label = "Export"

    def draw(self, context: bpy.types.Context) -> None:
        _draw_preset_list(self.layout, FIT_OT_preset_export.bl_idname)


class FIT_MT_presets_rename(bpy.types.Menu):
    bl_idname = "FIT_MT_presets_rename"
    bl_label = "Rename"

    def draw(self, context: bpy.types.Context) -> None:
        _draw_preset_list(self.layout, FIT_OT_preset_rename.bl_idname, user_only=True)


class FIT_MT_presets_delete(bpy.types.Menu):
    bl_idname = "FIT_MT_presets_delete"
    bl_label = "Delete"

    def draw(self, context: bpy.types.Context) -> None:
        _draw_preset_list(self.layout, FIT_OT_preset_delete.bl_idname, user_only=True, icon="TRASH")


class FIT_PT_presets(bpy.types.Panel):
    """Material presets of the active object's cloth (menu in the header)"""

    bl_idname = "FIT_PT_presets"
    bl_label = "Material Presets"
    bl_parent_id = "FIT_PT_main"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Fit"
    bl_options = {"DEFAULT_CLOSED"}

    def draw_header_preset(self, context: bpy.types.Context) -> None:
        self.layout.menu(FIT_MT_presets.bl_idname, text="Presets", icon="PRESET")

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        ob = context.active_object
        if ob is not None and object_model(ob).find_modifier(ob) is None:
            layout.label(text="Add a Cloth modifier to apply presets", icon="INFO")
        col = layout.column(align=True)
        col.operator(FIT_OT_preset_save_fitted.bl_idname, text="Save Fitted as Preset...", icon="ADD")
        col.operator(FIT_OT_preset_import.bl_idname, text="Import Preset...", icon="IMPORT")


classes = (
    FIT_MT_presets_start,
    FIT_MT_presets_export,
    FIT_MT_presets_rename,
    FIT_MT_presets_delete,
    FIT_MT_presets,
    FIT_PT_presets,
)
