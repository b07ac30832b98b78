"""The soft-body model through the add-on: the panel operator fits a mesh with a Soft Body
modifier, writes the values to the object, bakes them to a Mesh Cache that plays the fitted
motion back; Blender's own Soft Body as a target of another model; bad input refused."""

from __future__ import annotations

import importlib
import json
import shutil

import bpy
import numpy as np
import pytest
from addon_scenes import addon_module, bake, model_trajectory, modifier_stack, object_model, pc2, playback
from blender_ref import _PACKAGE
from soft_body_scenes import (
    add_targets,
    blender_soft_body,
    collider_box,
    select_only,
    soft_object,
    soft_scene,
)

addon_presets = importlib.import_module(f"{_PACKAGE.__name__}.addon.presets")
MODEL_VALUES = ("young_modulus", "poisson_ratio", "damping", "density")


def values_of(ob: bpy.types.Object) -> dict[str, float]:
    s = ob.fit_to_target_soft_body
    return {k: float(getattr(s, k)) for k in MODEL_VALUES}


def hidden_material_scene(kind: str, truth: dict[str, float], frames: list[int]) -> bpy.types.Object:
    """A cube dropped onto the ground, or Suzanne onto a collider box (ground below too);
    targets made by the model at ``truth``; the object's own values then set 3x off. Dropped
    from 30 cm, it lands by frame 5."""
    ob = soft_object(kind, location=(0.0, 0.0, 0.3))
    if kind == "monkey":
        collider_box(location=(0.0, 0.0, -0.1), rotation=(0.0, 0.0, 0.0))
    start = {k: getattr(ob.fit_to_target_soft_body, k) for k in truth}
    for k, v in truth.items():
        setattr(ob.fit_to_target_soft_body, k, v)
    add_targets(ob, model_trajectory(ob, max(frames)), frames)
    for k, v in start.items():
        setattr(ob.fit_to_target_soft_body, k, v)
    ob.fit_to_target_soft_body.young_modulus = truth["young_modulus"] * 3.0
    ob.fit_to_target_soft_body.damping = truth["damping"] / 3.0
    ob.fit_to_target.fit_young_modulus = True
    ob.fit_to_target.fit_damping = True
    select_only(ob)
    return ob


@pytest.mark.parametrize("kind", ["cube", "monkey"])
def test_operator_recovers_hidden_material_writes_and_bakes_it(kind: str) -> None:
    truth = {"young_modulus": 2.0e4, "damping": 0.02}
    frames = [6, 10, 14, 18]
    ob = hidden_material_scene(kind, truth, frames)
    before = values_of(ob)
    stack = modifier_stack(ob)

    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    record = json.loads(ob.fit_to_target.result_json)
    assert record["model"] == "soft_body" and record["outcome"] == "converged", record.get("reason")
    for name, value in truth.items():
        assert record["params"][name] == pytest.approx(value, rel=0.02), name
    # written back to the object's model values (float32 storage), nothing else changed
    after = values_of(ob)
    for name in MODEL_VALUES:
        expected = record["params"].get(name, before[name])
        assert after[name] == pytest.approx(expected, rel=1e-6), name
    assert ob.fit_to_target.applied and json.loads(ob.fit_to_target.previous_values_json)[
        "young_modulus"
    ] == (pytest.approx(before["young_modulus"], rel=1e-6))
    assert record["initial_rmse_m"] > 20.0 * record["rmse_m"]
    # what the mesh became: a cube fills its 4 x 4 x 4 cells, 6 tets each; Suzanne fewer
    geometry = record["geometry"]
    assert geometry["tets"] == 384 if kind == "cube" else 0 < geometry["tets"] < 384
    assert 0.0 < geometry["worst_quality"] <= 1.0
    print(f"{kind}: {record['n_forward']} rollouts, {record['seconds']:.1f} s")

    # the bake plays back exactly what the model does with the written values
    assert bpy.ops.object.fit_to_target_bake() == {"FINISHED"}
    soft_mod = soft_scene.find_soft_body_modifier(ob)
    assert not soft_mod.show_viewport and not soft_mod.show_render  # Blender's solver is off
    cache = ob.modifiers[bake.CACHE_MODIFIER_NAME]
    assert cache.type == "MESH_CACHE"
    all_frames = list(range(1, bpy.context.scene.frame_end + 1))
    played = playback(ob, all_frames)
    expected = model_trajectory(ob, all_frames[-1])
    assert np.abs(played - expected).max() < 1e-5  # float32 .pc2 of metre-sized coordinates
    state = json.loads(ob.fit_to_target.bake_json)
    samples, first, _ = pc2.read_pc2(state["filepath"])
    assert samples.shape[0] == len(all_frames) and first == 1.0

    if kind == "cube":
        check_presets(ob, record)

    # Revert puts the values back and, asked to, unbakes: the stack is as before
    assert bpy.ops.object.fit_to_target_revert(remove_bake=True) == {"FINISHED"}
    assert values_of(ob) == pytest.approx(before, rel=1e-6)
    assert modifier_stack(ob) == stack


