"""Time to a target RMSE on the CPU: this fit against Nelder–Mead driving Blender's own cloth.

    python bench/vs_blender.py [--grids 12,30] [--target-mm 0.01] [--repeats 3] [--out FILE.json]

Each scene is the demo's cantilever (``assets/make_demo.py``: a 1 m cloth clamped along two
rows, targets at frames 10, 20 and 30 made by Blender at tension = compression 40, bending 2)
with GRID x GRID vertices. Both searches start from Blender's defaults (15, 15, 0.5) over the
same two values in log space (compression tied to tension):

* Nelder–Mead (scipy) sets the modifier, steps Blender's cloth frame by frame from the cache
  start and scores the RMSE at the target frames; its time is the wall time until its first
  simulation within the target;
* this fit: the add-on's exported problem on the CPU in float64, told to stop refining at
  the target (``FitSettings.rmse_tolerance_m``); its time includes the global phase, as a
  user's run would. The Warp kernel cache is warmed by one untimed fit first.

Also the median time of one simulation each way (Blender's cloth over the 30 frames; this
model's rollout over the same frames). Medians over ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import bpy
import numpy as np
from robustness_blender import AddonSide, add_targets, load_addon_side, mesh_object, run_cloth
from scipy.optimize import minimize

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "assets"))
import make_demo  # noqa: E402

START = {"tension_stiffness": 15.0, "compression_stiffness": 15.0, "bending_stiffness": 0.5}


class Reached(Exception):
    """Nelder–Mead's first simulation within the target."""


def build_scene(grid: int, side: AddonSide) -> bpy.types.Object:
    """The demo's cantilever at ``grid`` x ``grid`` vertices, targets from Blender at the truth,
    the modifier back at Blender's defaults and the fit's parameters chosen."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, make_demo.FRAME_END
    verts, faces = make_demo.grid(grid)
    ob = mesh_object("Cloth", verts, faces)
    clamp = ob.vertex_groups.new(name="Clamp")
    rows = np.unique(np.round(verts[:, 1], 9))[-make_demo.CLAMPED_ROWS :]
    clamp.add(np.flatnonzero(np.isin(np.round(verts[:, 1], 9), rows)).tolist(), 1.0, "REPLACE")
    mod = ob.modifiers.new("Cloth", "CLOTH")
    mod.settings.vertex_group_mass = clamp.name
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, make_demo.FRAME_END
    frames = list(make_demo.TARGET_FRAMES)
    side.cloth_scene.set_modifier_values(mod, make_demo.TRUE_VALUES)
    shapes = run_cloth(ob, frames, side)
    side.cloth_scene.set_modifier_values(mod, START)
    add_targets(ob, shapes, faces, frames)
    s = ob.fit_to_target
    s.fit_tension_stiffness = s.fit_bending_stiffness = s.tie_compression = True
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    return ob


def blender_rmse(ob: bpy.types.Object, side: AddonSide, values: dict[str, float], targets: dict) -> float:
    side.cloth_scene.set_modifier_values(side.cloth_scene.find_cloth_modifier(ob), values)
    shapes = run_cloth(ob, sorted(targets), side)
    errors = np.concatenate([np.linalg.norm(shapes[f] - t, axis=1) for f, t in targets.items()])
    return float(math.sqrt(np.mean(errors**2)))


def nelder_mead(ob: bpy.types.Object, side: AddonSide, targets: dict, target_m: float) -> dict:
    """Seconds and simulations of scipy's Nelder–Mead through Blender until the target."""
    sims = 0
    t0 = time.perf_counter()

    def loss(z: np.ndarray) -> float:
        nonlocal sims
        tension, bending = float(np.exp(z[0])), float(np.exp(z[1]))
        values = {
            "tension_stiffness": tension,
            "compression_stiffness": tension,
            "bending_stiffness": bending,
        }
        rmse = blender_rmse(ob, side, values, targets)
        sims += 1
        if rmse <= target_m:
            raise Reached
        return rmse

    z0 = np.log([START["tension_stiffness"], START["bending_stiffness"]])
    try:
        minimize(loss, z0, method="Nelder-Mead", options={"maxfev": 2000, "xatol": 1e-12, "fatol": 1e-14})
        reached = False
    except Reached:
        reached = True
    return {"seconds": time.perf_counter() - t0, "simulations": sims, "reached": reached}


