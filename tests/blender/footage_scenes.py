"""Footage scenes for tests (real ``bpy``): a movie clip of blank frames, an animated camera,
tracking markers made by projecting known world points, Blender's own camera solve run
headless, and the solved camera oriented onto the known world.

Markers are stored per *clip* frame; the dictionaries here are keyed by *scene* frame and
converted with ``scene_to_clip_frame`` (clip frame = scene frame - clip.frame_start + 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import bpy
import mathutils
import numpy as np
from addon_scenes import clamped_cloth, select
from blender_ref import addon_package, run_blender_cloth

from warp_core.tracks.camera import Intrinsics, project, scene_to_clip_frame

_footage = addon_package().addon.scene.footage
CLIP_COEFFICIENTS = _footage.CLIP_COEFFICIENTS
clip_intrinsics = _footage.clip_intrinsics  # the add-on's reading of the clip's lens

REFINE_FLAGS = ("focal_length", "principal_point", "radial_distortion", "tangential_distortion")


def set_clip_distortion(clip: bpy.types.MovieClip, model: str, coefficients: Iterable[float]) -> None:
    """Set the clip camera's distortion model and coefficients (the rest of that model's zero)."""
    camera = clip.tracking.camera
    camera.distortion_model = model
    values = list(coefficients)
    for i, name in enumerate(CLIP_COEFFICIENTS[model]):
        if hasattr(camera, name):
            setattr(camera, name, values[i] if i < len(values) else 0.0)
        elif i < len(values) and values[i] != 0.0:
            raise ValueError(f"this Blender has no {name} on the tracking camera")


def make_clip(
    scene: bpy.types.Scene,
    width: int,
    height: int,
    frames: int,
    directory: Path,
    lens_mm: float = 35.0,
    sensor_mm: float = 36.0,
    frame_start: int = 1,
    frame_offset: int = 0,
) -> bpy.types.MovieClip:
    """An image-sequence clip of ``frames`` blank PNGs starting at scene frame ``frame_start``,
    the scene's active clip; the scene's frame range is the clip's.

    The frames' content is irrelevant: the camera solve reads markers only, never pixels.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    image = bpy.data.images.new("footage_frame", width, height)
    image.file_format = "PNG"
    for i in range(1, frames + 1):
        image.filepath_raw = str(directory / f"frame_{i:04d}.png")
        image.save()
    bpy.data.images.remove(image)
    clip = bpy.data.movieclips.load(str(directory / "frame_0001.png"))
    if tuple(clip.size) != (width, height) or clip.frame_duration != frames:
        raise RuntimeError(
            f"clip is {tuple(clip.size)} x {clip.frame_duration}, not {(width, height)} x {frames}"
        )
    clip.frame_start, clip.frame_offset = frame_start, frame_offset
    clip.tracking.camera.sensor_width = sensor_mm
    clip.tracking.camera.units = "MILLIMETERS"
    clip.tracking.camera.focal_length = lens_mm
    scene.active_clip = clip
    scene.frame_start = clip.frame_start
    scene.frame_end = clip.frame_start + frames - 1
    return clip


def add_camera(
    scene: bpy.types.Scene,
    keyframes: list[tuple[int, tuple[float, float, float], tuple[float, float, float]]],
    lens_mm: float,
    sensor_mm: float,
    size: tuple[int, int] | None = None,
) -> bpy.types.Object:
    """An animated camera (location and rotation keyed at each ``(frame, location, rotation_euler)``),
    made the scene camera. The render size is set to ``size`` (default: the active clip's), at
    100 % and pixel aspect 1, so ``world_to_camera_view`` measures the same frame as the clip.
    """
    data = bpy.data.cameras.new("FootageCamera")
    data.lens = lens_mm
    data.sensor_width = sensor_mm
    data.sensor_fit = "AUTO"
    camera = bpy.data.objects.new("FootageCamera", data)
    scene.collection.objects.link(camera)
    for frame, location, rotation in keyframes:
        camera.location = location
        camera.rotation_euler = rotation
        camera.keyframe_insert("location", frame=frame)
        camera.keyframe_insert("rotation_euler", frame=frame)
    scene.camera = camera
    width, height = size if size is not None else tuple(scene.active_clip.size)
    render = scene.render
    render.resolution_x, render.resolution_y = int(width), int(height)
    render.resolution_percentage = 100
    render.pixel_aspect_x = render.pixel_aspect_y = 1.0
    return camera


