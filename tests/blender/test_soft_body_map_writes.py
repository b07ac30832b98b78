"""A soft body's weight maps through the add-on: hidden per-region Young's moduli found by
the panel operator and by the batch command, written into the object's Stiffness Group with
its Young's Modulus and Max, replayed by the model, and restored bit for bit by Revert; a
free soft-body map refused by name.

The scene: the soft-body cube (``soft_body_scenes.soft_object``, a 2 x 2 x 2 cell lattice)
dropped onto the ground, painted in two halves, Left (x < 0) and Right. The model made the
targets with a hidden stiffness map: Young's modulus 1e4 Pa and a Max of 5e4, a group of
weight 0 on Left and 1 on Right (5x contrast). The object keeps a uniform 2.5e4 and no
Stiffness Group: the fit must find both values and paint the group back.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import bpy
import numpy as np
import pytest
from addon_scenes import addon_module, model_trajectory, target_positions
from batch_run import our_errors, run_in_process
from soft_body_scenes import add_targets, select_only, soft_object

map_groups = addon_module("scene.map_groups")
checks = addon_module("scene.checks")
errors = addon_module("errors")
panel_maps = addon_module("ui.panel_maps")

FRAME_END = 16
FRAMES = [8, 12, 16]
TRUTH = {"Left": 1.0e4, "Right": 5.0e4}
START = 2.5e4
NEW_GROUP = "Fit Stiffness"
VALUES = ("young_modulus", "young_modulus_max", "damping", "damping_max", "poisson_ratio", "density")


def halves(ob: bpy.types.Object) -> tuple[np.ndarray, np.ndarray]:
    """(Left, Right): 1 on the vertices left (right) of the middle, 0 elsewhere."""
    x = np.array([v.co.x for v in ob.data.vertices])
    left = (x < 0.0).astype(float)
    return left, 1.0 - left


def paint(ob: bpy.types.Object, name: str, weights: np.ndarray) -> None:
    group = ob.vertex_groups.new(name=name)
    for index in np.flatnonzero(weights > 0.0):
        group.add([int(index)], float(weights[index]), "REPLACE")


def hidden_map_scene() -> bpy.types.Object:
    """The module's scene (see the docstring): targets made by the model with the hidden map,
    which is then cleared."""
    ob = soft_object(cells=2, frame_end=FRAME_END)
    left, right = halves(ob)
    paint(ob, "Left", left)
    paint(ob, "Right", right)
    s = ob.fit_to_target_soft_body
    s.young_modulus, s.young_modulus_max = TRUTH["Left"], TRUTH["Right"]
    paint(ob, "Hidden", right)
    s.young_modulus_group = "Hidden"
    add_targets(ob, model_trajectory(ob, FRAME_END), FRAMES)
    s.young_modulus_group = ""
    ob.vertex_groups.remove(ob.vertex_groups["Hidden"])
    s.young_modulus = s.young_modulus_max = START
    select_only(ob)
    return ob


def group_weights(ob: bpy.types.Object, name: str) -> np.ndarray:
    """Each vertex's weight in group ``name`` (every vertex must be a member)."""
    members = map_groups.group_weights(ob, ob.vertex_groups[name])
    assert sorted(members) == list(range(len(ob.data.vertices)))
    return np.array([members[i] for i in range(len(members))])


def snapshot(ob: bpy.types.Object) -> dict[str, Any]:
    """The object's vertex groups (name, index, members' weights), its active group and the
    soft body's values and group fields: exact, for == comparisons."""
    s = ob.fit_to_target_soft_body
    return {
        "groups": {g.name: (g.index, map_groups.group_weights(ob, g)) for g in ob.vertex_groups},
        "active": ob.vertex_groups.active_index,
        "values": {name: getattr(s, name) for name in (*VALUES, "young_modulus_group", "damping_group")},
    }


def replay_rmse(ob: bpy.types.Object) -> float:
    """RMSE (m) over the target frames of the model replaying the object's values and groups."""
    trajectory = model_trajectory(ob, FRAME_END)
    targets = target_positions(ob)
    return float(np.sqrt(np.mean([np.sum((trajectory[f - 1] - x) ** 2, axis=1) for f, x in targets.items()])))


def check_written(ob: bpy.types.Object, regions: dict[str, float]) -> None:
    """The Stiffness Group written: weights 0 on Left, 1 on Right (the hidden map), the field
    naming it and the base and Max the regions' values."""
    s = ob.fit_to_target_soft_body
    assert s.young_modulus_group == NEW_GROUP
    weights = group_weights(ob, NEW_GROUP)
    assert (weights.min(), weights.max()) == (0.0, 1.0)
    np.testing.assert_allclose(weights, halves(ob)[1], atol=1e-3)
    assert s.young_modulus == pytest.approx(regions["Left"], rel=1e-6)
    assert s.young_modulus_max == pytest.approx(regions["Right"], rel=1e-6)


def test_the_operator_finds_writes_and_reverts_a_region_stiffness_map() -> None:
    ob = hidden_map_scene()
    s = ob.fit_to_target
    s.fit_young_modulus = s.fit_damping = False  # the map alone
    s.map_fit, s.map_kind, s.map_mode = True, "STIFFNESS", "REGIONS"
    for name in TRUTH:
        s.map_regions.add().group = name
    before = snapshot(ob)
    t0 = time.perf_counter()
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    seconds = time.perf_counter() - t0
    record = json.loads(s.result_json)
    assert record["outcome"] == "converged", record.get("reason")
    entry = record["maps"]["stiffness"]
    assert entry["mode"] == "regions" and entry["group"] == NEW_GROUP
    regions = {name: entry["regions"][name]["value"] for name in TRUTH}
    error = {name: regions[name] / value - 1.0 for name, value in TRUTH.items()}
    for name in TRUTH:
        assert abs(error[name]) < 0.01, error
        assert entry["regions"][name]["determined"], entry
    assert s.applied
    check_written(ob, regions)
    assert entry["settings"] == {
        "young_modulus": pytest.approx(regions["Left"], rel=1e-9),
        "young_modulus_max": pytest.approx(regions["Right"], rel=1e-9),
    }
    rmse = replay_rmse(ob)
    assert rmse < 1e-3
    print(f"operator: {seconds:.1f} s, region errors {error}, replay RMSE {rmse * 1e3:.4f} mm")

    assert bpy.ops.object.fit_to_target_revert() == {"FINISHED"}
    assert snapshot(ob) == before
    assert NEW_GROUP not in ob.vertex_groups


