"""Sewing, dynamic mesh, pressure and force fields on CUDA (float32) against the CPU (float64): the largest
vertex deviation over the rollout divided by the largest displacement, and the time per
frame on each device.

    python bench/gpu_features.py [--frames 60] [--device cuda:0] [--out result.json]

The scenes are the core tests' (two sewn panels, a sheet whose input mesh grows, a pinned
closed box under pressure, the curved sheet in a wind and a force field).
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "core")]

from test_dynamic_mesh_core import growing  # noqa: E402
from test_force_fields_core import PUSH_ROW, WIND_ROW  # noqa: E402
from test_pressure_core import box  # noqa: E402
from test_sewing_core import sewn_mesh  # noqa: E402

from warp_core import ClothParams  # noqa: E402
from warp_core.models.blender_cloth.simulator import ClothSimulator  # noqa: E402

wp.config.log_level = wp.LOG_WARNING


def scenes(frames: int):
    sim, goals = growing(True)
    scale = 1.0 + 0.03 * np.minimum(np.arange(frames), 11)  # grows for 11 frames, then holds
    v = sim.mesh.vertices
    top = v[:, 1].max()
    grown = np.stack([np.column_stack([v[:, 0] * s, top - (top - v[:, 1]) * s, v[:, 2]]) for s in scale])
    yield "sewing", sewn_mesh(), ClothParams(use_sewing_springs=True, sewing_force_max=0.5), None
    yield "dynamic mesh", sim.mesh, sim.settings, grown
    yield "pressure", box(), ClothParams(use_pressure=True, uniform_pressure_force=3.0), None
    yield "force fields", sim.mesh, ClothParams(force_fields=(WIND_ROW, PUSH_ROW)), None


def timed(mesh, params, device: str, precision: str, frames: int, goals) -> tuple[np.ndarray, float]:
    sim = ClothSimulator(mesh, params, device=device, precision=precision)
    sim.simulate(frames, None, goals)  # warm-up: compile, capture
    wp.synchronize_device(device)
    t = time.perf_counter()
    x = sim.simulate(frames, None, goals)
    wp.synchronize_device(device)
    return x, (time.perf_counter() - t) / frames


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for name, mesh, params, goals in scenes(args.frames):
        cpu, cpu_s = timed(mesh, params, "cpu", "float64", args.frames, goals)
        gpu, gpu_s = timed(mesh, params, args.device, "float32", args.frames, goals)
        displacement = float(np.linalg.norm(cpu - cpu[0], axis=-1).max())
        deviation = float(np.linalg.norm(gpu - cpu, axis=-1).max()) / displacement
        row = {
            "scene": name,
            "vertices": mesh.vertex_count,
            "displacement_m": displacement,
            "cuda_f32_vs_cpu_f64": deviation,
            "cpu_ms_per_frame": 1000 * cpu_s,
            "cuda_ms_per_frame": 1000 * gpu_s,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
