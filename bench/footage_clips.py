"""Benchmark of fits to footage on Blender-made clips (needs ``bpy``): each clip is a sheet
of Blender's cloth at hidden values filmed by a moving 35 mm camera, the camera solved by
Blender from room features tracked to 0.2 px and oriented onto them, and 12-40 features on
the cloth tracked to 0.5 px on a tracking object of their own. Each clip is bound (Bind
Tracks) and fitted (the panel's operator) from Blender's defaults; Blender's cloth then
replays the fitted values against the hidden 3D motion.

Per clip it writes the truth and fitted values, which values the result calls determined,
the outcome, the reprojection RMSE, how far each binding moved from where it was bound and
whether it stayed on its surface (its triangle or one across an edge, coordinates >= 0),
and the replay's RMSE against the hidden motion over every vertex and frame.

    .venv/bin/python bench/footage_clips.py [--clips 10] [--first 0] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "blender")]

import blender_env  # noqa: E402,I001  (the isolated profile, before bpy)
import bpy  # noqa: E402
import mathutils  # noqa: E402
from warp_core.tracks.camera import project  # noqa: E402
from addon_scenes import select  # noqa: E402
from blender_ref import grid_mesh, make_cloth_object, pin_row_weights, run_blender_cloth  # noqa: E402
from footage_scenes import (  # noqa: E402
    DEFAULTS,
    add_camera,
    add_tracks,
    camera_matrix,
    clip_intrinsics,
    make_clip,
    orient_solved_camera,
    solve_camera,
)

FRAMES = 30
LENS_MM, SENSOR_MM = 35.0, 36.0
CLOTH_NOISE_PX, ROOM_NOISE_PX = 0.5, 0.2
FITTED = ("tension_stiffness", "bending_stiffness", "air_damping")
WITHIN = 0.05  # a determined value must lie this close to the truth
REPLAY_MM = 2.0
HEIGHT = 1.0  # the sheet rests at this height, its clamped edge along +y


@dataclass
class ClipSpec:
    """One clip: the sheet, its pins, the camera's path and distance, the tracks, the truth."""

    seed: int
    n: int
    size: float
    pins: str  # "clamped" (two rows), "edge" (one row), "corners" (the +y corners)
    path: str  # "orbit", "dolly" or "crane"
    distance: float
    tracks: int
    room: int
    truth: dict[str, float]
    resolution: tuple[int, int] = (640, 480)


def clip_specs(count: int, first: int = 0) -> list[ClipSpec]:
    """Clip 0 is the reported scene (a clamped 12x12 sheet, 5 m away, 16 tracks, 30 room
    features); the others are drawn from their index."""
    specs = []
    for k in range(first, first + count):
        if k == 0:
            truth = {"tension_stiffness": 40.0, "bending_stiffness": 2.0, "air_damping": 2.0}
            specs.append(ClipSpec(0, 12, 1.2, "clamped", "orbit", 5.0, 16, 30, truth))
            continue
        rng = np.random.default_rng(1000 + k)
        truth = {
            "tension_stiffness": float(np.round(rng.uniform(20.0, 80.0), 1)),
            "bending_stiffness": float(np.round(np.exp(rng.uniform(np.log(0.5), np.log(5.0))), 2)),
            "air_damping": float(np.round(rng.uniform(1.0, 5.0), 2)),
        }
        specs.append(
            ClipSpec(
                seed=k,
                n=int(rng.integers(8, 15)),
                size=float(np.round(rng.uniform(0.8, 1.6), 2)),
                pins=str(rng.choice(["clamped", "edge", "corners"])),
                path=str(rng.choice(["orbit", "dolly", "crane"])),
                distance=float(np.round(rng.uniform(3.0, 5.5), 2)),
                tracks=int(rng.integers(12, 41)),
                room=int(rng.integers(30, 51)),
                truth=truth,
                resolution=((640, 480), (960, 540))[int(rng.integers(0, 2))],
            )
        )
    return specs


