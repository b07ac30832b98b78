"""Bake Fit Simulation (modal with progress and Esc, or blocking) and Cancel Bake.

The modal bake runs ``scene.bake.bake_object_steps`` a slice per timer event
(``scene/steps.py``): while it steps the scene through the frames on the main thread every
event but Esc is held back (the scene sits at another frame with the cloth switched off, and
must not be edited halfway); while it simulates in a thread, Blender works as usual. Esc
(or Cancel Bake) stops it with the scene as it was and no file written.

No ``from __future__ import annotations``: Blender reads operator properties from the class
annotations, which must stay objects.
"""

import sys
import traceback
from dataclasses import dataclass

import bpy

from ...warp_core.errors import one_line
from ..errors import FitInputError
from ..scene.bake import BakeInfo, bake_object, bake_object_steps
from ..scene.checks import check_object
from ..scene.steps import ShownRun, SteppedRun
from ..session import busy_with
from .modal_status import redraw_panels, set_status

TIMER_STEP_S = 0.01  # how soon the next slice of a modal bake runs
STEP_BUDGET_S = 0.05  # main-thread time per slice: the interface redraws and hears Esc between slices


@dataclass
class BakeProgress(ShownRun):
    """The running modal bake: made by the Bake operator's ``invoke``, read through
    :func:`active_bake` by the panel (a bar and a Cancel button) and Cancel Bake. Its text
    reads "Baking 'Flag': frame 37 of 250", then "Baking 'Flag': simulating 250 frames"."""

    object_name: str
    run: SteppedRun

    def title(self) -> str:
        return f"Baking '{self.object_name}'"


# One per Blender session, as the fit's: the modal bake under way.
_bake: BakeProgress | None = None


def active_bake() -> BakeProgress | None:
    """The running modal bake's progress, or None."""
    return _bake


def bake_under_way() -> str | None:
    """ "A bake of 'Flag' is running" while a modal bake runs (no fit or other bake may start
    then), else None."""
    return f"A bake of '{_bake.object_name}' is running" if _bake is not None else None


def _check_can_start(ob: bpy.types.Object | None) -> None:
    check_object(ob)
    if busy_with() is not None:
        raise FitInputError(f"{busy_with()}: bake when it has finished")
    busy = bake_under_way()
    if busy is not None:
        raise FitInputError(f"{busy}: wait for it or cancel it")


def _report_done(op: bpy.types.Operator, info: BakeInfo) -> None:
    op.report({"WARNING"} if info.temporary or info.warnings else {"INFO"}, info.message)


def _end_modal(op: bpy.types.Operator, context: bpy.types.Context) -> None:
    """Remove the modal bake's timer and status text, and forget it."""
    global _bake
    timer = getattr(op, "_timer", None)
    if timer is not None:
        context.window_manager.event_timer_remove(timer)
        op._timer = None
    set_status(context, None)
    _bake = None
    redraw_panels(context)


def _finish(op: bpy.types.Operator, context: bpy.types.Context, bake: BakeProgress) -> set[str]:
    """One report for the ended bake: done, refused or failed, or cancelled."""
    _end_modal(op, context)
    run = bake.run
    if run.cancelled:
        if run.error is not None:
            op.report({"ERROR"}, f"Bake of '{bake.object_name}' cancelled, but: {one_line(run.error)}")
        else:
            op.report({"WARNING"}, f"Bake of '{bake.object_name}' cancelled: nothing was changed")
        return {"CANCELLED"}
    if isinstance(run.error, FitInputError):
        op.report({"ERROR"}, str(run.error))
        return {"CANCELLED"}
    if run.error is not None:  # a bug, not bad input: its traceback goes to the console
        traceback.print_exception(type(run.error), run.error, run.error.__traceback__, file=sys.stderr)
        op.report({"ERROR"}, f"Bake of '{bake.object_name}' failed: {one_line(run.error)}")
        return {"CANCELLED"}
    _report_done(op, run.value)
    return {"FINISHED"}


class OBJECT_OT_fit_to_target_bake(bpy.types.Operator):
    """Bake the cloth (its current settings) to a .pc2 point cache played by a Mesh Cache modifier"""

    bl_idname = "object.fit_to_target_bake"
    bl_label = "Bake Fit Simulation"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        # Blocking path (scripts, background mode): the same bake in one go.
        ob = context.active_object
        try:
            _check_can_start(ob)
            info = bake_object(context.scene, ob)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        _report_done(self, info)
        return {"FINISHED"}

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        global _bake
        ob = context.active_object
        try:
            _check_can_start(ob)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        bake = _bake = BakeProgress(ob.name, SteppedRun(bake_object_steps(context.scene, ob)))
        wm = context.window_manager
        self._timer = None
        bake.run.advance(STEP_BUDGET_S)  # a refusal comes back at once, as the operator's result
        if bake.run.finished:
            return _finish(self, context, bake)
        self._timer = wm.event_timer_add(TIMER_STEP_S, window=context.window)
        wm.modal_handler_add(self)
        set_status(context, bake.status_text())
        redraw_panels(context)
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        bake = _bake
        if bake is None:  # ended elsewhere (file load)
            return {"CANCELLED"}
        if event.type == "ESC" and event.value == "PRESS":
            bake.cancel()
        elif event.type == "TIMER":
            bake.run.advance(STEP_BUDGET_S)
        if bake.run.finished:  # done, failed, or cancelled (Esc, Cancel Bake)
            return _finish(self, context, bake)
        set_status(context, bake.status_text())  # the panel draws active_bake()'s bar
        redraw_panels(context)
        if event.type == "TIMER" or bake.run.off_main_thread:
            return {"PASS_THROUGH"}
        # mid-export the scene sits at another frame with the cloth off: no edits meanwhile
        return {"RUNNING_MODAL"}

    def cancel(self, context: bpy.types.Context) -> None:
        # Blender ends the operator (new file, quit): stop, restore the scene, write nothing.
        bake = _bake
        if bake is not None:
            bake.cancel()
        _end_modal(self, context)


class OBJECT_OT_fit_to_target_cancel_bake(bpy.types.Operator):
    """Stop the running bake; the scene is left as it was and no cache is written"""

    bl_idname = "object.fit_to_target_cancel_bake"
    bl_label = "Cancel Bake"

    def execute(self, context: bpy.types.Context) -> set[str]:
        bake = _bake
        if bake is None:
            self.report({"WARNING"}, "No bake is running")
            return {"CANCELLED"}
        bake.cancel()  # the modal operator reports it on its next event
        redraw_panels(context)
        return {"FINISHED"}


classes = (OBJECT_OT_fit_to_target_bake, OBJECT_OT_fit_to_target_cancel_bake)
