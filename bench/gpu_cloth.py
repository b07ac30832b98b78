"""CPU vs CUDA: trajectories of the blender_cloth model and time per frame.

    python bench/gpu_cloth.py [--frames 60] [--grad-frames 20] [--sizes 10,128]
                              [--precisions float32,float64] [--out result.json]

For each grid (n x n vertices over 1 m, one edge pinned, Blender's default settings,
quality 5) and precision it runs the same rollout on "cpu" and "cuda:0", reports the
largest deviation divided by the largest displacement, the gradient difference, and the
forward and forward+backward wall time per frame on each device (after a warm-up run that
compiles the kernels).
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from warp_core import ClothParams, ClothSimulator, grid_mesh  # noqa: E402
from warp_core.models.blender_cloth.adjoint import recompute_bytes, tape_bytes_per_vertex_substep  # noqa: E402

wp.config.log_level = wp.LOG_WARNING


def loss_kernel(dtype):
    vec3 = wp.types.vector(3, dtype)

    @wp.kernel(module="unique")
    def squared_norm_loss(positions: wp.array2d(dtype=vec3), loss: wp.array(dtype=dtype)):
        f, i = wp.tid()
        wp.atomic_add(loss, 0, wp.dot(positions[f, i], positions[f, i]))

    return squared_norm_loss


PERTURB = 0.0


def pinned_grid(n: int):
    mesh = grid_mesh(n, n, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    if PERTURB:
        # a sheet that is not perfectly flat: no spring stays exactly at its rest length
        rng = np.random.default_rng(0)
        mesh.vertices[:, 2] += PERTURB * rng.standard_normal(len(y)) * (mesh.pin_weights == 0)
    return mesh


def synchronize(device: str) -> None:
    wp.synchronize_device(device)


def run_device(n: int, frames: int, grad_frames: int, device: str, precision: str) -> dict:
    sim = ClothSimulator(pinned_grid(n), ClothParams(), device=device, precision=precision)
    sim.simulate(2)  # compile and warm up
    synchronize(device)
    t = time.perf_counter()
    rollout = sim.rollout(frames, keep_states=False)
    positions = rollout.numpy()
    synchronize(device)
    forward = time.perf_counter() - t

    plain = ClothSimulator(pinned_grid(n), ClothParams(), device=device, precision=precision)
    plain.graphs_enabled = False
    plain.simulate(2)
    synchronize(device)
    t = time.perf_counter()
    plain.rollout(frames, keep_states=False).numpy()
    synchronize(device)
    forward_no_graphs = time.perf_counter() - t

    loss = wp.zeros(1, dtype=sim.dtype, device=device, requires_grad=True)
    synchronize(device)
    t = time.perf_counter()
    tape = wp.Tape()
    with tape:
        r = sim.rollout(grad_frames, [grad_frames])
        wp.launch(
            loss_kernel(sim.dtype),
            dim=(1, sim.vertex_count),
            inputs=[r.positions],
            outputs=[loss],
            device=device,
        )
    tape.backward(loss)
    grad = sim.params.grad.numpy().copy()
    synchronize(device)
    forward_backward = time.perf_counter() - t
    return {
        "positions": positions,
        "grad": grad,
        "forward_s_per_frame": forward / frames,
        "forward_no_graphs_s_per_frame": forward_no_graphs / frames,
        "forward_backward_s_per_frame": forward_backward / grad_frames,
        "cg_iterations_mean": float(rollout.cg_iterations.mean()),
        "tape_bytes_per_vertex_substep": tape_bytes_per_vertex_substep(sim),
        "recompute_bytes_peak": recompute_bytes(sim, int(r.cg_iterations.max())),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--grad-frames", type=int, default=20)
    ap.add_argument("--sizes", default="10,128")
    ap.add_argument("--precisions", default="float32,float64")
    ap.add_argument("--perturb", type=float, default=0.0, help="z noise (m) on free vertices")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    global PERTURB
    PERTURB = args.perturb
    devices = ["cpu"] + (["cuda:0"] if wp.get_cuda_device_count() else [])
    report = {
        "warp": wp.__version__,
        "devices": {d: str(wp.get_device(d).name) for d in devices},
        "grids": [],
    }
    cases = [(int(s), p) for s in args.sizes.split(",") for p in args.precisions.split(",")]
    for n, precision in cases:
        runs = {d: run_device(n, args.frames, args.grad_frames, d, precision) for d in devices}
        entry = {
            "grid": f"{n}x{n}",
            "vertices": n * n,
            "precision": precision,
            "frames": args.frames,
            "grad_frames": args.grad_frames,
        }
        cpu = runs["cpu"]["positions"]
        displacement = float(np.abs(cpu - cpu[0]).max())
        for d, r in runs.items():
            entry[d] = {k: v for k, v in r.items() if k not in ("positions", "grad")}
            entry[d]["max_deviation_over_displacement_vs_cpu"] = float(
                np.abs(r["positions"] - cpu).max() / displacement
            )
            entry[d]["grad_rel_diff_vs_cpu"] = float(
                np.abs(r["grad"] - runs["cpu"]["grad"]).max() / np.abs(runs["cpu"]["grad"]).max()
            )
        report["grids"].append(entry)
        print(json.dumps(entry, indent=1), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
