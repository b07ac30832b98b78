"""Command line: fit a problem file without Blender, or run the core demo.

python -m warp_core fit PROBLEM.npz --out RESULT.json [--device cpu|cuda] [--max-iters N]
python -m warp_core demo
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np


def _write_json_atomic(path: Path, payload: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".result-", suffix=".json", dir=path.parent or ".")
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f, indent=1)
    os.replace(tmp, path)


def _device(name: str) -> str:
    import warp as wp

    if name == "cuda":
        if not wp.get_cuda_device_count():
            raise SystemExit("error: --device cuda requested but no CUDA device is available")
        return "cuda:0"
    return name


def _table(result) -> str:
    rows = [f"{'parameter':24s} {'before':>12s} {'after':>12s}"]
    for name, value in result.params.items():
        rows.append(f"{name:24s} {result.initial_params[name]:12.6g} {value:12.6g}")
    before = "diverged" if result.initial_rmse_m is None else f"{result.initial_rmse_m * 1e3:.4f}"
    rows.append(f"{'RMSE (mm)':24s} {before:>12s} {result.rmse_m * 1e3:12.4f}")
    return "\n".join(rows)


def cmd_fit(args: argparse.Namespace) -> int:
    import warp as wp

    from .fit import FitError, FitSettings, fit
    from .fit.problem_io import load_problem

    wp.config.log_level = wp.LOG_WARNING
    try:
        problem = load_problem(args.problem)
        device = _device(args.device)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    settings = FitSettings(
        device=device, max_iterations=args.max_iters, time_budget_s=args.time_budget, precision=args.precision
    )

    def progress(iteration: int, loss: float, values: dict) -> None:
        if not args.quiet:
            shown = " ".join(f"{k} {v:.6g}" for k, v in values.items())
            print(f"fit iter {iteration} loss {loss:.6e} {shown}", flush=True)

    try:
        result = fit(problem, settings, progress=progress)
    except FitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    payload = {
        "version": 1,
        "device": result.device,
        **result.summary(),
        "per_vertex_error": {str(f): e.tolist() for f, e in result.per_vertex_error.items()},
    }
    _write_json_atomic(Path(args.out), payload)
    print(_table(result))
    for w in result.warnings:
        print(f"warning: {w}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """A clamped sheet whose tension and bending are recovered from its own motion."""
    import warp as wp

    from . import ClothParams, ClothSimulator, grid_mesh
    from .fit import FitProblem, FitSettings, Target, fit

    wp.config.log_level = wp.LOG_WARNING
    mesh = grid_mesh(10, 10, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    mesh.pin_weights = (y >= np.unique(y)[-2] - 1e-9).astype(float)
    truth = ClothParams(tension_stiffness=40.0, bending_stiffness=2.0)
    frames = [10, 25, 40]
    targets = ClothSimulator(mesh, truth, precision="float64").simulate(max(frames), frames)
    start = truth.replace(tension_stiffness=15.0, bending_stiffness=0.5)
    problem = FitProblem(
        mesh,
        start,
        [Target(f, targets[k]) for k, f in enumerate(frames)],
        fit=["tension_stiffness", "bending_stiffness"],
    )
    result = fit(
        problem,
        FitSettings(device=_device(args.device)),
        progress=lambda i, loss, v: print(f"fit iter {i} loss {loss:.6e}", flush=True),
    )
    print(_table(result))
    print(
        f"true values: tension_stiffness 40, bending_stiffness 2; {result.iterations} iterations, "
        f"{result.n_forward} simulations, {result.seconds:.1f} s on {result.device}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m warp_core", description="Fit to Target physics core")
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="fit a problem file (.npz)")
    f.add_argument("problem")
    f.add_argument("--out", required=True, help="result JSON")
    f.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    f.add_argument("--max-iters", type=int, default=30)
    f.add_argument("--time-budget", type=float, default=None)
    f.add_argument("--precision", choices=["float32", "float64"], default="float64")
    f.add_argument("--quiet", action="store_true")
    f.set_defaults(func=cmd_fit)
    d = sub.add_parser("demo", help="recover a clamped sheet's tension and bending")
    d.add_argument("--device", default="cpu")
    d.set_defaults(func=cmd_demo)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
