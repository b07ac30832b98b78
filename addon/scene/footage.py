"""Footage targets from the scene (main thread): the clip's lens, its markers, the camera at
every marker frame, and where each track sits on the cloth.

The fit sees the markers through the clip's lens (focal length, sensor, principal point,
distortion from the clip's tracking camera) and the pose of a scene camera: the one the
clip's solve drives through a Camera Solver constraint, or any animated camera. A track is
bound to the cloth once, at the cache start frame (the cloth is at rest there):

* a track with a solved 3D bundle, when the camera follows the solve: the surface point
  nearest the bundle (bundles farther than ``BUNDLE_REACH`` of the cloth's size are
  background features, not bound);
* otherwise the point where the ray through its marker at the start frame meets the cloth;
* or a vertex the artist picked (the binding list in the panel).

The fit's weight of a track is its binding's weight, not the track's own Weight: that one
belongs to the camera solver, where tracks on a moving cloth must have 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np

from ...warp_core.tracks.binding import closest_surface_point, ray_surface_hit
from ...warp_core.tracks.camera import Intrinsics, clip_to_scene_frame, depth, pixel_ray, project
from ...warp_core.tracks.targets import FootageTargets, TrackBinding
from ..errors import FitInputError
from ..request import BindingSpec, FootageSpec

# a bundle within this share of the cloth's size from its surface is a feature on the cloth
BUNDLE_REACH = 0.05
# a start-frame marker whose ray just misses the cloth (a feature on its edge, a noisy marker)
# is bound to the nearest cloth point if that point projects within this many pixels of it
RAY_SLACK_PX = 3.0

# Blender's Python names of each distortion model's coefficients, in Intrinsics order
CLIP_COEFFICIENTS = {
    "POLYNOMIAL": ("k1", "k2", "k3"),
    "DIVISION": ("division_k1", "division_k2"),
    "NUKE": ("nuke_k1", "nuke_k2", "nuke_p1", "nuke_p2"),
    "BROWN": ("brown_k1", "brown_k2", "brown_k3", "brown_k4", "brown_p1", "brown_p2"),
}


@dataclass
class Footage:
    """The clip, tracking object and camera of a request, found in the scene."""

    clip: bpy.types.MovieClip
    tracks: bpy.types.MovieTrackingTracks
    reconstruction: bpy.types.MovieTrackingReconstruction  # the camera solve
    bundles_in_solve: bool  # camera tracks: their bundles live in the camera solve's space
    camera: bpy.types.Object
    intrinsics: Intrinsics
    solve_driven: bool


def clip_intrinsics(clip: bpy.types.MovieClip) -> Intrinsics:
    cam = clip.tracking.camera
    width, height = (int(v) for v in clip.size)
    model = cam.distortion_model
    names = CLIP_COEFFICIENTS.get(model, ())
    return Intrinsics(
        width=width,
        height=height,
        focal_px=float(cam.focal_length_pixels),
        principal_px=tuple(float(v) for v in cam.principal_point_pixels),
        pixel_aspect=float(cam.pixel_aspect),
        distortion_model=model,
        coefficients=tuple(float(getattr(cam, n, 0.0)) for n in names),  # nuke_p1/p2: newer Blender
    )


def find_footage(scene: bpy.types.Scene, cloth: bpy.types.Object, spec: FootageSpec) -> Footage:
    """The clip, its tracks and the camera, or FitInputError naming what to change."""
    where = f"'{cloth.name}'"
    clip = bpy.data.movieclips.get(spec.clip) if spec.clip else None
    if clip is None:
        what = f"there is no Movie Clip '{spec.clip}'" if spec.clip else "no Movie Clip is chosen"
        raise FitInputError(f"{where}: {what} for the Tracks target (Targets > Tracks > Clip)")
    if min(clip.size) <= 0:
        raise FitInputError(f"Movie Clip '{clip.name}' has no frames that could be read: check its file path")
    tracking = clip.tracking
    if spec.tracking_object:
        tob = tracking.objects.get(spec.tracking_object)
        if tob is None:
            names = ", ".join(o.name for o in tracking.objects)
            raise FitInputError(
                f"Movie Clip '{clip.name}' has no tracking object '{spec.tracking_object}' (it has {names})"
            )
    else:
        tob = next((o for o in tracking.objects if o.is_camera), tracking.objects.active)
    camera = bpy.data.objects.get(spec.camera) if spec.camera else scene.camera
    if camera is None or camera.type != "CAMERA":
        what = f"'{spec.camera}' is not a camera" if spec.camera else "the scene has no camera"
        raise FitInputError(f"{where}: {what}: set the scene camera or pick one for the Tracks target")
    driven = any(
        c.type == "CAMERA_SOLVER"
        and not c.mute
        and (c.clip == clip if not c.use_active_clip else scene.active_clip == clip)
        for c in camera.constraints
    )
    camera_tracks = next((o for o in tracking.objects if o.is_camera), tob)
    if driven and not camera_tracks.reconstruction.is_valid:
        raise FitInputError(
            f"Movie Clip '{clip.name}' has no solved camera, but camera '{camera.name}' follows its solve: "
            "solve the camera motion in the Movie Clip Editor (Solve > Solve Camera Motion) first"
        )
    try:
        intrinsics = clip_intrinsics(clip)
    except ValueError as e:
        raise FitInputError(f"Movie Clip '{clip.name}': {e}") from e
    return Footage(clip, tob.tracks, camera_tracks.reconstruction, tob.is_camera, camera, intrinsics, driven)


def _scene_frames(footage: Footage, track: bpy.types.MovieTrackingTrack) -> list[tuple[int, np.ndarray]]:
    """(scene frame, pixel) of every enabled marker of a track."""
    size = np.array(footage.clip.size, dtype=np.float64)
    offset = np.array(track.offset, dtype=np.float64)  # the tracked point sits off the pattern centre
    out = []
    for m in track.markers:
        if m.mute:
            continue
        frame = clip_to_scene_frame(m.frame, footage.clip.frame_start)
        out.append((int(frame), (np.array(m.co, dtype=np.float64) + offset) * size))
    return out


def _solve_to_world(scene: bpy.types.Scene, footage: Footage, start: int) -> np.ndarray | None:
    """The matrix taking the solve's space (where bundles are) to the world: the camera's world
    matrix times the inverse of the solved camera, at a frame the solve has."""
    tob_cameras = footage.reconstruction.cameras
    if not (footage.solve_driven and footage.bundles_in_solve) or len(tob_cameras) == 0:
        return None
    first = footage.clip.frame_start
    solved = min(tob_cameras, key=lambda c: abs(clip_to_scene_frame(c.frame, first) - start))
    scene.frame_set(int(clip_to_scene_frame(solved.frame, first)))
    world = np.array(footage.camera.matrix_world, dtype=np.float64)
    return world @ np.linalg.inv(np.array(solved.matrix, dtype=np.float64))


def _ray_binding(
    pixel: np.ndarray, camera: np.ndarray, intr: Intrinsics, rest: np.ndarray, tris: np.ndarray
) -> tuple[int, np.ndarray] | None:
    """(triangle, barycentric) where the ray through ``pixel`` meets the cloth, or of the
    cloth point nearest the ray when that projects within RAY_SLACK_PX of the pixel."""
    origin, direction = pixel_ray(pixel, camera, intr)
    hit = ray_surface_hit(origin, direction, rest, tris)
    if hit is not None:
        return hit[0], hit[1]
    seen = depth(rest, camera) > 0.0
    if not seen.any():
        return None
    nearest = np.flatnonzero(seen)[
        np.argmin(np.linalg.norm(project(rest[seen], camera, intr) - pixel, axis=1))
    ]
    along = float((rest[nearest] - origin) @ direction)
    k, bary, _ = closest_surface_point(origin + along * direction, rest, tris)
    point = bary @ rest[tris[k]]
    if np.linalg.norm(project(point[None], camera, intr)[0] - pixel) > RAY_SLACK_PX:
        return None
    return k, bary


def auto_bindings(
    scene: bpy.types.Scene,
    cloth: bpy.types.Object,
    footage: Footage,
    rest: np.ndarray,
    tris: np.ndarray,
    start: int,
) -> tuple[list[BindingSpec], dict[str, list[str]]]:
    """Bindings of the clip's tracks to the cloth at rest (frame ``start``), and the tracks
    left unbound by reason (``tris``: the cloth's triangles). Changes the scene frame
    (callers restore it)."""
    size = float(np.ptp(rest, axis=0).max()) or 1.0
    to_world = _solve_to_world(scene, footage, start)
    scene.frame_set(start)
    camera = np.array(footage.camera.matrix_world, dtype=np.float64)
    bound: list[BindingSpec] = []
    unbound: dict[str, list[str]] = {}
    for track in footage.tracks:
        markers = _scene_frames(footage, track)
        if not any(f > start for f, _ in markers):
            continue  # nothing to fit
        bundle_ok = track.has_bundle and np.isfinite(track.average_error) and to_world is not None
        if bundle_ok:
            point = to_world[:3, :3] @ np.array(track.bundle, dtype=np.float64) + to_world[:3, 3]
            k, bary, dist = closest_surface_point(point, rest, tris)
            if dist <= BUNDLE_REACH * size:
                bound.append(BindingSpec(track.name, "BUNDLE", tuple(int(v) for v in tris[k]), tuple(bary)))
            continue  # a background feature
        at_start = [p for f, p in markers if f == start]
        if not at_start:
            unbound.setdefault(f"no bundle and no marker at the start frame {start}", []).append(track.name)
            continue
        found = _ray_binding(at_start[0], camera, footage.intrinsics, rest, tris)
        if found is None:
            unbound.setdefault(f"the marker at frame {start} is not on the cloth", []).append(track.name)
            continue
        k, bary = found
        bound.append(BindingSpec(track.name, "RAY", tuple(int(v) for v in tris[k]), tuple(bary)))
    return bound, unbound


def describe_unbound(unbound: dict[str, list[str]], most: int = 6) -> str:
    """'a', 'b' (reason); 'c' (other reason) ... with at most ``most`` names per reason."""
    parts = []
    for reason, names in unbound.items():
        listed = ", ".join(f"'{n}'" for n in names[:most])
        more = f" and {len(names) - most} more" if len(names) > most else ""
        parts.append(f"{listed}{more} ({reason})")
    return "; ".join(parts)


def read_footage(
    scene: bpy.types.Scene,
    cloth: bpy.types.Object,
    spec: FootageSpec,
    rest: np.ndarray,
    tris: np.ndarray,
    cache: tuple[int, int],
    notes: list[str],
) -> tuple[FootageTargets, list[int]]:
    """The footage targets and the scene frames whose camera matrices are still to be read
    (``cameras`` is filled by :func:`read_camera` as the scene steps through them); what the
    result should say about them is added to ``notes``."""
    start, end = cache
    footage = find_footage(scene, cloth, spec)
    bindings = list(spec.bindings)
    if not bindings:
        bindings, unbound = auto_bindings(scene, cloth, footage, rest, tris, start)
        if unbound:
            raise FitInputError(
                f"tracks not bound to '{cloth.name}': {describe_unbound(unbound)}: bind each to a vertex "
                "in the binding list (Bind Tracks, then pick a vertex) or mute its markers"
            )
        if not bindings:
            raise FitInputError(
                f"no track of Movie Clip '{footage.clip.name}' lies on '{cloth.name}': track features on "
                "the cloth, or bind tracks to vertices"
            )
        spec.bindings = bindings  # kept with the result, for the binding list
    by_name = {t.name: t for t in footage.tracks}
    frames, tracks, pixels, weights, late = [], [], [], [], {}
    for k, b in enumerate(bindings):
        track = by_name.get(b.track)
        if track is None:
            raise FitInputError(
                f"the binding of '{cloth.name}' names track '{b.track}', which Movie Clip "
                f"'{footage.clip.name}' does not have: bind the tracks again"
            )
        if max(b.vertices) >= len(rest):
            raise FitInputError(f"track '{b.track}' is bound to a vertex '{cloth.name}' does not have")
        for f, p in _scene_frames(footage, track):
            if f > end:
                late.setdefault(b.track, []).append(f)
            elif f >= start:  # at the start frame: the cloth at rest, where the track sits
                frames.append(f)
                tracks.append(k)
                pixels.append(p)
                weights.append(b.weight)
    if late:
        what = ", ".join(f"'{t}' ({min(fs)}-{max(fs)})" for t, fs in list(late.items())[:5])
        raise FitInputError(
            f"markers after the end of the cache of '{cloth.name}' (frame {end}): {what}: extend the "
            "cache (Physics > Cache > End) or mute those markers"
        )
    if not frames or sum(weights) <= 0.0:
        raise FitInputError(
            f"the bound tracks have no enabled markers between frames {start + 1} and {end}: nothing to fit"
        )
    rate = frame_rate_note(
        footage.clip.name, float(footage.clip.fps), scene.render.fps / scene.render.fps_base
    )
    if rate:
        notes.append(rate)
    if footage.solve_driven:
        error = footage.reconstruction.average_error
        notes.append(
            f"camera '{footage.camera.name}' follows the solve of Movie Clip '{footage.clip.name}' "
            f"(average error {error:.3g} px): the confidence ranges count a camera off by that much "
            "(shifted, turned or scaled in the image), not a wrongly oriented or scaled solve"
        )
    targets = FootageTargets(
        footage.intrinsics,
        [TrackBinding(b.track, tuple(b.vertices), tuple(b.barycentric)) for b in bindings],
        {},
        np.array(frames, dtype=np.int64),
        np.array(tracks, dtype=np.int64),
        np.array(pixels, dtype=np.float64),
        np.array(weights, dtype=np.float64),
        huber_px=spec.huber_px,
        clip=footage.clip.name,
        camera=footage.camera.name,
        camera_error_px=float(footage.reconstruction.average_error) if footage.solve_driven else None,
    )
    return targets, targets.frames


def frame_rate_note(clip: str, clip_fps: float, scene_fps: float) -> str | None:
    """Why the footage's time may not be the cloth's, or None: a movie's frame rate other than
    the scene's (an image sequence has none: 0, it plays at the scene's)."""
    if clip_fps <= 0.0 or abs(clip_fps - scene_fps) <= 0.005 * scene_fps:
        return None
    return (
        f"Movie Clip '{clip}' was filmed at {clip_fps:g} fps but the scene runs at {scene_fps:g} fps: "
        "marker frames are scene frames, so the cloth's time runs at another speed than the footage's "
        "(set the scene's frame rate to the clip's)"
    )


def store_bindings(
    settings: bpy.types.PropertyGroup,
    spec: FootageSpec,
    errors: dict[str, float],
    refined: dict[str, dict[str, Any]],
) -> None:
    """The bindings a fit used into the object's binding list, where its markers put each
    track (``refined``: its triangle, its own or one across an edge, and barycentrics there),
    with each track's RMS pixel error (tracks the fit did not use keep their rows). The clip,
    tracking object and camera the fit used become the object's (a batch fit's
    ``--target-tracks`` and ``--camera``): the list belongs to that clip and tracking object,
    and the next fit of them starts from it."""
    clip = bpy.data.movieclips.get(spec.clip)
    if settings.clip != clip or settings.tracking_object != spec.tracking_object:
        settings.bindings.clear()  # rows of another clip's tracks
        settings.clip, settings.tracking_object = clip, spec.tracking_object
    if spec.camera and bpy.data.objects.get(spec.camera) is not None:
        settings.camera = bpy.data.objects[spec.camera]
    rows = {b.track: b for b in settings.bindings}
    for b in spec.bindings:
        row = rows.get(b.track)
        if row is None:
            row = settings.bindings.add()
            row.track = b.track
            rows[b.track] = row
        row.how, row.weight, row.use = b.how, b.weight, True
        moved = refined.get(b.track, {})
        row.triangle = moved.get("triangle", b.vertices)
        row.barycentric = moved.get("barycentric", b.barycentric)
    for row in settings.bindings:
        row.error_px = errors.get(row.track, -1.0)


def read_camera(scene: bpy.types.Scene, targets: FootageTargets, frame: int) -> None:
    """Store the camera's world matrix at the current scene ``frame`` (main thread)."""
    camera = bpy.data.objects[targets.camera]
    targets.cameras[int(frame)] = np.array(camera.matrix_world, dtype=np.float64)


def check_sees_cloth(targets: FootageTargets, rest: np.ndarray, cloth_name: str, start: int) -> None:
    """FitInputError when no bound point of the cloth at rest lies in front of the camera and
    inside the frame at the first marker frame."""
    frame = targets.frames[0]
    camera = targets.cameras[frame]
    points = np.array([np.asarray(b.barycentric) @ rest[list(b.vertices)] for b in targets.bindings])
    ahead = depth(points, camera) > 0.0
    uv = project(points[ahead], camera, targets.intrinsics) if ahead.any() else np.zeros((0, 2))
    w, h = targets.intrinsics.width, targets.intrinsics.height
    inside = (uv[:, 0] >= 0) & (uv[:, 0] <= w) & (uv[:, 1] >= 0) & (uv[:, 1] <= h)
    if not inside.any():
        raise FitInputError(
            f"camera '{targets.camera}' does not see '{cloth_name}' at frame {frame} (the cloth as it "
            f"rests at frame {start} is behind it or outside its {w}x{h} frame): pick the camera that "
            "filmed the clip, or check its solve's orientation and scale"
        )
