"""The worker-thread path: FitJob's queue, and the operator's invoke/modal driven by timer events.

A headless Blender has no event loop, so the tests call the operator's own ``invoke`` and
``modal`` with the real context (window manager calls recorded on the way through) and
synthetic events, exactly as Blender's event loop would.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import bpy
import numpy as np
import pytest
from addon_scenes import (
    add_targets_from_blender,
    clamped_cloth,
    fit_operators,
    fit_session,
    job_module,
    modifier_values,
    snapshot,
)
from blender_ref import ClothMesh, make_cloth_object, pin_row_weights
from modal_standins import OTHER_EVENTS, ContextProxy, OperatorStandIn, event

FitJob = job_module.FitJob
FitSession = fit_session.FitSession
# the units of the add-on's own copy of warp_core (the one its job and session use)
units = importlib.import_module(job_module.Unit.__module__)
METRES, PIXELS = units.METRES, units.PIXELS
FIT_OP = fit_operators.OBJECT_OT_fit_to_target
TRUTH = {"tension_stiffness": 30.0, "compression_stiffness": 30.0, "bending_stiffness": 1.5}
# Every wait below ends as soon as the work does; this limit only stops a test that hangs,
# and is far above any run on a busy machine, so it never judges speed.
HANG_GUARD_S = 600.0


def with_fit_function(tasks: list, fit_function) -> FitJob:
    """The operator's job with each task run by ``fit_function`` instead."""
    return FitJob.of_tasks([dataclasses.replace(t, fit_function=fit_function) for t in tasks])


def run_timers(op, ctx, until=None, timeout: float = HANG_GUARD_S) -> set[str]:
    """Send timer events every 20 ms until the operator ends (or ``until()`` is true)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = FIT_OP.modal(op, ctx, event("TIMER"))
        if result != {"PASS_THROUGH"}:
            return result
        if until is not None and until():
            return result
        time.sleep(0.02)
    raise AssertionError(f"the fit hung: no end after {timeout:g} s")


def start_fitting(op, ctx) -> FitSession:
    """Timer events until the scene is read and the worker fits; the fit's session."""
    run_timers(op, ctx, until=lambda: fit_session.active_session() is not None)
    session = fit_session.active_session()
    assert session is not None, op.reports
    return session


@pytest.fixture
def saved_scene(tmp_path: Path) -> tuple[bpy.types.Object, Path]:
    """An 8x8 cantilever with targets from Blender's solver, saved (files are part of the checks)."""
    ob = clamped_cloth(frame_end=16)
    add_targets_from_blender(ob, TRUTH, [8, 16])
    bpy.context.view_layer.objects.active = ob
    path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    yield bpy.data.objects["Cloth"], tmp_path
    fit_session.end_session()  # never leak a session into the next test


# -- FitJob alone (deterministic fake fits) ---------------------------------------------------------


def test_fit_job_queue_progress_cancel_and_errors() -> None:
    def counting_fit(problem, settings, progress, cancel):
        for k in range(3):
            progress(k, 1.0 / (k + 1), {"x": float(k)})
        return "result"

    job = FitJob(None, None, fit_function=counting_fit)
    job.start()
    messages = job.wait(HANG_GUARD_S)
    assert [(m.kind, m.iteration, m.loss) for m in messages] == [
        ("progress", 0, 1.0),
        ("progress", 1, 0.5),
        ("progress", 2, 1.0 / 3),
        ("done", 0, messages[-1].loss),
    ]
    assert job.finished and job.result == "result" and job.error is None
    assert job.poll() == []
    # a fit function that reports only iterations and losses: no phase or RMSE to show
    settings = SimpleNamespace(max_iterations=30, time_budget_s=None)
    session = FitSession(
        [SimpleNamespace(request=SimpleNamespace(object_name="Cloth"), settings=settings)], job
    )
    session.update(messages)
    assert session.progress_text() == "Cloth: iteration 2/30, loss 0.3333"
    assert session.factor == pytest.approx(2 / 30) and session.progress_messages == 3
    with pytest.raises(RuntimeError):
        job.start()

    started = threading.Event()

    def waiting_fit(problem, settings, progress, cancel):
        started.set()
        while not cancel.is_set():
            time.sleep(0.01)
        return "stopped"

    job = FitJob(None, None, fit_function=waiting_fit)
    job.start()
    assert started.wait(HANG_GUARD_S)
    assert job.poll() == [] and job.running
    job.cancel()
    assert (
        [m.kind for m in job.wait(HANG_GUARD_S)] == ["done"]
        and job.result == "stopped"
        and job.cancel_requested
    )

    def broken_fit(problem, settings, progress, cancel):
        raise ValueError("zero-area polygon 3\n(vertices 1, 2, 3)")

    job = FitJob(None, None, fit_function=broken_fit)
    job.start()
    (msg,) = job.wait(HANG_GUARD_S)
    assert msg.kind == "error" and job.error == "zero-area polygon 3 (vertices 1, 2, 3)"


