"""Material presets in the UI: a preset menu in the header of the "Presets" sub-panel of
Fit to Target, and operators to apply, start from, save, rename, delete, import and
export presets.

Presets are JSON files (``warp_core.presets``): the built-ins ship in ``assets/presets``,
user presets live in the extension's user directory. Nothing read from a preset file is
ever executed; every file is validated before use and before it is copied anywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import bpy
from bpy.props import BoolProperty, StringProperty

from ..warp_core.models.blender_cloth.params import PARAMETER_NAMES
from ..warp_core.presets import (
    BUILTIN_DIR,
    MAX_NOTES_LENGTH,
    Preset,
    PresetError,
    check_name,
    delete_preset_file,
    list_presets,
    load_preset_file,
    preset_from_fit_result,
    rename_preset_file,
    save_preset_file,
    set_default_user_dir,
    validate_preset,
    write_preset_json,
)
from ..warp_core.presets import find_preset as _find_preset
from .export import find_cloth_modifier

# The extension's package (``bl_ext.<repo>.fit_to_target`` when installed): this module's
# package without ``.addon``.
EXTENSION_PACKAGE = __package__.rpartition(".")[0] if __package__ else "fit_to_target"


def user_presets_dir(create: bool = True) -> Path:
    """The user presets folder: ``<extension user dir>/presets`` when installed as an
    extension, else ``<user scripts>/presets/fit_to_target`` (a checkout loaded as a
    plain package, as in the tests)."""
    try:
        path = bpy.utils.extension_path_user(EXTENSION_PACKAGE, path="presets", create=create)
    except ValueError:  # not an extension
        path = bpy.utils.user_resource("SCRIPTS", path="presets/fit_to_target", create=create)
    return Path(path)


def builtin_preset_names() -> list[str]:
    return [p.name for p in list_presets(BUILTIN_DIR, None)]


def all_presets(warnings: list[str] | None = None) -> list[Preset]:
    """Built-in presets, then the user's (broken user files skipped, described in ``warnings``)."""
    return list_presets(BUILTIN_DIR, user_presets_dir(create=False), warnings)


def find_preset(name: str) -> Preset:
    """The preset called ``name`` (case-insensitive), built-ins first; PresetError if none.
    For the batch command: ``find_preset("Denim").values``."""
    return _find_preset(name, user_presets_dir(create=False))


def apply_preset(preset: Preset, settings: bpy.types.ClothSettings) -> list[str]:
    """Write the preset's values into cloth ``settings``; returns the fields set."""
    for key, value in preset.values.items():
        setattr(settings, key, int(value) if key == "quality" else float(value))
    return list(preset.values)


def fit_settings(ob: bpy.types.Object | None) -> bpy.types.PropertyGroup | None:
    """The object's Fit to Target settings (``Object.fit_to_target``), if registered."""
    return getattr(ob, "fit_to_target", None) if ob is not None else None


def cloth_values(ob: bpy.types.Object) -> dict[str, float]:
    """The fields presets know, read from the object's cloth modifier ({} without one)."""
    mod = find_cloth_modifier(ob)
    if mod is None:
        return {}
    s = mod.settings
    out: dict[str, float] = {"quality": int(s.quality)}
    out.update({name: float(getattr(s, name)) for name in PARAMETER_NAMES})
    return out


def _lookup(operator: bpy.types.Operator, name: str) -> Preset | None:
    try:
        return find_preset(name)
    except PresetError as e:
        operator.report({"ERROR"}, str(e))
        return None


def _user_only(operator: bpy.types.Operator, preset: Preset, action: str) -> bool:
    if preset.builtin:
        operator.report(
            {"ERROR"}, f"{preset.name!r} is a built-in preset and cannot be {action}; only user presets can"
        )
        return False
    return True


# ---------------------------------------------------------------------------- operators


class _ActiveObjectPresetOperator(bpy.types.Operator):
    """Base for the operators that use a preset on the active object (undoable)."""

    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return context.active_object is not None


class FIT_OT_preset_apply(_ActiveObjectPresetOperator):
    """Set the active object's cloth settings to this material preset"""

    bl_idname = "fit.preset_apply"
    bl_label = "Apply Preset"

    name: StringProperty(name="Preset", description="Name of the preset to apply")

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        preset = _lookup(self, self.name)
        if preset is None:
            return {"CANCELLED"}
        mod = find_cloth_modifier(ob)
        if mod is None:
            self.report(
                {"ERROR"},
                f"{ob.name} has no Cloth modifier: add one (Properties > Physics > Cloth), then apply "
                f"{preset.name!r}",
            )
            return {"CANCELLED"}
        fields = apply_preset(preset, mod.settings)
        self.report({"INFO"}, f"Applied preset {preset.name!r} to {ob.name} ({len(fields)} settings)")
        return {"FINISHED"}