def fit_problem(ob: bpy.types.Object, side: AddonSide):
    """The fit problem the add-on exports from the scene (read from Blender once)."""
    request = side.request.request_from_object(ob)
    request.device = "cpu"
    return side.prepare.prepare_fit(bpy.context.scene, ob, request).problem


def our_fit(problem, side: AddonSide, target_m: float) -> dict:
    """Seconds, simulations and RMSE of this fit, stopping at the target."""
    settings = side.fit.FitSettings(device="cpu", rmse_tolerance_m=target_m)
    t0 = time.perf_counter()
    result = side.fit.fit(problem, settings)
    return {
        "seconds": time.perf_counter() - t0,
        "simulations": result.n_forward,
        "rmse_m": result.rmse,
        "reached": result.rmse <= target_m,
    }


def one_simulation(ob: bpy.types.Object, side: AddonSide, problem, targets: dict, repeats: int) -> dict:
    """Median seconds of one simulation at the start values: Blender's cloth, this model."""
    blender = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        blender_rmse(ob, side, START, targets)
        blender.append(time.perf_counter() - t0)
    sim = side.fit.FitObjective(problem, side.fit.FitSettings(device="cpu"), []).sim
    frames = [t.frame for t in problem.targets]
    ours = []
    for _ in range(repeats + 1):  # the first run builds the captured graphs
        t0 = time.perf_counter()
        sim.rollout(problem.frame_end, frames, problem.goals).numpy()
        ours.append(time.perf_counter() - t0)
    return {"blender_s": statistics.median(blender), "model_s": statistics.median(ours[1:])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grids", default="12,30", help="vertices per side, comma-separated")
    ap.add_argument("--target-mm", type=float, default=0.01)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    side = load_addon_side()
    target = args.target_mm * 1e-3
    rows = []
    for grid in [int(g) for g in args.grids.split(",")]:
        ob = build_scene(grid, side)
        targets = _targets(ob, side)
        problem = fit_problem(ob, side)
        our_fit(problem, side, target)  # warms the kernel cache
        fits = [our_fit(problem, side, target) for _ in range(args.repeats)]
        searches = [nelder_mead(ob, side, targets, target) for _ in range(args.repeats)]
        sim = one_simulation(ob, side, problem, targets, args.repeats)
        row = {
            "grid": grid,
            "fit_s": statistics.median(f["seconds"] for f in fits),
            "fit_simulations": fits[0]["simulations"],
            "fit_reached": all(f["reached"] for f in fits),
            "nelder_mead_s": statistics.median(s["seconds"] for s in searches),
            "nelder_mead_simulations": searches[0]["simulations"],
            "nelder_mead_reached": all(s["reached"] for s in searches),
            **sim,
        }
        row["fit_over_nelder_mead"] = row["fit_s"] / row["nelder_mead_s"]
        row["model_over_blender"] = row["model_s"] / row["blender_s"]
        rows.append(row)
        print(
            f"{grid} x {grid}: fit {row['fit_s']:.2f} s ({row['fit_simulations']} simulations, reached "
            f"{row['fit_reached']}); Nelder-Mead through Blender {row['nelder_mead_s']:.2f} s "
            f"({row['nelder_mead_simulations']} simulations, reached {row['nelder_mead_reached']}); "
            f"ratio {row['fit_over_nelder_mead']:.2f}. One simulation: Blender "
            f"{1e3 * row['blender_s']:.1f} ms, this model {1e3 * row['model_s']:.1f} ms "
            f"(ratio {row['model_over_blender']:.2f})"
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


def _targets(ob: bpy.types.Object, side: AddonSide) -> dict[int, np.ndarray]:
    """The fit's target meshes by frame, world space."""
    out = {}
    for item in ob.fit_to_target.targets:
        target = item.object
        matrix = side.mesh_read.object_matrix(target)
        out[int(item.frame)] = side.mesh_read.world_positions(target.data.vertices, matrix)
    return out


if __name__ == "__main__":
    sys.exit(main())
