"""Forward time per frame with the CG loop captured in conditional blocks, against all 100
iterations masked, and the check that both (and the kernel-by-kernel path) agree bit for bit.

    python bench/cg_blocks.py [--device cuda:0] [--sizes 32,64,128,256] [--frames 30]
                              [--precision float32] [--out result.json]

Grid n x n over 1 m, one edge pinned, Blender's default settings (quality 5). Each timing
is the median of three rollouts after a warm-up that captures the graphs.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import warp_core.models.blender_cloth.cg as step  # noqa: E402 (where the CG loop reads its block bounds)
from warp_core import ClothParams, ClothSimulator, grid_mesh  # noqa: E402

wp.config.log_level = wp.LOG_WARNING
BLOCKS = step.CG_BLOCK_BOUNDS
FLAT = (0, step.CG_MAX_ITERATIONS)  # one block: every iteration runs, masked past convergence


def sheet(n: int):
    mesh = grid_mesh(n, n, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    return mesh


def timed(sim: ClothSimulator, frames: int) -> tuple[float, np.ndarray, np.ndarray]:
    rollout = sim.rollout(frames, [frames], keep_states=False)  # warm-up: capture
    times = []
    for _ in range(3):
        wp.synchronize_device(sim.device)
        t = time.perf_counter()
        rollout = sim.rollout(frames, [frames], keep_states=False)
        wp.synchronize_device(sim.device)
        times.append(time.perf_counter() - t)
    return statistics.median(times) / frames, rollout.numpy(), np.asarray(rollout.cg_iterations)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--sizes", default="32,64,128,256")
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--precision", default="float32")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        mesh = sheet(n)
        out = {"n": n, "vertices": n * n}
        results = {}
        for label, bounds in (("flat", FLAT), ("blocks", BLOCKS)):
            step.CG_BLOCK_BOUNDS = bounds
            sim = ClothSimulator(mesh, ClothParams(), device=args.device, precision=args.precision)
            out[f"{label}_ms_per_frame"], x, counts = timed(sim, args.frames)
            results[label] = (x, counts)
        step.CG_BLOCK_BOUNDS = BLOCKS
        plain = ClothSimulator(mesh, ClothParams(), device=args.device, precision=args.precision)
        plain.graphs_enabled = False
        p = plain.rollout(args.frames, [args.frames], keep_states=False)
        x, counts = results["blocks"]
        out["mean_cg_iterations"] = float(counts.mean())
        out["blocks_equal_flat"] = bool(np.array_equal(x, results["flat"][0]))
        out["blocks_equal_kernel_by_kernel"] = bool(
            np.array_equal(x, p.numpy()) and np.array_equal(counts, p.cg_iterations)
        )
        out["speedup"] = out["flat_ms_per_frame"] / out["blocks_ms_per_frame"]
        for key in ("flat_ms_per_frame", "blocks_ms_per_frame"):
            out[key] *= 1000.0
        rows.append(out)
        print(json.dumps(out), flush=True)
    if args.out:
        Path(args.out).write_text(
            json.dumps({"device": args.device, "precision": args.precision, "rows": rows}, indent=2)
        )


if __name__ == "__main__":
    main()
