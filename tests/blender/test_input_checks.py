"""Input the fit cannot use is refused with one line and exit 2, before any work: bad meshes,
target shape keys that deform the cloth, bad numbers, names that look like options, and
presets Blender would store differently than they read."""

from __future__ import annotations

import importlib
import json
import os
import shutil
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import clamped_cloth, cloth_scene, run_blender_cloth
from batch_run import TRUTH, check_refusal_report, our_errors, run_in_process, tiny_scene
from blender_ref import _PACKAGE

core = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.presets")
addon_presets = importlib.import_module(f"{_PACKAGE.__name__}.addon.presets")


@pytest.fixture(scope="module")
def scene_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_scene(tmp_path_factory.mktemp("input_checks") / "tiny.blend")


# -- (10) meshes the cloth cannot use: exit 2, named, before the fit ---------------------------------

QUAD = [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (1.0, 1.0, 0.0), (0.0, 1.0, 0.0)]
BAD_MESHES = {
    "duplicate faces": (QUAD, [], [[0, 1, 2, 3], [0, 1, 2, 3]], "duplicate faces"),
    "zero-area face": (QUAD + [(2.0, 0.0, 0.0)], [], [[0, 1, 2, 3], [0, 1, 4]], "zero-area polygon 1"),
    "non-manifold edge": (
        QUAD + [(0.5, 0.5, 1.0), (0.5, 0.5, -1.0)],
        [],
        [[0, 1, 4], [0, 1, 5], [0, 1, 2, 3]],
        "non-manifold",
    ),
    "edges only": (QUAD, [(0, 1), (1, 2), (2, 3)], [], "mesh has no faces"),
    "one vertex": ([(0.0, 0.0, 0.0)], [], [], "mesh has no faces"),
}


@pytest.mark.parametrize("case", list(BAD_MESHES))
def test_bad_meshes_exit_2_naming_the_problem(tmp_path: Path, case: str) -> None:
    vertices, edges, faces, expected = BAD_MESHES[case]
    me = bpy.data.meshes.new("Cloth")
    me.from_pydata(vertices, edges, faces)
    ob = bpy.data.objects.new("Cloth", me)
    bpy.context.scene.collection.objects.link(ob)
    mod = ob.modifiers.new("Cloth", "CLOTH")
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, 8
    target = bpy.data.objects.new("Target", me.copy())
    bpy.context.scene.collection.objects.link(target)
    target.location.z = -0.01
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 5
    scene = tmp_path / f"{case}.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    code, stdout, stderr = run_in_process(scene, "--report", tmp_path / "r.json")
    assert code == 2, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert line.startswith("fit-to-target: error: 'Cloth': ") and expected in line, line
    assert "fit Cloth iter" not in stdout
    check_refusal_report(tmp_path / "r.json", line)


# -- (10) numbers and names on the command line -----------------------------------------------------


@pytest.mark.parametrize("budget", ["nan", "inf", "-inf", "0", "-1", "soon"])
def test_time_budget_must_be_a_finite_positive_number(scene_file: Path, budget: str) -> None:
    code, stdout, stderr = run_in_process(scene_file, "--time-budget", budget)
    assert code == 2, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert "--time-budget" in line and budget in line, line


def test_an_object_named_like_an_option(tmp_path: Path) -> None:
    scene = tiny_scene(tmp_path / "dash.blend", names=("-x",))
    code, stdout, stderr = run_in_process(scene, "--object", "-x", "--quiet", "--max-iters", "2")
    assert code == 0, stderr
    assert "-x: blender_cloth" in stdout
    code, _, stderr = run_in_process(scene, "--obj", "-x")  # no abbreviations: they change meaning
    assert code == 2 and "unrecognized arguments: --obj" in our_errors(stderr)[0]