def check_presets(ob: bpy.types.Object, record: dict) -> None:
    """The fitted material saved as a soft-body preset, applied to another soft body, and
    refused as the start of a cloth fit."""
    folder = addon_presets.user_presets_dir()
    shutil.rmtree(folder, ignore_errors=True)
    try:
        assert bpy.ops.fit.preset_save_fitted(name="Jelly Fitted") == {"FINISHED"}
        preset = addon_presets.find_preset("Jelly Fitted")
        assert preset.model == "soft_body"
        assert preset.values["young_modulus"] == pytest.approx(record["params"]["young_modulus"])
        assert preset.values["lattice_cells"] == ob.fit_to_target_soft_body.lattice_cells
        other = soft_object("cube", name="Other", location=(2.0, 0.0, 0.6))
        select_only(other)
        assert bpy.ops.fit.preset_apply(name="Jelly Fitted") == {"FINISHED"}
        assert values_of(other)["damping"] == pytest.approx(record["params"]["damping"], rel=1e-6)
        bpy.ops.mesh.primitive_plane_add()
        sheet = bpy.context.active_object
        sheet.modifiers.new("Cloth", "CLOTH")
        with pytest.raises(RuntimeError, match="holds soft_body settings"):
            bpy.ops.fit.preset_use_as_start(name="Jelly Fitted")
        select_only(ob)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_targets_from_blenders_own_soft_body_fit_end_to_end(capsys) -> None:
    """Blender's Soft Body (edge springs, another model) drops a cube onto a collision plane;
    the tetrahedral model is fitted to it. No threshold: the RMSE is reported, and the
    outcome must not call a mismatch converged."""
    ob = soft_object("cube", location=(0.0, 0.0, 0.35), ground=False, cells=3, frame_end=20)
    bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, 0.0))
    plane = bpy.context.active_object
    plane.modifiers.new("Collision", "COLLISION")
    trajectory = blender_soft_body(ob, 20)
    assert np.abs(trajectory[-1] - trajectory[0]).max() > 0.1  # it fell
    add_targets(ob, trajectory, [10, 15, 20])
    ob.fit_to_target.fit_young_modulus = True
    ob.fit_to_target.fit_damping = True
    select_only(ob)
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    record = json.loads(ob.fit_to_target.result_json)
    rmse, tolerance = record["rmse_m"], record["tolerance_m"]
    assert np.isfinite(rmse) and rmse < record["initial_rmse_m"]
    assert record["outcome"] in ("converged", "stalled", "misfit", "budget")
    assert (record["outcome"] == "converged") == (rmse <= tolerance), record
    with capsys.disabled():
        print(
            f"\nBlender Soft Body targets: {record['outcome']}, RMSE {rmse * 1e3:.2f} mm "
            f"(start {record['initial_rmse_m'] * 1e3:.2f} mm, motion {record['motion_m'] * 1e3:.1f} mm), "
            f"E {record['params']['young_modulus']:.4g}"
        )


def _refused(ob: bpy.types.Object, text: str) -> None:
    select_only(ob)
    before = values_of(ob)
    with pytest.raises(RuntimeError, match=text):
        bpy.ops.object.fit_to_target()
    assert values_of(ob) == before and not ob.fit_to_target.result_json


def _with_target(ob: bpy.types.Object) -> bpy.types.Object:
    add_targets(ob, np.stack([np.array([list(v.co) for v in ob.data.vertices])] * 6), [5])
    return ob


def test_bad_soft_body_input_is_refused_by_name() -> None:
    ob = _with_target(soft_object("cube", name="Jelly"))
    ob.modifiers.remove(ob.modifiers["Softbody"])
    _refused(ob, "'Jelly' has no Soft Body modifier")

    bpy.ops.mesh.primitive_plane_add(size=1.0)
    flat = bpy.context.active_object
    flat.name = "Sheet"
    flat.modifiers.new("Softbody", "SOFT_BODY").settings.use_goal = False
    flat.fit_to_target.model = "SOFT_BODY"
    _with_target(flat)
    _refused(flat, "flat: a soft body needs a volume")


@pytest.mark.parametrize(
    "case", ["self collision", "goal without group", "force field", "deforming collider"]
)
def test_unsimulated_soft_body_settings_are_refused_then_warned(case: str) -> None:
    ob = _with_target(soft_object("cube", name="Jelly"))
    mod = soft_scene.find_soft_body_modifier(ob)
    if case == "self collision":
        mod.settings.use_self_collision = True
        text = "Self Collision"
    elif case == "goal without group":
        mod.settings.use_goal = True
        text = "without a goal vertex group"
    elif case == "force field":
        bpy.ops.object.effector_add(type="WIND")
        text = "Force Field 'Wind'"
    else:
        table = collider_box()
        table.modifiers.new("Wave", "WAVE")
        text = "Collision object 'Table' deforms"
    _refused(ob, text)
    ob.fit_to_target.allow_unmodeled = True
    ob.fit_to_target.max_iterations = 1
    select_only(ob)
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    record = json.loads(ob.fit_to_target.result_json)
    assert any(text in w for w in record["warnings"]), record["warnings"]


