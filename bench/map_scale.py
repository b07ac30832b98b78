"""A free structural map at scale: how long a fit of one weight per vertex takes on a device.

Square sheets of N x N vertices (1 m, flat, pinned all round: a trampoline sagging under its
own weight), whose structural stiffness is a hidden smooth bump (4 to 32); the targets are the
model's own rollout at three frames, and the fit engine fits a free structural map
(``warp_core.fit.free_map``: the best uniform value, then every vertex's stiffness by box
L-BFGS on the tape gradient with the default smoothness prior), within ``--time-budget``
where given (the panel's and the batch command's *Time Budget*). A first, short fit of the
same size builds the kernels, so the timed fit runs with a warm kernel cache. Records, per
size: the wall time, when the fit first matched its targets (a fit given a budget goes on
refining below the tolerance until the budget ends it, so its wall time reads the budget
rather than the device), the outcome, the steps and rollouts, the RMSE, the fitted stiffness's
correlation with the hidden one, the device's peak pool memory and that memory per vertex
per substep.

    python bench/map_scale.py --sizes 64 --frames 60 --device cuda:0 --time-budget 120

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
from warp_core.fit import FitObjective, FitProblem, FitSettings, Target, fit  # noqa: E402
from warp_core.fit.problem.maps import DEFAULT_SMOOTHNESS, MapSpec  # noqa: E402
from warp_core.fit.progress import FitProgress, listener  # noqa: E402
from warp_core.models.blender_cloth.simulator import ClothSimulator  # noqa: E402

wp.config.quiet = True
HEADERS = [
    "vertices",
    "frames",
    "fit s",
    "matched at s",
    "budget s",
    "outcome",
    "steps",
    "rollouts",
    "RMSE mm",
    "correlation",
    "forward s",
    "gradient s",
    "bytes/vertex/substep",
]


def hidden_map_problem(n: int, frames: int, device: str, precision: str) -> tuple[FitProblem, np.ndarray]:
    """The sheet, its hidden stiffness, and targets at a third, two thirds and all of ``frames``."""
    mesh = grid_mesh(n, n, 1.0, 1.0)
    x, y = mesh.vertices[:, 0], mesh.vertices[:, 1]
    edge = 1e-9
    # every border vertex pinned: a sheet pinned by one edge and swinging free folds and is
    # chaotic at 64 x 64 (60 frames, float32: its start moved by 1 um moves the targets by
    # 1.1 mm RMS, float64 by 0.98 mm, over the fit's 0.83 mm tolerance); this one settles the
    # same way from any nearby start (1 um: 1.4 um)
    border = (x <= x.min() + edge) | (x >= x.max() - edge) | (y <= y.min() + edge) | (y >= y.max() - edge)
    mesh.pin_weights = border.astype(float)
    truth = 4.0 + 28.0 * np.exp(-((x - 0.2) ** 2 + (y + 0.1) ** 2) / 0.1)
    lo, hi = float(truth.min()), float(truth.max())
    names = ("tension_stiffness", "compression_stiffness")
    ranges = {**dict.fromkeys(names, lo), **{f"{n}_max": hi for n in names}}
    mesh.structural_stiffness_weight = (truth - lo) / (hi - lo)
    at = sorted({max(1, frames // 3), max(1, 2 * frames // 3), frames})
    sim = ClothSimulator(mesh, ClothParams(**ranges), device=device, precision=precision)
    positions = sim.simulate(frames, at)
    mesh.structural_stiffness_weight = None
    start = ClothParams(**{k: 15.0 for k in ranges})
    targets = [Target(f, np.asarray(p, dtype=np.float64)) for f, p in zip(at, positions, strict=True)]
    return FitProblem(mesh, start, targets, [], maps=[MapSpec("structural")]), truth


def peak_pool_bytes(device: str) -> int | None:
    if not device.startswith("cuda") or not wp.is_mempool_enabled(device):
        return None
    return int(wp.get_mempool_used_mem_high(device))


def warm_kernels(problem: FitProblem, args: argparse.Namespace) -> None:
    """Build every kernel the timed fit runs: a one-step fit's, and a rollout in the other
    precision (the verdict's rounding check, run only where a fit matches, which the
    one-step fit does not: a 12 x 12 sheet's timed fit on the CPU spent 15.5 s of its 41 s
    building them, 0.06 s once built here)."""
    settings = FitSettings(device=args.device, precision=args.precision, max_iterations=1)
    fit(problem, settings)
    objective = FitObjective(problem, settings, [])
    weights = {"structural": np.full(problem.mesh.vertex_count, 0.5)}
    objective.set_maps(weights)
    objective.rounding_gap(problem.model_settings.values(), maps=weights)


def measure(n: int, args: argparse.Namespace) -> dict:
    problem, truth = hidden_map_problem(n, args.frames, args.device, args.precision)
    warm_kernels(problem, args)
    settings = FitSettings(
        device=args.device,
        precision=args.precision,
        max_iterations=args.iterations,
        time_budget_s=args.time_budget,
    )
    accepted: list[tuple[float, float]] = []  # (seconds into the fit, RMSE) of every accepted point

    def heard(report: FitProgress) -> None:
        if report.accepted:
            accepted.append((report.seconds, report.rmse))

    wp.synchronize()
    t0 = time.perf_counter()
    result = fit(problem, settings, progress=listener(heard))
    wp.synchronize()
    wall = time.perf_counter() - t0
    matched_s = next((s for s, rmse in accepted if rmse <= result.tolerance), None)
    peak = peak_pool_bytes(args.device)
    substeps = args.frames * problem.model_settings.quality
    s = result.model_settings
    stiffness = s.tension_stiffness + result.maps["structural"] * (
        s.tension_stiffness_max - s.tension_stiffness
    )
    entry = result.map_report["structural"]
    return {
        "n": n,
        "vertices": n * n,
        "frames": args.frames,
        "wall_s": wall,
        "matched_s": matched_s,
        "time_budget_s": args.time_budget,
        "outcome": result.outcome,
        "stop": result.stop_reason,
        "iterations": result.iterations,
        "rollouts": result.n_forward,
        "backward": result.n_backward,
        "rmse_m": result.rmse,
        "initial_rmse_m": result.initial_rmse,
        "uniform_rmse_m": entry["uniform"]["rmse_m"],
        "undetermined": entry["undetermined_vertices"],
        "correlation": float(np.corrcoef(stiffness, truth)[0, 1]),
        "peak_pool_bytes": peak,
        "bytes_per_vertex_substep": None if peak is None else peak / (n * n * substeps),
    }


def measure_cost(n: int, args: argparse.Namespace) -> dict:
    """Without a fit: one forward rollout's and one map gradient's time (the mean of two, warm
    kernels) and the device's peak pool memory, at the uniform start."""
    problem, _ = hidden_map_problem(n, args.frames, args.device, args.precision)
    objective = FitObjective(problem, FitSettings(device=args.device, precision=args.precision), [])
    values = problem.model_settings.values()
    objective.set_maps({"structural": np.full(n * n, 0.5)})
    objective.map_gradient(values, ["structural"])
    objective.residuals(values)
    row: dict = {"n": n, "vertices": n * n, "frames": args.frames}
    for what in ("forward", "gradient"):
        wp.synchronize()
        t0 = time.perf_counter()
        for k in range(2):
            objective.set_maps({"structural": np.full(n * n, 0.5 + 0.01 * k)})
            if what == "forward":
                objective.residuals(values)
            else:
                objective.map_gradient(values, ["structural"])
        wp.synchronize()
        row[f"{what}_s"] = (time.perf_counter() - t0) / 2
    peak = peak_pool_bytes(args.device)
    row["peak_pool_bytes"] = peak
    substeps = args.frames * problem.model_settings.quality
    row["bytes_per_vertex_substep"] = None if peak is None else peak / (n * n * substeps)
    return row


