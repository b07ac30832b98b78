"""Footage targets: bad input gets one clear message and leaves the scene as it was; the
batch flag; error colours of a footage fit."""

from __future__ import annotations

import json
from pathlib import Path

import blender_env  # noqa: F401  (sets up the isolated profile before bpy)
import bpy
import numpy as np
import pytest
from addon_scenes import addon_module, snapshot
from batch_run import run_in_process
from footage_scenes import FRAMES, bind_all, footage_scene
from test_batch import SCHEMA, schema_errors

error_ramp = addon_module("scene.error_ramp")


def bindings(ob: bpy.types.Object) -> list[tuple]:
    return [(b.track, b.how, b.use, tuple(b.triangle), b.vertex) for b in ob.fit_to_target.bindings]


def refused(ob: bpy.types.Object, match: str, folder: Path, operator=None) -> None:
    """The operator fails with ``match`` in its message, changing nothing."""
    before = snapshot(ob, folder), bindings(ob), bpy.context.scene.frame_current
    with pytest.raises(RuntimeError, match=match):
        (operator or bpy.ops.object.fit_to_target)()
    assert (snapshot(ob, folder), bindings(ob), bpy.context.scene.frame_current) == before


def test_no_clip_and_an_unsolved_clip_are_refused(tmp_path: Path) -> None:
    scene = footage_scene(tmp_path)
    cloth, clip = scene["cloth"], scene["clip"]
    cloth.fit_to_target.clip = None
    refused(cloth, "has no Movie Clip for its Tracks target", tmp_path)
    cloth.fit_to_target.clip = clip
    camera = scene["camera"]
    solver = camera.constraints.new("CAMERA_SOLVER")
    solver.use_active_clip, solver.clip = False, clip
    refused(cloth, "has no solved camera, but camera 'FootageCamera' follows its solve", tmp_path)
    refused(cloth, "has no solved camera", tmp_path, bpy.ops.object.fit_to_target_bind_tracks)


def test_a_track_with_no_bundle_and_no_binding_is_named(tmp_path: Path) -> None:
    scene = footage_scene(tmp_path)
    cloth, clip = scene["cloth"], scene["clip"]
    late = clip.tracking.tracks.new(name="late", frame=5)  # first seen after the start frame
    late.markers.insert_frame(9, co=(0.5, 0.5))
    refused(
        cloth,
        "tracks not bound to 'Cloth': '[^(]*'late' \\(no bundle and no marker at the start frame 1\\)",
        tmp_path,
    )
    # Bind Tracks lists it unbound, switched off: the fit then runs without it
    assert bpy.ops.object.fit_to_target_bind_tracks() == {"FINISHED"}
    row = next(b for b in cloth.fit_to_target.bindings if b.track == "late")
    assert row.how == "NONE" and not row.use


def test_a_camera_that_does_not_see_the_cloth_is_refused(tmp_path: Path) -> None:
    scene = footage_scene(tmp_path)
    cloth = scene["cloth"]
    bind_all(cloth)
    away = bpy.data.objects.new("Away", bpy.data.cameras.new("Away"))
    bpy.context.scene.collection.objects.link(away)
    away.location, away.rotation_euler = (0.0, -3.0, 1.0), (np.radians(-90.0), 0.0, 0.0)
    cloth.fit_to_target.camera = away
    refused(cloth, "camera 'Away' does not see 'Cloth' at frame 1", tmp_path)


def test_markers_after_the_cache_end_are_refused(tmp_path: Path) -> None:
    scene = footage_scene(tmp_path)
    cloth, clip = scene["cloth"], scene["clip"]
    track = clip.tracking.tracks["cloth20"]
    track.markers.insert_frame(FRAMES + 5, co=(0.5, 0.5))
    bind_all(cloth)
    refused(cloth, f"markers after the end of the cache of 'Cloth' \\(frame {FRAMES}\\): 'cloth20'", tmp_path)


def test_batch_fits_tracks_and_error_colours_mark_the_tracked_vertices(tmp_path: Path) -> None:
    scene = footage_scene(tmp_path)
    cloth, clip = scene["cloth"], scene["clip"]
    bind_all(cloth)
    blend = tmp_path / "footage.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    report = tmp_path / "report.json"
    code, out, err = run_in_process(
        blend, "--object", "Cloth", "--target-tracks", clip.name, "--report", report
    )
    record = json.loads(report.read_text())["objects"][0]
    assert code == 0 and record["unit"] == "px" and record["outcome"] == "converged", (out, err)
    assert "reprojection RMSE" in out and " px" in out
    assert record["footage"]["tracks"] == 48 and record["rmse_px"] < 1.0 and record["rmse_m"] is None
    report_data = json.loads(report.read_text())
    assert schema_errors(report_data, SCHEMA) == []
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    cloth = bpy.data.objects["Cloth"]
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    cloth.fit_to_target.bake_error_colors = True
    assert bpy.ops.object.fit_to_target_bake() == {"FINISHED"}
    colors = np.empty(len(cloth.data.vertices) * 4, dtype=np.float32)
    cloth.data.color_attributes["fit_error"].data.foreach_get("color", colors)
    rgba = colors.reshape(-1, 4)
    # each tracked vertex carries its track's error on the pixel tolerance's fixed scale (the
    # vertex nearest the bound point, the worst track where two share one); the others are grey
    record = json.loads(cloth.fit_to_target.result_json)
    error = np.full(len(cloth.data.vertices), np.nan)
    for b in cloth.fit_to_target.bindings:
        if b.use and b.how != "NONE":
            v = int(b.triangle[int(np.argmax(b.barycentric))])
            error[v] = np.fmax(error[v], b.error_px)
    tracked = ~np.isnan(error)
    assert 0 < tracked.sum() and not tracked[48:].any()
    expected = error_ramp.error_ramp(error, record["tolerance_px"])
    np.testing.assert_allclose(rgba, expected, atol=1e-3)


