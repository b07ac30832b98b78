"""The modal Bake: the operator's own ``invoke`` and ``modal``, driven by timer and input
events as Blender's event loop would (``modal_standins``).

While it steps the scene through the frames every event but Esc is held back; while it
simulates in a thread, events pass through. Esc (or Cancel Bake) leaves the scene and the
folder exactly as they were, and a finished modal bake writes the very bytes the blocking
bake writes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import (
    add_target_meshes,
    addon_module,
    bake,
    clamped_cloth,
    fit_session,
    modifier_stack,
    playback,
    snapshot,
)
from modal_standins import OTHER_EVENTS, ContextProxy, OperatorStandIn, event

bake_operators = addon_module("ui.bake_operators")
BAKE_OP = bake_operators.OBJECT_OT_fit_to_target_bake
CACHE_END = 30
# Every wait below ends as soon as the work does; this limit only stops a test that hangs.
HANG_GUARD_S = 600.0


@pytest.fixture
def saved_cloth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A clamped 5 x 5 sheet, cache 1-30, in a saved .blend (its cache goes next to it), at
    frame 5 and a half; the modal bake reads one frame per timer event. Yields (object,
    folder, started) where ``started`` collects (operator, context) of each modal bake, so
    that one left running by a failed test is ended."""
    monkeypatch.setattr(bake_operators, "STEP_BUDGET_S", 0.0)
    clamped_cloth(n=5, frame_end=CACHE_END)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene.blend"))
    ob = bpy.data.objects["Cloth"]
    bpy.context.view_layer.objects.active = ob
    bpy.context.scene.frame_set(5, subframe=0.5)
    started: list = []
    yield ob, tmp_path, started
    for op, ctx in started:
        if bake_operators.active_bake() is not None:
            BAKE_OP.cancel(op, ctx)
    fit_session.end_session()


def start(started: list) -> tuple[OperatorStandIn, ContextProxy]:
    op, ctx = OperatorStandIn(), ContextProxy()
    started.append((op, ctx))
    assert BAKE_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}, op.reports
    return op, ctx


def tick(op, ctx) -> set[str]:
    result = BAKE_OP.modal(op, ctx, event("TIMER"))
    progress = bake_operators.active_bake()
    if progress is not None and progress.run.off_main_thread:
        time.sleep(0.005)  # the simulation runs in its thread
    return result


def scene_frame() -> tuple[int, float]:
    scene = bpy.context.scene
    return scene.frame_current, round(scene.frame_subframe, 6)


def pc2_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.pc2"))


