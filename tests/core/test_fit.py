"""Fit engine: parameter recovery, identifiability, divergence, surface targets, problem files."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from side_by_side import jacobians_by_workers

from warp_core import ClothMesh, ClothParams, ClothSimulator, grid_mesh
from warp_core.fit import FitError, FitProblem, FitSettings, Target, fit, limit_cpu_threads
from warp_core.fit.objective.rollout_pool import cpu_cores
from warp_core.fit.problem.files import load_problem, save_problem

REPO = Path(__file__).resolve().parents[2]


def clamped_sheet(n: int = 10) -> ClothMesh:
    """A horizontal sheet held by two rows: a cantilever, where bending and tension show."""
    mesh = grid_mesh(n, n, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    mesh.pin_weights = (y >= np.unique(y)[-2] - 1e-9).astype(float)
    return mesh


def corner_drape(n: int = 12) -> ClothMesh:
    mesh = grid_mesh(n, n, 1.0, 1.0)
    v = mesh.vertices
    corners = (np.abs(np.abs(v[:, 0]) - 0.5) < 1e-9) & (np.abs(np.abs(v[:, 1]) - 0.5) < 1e-9)
    mesh.pin_weights = corners.astype(float)
    return mesh


def synthetic_problem(
    mesh: ClothMesh, truth: ClothParams, names: list[str], frames: list[int], factor: float = 3.0
) -> FitProblem:
    targets = ClothSimulator(mesh, truth, precision="float64").simulate(max(frames), frames)
    start = truth.replace(**{n: getattr(truth, n) * factor for n in names})
    return FitProblem(
        mesh, start, [Target(f, targets[k]) for k, f in enumerate(frames)], free_parameters=names
    )


@pytest.mark.parametrize(
    ("scene", "truth", "names", "frames"),
    [
        (
            "clamped",
            dict(tension_stiffness=40.0, bending_stiffness=2.0),
            ["tension_stiffness", "bending_stiffness"],
            [10, 25, 40],
        ),
        (
            "drape",
            dict(bending_stiffness=1.5, air_damping=3.0),
            ["bending_stiffness", "air_damping"],
            [8, 16, 30],
        ),
    ],
)
def test_recovers_known_parameters_from_three_times_off(scene, truth, names, frames) -> None:
    mesh = clamped_sheet() if scene == "clamped" else corner_drape()
    truth_params = ClothParams(**truth)
    problem = synthetic_problem(mesh, truth_params, names, frames)
    seen: list[int] = []
    result = fit(problem, FitSettings(), progress=lambda k, loss, v: seen.append(k))
    for name in names:
        assert result.params[name] == pytest.approx(truth[name], rel=0.02), name
        assert result.initial_params[name] == pytest.approx(3 * truth[name])
    assert result.rmse < 1e-4
    assert result.iterations <= 30
    # matched within min(1 mm, 1 % of the motion); the optimizer stops at the 1 micrometre
    # threshold or where the trust region collapses just above it (micrometre-scale chaos)
    assert result.outcome == "converged", result.outcome_reason
    assert result.stop_reason in ("converged_loss", "no_progress")
    assert result.tolerance == pytest.approx(min(1e-3, 1e-3 * result.motion)) and result.motion > 0.05
    assert result.rmse_relative == pytest.approx(result.rmse / result.motion)
    assert "matched" in result.outcome_reason and result.undetermined == []
    assert not result.search["global_phase"]  # an easy fit never needs the global phase
    assert seen[0] == 0 and len(seen) == result.iterations + 1
    assert result.n_forward > result.iterations
    assert all(math.isfinite(v) for v in result.loss_history)
    assert result.final_loss < 1e-6 * result.initial_loss
    assert set(result.per_vertex_error) == set(frames)
    assert result.max_error >= result.rmse
    assert result.warnings == []
    # the truth inside every reported matched range; the drape pins bending only to about 40 %
    for e in result.identifiability:
        low, high = e["matched_range"]
        assert low * result.params[e["name"]] <= truth[e["name"]] <= high * result.params[e["name"]]
    loose = {e["name"] for e in result.identifiability if e["matched_range"][1] > 1.1}
    assert loose == (set() if scene == "clamped" else {"bending_stiffness"})


def test_non_identifiable_parameter_is_reported() -> None:
    """A sheet swinging down from one pinned edge moves like a pendulum: in its first frames
    doubling tension changes it by < 0.1 mm, while air damping shows (~1 mm)."""
    mesh = grid_mesh(8, 8, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    truth = ClothParams(tension_stiffness=15.0, air_damping=2.0)
    frames = [2, 3]
    targets = ClothSimulator(mesh, truth, precision="float64").simulate(3, frames)
    start = truth.replace(tension_stiffness=45.0, air_damping=6.0)
    problem = FitProblem(
        mesh,
        start,
        [Target(f, targets[k]) for k, f in enumerate(frames)],
        free_parameters=["tension_stiffness", "air_damping"],
    )
    result = fit(problem, FitSettings(max_iterations=15))
    entry = {e["name"]: e for e in result.identifiability}
    assert not entry["tension_stiffness"]["determined"]
    assert any(w.startswith("tension_stiffness") and "does not determine" in w for w in result.warnings)
    assert entry["air_damping"]["determined"]
    assert result.params["air_damping"] == pytest.approx(2.0, rel=0.02)
    assert 0.0 < result.params["tension_stiffness"] <= 10000.0
    assert all(math.isfinite(v) for v in result.params.values())


def test_diverging_start_recovers_or_fails_clearly() -> None:
    mesh = clamped_sheet(8)
    truth = ClothParams(bending_stiffness=2.0)
    frames = [8, 16, 24]
    targets = ClothSimulator(mesh, truth, precision="float64").simulate(24, frames)
    start = truth.replace(bending_stiffness=10000.0)  # explicit bending this stiff tears the sheet apart
    problem = FitProblem(
        mesh,
        start,
        [Target(f, targets[k]) for k, f in enumerate(frames)],
        free_parameters=["bending_stiffness"],
    )
    failed = fit(problem, FitSettings(recover_from_divergence=False))
    assert failed.outcome == "failed" and "diverge" in failed.outcome_reason
    assert failed.params == {"bending_stiffness": 10000.0}  # the start values, unchanged
    assert math.isnan(failed.rmse) and failed.initial_rmse is None and failed.iterations == 0
    assert failed.summary()["outcome"] == "failed"
    result = fit(problem, FitSettings())
    assert result.outcome == "converged"
    assert result.initial_rmse is None
    assert any("diverged at the start values bending_stiffness=10000" in w for w in result.warnings)
    assert result.params["bending_stiffness"] == pytest.approx(2.0, rel=0.02)
    assert result.rmse < 1e-4
    assert all(math.isfinite(v) for v in result.loss_history)


def _subdivide(vertices: np.ndarray, polygons: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each quad into four, new vertices on the bilinear surface: another topology, same shape."""
    points = [vertices]
    tris = []
    index = len(vertices)
    for q in polygons:
        a, b, c, d = vertices[q]
        extra = np.array([(a + b) / 2, (b + c) / 2, (c + d) / 2, (d + a) / 2, (a + b + c + d) / 4])
        points.append(extra)
        ab, bc, cd, da, mid = range(index, index + 5)
        index += 5
        for quad in ((q[0], ab, mid, da), (ab, q[1], bc, mid), (mid, bc, q[2], cd), (da, mid, cd, q[3])):
            tris += [(quad[0], quad[1], quad[2]), (quad[0], quad[2], quad[3])]
    return np.concatenate(points), np.array(tris, dtype=np.int32)


