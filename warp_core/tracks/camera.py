"""A world point seen through a Blender camera, in the pixels of Blender's motion-tracking markers.

Footage targets compare a cloth point with a marker, so a point must land exactly where Blender's
tracker (libmv) expects it. Pure numpy, no bpy. Facts taken from Blender's source:

* Markers are ``marker.co * (width, height)``, origin bottom-left (plus ``track.offset``). The
  solver hands libmv ``(co.x * width, co.y * H)`` with ``H = int(height * (1.0f / pixel_aspect))``
  (blenkernel/intern/tracking_solver.cc ``libmv_tracks_new``, float32, truncated): libmv works in
  a space whose y is squeezed by the pixel aspect.
* libmv intrinsics (blenkernel/intern/tracking_util.cc ``tracking_cameraIntrinscisOptionsFromTracking``,
  intern/libmv/intern/camera_intrinsics.cc): focal_x = focal_y = ``camera.focal`` (pixels), principal
  point ``(cx, cy / pixel_aspect)``, image ``(width, H)``. So in marker pixels the y focal is
  ``focal * height / H`` (= ``focal * pixel_aspect`` when ``height / pixel_aspect`` is whole; else
  the truncation shifts y by up to a pixel and the solver sees exactly that, so it is kept here).
* libmv's camera looks down +Z, normalized ``(X/Z, Y/Z)`` (libmv/simple_pipeline/pipeline.cc
  ``ProjectMarker``); Blender's solved camera is that camera with Z negated (intern/libmv/intern/
  reconstruction.cc ``libmv_reprojectionCameraForImage``), so for a Blender camera (looking down -Z,
  +Y up) the normalized point is ``(X, Y) / -Z``.
* Distortion (libmv/simple_pipeline/distortion_models.h) of normalized (x, y), r2 = x² + y²:
  POLYNOMIAL ``x (1 + k1 r2 + k2 r2² + k3 r2³)`` (Blender passes p1 = p2 = 0); DIVISION
  ``x / (1 + k1 r2 + k2 r2²)``; BROWN ``x (1 + k1 r2 + k2 r2² + k3 r2³ + k4 r2⁴) + p1 (r2 + 2x²) + 2 p2 x y``
  and ``y (…) + p2 (r2 + 2y²) + 2 p1 x y``; then ``pixel = focal * distorted + principal``.
  NUKE is defined the other way round, as an undistortion of ``d = (pixel - principal) / S`` with
  S = max(width, H) / 2: ``xu = dx / (1 + k1 rd2 + k2 rd2² + p1 dy²)``,
  ``yu = dy / (1 + k1 rd2 + k2 rd2² + p2 dx²)``, normalized ``= u S / focal``; its distortion is
  iterative in libmv, as every undistortion of the other models is (Levenberg-Marquardt there,
  Newton here: both converge to the same root).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Coefficient names per model, in the order of ``Intrinsics.coefficients``. Blender's properties:
# k1 k2 k3 / division_k1 division_k2 / nuke_k1 nuke_k2 (nuke_p1 nuke_p2 in newer Blender) /
# brown_k1 brown_k2 brown_k3 brown_k4 brown_p1 brown_p2.
MODEL_COEFFICIENTS: dict[str, tuple[str, ...]] = {
    "POLYNOMIAL": ("k1", "k2", "k3"),
    "DIVISION": ("k1", "k2"),
    "NUKE": ("k1", "k2", "p1", "p2"),
    "BROWN": ("k1", "k2", "k3", "k4", "p1", "p2"),
}

Array = np.ndarray


@dataclass(frozen=True)
class Intrinsics:
    """What Blender's tracker knows of the lens: clip size, focal, principal point, distortion.

    ``coefficients`` follow ``MODEL_COEFFICIENTS[distortion_model]``; missing trailing ones are
    zero and are filled in, so two equal lenses compare equal.
    """

    width: int
    height: int
    focal_px: float
    principal_px: tuple[float, float]
    pixel_aspect: float = 1.0
    distortion_model: str = "POLYNOMIAL"
    coefficients: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
                raise ValueError(f"Intrinsics.{name} must be a positive whole number, got {value!r}")
        for name in ("focal_px", "pixel_aspect"):
            value = getattr(self, name)
            if not _finite(value) or float(value) <= 0.0:
                raise ValueError(f"Intrinsics.{name} must be a finite number > 0, got {value!r}")
        principal = tuple(self.principal_px) if np.ndim(self.principal_px) == 1 else ()
        if len(principal) != 2 or not all(_finite(v) for v in principal):
            raise ValueError(f"Intrinsics.principal_px must be two finite numbers, got {self.principal_px!r}")
        names = MODEL_COEFFICIENTS.get(self.distortion_model)
        if names is None:
            known = ", ".join(MODEL_COEFFICIENTS)
            raise ValueError(f"unknown distortion model {self.distortion_model!r}; Blender's are {known}")
        coefficients = tuple(self.coefficients)
        if len(coefficients) > len(names) or not all(_finite(c) for c in coefficients):
            raise ValueError(
                f"{self.distortion_model} takes up to {len(names)} finite coefficients "
                f"({', '.join(names)}), got {self.coefficients!r}"
            )
        coefficients += (0.0,) * (len(names) - len(coefficients))
        object.__setattr__(self, "width", int(self.width))
        object.__setattr__(self, "height", int(self.height))
        object.__setattr__(self, "focal_px", float(self.focal_px))
        object.__setattr__(self, "pixel_aspect", float(self.pixel_aspect))
        object.__setattr__(self, "principal_px", (float(principal[0]), float(principal[1])))
        object.__setattr__(self, "coefficients", tuple(float(c) for c in coefficients))

    def coefficient(self, name: str) -> float:
        """One distortion coefficient by its name in ``MODEL_COEFFICIENTS``."""
        return self.coefficients[MODEL_COEFFICIENTS[self.distortion_model].index(name)]

    @property
    def is_distorted(self) -> bool:
        return any(c != 0.0 for c in self.coefficients)


def _finite(value: object) -> bool:
    try:
        return math.isfinite(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def scene_to_clip_frame(scene_frame: float, clip_frame_start: int, clip_frame_offset: int = 0) -> float:
    """The clip frame (the frame markers are stored under) shown at ``scene_frame``.

    Blender: ``BKE_movieclip_remap_scene_to_clip_frame`` = ``scene_frame - clip.frame_start + 1``
    (blenkernel/intern/movieclip.cc). ``clip.frame_offset`` is accepted but deliberately unused:
    it only picks which footage file is loaded for a frame (``offset + frame - start_frame +
    frame_offset`` in the sequence file name) and, as its RNA description says, "does not change
    data associated with a clip".
    """
    del clip_frame_offset
    return scene_frame - clip_frame_start + 1


def clip_to_scene_frame(clip_frame: float, clip_frame_start: int) -> float:
    """Inverse of ``scene_to_clip_frame`` (``BKE_movieclip_remap_clip_to_scene_frame``)."""
    return clip_frame + clip_frame_start - 1


def camera_pose(camera_to_world: Array) -> tuple[Array, Array]:
    """Rotation (columns: camera x, y, z in world) and location of a ``matrix_world``, or of
    a stack of them (M, 4, 4).

    The object may be scaled (a solved camera oriented with a scale is); the columns are
    normalized, since scale does not change what a camera sees.
    """
    m = np.asarray(camera_to_world, dtype=np.float64)
    if m.shape[-2:] != (4, 4) or m.ndim not in (2, 3):
        raise ValueError(f"camera_to_world must be a 4x4 matrix or a stack of them, got shape {m.shape}")
    rotation = m[..., :3, :3] / np.linalg.norm(m[..., :3, :3], axis=-2, keepdims=True)
    return rotation, m[..., :3, 3].copy()


def to_camera(points_world: Array, camera_to_world: Array) -> Array:
    """(M, 3) points in the camera's frame (x right, y up, looking down -z); with a stack of
    M cameras, each point in its own camera's."""
    rotation, origin = camera_pose(camera_to_world)
    points = np.asarray(points_world, dtype=np.float64).reshape(-1, 3)
    if rotation.ndim == 3:
        return np.einsum("mji,mj->mi", rotation, points - origin)
    return (points - origin) @ rotation


