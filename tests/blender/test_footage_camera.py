"""Footage targets against Blender itself: ``warp_core.tracks.camera`` projects world points to
the pixels Blender's camera and motion tracker expect.

* Without distortion, ``project`` is ``world_to_camera_view`` in pixels (shifted lens too).
* With distortion, markers made by ``project`` are solved by Blender's own camera solver (lens
  fixed) to float32 round-off, for every distortion model, and a plausible mistake in the
  formula (tangential terms swapped, pixel aspect ignored, principal point from the top) is
  not: the solve error is what tells a right lens model from a wrong one.
* A solve of static tracks (moving weight-0 tracks beside them), oriented onto the known world
  through the Camera Solver constraint, gives back the true camera at every frame; the clip
  starts at a later scene frame with a frame offset, so the frame mapping is checked too.
"""

from __future__ import annotations

import dataclasses
import math

import bpy
import mathutils
import numpy as np
import pytest
from bpy_extras.object_utils import world_to_camera_view
from footage_scenes import (
    add_camera,
    add_tracks,
    camera_matrix,
    clip_intrinsics,
    make_clip,
    orient_solved_camera,
    set_clip_distortion,
    solve_camera,
)

from warp_core.tracks.camera import Intrinsics, depth, project, scene_to_clip_frame, undistort

WIDTH, HEIGHT, FRAMES = 640, 480, 30
LENS_MM, SENSOR_MM = 35.0, 36.0
KEYFRAMES = (1, 15)  # clip frames the solver starts from
# markers are float32 in 0..1: 640 px * 2**-24 ~ 4e-5 px; a right lens model solves to ~1e-5 px
MATCH_PX = 1e-3
# world_to_camera_view computes in mathutils' float32: ~1e-4 px at 640 px is its round-off
W2CV_PX = 2e-4


def camera_keys(first: int) -> list[tuple[int, tuple, tuple]]:
    """A dolly with a pan and a tilt over FRAMES frames, looking along +y at the point cloud."""
    keys = []
    for frame in (first, first + FRAMES - 1):
        s = (frame - first) / (FRAMES - 1)
        location = (-1.5 + 3.0 * s, -8.0 + 1.0 * s, 0.3 - 0.6 * s)
        rotation = (math.radians(90.0 + 4.0 * s), 0.0, math.radians(8.0 - 16.0 * s))
        keys.append((frame, location, rotation))
    return keys


def static_points(rng: np.random.Generator, count: int) -> np.ndarray:
    return rng.uniform([-3.0, -2.0, -2.2], [3.0, 2.0, 2.2], (count, 3))


def footage_scene(tmp_path, frame_start: int = 1, frame_offset: int = 0):
    scene = bpy.context.scene
    clip = make_clip(
        scene, WIDTH, HEIGHT, FRAMES, tmp_path / "frames", LENS_MM, SENSOR_MM, frame_start, frame_offset
    )
    camera = add_camera(scene, camera_keys(frame_start), LENS_MM, SENSOR_MM)
    return scene, clip, camera


def solve_static(tmp_path, model: str, coefficients: tuple, principal=None, pixel_aspect=1.0, mistake=None):
    """Markers of 30 static points made by ``project`` (optionally with a ``mistake`` in the lens
    used), the clip's lens set as given; returns the scene, clip, camera, the clip's lens and
    the error of the fixed-lens solve."""
    scene, clip, camera = footage_scene(tmp_path)
    set_clip_distortion(clip, model, coefficients)
    clip.tracking.camera.pixel_aspect = pixel_aspect
    if principal is not None:
        clip.tracking.camera.principal_point_pixels = principal
    intr = clip_intrinsics(clip)
    rng = np.random.default_rng(2)
    points = static_points(rng, 30)
    frames = range(scene.frame_start, scene.frame_end + 1)
    by_name = {f"p{i}": dict.fromkeys(frames, p) for i, p in enumerate(points)}
    tracks = add_tracks(clip, by_name, camera, mistake(intr) if mistake else intr, rng=rng)
    assert sum(len(t.markers) for t in tracks.values()) > 0.7 * 30 * FRAMES  # mostly in view
    return scene, clip, camera, intr, solve_camera(clip, *KEYFRAMES)


