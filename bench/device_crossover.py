"""Where a fit on CUDA starts to beat one on the CPU: whole fits of clamped sheets by size on
the CPU and on each CUDA device, and the crossover vertex count per GPU.

    python bench/device_crossover.py --out out/crossover.json [--sizes 8,12,16,20,24,28,32,48,64,96,128]
        [--frames 30] [--cuda-precisions float64,float32] [--budget-s 300] [--no-cpu] [--no-cuda]
    python bench/device_crossover.py --quick --out out/crossover_quick.json   # CPU only, seconds
    python bench/device_crossover.py --write-table out/crossover.json [more.json ...]
        [--table assets/device_crossover.json]

On a machine with an NVIDIA GPU (Python 3.11+, warp-lang and numpy; neither bpy nor scipy),
from the repository root, the measurement and the table the add-on reads:

    export WARP_CACHE_PATH=$HOME/.cache/fit_to_target/warp
    python bench/device_crossover.py --out out/crossover_gpu.json
    python bench/device_crossover.py --write-table out/crossover_gpu.json

Runs too long for one sitting split by ``--sizes`` (each part with the same ``--frames``);
``--write-table`` takes all their files at once. Entries of GPUs the given files do not
measure are kept, so tables from several machines add up. On an H200 host with 16 CPU cores
``--sizes 8,16,32,64 --budget-s 120`` took 9 minutes (kernels compiled from an empty cache
included), ``--sizes 12,20,24,28 --budget-s 120`` 2 minutes after it.

Problem: an n x n sheet of 1 m, its last two rows pinned (a cantilever, where tension and
bending both show), Blender's defaults but tension 40 and bending 2; targets at a third, two
thirds and all of ``--frames``, simulated by the model on the fit's own device and precision;
the fit frees tension and bending from three times their true values, with the fit's default
settings. The CPU fits in float64, CUDA in each of ``--cuda-precisions`` (the add-on's cloth
fits in float64 on either device; float32 is measured beside it). Before its timed rows each
device and precision fits a 4 x 4 sheet untimed, so compiling kernels is not timed; building
the simulation and capturing its graphs are, as in a fit from the panel. ``ms_per_frame``
is a plain rollout of the truth, median of three after a warm one; ``fit_ms_per_simulated_frame``
the fit's wall time over the frames of its forward simulations (its gradients' cost included).

At 64 x 64 (H200 host, 2026-12) the fits ended within their tolerance far from the true
values (``max_parameter_error`` 2.6): the targets hardly tell the values apart there, so the
fits of large sheets are shorter ones than those of small sheets.

Every fit has ``--budget-s``; a device whose fit hits it is not run at larger sizes (it would
only be slower). The crossover of a GPU at a precision: the smallest measured size from which
its fit is faster than the CPU's at every larger size measured (a CPU fit cut by the budget
counts as slower than any CUDA fit that finished), as a vertex count; null when CUDA is not
faster at the largest size measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from results import record as record_results  # noqa: E402

from warp_core import ClothMesh, ClothParams, ClothSimulator, grid_mesh  # noqa: E402
from warp_core.fit import FitProblem, FitSettings, Target, fit  # noqa: E402

wp.config.quiet = True
wp.config.log_level = wp.LOG_WARNING

TABLE = REPO / "assets" / "device_crossover.json"
TRUTH = {"tension_stiffness": 40.0, "bending_stiffness": 2.0}
START_FACTOR = 3.0
CPU_PRECISION = "float64"
SIZES = "8,12,16,20,24,28,32,48,64,96,128"
QUICK = {"sizes": "4,6", "frames": 10, "budget_s": 60.0}  # CPU only: the code path in seconds
FORMAT = 1


def clamped_sheet(n: int) -> ClothMesh:
    mesh = grid_mesh(n, n, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    mesh.pin_weights = (y >= np.unique(y)[-2] - 1e-9).astype(float)
    return mesh


def problem(n: int, frames: int, device: str, precision: str) -> tuple[FitProblem, ClothSimulator]:
    """The fit of an n x n sheet, and the simulator that made its targets (warm: for timing)."""
    mesh = clamped_sheet(n)
    truth = ClothParams(**TRUTH)
    target_frames = sorted({max(1, frames // 3), max(1, 2 * frames // 3), frames})
    sim = ClothSimulator(mesh, truth, device=device, precision=precision)
    positions = sim.simulate(frames, target_frames)
    start = truth.replace(**{name: value * START_FACTOR for name, value in TRUTH.items()})
    targets = [Target(f, positions[k]) for k, f in enumerate(target_frames)]
    return FitProblem(mesh, start, targets, free_parameters=list(TRUTH)), sim


def forward_ms_per_frame(sim: ClothSimulator, frames: int) -> float:
    sim.rollout(frames, [frames], keep_states=False)
    times = []
    for _ in range(3):
        wp.synchronize_device(sim.device)
        t = time.perf_counter()
        sim.rollout(frames, [frames], keep_states=False)
        wp.synchronize_device(sim.device)
        times.append(time.perf_counter() - t)
    return 1000.0 * float(np.median(times)) / frames


def timed_fit(n: int, frames: int, device: str, precision: str, budget_s: float) -> dict[str, Any]:
    fit_problem, sim = problem(n, frames, device, precision)
    ms_per_frame = forward_ms_per_frame(sim, frames)
    settings = FitSettings(device=device, precision=precision, time_budget_s=budget_s)
    wp.synchronize_device(device)
    t = time.perf_counter()
    result = fit(fit_problem, settings)
    wp.synchronize_device(device)
    wall_s = time.perf_counter() - t
    errors = [abs(result.params[name] / value - 1.0) for name, value in TRUTH.items()]
    return {
        "wall_s": wall_s,
        "iterations": result.iterations,
        "simulations": result.n_forward,
        "ms_per_frame": ms_per_frame,
        # the fit's wall time over the frames its forward simulations stepped (its gradients too)
        "fit_ms_per_simulated_frame": 1000.0 * wall_s / max(1, result.n_forward * frames),
        "stop_reason": result.stop_reason,
        "budget_hit": result.stop_reason == "time_budget",
        "outcome": result.outcome,
        "rmse_m": result.rmse,
        "max_parameter_error": max(errors),
    }


def warm_up(device: str, precision: str) -> None:
    fit(problem(4, 6, device, precision)[0], FitSettings(device=device, precision=precision))


def host_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:  # not Linux
        pass
    return {
        "cpu": cpu,
        "cpu_cores": os.cpu_count(),
        "gpus": [d.name for d in wp.get_cuda_devices()],
        "warp": wp.config.version,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def run_rows(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Every (size, device, precision) row, written to ``out`` after each one."""
    wp.init()
    runs = [] if args.no_cpu else [("cpu", None, CPU_PRECISION)]
    if not args.no_cuda:
        for device in wp.get_cuda_devices():
            runs += [(device.alias, device.name, p) for p in args.cuda_precisions.split(",") if p]
    result = {
        "format": FORMAT,
        "date": datetime.date.today().isoformat(),
        "host": host_info(),
        "settings": {
            "sizes": [int(s) for s in args.sizes.split(",") if s],
            "frames": args.frames,
            "budget_s": args.budget_s,
            "truth": TRUTH,
            "start_factor": START_FACTOR,
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
        },
        "rows": [],
        "crossovers": [],
    }
    for device, _, precision in runs:
        warm_up(device, precision)
    cut: dict[tuple[str, str], str] = {}  # (device, precision) -> why larger sizes are skipped
    for n in sorted(result["settings"]["sizes"]):
        for device, gpu_name, precision in runs:
            row = {"n": n, "vertices": n * n, "frames": args.frames, "device": device}
            row |= {"gpu_name": gpu_name, "precision": precision}
            if (device, precision) in cut:
                row |= {"skipped": cut[device, precision], "budget_hit": True}
            else:
                row |= timed_fit(n, args.frames, device, precision, args.budget_s)
                if row["budget_hit"]:
                    cut[device, precision] = f"its {n}x{n} fit hit the {args.budget_s:g} s budget"
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
            result["crossovers"] = crossovers(result["rows"])
            out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def cuda_faster(cuda: dict[str, Any], cpu: dict[str, Any]) -> bool:
    """Was this CUDA fit faster than the CPU's of the same size? A budget-cut or skipped
    CPU fit took at least the budget, so any CUDA fit that finished beat it."""
    if cuda["budget_hit"]:
        return False
    return bool(cpu["budget_hit"] or cuda["wall_s"] < cpu["wall_s"])


