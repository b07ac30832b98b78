"""The batch command's footage fits see through the camera that filmed the clip and leave
their bindings on the object: real .blend files, ``batch.py`` in its own process.

The scene's camera is another one than the one that filmed the clip (5 cm to the side): a
fit through it cannot match the markers. The object's *Camera* names the true one, or
``--camera`` does; a saved run records the clip, the camera and the refined bindings on the
object, and the next run of the same clip starts from that binding list.
"""

from __future__ import annotations

import json
from pathlib import Path

import blender_env  # noqa: F401  (sets up the isolated profile before bpy)
import bpy
import numpy as np
import pytest
from addon_scenes import open_blend
from batch_run import run_batch
from footage_scenes import TRACKED, bind_all, footage_scene

TRUE_CAMERA = "FootageCamera"


def scene_with_another_camera(folder: Path) -> dict:
    """``footage_scene`` with a second camera, 5 cm beside the true one and following it, as
    the scene camera."""
    scene = footage_scene(folder)
    true_camera = scene["camera"]
    other = bpy.data.objects.new("Other", true_camera.data)
    bpy.context.scene.collection.objects.link(other)
    other.animation_data_create()
    other.animation_data.action = true_camera.animation_data.action
    if hasattr(true_camera.animation_data, "action_slot"):
        other.animation_data.action_slot = true_camera.animation_data.action_slot
    other.delta_location = (0.05, 0.0, 0.0)
    bpy.context.scene.camera = other
    return scene


def fit(blend: Path, report: Path, *args: object) -> tuple[int, dict, str]:
    proc = run_batch(blend, "--object", "Cloth", "--quiet", "--report", report, *args, timeout=900)
    assert report.is_file(), proc.stderr
    return proc.returncode, json.loads(report.read_text())["objects"][0], proc.stderr


def test_the_objects_camera_is_the_one_a_batch_fit_sees_through(tmp_path: Path) -> None:
    scene = scene_with_another_camera(tmp_path)
    cloth = scene["cloth"]
    cloth.fit_to_target.camera = scene["camera"]
    bind_all(cloth)  # through the object's camera, as the panel does
    blend = tmp_path / "footage.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    code, record, err = fit(blend, tmp_path / "report.json", "--target-tracks", scene["clip"].name)
    assert record["footage"]["camera"] == TRUE_CAMERA, record["targets"]
    assert code == 0 and record["outcome"] == "converged", (record["outcome_reason"], err)
    assert record["rmse_px"] < 1.0


def test_camera_flag_and_a_saved_fit_keep_clip_camera_and_bindings(tmp_path: Path) -> None:
    scene = scene_with_another_camera(tmp_path)
    cloth, clip, clip_name = scene["cloth"], scene["clip"], scene["clip"].name
    s = cloth.fit_to_target
    s.target_source, s.clip = "MESHES", None  # nothing on the object says which footage
    for track in clip.tracking.tracks:  # every track bound automatically: a marker at the start
        track.markers.find_frame(1).mute = False
    blend, saved = tmp_path / "footage.blend", tmp_path / "fitted.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    tracks = ("--target-tracks", clip_name, "--camera", TRUE_CAMERA)
    code, record, err = fit(blend, tmp_path / "report.json", *tracks, "--save", saved)
    assert record["footage"]["camera"] == TRUE_CAMERA, record["targets"]
    assert code == 0 and record["outcome"] == "converged", (record["outcome_reason"], err)

    open_blend(saved)
    s = bpy.data.objects["Cloth"].fit_to_target
    assert s.clip is not None and s.clip.name == clip_name and s.tracking_object == ""
    assert s.camera is not None and s.camera.name == TRUE_CAMERA
    rows = {r.track: r for r in s.bindings}
    assert set(rows) == set(record["track_bindings"]) and len(rows) >= len(TRACKED) - 8
    for name, refined in record["track_bindings"].items():
        assert tuple(rows[name].triangle) == tuple(refined["triangle"]), name
        np.testing.assert_allclose(rows[name].barycentric, refined["barycentric"], atol=1e-6)
        assert rows[name].error_px == pytest.approx(record["track_errors_px"][name], rel=1e-5)

    # the next run of that clip starts from the saved list: a track switched off there stays out,
    # and the recorded camera is the one it sees through without --camera
    off = next(iter(rows))
    rows[off].use = False
    bpy.ops.wm.save_as_mainfile(filepath=str(saved))
    _, again, err = fit(saved, tmp_path / "again.json", "--target-tracks", clip_name, "--max-iters", "2")
    assert again["footage"]["camera"] == TRUE_CAMERA, err
    assert again["footage"]["tracks"] == len(rows) - 1 and off not in again["track_errors_px"]