def test_batch_fits_a_soft_body_with_the_model_flag(tmp_path) -> None:
    """``--model soft_body`` on a scene whose object was left on the cloth model: the flag
    chooses the model, the report says so, and the fitted file keeps the choice."""
    from batch_run import run_in_process

    ob = soft_object("cube", name="Jelly")
    ob.fit_to_target_soft_body.young_modulus = 2.0e4
    add_targets(ob, model_trajectory(ob, 20), [10, 20])
    ob.fit_to_target_soft_body.young_modulus = 6.0e4
    ob.fit_to_target.model = "BLENDER_CLOTH"
    scene_file, report, saved = tmp_path / "jelly.blend", tmp_path / "report.json", tmp_path / "fitted.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_file))

    code, _, err = run_in_process(scene_file, "--fit", "young_modulus", "--quiet")
    assert code == 2 and "'Jelly' has no Cloth modifier" in err and "--model soft_body" in err, err

    code, out, err = run_in_process(
        scene_file,
        "--model",
        "soft_body",
        "--fit",
        "young_modulus",
        "--report",
        report,
        "--save",
        saved,
        "--quiet",
    )
    assert code == 0, err
    entry = json.loads(report.read_text())["objects"][0]
    assert entry["model"] == "soft_body" and entry["outcome"] == "converged"
    assert entry["params"]["young_modulus"] == pytest.approx(2.0e4, rel=0.01)
    bpy.ops.wm.open_mainfile(filepath=str(saved))
    fitted = bpy.data.objects["Jelly"]
    assert fitted.fit_to_target.model == "SOFT_BODY"
    assert fitted.fit_to_target_soft_body.young_modulus == pytest.approx(
        entry["params"]["young_modulus"], rel=1e-6
    )


def test_the_model_follows_the_physics_modifier_by_default(tmp_path) -> None:
    """Left at its default, the model is the modifier's: a Soft Body object is fitted as a soft
    body in the panel's request and by the batch command, a Cloth object (or one with both
    modifiers) as cloth; a model picked by the artist stays picked."""
    from batch_run import run_in_process

    registry = addon_module("models.registry")
    request = addon_module("request")
    ob = soft_object("cube", name="Jelly")
    ob.fit_to_target_soft_body.young_modulus = 2.0e4
    add_targets(ob, model_trajectory(ob, 20), [10, 20])
    ob.fit_to_target_soft_body.young_modulus = 6.0e4
    ob.fit_to_target.property_unset("model")  # as a new object has it
    assert ob.fit_to_target.model == registry.MODEL_FROM_MODIFIER
    assert registry.object_model(ob).name == "soft_body"
    assert request.request_from_object(ob).model == "soft_body"

    scene_file, report = tmp_path / "jelly.blend", tmp_path / "report.json"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_file))
    code, _, err = run_in_process(scene_file, "--fit", "young_modulus", "--report", report, "--quiet")
    assert code == 0, err
    entry = json.loads(report.read_text())["objects"][0]
    assert entry["model"] == "soft_body" and entry["outcome"] == "converged"
    assert entry["params"]["young_modulus"] == pytest.approx(2.0e4, rel=0.01)

    jelly = bpy.data.objects["Jelly"]
    jelly.modifiers.new("Cloth", "CLOTH")  # both: the Cloth modifier's model, first in the menu
    assert registry.object_model(jelly).name == "blender_cloth"
    jelly.fit_to_target.model = "SOFT_BODY"  # picked: kept whatever the modifiers
    assert registry.object_model(jelly).name == "soft_body"


def test_a_stiffness_group_blends_youngs_modulus_as_painted() -> None:
    """The object's Stiffness Group reaches the simulation: a cube painted whole at weight 1
    moves as the Max without a group (the same bits), half painted it moves as neither, with
    the painted vertices' weights; a group the object does not have is refused by name."""
    ob = soft_object("cube", name="Jelly", cells=2)
    s = ob.fit_to_target_soft_body
    s.young_modulus, s.young_modulus_max = 2e4, 2e5
    soft = model_trajectory(ob, 12)
    stiff = model_trajectory(ob, 12, {"young_modulus": 2e5})
    group = ob.vertex_groups.new(name="Stiff")
    group.add(range(len(ob.data.vertices)), 1.0, "REPLACE")
    s.young_modulus_group = "Stiff"
    np.testing.assert_array_equal(model_trajectory(ob, 12), stiff)
    lower = [v.index for v in ob.data.vertices if v.co.z < 0.0]
    group.remove([v.index for v in ob.data.vertices if v.co.z >= 0.0])
    half = model_trajectory(ob, 12)
    for whole in (soft, stiff):
        assert np.abs(half - whole).max() > 1e-3
    mesh = object_model(ob).read_geometry(ob, bpy.context.evaluated_depsgraph_get())
    assert set(np.flatnonzero(mesh.young_modulus_weight)) == set(lower)
    assert mesh.damping_weight is None

    s.young_modulus_group = "Gone"
    with pytest.raises(ValueError, match="Jelly: the Stiffness Group 'Gone' is not a vertex group"):
        object_model(ob).read_geometry(ob, bpy.context.evaluated_depsgraph_get())