def crossovers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GPU name and precision: the crossover vertex count (see the module docstring).
    Several devices of one name: the largest of their crossovers (null wins)."""
    cpu = {r["n"]: r for r in rows if r["device"] == "cpu"}
    runs: dict[tuple[str, str, str], dict[int, dict]] = {}
    for r in rows:
        if r["device"] != "cpu":
            runs.setdefault((r["gpu_name"], r["precision"], r["device"]), {})[r["n"]] = r
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for (name, precision, _device), by_n in sorted(runs.items()):
        sizes = sorted(n for n in by_n if n in cpu)
        if not sizes:
            continue
        crossover = None
        for n in reversed(sizes):
            if not cuda_faster(by_n[n], cpu[n]):
                break
            crossover = n * n
        entry = {"gpu_name": name, "precision": precision, "crossover_vertices": crossover}
        entry |= {"largest_measured_vertices": sizes[-1] ** 2, "sizes_compared": sizes}
        earlier = found.get((name, precision))
        if earlier is not None and (earlier["crossover_vertices"] is None or crossover is None):
            entry["crossover_vertices"] = None
        elif earlier is not None:
            entry["crossover_vertices"] = max(earlier["crossover_vertices"], crossover)
        found[name, precision] = entry
    return list(found.values())


def gpu_pattern(name: str) -> str:
    """What the table matches a GPU's name by: its name less the vendor ("H200")."""
    return name.removeprefix("NVIDIA ").strip()