def pin_weights(mesh, pins: str) -> np.ndarray:
    if pins == "clamped":
        return pin_row_weights(mesh, rows=2, side="+y")
    row = pin_row_weights(mesh, rows=1, side="+y")
    if pins == "corners":
        x = np.asarray(mesh.vertices)[:, 0]
        row = row * ((x <= x.min() + 1e-9) | (x >= x.max() - 1e-9))
    return row


def camera_keys(spec: ClipSpec, aim: np.ndarray) -> list[tuple]:
    """A key at every frame of a camera looking at ``aim`` (or past it, dolly) from above."""
    keys, previous = [], None
    for frame in range(1, FRAMES + 1):
        s = (frame - 1) / (FRAMES - 1)
        elevation, azimuth, d = np.radians(40.0), np.radians(-90.0), spec.distance
        offset = np.zeros(3)
        if spec.path == "orbit":
            azimuth += np.radians(-30.0 + 60.0 * s)
        elif spec.path == "dolly":
            offset = np.array([0.5 * d * (s - 0.5), 0.0, 0.0])
        else:  # crane: rising and turning a little
            elevation = np.radians(25.0 + 30.0 * s)
            azimuth += np.radians(-15.0 + 30.0 * s)
        eye = (
            aim
            + offset
            + d
            * np.array(
                [np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth), np.sin(elevation)]
            )
        )
        back = (eye - aim - offset) / np.linalg.norm(eye - aim - offset)
        right = np.cross([0.0, 0.0, 1.0], back)
        right /= np.linalg.norm(right)
        rotation = mathutils.Matrix(np.stack([right, np.cross(back, right), back], axis=1).tolist())
        euler = rotation.to_euler("XYZ", previous) if previous is not None else rotation.to_euler("XYZ")
        previous = euler
        keys.append((frame, tuple(eye), tuple(euler)))
    return keys