class FIT_OT_preset_use_as_start(_ActiveObjectPresetOperator):
    """Start the next fit of the active object from this preset's values instead of the modifier's"""

    bl_idname = "fit.preset_use_as_start"
    bl_label = "Use Preset as Fit Start"

    name: StringProperty(name="Preset", description="Name of the preset to start from")

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        settings = fit_settings(ob)
        if settings is None:
            self.report({"ERROR"}, "Fit to Target settings are not available on this object")
            return {"CANCELLED"}
        preset = _lookup(self, self.name)
        if preset is None:
            return {"CANCELLED"}
        # quality too: the fit then runs, and its result is applied, at the preset's quality
        settings.start_values_json = json.dumps(preset.values)
        self.report({"INFO"}, f"The next fit of {ob.name} starts from preset {preset.name!r}")
        return {"FINISHED"}


class FIT_OT_preset_save_fitted(bpy.types.Operator):
    """Save the active object's last fit result as a user material preset"""

    bl_idname = "fit.preset_save_fitted"
    bl_label = "Save Fitted as Preset"
    bl_options = {"REGISTER"}

    name: StringProperty(name="Name", description="Name of the new preset", maxlen=64)
    notes: StringProperty(name="Notes", description="Optional description stored with the preset")
    overwrite: BoolProperty(
        name="Overwrite", description="Replace a user preset of the same name", default=False
    )

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        settings = fit_settings(context.active_object)
        if settings is None or not getattr(settings, "result_json", ""):
            cls.poll_message_set("The active object has no fit result to save")
            return False
        return True

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        if not self.name:
            self.name = f"{context.active_object.name} Fitted"[:64]
        return context.window_manager.invoke_props_dialog(self, confirm_text="Save")

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        try:
            result = json.loads(fit_settings(ob).result_json)
        except ValueError as e:
            self.report({"ERROR"}, f"The fit result of {ob.name} cannot be read ({e})")
            return {"CANCELLED"}
        if isinstance(result, dict) and not result.get("object"):
            result["object"] = ob.name
        if isinstance(result, dict) and not result.get("blend_file") and bpy.data.filepath:
            result["blend_file"] = bpy.data.filepath
        try:
            check_name(self.name.strip(), repr(self.name))
            if len(self.notes) > MAX_NOTES_LENGTH:
                raise PresetError(f"notes are longer than {MAX_NOTES_LENGTH} characters")
            preset = preset_from_fit_result(self.name.strip(), result, cloth_values(ob), self.notes)
            path = save_preset_file(
                preset, user_presets_dir(), overwrite=self.overwrite, reserved=builtin_preset_names()
            )
        except (PresetError, OSError) as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Saved preset {preset.name!r} to {path}")
        return {"FINISHED"}


class FIT_OT_preset_rename(bpy.types.Operator):
    """Rename a user material preset"""

    bl_idname = "fit.preset_rename"
    bl_label = "Rename Preset"
    bl_options = {"REGISTER"}

    name: StringProperty(name="Preset", description="Name of the user preset to rename")
    new_name: StringProperty(name="New Name", maxlen=64)

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        if not self.new_name:
            self.new_name = self.name
        return context.window_manager.invoke_props_dialog(self, confirm_text="Rename")

    def execute(self, context: bpy.types.Context) -> set[str]:
        preset = _lookup(self, self.name)
        if preset is None or not _user_only(self, preset, "renamed"):
            return {"CANCELLED"}
        new_name = self.new_name.strip()
        clash = next(
            (
                p
                for p in all_presets()
                if p.name.casefold() == new_name.casefold() and p.name.casefold() != preset.name.casefold()
            ),
            None,
        )
        if clash is not None:
            self.report({"ERROR"}, f"A preset named {clash.name!r} already exists; choose another name")
            return {"CANCELLED"}
        try:
            path = rename_preset_file(preset, new_name, user_presets_dir(), reserved=builtin_preset_names())
        except (PresetError, OSError) as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Renamed preset {preset.name!r} to {new_name!r} ({path.name})")
        return {"FINISHED"}