def table_from_results(results: list[dict[str, Any]], sources: list[str], earlier: dict | None) -> dict:
    """The table the add-on reads: the GPUs these results measure, those of ``earlier`` they
    do not, and the default for GPUs never measured. Results of one table must share a host
    and a frame count (a split run)."""
    hosts = {(r["host"]["cpu"], r["host"]["cpu_cores"], r["settings"]["frames"]) for r in results}
    if len(hosts) > 1:
        raise SystemExit(f"device_crossover: results of different hosts or frame counts: {hosts}")
    host = results[0]["host"]
    rows = [row for r in results for row in r["rows"]]
    gpus: dict[str, dict[str, Any]] = {}
    for found in crossovers(rows):
        pattern = gpu_pattern(found["gpu_name"])
        entry = gpus.setdefault(pattern, {"gpu_pattern": pattern, "gpu_name": found["gpu_name"]})
        precision = found["precision"]
        entry.setdefault("crossover_vertices", {})[precision] = found["crossover_vertices"]
        entry.setdefault("largest_measured_vertices", {})[precision] = found["largest_measured_vertices"]
        entry["measured"] = {
            "date": max(r["date"] for r in results),
            "host_cpu": host["cpu"],
            "host_cpu_cores": host["cpu_cores"],
            "warp": host["warp"],
            "frames": results[0]["settings"]["frames"],
            "sizes": sorted({row["n"] for row in rows}),
            "source": "bench/device_crossover.py: " + ", ".join(sources),
        }
    for old in (earlier or {}).get("gpus", []):
        gpus.setdefault(old["gpu_pattern"], old)
    table = {
        "format": FORMAT,
        "about": (
            "Vertex counts from which a cloth fit on a GPU beat the same fit on the CPU (float64), "
            "per GPU name pattern and CUDA precision; null: the GPU was not faster at any size "
            "measured. Written by bench/device_crossover.py --write-table, never by hand."
        ),
        "cpu_precision": CPU_PRECISION,
        "gpus": sorted(gpus.values(), key=lambda e: e["gpu_pattern"]),
        "default": default_rule(list(gpus.values())),
        "written": {"date": datetime.date.today().isoformat(), "from": sources, "host_cpu": host["cpu"]},
    }
    table["written"]["host_cpu_cores"] = host["cpu_cores"]
    return table