def surface_points(
    rest: np.ndarray, tris: np.ndarray, pinned: np.ndarray, count: int, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(triangle's vertices, barycentric) of ``count`` features at random on triangles that move."""
    moving = np.flatnonzero(~pinned[tris].all(axis=1))
    area = np.linalg.norm(
        np.cross(rest[tris[:, 1]] - rest[tris[:, 0]], rest[tris[:, 2]] - rest[tris[:, 0]]), axis=1
    )
    chosen = rng.choice(moving, count, replace=False, p=area[moving] / area[moving].sum())
    return [(tris[t], rng.dirichlet([1.0, 1.0, 1.0])) for t in chosen]


def room_features(
    spec: ClipSpec, cameras: list[np.ndarray], intr, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """``spec.room`` static points of the room (the floor, a wall, furniture) around the cloth
    but clear of it, each in view at every frame (the solve needs them at both keyframes)."""
    size = np.array([intr.width, intr.height])
    found: list[np.ndarray] = []
    for _ in range(100 * spec.room):
        if len(found) == spec.room:
            break
        p = rng.uniform((-3.0, -2.5, 0.0), (3.0, 3.0, 2.5))
        kind = rng.integers(0, 3)
        p[2] = 0.0 if kind == 0 else p[2]  # on the floor
        p[1] = 3.0 if kind == 1 else p[1]  # on the wall behind
        if np.all(np.abs(p[:2]) < spec.size) and p[2] > HEIGHT - 1.2 * spec.size:
            continue  # where the cloth swings
        uv = np.array([project(p[None], m, intr)[0] for m in cameras])
        if np.isfinite(uv).all() and (uv > 0.02 * size).all() and (uv < 0.98 * size).all():
            found.append(p)
    return {f"room{k}": p for k, p in enumerate(found)}


def build_clip(spec: ClipSpec, folder: Path) -> dict:
    """The scene of one clip (see the module docstring); returns what the measurement needs."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    scene = bpy.context.scene
    rng = np.random.default_rng(spec.seed)
    mesh = grid_mesh(spec.n, spec.n, spec.size, spec.size)
    weights = pin_weights(mesh, spec.pins)
    cloth = make_cloth_object(
        mesh, pin_weights=weights, settings=DEFAULTS, location=(0, 0, HEIGHT), frame_end=FRAMES
    )
    clip = make_clip(scene, *spec.resolution, FRAMES, folder / f"clip{spec.seed}", LENS_MM, SENSOR_MM)
    aim = np.array([0.0, 0.0, HEIGHT - 0.35 * spec.size])
    camera = add_camera(scene, camera_keys(spec, aim), LENS_MM, SENSOR_MM)
    mod = cloth.modifiers["Cloth"]
    for k, v in spec.truth.items():
        setattr(mod.settings, k, v)
    truth = run_blender_cloth(cloth, FRAMES)  # index 0 = frame 1, the cloth at rest
    for k, v in DEFAULTS.items():
        setattr(mod.settings, k, v)
    intr = clip_intrinsics(clip)
    tris = mesh.triangles()
    features = surface_points(truth[0], tris, weights > 0.0, spec.tracks, rng)
    points = {
        f"cloth{k}": {f: bary @ truth[f - 1][tri] for f in range(1, FRAMES + 1)}
        for k, (tri, bary) in enumerate(features)
    }
    owner = clip.tracking.objects.new("Cloth").name
    add_tracks(clip, points, camera, intr, CLOTH_NOISE_PX, 0.05, rng, tracking_object=owner)
    static = room_features(spec, [camera_matrix(scene, camera, f) for f in range(1, FRAMES + 1)], intr, rng)
    seen = add_tracks(
        clip,
        {n: dict.fromkeys(range(1, FRAMES + 1), p) for n, p in static.items()},
        camera,
        intr,
        ROOM_NOISE_PX,
        0.0,
        rng,
    )
    static = {n: p for n, p in static.items() if n in seen}
    solve_error = solve_camera(clip, 1, FRAMES)
    orient_solved_camera(scene, clip, camera, static)
    select([cloth], cloth)
    s = cloth.fit_to_target
    s.target_source, s.clip, s.tracking_object = "TRACKS", clip, owner
    for name in FITTED:
        setattr(s, f"fit_{name}", True)
    scene.frame_set(1)
    return {"cloth": cloth, "truth": truth, "tris": tris, "features": features, "solve_px": solve_error}


def neighbours(tris: np.ndarray) -> dict[frozenset, set[frozenset]]:
    """Each triangle (as a vertex set) -> the triangles sharing an edge with it."""
    by_edge: dict[frozenset, list[frozenset]] = {}
    for t in tris:
        key = frozenset(int(v) for v in t)
        for a, b in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0])):
            by_edge.setdefault(frozenset((int(a), int(b))), []).append(key)
    out: dict[frozenset, set[frozenset]] = {}
    for faces in by_edge.values():
        for f in faces:
            out.setdefault(f, set()).update(g for g in faces if g != f)
    return out


def measure(spec: ClipSpec, folder: Path) -> dict:
    t0 = time.perf_counter()
    built = build_clip(spec, folder)
    cloth, truth = built["cloth"], built["truth"]
    rest = truth[0]
    assert bpy.ops.object.fit_to_target_bind_tracks() == {"FINISHED"}
    s = cloth.fit_to_target
    bound = {
        r.track: (tuple(r.triangle), np.array(r.barycentric)) for r in s.bindings if r.use and r.how != "NONE"
    }
    t1 = time.perf_counter()
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    fit_seconds = time.perf_counter() - t1
    record = json.loads(s.result_json)
    near = neighbours(built["tris"])
    drift, off_surface, true_error, at_border = {}, [], {}, []
    for r in s.bindings:
        if r.track not in bound:
            continue
        home, start = bound[r.track]
        tri, bary = tuple(r.triangle), np.array(r.barycentric)
        drift[r.track] = float(np.linalg.norm(bary @ rest[list(tri)] - start @ rest[list(home)]))
        same = frozenset(tri) == frozenset(home) or frozenset(tri) in near.get(frozenset(home), set())
        if bary.min() < -1e-9 or not same:
            off_surface.append(r.track)
        if bary.min() <= 1e-9 and (frozenset(tri) != frozenset(home) or start.min() > 1e-9):
            at_border.append(r.track)  # on an edge it was not bound on (stopped there, or crossed)
        k = int(r.track.removeprefix("cloth"))
        ftri, fbary = built["features"][k]
        true_error[r.track] = float(np.linalg.norm(bary @ rest[list(tri)] - fbary @ rest[ftri]))
    replay = run_blender_cloth(cloth, FRAMES)
    replay_mm = 1e3 * float(np.sqrt(np.mean(np.sum((replay - truth) ** 2, axis=-1))))
    determined = {n: n not in record["undetermined"] for n in FITTED}
    within = {n: abs(record["params"][n] / spec.truth[n] - 1.0) <= WITHIN for n in FITTED}
    ok = (
        record["outcome"] == "converged"
        and all(within[n] for n in FITTED if determined[n])
        and replay_mm <= REPLAY_MM
        and not off_surface
    )
    return {
        "spec": asdict(spec),
        "solve_px": built["solve_px"],
        "tracks_bound": len(bound),
        "params": {n: record["params"][n] for n in FITTED},
        "determined": determined,
        "within_5pct": within,
        "outcome": record["outcome"],
        "outcome_reason": record["outcome_reason"],
        "rmse_px": record["rmse_px"],
        "noise_rmse_px": record.get("noise_rmse_px"),
        "max_drift_m": max(drift.values(), default=0.0),
        "drift_m": drift,
        "off_surface": off_surface,
        "on_an_edge": at_border,
        "crossed": [
            r.track
            for r in s.bindings
            if r.track in bound and frozenset(r.triangle) != frozenset(bound[r.track][0])
        ],
        "max_binding_error_m": max(true_error.values(), default=0.0),
        "replay_rmse_mm": replay_mm,
        "warnings": [w for w in record["warnings"] if "track" in w or "binding" in w],
        "fit_seconds": fit_seconds,
        "seconds": time.perf_counter() - t0,
        "ok": ok,
    }


def table(rows: list[dict]) -> list[str]:
    out = [
        "| clip | sheet | camera | tracks | values: fitted / truth (determined?) | outcome | "
        "RMSE px | max drift mm | replay mm | ok |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sp = r["spec"]
        values = "; ".join(
            f"{n.split('_')[0]} {r['params'][n]:.4g}/{sp['truth'][n]:g}"
            f" ({'det' if r['determined'][n] else 'undet'}{'' if r['within_5pct'][n] else ', >5%'})"
            for n in FITTED
        )
        out.append(
            f"| {sp['seed']} | {sp['n']}x{sp['n']} {sp['size']} m {sp['pins']} "
            f"| {sp['path']} {sp['distance']} m "
            f"| {r['tracks_bound']} | {values} | {r['outcome']} | {r['rmse_px']:.3f} | "
            f"{1e3 * r['max_drift_m']:.1f} | {r['replay_rmse_mm']:.2f} | {'yes' if r['ok'] else 'no'} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=10)
    ap.add_argument("--first", type=int, default=0, help="index of the first clip (0: the reported scene)")
    ap.add_argument("--out", type=Path, default=Path("footage_clips.json"))
    args = ap.parse_args(argv)
    blender_env.import_addon_package().register()
    rows = []
    with tempfile.TemporaryDirectory(prefix="footage_clips_") as folder:
        for spec in clip_specs(args.clips, args.first):
            rows.append(measure(spec, Path(folder)))
            args.out.write_text(json.dumps(rows, indent=1))
            print(table(rows)[-1], flush=True)
    print("\n".join(table(rows)))
    good = sum(r["ok"] for r in rows)
    print(
        f"{good} of {len(rows)} clips converged, every determined value within 5 %, replay within "
        f"{REPLAY_MM:g} mm, no binding off its surface"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