@pytest.mark.parametrize("loss", ["vertex", "surface"])
def test_same_and_remeshed_targets_fit_clamped_sheet(loss: str) -> None:
    mesh = clamped_sheet(8)
    truth = ClothParams(tension_stiffness=40.0, bending_stiffness=2.0)
    frames = [10, 25]
    true_positions = ClothSimulator(mesh, truth, precision="float64").simulate(25, frames)
    targets = []
    for k, f in enumerate(frames):
        if loss == "vertex":
            targets.append(Target(f, true_positions[k]))
        else:
            vertices, triangles = _subdivide(true_positions[k], mesh.polygons())
            targets.append(Target(f, vertices, triangles=triangles))
    start = truth.replace(tension_stiffness=15.0, bending_stiffness=0.6)
    problem = FitProblem(
        mesh, start, targets, free_parameters=["tension_stiffness", "bending_stiffness"], loss=loss
    )
    assert problem.loss_kind == loss
    result = fit(problem, FitSettings(max_iterations=30))
    fitted = ClothSimulator(mesh, result.model_settings, precision="float64").simulate(25, frames)
    true_rmse = float(np.sqrt(np.mean(np.sum((fitted - true_positions) ** 2, axis=-1))))
    assert true_rmse <= 2e-3, true_rmse
    assert result.rmse <= 2e-3