def depth(points_world: Array, camera_to_world: Array) -> Array:
    """(M,) distance in front of the camera along its view axis; <= 0 is behind it."""
    return -to_camera(points_world, camera_to_world)[:, 2]


def project(points_world: Array, camera_to_world: Array, intr: Intrinsics) -> Array:
    """(M, 2) marker pixels (bottom-left origin) of world points, lens distortion applied.

    Comparable with ``marker.co * (width, height)``. Points at or behind the camera plane have
    no image and come back as NaN (see ``depth``).
    """
    cam = to_camera(points_world, camera_to_world)
    z = -cam[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        normalized = cam[:, :2] / z[:, None]
    normalized[z <= 0.0] = np.nan
    return normalized_to_pixels(normalized, intr)


def normalized_to_pixels(normalized: Array, intr: Intrinsics) -> Array:
    """Distort normalized camera coordinates (x, y) = (X, Y) / -Z into marker pixels."""
    xy = np.asarray(normalized, dtype=np.float64).reshape(-1, 2)
    if intr.distortion_model == "NUKE":
        half = _nuke_half_size(intr)
        scale = intr.focal_px / half
        undistorted = xy * scale
        distorted = _newton(lambda d: _nuke_undistort(d, intr.coefficients), undistorted, undistorted)
        return _from_libmv(distorted * half + _libmv_principal(intr), intr)
    distorted = _distort(xy, intr.distortion_model, intr.coefficients)
    return _from_libmv(distorted * intr.focal_px + _libmv_principal(intr), intr)


def pixels_to_normalized(pixels: Array, intr: Intrinsics) -> Array:
    """Undo distortion: marker pixels back to normalized camera coordinates (iterative)."""
    libmv = _to_libmv(np.asarray(pixels, dtype=np.float64).reshape(-1, 2), intr) - _libmv_principal(intr)
    if intr.distortion_model == "NUKE":
        half = _nuke_half_size(intr)
        return _nuke_undistort(libmv / half, intr.coefficients) * (half / intr.focal_px)
    distorted = libmv / intr.focal_px
    return _newton(lambda u: _distort(u, intr.distortion_model, intr.coefficients), distorted, distorted)


def undistort(pixels: Array, intr: Intrinsics) -> Array:
    """(M, 2) pixels where an ideal (distortion-free) lens with the same focal and principal
    point would have imaged what the real lens put at ``pixels``."""
    return _from_libmv(pixels_to_normalized(pixels, intr) * intr.focal_px + _libmv_principal(intr), intr)


def pixel_ray(pixel: Array, camera_to_world: Array, intr: Intrinsics) -> tuple[Array, Array]:
    """World ray (origin (3,), unit direction (3,)) of everything imaged at one marker pixel."""
    rotation, origin = camera_pose(camera_to_world)
    x, y = pixels_to_normalized(np.asarray(pixel, dtype=np.float64).reshape(1, 2), intr)[0]
    direction = rotation @ np.array([x, y, -1.0])
    return origin, direction / np.linalg.norm(direction)


def _libmv_height(intr: Intrinsics) -> int:
    """libmv's image height: Blender computes ``int(height * (1.0f / pixel_aspect))`` in float32."""
    aspy = np.float32(1.0) / np.float32(intr.pixel_aspect)
    return int(np.float32(intr.height) * aspy)


def _libmv_principal(intr: Intrinsics) -> Array:
    return np.array([intr.principal_px[0], intr.principal_px[1] / intr.pixel_aspect])


def _to_libmv(pixels: Array, intr: Intrinsics) -> Array:
    return pixels * np.array([1.0, _libmv_height(intr) / intr.height])


def _from_libmv(libmv: Array, intr: Intrinsics) -> Array:
    return libmv * np.array([1.0, intr.height / _libmv_height(intr)])


def _nuke_half_size(intr: Intrinsics) -> float:
    return 0.5 * max(intr.width, _libmv_height(intr))


def _distort(xy: Array, model: str, c: tuple[float, ...]) -> Array:
    """libmv's Apply*DistortionModel without focal and principal point."""
    x, y = xy[:, 0], xy[:, 1]
    r2 = x * x + y * y
    if model == "DIVISION":
        scale = 1.0 / (1.0 + c[0] * r2 + c[1] * r2 * r2)
        return xy * scale[:, None]
    if model == "POLYNOMIAL":
        radial = 1.0 + r2 * (c[0] + r2 * (c[1] + r2 * c[2]))
        return xy * radial[:, None]
    k1, k2, k3, k4, p1, p2 = c
    radial = 1.0 + (((k4 * r2 + k3) * r2 + k2) * r2 + k1) * r2
    xy2 = 2.0 * x * y
    tx = p1 * (r2 + 2.0 * x * x) + p2 * xy2
    ty = p2 * (r2 + 2.0 * y * y) + p1 * xy2
    return np.stack([x * radial + tx, y * radial + ty], axis=1)


def _nuke_undistort(d: Array, c: tuple[float, ...]) -> Array:
    """libmv's InvertNukeDistortionModel in the frame normalized by half the image size."""
    k1, k2, p1, p2 = c
    dx2, dy2 = d[:, 0] ** 2, d[:, 1] ** 2
    rd2 = dx2 + dy2
    radial = 1.0 + k1 * rd2 + k2 * rd2 * rd2
    return np.stack([d[:, 0] / (radial + p1 * dy2), d[:, 1] / (radial + p2 * dx2)], axis=1)


def _newton(func: Callable[[Array], Array], target: Array, start: Array, iterations: int = 50) -> Array:
    """Solve ``func(u) = target`` per row (2 unknowns) by Newton with a central-difference
    Jacobian; rows that do not converge (no preimage: far outside the lens' valid range) are NaN."""
    u = np.array(start, dtype=np.float64, copy=True)
    tolerance = 1e-14 * (1.0 + np.abs(target))
    step = 1e-7
    done = ~np.isfinite(target).all(axis=1)
    for _ in range(iterations):
        residual = func(u) - target
        done |= (np.abs(residual) <= tolerance).all(axis=1)
        if done.all():
            break
        columns = []
        for axis in range(2):
            offset = np.zeros(2)
            offset[axis] = step
            columns.append((func(u + offset) - func(u - offset)) / (2.0 * step))
        (a, c), (b, d) = (columns[0].T, columns[1].T)  # J = [[a, b], [c, d]]
        det = a * d - b * c
        with np.errstate(divide="ignore", invalid="ignore"):
            rx, ry = residual[:, 0], residual[:, 1]
            du = np.stack([d * rx - b * ry, a * ry - c * rx], axis=1) / det[:, None]
        u = np.where(done[:, None], u, u - du)
    residual = func(u) - target
    u[~(np.abs(residual) <= 1e3 * tolerance).all(axis=1)] = np.nan
    return u