def surface_scene(path: Path) -> Path:
    """A clamped sheet whose target has one vertex more than the cloth: the same surface,
    one quad split into four triangles around its centre."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    bpy.context.scene.frame_end = 6
    ob = clamped_cloth(n=5, frame_end=6)
    mod = cloth_scene.find_cloth_modifier(ob)
    for key, value in TRUTH.items():
        setattr(mod.settings, key, value)
    shape = run_blender_cloth(ob, 6)[-1]
    for key in TRUTH:
        setattr(mod.settings, key, 15.0)
    bpy.context.scene.frame_set(1)
    faces = [list(p.vertices) for p in ob.data.polygons]
    a, b, c, d = faces.pop()
    centre = len(shape)
    vertices = np.vstack([shape, shape[[a, b, c, d]].mean(axis=0)])
    faces += [[a, b, centre], [b, c, centre], [c, d, centre], [d, a, centre]]
    me = bpy.data.meshes.new("Scan")
    me.from_pydata(vertices.tolist(), [], faces)
    target = bpy.data.objects.new("Scan", me)
    bpy.context.scene.collection.objects.link(target)
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 6
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def test_loss_option_and_the_surface_note(tmp_path: Path) -> None:
    scene = surface_scene(tmp_path / "scan.blend")
    code, _, stderr = run_in_process(scene, "--quiet")  # the object's setting: same topology
    assert code == 2
    assert "--loss surface" in our_errors(stderr)[0]  # the message names an option that exists
    for loss in ("surface", "auto"):
        report = tmp_path / f"{loss}.json"
        code, stdout, stderr = run_in_process(scene, "--loss", loss, "--quiet", "--report", report)
        assert code == 0, stderr
        (entry,) = json.loads(report.read_text())["objects"]
        assert entry["loss"] == "surface" and entry["status"] != "failed"
        # RMSE and max error measure different things here: the table says so
        assert "surface loss: RMSE averages both directions" in stdout
    code, stdout, _ = run_in_process(tiny_scene(tmp_path / "same.blend"), "--loss", "auto", "--quiet")
    assert code == 0 and "surface loss" not in stdout  # same topology: auto is the vertex loss


# -- (9) a shape-key target never deforms the cloth's rest shape --------------------------------------


def shape_key_cloth() -> tuple[bpy.types.Object, bpy.types.ShapeKey]:
    """A clamped sheet with a Basis and a key "Target" holding Blender's result at frame 6,
    added the way a user does (Blender 5.0 gives a new key the value 1.0)."""
    bpy.context.scene.frame_end = 6
    ob = clamped_cloth(n=5, frame_end=6)
    mod = cloth_scene.find_cloth_modifier(ob)
    for key, value in TRUTH.items():
        setattr(mod.settings, key, value)
    world = run_blender_cloth(ob, 6)[-1]
    for key in TRUTH:
        setattr(mod.settings, key, 15.0)
    bpy.context.scene.frame_set(1)
    ob.shape_key_add(name="Basis", from_mix=False)
    key = ob.shape_key_add(name="Target", from_mix=False)
    local = world - np.array(ob.location)
    key.data.foreach_set("co", local.astype(np.float32).ravel())
    ob.active_shape_key_index = 1
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    return ob, key


def test_add_target_from_a_shape_key_keeps_the_rest_shape() -> None:
    ob, key = shape_key_cloth()
    bpy.context.scene.frame_set(6)
    assert bpy.ops.object.fit_to_target_add_target() == {"FINISHED"}
    (target,) = ob.fit_to_target.targets
    assert (target.kind, target.shape_key, target.frame) == ("SHAPE_KEY", "Target", 6)
    assert key.value == 0.0  # it would otherwise move the cloth's rest shape to the target
    bpy.context.scene.frame_set(1)
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    record = json.loads(ob.fit_to_target.result_json)
    assert record["params"]["tension_stiffness"] == pytest.approx(30.0, rel=0.02), record["params"]
    assert record["rmse_m"] < 1e-4


def test_a_target_key_with_a_value_is_refused(tmp_path: Path) -> None:
    ob, key = shape_key_cloth()
    item = ob.fit_to_target.targets.add()
    item.kind, item.shape_key, item.frame = "SHAPE_KEY", "Target", 6
    key.value = 1.0
    scene = tmp_path / "keyed.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    code, stdout, stderr = run_in_process(scene, "--save", tmp_path / "out.blend")
    assert code == 2, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert "shape key 'Target'" in line and "has value 1" in line and "Value to 0" in line, line
    assert not (tmp_path / "out.blend").exists()


# -- (7) presets: values as Blender stores them ---------------------------------------------------------


def preset_json(name: str = "Gossamer", **values: float) -> str:
    return json.dumps({"schema": 1, "name": name, "model": "blender_cloth", "values": values})


@pytest.mark.parametrize("field", ["mass", "tension_stiffness", "air_damping"])
@pytest.mark.parametrize("value", [1e-320, 1e-39, 5e-324])
def test_values_float32_would_store_as_zero_are_rejected(field: str, value: float) -> None:
    with pytest.raises(core.PresetError, match=rf"values\.{field} = .* too small for Blender's float32"):
        core.parse_preset(preset_json(**{field: value}))


def test_zero_and_small_normal_values_still_pass() -> None:
    preset = core.parse_preset(preset_json(mass=2e-38, air_damping=0.0, tension_stiffness=1e-30))
    assert preset.values == {"mass": 2e-38, "air_damping": 0.0, "tension_stiffness": 1e-30}


def test_a_user_preset_with_mass_1e_320_does_not_reach_the_fit(scene_file: Path) -> None:
    folder = addon_presets.user_presets_dir()
    path = folder / "gossamer.json"
    path.write_text(preset_json(mass=1e-320))
    try:
        code, stdout, stderr = run_in_process(scene_file, "--preset", "Gossamer")
    finally:
        path.unlink()
    assert code == 2, (stdout, stderr)
    assert "fit Cloth iter" not in stdout
    (line,) = our_errors(stderr)
    assert "Gossamer" in line and "values.mass = 1e-320 is too small" in line, line


def test_full_width_names_are_the_built_in_preset(tmp_path: Path) -> None:
    assert core.find_preset("Ｃｏｔｔｏｎ").name == "Cotton"
    folder = addon_presets.user_presets_dir()
    before = sorted(os.listdir(folder))
    source = tmp_path / "lookalike.json"
    source.write_text(preset_json(name="Ｃｏｔｔｏｎ", mass=0.5))
    with pytest.raises(RuntimeError, match="built-in preset has that name"):
        bpy.ops.fit.preset_import(filepath=str(source))
    assert sorted(os.listdir(folder)) == before


def test_export_to_a_folder_writes_inside_it(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    assert bpy.ops.fit.preset_export(name="Denim", filepath=str(folder) + os.sep) == {"FINISHED"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared"]  # no "shared.json" beside it
    assert core.load_preset_file(folder / "denim.json").name == "Denim"
    written = core.write_preset_json(core.find_preset("Silk"), folder)  # an existing folder, no separator
    assert written == folder / "silk.json"
    shutil.rmtree(folder)


def test_start_values_blender_would_store_as_zero_are_refused(tmp_path: Path) -> None:
    scene = tiny_scene(tmp_path / "start.blend")
    bpy.data.objects["Cloth"].fit_to_target.start_values_json = '{"mass": 1e-320}'
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    code, stdout, stderr = run_in_process(scene)
    assert code == 2, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert "start value mass = 1e-320 is too small" in line, line
