"""The bake covers the cloth's cache range, extended to a target frame beyond the cache end,
whatever the scene's frame range: a fitted target beyond the scene's end plays back from the
saved file as fitted, and the short range is warned about; a scene longer than the cache
adds no frames."""

from __future__ import annotations

import json
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import (
    add_target_meshes,
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


# (cache end, target frames) -> (first, last) baked frame, in a scene of frames 1-250 (the factory's)
RANGES = {
    "factory cache, early target": (250, [10], (1, 250)),
    "short cache, long scene": (40, [], (1, 40)),
    "target beyond the cache end": (40, [60], (1, 60)),
}


@pytest.mark.parametrize("case", sorted(RANGES))
def test_bake_covers_the_cache_range_not_the_scene_range(case: str, tmp_path: Path) -> None:
    cache_end, targets, (first, last) = RANGES[case]
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 250
    ob = clamped_cloth(n=4, frame_end=cache_end)
    scene.frame_set(1)
    rest = playback(ob, [1])[0]
    add_target_meshes(ob, np.stack([rest] * max(targets, default=1)), targets, start=1)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "range.blend"))  # the cache goes next to it
    ob, scene = bpy.data.objects["Cloth"], bpy.context.scene
    assert bake.bake_frame_range(ob) == (first, last)

    info = bake.bake_object(scene, ob)
    assert (info.frame_start, info.frame_end) == (first, last)
    assert info.warnings == ()  # every target frame lies in the scene's range
    samples, start, _ = pc2.read_pc2(info.filepath)
    assert start == first and len(samples) == last - first + 1
    assert json.loads(ob.fit_to_target.bake_json)["frame_end"] == last
    assert Path(info.filepath).parent == tmp_path / bake.CACHE_FOLDER