def test_modal_bake_progress_events_and_the_same_bytes_as_the_blocking_bake(saved_cloth) -> None:
    ob, folder, started = saved_cloth
    cloth_flags = (ob.modifiers["Cloth"].show_viewport, ob.modifiers["Cloth"].show_render)
    op, ctx = start(started)
    wm = ctx.window_manager
    assert wm.handlers == [op] and len(wm.timers) == 1
    progress = bake_operators.active_bake()
    assert progress is not None and progress.object_name == "Cloth"
    assert ctx.status[-1] == "Baking 'Cloth': frame 1 of 30 (Esc to cancel)"

    factors, held_back, passed_through = [progress.factor], 0, 0
    deadline = time.monotonic() + HANG_GUARD_S
    while (result := tick(op, ctx)) == {"PASS_THROUGH"}:
        assert time.monotonic() < deadline, "the bake hung"
        factors.append(progress.factor)
        run = progress.run
        if not run.off_main_thread and run.text == "frame 12 of 30":
            # halfway through the frames: the scene sits at frame 12 with the cloth off, and
            # everything the artist does but Esc is held back until the frames are read
            assert scene_frame() == (12, 0.0) and not ob.modifiers["Cloth"].show_viewport
            for kind, value in OTHER_EVENTS:
                assert BAKE_OP.modal(op, ctx, event(kind, value)) == {"RUNNING_MODAL"}, kind
                held_back += 1
            assert ctx.status[-1] == "Baking 'Cloth': frame 12 of 30 (Esc to cancel)"
        if run.off_main_thread and not passed_through:
            # simulating: the scene is back as it was, and Blender works as usual
            assert ctx.status[-1] == "Baking 'Cloth': simulating 30 frames (Esc to cancel)"
            assert scene_frame() == (5, 0.5)
            assert (ob.modifiers["Cloth"].show_viewport, ob.modifiers["Cloth"].show_render) == cloth_flags
            for kind, value in OTHER_EVENTS:
                assert BAKE_OP.modal(op, ctx, event(kind, value)) == {"PASS_THROUGH"}, kind
                passed_through += 1
            assert not run.finished

    assert result == {"FINISHED"}, op.reports
    assert held_back == passed_through == len(OTHER_EVENTS)
    # progress counted up a frame per timer event, then the simulation
    assert factors == sorted(factors) and len(set(factors)) >= CACHE_END and factors[-1] == 1.0
    assert factors[CACHE_END - 1] == 0.5  # the frames read (one per event, from invoke on): half the bar
    assert wm.progress_range is None and wm.progress == []  # the mouse cursor stays a cursor
    frames_read = [f"Baking 'Cloth': frame {f} of 30 (Esc to cancel)" for f in range(1, CACHE_END + 1)]
    shown = list(dict.fromkeys(t for t in ctx.status if t))  # each text once, in order
    assert shown == [
        *frames_read,
        "Baking 'Cloth': simulating 30 frames (Esc to cancel)",
        "Baking 'Cloth': writing the cache (Esc to cancel)",
    ]
    assert ctx.status[-1] is None and not wm.timers
    assert bake_operators.active_bake() is None
    (((kind, message),)) = op.reports
    path = folder / "fit_cache" / bake.bake_filename("Cloth")
    assert kind == {"INFO"} and message == f"Baked frames 1-{CACHE_END} to {path}"
    assert scene_frame() == (5, 0.5)

    modal_bytes, modal_stack, modal_state = path.read_bytes(), modifier_stack(ob), ob.fit_to_target.bake_json
    assert len(modal_bytes) == 32 + CACHE_END * 25 * 12  # header, then float32 xyz per vertex per frame
    assert bpy.ops.object.fit_to_target_unbake() == {"FINISHED"}
    path.unlink()
    assert bpy.ops.object.fit_to_target_bake() == {"FINISHED"}  # execute: the blocking bake
    assert path.read_bytes() == modal_bytes
    assert modifier_stack(ob) == modal_stack and ob.fit_to_target.bake_json == modal_state


@pytest.mark.parametrize("when", ["reading frames", "simulating"])
def test_esc_cancels_with_the_scene_and_folder_unchanged(saved_cloth, when: str) -> None:
    ob, folder, started = saved_cloth
    before = snapshot(ob, folder)
    op, ctx = start(started)
    progress = bake_operators.active_bake()
    deadline = time.monotonic() + HANG_GUARD_S
    if when == "reading frames":
        while progress.run.text != "frame 4 of 30":
            assert tick(op, ctx) == {"PASS_THROUGH"} and time.monotonic() < deadline
        assert scene_frame() == (4, 0.0)  # mid-export: the cancel has something to restore
    else:
        while not progress.run.off_main_thread:
            assert tick(op, ctx) == {"PASS_THROUGH"} and time.monotonic() < deadline

    assert BAKE_OP.modal(op, ctx, event("ESC", "PRESS")) == {"CANCELLED"}
    assert op.reports == [({"WARNING"}, "Bake of 'Cloth' cancelled: nothing was changed")]
    assert ctx.status[-1] is None and not ctx.window_manager.timers and bake_operators.active_bake() is None
    assert progress.run.wait_for_thread(HANG_GUARD_S)  # a dropped simulation ran out: still nothing
    assert scene_frame() == (5, 0.5)
    assert snapshot(ob, folder) == before  # modifier values, stack and flags, bake state, files
    assert pc2_files(folder) == [] and not bake.cache_path(ob)[0].exists()