def camera_matrix(scene: bpy.types.Scene, camera: bpy.types.Object, frame: int) -> np.ndarray:
    """The evaluated ``matrix_world`` of ``camera`` at scene ``frame`` (float64 copy)."""
    scene.frame_set(frame)
    evaluated = camera.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return np.array(evaluated.matrix_world, dtype=np.float64)


def add_tracks(
    clip: bpy.types.MovieClip,
    points_by_frame: Mapping[str, Mapping[int, np.ndarray]],
    camera: bpy.types.Object,
    intr: Intrinsics,
    noise_px: float = 0.0,
    disabled_fraction: float = 0.0,
    rng: np.random.Generator | None = None,
    weight: float = 1.0,
    scene: bpy.types.Scene | None = None,
    tracking_object: str = "",
) -> dict[str, bpy.types.MovieTrackingTrack]:
    """One track per named point: its world position at each scene frame projected through
    ``camera`` with ``intr`` (distortion included), plus Gaussian noise of ``noise_px`` per axis.

    A point out of the frame or behind the camera gets no marker at that frame (a point never
    in view gets no track); ``disabled_fraction`` of the markers are muted at random. Returns
    the tracks by name. With ``tracking_object`` (an object of ``clip.tracking.objects``) the
    tracks go there instead of to the camera's tracks.
    """
    scene = scene or bpy.context.scene
    rng = rng or np.random.default_rng(0)
    frames = sorted({f for by_frame in points_by_frame.values() for f in by_frame})
    matrices = {f: camera_matrix(scene, camera, f) for f in frames}
    size = np.array([intr.width, intr.height], dtype=np.float64)
    tracks: dict[str, bpy.types.MovieTrackingTrack] = {}
    for name, by_frame in points_by_frame.items():
        markers = []
        for frame in sorted(by_frame):
            pixel = project(np.asarray(by_frame[frame], dtype=np.float64), matrices[frame], intr)[0]
            pixel = pixel + rng.normal(0.0, noise_px, 2) if noise_px > 0 else pixel
            if np.isfinite(pixel).all() and (pixel >= 0).all() and (pixel <= size).all():
                clip_frame = int(scene_to_clip_frame(frame, clip.frame_start, clip.frame_offset))
                markers.append((clip_frame, pixel / size))
        if not markers:
            continue
        owner = clip.tracking.objects[tracking_object] if tracking_object else clip.tracking
        track = owner.tracks.new(name=name, frame=markers[0][0])
        track.weight = weight
        for clip_frame, co in markers:
            marker = track.markers.insert_frame(clip_frame, co=(float(co[0]), float(co[1])))
            marker.mute = bool(rng.random() < disabled_fraction)
        tracks[name] = track
    return tracks


def solve_camera(clip: bpy.types.MovieClip, keyframe_a: int, keyframe_b: int, refine: str = "") -> float:
    """Blender's camera solve, headless; returns ``reconstruction.average_error`` (pixels).

    ``refine``: comma-separated intrinsics the solver may change (``REFINE_FLAGS``), "" keeps
    the lens fixed. The operator polls for a Clip Editor, so one area of the only window is
    switched to a Clip Editor showing ``clip`` for the call and switched back afterwards.
    """
    tracking = clip.tracking
    tracking.settings.use_keyframe_selection = False
    wanted = {flag.strip().lower() for flag in refine.split(",") if flag.strip()}
    if wanted - set(REFINE_FLAGS):
        raise ValueError(f"unknown refine flags {sorted(wanted - set(REFINE_FLAGS))}; known {REFINE_FLAGS}")
    for flag in REFINE_FLAGS:
        setattr(tracking.settings, f"refine_intrinsics_{flag}", flag in wanted)
    # the camera's tracks (an object's tracks would make it an object solve)
    tracking_object = next(o for o in tracking.objects if o.is_camera)
    tracking.objects.active = tracking_object
    tracking_object.keyframe_a, tracking_object.keyframe_b = keyframe_a, keyframe_b

    window = bpy.context.window_manager.windows[0]
    area = window.screen.areas[0]
    previous = area.type
    area.type = "CLIP_EDITOR"
    try:
        space = area.spaces.active
        space.clip = clip
        region = next(r for r in area.regions if r.type == "WINDOW")
        with bpy.context.temp_override(
            window=window,
            screen=window.screen,
            area=area,
            region=region,
            space_data=space,
            edit_movieclip=clip,
        ):
            result = bpy.ops.clip.solve_camera()
    finally:
        area.type = previous
    reconstruction = tracking_object.reconstruction
    if result != {"FINISHED"} or not reconstruction.is_valid:
        raise RuntimeError(f"camera solve failed: {result}, valid={reconstruction.is_valid}")
    return float(reconstruction.average_error)


