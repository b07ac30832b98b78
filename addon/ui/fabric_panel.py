"""The Fabric sub-panel: a fabric's lab numbers on the active cloth object
(``Object.fit_to_target_fabric``), its mesh edge, Fit Fabric and its progress (the fit's
operators are in :mod:`.fabric_operators`), and the last fabric fit's rig readings with
Save Fabric as Preset.

The numbers live on the object, not the scene: the settings they give depend on the
object's own mesh resolution, and each garment of a scene is its own fabric; the .blend
keeps them with the object and its last fit.

No ``from __future__ import annotations`` here: Blender reads the property definitions
from the class annotations, which must stay objects, not strings.
"""

import json
from typing import Any

import bpy
from bpy.props import BoolProperty, FloatProperty, PointerProperty, StringProperty

from ...warp_core.presets.files import save_preset_file
from ...warp_core.presets.schema import PresetError, check_name, parse_preset
from ..models.blender_cloth.scene_model import find_cloth_modifier
from ..presets import builtin_preset_names, user_presets_dir
from .fabric_operators import (
    NUMBER_LABELS,
    NUMBER_UNITS,
    active_fabric_fit,
    mesh_edge_m,
    numbers_problem,
    starts_words,
    why_not_fabric,
)
from .panel import fit_object, split_layout
from .text_wrap import width_chars, wrapped_label


class FIT_PG_fabric(bpy.types.PropertyGroup):
    """A fabric's lab numbers, each optional one ticked when measured, and the last fabric fit."""

    # plain floats with the unit in the name: a lab sheet's millimetres and grams per square
    # metre are not the scene's length unit, which a LENGTH or DISTANCE property would follow
    weight_gsm: FloatProperty(
        name="Weight (g/m²)",
        description="The fabric's weight per area from the lab sheet, in grams per square metre",
        default=150.0,
        min=0.0,
        soft_min=20.0,
        soft_max=1000.0,
        precision=1,
    )
    use_bending_length: BoolProperty(
        name="Use Bending Length",
        description="Fit the bending stiffness to the measured cantilever bending length",
        default=True,
    )
    bending_length_mm: FloatProperty(
        name="Bending Length (mm)",
        description="The cantilever bending length (ASTM D1388), in millimetres",
        default=25.0,
        min=0.0,
        soft_min=2.0,
        soft_max=150.0,
        precision=1,
    )
    use_drape_coefficient: BoolProperty(
        name="Use Drape Coefficient",
        description="Fit to the measured drape coefficient (Cusick's drape tester)",
        default=False,
    )
    drape_coefficient: FloatProperty(
        name="Drape Coefficient",
        description="Cusick's drape coefficient: the draped shadow's share of the annulus (0 limp, 1 stiff)",
        default=0.4,
        min=0.0,
        max=1.0,
        subtype="FACTOR",
    )
    use_elongation: BoolProperty(
        name="Use Elongation",
        description="Fit to the measured elongation along the grain at the load",
        default=False,
    )
    elongation_percent: FloatProperty(
        name="Elongation",
        description="The strip's strain along the grain at the load (Kawabata's EMT), in percent",
        default=3.0,
        min=0.0,
        soft_min=0.1,
        soft_max=60.0,
        subtype="PERCENTAGE",
    )
    use_bias_elongation: BoolProperty(
        name="Use Bias Elongation",
        description="Fit to the measured elongation at 45 degrees to the grain at the load",
        default=False,
    )
    bias_elongation_percent: FloatProperty(
        name="Bias Elongation",
        description="The strip's strain at 45 degrees to the grain at the load, in percent",
        default=8.0,
        min=0.0,
        soft_min=0.1,
        soft_max=60.0,
        subtype="PERCENTAGE",
    )
    load_n_per_m: FloatProperty(
        name="Load (N/m)",
        description="The load the elongations were measured at, in N per metre of width (Kawabata: 490.3)",
        default=490.3,
        min=0.0,
        soft_min=1.0,
        soft_max=10000.0,
        precision=1,
    )
    result_json: StringProperty(
        name="Fabric Result",
        description="The last fabric fit of this object: settings written and each rig's reading (JSON)",
        options={"HIDDEN"},
    )


def fabric_record(ob: bpy.types.Object | None) -> dict[str, Any] | None:
    """The object's last fabric fit as ``fabric_operators.finish`` stored it (with the preset
    the fit made), or None."""
    s = getattr(ob, "fit_to_target_fabric", None) if ob is not None else None
    if s is None or not s.result_json:
        return None
    try:
        record = json.loads(s.result_json)
    except ValueError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("preset"), dict) else None


class FIT_OT_fabric_save_preset(bpy.types.Operator):
    """Save the active object's last fabric fit as a user material preset, lab numbers in its notes"""

    bl_idname = "fit.fabric_save_preset"
    bl_label = "Save Fabric as Preset"
    bl_options = {"REGISTER"}

    name: StringProperty(name="Name", description="Name of the new preset", maxlen=64)
    overwrite: BoolProperty(
        name="Overwrite", description="Replace a user preset of the same name", default=False
    )

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        if fabric_record(context.active_object) is None:
            cls.poll_message_set("The active object has no fabric fit to save")
            return False
        return True

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        if not self.name:
            self.name = str(fabric_record(context.active_object)["preset"].get("name", ""))[:64]
        return context.window_manager.invoke_props_dialog(self, confirm_text="Save")

    def execute(self, context: bpy.types.Context) -> set[str]:
        stored = dict(fabric_record(context.active_object)["preset"])
        # the preset the fit made (fabric_preset: settings, lab numbers and readings in its
        # notes), under the artist's name, checked again as any file is
        name = self.name.strip() or str(stored.get("name", ""))
        try:
            check_name(name, repr(name))
            preset = parse_preset(json.dumps({**stored, "name": name}), repr(name))
            path = save_preset_file(
                preset, user_presets_dir(), overwrite=self.overwrite, reserved=builtin_preset_names()
            )
        except (PresetError, OSError) as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Saved preset {preset.name!r} to {path}")
        return {"FINISHED"}