def test_refusals_and_cancel_bake(saved_cloth) -> None:
    ob, folder, started = saved_cloth
    before = snapshot(ob, folder)

    # no bake while a fit runs (its export and the bake's would step the same scene)
    fit_session.begin_session([], job=None)
    try:
        op = OperatorStandIn()
        assert BAKE_OP.invoke(op, ContextProxy(), event("LEFTMOUSE", "PRESS")) == {"CANCELLED"}
        assert op.reports == [({"ERROR"}, "A fit is already running: bake when it has finished")]
    finally:
        fit_session.end_session()

    # one bake at a time, modal or blocking
    op, ctx = start(started)
    for _ in range(3):
        assert tick(op, ctx) == {"PASS_THROUGH"}
    second = OperatorStandIn()
    assert BAKE_OP.invoke(second, ContextProxy(), event("LEFTMOUSE", "PRESS")) == {"CANCELLED"}
    assert second.reports == [({"ERROR"}, "A bake of 'Cloth' is running: wait for it or cancel it")]
    with pytest.raises(RuntimeError, match="A bake of 'Cloth' is running"):
        bpy.ops.object.fit_to_target_bake()

    # Cancel Bake (the panel's button): the scene is restored at once, the modal ends on its next event
    progress = bake_operators.active_bake()
    assert progress.text == "Baking 'Cloth': frame 4 of 30" and 0.0 < progress.factor < 0.5
    assert scene_frame() == (4, 0.0)
    assert bpy.ops.object.fit_to_target_cancel_bake() == {"FINISHED"}
    assert scene_frame() == (5, 0.5) and progress.run.cancelled
    assert tick(op, ctx) == {"CANCELLED"}
    assert op.reports == [({"WARNING"}, "Bake of 'Cloth' cancelled: nothing was changed")]
    assert bake_operators.active_bake() is None and not ctx.window_manager.timers
    assert bpy.ops.object.fit_to_target_cancel_bake() == {"CANCELLED"}  # none running: a warning
    assert snapshot(ob, folder) == before

    # a bake that cannot run is refused by invoke itself, before any timer
    cache = ob.modifiers["Cloth"].point_cache
    cache.frame_end = cache.frame_start
    op, ctx = OperatorStandIn(), ContextProxy()
    assert BAKE_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"CANCELLED"}
    ((kind, message),) = op.reports
    assert kind == {"ERROR"} and "nothing to bake" in message and message.startswith("'Cloth': ")
    assert not ctx.window_manager.timers and not ctx.window_manager.handlers
    assert bake_operators.active_bake() is None and pc2_files(folder) == []


def colour_attribute(ob: bpy.types.Object) -> np.ndarray:
    attr = ob.data.color_attributes[bake.ERROR_ATTRIBUTE]
    colors = np.empty(len(ob.data.vertices) * 4, dtype=np.float32)
    attr.data.foreach_get("color", colors)
    return colors.reshape(-1, 4)


def test_modal_bake_with_error_colours_is_the_blocking_bake(saved_cloth) -> None:
    """With Error Colors on, the targets are read as a second stepped pass and the errors
    evaluated off the main thread: the same cache and the same colours as the blocking bake."""
    ob, folder, started = saved_cloth
    rest = playback(ob, [1])[0]
    sag = np.stack([rest - [0.0, 0.0, 0.001 * k] for k in range(10)])
    add_target_meshes(ob, sag, [10], start=1)  # 9 mm below the rest shape at frame 10
    ob.fit_to_target.bake_error_colors = True
    bpy.context.scene.frame_set(5, subframe=0.5)
    op, ctx = start(started)
    progress = bake_operators.active_bake()
    factors, deadline = [], time.monotonic() + HANG_GUARD_S
    while (result := tick(op, ctx)) == {"PASS_THROUGH"}:
        assert time.monotonic() < deadline, "the bake hung"
        factors.append(progress.factor)
    assert result == {"FINISHED"}, op.reports
    assert factors == sorted(factors)
    shown = list(dict.fromkeys(t for t in ctx.status if t))
    colour_frames = [f"Baking 'Cloth': error colours: frame {f} of 10 (Esc to cancel)" for f in range(1, 11)]
    assert all(t in shown for t in colour_frames)
    assert "Baking 'Cloth': error colours (Esc to cancel)" in shown  # the errors, off the main thread

    path = Path(json.loads(ob.fit_to_target.bake_json)["filepath"])
    modal = path.read_bytes(), colour_attribute(ob), json.loads(ob.fit_to_target.bake_json)
    assert 0 < modal[2]["error_tolerance"] <= 1e-3  # the automatic tolerance: at most 1 mm
    assert modal[1][:, 0].max() == 1.0 and modal[1][:, 1].min() == 0.0  # red at the largest error
    assert bpy.ops.object.fit_to_target_unbake() == {"FINISHED"}
    path.unlink()
    assert bpy.ops.object.fit_to_target_bake() == {"FINISHED"}
    assert path.read_bytes() == modal[0]
    assert np.array_equal(colour_attribute(ob), modal[1])
    assert json.loads(ob.fit_to_target.bake_json) == modal[2]
