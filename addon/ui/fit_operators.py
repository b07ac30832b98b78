"""The Fit operator (modal with a worker thread, or blocking) and Cancel: the active object
and every other selected object with fit targets, one after another or with one shared
material."""

import functools

import bpy
from bpy.props import BoolProperty

from ...warp_core.fit import fit_shared
from ..errors import FitInputError
from ..job import FitJob, FitTask
from ..request import FitRequest, PreparedFit, following, request_from_object
from ..scene.checks import check_object
from ..scene.loss_curve import update_curve_image
from ..scene.prepare import prepare_fit_steps
from ..scene.records import quoted_names
from ..scene.staleness import fit_fingerprint
from ..scene.steps import StepGenerator, SteppedRun, run_blocking, within
from ..session import (
    ExportProgress,
    FitSession,
    active_export,
    active_session,
    begin_export,
    begin_session,
    busy_with,
    end_export,
    end_session,
)
from .bake_operators import bake_under_way
from .fit_results import write_results
from .modal_status import redraw_panels, set_status

TIMER_STEP_S = 0.1  # how often the modal operator polls the worker's queue
EXPORT_STEP_S = 0.01  # how soon the next slice of the scene read runs
EXPORT_SLICE_S = 0.05  # main-thread time per slice: the interface redraws and hears Esc between


def _end_modal(op: bpy.types.Operator, context: bpy.types.Context) -> None:
    """Remove the modal fit's timer and status text, and end its session."""
    wm = context.window_manager
    timer = getattr(op, "_timer", None)
    if timer is not None:
        wm.event_timer_remove(timer)
        op._timer = None
    set_status(context, None)
    end_export()
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


def _requests(
    op: bpy.types.Operator, context: bpy.types.Context, shared: bool
) -> list[tuple[bpy.types.Object, FitRequest]] | None:
    """Every fitted object with its request, the active one first; None (reported, nothing
    started) when any cannot run or other work is under way. A shared fit takes its
    parameters, ties and run settings from the active object."""
    busy = busy_with() or bake_under_way()
    if busy is not None:
        op.report({"ERROR"}, f"{busy}: wait for it or cancel it")
        return None
    objects = fit_objects(context)
    pairs = []
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
            pairs.append((ob, request))
    except FitInputError as e:
        op.report({"ERROR"}, str(e))
        return None
    return pairs


def export_steps(
    scene: bpy.types.Scene, pairs: list[tuple[bpy.types.Object, FitRequest]]
) -> StepGenerator[list[PreparedFit]]:
    """Each object's fit read from the scene in turn (:func:`prepare_fit_steps`), as one
    piece of stepped work: its progress says which object and frame."""
    prepared = []
    for k, (ob, request) in enumerate(pairs):
        label = f"'{ob.name}': "
        steps = prepare_fit_steps(scene, ob, request)
        # the bar in thousandths: each object's frames map onto its share of them
        prepared.append((yield from within(steps, 1000 * k, 1000, 1000 * len(pairs), label)))
    return prepared


def fingerprints(prepared: list[PreparedFit]) -> dict[str, dict[str, str]]:
    """Each object's fit inputs as they were read (see :mod:`..scene.staleness`), by name."""
    found = {}
    for p in prepared:
        ob = bpy.data.objects.get(p.request.object_name)
        if ob is not None:
            found[ob.name] = fit_fingerprint(ob, p.request)
    return found


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