def test_a_written_map_replaces_a_named_group_and_restores_it_bit_for_bit() -> None:
    """The group the Damping Group field names is replaced in place; restoring puts back its
    members and weights, the field and the Max exactly (no fit: ``map_groups`` on its own)."""
    ob = soft_object(cells=2, frame_end=8)
    left, right = halves(ob)
    group = ob.vertex_groups.new(name="Soft Spots")
    group.add([int(i) for i in np.flatnonzero(left)], 0.1 + 1e-7, "REPLACE")
    s = ob.fit_to_target_soft_body
    s.damping_group, s.damping_max = "Soft Spots", 0.123456789
    ob.vertex_groups.active_index = 0
    before = snapshot(ob)
    weights = 0.25 + 0.5 * right
    state = map_groups.write_map(ob, "damping", weights, {"damping_max": 0.05})
    assert (state.group, state.setting, state.model) == ("Soft Spots", "damping_group", "soft_body")
    np.testing.assert_allclose(group_weights(ob, "Soft Spots"), weights, atol=1e-7)
    assert s.damping_max == pytest.approx(0.05) and s.damping_group == "Soft Spots"
    map_groups.restore_map(ob, map_groups.GroupState.from_json(state.to_json()))
    assert snapshot(ob) == before

    # a group field naming nothing: a new group, and the field back to its old text
    s.young_modulus_group = "Gone"
    before = snapshot(ob)
    state = map_groups.write_map(ob, "stiffness", weights, {"young_modulus_max": 3e4})
    assert s.young_modulus_group == NEW_GROUP == state.group
    map_groups.restore_map(ob, state)
    assert snapshot(ob) == before
    with pytest.raises(errors.FitInputError, match=r"unknown map 'structural' for the soft_body model"):
        map_groups.write_map(ob, "structural", weights)
    with pytest.raises(errors.FitInputError, match=r"young_modulus_max = 0.0 is outside Blender's range"):
        map_groups.write_map(ob, "stiffness", weights, {"young_modulus_max": 0.0})
    assert snapshot(ob) == before


def test_the_batch_command_finds_and_writes_a_region_stiffness_map(tmp_path: Path) -> None:
    hidden_map_scene()
    scene = tmp_path / "jelly.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    t0 = time.perf_counter()
    code, out, err = run_in_process(
        scene,
        *("--object", "Jelly", "--fit-map", "stiffness", "--map-regions", "Left,Right"),
        *("--save", tmp_path / "out.blend", "--report", tmp_path / "r.json", "--quiet"),
    )
    seconds = time.perf_counter() - t0
    assert code == 0, err
    (entry,) = json.loads((tmp_path / "r.json").read_text())["objects"]
    assert entry["outcome"] == "converged" and entry["fit"] == [], entry
    stiffness = entry["maps"]["stiffness"]
    assert stiffness["mode"] == "regions" and stiffness["group"] == NEW_GROUP
    regions = {name: stiffness["regions"][name]["value"] for name in TRUTH}
    error = {name: regions[name] / value - 1.0 for name, value in TRUTH.items()}
    for name in TRUTH:
        assert abs(error[name]) < 0.01, error
        assert entry["params"][f"stiffness:{name}"] == regions[name]
    values = ", ".join(f"{name} {regions[name]:.3g}" for name in TRUTH)
    assert f"  stiffness map (regions): {values} -> group '{NEW_GROUP}'" in out.splitlines()

    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "out.blend"))
    ob = bpy.data.objects["Jelly"]
    check_written(ob, regions)
    rmse = replay_rmse(ob)
    assert rmse < 1e-3
    print(f"batch: {seconds:.1f} s, region errors {error}, replay RMSE {rmse * 1e3:.4f} mm")


def test_a_free_soft_body_map_is_refused_by_name(tmp_path: Path) -> None:
    ob = hidden_map_scene()
    s = ob.fit_to_target
    s.map_fit, s.map_kind, s.map_mode = True, "DAMPING", "FREE"
    expected = "'Jelly': the soft_body model fits the damping map by regions only"
    assert checks.why_not_fittable(bpy.context, busy=None).startswith(expected)
    assert "choose Regions" in checks.why_not_fittable(bpy.context, busy=None)

    # what the Weight Map sub-panel says the map sets and where it goes
    assert panel_maps.range_line("soft_body", "damping") == "Sets Damping (weight 0), Damping Max (weight 1)"
    assert panel_maps.output_group_line(ob) == "Writes to a new group 'Fit Damping'"
    ob.fit_to_target_soft_body.damping_group = "Left"
    assert panel_maps.output_group_line(ob) == "Writes to 'Left', the soft body's Damping Group"

    s.map_fit = False
    scene = tmp_path / "jelly.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    code, out, err = run_in_process(scene, "--object", "Jelly", "--fit-map", "stiffness")
    (line,) = our_errors(err)
    assert code == 2 and "'Jelly': the soft_body model fits the stiffness map by regions only" in line
    assert "--map-regions" in line and not out  # a cloth's map: test_batch_maps.py