def default_rule(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """For a GPU the table does not name: the largest crossover measured on any GPU, per
    precision (a GPU never faster makes it null); none measured: no default."""
    crossover: dict[str, int | None] = {}
    source: dict[str, str] = {}
    for entry in gpus:
        for precision, vertices in entry["crossover_vertices"].items():
            if precision in crossover and crossover[precision] is None:
                continue
            if precision not in crossover or vertices is None or vertices > crossover[precision]:
                crossover[precision], source[precision] = vertices, entry["gpu_pattern"]
    return {
        "rule": (
            "a GPU not listed fits on the CPU below the most conservative (largest) crossover "
            "measured on any listed GPU at that precision; with no GPU listed, Auto keeps the "
            "first CUDA device"
        ),
        "crossover_vertices": crossover,
        "from_gpu": source,
    }


def write_table(sources: list[str], table_path: Path) -> dict[str, Any]:
    results = [json.loads(Path(s).read_text()) for s in sources]
    earlier = json.loads(table_path.read_text()) if table_path.exists() else None
    names = [Path(s).name for s in sources]
    table = table_from_results(results, names, earlier)
    table_path.write_text(json.dumps(table, indent=1) + "\n")
    if table_path == TABLE:
        record_measurements(results, names, table)
    return table


def record_measurements(
    results: list[dict[str, Any]], sources: list[str], table_data: dict[str, Any]
) -> None:
    """The measured rows (every size, device and precision) and the crossovers of the
    written table (all sources together), into bench/results/device_crossover.json
    (docs/benchmarks.md)."""
    rows = sorted(
        (r for result in results for r in result["rows"]),
        key=lambda r: (r["vertices"], r["device"] != "cpu", r["precision"]),
    )
    table = (
        ["vertices", "device", "precision", "fit s", "iterations", "ms per simulated frame", "outcome"],
        [
            [
                str(r["vertices"]),
                r["gpu_name"] or "CPU",
                r["precision"],
                f"{r['wall_s']:.1f}",
                str(r["iterations"]),
                f"{r['fit_ms_per_simulated_frame']:.2f}",
                r["outcome"],
            ]
            for r in rows
        ],
    )
    summary = {
        f"GPU faster from, {gpu['gpu_name']} {precision}": f"{vertices} vertices"
        for gpu in table_data["gpus"]
        for precision, vertices in sorted(gpu["crossover_vertices"].items())
    }
    hosts = {f"{r['host']['cpu']} ({r['host']['cpu_cores']} cores)" for r in results}
    gpus = sorted({g for r in results for g in r["host"]["gpus"]})
    notes = [f"host CPU: {', '.join(sorted(hosts))}", f"sources: {', '.join(sources)}"]
    record_results("device_crossover", summary, table, notes, device=", ".join(gpus))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="the results file (JSON), rewritten after each row")
    ap.add_argument("--sizes", default=SIZES, help="sheet sizes n (n x n vertices), comma separated")
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--cuda-precisions", default="float64,float32")
    ap.add_argument("--budget-s", type=float, default=300.0, help="time budget of each fit")
    ap.add_argument("--no-cpu", action="store_true", help="CUDA rows only (a part of a split run)")
    ap.add_argument("--no-cuda", action="store_true", help="CPU rows only")
    ap.add_argument("--quick", action="store_true", help="CPU only, two tiny sheets: a smoke test")
    ap.add_argument("--write-table", nargs="+", metavar="RESULT", help="write the table from these results")
    ap.add_argument("--table", type=Path, default=TABLE, help="the table --write-table writes")
    args = ap.parse_args(argv)
    if args.write_table:
        table = write_table(args.write_table, args.table)
        print(f"device_crossover: {args.table}: {len(table['gpus'])} GPU(s)")
        return
    if args.out is None:
        ap.error("--out is required (or --write-table)")
    if args.quick:
        args.sizes, args.frames, args.budget_s = QUICK["sizes"], QUICK["frames"], QUICK["budget_s"]
        args.no_cuda = True
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = run_rows(args, args.out)
    for found in result["crossovers"]:
        print(json.dumps(found))


if __name__ == "__main__":
    main()