def similarity(source: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Least-squares ``target ≈ scale * rotation @ source + translation`` (Umeyama 1991), a
    proper rotation (no mirror)."""
    source, target = np.asarray(source, np.float64), np.asarray(target, np.float64)
    mu_s, mu_t = source.mean(0), target.mean(0)
    s, t = source - mu_s, target - mu_t
    u, sigma, vt = np.linalg.svd(t.T @ s / len(source))
    mirror = np.diag([1.0, 1.0, np.sign(np.linalg.det(u @ vt))])
    rotation = u @ mirror @ vt
    scale = float(np.trace(np.diag(sigma) @ mirror) / (s**2).sum(1).mean())
    return scale, rotation, mu_t - scale * rotation @ mu_s


def orient_solved_camera(
    scene: bpy.types.Scene,
    clip: bpy.types.MovieClip,
    camera: bpy.types.Object,
    known_points: Mapping[str, np.ndarray],
) -> float:
    """Put the solved camera into the known world (what Set Origin/Floor/Scale do by hand).

    The camera's animation is replaced by a Camera Solver constraint. That constraint computes
    ``matrix_world = own matrix @ reconstructed camera`` (constraint.cc ``camerasolver_evaluate``:
    ``mul_m4_m4m4(cob->matrix, obmat, mat)``), and the bundles live in the reconstruction's
    frame, so the camera's own transform is set to the similarity that takes the bundles of
    ``known_points`` (track name -> world point) onto their world points. Returns the RMS
    distance of the mapped bundles from the known points.
    """
    names = [n for n in known_points if clip.tracking.tracks[n].has_bundle]
    if len(names) < 3:
        raise ValueError(f"need 3 or more solved tracks with known points, have {len(names)}")
    bundles = np.array([clip.tracking.tracks[n].bundle for n in names], dtype=np.float64)
    world = np.array([known_points[n] for n in names], dtype=np.float64)
    scale, rotation, translation = similarity(bundles, world)

    camera.animation_data_clear()
    scene.active_clip = clip
    constraint = camera.constraints.new("CAMERA_SOLVER")
    constraint.use_active_clip = False
    constraint.clip = clip
    own = np.eye(4)
    own[:3, :3] = scale * rotation
    own[:3, 3] = translation
    camera.matrix_basis = mathutils.Matrix(own.tolist())  # Matrix() takes rows
    mapped = bundles @ (scale * rotation).T + translation
    return float(np.sqrt(((mapped - world) ** 2).sum(1).mean()))


# -- a cloth filmed by a moving camera (the footage-target tests)

FRAMES = 30
# the camera's swing around the cloth over the clip (degrees): the camera solve needs parallax
SWING = 60.0
# noise of the static background tracks the camera is solved from (good corners track to a
# few tenths of a pixel); the cloth's tracks carry 0.5 px. A solve from 0.5 px background tracks
# with a 25-degree swing moves the cloth's projection by 1.7 px RMS, which no fit can undo
STATIC_NOISE_PX = 0.2
TRUTH = {"tension_stiffness": 40.0, "bending_stiffness": 2.0, "air_damping": 2.0}
DEFAULTS = {
    "tension_stiffness": 15.0,
    "compression_stiffness": 15.0,
    "bending_stiffness": 0.5,
    "air_damping": 1.0,
}
# cloth vertices carrying a tracked feature: every vertex outside the two clamped rows
TRACKED = list(range(48))


def _camera_keys() -> list:
    """A camera 2.5 m in front of the sheet and 2.7 m above its middle (looking down on it at
    about 45 degrees: a grazing view would bind tracks imprecisely), swinging SWING degrees
    around it over the clip."""
    keys = []
    for frame in (1, FRAMES):
        angle = np.radians(-SWING / 2 + SWING * (frame - 1) / (FRAMES - 1))
        location = (2.5 * np.sin(angle), -2.5 * np.cos(angle), 3.5)
        # rotation_euler of a camera looking at (0, 0, 0.8): pitch from vertical, then yaw
        pitch = np.arctan2(2.5, 2.7)
        keys.append((frame, location, (pitch, 0.0, angle)))
    return keys


def footage_scene(
    folder: Path,
    distortion: tuple | None = None,
    solve: bool = False,
    seed: int = 7,
    pinned_features: bool = False,
) -> dict:
    """The cloth (modifier at Blender's defaults), a clip of its tracked vertices at TRUTH with
    0.5 px noise and 10 % of markers muted; with ``solve``, 40 static background points too
    (STATIC_NOISE_PX), Blender's camera solve and the solve oriented onto them (the true camera
    then dropped), and with ``pinned_features`` camera tracks on the clamped rows as well."""
    scene = bpy.context.scene
    cloth = clamped_cloth(settings=DEFAULTS, frame_end=FRAMES)
    clip = make_clip(scene, 640, 480, FRAMES, folder / "footage")
    if distortion is not None:
        set_clip_distortion(clip, *distortion)
    camera = add_camera(scene, _camera_keys(), lens_mm=35.0, sensor_mm=36.0)
    mod = cloth.modifiers["Cloth"]
    for k, v in TRUTH.items():
        setattr(mod.settings, k, v)
    truth = run_blender_cloth(cloth, FRAMES)  # index 0 = frame 1
    for k, v in DEFAULTS.items():
        setattr(mod.settings, k, v)
    intr = clip_intrinsics(clip)
    rng = np.random.default_rng(seed)
    points = {f"cloth{v}": {f: truth[f - 1][v] for f in range(1, FRAMES + 1)} for v in TRACKED}
    # with a camera solve, the cloth's tracks are an object's (Blender's camera solve uses the
    # camera's tracks only; the cloth moves)
    owner = clip.tracking.objects.new("Cloth").name if solve else ""
    add_tracks(
        clip, points, camera, intr, noise_px=0.5, disabled_fraction=0.1, rng=rng, tracking_object=owner
    )
    if solve:
        # features of the room below and behind the cloth (a table, a floor)
        static = {f"static{k}": rng.uniform((-1.5, -0.5, -0.5), (1.5, 1.5, 0.5)) for k in range(40)}
        still = {n: dict.fromkeys(range(1, FRAMES + 1), p) for n, p in static.items()}
        seen = add_tracks(clip, still, camera, intr, noise_px=STATIC_NOISE_PX, rng=rng)
        static = {n: p for n, p in static.items() if n in seen}
        if pinned_features:
            # the clamped rows never move: features there are camera tracks with solved bundles
            pins = {f"pin{v}": dict.fromkeys(range(1, FRAMES + 1), truth[0][v]) for v in range(48, 64)}
            add_tracks(clip, pins, camera, intr, noise_px=STATIC_NOISE_PX, rng=rng)
        solve_camera(clip, 1, FRAMES)
        orient_solved_camera(scene, clip, camera, static)
    select([cloth], cloth)
    s = cloth.fit_to_target
    s.target_source = "TRACKS"
    s.clip = clip
    s.tracking_object = owner
    s.fit_air_damping = True
    scene.frame_set(1)
    return {"cloth": cloth, "clip": clip, "camera": camera, "truth": truth, "intr": intr}


def replay_reprojection(cloth, clip, camera, intr, frames: int = FRAMES) -> float:
    """RMS pixel distance of Blender's replay (the modifier's current values) from every enabled
    marker of the bound tracks after frame 1, through the scene camera (clip frame = scene frame)."""
    s = cloth.fit_to_target
    replay = run_blender_cloth(cloth, frames)
    scene = bpy.context.scene
    errors = []
    for row in s.bindings:
        if not row.use:
            continue
        owner = clip.tracking.objects[s.tracking_object] if s.tracking_object else clip.tracking
        track = owner.tracks[row.track]
        for m in track.markers:
            if m.mute or m.frame <= 1:
                continue
            scene.frame_set(m.frame)
            point = np.asarray(row.barycentric) @ replay[m.frame - 1][list(row.triangle)]
            uv = project(point[None], np.array(camera.matrix_world), intr)[0]
            errors.append(np.sum((uv - np.array(m.co) * np.array(clip.size)) ** 2))
    return float(np.sqrt(np.mean(errors)))


def bind_all(cloth: bpy.types.Object) -> list[str]:
    """Bind Tracks, then pick the true vertex of each track it could not bind (its start-frame
    marker muted), as an artist would; returns those tracks."""
    assert bpy.ops.object.fit_to_target_bind_tracks() == {"FINISHED"}
    picked = []
    for row in cloth.fit_to_target.bindings:
        if row.how == "NONE":
            assert not row.use
            row.vertex = int(row.track.removeprefix("cloth"))
            assert row.how == "VERTEX"
            row.use = True
            picked.append(row.track)
    return picked