# (switch, value) of each optional number, in the order a lab sheet gives them
OPTIONAL_ROWS = (
    ("use_bending_length", "bending_length_mm"),
    ("use_drape_coefficient", "drape_coefficient"),
    ("use_elongation", "elongation_percent"),
    ("use_bias_elongation", "bias_elongation_percent"),
)


def draw_numbers(layout: bpy.types.UILayout, s: FIT_PG_fabric) -> None:
    """The weight, then each optional number as Blender draws a setting with a switch: the
    check box in the row's heading, the value greyed while it is off; the load greyed while
    no elongation is ticked."""
    col = layout.column()
    col.prop(s, "weight_gsm")
    for switch, value in OPTIONAL_ROWS:
        # the heading carries the unit: the value beside the check box has no label of its own
        row = col.row(align=True, heading=s.bl_rna.properties[value].name)
        row.prop(s, switch, text="")
        sub = row.row(align=True)
        sub.active = bool(getattr(s, switch))
        sub.prop(s, value, text="")
    row = col.row()
    row.active = s.use_elongation or s.use_bias_elongation
    row.prop(s, "load_n_per_m")


def _reading(value: float, number: str) -> str:
    return "no reading" if value != value else f"{value:.4g}{NUMBER_UNITS.get(number, '')}"


def draw_record(layout: bpy.types.UILayout, record: dict, width: int) -> None:
    """The last fit: its outcome, a row per rig (requested -> read, outcome), Save as Preset."""
    box = layout.box()
    matched = record.get("outcome") == "matched" and not record.get("unread")
    head = f"Last fit: {record.get('outcome', '?')} on {float(record.get('edge_mm', 0.0)):.3g} mm edges"
    wrapped_label(box, head, width, icon="CHECKMARK" if matched else "ERROR")
    for row in record.get("rigs") or []:
        number = str(row.get("number", ""))
        unit = NUMBER_UNITS.get(number, "")
        text = (
            f"{str(row.get('rig', '')).capitalize()}: {float(row.get('requested', 0.0)):g}{unit} "
            f"\u2192 {_reading(float(row.get('reading', float('nan'))), number)} "
            f"({row.get('outcome', '?')}{starts_words(row)})"
        )
        wrapped_label(box, text, width)
    unread = ", ".join(NUMBER_LABELS.get(n, n) for n in record.get("unread") or [])
    if unread:
        wrapped_label(box, f"No rig reads {unread} yet", width, icon="INFO")
    box.operator("fit.fabric_save_preset", icon="PRESET_NEW")


class FIT_PT_fabric(bpy.types.Panel):
    """Cloth settings from a fabric's lab numbers, fitted by virtual test rigs on this mesh"""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Fit"
    bl_parent_id = "FIT_PT_main"
    bl_idname = "FIT_PT_fabric"
    bl_label = "Fabric"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        ob = fit_object(context)
        return ob is not None and find_cloth_modifier(ob) is not None

    def draw(self, context: bpy.types.Context) -> None:
        ob = fit_object(context)
        if ob is None or find_cloth_modifier(ob) is None:
            return
        layout = split_layout(self.layout)
        width = width_chars(context)
        s = ob.fit_to_target_fabric
        draw_numbers(layout, s)
        edge_m = mesh_edge_m(ob, context.evaluated_depsgraph_get())
        edge = "none" if edge_m != edge_m else f"{edge_m * 1e3:.3g} mm"  # NaN: no edges
        layout.label(text=f"Mesh edge: {edge}", icon="MESH_GRID")
        run = active_fabric_fit()
        if run is not None:
            box = layout.box()
            wrapped_label(box, f"'{run.object_name}': {run.text}", width, icon="SORTTIME")
            if run.stop.is_set():
                box.label(text="Cancelling after this rig run...", icon="CANCEL")
            else:
                box.operator("fit.fabric_cancel", icon="CANCEL")
        else:
            reason = why_not_fabric(ob, edge_m) or numbers_problem(s)
            if reason:
                col = layout.column()
                col.alert = True
                wrapped_label(col, reason, width, icon="ERROR")
            row = layout.row()
            row.scale_y = 1.5
            row.enabled = reason is None
            row.operator_context = "INVOKE_DEFAULT"
            row.operator("fit.fabric_fit", icon="PLAY")
        record = fabric_record(ob)
        if record is not None:
            draw_record(layout, record, width)


classes = (FIT_PG_fabric, FIT_OT_fabric_save_preset, FIT_PT_fabric)


def register() -> None:
    bpy.types.Object.fit_to_target_fabric = PointerProperty(
        type=FIT_PG_fabric, name="Fabric", description="The fabric's lab numbers and its last fabric fit"
    )


def unregister() -> None:
    del bpy.types.Object.fit_to_target_fabric
