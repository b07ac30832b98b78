"""Operators: fit (modal with a worker thread, or blocking), targets, apply/revert, bake/unbake."""

from __future__ import annotations

import bpy

from . import bake, fitting
from .fitting import FitInputError
from .job import FitJob

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
        f"{name} {fitting.format_value(initial.get(name))} -> {fitting.format_value(value)}"
        for name, value in (record.get("params") or {}).items()
        if name not in (record.get("ties") or {})
    ]
    before, after = fitting.format_mm(record.get("initial_rmse_m")), fitting.format_mm(record.get("rmse_m"))
    rmse = f"RMSE {before} -> {after}"
    return f"Fitted {record.get('name')}: " + ", ".join(parts) + f"; {rmse}"


def _end_modal(op: bpy.types.Operator, context: bpy.types.Context) -> None:
    """Remove the modal fit's timer, progress bar and status text, and end its session."""
    wm = context.window_manager
    timer = getattr(op, "_timer", None)
    if timer is not None:
        wm.event_timer_remove(timer)
        op._timer = None
    wm.progress_end()
    _status(context, None)
    fitting.end_session()


def _finish(op: bpy.types.Operator, context: bpy.types.Context, session: fitting.FitSession) -> set[str]:
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
    record = fitting.write_back(ob, session.prepared, result)
    op.report({"INFO"}, _summary(record))
    return {"FINISHED"}


class OBJECT_OT_fit_to_target(bpy.types.Operator):
    """Fit the active cloth's material settings so Blender's solver reaches the targets"""

    bl_idname = "object.fit_to_target"
    bl_label = "Fit to Target"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        # Blocking path (scripts, background mode): same export and write-back as the modal one.
        if fitting.active_session() is not None:
            self.report({"ERROR"}, "A fit is already running: wait for it or cancel it")
            return {"CANCELLED"}
        ob = context.active_object
        try:
            fitting.check_object(ob)
            prepared = fitting.prepare_fit(context.scene, ob, fitting.request_from_object(ob))
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        from ..warp_core.fit import FitError

        try:
            result = fitting.run_fit(prepared)
        except (FitError, ValueError) as e:
            self.report({"ERROR"}, f"Fit of '{ob.name}' failed: {' '.join(str(e).split())}")
            return {"CANCELLED"}
        record = fitting.write_back(ob, prepared, result)
        self.report({"INFO"}, _summary(record))
        return {"FINISHED"}

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        # Export on the main thread, fit in a worker; the modal timer keeps the UI responsive.
        if fitting.active_session() is not None:
            self.report({"ERROR"}, "A fit is already running: wait for it or cancel it")
            return {"CANCELLED"}
        ob = context.active_object
        try:
            fitting.check_object(ob)
            prepared = fitting.prepare_fit(context.scene, ob, fitting.request_from_object(ob))
            job = FitJob(prepared.problem, prepared.settings)
            session = fitting.begin_session(prepared, job)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        job.start()
        wm = context.window_manager
        wm.progress_begin(0, session.max_iterations)
        self._timer = wm.event_timer_add(TIMER_STEP_S, window=context.window)
        wm.modal_handler_add(self)
        _status(context, session.status_text())
        _redraw_panels(context)
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        session = fitting.active_session()
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
        session = fitting.active_session()
        if session is not None:
            session.job.cancel()
        _end_modal(self, context)


class OBJECT_OT_fit_to_target_cancel(bpy.types.Operator):
    """Stop the running fit after its current iteration; nothing is changed"""

    bl_idname = "object.fit_to_target_cancel"
    bl_label = "Cancel Fit"

    def execute(self, context: bpy.types.Context) -> set[str]:
        session = fitting.active_session()
        if session is None:
            self.report({"WARNING"}, "No fit is running")
            return {"CANCELLED"}
        session.job.cancel()
        _redraw_panels(context)
        return {"FINISHED"}


