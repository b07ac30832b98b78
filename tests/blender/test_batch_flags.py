"""Each batch flag in a run that does what it is for, and the effect it has.

The scenes are 5 x 5 clamped sheets with one target at frame 6 from Blender's own cloth
(``batch_run.tiny_scene``), run through ``cli.main`` in this process: a fit takes about a
second. Expected numbers come from the scene's own truth, the preset file or a loss
recomputed here in numpy from the fitted values; none is copied from a run's output.

``--tolerance`` is covered by ``test_outcome_surface.py`` (a misfit becomes converged once
the tolerance is above its RMSE, and the report records the value), and ``--loss surface``
and ``--loss auto`` naming the surface loss on a target of another topology by
``test_input_checks.py``; the loss values are checked here.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import bpy
import numpy as np
import pytest
import warp as wp
from addon_scenes import (
    add_targets_from_blender,
    clamped_cloth,
    cloth_scene,
    fit_state,
    modifier_values,
    open_blend,
    simulation,
    target_positions,
)
from batch_run import TRUTH, our_errors, run_in_process, tiny_scene
from blender_ref import _PACKAGE
from test_input_checks import surface_scene

presets = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.presets")

FRAME = 6  # tiny_scene's target frame


def batch(scene: Path, tmp_path: Path, *args: Any) -> tuple[int, dict, str, str]:
    """One in-process run with a report: (exit code, report, stdout, stderr)."""
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    code, out, err = run_in_process(scene, "--report", report, *args)
    assert report.is_file(), (code, err)
    return code, json.loads(report.read_text()), out, err


def progress_iterations(stdout: str) -> list[int]:
    return [int(line.split()[3]) for line in stdout.splitlines() if line.startswith("fit ")]


def loss_setting_scene(path: Path, loss: str) -> Path:
    """``tiny_scene`` with the object's Loss setting (``VERTEX`` or ``SURFACE``)."""
    tiny_scene(path)
    bpy.data.objects["Cloth"].fit_to_target.loss = loss
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


# -- our model, replayed here, and the two losses in numpy ---------------------------------------------


def replay(blend: Path, values: dict[str, Any]) -> dict[str, Any]:
    """Our model's cloth at the target frames of ``blend``'s Cloth with the modifier's
    settings replaced by ``values`` (float64, as the fit ran), the targets, and both
    meshes' triangles (each polygon as a fan from its first corner)."""
    open_blend(blend)
    ob = bpy.data.objects["Cloth"]
    scene = bpy.context.scene
    mod = cloth_scene.find_cloth_modifier(ob)
    start = mod.point_cache.frame_start
    items = sorted(ob.fit_to_target.targets, key=lambda t: t.frame)
    frames = [int(t.frame) for t in items]
    depsgraph = bpy.context.evaluated_depsgraph_get()
    scene.frame_set(start)
    mesh = cloth_scene.export_cloth_mesh(ob, depsgraph)
    goals = cloth_scene.sample_pin_goals(ob, depsgraph, scene, list(range(start, frames[-1] + 1)))
    params = cloth_scene.export_cloth_params(mod, scene).replace(**values)
    sim = simulation.ClothSimulator(mesh, params, device="cpu", precision="float64", start_frame=start)
    targets = target_positions(ob)
    return {
        "cloth": sim.simulate(frames[-1], frames, goals),
        "targets": [targets[f] for f in frames],
        "cloth_triangles": fan(ob.data),
        "target_triangles": [fan(t.object.data) for t in items],
    }


def fan(me: bpy.types.Mesh) -> np.ndarray:
    return np.array(
        [
            (p.vertices[0], p.vertices[k], p.vertices[k + 1])
            for p in me.polygons
            for k in range(1, len(p.vertices) - 1)
        ]
    )


def squared_distances(kind: str, run: dict[str, Any]) -> list[float]:
    """Per target frame, the mean squared distance the loss ``kind`` is made of: vertex to
    vertex, or the mean of the two directions' point-to-surface means."""
    out = []
    for k, (x, t) in enumerate(zip(run["cloth"], run["targets"], strict=True)):
        if kind == "vertex":
            out.append(float(np.mean(np.sum((x - t) ** 2, axis=1))))
            continue
        to_target = surface_distances(x, t, run["target_triangles"][k])
        to_cloth = surface_distances(t, x, run["cloth_triangles"])
        out.append(0.5 * float(np.mean(to_target**2)) + 0.5 * float(np.mean(to_cloth**2)))
    return out


