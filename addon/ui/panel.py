"""Sidebar panel (View3D > Sidebar > Fit): the main panel (a running fit's progress, the
model, the Fit button) and its sub-panels Targets, Parameters, Weight Map, Solver and Result.

What each sub-panel draws lives in :mod:`.panel_settings`, :mod:`.panel_maps` and
:mod:`.panel_result`; labels of variable text are wrapped to the sidebar's width
(:mod:`.text_wrap`)."""

from __future__ import annotations

import bpy

# the panel shows misfits as a record states them; tests and callers read it from here
from ...warp_core.fit.verdict.report import record_misfit
from ..models.registry import MODEL_FROM_MODIFIER, model_label, object_model
from ..scene.checks import why_not_fittable
from ..scene.records import read_record
from ..session import FitSession, active_export, active_session, busy_with
from .bake_operators import active_bake, bake_under_way
from .fit_operators import fit_objects
from .panel_maps import FIT_UL_map_regions, draw_map_header, draw_maps, shows_maps
from .panel_result import contacts_line, draw_result, run_rows
from .panel_settings import FIT_UL_targets, draw_parameters, draw_solver, draw_targets
from .text_wrap import width_chars, wrapped_label

__all__ = ["contacts_line", "record_misfit", "run_rows"]


def fit_object(context: bpy.types.Context) -> bpy.types.Object | None:
    """The active object when it is a mesh (what the sub-panels show), else None."""
    ob = getattr(context, "active_object", None)
    return ob if ob is not None and ob.type == "MESH" else None


def split_layout(layout: bpy.types.UILayout) -> bpy.types.UILayout:
    """``layout`` set up as Blender's property panels: labels left, values right, no
    animation decorators (the settings are not animated)."""
    layout.use_property_split = True
    layout.use_property_decorate = False
    return layout


def draw_busy(layout: bpy.types.UILayout) -> bool:
    """The work under way, if any: a fit reading the scene, a fit running, a bake. Whether
    something was drawn."""
    session, export, bake = active_session(), active_export(), active_bake()
    if session is not None:
        draw_progress(layout, session)
    elif export is not None:
        box = layout.box()
        box.progress(factor=export.factor, type="BAR", text=export.text)
        box.label(text="Esc cancels", icon="CANCEL")
    elif bake is not None:
        box = layout.box()
        box.progress(factor=bake.factor, type="BAR", text=bake.text)
        box.operator("object.fit_to_target_cancel_bake", icon="CANCEL")
    return session is not None or export is not None or bake is not None


def draw_progress(layout: bpy.types.UILayout, session: FitSession) -> None:
    """The running fit: a bar with its text, and Cancel."""
    box = layout.box()
    box.progress(factor=session.factor, type="BAR", text=session.progress_text())
    if session.job.cancel_requested:
        box.label(text="Cancelling after this iteration...", icon="CANCEL")
    else:
        box.operator("object.fit_to_target_cancel", icon="CANCEL")


def draw_model(layout: bpy.types.UILayout, ob: bpy.types.Object, width: int) -> None:
    s = ob.fit_to_target
    model = object_model(ob)
    layout.prop(s, "model")
    if s.model == MODEL_FROM_MODIFIER and model.find_modifier(ob) is not None:  # say which one
        text = f"{model_label(model.name)}, from the {model.modifier_label} modifier"
        wrapped_label(layout, text, width)


def draw_fit_button(context: bpy.types.Context, layout: bpy.types.UILayout, width: int) -> None:
    """Why the Fit button is disabled (if it is), the objects it fits, and the button."""
    reason = why_not_fittable(context, busy=busy_with() or bake_under_way())
    if reason:
        col = layout.column()
        col.alert = True
        wrapped_label(col, reason, width, icon="ERROR")
    objects = fit_objects(context)
    if len(objects) > 1:
        box = layout.box()
        wrapped_label(box, f"Fits {len(objects)} selected objects, active first:", width, icon="OBJECT_DATA")
        wrapped_label(box, ", ".join(o.name for o in objects), width)
        box.prop(context.scene, "fit_to_target_shared")
    row = layout.row()
    row.scale_y = 1.5
    row.enabled = reason is None
    row.operator_context = "INVOKE_DEFAULT"
    row.operator("object.fit_to_target", icon="PLAY")