def test_cancel_returns_best_so_far() -> None:
    problem = synthetic_problem(
        clamped_sheet(8),
        ClothParams(tension_stiffness=40.0, bending_stiffness=2.0),
        ["tension_stiffness", "bending_stiffness"],
        [10, 20],
    )
    stop = threading.Event()

    def progress(k: int, loss: float, values: dict) -> None:
        if k >= 1:
            stop.set()

    result = fit(problem, FitSettings(), progress=progress, cancel=stop)
    assert result.cancelled and result.stop_reason == "cancelled"
    assert result.iterations == 1
    assert result.final_loss < result.initial_loss
    assert all(math.isfinite(v) for v in result.params.values())


def test_bad_problems_raise_clear_errors() -> None:
    mesh = clamped_sheet(6)
    target = [Target(10, mesh.vertices)]
    with pytest.raises(FitError, match="no targets"):
        fit(FitProblem(mesh, ClothParams(), [], free_parameters=["tension_stiffness"]))
    with pytest.raises(FitError, match="unknown parameter"):
        fit(FitProblem(mesh, ClothParams(), target, free_parameters=["stiffness"]))
    with pytest.raises(FitError, match="36"):
        fit(
            FitProblem(
                mesh,
                ClothParams(),
                [Target(10, mesh.vertices[:-1])],
                free_parameters=["tension_stiffness"],
                loss="vertex",
            )
        )
    with pytest.raises(FitError, match="start value"):
        fit(
            FitProblem(
                mesh, ClothParams(bending_stiffness=0.0), target, free_parameters=["bending_stiffness"]
            )
        )
    with pytest.raises(FitError, match="frame 1"):
        fit(
            FitProblem(mesh, ClothParams(), [Target(1, mesh.vertices)], free_parameters=["tension_stiffness"])
        )


