"""Sidebar panel (View3D > Sidebar > Fit)."""

from __future__ import annotations

import json
import textwrap

import bpy

from ...warp_core.fit.report import format_mm, format_value
from ...warp_core.models import get_model
from ..models.registry import DEFAULT_MODEL, object_model
from ..request import fitted_parameters
from ..scene.checks import why_not_fittable
from ..session import FitSession, active_session


class FIT_UL_targets(bpy.types.UIList):
    """Target list: object (or shape key) and frame."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0):
        row = layout.row(align=True)
        if item.kind == "SHAPE_KEY":
            row.prop(item, "shape_key", text="", icon="SHAPEKEY_DATA", emboss=False)
        else:
            row.prop(item, "object", text="", icon="MESH_DATA")
        row.prop(item, "frame", text="")


def _labels(model_name: str) -> dict[str, str]:
    """Parameter name -> label ("Tension stiffness") of a model."""
    try:
        return {p.name: p.label for p in get_model(model_name).parameters}
    except ValueError:  # a record of a model this version does not know
        return {}


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters (panel labels do not wrap)."""
    return textwrap.wrap(text, width) or [""]


def _draw_outcome(box: bpy.types.UILayout, record: dict) -> None:
    """Converged: the tolerance met. Anything else: an alert row with the reason, so a fit
    that does not match its targets never looks like a success."""
    outcome = record.get("outcome")
    if outcome is None:
        return  # a record from before outcomes were kept
    if outcome == "converged":
        box.label(text=f"Targets matched (within {format_mm(record.get('tolerance_m'))})", icon="CHECKMARK")
        return
    col = box.column()
    col.alert = True
    col.label(text=f"Not matched: {outcome}", icon="ERROR")
    for line in _wrap(record.get("outcome_reason") or "", 60):
        col.label(text=line)


def _record(ob: bpy.types.Object) -> dict | None:
    text = ob.fit_to_target.result_json
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


class FIT_PT_main(bpy.types.Panel):
    bl_idname = "FIT_PT_main"
    bl_label = "Fit to Target"
    bl_category = "Fit"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        ob = context.active_object
        session = active_session()
        if ob is None:
            layout.label(text="Select a mesh with a Cloth modifier", icon="INFO")
        elif ob.type != "MESH":
            layout.label(text=f"'{ob.name}' is not a mesh", icon="INFO")
        else:
            self.draw_settings(context, layout, ob)
        if session is not None:
            self.draw_progress(layout, session)
        elif ob is not None and ob.type == "MESH":
            self.draw_fit_button(context, layout)
            record = _record(ob)
            if record is not None:
                self.draw_result(layout, ob, record)

    def draw_settings(
        self, context: bpy.types.Context, layout: bpy.types.UILayout, ob: bpy.types.Object
    ) -> None:
        s = ob.fit_to_target
        model = object_model(ob)
        layout.prop(s, "model")
        model.draw_parameters(layout, s)

        box = layout.box()
        box.label(text="Targets")
        row = box.row()
        row.template_list("FIT_UL_targets", "", s, "targets", s, "active_target_index", rows=3)
        col = row.column(align=True)
        col.operator("object.fit_to_target_add_target", text="", icon="ADD")
        col.operator("object.fit_to_target_remove_target", text="", icon="REMOVE")
        box.operator("object.fit_to_target_add_target", icon="KEYFRAME")

        col = layout.column()
        col.prop(s, "loss")
        col.prop(s, "max_iterations")
        col.prop(s, "time_budget")
        col.prop(s, "tolerance")
        col.prop(s, "device")
        col.prop(s, "allow_unmodeled")
        if s.start_values_json:
            col.label(text="Start values: preset (not the modifier's)", icon="PRESET")

        fit, ties = fitted_parameters(s, model)
        if fit:
            label = _labels(model.name)
            text = "Fits " + ", ".join(label[n].lower() for n in fit)
            if ties:
                text += "; " + ", ".join(f"{label[f].lower()} follows" for f in ties)
            layout.label(text=text, icon="MODIFIER")

    def draw_fit_button(self, context: bpy.types.Context, layout: bpy.types.UILayout) -> None:
        reason = why_not_fittable(context)
        if reason:
            layout.label(text=reason, icon="ERROR")
        row = layout.row()
        row.scale_y = 1.5
        row.enabled = reason is None
        row.operator_context = "INVOKE_DEFAULT"
        row.operator("object.fit_to_target", icon="PLAY")

    def draw_progress(self, layout: bpy.types.UILayout, session: FitSession) -> None:
        box = layout.box()
        if session.progress_messages:
            text = (
                f"{session.object_name}: iteration {session.iteration}/{session.max_iterations}, "
                f"loss {session.loss:.4g}"
            )
        else:
            text = f"{session.object_name}: first simulation..."
        box.progress(factor=session.factor, type="BAR", text=text)
        if session.job.cancel_requested:
            box.label(text="Cancelling after this iteration...", icon="CANCEL")
        else:
            box.operator("object.fit_to_target_cancel", icon="CANCEL")

    def draw_result(self, layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict) -> None:
        s = ob.fit_to_target
        box = layout.box()
        box.label(text=f"Last fit: {record.get('iterations')} iterations, {record.get('seconds', 0):.1f} s")
        grid = box.grid_flow(columns=3, even_columns=False, align=True)
        grid.label(text="Parameter")
        grid.label(text="Before")
        grid.label(text="After")
        initial = record.get("initial_params") or {}
        label = _labels(record.get("model") or DEFAULT_MODEL)
        for name, value in (record.get("params") or {}).items():
            grid.label(text=label.get(name, name))
            grid.label(text=format_value(initial.get(name)))
            grid.label(text=format_value(value))
        box.label(
            text=f"RMSE {format_mm(record.get('initial_rmse_m'))} -> {format_mm(record.get('rmse_m'))}",
            icon="SORT_ASC",
        )
        _draw_outcome(box, record)
        for warning in record.get("warnings") or []:
            box.label(text=warning, icon="ERROR")
        row = box.row(align=True)
        sub = row.row(align=True)
        sub.enabled = not s.applied
        sub.operator("object.fit_to_target_apply", text="Apply", icon="CHECKMARK")
        sub = row.row(align=True)
        sub.enabled = bool(s.previous_values_json) and s.applied
        sub.operator("object.fit_to_target_revert", text="Revert", icon="LOOP_BACK")
        row = box.row(align=True)
        row.operator("object.fit_to_target_bake", icon="FILE_CACHE")
        sub = row.row(align=True)
        sub.enabled = bool(s.bake_json)
        sub.operator("object.fit_to_target_unbake", icon="X")
        row = box.row(align=True)
        row.prop(s, "bake_error_colors")
        sub = row.row(align=True)
        sub.enabled = s.bake_error_colors
        sub.prop(s, "error_frame")


classes = (FIT_UL_targets, FIT_PT_main)