# -- the operator's modal path ---------------------------------------------------------------------


def test_modal_fit_progress_and_write_back(saved_scene) -> None:
    ob, folder = saved_scene
    ctx, op = ContextProxy(), OperatorStandIn()
    before = modifier_values(ob)

    assert FIT_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    assert ctx.window_manager.handlers == [op] and len(ctx.window_manager.timers) == 1
    # first the scene is read, a slice per timer event; no other event reaches the scene meanwhile
    export = fit_session.active_export()
    assert export is not None and fit_session.active_session() is None
    assert FIT_OP.modal(op, ctx, event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    session = start_fitting(op, ctx)
    assert session.job.running and fit_session.active_export() is None
    assert export.factor == 1.0 and export.text.startswith("Reading the scene: 'Cloth': frame ")
    assert ctx.window_manager.progress_range is None  # no counter on the mouse cursor
    # while the worker runs: other events pass through, the scene is not written
    assert FIT_OP.modal(op, ctx, event("MOUSEMOVE")) == {"PASS_THROUGH"}
    assert modifier_values(ob) == before and ob.fit_to_target.result_json == ""
    # a second fit cannot start meanwhile, and says so
    other = OperatorStandIn()
    assert FIT_OP.invoke(other, ContextProxy(), event("LEFTMOUSE", "PRESS")) == {"CANCELLED"}
    assert other.reports == [({"ERROR"}, "A fit is already running: wait for it or cancel it")]

    assert run_timers(op, ctx) == {"FINISHED"}
    record = json.loads(ob.fit_to_target.result_json)

    # progress arrived while it ran, in the status bar only (the cursor stayed a cursor): the
    # fit's phase, its RMSE in millimetres and the time, never a raw loss
    wm = ctx.window_manager
    assert wm.progress_range is None and wm.progress == [] and wm.progress_ended == 0
    assert session.progress_messages == record["iterations"] + 1  # iteration 0 is the start point
    texts = [text for text in ctx.status if text]
    reading = [t for t in texts if t.startswith("Fit to Target: Reading the scene: ")]
    assert reading and texts[: len(reading)] == reading
    texts = texts[len(reading) :]
    assert texts and all(
        t.startswith("Fit to Target: Cloth: ") and t.endswith(" (Esc to cancel)") for t in texts
    )
    said = ("compiling kernels", "simulating the start values", "refinement, iteration", "rounding check")
    assert all(any(phase in t for phase in said) and " elapsed" in t for t in texts[1:]), texts
    assert any(re.search(r" · RMSE [0-9.]+ mm · ", t) for t in texts) and not any("loss" in t for t in texts)
    # the RMSE it showed is the fit's own, at the start values and at the end
    assert session.initial_rmse == pytest.approx(record["initial_rmse_m"], rel=1e-9)
    shown = re.search(r" · RMSE ([0-9.]+) mm · ", session.progress_text())
    assert shown and float(shown.group(1)) == pytest.approx(1000.0 * record["rmse_m"], rel=5.1e-3)
    assert session.phase == "rounding"  # a converged fit's last phase (no collision objects)
    assert ctx.status[-1] is None and not wm.timers
    assert fit_session.active_session() is None
    assert op.reports and op.reports[-1][0] == {"INFO"} and "RMSE" in op.reports[-1][1]

    # written back on the main thread at the end
    for name, value in record["params"].items():
        assert modifier_values(ob)[name] == pytest.approx(value, rel=1e-6)
    assert record["rmse_m"] < 0.1e-3 < record["initial_rmse_m"]

    # the blocking path (execute) gives the very same fit
    assert bpy.ops.object.fit_to_target_revert() == {"FINISHED"}
    assert modifier_values(ob) == before
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    again = json.loads(ob.fit_to_target.result_json)
    assert again["params"] == record["params"] and again["iterations"] == record["iterations"]


def test_the_bar_covers_the_run_and_the_text_says_phase_rmse_and_time() -> None:
    """Two objects with a 10 s time budget each, on a clock the test moves: the second object's
    bar starts at half the bar, its budget counted from its own start (not from the run's);
    the text says the phase, the best RMSE in the target's unit and the time taken and left."""
    now = [100.0]
    settings = SimpleNamespace(max_iterations=30, time_budget_s=10.0)
    prepared = [
        SimpleNamespace(request=SimpleNamespace(object_name=n), settings=settings) for n in ("A", "B")
    ]
    session = FitSession(prepared, FitJob(None, None), clock=lambda: now[0])
    progress = functools.partial(job_module.JobMessage, "progress")
    assert session.factor == 0.0 and session.progress_text() == "object 1 of 2: A: starting..."
    session.update([progress(phase="compiling", expected_s=20.0, accepted=False)])
    assert session.progress_text() == (
        "object 1 of 2: A: compiling kernels (first fit in this Blender session, up to about 20 s) "
        "· 0:00 elapsed, about 0:10 left"
    )
    now[0] += 9.0
    session.update([progress(iteration=0, rmse=0.0421, unit=METRES, phase="start", task_elapsed_s=8.9)])
    assert session.factor == pytest.approx(0.45)  # 9 s of the first object's 10
    assert session.progress_text().startswith("object 1 of 2: A: simulating the start values · RMSE 42.1 mm")

    now[0] += 3.0  # the first fit ended over its budget; the second began 0.4 s ago
    session.update([progress(task=1, phase="start", accepted=False, task_elapsed_s=0.4)])
    assert session.factor == pytest.approx((1.0 + 0.04) / 2)  # not near 1
    assert (
        session.progress_text()
        == "object 2 of 2: B: simulating the start values · 0:00 elapsed, about 0:10 left"
    )
    now[0] += 1.0
    session.update([progress(task=1, iteration=0, rmse=3.0, unit=PIXELS, phase="start", task_elapsed_s=1.4)])
    session.update([progress(task=1, phase="global", phase_index=3, phase_count=8, accepted=False)])
    assert session.progress_text() == (
        "object 2 of 2: B: global search 3 of 8 · RMSE 3.00 px · 0:01 elapsed, about 0:09 left"
    )
    now[0] += 2.0
    session.update(
        [progress(task=1, iteration=10, rmse=0.5, unit=PIXELS, phase="refinement", task_elapsed_s=3.4)]
    )
    # 10 iterations in 2 s: the 20 left take about 4 s, sooner than the budget's 6.6 s
    assert session.progress_text() == (
        "object 2 of 2: B: refinement, iteration 10 of 30 · RMSE 0.500 px · 0:03 elapsed, about 0:04 left"
    )
    assert session.factor == pytest.approx((1.0 + 0.34) / 2)
    assert session.status_text() == f"Fit to Target: {session.progress_text()} (Esc to cancel)"
    now[0] += 20.0  # past the budget: the bar is full, and there is no time left to estimate
    assert session.factor == 1.0 and "left" not in session.progress_text()


def test_modal_cancel_mid_fit_changes_nothing(saved_scene, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "ESC"

    def held_fit(problem, settings, progress, cancel):
        def progress_then_wait(iteration, loss, values):
            progress(iteration, loss, values)
            cancel.wait(HANG_GUARD_S)  # the real fit goes on only once cancelled: never ends first

        return job_module.fit(problem, settings, progress=progress_then_wait, cancel=cancel)

    monkeypatch.setattr(fit_operators, "make_job", lambda tasks: with_fit_function(tasks, held_fit))
    ob, folder = saved_scene
    before = snapshot(ob, folder)
    ctx, op = ContextProxy(), OperatorStandIn()
    assert FIT_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
    session = start_fitting(op, ctx)
    # wait until the optimizer is under way (start point evaluated), then cancel
    assert run_timers(op, ctx, until=lambda: session.progress_messages >= 1) == {"PASS_THROUGH"}
    for kind, value in OTHER_EVENTS:  # only Esc cancels: everything else goes on to Blender
        assert FIT_OP.modal(op, ctx, event(kind, value)) == {"PASS_THROUGH"}, kind
        assert not session.job.cancel_requested, (kind, value)
    assert FIT_OP.modal(op, ctx, event(key, "PRESS")) == {"RUNNING_MODAL"}
    assert session.job.cancel_requested and "cancelling" in ctx.status[-1]
    assert run_timers(op, ctx) == {"CANCELLED"}

    result = session.job.result
    assert result is not None and result.cancelled and result.iterations < session.max_iterations
    assert op.reports == [({"WARNING"}, "Fit of 'Cloth' cancelled: nothing was changed")]
    after = snapshot(ob, folder)
    assert after == before  # modifier values, modifier stack, fit state, files
    assert fit_session.active_session() is None and not ctx.window_manager.timers


def test_modal_worker_error_is_reported_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fit that fails in the worker: its error becomes one report, and nothing changes."""
    ob = clamped_cloth(frame_end=12)
    add_targets_from_blender(ob, TRUTH, [12])
    bpy.context.view_layer.objects.active = ob
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "failing.blend"))
    ob = bpy.data.objects["Cloth"]
    before = snapshot(ob, tmp_path)

    def failing_fit(*_args, **_kwargs):
        raise job_module.FitError("the simulation diverges at the start values")

    monkeypatch.setattr(fit_operators, "make_job", lambda tasks: with_fit_function(tasks, failing_fit))
    ctx, op = ContextProxy(), OperatorStandIn()
    try:
        assert FIT_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
        assert run_timers(op, ctx) == {"CANCELLED"}
    finally:
        fit_session.end_session()
    assert op.reports == [({"ERROR"}, "Fit of 'Cloth' failed: the simulation diverges at the start values")]
    assert snapshot(ob, tmp_path) == before


def test_modal_refuses_a_mesh_the_solver_cannot_use(tmp_path: Path) -> None:
    """A zero-area face is refused when the fit starts, before any worker runs: one report."""
    grid = np.array([(x, y, 1.0) for y in (0.0, 0.5, 1.0) for x in (0.0, 0.5, 1.0)])
    degenerate = np.array([(1.5, 0.0, 1.0), (2.0, 0.0, 1.0), (2.5, 0.0, 1.0)])  # collinear: no area
    vertices = np.vstack([grid, degenerate])
    quads = [[0, 1, 4, 3], [1, 2, 5, 4], [3, 4, 7, 6], [4, 5, 8, 7]]
    mesh = ClothMesh.from_polygons(vertices, quads + [[9, 10, 11]])
    weights = pin_row_weights(ClothMesh.from_polygons(grid, quads), side="+y")
    ob = make_cloth_object(mesh, pin_weights=np.concatenate([weights, [0, 0, 0]]), frame_end=10)
    ob.shape_key_add(name="Basis")
    ob.shape_key_add(name="Down").value = 0.0  # a target key must not deform the rest shape
    item = ob.fit_to_target.targets.add()
    item.kind, item.shape_key, item.frame = "SHAPE_KEY", "Down", 5
    bpy.context.view_layer.objects.active = ob
    path = tmp_path / "degenerate.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    ob = bpy.data.objects["Cloth"]
    before = snapshot(ob, tmp_path)

    ctx, op = ContextProxy(), OperatorStandIn()
    try:
        assert FIT_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
        assert run_timers(op, ctx) == {"CANCELLED"}  # refused as the scene is read
    finally:
        fit_session.end_session()
        fit_session.end_export()
    assert len(op.reports) == 1
    kind, message = op.reports[0]
    assert kind == {"ERROR"} and "\n" not in message
    assert message.startswith("'Cloth': zero-area polygon 4 (vertices 9, 10, 11)"), message
    assert fit_session.active_session() is None and not ctx.window_manager.timers
    assert snapshot(ob, tmp_path) == before


def test_modal_esc_while_the_scene_is_read_changes_nothing(
    saved_scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Esc mid-read: the scene is back at its frame, nothing written, no worker started."""
    monkeypatch.setattr(fit_operators, "EXPORT_SLICE_S", 0.0)  # one frame per timer event
    ob, folder = saved_scene
    bpy.context.scene.frame_set(5, subframe=0.25)
    before = snapshot(ob, folder)
    ctx, op = ContextProxy(), OperatorStandIn()
    try:
        assert FIT_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
        for _ in range(3):
            assert FIT_OP.modal(op, ctx, event("TIMER")) == {"PASS_THROUGH"}
        export = fit_session.active_export()
        assert export is not None and 0.0 < export.factor < 1.0
        assert ctx.status[-1].startswith("Fit to Target: Reading the scene: 'Cloth': frame ")
        for kind, value in OTHER_EVENTS:  # mid-read, nothing but Esc reaches the scene or stops it
            assert FIT_OP.modal(op, ctx, event(kind, value)) == {"RUNNING_MODAL"}, kind
        assert fit_session.active_export() is export
        assert FIT_OP.modal(op, ctx, event("ESC", "PRESS")) == {"CANCELLED"}
    finally:
        fit_session.end_export()
        fit_session.end_session()
    assert op.reports == [({"WARNING"}, "Fit of 'Cloth' cancelled: nothing was changed")]
    scene = bpy.context.scene
    assert (scene.frame_current, scene.frame_subframe) == (5, pytest.approx(0.25))
    assert snapshot(ob, folder) == before
    assert fit_session.active_session() is None and not ctx.window_manager.timers
