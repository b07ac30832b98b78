"""Command line: fit a problem file without Blender, or run the core demo.

python -m warp_core fit PROBLEM.npz --out RESULT.json [--device cpu|cuda] [--max-iters N]
python -m warp_core demo
python -m warp_core fabric --weight-gsm W [--bending-length-mm C] [--drape-coefficient D]
    [--elongation-percent E] [--bias-elongation-percent B] [--edge-mm E] --out PRESET.json

Exit codes of ``fit``: 0 the targets are matched (outcome ``converged``), 2 a bad problem
file or device, 3 the fit failed, 4 it ran but does not match its targets (``misfit`` or
``stalled``; the result file says why).

``fabric`` follows the same codes: 0 every rig reads its lab number back (``matched``), 2 a
bad number or device, 4 some rig does not (``unreachable``, ``unsettled``, ``stalled`` or
``misfit``; the preset is written all the same, its notes say which rig and by how much).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .fit.verdict.report import format_table
from .io import atomic_write_text

if TYPE_CHECKING:
    from .fit.problem.problem import FitProblem
    from .fit.verdict.result import FitResult


def _device(name: str) -> str:
    import warp as wp

    if name == "cuda":
        if not wp.get_cuda_device_count():
            raise SystemExit("error: --device cuda requested but no CUDA device is available")
        return "cuda:0"
    return name


def _table(name: str, problem: FitProblem, result: FitResult) -> str:
    """The before -> after table (warnings included), as the add-on and batch print it."""
    record: dict[str, Any] = {
        **result.summary(),
        "name": name,
        "model": problem.model,
        "device": result.device,
    }
    if problem.ties:
        record["ties"] = dict(problem.ties)
    return "\n".join(format_table(record))


def cmd_fit(args: argparse.Namespace) -> int:
    import warp as wp

    from .fit.engine import fit
    from .fit.problem.files import load_problem
    from .fit.problem.problem import FitError
    from .fit.problem.settings import FitSettings

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
    atomic_write_text(args.out, json.dumps(payload, indent=1))
    print(_table(Path(args.problem).stem, problem, result))
    # the batch command's contract: 0 only when the targets are matched
    return {"converged": 0, "failed": 3}.get(result.outcome, 4)


def cmd_demo(args: argparse.Namespace) -> int:
    """A clamped sheet whose tension and bending are recovered from its own motion."""
    import warp as wp

    from .fit.engine import fit
    from .fit.problem.problem import FitProblem, Target
    from .fit.problem.settings import FitSettings
    from .mesh import grid_mesh
    from .models.blender_cloth.params import ClothParams
    from .models.blender_cloth.simulator import ClothSimulator

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
        free_parameters=["tension_stiffness", "bending_stiffness"],
    )
    result = fit(
        problem,
        FitSettings(device=_device(args.device)),
        progress=lambda i, loss, v: print(f"fit iter {i} loss {loss:.6e}", flush=True),
    )
    print(_table("demo", problem, result))
    print(
        f"true values: tension_stiffness 40, bending_stiffness 2; {result.iterations} iterations, "
        f"{result.n_forward} simulations, {result.seconds:.1f} s on {result.device}"
    )
    return 0


def cmd_fabric(args: argparse.Namespace) -> int:
    """Blender cloth settings from a fabric's lab numbers, through the virtual test rigs."""
    import warp as wp

    from .rigs.fabric import FabricNumbers
    from .rigs.lab_fit import fit_fabric
    from .rigs.preset import fabric_preset

    wp.config.log_level = wp.LOG_WARNING
    try:
        numbers = FabricNumbers(
            weight_gsm=args.weight_gsm,
            bending_length_mm=args.bending_length_mm,
            drape_coefficient=args.drape_coefficient,
            elongation_percent=args.elongation_percent,
            bias_elongation_percent=args.bias_elongation_percent,
            load_n_per_m=args.load_n_per_m,
        )
        result = fit_fabric(
            numbers,
            args.edge_mm * 1e-3,
            device=args.device,
            precision=args.precision,
            progress=lambda text: print(f"rig {text}", flush=True),
        )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    preset = fabric_preset(result, name=args.name)
    atomic_write_text(args.out, json.dumps(preset, indent=2, ensure_ascii=False) + "\n")
    for r in result.rigs:
        print(
            f"{r.rig}: {r.outcome}; {r.number} {r.requested:g} requested, the rig reads {r.reading:.4g}"
            f"{r.spread_text} ({r.setting or 'read only'}, {r.runs} runs, {r.seconds:.1f} s on {r.device})"
        )
    values = ", ".join(f"{name} {getattr(result.settings, name):.6g}" for name in result.fitted)
    print(f"{result.outcome}: {values} on {args.edge_mm:g} mm edges, {result.seconds:.1f} s")
    return 0 if result.outcome == "matched" else 4


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m warp_core", description="Fit to Target physics core")
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="fit a problem file (.npz)")
    f.add_argument("problem", help="the problem file (.npz, written by save_problem)")
    f.add_argument("--out", required=True, help="result JSON")
    f.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    f.add_argument("--max-iters", type=int, default=30, help="maximum optimizer iterations (default 30)")
    f.add_argument("--time-budget", type=float, default=None, help="stop the fit after this many seconds")
    f.add_argument("--precision", choices=["float32", "float64"], default="float64", help="(default float64)")
    f.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    f.set_defaults(func=cmd_fit)
    d = sub.add_parser("demo", help="recover a clamped sheet's tension and bending")
    d.add_argument("--device", default="cpu")
    d.set_defaults(func=cmd_demo)
    fb = sub.add_parser("fabric", help="cloth settings from a fabric's lab numbers")
    fb.add_argument("--weight-gsm", type=float, required=True, help="weight per area (g/m^2)")
    fb.add_argument("--bending-length-mm", type=float, default=None, help="cantilever bending length (mm)")
    fb.add_argument("--drape-coefficient", type=float, default=None, help="Cusick drape coefficient (0 to 1)")
    fb.add_argument(
        "--elongation-percent", type=float, default=None, help="strain along the grain at the load (%%)"
    )
    fb.add_argument(
        "--bias-elongation-percent", type=float, default=None, help="strain at 45 degrees at the load (%%)"
    )
    fb.add_argument(
        "--load-n-per-m",
        type=float,
        default=490.3,
        help="the elongations' load per width (N/m, default 490.3: Kawabata's 500 gf/cm)",
    )
    fb.add_argument("--edge-mm", type=float, default=5.0, help="the cloth mesh's quad edge (mm, default 5)")
    fb.add_argument(
        "--device",
        default="auto",
        help="auto (default: each rig where a fit of its size runs fastest, from the crossover "
        "table), cpu, cuda or cuda:N",
    )
    fb.add_argument(
        "--precision", choices=["float32", "float64"], default="float64", help="(default float64)"
    )
    fb.add_argument("--name", default=None, help="the preset's name (default from the numbers)")
    fb.add_argument("--out", required=True, help="the preset JSON to write")
    fb.set_defaults(func=cmd_fabric)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