# How closely the report's values match the loss recomputed here, in metres of RMSE. Vertex:
# the same numbers summed in another order (measured: equal to the last bit). Surface: the
# fit finds each point's closest face with a float32 query (rounding 6e-8 m on these 1 m
# coordinates), so its distance can be a hair over the true one (measured 1.6e-11 m at the
# start, 1.1e-9 m at the fitted values, where the distances are micrometres).
AGREEMENT = {"vertex": {"rel": 1e-14, "abs": 0.0}, "surface": {"rel": 0.0, "abs": 1e-8}}


def surface_distances(points: np.ndarray, vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Each point's distance to the nearest triangle: the distance to the plane where the
    point's projection falls inside the triangle, else to the nearest of its three edges."""
    p = points[:, None, :]
    a, b, c = (vertices[triangles[:, k]][None] for k in range(3))
    normal = np.cross(b - a, c - a)
    unit = normal / np.linalg.norm(normal, axis=-1, keepdims=True)
    height = np.sum((p - a) * unit, axis=-1)
    foot = p - height[..., None] * unit
    edges = ((a, b), (b, c), (c, a))
    inside = np.logical_and.reduce(
        [np.sum(np.cross(v - u, foot - u) * normal, axis=-1) >= 0.0 for u, v in edges]
    )
    best = np.where(inside, np.abs(height), np.inf)
    for u, v in edges:
        edge = v - u
        t = np.clip(np.sum((p - u) * edge, axis=-1) / np.sum(edge * edge, axis=-1), 0.0, 1.0)
        best = np.minimum(best, np.linalg.norm(p - u - t[..., None] * edge, axis=-1))
    return best.min(axis=1)


def test_surface_distance_of_known_points() -> None:
    square = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    tris = np.array([[0, 1, 2], [0, 2, 3]])
    points = np.array([[0.3, 0.6, 0.25], [2.0, 0.5, 0.0], [-1.0, -1.0, 1.0], [0.5, 0.5, 0.0]])
    expected = [0.25, 1.0, np.sqrt(3.0), 0.0]  # above, beside an edge, off a corner, on it
    assert surface_distances(points, square, tris) == pytest.approx(expected, abs=1e-15)


# -- --object -----------------------------------------------------------------------------------------


def test_object_fits_the_named_object_only(tmp_path: Path) -> None:
    scene = tiny_scene(tmp_path / "two.blend", names=("ClothA", "ClothB"))
    names = ("ClothA", "ClothB")
    before = {n: (modifier_values(bpy.data.objects[n]), fit_state(bpy.data.objects[n])) for n in names}
    code, report, out, err = batch(scene, tmp_path, "--object", "ClothB", "--save", tmp_path / "out.blend")
    assert code == 0, err
    (entry,) = report["objects"]
    assert entry["name"] == "ClothB" and entry["outcome"] == "converged"
    # tiny_scene made the second sheet's targets with 1.5 times the first one's stiffness
    # (Blender's cloth, which made them, and this model differ slightly: measured 9e-4)
    assert entry["params"]["tension_stiffness"] == pytest.approx(1.5 * TRUTH["tension_stiffness"], rel=1e-2)
    assert {line.split()[1] for line in out.splitlines() if line.startswith("fit ")} == {"ClothB"}
    assert "ClothA" not in out
    open_blend(tmp_path / "out.blend")
    a, b = (bpy.data.objects[n] for n in names)
    assert (modifier_values(a), fit_state(a)) == before["ClothA"]  # not fitted, not touched
    assert json.loads(fit_state(b)[0])["params"] == entry["params"]
    for name, value in entry["params"].items():
        assert modifier_values(b)[name] == pytest.approx(value, rel=1e-6), name  # float32 in Blender
        assert value != before["ClothB"][0][name], name


# -- --max-iters, --time-budget, --device on one sheet --------------------------------------------------


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_scene(tmp_path_factory.mktemp("flags") / "sheet.blend")


@pytest.fixture(scope="module")
def unlimited(scene: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    code, report, _, err = batch(scene, tmp_path_factory.mktemp("unlimited"))
    assert code == 0, err
    return report["objects"][0]


def test_max_iters_cuts_the_same_fit_short(scene: Path, unlimited: dict, tmp_path: Path) -> None:
    steps = unlimited["iterations"]
    assert steps >= 2 and unlimited["stop_reason"] != "max_iterations", unlimited
    limit = steps - 1
    code, report, out, err = batch(scene, tmp_path, "--max-iters", limit)
    (entry,) = report["objects"]
    assert entry["iterations"] == limit and entry["stop_reason"] == "max_iterations"
    assert progress_iterations(out) == list(range(limit + 1))
    # the unlimited fit's first steps, to the last bit: the limit only stops it
    assert entry["loss_history"] == unlimited["loss_history"][: limit + 1]
    matched = entry["rmse_m"] <= entry["tolerance_m"]
    assert entry["outcome"] == ("converged" if matched else "stalled")
    assert code == (0 if matched else 4), err


def test_time_budget_spent_before_the_first_step(scene: Path, tmp_path: Path) -> None:
    # the budget is checked before every step; the start point's simulation and
    # sensitivities alone take longer than a nanosecond, so no step is ever taken
    code, report, out, err = batch(scene, tmp_path, "--time-budget", "1e-9")
    (entry,) = report["objects"]
    assert code == 4, err
    assert entry["stop_reason"] == "time_budget" and entry["outcome"] == "stalled"
    assert "stopped by the time budget" in entry["outcome_reason"]
    assert entry["iterations"] == 0 and progress_iterations(out) == [0]
    assert our_errors(err)[-1].startswith("fit-to-target: not matched to the targets: Cloth")
    open_blend(scene)
    start = modifier_values(bpy.data.objects["Cloth"])
    assert entry["params"] == entry["initial_params"] == {k: start[k] for k in entry["params"]}


def test_device_cpu_where_the_default_would_be_a_gpu(
    scene: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as on a machine with a GPU: the object's setting (Auto) would choose cuda:0
    count = wp.get_cuda_device_count
    monkeypatch.setattr(wp, "get_cuda_device_count", lambda: max(1, count()))
    code, report, _, err = batch(scene, tmp_path, "--device", "cpu", "--quiet")
    assert code == 0, err
    assert report["device"] == "cpu" and report["objects"][0]["device"] == "cpu"


# -- --preset ------------------------------------------------------------------------------------------


def test_preset_values_are_the_start_values(tmp_path: Path) -> None:
    denim = presets.find_preset("Denim")
    # targets of a denim cloth softened to tension = compression 30: only the preset's mass,
    # quality, shear, bending and damping let fitting tension alone match them
    truth = {**denim.values, "tension_stiffness": 30.0, "compression_stiffness": 30.0}
    bpy.context.scene.frame_end = FRAME
    ob = clamped_cloth(n=5, frame_end=FRAME)
    add_targets_from_blender(ob, truth, [FRAME])
    scene = tmp_path / "denim.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    args = ("--preset", "Denim", "--fit", "tension_stiffness", "--save", tmp_path / "out.blend")
    code, report, _, err = batch(scene, tmp_path, *args)
    assert code == 0, err
    (entry,) = report["objects"]
    assert entry["start_values"] == denim.values
    tension = denim.values["tension_stiffness"]
    assert entry["initial_params"] == {"tension_stiffness": tension, "compression_stiffness": tension}
    assert entry["params"]["tension_stiffness"] == pytest.approx(30.0, rel=3e-4)  # measured 3e-5
    # the start's error is that of every preset value, not only the fitted one
    start = replay(scene, dict(denim.values))
    expected = np.sqrt(np.mean(squared_distances("vertex", start)))
    assert entry["initial_rmse_m"] == pytest.approx(expected, **AGREEMENT["vertex"])
    open_blend(tmp_path / "out.blend")
    values = modifier_values(bpy.data.objects["Cloth"])
    for name, value in {**denim.values, **entry["params"]}.items():
        assert values[name] == pytest.approx(value, rel=1e-6), name


# -- --loss: the report names it, and its values are the loss recomputed here ----------------------------


@pytest.mark.parametrize("loss", ["vertex", "auto", "surface"])
def test_loss_named_and_recomputed(tmp_path: Path, loss: str) -> None:
    if loss == "surface":
        scene = surface_scene(tmp_path / "scan.blend")  # a target of another topology; setting: vertex
    else:
        scene = loss_setting_scene(tmp_path / "sheet.blend", "SURFACE")  # same topology
    kind = "surface" if loss == "surface" else "vertex"  # auto: vertex, every target has the cloth's count
    code, report, _, err = batch(scene, tmp_path, "--loss", loss, "--quiet")
    assert code == 0, err
    (entry,) = report["objects"]
    assert entry["loss"] == kind
    # loss = 0.5 * points * RMSE^2, the points being vertices x frames (vertex) or frames (surface)
    points_per_frame = len(bpy.data.objects["Cloth"].data.vertices) if kind == "vertex" else 1
    for values, rmse, value in (
        (entry["initial_params"], entry["initial_rmse_m"], entry["initial_loss"]),
        (entry["params"], entry["rmse_m"], entry["final_loss"]),
    ):
        per_frame = squared_distances(kind, replay(scene, values))
        expected = float(np.sqrt(np.mean(per_frame)))
        assert rmse == pytest.approx(expected, **AGREEMENT[kind])
        as_rmse = np.sqrt(2.0 * value / (points_per_frame * len(per_frame)))
        assert as_rmse == pytest.approx(expected, **AGREEMENT[kind])
