"""The batch command's weight maps (``--fit-map``, ``--map-regions``, ``--map-smoothness``):
a region map found from Blender's own cloth, written into its vertex group, saved, replayed
by Blender and applied from the report to the original file; and every refusal.

The scene: an 8 x 8 sheet of 1 m hanging from its top row, painted in two regions, Left and
Right (its halves). Blender's cloth made the targets with a hidden structural map: tension and
compression 5 with a Max of 40, a group of weight 0 on Left and 1 on Right, so Left has 5 and
Right 40 (a spring across the middle the mean of the two). The file keeps a uniform 15 and no
structural group: the fit must find both values and paint the group back.
"""

from __future__ import annotations

import json
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import add_target_meshes, addon_module, target_positions
from batch_run import our_errors, run_in_process
from blender_ref import add_cloth_group, grid_mesh, make_cloth_object, pin_row_weights, run_blender_cloth
from soft_body_scenes import soft_object

args_module = addon_module("cli.args")
objects_module = addon_module("cli.objects")
request_module = addon_module("request")
map_groups = addon_module("scene.map_groups")
cloth_scene = addon_module("models.blender_cloth.scene_model")

FRAMES = [8, 16, 24]
TRUTH = {"Left": 5.0, "Right": 40.0}
START = 15.0
STRUCTURAL = ("tension_stiffness", "compression_stiffness")
STRUCTURAL_MAX = ("tension_stiffness_max", "compression_stiffness_max")
NEW_GROUP = cloth_scene.SCENE_MODEL.map_targets["structural"].new_group
FIT_ARGS = ("--fit-map", "structural", "--map-regions", "Left,Right")


def halves(ob: bpy.types.Object) -> tuple[np.ndarray, np.ndarray]:
    """(Left, Right): 1 on the vertices left (right) of the middle, 0 elsewhere."""
    x = np.array([v.co.x for v in ob.data.vertices])
    left = (x < 0.0).astype(float)
    return left, 1.0 - left


def paint(ob: bpy.types.Object, name: str, weights: np.ndarray) -> None:
    group = ob.vertex_groups.new(name=name)
    for index in np.flatnonzero(weights > 0.0):
        group.add([int(index)], float(weights[index]), "REPLACE")


def hidden_map_scene(path: Path) -> Path:
    """The module's scene (see the docstring), saved to ``path``."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    bpy.context.scene.frame_end = FRAMES[-1]
    mesh = grid_mesh(8, 8, 1.0, 1.0)
    ob = make_cloth_object(mesh, pin_weights=pin_row_weights(mesh), frame_end=FRAMES[-1])
    ob.location = (0.0, 0.0, 1.0)
    left, right = halves(ob)
    paint(ob, "Left", left)
    paint(ob, "Right", right)
    settings = ob.modifiers["Cloth"].settings
    for name in STRUCTURAL:
        setattr(settings, name, TRUTH["Left"])
    for name in STRUCTURAL_MAX:
        setattr(settings, name, TRUTH["Right"])
    add_cloth_group(ob, "Hidden", right, "vertex_group_structural_stiffness")
    trajectory = run_blender_cloth(ob, FRAMES[-1])
    bpy.context.scene.frame_set(1)
    add_target_meshes(ob, trajectory, FRAMES, 1)
    for name in (*STRUCTURAL, *STRUCTURAL_MAX):
        setattr(settings, name, START)
    settings.vertex_group_structural_stiffness = ""
    ob.vertex_groups.remove(ob.vertex_groups["Hidden"])
    path.parent.mkdir(parents=True, exist_ok=True)
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def group_weights(ob: bpy.types.Object, name: str) -> np.ndarray:
    """Each vertex's weight in group ``name`` (every vertex must be a member)."""
    members = map_groups.group_weights(ob, ob.vertex_groups[name])
    assert sorted(members) == list(range(len(ob.data.vertices)))
    return np.array([members[i] for i in range(len(members))])


def structural_values(ob: bpy.types.Object) -> dict[str, float]:
    settings = ob.modifiers["Cloth"].settings
    return {name: float(getattr(settings, name)) for name in (*STRUCTURAL, *STRUCTURAL_MAX)}