@pytest.mark.parametrize("shift", [(0.0, 0.0), (0.03, -0.02)])
def test_project_matches_world_to_camera_view(tmp_path, shift):
    scene, clip, camera = footage_scene(tmp_path)
    camera.data.shift_x, camera.data.shift_y = shift
    # BKE_tracking_camera_shift_get: shift = (centre - principal) / width, for x and y alike
    principal = (WIDTH / 2 - shift[0] * WIDTH, HEIGHT / 2 - shift[1] * WIDTH)
    intr = Intrinsics(WIDTH, HEIGHT, LENS_MM * WIDTH / SENSOR_MM, principal)
    points = static_points(np.random.default_rng(1), 40)
    worst = 0.0
    in_view = 0
    for frame in (1, 9, 20, 30):
        matrix = camera_matrix(scene, camera, frame)
        pixels = project(points, matrix, intr)
        views = np.array([world_to_camera_view(scene, camera, mathutils.Vector(p))[:] for p in points])
        expected = views[:, :2] * (WIDTH, HEIGHT)
        worst = max(worst, float(np.abs(pixels - expected).max()))
        np.testing.assert_allclose(depth(points, matrix), views[:, 2], rtol=1e-5)
        in_view += int(((expected >= 0) & (expected <= (WIDTH, HEIGHT))).all(1).sum())
    assert in_view > 100  # most of the 160 projections land in the frame: the test covers it
    assert worst < W2CV_PX, worst


@pytest.mark.parametrize(
    ("model", "coefficients", "principal", "pixel_aspect"),
    [
        ("POLYNOMIAL", (-0.12, 0.05, -0.02), None, 1.0),
        ("DIVISION", (0.1, -0.03), None, 1.0),
        ("BROWN", (-0.1, 0.04, -0.01, 0.003, 0.01, -0.008), None, 1.0),
        ("NUKE", (0.06, -0.02), None, 1.0),
        # off-centre lens and non-square pixels whose height / aspect is not whole (truncated)
        ("BROWN", (-0.1, 0.04, -0.01, 0.003, 0.01, -0.008), (345.0, 228.0), 1.1),
    ],
)
def test_distortion_matches_blenders_solver(tmp_path, model, coefficients, principal, pixel_aspect):
    scene, clip, camera, intr, error = solve_static(tmp_path, model, coefficients, principal, pixel_aspect)
    print(f"{model} pa={pixel_aspect}: fixed-lens solve error {error:.2e} px", end="")
    assert error <= MATCH_PX, error

    # the same markers with the distortion left out are clearly worse: the formula matters
    set_clip_distortion(clip, model, ())
    undistorted_error = solve_camera(clip, *KEYFRAMES)
    print(f", without distortion {undistorted_error:.3f} px")
    assert undistorted_error >= 10 * MATCH_PX, undistorted_error

    # undistort inverts the distortion of project
    ideal = dataclasses.replace(intr, coefficients=())
    points = static_points(np.random.default_rng(5), 50)
    matrix = camera_matrix(scene, camera, 10)
    distorted = project(points, matrix, intr)
    assert np.isfinite(distorted).all()
    np.testing.assert_allclose(undistort(distorted, intr), project(points, matrix, ideal), atol=1e-6)


def _swap_tangential(intr: Intrinsics) -> Intrinsics:
    k1, k2, k3, k4, p1, p2 = intr.coefficients
    return dataclasses.replace(intr, coefficients=(k1, k2, k3, k4, p2, p1))


def _flip_principal_y(intr: Intrinsics) -> Intrinsics:
    return dataclasses.replace(intr, principal_px=(intr.principal_px[0], intr.height - intr.principal_px[1]))


