"""The Fit operator (modal with a worker thread, or blocking) and Cancel: the active object
and every other selected object with fit targets, one after another or with one shared
material."""

import functools

import bpy
from bpy.props import BoolProperty

from ...warp_core.fit import fit_shared
from ...warp_core.fit.verdict.report import format_value, record_misfit
from ..errors import FitInputError
from ..job import FitJob, FitTask
from ..request import PreparedFit, following, request_from_object
from ..scene.checks import check_object
from ..scene.prepare import prepare_fit
from ..scene.records import quoted_names, shared_summary
from ..scene.write_back import write_back
from ..session import active_session, begin_session, end_session

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
    before, after = record_misfit(record, "initial_rmse"), record_misfit(record, "rmse")
    rmse = f"RMSE {before} -> {after}"
    return f"Fitted {record.get('name')}: " + ", ".join(parts) + f"; {rmse}"


def report_result(op: bpy.types.Operator, record: dict, applied: bool = True) -> None:
    """A converged fit is reported as information; any other outcome as a warning that says
    why, so a fit that does not match its targets never reads as a success, and whether its
    values were applied."""
    outcome = record.get("outcome")
    if outcome in (None, "converged"):
        op.report({"INFO"}, _summary(record))
        return
    kept = "" if applied else "; the values were not applied: Apply Fitted Values uses them"
    op.report(
        {"WARNING"}, f"{_summary(record)}; NOT MATCHED ({outcome}): {record.get('outcome_reason')}{kept}"
    )


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


def fit_objects(context: bpy.types.Context) -> list[bpy.types.Object]:
    """What Fit to Target fits: the active object, then every other selected object that has
    fit targets (by name). Selected target meshes have none and are left out."""
    active = context.active_object
    others = [
        o
        for o in getattr(context, "selected_objects", ())
        if o != active and o.type == "MESH" and len(o.fit_to_target.targets) > 0
    ]
    return [active] + sorted(others, key=lambda o: o.name)


def _prepare(op: bpy.types.Operator, context: bpy.types.Context, shared: bool) -> list[PreparedFit] | None:
    """Every fitted object's fit exported on the main thread, the active one first; None
    (reported, nothing started) when any cannot run. A shared fit takes its parameters,
    ties and run settings from the active object."""
    if active_session() is not None:
        op.report({"ERROR"}, "A fit is already running: wait for it or cancel it")
        return None
    objects = fit_objects(context)
    prepared: list[PreparedFit] = []
    try:
        check_object(objects[0])
        lead = request_from_object(objects[0])
        if shared and len(objects) < 2:
            raise FitInputError(
                "Shared material needs two or more selected objects with fit targets: select them "
                f"with '{objects[0].name}' active, or untick Shared Material"
            )
        for ob in objects:
            check_object(ob)
            request = lead if ob == objects[0] else request_from_object(ob)
            if shared and ob != objects[0]:
                request = following(request, lead)
            prepared.append(prepare_fit(context.scene, ob, request))
    except FitInputError as e:
        op.report({"ERROR"}, str(e))
        return None
    return prepared


def fit_tasks(prepared: list[PreparedFit], shared: bool) -> list[FitTask]:
    """One fit per object, or one shared fit of all of them."""
    if shared:
        names = [p.request.object_name for p in prepared]
        problems = [p.problem for p in prepared]
        return [FitTask(problems, prepared[0].settings, functools.partial(fit_shared, names=names))]
    return [FitTask(p.problem, p.settings) for p in prepared]


def make_job(tasks: list[FitTask]) -> FitJob:
    return FitJob.of_tasks(tasks)


def _shared_flag(op: bpy.types.Operator, context: bpy.types.Context) -> bool:
    """The operator's ``shared`` when given (scripts), else the scene's panel setting."""
    if op.properties.is_property_set("shared"):
        return bool(op.shared)
    return bool(getattr(context.scene, "fit_to_target_shared", False))


