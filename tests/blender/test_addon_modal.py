"""The worker-thread path: FitJob's queue, and the operator's invoke/modal driven by timer events.

A headless Blender has no event loop, so the tests call the operator's own ``invoke`` and
``modal`` with the real context (window manager calls recorded on the way through) and
synthetic events, exactly as Blender's event loop would.
"""

from __future__ import annotations

import dataclasses
import json
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

FitJob = job_module.FitJob
FIT_OP = fit_operators.OBJECT_OT_fit_to_target
TRUTH = {"tension_stiffness": 30.0, "compression_stiffness": 30.0, "bending_stiffness": 1.5}
# Every wait below ends as soon as the work does; this limit only stops a test that hangs,
# and is far above any run on a busy machine, so it never judges speed.
HANG_GUARD_S = 600.0


# -- stand-ins for what only a windowed Blender provides ---------------------------------------------


class WindowManagerProxy:
    """The real window manager; modal handler registration is recorded instead (no event loop)."""

    def __init__(self, wm: bpy.types.WindowManager) -> None:
        self._wm = wm
        self.handlers: list = []
        self.progress: list[float] = []
        self.progress_range: tuple | None = None
        self.progress_ended = 0
        self.timers: list = []

    def modal_handler_add(self, operator) -> bool:
        self.handlers.append(operator)
        return True

    def progress_begin(self, lo, hi) -> None:
        self.progress_range = (lo, hi)
        self._wm.progress_begin(lo, hi)

    def progress_update(self, value) -> None:
        self.progress.append(value)
        self._wm.progress_update(value)

    def progress_end(self) -> None:
        self.progress_ended += 1
        self._wm.progress_end()

    def event_timer_add(self, step, window=None):
        timer = self._wm.event_timer_add(step, window=window)
        self.timers.append(timer)
        return timer

    def event_timer_remove(self, timer) -> None:
        self.timers.remove(timer)
        self._wm.event_timer_remove(timer)

    def __getattr__(self, name):
        return getattr(self._wm, name)


class ContextProxy:
    def __init__(self) -> None:
        self._ctx = bpy.context
        self.window_manager = WindowManagerProxy(bpy.context.window_manager)
        self.status: list[str | None] = []
        self.workspace = SimpleNamespace(status_text_set=self.status.append)

    def __getattr__(self, name):
        return getattr(self._ctx, name)


class OperatorStandIn:
    """The operator instance as invoke/modal use it: attributes, properties and report()."""

    def __init__(self, shared: bool | None = None) -> None:
        self.reports: list[tuple[set, str]] = []
        self.shared = bool(shared)
        self.properties = SimpleNamespace(
            is_property_set=lambda name: name == "shared" and shared is not None
        )

    def report(self, kind: set, message: str) -> None:
        self.reports.append((set(kind), message))


def with_fit_function(tasks: list, fit_function) -> FitJob:
    """The operator's job with each task run by ``fit_function`` instead."""
    return FitJob.of_tasks([dataclasses.replace(t, fit_function=fit_function) for t in tasks])


def event(kind: str, value: str = "NOTHING") -> SimpleNamespace:
    return SimpleNamespace(type=kind, value=value)


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
    session = fit_session.active_session()
    assert session is not None and session.job.running
    assert ctx.window_manager.progress_range == (0, 1000)
    # while the worker runs: other events pass through, the scene is not written
    assert FIT_OP.modal(op, ctx, event("MOUSEMOVE")) == {"PASS_THROUGH"}
    assert modifier_values(ob) == before and ob.fit_to_target.result_json == ""
    # a second fit cannot start meanwhile, and says so
    other = OperatorStandIn()
    assert FIT_OP.invoke(other, ContextProxy(), event("LEFTMOUSE", "PRESS")) == {"CANCELLED"}
    assert other.reports == [({"ERROR"}, "A fit is already running: wait for it or cancel it")]

    assert run_timers(op, ctx) == {"FINISHED"}
    record = json.loads(ob.fit_to_target.result_json)

    # progress arrived while it ran: iterations counted up through the window manager and status bar
    progress = ctx.window_manager.progress
    assert progress and progress == sorted(progress) and max(progress) >= 1
    assert session.progress_messages == record["iterations"] + 1  # iteration 0 is the start point
    assert any(text and "iteration" in text and "loss" in text for text in ctx.status)
    assert ctx.status[-1] is None and ctx.window_manager.progress_ended == 1 and not ctx.window_manager.timers
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


# what an artist does while a fit runs: select (either mouse button), open menus, move, type
OTHER_EVENTS = [
    ("RIGHTMOUSE", "PRESS"),
    ("RIGHTMOUSE", "RELEASE"),
    ("LEFTMOUSE", "PRESS"),
    ("LEFTMOUSE", "CLICK"),
    ("MOUSEMOVE", "NOTHING"),
    ("WHEELUPMOUSE", "PRESS"),
    ("A", "PRESS"),
    ("X", "PRESS"),
    ("RET", "PRESS"),
    ("ESC", "RELEASE"),
]


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
    session = fit_session.active_session()
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
        assert FIT_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"CANCELLED"}
    finally:
        fit_session.end_session()
    assert len(op.reports) == 1
    kind, message = op.reports[0]
    assert kind == {"ERROR"} and "\n" not in message
    assert message.startswith("'Cloth': zero-area polygon 4 (vertices 9, 10, 11)"), message
    assert fit_session.active_session() is None and not ctx.window_manager.timers
    assert snapshot(ob, tmp_path) == before