class FIT_OT_preset_delete(bpy.types.Operator):
    """Delete a user material preset (its file in the user presets folder)"""

    bl_idname = "fit.preset_delete"
    bl_label = "Delete Preset"
    bl_options = {"REGISTER"}

    name: StringProperty(name="Preset", description="Name of the user preset to delete")

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        return context.window_manager.invoke_confirm(
            self, event, title="Delete Preset", message=f"Delete preset {self.name!r}?", confirm_text="Delete"
        )

    def execute(self, context: bpy.types.Context) -> set[str]:
        preset = _lookup(self, self.name)
        if preset is None or not _user_only(self, preset, "deleted"):
            return {"CANCELLED"}
        try:
            delete_preset_file(preset, user_presets_dir())
        except (PresetError, OSError) as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Deleted preset {preset.name!r}")
        return {"FINISHED"}


class FIT_OT_preset_import(bpy.types.Operator):
    """Import a material preset file (.json) into the user presets; it is validated first and never run"""

    bl_idname = "fit.preset_import"
    bl_label = "Import Preset"
    bl_options = {"REGISTER"}

    filepath: StringProperty(subtype="FILE_PATH", options={"SKIP_SAVE"})
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})
    overwrite: BoolProperty(
        name="Overwrite", description="Replace a user preset of the same name", default=False
    )

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        context.window_manager.fileselect_add(self)
        return {"RUNNING_MODAL"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        if not self.filepath:
            self.report({"ERROR"}, "No file chosen")
            return {"CANCELLED"}
        try:
            preset = load_preset_file(bpy.path.abspath(self.filepath))
            path = save_preset_file(
                Preset(preset.name, preset.values, preset.notes, preset.provenance),
                user_presets_dir(),
                overwrite=self.overwrite,
                reserved=builtin_preset_names(),
            )
        except (PresetError, OSError) as e:
            self.report({"ERROR"}, f"Not imported: {e}")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Imported preset {preset.name!r} ({path.name})")
        return {"FINISHED"}


class FIT_OT_preset_export(bpy.types.Operator):
    """Write a material preset to a .json file, to share it"""

    bl_idname = "fit.preset_export"
    bl_label = "Export Preset"
    bl_options = {"REGISTER"}

    name: StringProperty(name="Preset", description="Name of the preset to export")
    filepath: StringProperty(subtype="FILE_PATH", options={"SKIP_SAVE"})
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})
    check_existing: BoolProperty(default=True, options={"HIDDEN"})

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        preset = _lookup(self, self.name)
        if preset is None:
            return {"CANCELLED"}
        if not self.filepath:
            blend_dir = os.path.dirname(bpy.data.filepath) if bpy.data.filepath else os.path.expanduser("~")
            self.filepath = os.path.join(blend_dir, Path(preset.path).name if preset.path else "preset.json")
        context.window_manager.fileselect_add(self)
        return {"RUNNING_MODAL"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        preset = _lookup(self, self.name)
        if preset is None:
            return {"CANCELLED"}
        if not self.filepath:
            self.report({"ERROR"}, "No file chosen")
            return {"CANCELLED"}
        try:
            path = write_preset_json(validate_preset(preset), bpy.path.abspath(self.filepath))
        except (PresetError, OSError) as e:
            self.report({"ERROR"}, f"Not exported: {e}")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Exported preset {preset.name!r} to {path}")
        return {"FINISHED"}


# ---------------------------------------------------------------------------- menus and panel


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
        if ob is not None and find_cloth_modifier(ob) is None:
            layout.label(text="Add a Cloth modifier to apply presets", icon="INFO")
        col = layout.column(align=True)
        col.operator(FIT_OT_preset_save_fitted.bl_idname, text="Save Fitted as Preset...", icon="ADD")
        col.operator(FIT_OT_preset_import.bl_idname, text="Import Preset...", icon="IMPORT")


classes = (
    FIT_OT_preset_apply,
    FIT_OT_preset_use_as_start,
    FIT_OT_preset_save_fitted,
    FIT_OT_preset_rename,
    FIT_OT_preset_delete,
    FIT_OT_preset_import,
    FIT_OT_preset_export,
    FIT_MT_presets_start,
    FIT_MT_presets_export,
    FIT_MT_presets_rename,
    FIT_MT_presets_delete,
    FIT_MT_presets,
    FIT_PT_presets,
)


def register() -> None:
    # scripts and the batch command calling warp_core.presets.find_preset(name) see user presets too
    set_default_user_dir(lambda: user_presets_dir(create=False))


def unregister() -> None:
    set_default_user_dir(None)
