"""Object collisions on each device: a 64 x 64 sheet dropped onto a UV sphere of about
5,000 triangles, simulated on the CPU and on every CUDA device in both precisions. Prints
the time per frame with and without the collider (the collision stage's cost), and how far
each device's trajectory is from the CPU's in the same precision.

    python bench/collisions_device.py [--cells 64] [--frames 24] [--cpu-frames 8] [--devices cpu,cuda:0]
                                      [--profile] [--out FILE.json]

``--profile`` adds, per device and precision, the milliseconds per frame of each kernel
(launched one by one, synchronized after each).

The CPU runs fewer frames (``--cpu-frames``; its candidate search is one thread per cloth
triangle over every collider triangle), and the devices are compared over those frames.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import warp as wp  # noqa: E402

from warp_core import ClothParams, ClothSimulator  # noqa: E402
from warp_core.mesh import grid_mesh  # noqa: E402
from warp_core.models.blender_cloth.colliders import ClothCollider  # noqa: E402


def uv_sphere(radius: float, segments: int, rings: int, center: tuple[float, float, float]) -> ClothCollider:
    """Blender's UV sphere layout: poles and rings of quads, quads split 0-1-2 / 0-2-3."""
    points = [[0.0, 0.0, radius]]
    for r in range(1, rings):
        theta = np.pi * r / rings
        for s in range(segments):
            phi = 2 * np.pi * s / segments
            points.append(
                [
                    radius * np.sin(theta) * np.cos(phi),
                    radius * np.sin(theta) * np.sin(phi),
                    radius * np.cos(theta),
                ]
            )
    points.append([0.0, 0.0, -radius])
    bottom = len(points) - 1

    def ring(r: int, s: int) -> int:
        return 1 + (r - 1) * segments + s % segments

    tris = [[0, ring(1, s), ring(1, s + 1)] for s in range(segments)]
    for r in range(1, rings - 1):
        for s in range(segments):
            a, b, c, d = ring(r, s), ring(r + 1, s), ring(r + 1, s + 1), ring(r, s + 1)
            tris += [[a, b, c], [a, c, d]]
    tris += [[bottom, ring(rings - 1, s + 1), ring(rings - 1, s)] for s in range(segments)]
    positions = (np.array(points) + np.array(center))[None]
    return ClothCollider("Sphere", np.array(tris), positions)


def per_frame(sim: ClothSimulator, frames: int) -> tuple[float, np.ndarray]:
    """Seconds per frame of a warm rollout, and its positions."""
    sim.rollout(1 + frames)  # compile, capture, and grow the candidate slots as the contacts need
    t0 = time.perf_counter()
    positions = sim.rollout(1 + frames).numpy()
    wp.synchronize()
    return (time.perf_counter() - t0) / frames, positions


def kernel_profile(sim: ClothSimulator, frames: int) -> dict[str, float]:
    """Milliseconds per frame of each kernel over a rollout launched kernel by kernel."""
    from warp_core.models.blender_cloth import collision, step

    spent: collections.Counter = collections.Counter()
    launch = wp.launch

    def timed(kernel, *args, **kwargs):
        t0 = time.perf_counter()
        launch(kernel, *args, **kwargs)
        wp.synchronize()
        spent[kernel.key.split("__")[-1]] += time.perf_counter() - t0

    sim.graphs_enabled = False
    sim.rollout(1 + frames)
    collision.wp.launch = step.wp.launch = timed
    try:
        sim.rollout(1 + frames)
    finally:
        collision.wp.launch = step.wp.launch = launch
    return {k: round(1e3 * v / frames, 3) for k, v in spent.most_common(10)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=64)
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--cpu-frames", type=int, default=8)
    ap.add_argument("--devices", help="comma-separated Warp devices (default: the CPU and every CUDA device)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    wp.init()
    mesh = grid_mesh(args.cells, args.cells, 1.0)
    sphere = uv_sphere(0.35, 64, 40, (0.03, 0.02, -0.42))
    collide = ClothParams(colliders=(sphere,))
    rows, reference = [], {}
    devices = args.devices.split(",") if args.devices else ["cpu"] + [d.alias for d in wp.get_cuda_devices()]
    for device in devices:
        frames = args.cpu_frames if device == "cpu" else args.frames
        for precision in ("float32", "float64"):
            with_s, x = per_frame(ClothSimulator(mesh, collide, device=device, precision=precision), frames)
            without_s, _ = per_frame(
                ClothSimulator(mesh, ClothParams(), device=device, precision=precision), frames
            )
            ref = reference.setdefault(precision, x)
            n = min(len(ref), len(x))
            row = {
                "device": device,
                "precision": precision,
                "vertices": mesh.vertex_count,
                "collider_triangles": len(sphere.triangles),
                "frames": frames,
                "ms_per_frame": 1e3 * with_s,
                "ms_per_frame_without_collider": 1e3 * without_s,
                "collision_ms_per_frame": 1e3 * (with_s - without_s),
                "max_gap_to_cpu_m": float(np.abs(x[:n] - ref[:n]).max()),
                "lowest_z": float(x[-1, :, 2].min()),
            }
            if args.profile:
                sim = ClothSimulator(mesh, collide, device=device, precision=precision)
                row["kernel_ms_per_frame"] = kernel_profile(sim, frames)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