def _cell(row: dict, key: str, form: str) -> str:
    return form.format(row[key]) if row.get(key) is not None else "-"


def _rmse_cell(row: dict) -> str:
    if "rmse_m" not in row:
        return "-"
    return f"{row['rmse_m'] * 1e3:.3f} (uniform {row['uniform_rmse_m'] * 1e3:.3f})"


def record_rows(rows: list[dict], device: str, args: argparse.Namespace) -> None:
    """The rows into bench/results/map_scale.json (docs/benchmarks.md): a fit's columns where
    the size was fitted, the cost columns where it was measured."""
    table = (
        HEADERS,
        [
            [
                str(r["vertices"]),
                str(r["frames"]),
                _cell(r, "wall_s", "{:.1f}"),
                _cell(r, "matched_s", "{:.1f}"),
                _cell(r, "time_budget_s", "{:g}"),
                r.get("outcome", "-"),
                _cell(r, "iterations", "{}"),
                f"{r['rollouts']} ({r['backward']} on a tape)" if "rollouts" in r else "-",
                _rmse_cell(r),
                _cell(r, "correlation", "{:.3f}"),
                _cell(r, "forward_s", "{:.2f}"),
                _cell(r, "gradient_s", "{:.2f}"),
                _cell(r, "bytes_per_vertex_substep", "{:.0f}"),
            ]
            for r in sorted(rows, key=lambda r: r["vertices"])
        ],
    )
    summary = {
        f"{r['vertices']} weights, {r['frames']} frames": (
            f"fit {r['wall_s']:.1f} s, {r['outcome']}"
            + (f", matched at {r['matched_s']:.1f} s" if r.get("matched_s") is not None else "")
            if "wall_s" in r
            else f"gradient {r['gradient_s']:.2f} s"
        )
        for r in rows
    }
    notes = [
        f"{args.precision}, at most {args.iterations} steps a stage, smoothness {DEFAULT_SMOOTHNESS:g}, "
        "warm kernels; budget s: the fit's time budget ('-': none)",
        "matched at s: when the fit first accepted a point within its tolerance (it refines on below it, "
        "to the end of a budget where it has one)",
        "forward s, gradient s: one rollout, and one rollout on a tape with its backward pass for the map, "
        "at the uniform start (mean of two)",
        "bytes/vertex/substep: the device's peak pool memory per vertex per substep, over the timed fit "
        "where the size was fitted (over one gradient where it was only timed)",
    ]
    record_results("map_scale", summary, table, notes, device=device)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64", help="sheets to fit (N per side, comma separated)")
    ap.add_argument("--cost-sizes", default="64,128", help="sheets to time one rollout and gradient of")
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--precision", default="float32")
    ap.add_argument("--iterations", type=int, default=60, help="most steps of each stage of the timed fit")
    ap.add_argument("--time-budget", type=float, help="the timed fit's time budget, seconds (default: none)")
    ap.add_argument("--out", type=Path, help="also write the rows here (JSON)")
    ap.add_argument("--no-record", action="store_true", help="do not record into bench/results")
    ap.add_argument(
        "--record-from",
        type=Path,
        nargs="+",
        metavar="OUT",
        help="record the rows earlier runs wrote with --out (a size's rows merged)",
    )
    args = ap.parse_args(argv)
    if args.record_from is not None:
        merged: dict[int, dict] = {}
        for path in args.record_from:
            data = json.loads(path.read_text())
            for row in data["rows"]:
                merged.setdefault(row["n"], {}).update(row)
        record_rows(list(merged.values()), data["device"], args)
        return
    wp.init()
    device = f"{args.device}, {wp.get_device(args.device).name}"
    rows: dict[int, dict] = {}
    fitted = [int(v) for v in args.sizes.split(",") if v]
    timed = [int(v) for v in args.cost_sizes.split(",") if v]
    for n in timed + fitted:
        row = measure_cost(n, args) if n in timed and n not in rows else measure(n, args)
        rows.setdefault(n, {}).update(row)
        print(json.dumps(row), flush=True)
        if args.out is not None:
            args.out.write_text(json.dumps({"device": device, "rows": list(rows.values())}, indent=1) + "\n")
    if not args.no_record:
        record_rows(list(rows.values()), device, args)


if __name__ == "__main__":
    main()