def write_results(op: bpy.types.Operator, prepared: list[PreparedFit], job: FitJob, shared: bool) -> set[str]:
    """All scene writes of a run, on the main thread, in the operator's one undo step. A
    cancelled run writes nothing at all; otherwise each object whose fit produced values
    gets them, and each failure is reported by name."""
    names = [p.request.object_name for p in prepared]
    if job.cancel_requested or any(getattr(r, "cancelled", False) for r in job.results):
        op.report({"WARNING"}, f"Fit of {quoted_names(names)} cancelled: nothing was changed")
        return {"CANCELLED"}
    written = 0
    if shared:
        outcome = job.results[0]
        if outcome is None:
            op.report({"ERROR"}, f"Shared fit of {quoted_names(names)} failed: {job.errors[0]}")
            return {"CANCELLED"}
        extra = {"run_objects": names, "shared": outcome.summary(names)}
        pairs = list(zip(prepared, outcome.members, strict=True))
        op.report(_level(outcome.joint.outcome), shared_summary(outcome.summary(names)))
    else:
        extra = {"run_objects": names}
        pairs = []
        for p, result, error in zip(prepared, job.results, job.errors, strict=True):
            if result is None:
                op.report({"ERROR"}, f"Fit of '{p.request.object_name}' failed: {error}")
            else:
                pairs.append((p, result))
    for p, result in pairs:
        ob = bpy.data.objects.get(p.request.object_name)
        if ob is None:
            op.report(
                {"ERROR"}, f"'{p.request.object_name}' no longer exists: its fit result was not written"
            )
            continue
        # a fit that does not match its targets is kept, not applied: the artist decides (Apply)
        matched = (job.results[0].joint if shared else result).outcome == "converged"
        report_result(op, write_back(ob, p, result, extra, apply=matched), applied=matched)
        written += 1
    return {"FINISHED"} if written else {"CANCELLED"}


def _level(outcome: str | None) -> set[str]:
    return {"INFO"} if outcome in (None, "converged") else {"WARNING"}


class OBJECT_OT_fit_to_target(bpy.types.Operator):
    """Fit the material settings of the active cloth and of every other selected object with
    fit targets, so Blender's solver reaches the targets"""

    bl_idname = "object.fit_to_target"
    bl_label = "Fit to Target"
    bl_options = {"REGISTER", "UNDO"}

    shared: BoolProperty(  # type: ignore[valid-type]
        name="Shared Material",
        description="Fit one set of values for all the objects together (the same fabric under "
        "different conditions) instead of one set each",
        default=False,
        options={"SKIP_SAVE"},
    )

    def execute(self, context: bpy.types.Context) -> set[str]:
        # Blocking path (scripts, background mode): same export, fits and write-back as the modal one.
        shared = _shared_flag(self, context)
        prepared = _prepare(self, context, shared)
        if prepared is None:
            return {"CANCELLED"}
        job = make_job(fit_tasks(prepared, shared))
        job.run_here()
        return write_results(self, prepared, job, shared)

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        # Export on the main thread, fit in a worker; the modal timer keeps the UI responsive.
        shared = _shared_flag(self, context)
        prepared = _prepare(self, context, shared)
        if prepared is None:
            return {"CANCELLED"}
        job = make_job(fit_tasks(prepared, shared))
        session = begin_session(prepared, job, shared)
        job.start()
        wm = context.window_manager
        wm.progress_begin(0, 1000)
        self._timer = wm.event_timer_add(TIMER_STEP_S, window=context.window)
        wm.modal_handler_add(self)
        _status(context, session.status_text())
        _redraw_panels(context)
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        session = active_session()
        if session is None:  # ended elsewhere (file load)
            return {"CANCELLED"}
        # only Esc (and the panel's Cancel button) stops a fit: a right-click selects or opens a
        # menu while the artist keeps working, and must never throw the fit away
        if event.type == "ESC" and event.value == "PRESS":
            session.job.cancel()
            _status(context, session.status_text())
            _redraw_panels(context)
            return {"RUNNING_MODAL"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        session.update(session.job.poll())
        if session.job.finished:
            _end_modal(self, context)
            _redraw_panels(context)
            return write_results(self, session.prepared, session.job, session.shared)
        context.window_manager.progress_update(round(1000 * session.factor))
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