@pytest.mark.parametrize(
    ("mistake", "principal", "pixel_aspect"),
    [
        (_swap_tangential, None, 1.0),
        (_flip_principal_y, (345.0, 228.0), 1.0),
        (lambda intr: dataclasses.replace(intr, pixel_aspect=1.0), None, 1.25),
    ],
    ids=["tangential-swapped", "principal-from-top", "pixel-aspect-ignored"],
)
def test_solve_error_exposes_a_wrong_formula(tmp_path, mistake, principal, pixel_aspect):
    coefficients = (-0.1, 0.04, -0.01, 0.003, 0.01, -0.008)
    *_, error = solve_static(tmp_path, "BROWN", coefficients, principal, pixel_aspect, mistake)
    print(f"solve error of a wrong lens model {error:.3f} px")
    assert error > 10 * MATCH_PX, error


def test_solved_and_oriented_camera_is_the_true_camera(tmp_path):
    frame_start = 11  # scene frame 11 is clip frame 1; the frame offset only picks files
    scene, clip, camera = footage_scene(tmp_path, frame_start=frame_start, frame_offset=3)
    set_clip_distortion(clip, "POLYNOMIAL", (-0.05, 0.01, 0.0))
    intr = clip_intrinsics(clip)
    rng = np.random.default_rng(3)
    frames = range(frame_start, frame_start + FRAMES)
    points = static_points(rng, 30)
    static = {f"s{i}": dict.fromkeys(frames, p) for i, p in enumerate(points)}
    centres = rng.uniform(-1.0, 1.0, (6, 3))
    moving = {
        f"m{i}": {f: c + 0.3 * np.array([math.sin(0.3 * f + i), 0.0, math.cos(0.2 * f)]) for f in frames}
        for i, c in enumerate(centres)
    }
    truth = {f: camera_matrix(scene, camera, f) for f in frames}
    static_tracks = add_tracks(clip, static, camera, intr, noise_px=0.02, disabled_fraction=0.05, rng=rng)
    add_tracks(clip, moving, camera, intr, noise_px=0.02, rng=rng, weight=0.0)

    error = solve_camera(clip, *KEYFRAMES)
    known = {name: points[int(name[1:])] for name in static_tracks}
    fit_rms = orient_solved_camera(scene, clip, camera, known)
    assert camera.animation_data is None and camera.constraints[0].type == "CAMERA_SOLVER"

    cloud = np.concatenate([points, [m[:3, 3] for m in truth.values()]])
    size = float(np.linalg.norm(cloud.max(0) - cloud.min(0)))
    position_errors, angle_errors, reprojection = [], [], []
    for frame in frames:
        matrix = camera_matrix(scene, camera, frame)
        position_errors.append(np.linalg.norm(matrix[:3, 3] - truth[frame][:3, 3]))
        rotation = matrix[:3, :3] / np.linalg.norm(matrix[:3, :3], axis=0)
        cos = (np.trace(rotation.T @ truth[frame][:3, :3]) - 1.0) / 2.0
        angle_errors.append(math.acos(min(1.0, cos)))
        clip_frame = int(scene_to_clip_frame(frame, clip.frame_start, clip.frame_offset))
        for name, track in static_tracks.items():
            marker = track.markers.find_frame(clip_frame, exact=True)
            if marker is not None and not marker.mute:
                pixel = project(points[int(name[1:])], matrix, intr)[0]
                reprojection.append(np.linalg.norm(pixel - np.array(marker.co) * (WIDTH, HEIGHT)))
    print(
        f"solve {error:.3f} px, bundle fit {fit_rms:.2e}, camera position {max(position_errors):.2e} "
        f"(scene {size:.1f}), angle {max(angle_errors):.2e} rad, reprojection {max(reprojection):.3f} px"
    )
    assert error < 0.05
    assert len(reprojection) > 0.7 * 30 * FRAMES
    assert max(position_errors) < 1e-3 * size
    assert max(angle_errors) < 1e-3
    assert max(reprojection) < 0.5
