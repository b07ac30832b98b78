"""Sidebar panel (View3D > Sidebar > Fit)."""

from __future__ import annotations

import json
import textwrap

import bpy

from ...warp_core.fit.verdict.report import format_value, record_misfit
from ...warp_core.models import get_model
from ..models.registry import DEFAULT_MODEL, MODEL_FROM_MODIFIER, model_label, object_model
from ..request import fitted_parameters
from ..scene.checks import why_not_fittable
from ..scene.records import shared_summary
from ..session import FitSession, active_session
from .fit_operators import fit_objects
from .tracks_ui import draw_tracks, draw_worst_tracks


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
        box.label(text=f"Targets matched (within {record_misfit(record, 'tolerance')})", icon="CHECKMARK")
        return
    col = box.column()
    col.alert = True
    col.label(text=f"Not matched: {outcome}", icon="ERROR")
    for line in _wrap(record.get("outcome_reason") or "", 60):
        col.label(text=line)


def contacts_line(record: dict) -> str:
    """Where the fitted rollout touched collision objects, in a line ("" without colliders)."""
    contacts = record.get("contacts")
    if not contacts:
        return ""
    frames = contacts.get("frames") or []
    if not frames:
        return "No contact with collision objects"
    span = (
        f"frame {frames[0]}"
        if len(frames) == 1
        else f"frames {frames[0]}-{frames[-1]} ({len(frames)} frames)"
    )
    return f"Touched collision objects: {span}, {contacts.get('vertices', 0)} vertices"


def _record(ob: bpy.types.Object) -> dict | None:
    text = ob.fit_to_target.result_json
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def run_rows(record: dict) -> list[tuple[str, str, str]]:
    """(object, outcome, RMSE) of every object fitted in the same run as ``record``'s, from
    their own records (an object fitted again since then says so)."""
    rows = []
    for name in record.get("run_objects") or []:
        ob = bpy.data.objects.get(name)
        other = _record(ob) if ob is not None else None
        if other is None or other.get("run_objects") != record.get("run_objects"):
            rows.append((name, "changed since", ""))
            continue
        rows.append((name, str(other.get("outcome") or other.get("status")), record_misfit(other, "rmse")))
    return rows


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
        if s.model == MODEL_FROM_MODIFIER and model.find_modifier(ob) is not None:  # say which one
            layout.label(text=f"{model_label(model.name)}, from the {model.modifier_label} modifier")
        model.draw_parameters(layout, s)

        layout.prop(s, "target_source", expand=True)
        tracks = s.target_source == "TRACKS"
        if tracks:
            draw_tracks(layout, s)
        else:
            box = layout.box()
            box.label(text="Targets")
            row = box.row()
            row.template_list("FIT_UL_targets", "", s, "targets", s, "active_target_index", rows=3)
            col = row.column(align=True)
            col.operator("object.fit_to_target_add_target", text="", icon="ADD")
            col.operator("object.fit_to_target_remove_target", text="", icon="REMOVE")
            box.operator("object.fit_to_target_add_target", icon="KEYFRAME")

        col = layout.column()
        if not tracks:
            col.prop(s, "loss")
        col.prop(s, "max_iterations")
        col.prop(s, "time_budget")
        col.prop(s, "tolerance_px" if tracks else "tolerance")
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
        reason = why_not_fittable(context, busy=active_session() is not None)
        if reason:
            layout.label(text=reason, icon="ERROR")
        objects = fit_objects(context)
        if len(objects) > 1:
            box = layout.box()
            box.label(text=f"Fits {len(objects)} selected objects, active first:", icon="OBJECT_DATA")
            for line in _wrap(", ".join(o.name for o in objects), 60):
                box.label(text=line)
            box.prop(context.scene, "fit_to_target_shared")
        row = layout.row()
        row.scale_y = 1.5
        row.enabled = reason is None
        row.operator_context = "INVOKE_DEFAULT"
        row.operator("object.fit_to_target", icon="PLAY")

    def draw_progress(self, layout: bpy.types.UILayout, session: FitSession) -> None:
        box = layout.box()
        box.progress(factor=session.factor, type="BAR", text=session.progress_text())
        if session.job.cancel_requested:
            box.label(text="Cancelling after this iteration...", icon="CANCEL")
        else:
            box.operator("object.fit_to_target_cancel", icon="CANCEL")

    def draw_run(self, box: bpy.types.UILayout, ob: bpy.types.Object, record: dict) -> None:
        """With several objects in the run: one row per object, and what a shared fit found."""
        rows = run_rows(record)
        if len(rows) < 2:
            return
        shared = record.get("shared")
        box.label(text="Shared material:" if shared else "Objects fitted in this run:")
        grid = box.grid_flow(columns=3, even_columns=False, align=True)
        for cells in [("Object", "Outcome", "RMSE"), *rows]:
            for text in cells:
                grid.label(text=text)
        if shared:
            for line in _wrap(shared_summary(shared), 60):
                box.label(text=line)

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
            text=f"RMSE {record_misfit(record, 'initial_rmse')} -> {record_misfit(record, 'rmse')}",
            icon="SORT_ASC",
        )
        _draw_outcome(box, record)
        draw_worst_tracks(box, record)
        contact = contacts_line(record)
        if contact:
            box.label(text=contact, icon="MOD_PHYSICS")
        geometry = record.get("geometry")
        if geometry:
            box.label(
                text=f"Lattice: {geometry['tets']} tets, {geometry['nodes']} nodes, "
                f"worst tet quality {geometry['worst_quality']:.2f}",
                icon="MESH_ICOSPHERE",
            )
        self.draw_run(box, ob, record)
        for warning in record.get("warnings") or []:
            box.label(text=warning, icon="ERROR")
        row = box.row(align=True)
        sub = row.row(align=True)
        sub.enabled = not s.applied
        sub.operator("object.fit_to_target_apply", text="Apply", icon="CHECKMARK")
        sub = row.row(align=True)
        sub.enabled = bool(s.previous_values_json) and s.applied
        sub.operator("object.fit_to_target_revert", text="Revert", icon="LOOP_BACK")
        if len(record.get("run_objects") or []) > 1:
            row = box.row(align=True)
            row.operator("object.fit_to_target_apply", text="Apply All", icon="CHECKMARK").all_objects = True
            row.operator(
                "object.fit_to_target_revert", text="Revert All", icon="LOOP_BACK"
            ).all_objects = True
        row = box.row(align=True)
        # short words in the panel; the operators' names (F3 search) say what they act on
        row.operator("object.fit_to_target_bake", text="Bake", icon="FILE_CACHE")
        sub = row.row(align=True)
        sub.enabled = bool(s.bake_json)
        sub.operator("object.fit_to_target_unbake", text="Unbake", icon="X")
        row = box.row(align=True)
        row.prop(s, "bake_error_colors")
        sub = row.row(align=True)
        sub.enabled = s.bake_error_colors
        sub.prop(s, "error_frame")


classes = (FIT_UL_targets, FIT_PT_main)
