"""Footage targets in the core: the reprojection residuals, their tangents and a fit."""

from __future__ import annotations

import numpy as np
import pytest

from warp_core import ClothParams, ClothSimulator, grid_mesh
from warp_core.fit import FitError, FitProblem, FitSettings, fit
from warp_core.fit.problem.files import load_problem, save_problem
from warp_core.targets import Reprojection
from warp_core.tracks.camera import Intrinsics, project
from warp_core.tracks.targets import FootageTargets, TrackBinding

FRAMES = list(range(4, 31, 2))


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """camera_to_world of a Blender camera (looking down -Z, +Y up) at ``eye`` facing ``target``."""
    back = eye - target
    back /= np.linalg.norm(back)
    right = np.cross([0.0, 0.0, 1.0], back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = right, up, back, eye
    return m


def hanging_sheet():
    mesh = grid_mesh(8, 8, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    return mesh


def footage(mesh, truth: ClothParams, noise_px: float = 0.0, seed: int = 0, huber: float = 2.0):
    """Markers of 12 surface points seen by a camera circling the sheet, from the model."""
    x = ClothSimulator(mesh, truth, precision="float64").simulate(max(FRAMES), FRAMES)
    intr = Intrinsics(width=640, height=480, focal_px=700.0, principal_px=(320.0, 240.0))
    rng = np.random.default_rng(seed)
    tris = np.array([p[:3] for p in mesh.polygons()])
    picked = rng.choice(len(tris), 12, replace=False)
    bindings = []
    for k, t in enumerate(picked):
        w = rng.dirichlet([2.0, 2.0, 2.0])
        bindings.append(TrackBinding(f"track{k}", tuple(int(v) for v in tris[t]), tuple(w)))
    cameras, frames, tracks, pixels = {}, [], [], []
    for row, f in enumerate(FRAMES):
        angle = 0.03 * f
        eye = np.array([2.5 * np.sin(angle), -2.5 * np.cos(angle), 0.3])
        cameras[f] = look_at(eye, np.array([0.0, 0.0, -0.3]))
        for k, b in enumerate(bindings):
            p = np.asarray(b.barycentric) @ x[row][list(b.vertices)]
            uv = project(p[None], cameras[f], intr)[0] + rng.normal(0.0, noise_px, 2)
            frames.append(f)
            tracks.append(k)
            pixels.append(uv)
    return FootageTargets(
        intr,
        bindings,
        cameras,
        np.array(frames),
        np.array(tracks),
        np.array(pixels),
        np.ones(len(frames)),
        huber_px=huber,
    ), x


def test_residuals_vanish_at_the_truth_and_tangents_match_differences() -> None:
    mesh = hanging_sheet()
    truth = ClothParams(tension_stiffness=30.0, bending_stiffness=1.0)
    targets, x = footage(mesh, truth)
    loss = Reprojection(targets, FRAMES, 1.0)
    assert np.abs(loss.residuals(x)).max() < 1e-6
    assert loss.rmse(x) < 1e-6 and loss.motion(mesh.vertices) > 20.0
    # tangents against a plain difference of the Huber-scaled residuals, errors past the threshold
    rng = np.random.default_rng(1)
    base = x + rng.normal(0.0, 0.01, x.shape)
    dx = rng.normal(0.0, 1.0, x.shape)
    assert np.abs(loss.marker_errors(base)).max() > 2.0 * targets.huber_px
    # the profiled residuals (each side's bindings solved again from the given ones) differ
    # like the tangent says, at two steps
    tangent = loss.residual_tangents(base, dx)
    for h in (1e-5, 1e-6):
        fd = (loss.residuals(base + h * dx) - loss.residuals(base - h * dx)) / (2 * h)
        assert np.linalg.norm(tangent - fd) <= 3e-5 * np.linalg.norm(fd)  # measured 6e-6
    # with the bindings held instead, the tangent is another one: profiling matters here
    held = Reprojection(targets, FRAMES, 1.0, profile=False).residual_tangents(base, dx)
    assert np.linalg.norm(held - tangent) > 1e-2 * np.linalg.norm(tangent)
    # Huber: 0.5 |r|^2 is quadratic below the threshold and linear beyond it
    e = np.linalg.norm(loss.marker_errors(base), axis=1)
    r = loss.residuals(base).reshape(-1, 2)
    d = targets.huber_px
    expect = np.where(e <= d, 0.5 * e**2, d * e - 0.5 * d**2)
    np.testing.assert_allclose(0.5 * np.sum(r**2, axis=1), expect, rtol=1e-9)


def test_fit_to_noisy_markers_recovers_the_values_and_reports_pixels() -> None:
    mesh = hanging_sheet()
    truth = ClothParams(tension_stiffness=30.0, bending_stiffness=1.0)
    targets, _ = footage(mesh, truth, noise_px=0.5, seed=3)
    names = ["tension_stiffness", "bending_stiffness"]
    start = truth.replace(tension_stiffness=90.0, bending_stiffness=3.0)
    problem = FitProblem(mesh, start, [], free_parameters=names, tracks=targets)
    result = fit(problem, FitSettings())
    assert result.unit == "px"
    assert result.outcome == "converged", result.outcome_reason
    assert "px" in result.outcome_reason and "mm" not in result.outcome_reason
    assert result.tolerance == pytest.approx(1.0)
    # 0.5 px per axis: about 0.7 px RMS at the truth
    assert 0.4 < result.rmse < 0.9
    assert result.params["tension_stiffness"] == pytest.approx(30.0, rel=0.03)
    summary = result.summary()
    assert summary["unit"] == "px" and summary["rmse_m"] is None and summary["rmse_px"] == result.rmse
    assert set(result.track_errors) == {b.track for b in targets.bindings}
    assert max(result.track_errors.values()) < 2.0


def test_bad_footage_targets_are_refused_by_name() -> None:
    mesh = hanging_sheet()
    targets, _ = footage(mesh, ClothParams())
    targets.cameras.pop(FRAMES[3])
    with pytest.raises(ValueError, match=f"no camera matrix at frame.*{FRAMES[3]}"):
        FitProblem(mesh, ClothParams(), [], free_parameters=["tension_stiffness"], tracks=targets).validate()
    targets, _ = footage(mesh, ClothParams())
    targets.marker_frame[0] = 0
    with pytest.raises(ValueError, match="before the simulation start frame 1"):
        FitProblem(mesh, ClothParams(), [], free_parameters=["tension_stiffness"], tracks=targets).validate()
    targets, _ = footage(mesh, ClothParams())
    problem = FitProblem(mesh, ClothParams(), [], free_parameters=["tension_stiffness"], tracks=targets)
    with pytest.raises(FitError, match="no tape gradient"):
        fit(problem, FitSettings(optimizer="adam"))


def test_a_footage_problem_survives_its_file(tmp_path) -> None:
    mesh = hanging_sheet()
    targets, x = footage(mesh, ClothParams(tension_stiffness=30.0), noise_px=0.3, seed=2)
    problem = FitProblem(mesh, ClothParams(), [], free_parameters=["tension_stiffness"], tracks=targets)
    back = load_problem(save_problem(problem, tmp_path / "footage.npz"))
    assert back.loss_kind == "tracks" and back.targets == [] and back.target_frames == FRAMES
    assert back.tracks.intrinsics == targets.intrinsics and back.tracks.bindings == targets.bindings
    for f in FRAMES:
        np.testing.assert_array_equal(back.tracks.cameras[f], targets.cameras[f])
    np.testing.assert_array_equal(back.tracks.marker_pixel, targets.marker_pixel)
    before = Reprojection(targets, FRAMES, 1.0).residuals(x)
    np.testing.assert_array_equal(Reprojection(back.tracks, FRAMES, 1.0).residuals(x), before)


def test_mistracked_markers_do_not_drag_the_values_and_are_named() -> None:
    mesh = hanging_sheet()
    truth = ClothParams(tension_stiffness=30.0, bending_stiffness=1.0)
    targets, _ = footage(mesh, truth, noise_px=0.5, seed=3)
    rng = np.random.default_rng(5)
    bad = rng.random(len(targets.marker_frame)) < 0.03  # 7 of 168 jump by ~15 px
    targets.marker_pixel[bad] += rng.normal(0.0, 15.0, (int(bad.sum()), 2))
    names = ["tension_stiffness", "bending_stiffness"]
    start = truth.replace(tension_stiffness=90.0, bending_stiffness=3.0)
    result = fit(FitProblem(mesh, start, [], free_parameters=names, tracks=targets), FitSettings())
    # Huber: measured tension -1.7 %, bending +2.9 %; least squares on the same markers: +41 %
    assert result.params["tension_stiffness"] == pytest.approx(30.0, rel=0.05)
    assert result.params["bending_stiffness"] == pytest.approx(1.0, rel=0.05)
    targets.huber_px = 1.0e6
    plain = fit(FitProblem(mesh, start, [], free_parameters=names, tracks=targets), FitSettings())
    assert plain.params["bending_stiffness"] > 1.2
    # they are not called a match, and the result says which tracks hold them
    assert result.outcome != "converged" and result.rmse > 1.0
    far = [w for w in result.warnings if "markers are more than 6 px off" in w]
    assert len(far) == 1 and "mute them" in far[0]
    worst = next(iter(result.track_errors))
    assert f"'{worst}'" in far[0]