class OBJECT_OT_fit_to_target_add_target(bpy.types.Operator):
    """Add a target at the current frame: the selected other mesh object, or the active shape key"""

    bl_idname = "object.fit_to_target_add_target"
    bl_label = "Add Current Frame"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        try:
            fitting.check_object(ob)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        s = ob.fit_to_target
        frame = context.scene.frame_current
        others = [o for o in context.selected_objects if o != ob and o.type == "MESH"]
        key = ob.active_shape_key if ob.data.shape_keys is not None else None
        if others:
            for other in others:
                item = s.targets.add()
                item.kind, item.object, item.frame = "OBJECT", other, frame
            names = ", ".join(o.name for o in others)
        elif key is not None and ob.active_shape_key_index > 0:
            item = s.targets.add()
            item.kind, item.shape_key, item.frame = "SHAPE_KEY", key.name, frame
            names = f"shape key '{key.name}'"
        else:
            self.report({"ERROR"}, "Select the target mesh too (cloth active), or make a shape key active")
            return {"CANCELLED"}
        s.active_target_index = len(s.targets) - 1
        self.report({"INFO"}, f"Target {names} at frame {frame}")
        return {"FINISHED"}


class OBJECT_OT_fit_to_target_remove_target(bpy.types.Operator):
    """Remove the selected target"""

    bl_idname = "object.fit_to_target_remove_target"
    bl_label = "Remove Target"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        s = getattr(ob, "fit_to_target", None)
        if s is None or not 0 <= s.active_target_index < len(s.targets):
            self.report({"ERROR"}, "No target selected")
            return {"CANCELLED"}
        s.targets.remove(s.active_target_index)
        s.active_target_index = min(s.active_target_index, len(s.targets) - 1)
        return {"FINISHED"}


class _ObjectResultOperator(bpy.types.Operator):
    """Base for Apply/Revert/Bake/Unbake: act on the active object, one clear error message."""

    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        try:
            fitting.check_object(ob)
            message = self.run(context, ob)
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        if message:
            level, text = message
            self.report({level}, text)
        return {"FINISHED"}

    def run(self, context: bpy.types.Context, ob: bpy.types.Object) -> tuple[str, str] | None:
        raise NotImplementedError


class OBJECT_OT_fit_to_target_apply(_ObjectResultOperator):
    """Write the fitted values into the cloth modifier (the current ones are kept for Revert)"""

    bl_idname = "object.fit_to_target_apply"
    bl_label = "Apply Fitted Values"

    def run(self, context, ob):
        fitting.apply_result(ob)
        return ("INFO", f"Applied the fitted values to '{ob.name}'")


class OBJECT_OT_fit_to_target_revert(_ObjectResultOperator):
    """Put back the cloth modifier values from before the fitted ones were applied, and unbake"""

    bl_idname = "object.fit_to_target_revert"
    bl_label = "Revert"

    def run(self, context, ob):
        fitting.revert(ob)
        return ("INFO", f"Reverted '{ob.name}' to its previous cloth settings")


class OBJECT_OT_fit_to_target_bake(_ObjectResultOperator):
    """Bake the cloth (its current settings) to a .pc2 point cache played by a Mesh Cache modifier"""

    bl_idname = "object.fit_to_target_bake"
    bl_label = "Bake"

    def run(self, context, ob):
        if fitting.active_session() is not None:
            raise FitInputError("A fit is running: bake when it has finished")
        info = bake.bake_object(context.scene, ob)
        return ("WARNING" if info.temporary else "INFO", info.message)


class OBJECT_OT_fit_to_target_unbake(_ObjectResultOperator):
    """Remove the bake's Mesh Cache modifier and switch the cloth modifier back on (the file is kept)"""

    bl_idname = "object.fit_to_target_unbake"
    bl_label = "Unbake"

    def run(self, context, ob):
        if not bake.unbake_object(ob):
            raise FitInputError(f"'{ob.name}' is not baked")
        return ("INFO", f"Unbaked '{ob.name}'")


classes = (
    OBJECT_OT_fit_to_target,
    OBJECT_OT_fit_to_target_cancel,
    OBJECT_OT_fit_to_target_add_target,
    OBJECT_OT_fit_to_target_remove_target,
    OBJECT_OT_fit_to_target_apply,
    OBJECT_OT_fit_to_target_revert,
    OBJECT_OT_fit_to_target_bake,
    OBJECT_OT_fit_to_target_unbake,
)