def check_written(path: Path) -> tuple[np.ndarray, dict[str, float]]:
    """The fitted .blend at ``path``: the new group holds the halves, the modifier names it and
    spans the regions' values. Its weights and structural values."""
    bpy.ops.wm.open_mainfile(filepath=str(path))
    ob = bpy.data.objects["Cloth"]
    assert ob.modifiers["Cloth"].settings.vertex_group_structural_stiffness == NEW_GROUP
    weights = group_weights(ob, NEW_GROUP)
    left, right = halves(ob)
    np.testing.assert_allclose(weights, right, atol=0.02)
    values = structural_values(ob)
    for name in STRUCTURAL:
        assert values[name] == pytest.approx(TRUTH["Left"], rel=0.05), values
    for name in STRUCTURAL_MAX:
        assert values[name] == pytest.approx(TRUTH["Right"], rel=0.05), values
    return weights, values


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One run of ``--fit-map structural --map-regions Left,Right`` on the module's scene."""
    folder = tmp_path_factory.mktemp("maps")
    scene = hidden_map_scene(folder / "hidden.blend")
    code, out, err = run_in_process(
        scene, *FIT_ARGS, "--save", folder / "out.blend", "--report", folder / "r.json", "--quiet"
    )
    report = json.loads((folder / "r.json").read_text())
    return {"folder": folder, "scene": scene, "code": code, "out": out, "err": err, "report": report}


def test_a_region_map_is_found_written_and_replayed_by_blender(fitted: dict) -> None:
    assert fitted["code"] == 0, fitted["err"]
    (entry,) = fitted["report"]["objects"]
    assert entry["outcome"] == "converged" and entry["fit"] == [], entry
    structural = entry["maps"]["structural"]
    assert structural["mode"] == "regions" and structural["group"] == NEW_GROUP
    for name, value in TRUTH.items():
        assert structural["regions"][name]["determined"], structural
        assert structural["regions"][name]["value"] == pytest.approx(value, rel=0.05), structural
        assert entry["params"][f"structural:{name}"] == structural["regions"][name]["value"]
    # one stdout line per map: the regions' values and the group written
    values = ", ".join(f"{name} {structural['regions'][name]['value']:.3g}" for name in TRUTH)
    assert f"  structural map (regions): {values} -> group '{NEW_GROUP}'" in fitted["out"].splitlines()

    check_written(fitted["folder"] / "out.blend")
    ob = bpy.data.objects["Cloth"]
    targets = target_positions(ob)
    replay = run_blender_cloth(ob, FRAMES[-1])
    errors = np.concatenate([np.linalg.norm(replay[f - 1] - targets[f], axis=1) for f in FRAMES])
    assert float(np.sqrt(np.mean(errors**2))) < 1e-3


def test_apply_writes_the_reports_map_into_the_original_file(fitted: dict) -> None:
    folder = fitted["folder"]
    applied = folder / "applied.blend"
    code, out, err = run_in_process(fitted["scene"], "--apply", folder / "r.json", "--save", applied)
    assert code == 0, err
    assert f"-> group '{NEW_GROUP}'" in out
    weights, values = check_written(applied)
    fitted_weights, fitted_values = check_written(folder / "out.blend")
    np.testing.assert_array_equal(weights, fitted_weights)
    assert values == fitted_values