def test_problem_file_and_command_line(tmp_path: Path) -> None:
    problem = synthetic_problem(
        clamped_sheet(8),
        ClothParams(tension_stiffness=40.0, bending_stiffness=2.0),
        ["tension_stiffness", "bending_stiffness"],
        [10, 20],
    )
    path = save_problem(problem, tmp_path / "clamped.npz")
    loaded = load_problem(path)
    np.testing.assert_array_equal(loaded.mesh.vertices, problem.mesh.vertices)
    np.testing.assert_array_equal(loaded.targets[1].positions, problem.targets[1].positions)
    assert (
        loaded.model_settings == problem.model_settings and loaded.free_parameters == problem.free_parameters
    )
    assert loaded.model == "blender_cloth"
    # a file from before problems named their model reads as a blender_cloth problem
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(arrays["meta"].tobytes().decode("utf-8"))
    del meta["model"]
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    np.savez_compressed(tmp_path / "old.npz", **arrays)
    old = load_problem(tmp_path / "old.npz")
    assert old.model == "blender_cloth" and old.model_settings == problem.model_settings
    out = tmp_path / "result.json"
    run = subprocess.run(
        [sys.executable, "-m", "warp_core", "fit", str(path), "--out", str(out), "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert report["params"]["tension_stiffness"] == pytest.approx(40.0, rel=0.02)
    assert report["rmse_m"] < 1e-4
    assert "RMSE" in run.stdout and "tension_stiffness" in run.stdout  # the before -> after table
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    run = subprocess.run(
        [sys.executable, "-m", "warp_core", "fit", str(bad), "--out", str(tmp_path / "x.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "not a problem file" in run.stderr
    assert not (tmp_path / "x.json").exists()


def test_jacobian_rollouts_side_by_side_equal_one_after_another(monkeypatch) -> None:
    """The tangent rollouts of a Jacobian run on two simulators at once on the CPU: the
    columns are the ones the objective's own simulator gives alone, bit for bit, and every
    rollout is counted."""
    truth = ClothParams(tension_stiffness=40.0, bending_stiffness=2.0, air_damping=2.0)
    p = synthetic_problem(
        clamped_sheet(8), truth, ["tension_stiffness", "bending_stiffness", "air_damping"], [6, 12]
    )
    found = jacobians_by_workers(monkeypatch, p, FitSettings(), {"air_damping": 1.7})
    for workers in (1, 2):
        assert found[workers][2] == 2 + 2 * 2 * 3  # two base points, six tangent rollouts each
    for a, b in zip(found[1][:2], found[2][:2], strict=True):
        assert np.array_equal(a, b)
        assert np.abs(a).max() > 0.0


def test_global_phase_start_points_side_by_side_equal_one_after_another(monkeypatch) -> None:
    """The global phase simulates its start points two at a time on the CPU: the fit ends on
    the same values, RMSE, loss history and simulation count as one point after another."""
    from warp_core.fit.objective import tangents

    truth = ClothParams(tension_stiffness=40.0, bending_stiffness=2.0, air_damping=3.0)
    p = synthetic_problem(clamped_sheet(8), truth, ["tension_stiffness", "bending_stiffness"], [6, 12])
    p.model_settings = p.model_settings.replace(air_damping=1.0)  # wrong and not fitted: no values match
    runs = {}
    for workers in (1, 2):
        monkeypatch.setattr(tangents, "cpu_workers", lambda *_args, w=workers: w)
        result = fit(p, FitSettings())
        runs[workers] = result
        assert result.search["global_phase"]
        assert result.search["candidates"] == 2 * FitSettings().global_points_per_parameter
    one, two = runs[1], runs[2]
    assert one.params == two.params and one.rmse == two.rmse
    assert one.loss_history == two.loss_history and one.n_forward == two.n_forward
    assert one.outcome == two.outcome == "misfit"


def test_the_cores_simulations_share_follow_the_thread_limit() -> None:
    """What the Jacobians' simulators and the drape rig's starts run side by side on: the
    cores this process may use, no more than a farm task's ``--threads``."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        assert cpu_cores() == allowed
        limit_cpu_threads(1)
        assert cpu_cores() == 1
        limit_cpu_threads(allowed + 5)
        assert cpu_cores() == allowed
    finally:
        limit_cpu_threads(None)
    assert cpu_cores() == allowed


def test_the_start_and_the_last_point_are_not_simulated_again() -> None:
    """The objective keeps the first point it simulated and the last: a fit's verdict reads
    the start's RMSE after the search has left it without a rollout, with the same numbers;
    any other point is simulated again."""
    from warp_core.fit.objective.objective import FitObjective
    from warp_core.fit.problem.spec import parameter_spec

    truth = ClothParams(tension_stiffness=40.0, bending_stiffness=2.0)
    p = synthetic_problem(clamped_sheet(6), truth, ["tension_stiffness", "bending_stiffness"], [4, 8])
    spec = parameter_spec(p)
    objective = FitObjective(p, FitSettings(), spec.names, spec=spec)
    start = spec.initial_values()
    others = [{**start, "tension_stiffness": v} for v in (60.0, 50.0)]
    first = objective.rmse(start)
    for values in others:
        objective.rmse(values)
    count = objective.n_forward
    assert count == 3
    assert objective.rmse(start) == first and objective.n_forward == count  # kept
    assert objective.rmse(others[1]) > 0.0 and objective.n_forward == count  # the last, kept
    objective.rmse(others[0])  # neither: simulated again
    assert objective.n_forward == count + 1
    fresh = FitObjective(p, FitSettings(), spec.names, spec=spec)
    assert fresh.rmse(start) == first  # what a new rollout gives
