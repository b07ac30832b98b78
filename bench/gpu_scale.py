"""Scale on the GPU: forward time per frame by grid size, and whole fits on each device.

    python bench/gpu_scale.py [--forward-sizes 32,64,128,256] [--fit-sizes 32,256]
                              [--fit-devices cuda:0,cpu] [--fit-frames 60]
                              [--batch-grid 32] [--batch-sizes 1,8,64]
                              [--precision float32] [--time-budget 600] [--out result.json]

Grid n x n over 1 m, one edge pinned, quality 5. Forward: Blender's defaults, 30 frames,
median of three rollouts after a warm-up that compiles and captures. Fits: four parameters
(tension = compression, bending, air damping, tension damping) from Blender's defaults
(15, 0.5, 1, 5), each three times off a truth of (5, 1/6, 3, 15); targets at a third, two
thirds and all of ``--fit-frames``, simulated by this model on the fit's device and
precision; the fit's default settings (global phase included when the start falls short).
With a stiffer truth (45, 1.5, 3, 15) the targets of a 32 x 32 sheet do not determine tension
damping (the fit says so: twice the value moves them by < 0.1 mm).
Each device fits once untimed first (compiles, captures), then the timed fit; the wall
time is the timed fit's, start to result.

Batches (``--batch-sizes``, a ``--batch-grid`` sheet, 30 frames): wall time per frame of
``rollout_batch`` with B members, median of three after a warm-up, for two kinds of
member: a Jacobian's (each of the four fitted values 1 % up or down in turn) and a global
phase's (values spread a factor of 3 either side, log-uniform); then three members of the
largest batch against their single rollouts (bit for bit?) and one single rollout on the
GPU against the CPU's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cg_blocks import sheet, timed  # noqa: E402

from warp_core import ClothParams, ClothSimulator  # noqa: E402
from warp_core.fit import FitProblem, FitSettings, Target, fit  # noqa: E402

wp.config.log_level = wp.LOG_WARNING
# each three times off Blender's default, two below it and two above
TRUTH = {
    "tension_stiffness": 15.0 / 3.0,
    "bending_stiffness": 0.5 / 3.0,
    "air_damping": 1.0 * 3.0,
    "tension_damping": 5.0 * 3.0,
}
FITTED = list(TRUTH)
TIES = {"compression_stiffness": "tension_stiffness"}


def forward_ms_per_frame(n: int, device: str, precision: str, frames: int = 30) -> dict:
    sim = ClothSimulator(sheet(n), ClothParams(), device=device, precision=precision)
    seconds_per_frame, _, counts = timed(sim, frames)
    return {
        "n": n,
        "vertices": n * n,
        "ms_per_frame": 1000.0 * seconds_per_frame,
        "mean_cg_iterations": float(counts.mean()),
    }


def member_values(kind: str, count: int) -> list[dict[str, float]]:
    base = ClothParams().values()
    rng = np.random.default_rng(7)
    out = []
    for m in range(count):
        if kind == "jacobian":
            name = FITTED[(m // 2) % len(FITTED)]
            out.append({name: base[name] * (1.01 if m % 2 == 0 else 0.99)})
        else:
            out.append({name: base[name] * 3.0 ** rng.uniform(-1.0, 1.0) for name in FITTED})
    return out


def batch_rows(n: int, sizes: list[int], precision: str, device: str, frames: int = 30) -> list[dict]:
    sim = ClothSimulator(sheet(n), ClothParams(), device=device, precision=precision)
    rows = []
    for kind in ("jacobian", "spread"):
        for members in sizes:
            values = member_values(kind, members)
            sim.rollout_batch(values, frames, [frames])  # warm-up: build, compile, capture
            times = []
            for _ in range(3):
                wp.synchronize_device(device)
                t = time.perf_counter()
                batch = sim.rollout_batch(values, frames, [frames])
                times.append(time.perf_counter() - t)
            row = {
                "kind": kind,
                "n": n,
                "members": members,
                "ms_per_frame": 1000.0 * statistics.median(times) / frames,
                "mean_cg_iterations": float(batch.cg_iterations.mean()),
                "max_cg_iterations_per_substep": float(batch.cg_iterations.max(axis=0).mean()),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    same = []
    for m in sorted({0, members // 2, members - 1}):
        sim.set_params(ClothParams().values())
        sim.set_params(values[m])
        single = sim.rollout(frames, [frames], keep_states=False)
        same.append(
            bool(np.array_equal(single.numpy(), batch.positions[m]))
            and bool(np.array_equal(single.cg_iterations, batch.cg_iterations[m]))
        )
    cpu = ClothSimulator(sheet(n), ClothParams(), device="cpu", precision=precision)
    sim.set_params(ClothParams().values())
    cuda_x = sim.rollout(frames, [frames], keep_states=False).numpy()
    cpu_x = cpu.rollout(frames, [frames], keep_states=False).numpy()
    check = {
        "members_equal_single_runs": same,
        "device_minus_cpu_max": float(np.abs(cuda_x - cpu_x).max()),
    }
    print(json.dumps(check), flush=True)
    rows.append(check)
    return rows


def fit_problem(n: int, frames: int, device: str, precision: str) -> FitProblem:
    mesh = sheet(n)
    truth = ClothParams(**TRUTH, compression_stiffness=TRUTH["tension_stiffness"])
    target_frames = [frames // 3, 2 * frames // 3, frames]
    sim = ClothSimulator(mesh, truth, device=device, precision=precision)
    positions = sim.simulate(frames, target_frames)
    targets = [Target(f, positions[k]) for k, f in enumerate(target_frames)]
    return FitProblem(mesh, ClothParams(), targets, free_parameters=FITTED, ties=dict(TIES))


def timed_fit(n: int, frames: int, device: str, precision: str, budget: float | None, batch: str) -> dict:
    problem = fit_problem(n, frames, device, precision)
    settings = FitSettings(device=device, precision=precision, time_budget_s=budget, batch_rollouts=batch)
    fit(fit_problem(min(n, 8), 6, device, precision), FitSettings(device=device, precision=precision))
    t = time.perf_counter()
    result = fit(problem, settings)
    wall = time.perf_counter() - t
    errors = {name: result.params[name] / TRUTH[name] - 1.0 for name in FITTED}
    return {
        "n": n,
        "vertices": n * n,
        "frames": frames,
        "device": device,
        "batch_rollouts": batch,
        "truth": dict(TRUTH),
        "wall_s": wall,
        "outcome": result.outcome,
        "outcome_reason": result.outcome_reason,
        "rmse_m": result.rmse,
        "stop_reason": result.stop_reason,
        "global_search": result.search,
        "simulations": result.n_forward,
        "fit_seconds": result.seconds,
        "iterations": result.iterations,
        "undetermined": result.undetermined,
        "max_parameter_error": max(abs(e) for e in errors.values()),
        "parameter_errors": errors,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forward-sizes", default="32,64,128,256")
    ap.add_argument("--fit-sizes", default="32,256")
    ap.add_argument("--fit-devices", default="cuda:0,cpu")
    ap.add_argument("--fit-frames", type=int, default=60)
    ap.add_argument("--truth", default=None, help="the fits' true values, comma separated, in FITTED order")
    ap.add_argument("--batch-grid", type=int, default=32)
    ap.add_argument("--batch-sizes", default="1,8,64")
    ap.add_argument("--batch-device", default="cuda:0")
    ap.add_argument("--fit-batch", default="auto", help="FitSettings.batch_rollouts of the fits")
    ap.add_argument("--precision", default="float32")
    ap.add_argument("--time-budget", type=float, default=600.0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.truth:
        TRUTH.update(zip(FITTED, [float(v) for v in args.truth.split(",")], strict=True))
    rows: dict[str, list] = {"forward": [], "batches": [], "fits": []}

    def dump() -> None:
        if args.out:
            Path(args.out).write_text(json.dumps({"precision": args.precision, **rows}, indent=1))

    for n in [int(s) for s in args.forward_sizes.split(",") if s]:
        row = forward_ms_per_frame(n, "cuda:0", args.precision)
        rows["forward"].append(row)
        print(json.dumps(row), flush=True)
        dump()
    sizes = [int(s) for s in args.batch_sizes.split(",") if s]
    if sizes:
        rows["batches"] = batch_rows(args.batch_grid, sizes, args.precision, args.batch_device)
        dump()
    for n in [int(s) for s in args.fit_sizes.split(",") if s]:
        for device in args.fit_devices.split(","):
            if device == "cpu" and n > 64:
                continue  # minutes per simulation there
            row = timed_fit(n, args.fit_frames, device, args.precision, args.time_budget, args.fit_batch)
            rows["fits"].append(row)
            print(json.dumps(row), flush=True)
            dump()


if __name__ == "__main__":
    main()
