"""``warp_core.tracks.camera`` without Blender: the lens formulas written out by hand, distortion
and undistortion inverting each other for every model, rays and projections agreeing, and the
checks on ``Intrinsics``. Blender's own tracker is compared in tests/blender/test_footage_camera.py.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from warp_core.tracks.camera import (
    MODEL_COEFFICIENTS,
    Intrinsics,
    clip_to_scene_frame,
    depth,
    normalized_to_pixels,
    pixel_ray,
    pixels_to_normalized,
    project,
    scene_to_clip_frame,
    undistort,
)

LENSES = {
    "POLYNOMIAL": (-0.12, 0.05, -0.02),
    "DIVISION": (0.1, -0.03),
    "NUKE": (0.06, -0.02, 0.01, -0.015),
    "BROWN": (-0.1, 0.04, -0.01, 0.003, 0.01, -0.008),
}


def lens(model: str, pixel_aspect: float = 1.0) -> Intrinsics:
    return Intrinsics(640, 480, 622.2, (331.5, 228.25), pixel_aspect, model, LENSES[model])


def look_matrix(location, yaw: float, pitch: float, scale: float = 1.0) -> np.ndarray:
    """A camera ``matrix_world`` (possibly scaled) turned by yaw about z and pitch about x."""
    cz, sz, cx, sx = math.cos(yaw), math.sin(yaw), math.cos(pitch), math.sin(pitch)
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    m = np.eye(4)
    m[:3, :3] = rz @ rx * scale
    m[:3, 3] = location
    return m


def test_formulas_written_out():
    x, y, f, cx, cy = 0.3, -0.2, 600.0, 320.0, 240.0
    r2 = x * x + y * y
    point = np.array([[x, y]])

    k1, k2, k3 = -0.1, 0.02, -0.01
    poly = Intrinsics(640, 480, f, (cx, cy), 1.0, "POLYNOMIAL", (k1, k2, k3))
    radial = 1 + k1 * r2 + k2 * r2**2 + k3 * r2**3
    expected = [[f * x * radial + cx, f * y * radial + cy]]
    np.testing.assert_allclose(normalized_to_pixels(point, poly), expected)

    division = Intrinsics(640, 480, f, (cx, cy), 1.0, "DIVISION", (k1, k2))
    d = 1 + k1 * r2 + k2 * r2**2
    np.testing.assert_allclose(normalized_to_pixels(point, division), [[f * x / d + cx, f * y / d + cy]])

    k4, p1, p2 = 0.003, 0.01, -0.007
    brown = Intrinsics(640, 480, f, (cx, cy), 1.0, "BROWN", (k1, k2, k3, k4, p1, p2))
    radial = 1 + k1 * r2 + k2 * r2**2 + k3 * r2**3 + k4 * r2**4
    xd = x * radial + p1 * (r2 + 2 * x * x) + 2 * p2 * x * y
    yd = y * radial + p2 * (r2 + 2 * y * y) + 2 * p1 * x * y
    np.testing.assert_allclose(normalized_to_pixels(point, brown), [[f * xd + cx, f * yd + cy]])

    # Nuke is defined by its undistortion, relative to half the larger side (320 px here)
    nuke = Intrinsics(640, 480, f, (cx, cy), 1.0, "NUKE", (k1, k2, p1, p2))
    pixel = np.array([[500.0, 100.0]])
    dx, dy = (500.0 - cx) / 320, (100.0 - cy) / 320
    rd2 = dx * dx + dy * dy
    xu = dx / (1 + k1 * rd2 + k2 * rd2**2 + p1 * dy * dy)
    yu = dy / (1 + k1 * rd2 + k2 * rd2**2 + p2 * dx * dx)
    np.testing.assert_allclose(pixels_to_normalized(pixel, nuke), [[xu * 320 / f, yu * 320 / f]])

    # a Blender camera looks down -z with +y up; square pixels: y focal = x focal
    ideal = Intrinsics(640, 480, f, (cx, cy))
    np.testing.assert_allclose(project(np.array([[1.0, 0.5, -4.0]]), np.eye(4), ideal), [[470.0, 315.0]])
    # pixel aspect 1.25: libmv's image is 480 / 1.25 = 384 high, the y focal 600 * 480 / 384
    wide = dataclasses.replace(ideal, pixel_aspect=1.25)
    np.testing.assert_allclose(project(np.array([[1.0, 0.5, -4.0]]), np.eye(4), wide), [[470.0, 333.75]])


@pytest.mark.parametrize("model", list(MODEL_COEFFICIENTS))
@pytest.mark.parametrize("pixel_aspect", [1.0, 1.1])
def test_distortion_round_trips(model, pixel_aspect):
    intr = lens(model, pixel_aspect)
    rng = np.random.default_rng(0)
    pixels = rng.uniform((0, 0), (640, 480), (400, 2))
    normalized = pixels_to_normalized(pixels, intr)
    assert np.isfinite(normalized).all()
    np.testing.assert_allclose(normalized_to_pixels(normalized, intr), pixels, atol=1e-6)

    # undistort(project with distortion) is the distortion-free projection
    matrix = look_matrix((0.5, -6.0, 0.3), 0.1, math.radians(88.0), scale=2.5)
    points = rng.uniform((-2, -2, -2), (2, 2, 2), (200, 3))
    ideal = dataclasses.replace(intr, coefficients=())
    distorted = project(points, matrix, intr)
    assert np.abs(distorted - project(points, matrix, ideal)).max() > 5.0  # the lens does something
    np.testing.assert_allclose(undistort(distorted, intr), project(points, matrix, ideal), atol=1e-6)


@pytest.mark.parametrize("model", list(MODEL_COEFFICIENTS))
def test_pixel_ray_projects_back_to_its_pixel(model):
    intr = lens(model)
    matrix = look_matrix((1.0, 2.0, 0.5), 0.7, math.radians(70.0), scale=0.3)
    rng = np.random.default_rng(1)
    for pixel in rng.uniform((0, 0), (640, 480), (25, 2)):
        origin, direction = pixel_ray(pixel, matrix, intr)
        np.testing.assert_allclose(origin, matrix[:3, 3])
        assert abs(np.linalg.norm(direction) - 1.0) < 1e-12
        on_ray = origin + np.array([0.5, 3.0, 40.0])[:, None] * direction
        np.testing.assert_allclose(project(on_ray, matrix, intr), np.tile(pixel, (3, 1)), atol=1e-6)
        np.testing.assert_allclose(depth(on_ray, matrix) > 0, True)


def test_points_behind_the_camera_have_no_image():
    intr = lens("POLYNOMIAL")
    points = np.array([[0.0, 0.0, -3.0], [0.2, 0.1, 2.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(depth(points, np.eye(4)), [3.0, -2.0, 0.0])
    pixels = project(points, np.eye(4), intr)
    np.testing.assert_allclose(pixels[0], intr.principal_px)
    assert np.isnan(pixels[1:]).all()


def test_frame_mapping():
    # BKE_movieclip_remap_scene_to_clip_frame: the frame offset only picks footage files
    assert scene_to_clip_frame(11, 11) == 1
    assert scene_to_clip_frame(40, 11, 3) == 30
    assert scene_to_clip_frame(1, 1, 7) == 1
    assert clip_to_scene_frame(scene_to_clip_frame(25.5, 11), 11) == 25.5


def test_intrinsics_fill_and_compare():
    short = Intrinsics(640, 480, 600.0, (320, 240), 1.0, "BROWN", (0.1,))
    assert short.coefficients == (0.1, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert short == Intrinsics(640, 480, 600.0, (320.0, 240.0), 1.0, "BROWN", (0.1, 0, 0, 0, 0, 0))
    assert short.coefficient("k1") == 0.1 and short.is_distorted
    assert not Intrinsics(640, 480, 600.0, (320, 240)).is_distorted


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"width": 0}, "width"),
        ({"height": 480.5}, "height"),
        ({"width": True}, "width"),
        ({"focal_px": float("nan")}, "focal_px"),
        ({"focal_px": -600.0}, "focal_px"),
        ({"pixel_aspect": 0.0}, "pixel_aspect"),
        ({"principal_px": (320.0, 240.0, 1.0)}, "principal_px"),
        ({"principal_px": (320.0, float("inf"))}, "principal_px"),
        ({"distortion_model": "FISHEYE"}, "unknown distortion model"),
        ({"distortion_model": "DIVISION", "coefficients": (0.1, 0.2, 0.3)}, "DIVISION takes up to 2"),
        ({"coefficients": (0.1, float("nan"))}, "POLYNOMIAL takes up to 3"),
    ],
)
def test_intrinsics_reject_bad_values(change, message):
    values = dict(width=640, height=480, focal_px=600.0, principal_px=(320.0, 240.0))
    with pytest.raises(ValueError, match=message):
        Intrinsics(**(values | change))