def test_a_track_is_bound_to_the_selected_vertex(tmp_path: Path) -> None:
    cloth = footage_scene(tmp_path)["cloth"]
    assert bpy.ops.object.fit_to_target_bind_tracks() == {"FINISHED"}
    s = cloth.fit_to_target
    s.active_binding_index = next(k for k, b in enumerate(s.bindings) if b.how == "NONE")
    for v in cloth.data.vertices:
        v.select = False
    refused(cloth, "Select one vertex of 'Cloth'", tmp_path, bpy.ops.object.fit_to_target_bind_vertex)
    cloth.data.vertices[17].select = True
    assert bpy.ops.object.fit_to_target_bind_vertex() == {"FINISHED"}
    row = s.bindings[s.active_binding_index]
    assert (row.how, row.vertex, tuple(row.triangle), row.use) == ("VERTEX", 17, (17, 17, 17), True)
    bpy.ops.object.mode_set(mode="EDIT")
    bpy.ops.mesh.select_all(action="DESELECT")
    bpy.ops.object.mode_set(mode="OBJECT")
    cloth.data.vertices[21].select = True
    bpy.ops.object.mode_set(mode="EDIT")
    assert bpy.ops.object.fit_to_target_bind_vertex() == {"FINISHED"}
    bpy.ops.object.mode_set(mode="OBJECT")
    assert s.bindings[s.active_binding_index].vertex == 21


def test_the_panel_shows_the_tracks_and_the_worst_of_them(tmp_path: Path) -> None:
    from test_addon_panel import Layout, draw, labels

    cloth = footage_scene(tmp_path)["cloth"]
    log = draw()
    props = [entry[1] for entry in log if entry[0] == "prop"]
    assert {"target_source", "clip", "tracking_object", "camera", "huber_px", "tolerance_px"} <= set(props)
    assert "tolerance" not in props and "loss" not in props and ("list", "bindings") in log
    assert ("operator", "object.fit_to_target_bind_tracks", True) in log
    bind_all(cloth)
    assert ("operator", "object.fit_to_target_bind_vertex", True) in draw()
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    text = labels(draw())
    rmse = next(t for t in text if t.startswith("RMSE "))
    worst = next(t for t in text if t.startswith("Worst tracks: "))
    assert rmse.endswith(" px") and " mm" not in rmse and worst.count(" px") == 5
    row = cloth.fit_to_target.bindings[0]
    log = []
    ui = bpy.types.FIT_UL_track_bindings
    ui.draw_item(None, bpy.context, Layout(log), cloth.fit_to_target, row, 0, None, "", 0)
    assert labels(log) == [row.track, row.how.title(), f"{row.error_px:.2f} px"] and row.error_px > 0.0


def test_a_movie_at_another_frame_rate_is_noted() -> None:
    from fit_to_target.addon.scene.footage import frame_rate_note

    assert frame_rate_note("Swatch", 0.0, 24.0) is None  # an image sequence plays at the scene's
    assert frame_rate_note("Swatch", 24.0, 24.0) is None
    assert frame_rate_note("Swatch", 23.976, 24.0) is None
    note = frame_rate_note("Swatch", 60.0, 24.0)
    assert note is not None and "filmed at 60 fps but the scene runs at 24 fps" in note


def test_camera_tracks_with_bundles_bind_where_the_solve_puts_them(tmp_path: Path) -> None:
    """Features on the cloth's clamped rows never move: the camera solve gives them bundles,
    which Bind Tracks maps into the world through the solved camera and binds to the nearest
    cloth point; the room's features lie far from the cloth and are left out."""
    scene = footage_scene(tmp_path, solve=True, pinned_features=True)
    cloth = scene["cloth"]
    cloth.fit_to_target.tracking_object = ""  # the camera's tracks
    assert bpy.ops.object.fit_to_target_bind_tracks() == {"FINISHED"}
    rows = {r.track: r for r in cloth.fit_to_target.bindings}
    assert sorted(rows) == sorted(f"pin{v}" for v in range(48, 64))
    rest = scene["truth"][0]
    for name, row in rows.items():
        bound = np.asarray(row.barycentric) @ rest[list(row.triangle)]
        # measured at most 2.6 mm off (the solve from 0.2 px tracks)
        assert row.how == "BUNDLE" and np.linalg.norm(bound - rest[int(name[3:])]) < 5e-3, name
