"""The bake covers the cloth cache and every target frame, whatever the scene's frame range:
a fitted target beyond the scene's end plays back from the saved file as fitted, and the
short range is warned about."""

from __future__ import annotations

import json
from pathlib import Path

import bpy
import numpy as np
from addon_scenes import (
    add_targets_from_blender,
    bake,
    clamped_cloth,
    open_blend,
    pc2,
    playback,
    target_positions,
)
from batch_run import TRUTH, run_batch

CACHE_END, SCENE_END, TARGET = 30, 12, 20


def short_scene(path: Path) -> Path:
    """A clamped sheet, cache 1-30, one target from Blender's cloth at frame 20, and the
    scene's frame range 1-12."""
    ob = clamped_cloth(n=5, frame_end=CACHE_END)
    add_targets_from_blender(ob, TRUTH, [TARGET])
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, SCENE_END
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def test_batch_bakes_past_the_scene_end_to_the_target(tmp_path: Path) -> None:
    scene = short_scene(tmp_path / "short.blend")
    out = tmp_path / "out"
    out.mkdir()
    report, saved = out / "report.json", out / "fitted.blend"
    done = run_batch(scene, "--save", saved, "--report", report, "--bake", out / "cache", "--quiet")
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(report.read_text())["objects"]
    assert entry["outcome"] == "converged"
    # the saved scene at the target frame: the fitted motion, as close to the target as the fit
    open_blend(saved)
    ob = bpy.data.objects["Cloth"]
    (played,) = playback(ob, [TARGET])
    target = target_positions(ob)[TARGET]
    rmse = float(np.sqrt(np.mean(np.sum((played - target) ** 2, axis=1))))
    assert rmse < entry["rmse_m"] + 1e-5, (rmse, entry["rmse_m"])  # float32 .pc2
    # the cache holds the whole cloth cache, the target frame included
    samples, first, _ = pc2.read_pc2(entry["bake"])
    assert first == 1.0 and len(samples) == CACHE_END

    warning = (
        f"'Cloth': the scene's frame range 1-{SCENE_END} leaves out the target frame(s) {TARGET}: "
        "they are baked, but the scene does not play them"
    )
    assert any(w.startswith(warning) for w in entry["warnings"]), entry["warnings"]
    assert any(warning in line for line in done.stdout.splitlines()), done.stdout


def test_panel_bake_covers_the_cache_and_warns(tmp_path: Path) -> None:
    short_scene(tmp_path / "short.blend")
    ob = bpy.data.objects["Cloth"]
    info = bake.bake_object(bpy.context.scene, ob)
    assert (info.frame_start, info.frame_end) == (1, CACHE_END)
    assert len(info.warnings) == 1 and f"target frame(s) {TARGET}" in info.message
    assert json.loads(ob.fit_to_target.bake_json)["frame_end"] == CACHE_END
    assert len(pc2.read_pc2(info.filepath)[0]) == CACHE_END