class _FitPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Fit"


class FIT_PT_main(_FitPanel, bpy.types.Panel):
    """Fit the active object's physics settings to targets"""

    bl_idname = "FIT_PT_main"
    bl_label = "Fit to Target"

    def draw(self, context: bpy.types.Context) -> None:
        layout = split_layout(self.layout)
        width = width_chars(context)
        busy = draw_busy(layout)
        ob = context.active_object
        if ob is None:
            wrapped_label(layout, "Select a mesh with a Cloth modifier", width, icon="INFO")
        elif ob.type != "MESH":
            wrapped_label(layout, f"'{ob.name}' is not a mesh", width, icon="INFO")
        else:
            draw_model(layout, ob, width)
            if not busy:
                draw_fit_button(context, layout, width)


class _FitSubPanel(_FitPanel):
    bl_parent_id = "FIT_PT_main"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return fit_object(context) is not None


class FIT_PT_targets(_FitSubPanel, bpy.types.Panel):
    """Where the cloth should be: meshes or shape keys at frames, or tracked footage"""

    bl_idname = "FIT_PT_targets"
    bl_label = "Targets"

    def draw(self, context: bpy.types.Context) -> None:
        ob = fit_object(context)
        if ob is not None:
            draw_targets(split_layout(self.layout), ob)


class FIT_PT_parameters(_FitSubPanel, bpy.types.Panel):
    """What the fit changes: a check box per setting, beside its current value"""

    bl_idname = "FIT_PT_parameters"
    bl_label = "Parameters"

    def draw(self, context: bpy.types.Context) -> None:
        ob = fit_object(context)
        if ob is not None:
            draw_parameters(split_layout(self.layout), ob, width_chars(context))


class FIT_PT_maps(_FitSubPanel, bpy.types.Panel):
    """Fit a stiffness weight map too: one value per painted region, or one weight per vertex"""

    bl_idname = "FIT_PT_maps"
    bl_label = "Weight Map"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        # only a model with maps (``SceneModel.map_kinds``)
        ob = fit_object(context)
        return ob is not None and shows_maps(ob)

    def draw_header(self, context: bpy.types.Context) -> None:
        ob = fit_object(context)
        if ob is not None:
            draw_map_header(self.layout, ob)

    def draw(self, context: bpy.types.Context) -> None:
        ob = fit_object(context)
        if ob is not None:
            draw_maps(split_layout(self.layout), ob, width_chars(context))


class FIT_PT_solver(_FitSubPanel, bpy.types.Panel):
    """How the fit measures the targets and when it stops"""

    bl_idname = "FIT_PT_solver"
    bl_label = "Solver"

    def draw(self, context: bpy.types.Context) -> None:
        ob = fit_object(context)
        if ob is not None:
            draw_solver(split_layout(self.layout), ob, width_chars(context))


class FIT_PT_result(_FitSubPanel, bpy.types.Panel):
    """The last fit of the active object: values found, the match, Apply, Revert and Bake"""

    bl_idname = "FIT_PT_result"
    bl_label = "Result"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        # hidden while a fit runs: its record is about to be replaced
        ob = fit_object(context)
        return ob is not None and active_session() is None and read_record(ob) is not None

    def draw(self, context: bpy.types.Context) -> None:
        ob = fit_object(context)
        record = read_record(ob) if ob is not None else None
        if record is not None:
            draw_result(split_layout(self.layout), ob, record, width_chars(context))


classes = (
    FIT_UL_targets,
    FIT_UL_map_regions,
    FIT_PT_main,
    FIT_PT_targets,
    FIT_PT_parameters,
    FIT_PT_maps,
    FIT_PT_solver,
    FIT_PT_result,
)
