"""The Targets, Parameters and Solver sub-panels of Fit to Target: what the fit is given.

Drawn with ``use_property_split`` as Blender's own property panels: a label column on the
left, the values on the right; a value with an Auto / Limit switch is a row with a heading,
the check box, then the value, greyed while the switch leaves it unused."""

from __future__ import annotations

import bpy

from ..models.registry import DEFAULT_MODEL, object_model
from ..request import fitted_parameters
from ..scene.records import read_record
from ..warp_setup import choose_device
from .labels import model_labels
from .result_ui import draw_jump_button, draw_start_values
from .text_wrap import wrapped_label
from .tracks_ui import draw_tracks


class FIT_UL_targets(bpy.types.UIList):
    """Target list: object (or shape key of the cloth) and frame."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0):
        row = layout.row(align=True)
        if item.kind == "SHAPE_KEY":
            keys = getattr(getattr(data.id_data, "data", None), "shape_keys", None)
            if keys is not None:
                row.prop_search(item, "shape_key", keys, "key_blocks", text="", icon="SHAPEKEY_DATA")
            else:  # the key was removed with all others: the name stays, to be fixed
                row.prop(item, "shape_key", text="", icon="SHAPEKEY_DATA")
        else:
            row.prop(item, "object", text="", icon="MESH_DATA")
        row.prop(item, "frame", text="")
        draw_jump_button(row, index)


def last_fitted(ob: bpy.types.Object, model_name: str) -> dict[str, float]:
    """The values the object's last fit found, when it fitted ``model_name`` ({} otherwise)."""
    record = read_record(ob)
    if record is None or (record.get("model") or DEFAULT_MODEL) != model_name:
        return {}
    params = record.get("params") or {}
    return {k: float(v) for k, v in params.items() if isinstance(v, int | float)}


def draw_targets(layout: bpy.types.UILayout, ob: bpy.types.Object) -> None:
    """Meshes or shape keys at frames (a list), or tracked footage."""
    s = ob.fit_to_target
    layout.row().prop(s, "target_source", expand=True)
    if s.target_source == "TRACKS":
        draw_tracks(layout, s)
        return
    row = layout.row()
    row.template_list("FIT_UL_targets", "", s, "targets", s, "active_target_index", rows=3)
    col = row.column(align=True)
    col.operator("object.fit_to_target_add_target", text="", icon="ADD")
    col.operator("object.fit_to_target_remove_target", text="", icon="REMOVE")
    layout.operator("object.fit_to_target_add_target", icon="KEYFRAME")


def fits_line(ob: bpy.types.Object) -> str:
    """What the fit changes, in words: "Fits Tension Stiffness; Compression Stiffness follows"
    ("" when nothing is ticked)."""
    model = object_model(ob)
    fit, ties = fitted_parameters(ob.fit_to_target, model)
    if not fit:
        return ""
    label = model_labels(model.name)
    text = "Fits " + ", ".join(label.get(n, n) for n in fit)
    if ties:
        text += "; " + ", ".join(f"{label.get(f, f)} follows" for f in ties)
    return text


def draw_parameters(layout: bpy.types.UILayout, ob: bpy.types.Object, width_chars: int) -> None:
    """The model's grouped rows (check box, current value, fitted value), then what the fit
    will change in words."""
    s = ob.fit_to_target
    model = object_model(ob)
    draw_start_values(layout, ob, None, width_chars)
    model.draw_parameters(layout, s, last_fitted(ob, model.name))
    text = fits_line(ob)
    if text:
        wrapped_label(layout, text, width_chars, icon="MODIFIER")


def _switch_row(
    layout: bpy.types.UILayout, s: bpy.types.PropertyGroup, heading: str, switch: tuple[str, str], value: str
) -> None:
    """A row as Blender draws a setting with a switch: ``heading``, the switch ``(property,
    text)``, then the value, greyed while the switch makes it unused (on for "use_auto_*",
    off for "use_*")."""
    name, text = switch
    row = layout.row(align=True, heading=heading)
    row.prop(s, name, text=text)
    sub = row.row(align=True)
    sub.active = bool(getattr(s, name)) != name.startswith("use_auto_")
    sub.prop(s, value, text="")


def draw_solver(layout: bpy.types.UILayout, ob: bpy.types.Object, width_chars: int) -> None:
    """Loss, when to stop, the tolerance, the device (for Auto, which it picks and why), and
    unsupported settings."""
    s = ob.fit_to_target
    tracks = s.target_source == "TRACKS"
    col = layout.column()
    if not tracks:
        col.prop(s, "loss")
    col.prop(s, "max_iterations")
    _switch_row(col, s, "Time Budget", ("use_time_budget", ""), "time_budget")
    if tracks:
        _switch_row(col, s, "Tolerance", ("use_auto_tolerance_px", "Auto"), "tolerance_px")
    else:
        _switch_row(col, s, "Tolerance", ("use_auto_tolerance", "Auto"), "tolerance")
    col.prop(s, "device")
    if s.device == "AUTO":
        model = object_model(ob)
        sized = len(ob.data.vertices) if model.auto_device_by_size else None
        choice = choose_device("AUTO", sized, precision=model.precision)
        wrapped_label(col, choice.reason, width_chars, icon="INFO")
    col.prop(s, "allow_unmodeled")


def draw_error_frame(layout: bpy.types.UILayout, s: bpy.types.PropertyGroup) -> None:
    """The error colors' target frame: the last target frame, or a chosen one. The frame
    holds 0 for "the last" (as the bake reads it): the last frame is named instead."""
    row = layout.row(align=True, heading="Error Frame")
    row.prop(s, "use_auto_error_frame", text="Last")
    sub = row.row(align=True)
    if s.use_auto_error_frame:
        frames = [int(t.frame) for t in s.targets]
        sub.active = False
        sub.label(text=f"Frame {max(frames)}" if frames else "Last target frame")
    else:
        sub.prop(s, "error_frame", text="")
