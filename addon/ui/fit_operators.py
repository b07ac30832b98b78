"""The Fit operator (modal with a worker thread, or blocking) and Cancel."""

from __future__ import annotations

import bpy

from ...warp_core.errors import one_line
from ...warp_core.fit import FitError
from ...warp_core.fit.report import format_mm, format_value
from ..errors import FitInputError
from ..job import FitJob
from ..request import PreparedFit, request_from_object
from ..scene.checks import check_object
from ..scene.prepare import prepare_fit, run_fit
from ..scene.write_back import write_back
from ..session import FitSession, active_session, begin_session, end_session

TIMER_STEP_S = 0.1  # how often the modal operator polls the worker's queue


def _redraw_panels(context: bpy.types.Context) -> None:
    wm = context.window_manager
    for window in getattr(wm, "windows", ()):
        screen = window.screen
        for area in getattr(screen, "areas", ()):
            if area.type == "VIEW_3D":
                area.tag_redraw()


def _status(context: bpy.types.Context, text: str | None) -> None:
    workspace = getattr(context, "workspace", None)
    if workspace is not None:
        workspace.status_text_set(text)


def _summary(record: dict) -> str:
    """One line for the info report: values before -> after and the error drop."""
    initial = record.get("initial_params") or {}
    parts = [
        f"{name} {format_value(initial.get(name))} -> {format_value(value)}"
        for name, value in (record.get("params") or {}).items()
        if name not in (record.get("ties") or {})
    ]
    before, after = format_mm(record.get("initial_rmse_m")), format_mm(record.get("rmse_m"))
    rmse = f"RMSE {before} -> {after}"
    return f"Fitted {record.get('name')}: " + ", ".join(parts) + f"; {rmse}"


def report_result(op: bpy.types.Operator, record: dict) -> None:
    """A converged fit is reported as information; any other outcome as a warning that says
    why, so a fit that does not match its targets never reads as a success."""
    outcome = record.get("outcome")
    if outcome in (None, "converged"):
        op.report({"INFO"}, _summary(record))
    else:
        op.report({"WARNING"}, f"{_summary(record)}; NOT MATCHED ({outcome}): {record.get('outcome_reason')}")


def _end_modal(op: bpy.types.Operator, context: bpy.types.Context) -> None:
    """Remove the modal fit's timer, progress bar and status text, and end its session."""
    wm = context.window_manager
    timer = getattr(op, "_timer", None)
    if timer is not None:
        wm.event_timer_remove(timer)
        op._timer = None
    wm.progress_end()
    _status(context, None)
    end_session()


def _finish(op: bpy.types.Operator, context: bpy.types.Context, session: FitSession) -> set[str]:
    """End of the modal fit: all scene writes happen here, on the main thread, in one undo step."""
    _end_modal(op, context)
    _redraw_panels(context)
    job = session.job
    if job.error is not None:
        op.report({"ERROR"}, f"Fit of '{session.object_name}' failed: {job.error}")
        return {"CANCELLED"}
    result = job.result
    if result is None or result.cancelled or job.cancel_requested:
        op.report({"WARNING"}, f"Fit of '{session.object_name}' cancelled: nothing was changed")
        return {"CANCELLED"}
    ob = bpy.data.objects.get(session.object_name)
    if ob is None:
        op.report({"ERROR"}, f"'{session.object_name}' no longer exists: the fit result was not written")
        return {"CANCELLED"}
    record = write_back(ob, session.prepared, result)
    report_result(op, record)
    return {"FINISHED"}


def _prepare(op: bpy.types.Operator, context: bpy.types.Context) -> PreparedFit | None:
    """The active object's fit exported on the main thread; None (reported) when it cannot run."""
    if active_session() is not None:
        op.report({"ERROR"}, "A fit is already running: wait for it or cancel it")
        return None
    ob = context.active_object
    try:
        check_object(ob)
        return prepare_fit(context.scene, ob, request_from_object(ob))
    except FitInputError as e:
        op.report({"ERROR"}, str(e))
        return None


class OBJECT_OT_fit_to_target(bpy.types.Operator):
    """Fit the active cloth's material settings so Blender's solver reaches the targets"""

    bl_idname = "object.fit_to_target"
    bl_label = "Fit to Target"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        # Blocking path (scripts, background mode): same export and write-back as the modal one.
        prepared = _prepare(self, context)
        if prepared is None:
            return {"CANCELLED"}
        ob = context.active_object
        try:
            result = run_fit(prepared)
        except (FitError, ValueError) as e:
            self.report({"ERROR"}, f"Fit of '{ob.name}' failed: {one_line(e)}")
            return {"CANCELLED"}
        record = write_back(ob, prepared, result)
        report_result(self, record)
        return {"FINISHED"}

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        # Export on the main thread, fit in a worker; the modal timer keeps the UI responsive.
        prepared = _prepare(self, context)
        if prepared is None:
            return {"CANCELLED"}
        job = FitJob(prepared.problem, prepared.settings)
        session = begin_session(prepared, job)
        job.start()
        wm = context.window_manager
        wm.progress_begin(0, session.max_iterations)
        self._timer = wm.event_timer_add(TIMER_STEP_S, window=context.window)
        wm.modal_handler_add(self)
        _status(context, session.status_text())
        _redraw_panels(context)
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        session = active_session()
        if session is None:  # ended elsewhere (file load)
            return {"CANCELLED"}
        if event.type in {"ESC", "RIGHTMOUSE"} and event.value == "PRESS":
            session.job.cancel()
            _status(context, session.status_text())
            _redraw_panels(context)
            return {"RUNNING_MODAL"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        session.update(session.job.poll())
        if session.job.finished:
            return _finish(self, context, session)
        context.window_manager.progress_update(session.iteration)
        _status(context, session.status_text())
        _redraw_panels(context)
        return {"PASS_THROUGH"}

    def cancel(self, context: bpy.types.Context) -> None:
        # Blender ends the operator (new file, quit): stop the worker, write nothing.
        session = active_session()
        if session is not None:
            session.job.cancel()
        _end_modal(self, context)


class OBJECT_OT_fit_to_target_cancel(bpy.types.Operator):
    """Stop the running fit after its current iteration; nothing is changed"""

    bl_idname = "object.fit_to_target_cancel"
    bl_label = "Cancel Fit"

    def execute(self, context: bpy.types.Context) -> set[str]:
        session = active_session()
        if session is None:
            self.report({"WARNING"}, "No fit is running")
            return {"CANCELLED"}
        session.job.cancel()
        _redraw_panels(context)
        return {"FINISHED"}


classes = (OBJECT_OT_fit_to_target, OBJECT_OT_fit_to_target_cancel)
