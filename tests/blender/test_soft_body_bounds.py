"""Soft-body settings at their bounds survive Blender's float32 storage: a Poisson ratio of
0.49, the panel's maximum, is stored as 0.49000000953674316 and must still fit, simulate and
save as a preset."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import addon_module, model_trajectory, open_blend
from batch_run import run_batch
from blender_ref import _PACKAGE
from soft_body_scenes import add_targets, select_only, soft_object, soft_scene

base = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.models.base")
core_presets = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.presets")
presets = addon_module("presets")

NU = 0.49  # the Poisson ratio's upper bound, and the panel's maximum
STORED = float(np.float32(NU))  # what Blender keeps: 0.49000000953674316


def test_a_bound_stays_within_after_float32_storage() -> None:
    assert STORED > NU and base.within_bounds(STORED, (0.0, NU))
    assert base.onto_bounds(STORED, (0.0, NU)) == NU  # back onto the bound
    nearest_above = float(np.nextafter(np.float32(NU), np.float32(1.0)))
    assert not base.within_bounds(nearest_above, (0.0, NU))  # the next float32 up is outside
    assert base.onto_bounds(0.6, (0.0, NU)) == 0.6  # outside: left for the caller to refuse
    preset = core_presets.parse_preset(
        json.dumps({"schema": 1, "name": "Gel", "model": "soft_body", "values": {"poisson_ratio": STORED}})
    )
    assert preset.values["poisson_ratio"] == NU


@pytest.fixture
def user_presets() -> Path:
    folder = presets.user_presets_dir()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_fit_and_save_fitted_as_preset_at_poisson_049(tmp_path: Path, user_presets: Path) -> None:
    ob = soft_object(cells=2, frame_end=8)
    s = ob.fit_to_target_soft_body
    s.poisson_ratio = NU
    assert s.poisson_ratio == STORED  # as the panel's maximum is kept
    s.young_modulus = 6.0e4
    # targets of the same body, stiffer (the values given here, not read from Blender)
    add_targets(ob, model_trajectory(ob, 8, {"young_modulus": 2.0e4, "poisson_ratio": NU}), [8])
    scene, saved, report = tmp_path / "jelly.blend", tmp_path / "fitted.blend", tmp_path / "report.json"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))

    # a real fit in a batch process: the stored value is within the model's range
    done = run_batch(scene, "--fit", "young_modulus", "--max-iters", "1", "--save", saved, "--report", report)
    assert done.returncode in (0, 4), done.stderr
    (entry,) = json.loads(report.read_text())["objects"]
    assert entry["status"] == "ok" and not entry["warnings"], entry
    assert entry["start_values"] == {} and entry["model"] == "soft_body"

    # Save Fitted as Preset on the saved file keeps the Poisson ratio at its bound
    open_blend(saved)
    fitted = bpy.data.objects["Jelly"]
    select_only(fitted)
    assert bpy.ops.fit.preset_save_fitted(name="Gel 049") == {"FINISHED"}
    values = json.loads((user_presets / "gel_049.json").read_text())["values"]
    assert values["poisson_ratio"] == NU
    assert values["young_modulus"] == pytest.approx(entry["params"]["young_modulus"])

    # applied to another soft body, it is stored as float32 again and still simulates
    other = soft_object(cells=2, name="Other", location=(2.0, 0.0, 0.6), frame_end=8)
    select_only(other)
    assert bpy.ops.fit.preset_apply(name="Gel 049") == {"FINISHED"}
    assert other.fit_to_target_soft_body.poisson_ratio == STORED
    mod = soft_scene.find_soft_body_modifier(other)
    params = soft_scene.read_params(mod, bpy.context.scene)
    params.validate()
    assert params.poisson_ratio == NU
