"""A free structural map at scale: how long a fit of one weight per vertex takes on a device.

Square sheets of N x N vertices (1 m, top row pinned, curved), whose structural group holds a
hidden smooth bump; the targets are the model's own rollout at three frames, and
``warp_core.fit.maps.fit_map`` fits every vertex's weight from 0.5 (box L-BFGS on the tape
gradient with a smoothness prior). A first, short map fit of the same size builds the
kernels, so the timed fit runs with a warm kernel cache. Records, per size: the wall time,
the steps and rollouts, the loss drop, the weights' RMS error against the hidden map, the
device's peak pool memory and that memory per vertex per substep.

    python bench/map_scale.py --sizes 64,128 --frames 60 --device cuda:0 --precision float32

Needs warp_core and numpy only (runs where Blender does not).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from results import record as record_results  # noqa: E402

from warp_core import ClothParams, grid_mesh  # noqa: E402
from warp_core.fit import FitProblem, FitSettings, Target  # noqa: E402
from warp_core.fit.maps import fit_map  # noqa: E402
from warp_core.models.blender_cloth.simulator import ClothSimulator  # noqa: E402

wp.config.quiet = True
SMOOTHNESS = 1e-7  # the strength tests/core/test_map_fit.py measured best on a 6 x 6 sheet
HEADERS = [
    "vertices",
    "frames",
    "fit s",
    "steps",
    "rollouts",
    "stop",
    "loss ratio",
    "weights RMS error",
    "bytes/vertex/substep",
]


def hidden_map_problem(n: int, frames: int, device: str, precision: str) -> tuple[FitProblem, np.ndarray]:
    """The sheet, its hidden map, and targets at a third, two thirds and all of ``frames``."""
    mesh = grid_mesh(n, n, 1.0, 1.0)
    x, y = mesh.vertices[:, 0], mesh.vertices[:, 1]
    mesh.vertices[:, 2] = 0.2 * y**2
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    truth = 0.15 + 0.7 * np.exp(-((x - 0.2) ** 2 + (y + 0.1) ** 2) / 0.2)
    params = ClothParams(tension_stiffness=1.0, tension_stiffness_max=20.0, mass=1.0)
    mesh.structural_stiffness_weight = truth
    at = sorted({max(1, frames // 3), max(1, 2 * frames // 3), frames})
    positions = ClothSimulator(mesh, params, device=device, precision=precision).simulate(frames, at)
    mesh.structural_stiffness_weight = None
    targets = [Target(f, np.asarray(p, dtype=np.float64)) for f, p in zip(at, positions, strict=True)]
    return FitProblem(mesh, params, targets, ["tension_stiffness"]), truth


def peak_pool_bytes(device: str) -> int | None:
    if not device.startswith("cuda") or not wp.is_mempool_enabled(device):
        return None
    return int(wp.get_mempool_used_mem_high(device))


def measure(n: int, args: argparse.Namespace) -> dict:
    problem, truth = hidden_map_problem(n, args.frames, args.device, args.precision)
    settings = FitSettings(device=args.device, precision=args.precision)
    fit_map(problem, settings, "structural", SMOOTHNESS, max_iterations=1)  # builds the kernels
    wp.synchronize()
    t0 = time.perf_counter()
    result = fit_map(problem, settings, "structural", SMOOTHNESS, max_iterations=args.iterations)
    wp.synchronize()
    wall = time.perf_counter() - t0
    peak = peak_pool_bytes(args.device)
    substeps = args.frames * problem.model_settings.quality
    error = result.weights - truth
    return {
        "n": n,
        "vertices": n * n,
        "frames": args.frames,
        "wall_s": wall,
        "iterations": result.iterations,
        "rollouts": result.evaluations,
        "stop": result.stop,
        "loss_drop": result.loss / result.start_loss if result.start_loss > 0 else None,
        "rmse_m": result.rmse,
        "weights_rms_error": float(np.sqrt(np.mean(error**2))),
        "start_rms_error": float(np.sqrt(np.mean((0.5 - truth) ** 2))),
        "peak_pool_bytes": peak,
        "bytes_per_vertex_substep": None if peak is None else peak / (n * n * substeps),
    }


def record_rows(rows: list[dict], device: str, args: argparse.Namespace) -> None:
    """The rows into bench/results/map_scale.json (docs/benchmarks.md)."""
    table = (
        HEADERS,
        [
            [
                str(r["vertices"]),
                str(r["frames"]),
                f"{r['wall_s']:.1f}",
                str(r["iterations"]),
                str(r["rollouts"]),
                r["stop"],
                f"{r['loss_drop']:.2e}" if r["loss_drop"] is not None else "-",
                f"{r['weights_rms_error']:.3f} (from {r['start_rms_error']:.3f})",
                f"{r['bytes_per_vertex_substep']:.0f}" if r["bytes_per_vertex_substep"] else "-",
            ]
            for r in rows
        ],
    )
    summary = {f"{r['vertices']} weights, {r['frames']} frames": f"{r['wall_s']:.1f} s" for r in rows}
    notes = [f"{args.precision}, at most {args.iterations} steps, smoothness {SMOOTHNESS:g}, warm kernels"]
    record_results("map_scale", summary, table, notes, device=device)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,128")
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--precision", default="float32")
    ap.add_argument("--iterations", type=int, default=50, help="most box L-BFGS steps of the timed fit")
    ap.add_argument("--out", type=Path, help="also write the rows here (JSON)")
    ap.add_argument("--no-record", action="store_true", help="do not record into bench/results")
    ap.add_argument(
        "--record-from", type=Path, metavar="OUT", help="record the rows an earlier run wrote with --out"
    )
    args = ap.parse_args(argv)
    if args.record_from is not None:
        data = json.loads(args.record_from.read_text())
        record_rows(data["rows"], data["device"], args)
        return
    wp.init()
    device = f"{args.device}, {wp.get_device(args.device).name}"
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows.append(measure(n, args))
        print(json.dumps(rows[-1]), flush=True)
        if args.out is not None:
            args.out.write_text(json.dumps({"device": device, "rows": rows}, indent=1) + "\n")
    if not args.no_record:
        record_rows(rows, device, args)


if __name__ == "__main__":
    main()