class OBJECT_OT_fit_to_target(bpy.types.Operator):
    """Fit the material settings of the active cloth and of every selected object with targets"""

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
        pairs = _requests(self, context, shared)
        if pairs is None:
            return {"CANCELLED"}
        try:
            prepared = run_blocking(export_steps(context.scene, pairs))
        except FitInputError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        read_as = fingerprints(prepared)
        job = make_job(fit_tasks(prepared, shared))
        job.run_here()
        return write_results(self, prepared, job, shared, read_as)

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        # The scene is read a slice per timer event (the interface shows its progress and
        # hears Esc), then the fit runs in a worker while the artist keeps working. The
        # progress shows in the panel and the status bar, never on the mouse cursor.
        self._shared = _shared_flag(self, context)
        pairs = _requests(self, context, self._shared)
        if pairs is None:
            return {"CANCELLED"}
        export = begin_export([ob.name for ob, _ in pairs], SteppedRun(export_steps(context.scene, pairs)))
        wm = context.window_manager
        self._timer = wm.event_timer_add(EXPORT_STEP_S, window=context.window)
        wm.modal_handler_add(self)
        set_status(context, export.status_text())
        redraw_panels(context)
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        export = active_export()
        if export is not None:
            return _modal_export(self, context, event, export)
        session = active_session()
        if session is None:  # ended elsewhere (file load)
            return {"CANCELLED"}
        # only Esc (and the panel's Cancel button) stops a fit: a right-click selects or opens a
        # menu while the artist keeps working, and must never throw the fit away
        if event.type == "ESC" and event.value == "PRESS":
            session.job.cancel()
            set_status(context, session.status_text())
            redraw_panels(context)
            return {"RUNNING_MODAL"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        drawn = len(session.rmse_points)
        session.update(session.job.poll())
        if len(session.rmse_points) != drawn:
            _draw_curve(session)
        if session.job.finished:
            _end_modal(self, context)
            redraw_panels(context)
            return write_results(self, session.prepared, session.job, session.shared, self._read_as)
        set_status(context, session.status_text())
        redraw_panels(context)
        return {"PASS_THROUGH"}

    def cancel(self, context: bpy.types.Context) -> None:
        # Blender ends the operator (new file, quit): stop the scene read or the worker, write nothing.
        export = active_export()
        if export is not None:
            export.run.cancel()
        session = active_session()
        if session is not None:
            session.job.cancel()
        _end_modal(self, context)


def _modal_export(
    op: bpy.types.Operator, context: bpy.types.Context, event: bpy.types.Event, export: ExportProgress
) -> set[str]:
    """The scene read: a slice per timer event; Esc stops it with the scene as it was.
    Other events wait: mid-read the scene sits at another frame and must not be edited."""
    run = export.run
    if event.type == "ESC" and event.value == "PRESS":
        run.cancel()
        _end_modal(op, context)
        op.report({"WARNING"}, f"Fit of {quoted_names(export.object_names)} cancelled: nothing was changed")
        redraw_panels(context)
        return {"CANCELLED"}
    if event.type != "TIMER":
        return {"RUNNING_MODAL"}
    run.advance(EXPORT_SLICE_S)
    if not run.finished:
        set_status(context, export.status_text())
        redraw_panels(context)
        return {"PASS_THROUGH"}
    if run.error is not None or run.value is None:
        _end_modal(op, context)
        error = run.error
        message = str(error) if isinstance(error, FitInputError) else f"unexpected error: {error!r}"
        op.report({"ERROR"}, message)
        redraw_panels(context)
        return {"CANCELLED"}
    prepared = run.value
    op._read_as = fingerprints(prepared)
    job = make_job(fit_tasks(prepared, op._shared))
    session = begin_session(prepared, job, op._shared)
    job.start()
    wm = context.window_manager
    wm.event_timer_remove(op._timer)
    op._timer = wm.event_timer_add(TIMER_STEP_S, window=context.window)
    set_status(context, session.status_text())
    redraw_panels(context)
    return {"PASS_THROUGH"}


def _draw_curve(session: FitSession) -> None:
    """The RMSE so far into the fitted object's loss-curve image (the panel shows it live)."""
    ob = bpy.data.objects.get(session.object_names[min(session.task, len(session.object_names) - 1)])
    if ob is not None:
        update_curve_image(ob, session.rmse_points, None)


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
        redraw_panels(context)
        return {"FINISHED"}


classes = (OBJECT_OT_fit_to_target, OBJECT_OT_fit_to_target_cancel)