def test_a_missing_region_group_is_the_objects_input_error(fitted: dict, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    base = (fitted["scene"], "--fit-map", "structural", "--map-regions", "Left,Middle", "--report", report)
    code, _, err = run_in_process(*base)
    (line,) = our_errors(err)
    assert code == 2 and "'Cloth' has no vertex group 'Middle' for a region of the structural map" in line
    # with --keep-going it is the object's failure in the report, as other input errors are
    code, _, err = run_in_process(*base, "--keep-going")
    (entry,) = json.loads(report.read_text())["objects"]
    assert code == 3 and entry["status"] == "failed" and "no vertex group 'Middle'" in entry["error"]


REFUSALS = {
    "unknown kind": (["--fit-map", "stretch"], "--fit-map stretch: unknown map kind 'stretch'"),
    "kind twice": (["--fit-map", "structural", "--fit-map", "structural:Mine"], "structural is given twice"),
    "shrink": (["--fit-map", "shrink"], "the shrink group changes the cloth's rest lengths"),
    "regions alone": (["--map-regions", "Left,Right"], "--map-regions describes the maps of --fit-map"),
    "smoothness alone": (["--map-smoothness", "0.1"], "--map-smoothness describes the maps of --fit-map"),
    "smoothness with regions": ([*FIT_ARGS, "--map-smoothness", "0.1"], "leave out one of them"),
    "negative smoothness": (["--fit-map", "shear", "--map-smoothness", "-1"], "of at least 0"),
    "empty region": (["--fit-map", "structural", "--map-regions", "Left,,Right"], "an empty region name"),
    "region twice": (["--fit-map", "structural", "--map-regions", "Left,Left"], "Left listed twice"),
    "empty group": (["--fit-map", "structural:"], "no group after ':'"),
    "group is a region": (["--fit-map", "structural:Left", "--map-regions", "Left,Right"], "is a region"),
    "two free maps": (["--fit-map", "structural", "--fit-map", "shear"], "a free map is fitted alone"),
    "fit sets a map value": (
        [*FIT_ARGS, "--fit", "tension_stiffness_max"],
        "--fit tension_stiffness_max: the fitted map sets it",
    ),
    "shared": ([*FIT_ARGS, "--shared"], "--fit-map fits each object's own map: leave out --shared"),
    "apply": (["--apply", "{report}", *FIT_ARGS], "leave out --fit-map, --map-regions"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_exit_2_with_one_line(fitted: dict, tmp_path: Path, case: str) -> None:
    given, expected = REFUSALS[case]
    given = [str(fitted["folder"] / "r.json") if a == "{report}" else a for a in given]
    code, out, err = run_in_process(fitted["scene"], *given, "--save", tmp_path / "out.blend")
    (line,) = our_errors(err)
    assert code == 2 and expected in line, line
    assert not (tmp_path / "out.blend").exists() and not out


def test_a_soft_body_fits_no_cloth_map(tmp_path: Path) -> None:
    soft_object(cells=2, frame_end=8)
    scene = tmp_path / "jelly.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    code, _, err = run_in_process(scene, "--object", "Jelly", "--fit-map", "structural")
    (line,) = our_errors(err)
    expected = "'Jelly' is fitted with the soft_body model, which fits only stiffness, damping"
    assert code == 2 and expected in line


def test_the_requests_the_arguments_make(fitted: dict) -> None:
    bpy.ops.wm.open_mainfile(filepath=str(fitted["scene"]))
    ob = bpy.data.objects["Cloth"]
    MapRequest = request_module.MapRequest

    def request(*argv: str):
        args = args_module.build_parser().parse_args([str(fitted["scene"]), *argv])
        chosen = args_module.parse_fit(args.fit) if args.fit else None
        maps = objects_module.map_requests(args, chosen)
        return maps, objects_module.request_for(ob, args, chosen, [], None, None, None, maps)

    # a free map, its group and prior; maps alone are the fit
    maps, made = request("--fit-map", "bending:Soft", "--map-smoothness", "0.01")
    assert maps == made.maps == [MapRequest("bending", "Soft", [], 0.01)]
    assert (made.fit, made.ties) == ([], {})
    maps, made = request("--fit-map", "shear", "--map-smoothness", "0")
    assert made.maps == [MapRequest("shear", "", [], 0.0)]
    maps, made = request("--fit-map", "shear")
    assert made.maps == [MapRequest("shear", "", [], None)]  # None: the fit's default prior
    # regions apply to every map; --fit adds parameters, and compression follows the
    # structural map's range rather than its tie to tension
    maps, made = request(
        "--fit-map", "structural", "--fit-map", "bending:B", "--map-regions", "Left, Right", "--fit",
        "tension_stiffness,mass",
    )  # fmt: skip
    assert made.maps == [
        MapRequest("structural", "", ["Left", "Right"]),
        MapRequest("bending", "B", ["Left", "Right"]),
    ]
    assert made.fit == ["tension_stiffness", "mass"] and "compression_stiffness" not in made.ties
    # without maps, the object's own choice is untouched
    _, made = request("--fit", "tension_stiffness")
    assert made.maps == [] and made.ties == {"compression_stiffness": "tension_stiffness"}
