"""The cost of the cloth's self-collision: a free N x N sheet of 1 m falling from 5 cm onto
a pinned one of the same size (one object, Self Collisions on at Blender's defaults), per
frame with self-collision off and on, in float32 and float64 on one device. On a CUDA
device it also checks that a short rollout there is bit-identical to the CPU's.

    python bench/self_collision_cost.py [--cells 64] [--frames 3] [--device cpu|cuda:0]
                                        [--precisions float32,float64] [--check-frames 2]
                                        [--out FILE.json]

Each configuration runs once untimed first (kernel loading, graph capture, and the growth
of the candidate lists), then ``--frames`` frames timed from the same start.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import warp as wp  # noqa: E402

from warp_core import ClothParams, ClothSimulator  # noqa: E402
from warp_core.mesh import ClothMesh, grid_mesh  # noqa: E402

GAP = 0.05  # the free sheet starts this far above the pinned one


def two_layers(cells: int) -> ClothMesh:
    """The pinned sheet's vertices first (all pinned), then the free sheet GAP above."""
    pinned = grid_mesh(cells, cells, 1.0, 1.0)
    free = grid_mesh(cells, cells, 1.0, 1.0, z=GAP)
    polygons = [p.tolist() for p in pinned.polygons()]
    polygons += [(p + pinned.vertex_count).tolist() for p in free.polygons()]
    weights = np.concatenate([np.ones(pinned.vertex_count), np.zeros(free.vertex_count)])
    return ClothMesh.from_polygons(
        np.concatenate([pinned.vertices, free.vertices]), polygons, pin_weights=weights
    )


def rollout(sim: ClothSimulator, frames: int) -> np.ndarray:
    return sim.rollout(sim.start_frame + frames).numpy()


def per_frame_s(mesh: ClothMesh, on: bool, device: str, precision: str, frames: int) -> float:
    sim = ClothSimulator(mesh, ClothParams(use_self_collision=on), device=device, precision=precision)
    rollout(sim, frames)  # loads, captures and sizes everything
    wp.synchronize_device(device)
    start = time.perf_counter()
    rollout(sim, frames)
    wp.synchronize_device(device)
    return (time.perf_counter() - start) / frames


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=64, help="vertices per side of each sheet")
    ap.add_argument("--frames", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precisions", default="float32,float64")
    ap.add_argument("--check-frames", type=int, default=2, help="frames of the CPU/CUDA bit-identity check")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    wp.init()
    mesh = two_layers(args.cells)
    result: dict = {
        "cells": args.cells,
        "frames": args.frames,
        "device": args.device,
        "seconds_per_frame": {},
    }
    for precision in args.precisions.split(","):
        row = {}
        for on in (False, True):
            row["on" if on else "off"] = per_frame_s(mesh, on, args.device, precision, args.frames)
        result["seconds_per_frame"][precision] = row
        print(
            f"{args.cells}x{args.cells} x2 {precision} on {args.device}: self-collision off "
            f"{row['off'] * 1e3:.1f} ms/frame, on {row['on'] * 1e3:.1f} ms/frame",
            flush=True,
        )
    if wp.get_device(args.device).is_cuda and args.check_frames > 0:
        result["bit_identical_to_cpu"] = {}
        for precision in args.precisions.split(","):
            params = ClothParams(use_self_collision=True)
            ours = rollout(
                ClothSimulator(mesh, params, device=args.device, precision=precision), args.check_frames
            )
            cpu = rollout(ClothSimulator(mesh, params, device="cpu", precision=precision), args.check_frames)
            same = bool(np.array_equal(ours, cpu))
            result["bit_identical_to_cpu"][precision] = same
            print(
                f"{precision}: {args.device} vs cpu over {args.check_frames} frames: "
                f"{'bit-identical' if same else f'max difference {np.abs(ours - cpu).max():.3e}'}"
            )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
