"""Operators on material presets: apply one to the active object's cloth, start its next fit
from one, save its fit result as one, and rename, delete, import and export user presets.

Nothing read from a preset file is ever executed; every file is validated before use and
before it is copied anywhere (``warp_core.presets``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import bpy
from bpy.props import BoolProperty, StringProperty

from ...warp_core.presets.files import (
    delete_preset_file,
    load_preset_file,
    rename_preset_file,
    save_preset_file,
    write_preset_json,
)
from ...warp_core.presets.schema import (
    MAX_NOTES_LENGTH,
    Preset,
    PresetError,
    check_name,
    name_key,
    validate_preset,
)
from ..models.registry import object_model, scene_model
from ..presets import (
    all_presets,
    builtin_preset_names,
    find_preset,
    preset_from_fit_result,
    preset_values_of,
    user_presets_dir,
)


def fit_settings(ob: bpy.types.Object | None) -> bpy.types.PropertyGroup | None:
    """The object's Fit to Target settings (``Object.fit_to_target``), if registered."""
    return getattr(ob, "fit_to_target", None) if ob is not None else None


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
        model = scene_model(preset.model)
        mod = model.find_modifier(ob)
        if mod is None:
            self.report(
                {"ERROR"},
                f"{ob.name} has no {model.modifier_label} modifier: add one "
                f"(Properties > Physics > {model.modifier_label}), then apply {preset.name!r}",
            )
            return {"CANCELLED"}
        model.write_values(mod, preset.values)
        fields = list(preset.values)
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
        model = object_model(ob)
        if preset.model != model.name:
            self.report(
                {"ERROR"},
                f"{preset.name!r} holds {preset.model} settings and {ob.name} is fitted with the "
                f"{model.name} model: choose a {model.name} preset (or change the object's model)",
            )
            return {"CANCELLED"}
        # quality too: the fit then runs, and its result is applied, at the preset's quality
        settings.start_values_json = json.dumps(preset.values)
        settings.start_values_name = preset.name  # the panel says which, with a button to clear it
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
            preset = preset_from_fit_result(self.name.strip(), result, preset_values_of(ob), self.notes)
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
                if name_key(p.name) == name_key(new_name) and name_key(p.name) != name_key(preset.name)
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


classes = (
    FIT_OT_preset_apply,
    FIT_OT_preset_use_as_start,
    FIT_OT_preset_save_fitted,
    FIT_OT_preset_rename,
    FIT_OT_preset_delete,
    FIT_OT_preset_import,
    FIT_OT_preset_export,
)
