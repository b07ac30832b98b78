"""Fits through cloth self-collision (the real bpy module, CPU, float64): targets made by
Blender's own cloth at hidden values (tension 40, bending 2, compression tied to tension's
start), fitted from Blender's defaults (15, 0.5) on the add-on's exported inputs, then the
fitted values written back and the scene replayed by Blender from scratch.

    .venv/bin/python bench/self_collision_fit.py [--scenes sleeve_collapses_on_ground,...]
                                                 [--frames 20,40,60]

Scenes (``tests/blender/self_collision_scenes.py``): a sleeve collapsing on the ground (not
chaotic: Blender's own 1 um spread 0.19 % of the motion) and a sheet folding onto itself
on the ground (chaotic: 1.98 %). The fit must replay within 1 mm where Blender is not
chaotic, and must not call a chaotic one converged.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "blender"), str(ROOT / "bench")]

import blender_env  # noqa: E402,I001  (sets up an isolated Blender profile before bpy)
import bpy  # noqa: E402
from results import record as record_results  # noqa: E402

SCENES = ("sleeve_collapses_on_ground", "sheet_folds_on_ground")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenes", default=",".join(SCENES))
    parser.add_argument("--frames", default="20,40,60")
    args = parser.parse_args()
    blender_env.import_addon_package().register()
    import self_collision_scenes
    from test_collision_fit import TRUTH, fit_scene, replay_rmse

    frames = [int(f) for f in args.frames.split(",")]
    rows = {}
    for name in args.scenes.split(","):
        build = getattr(self_collision_scenes, name)
        bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
        start = time.perf_counter()
        _, _, targets, result = fit_scene(build, frames)
        fit_s = time.perf_counter() - start
        # a fresh scene: once its timeline has run, Blender's next run from the start differs
        bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
        scene, ob = build()
        replay = replay_rmse(scene, ob, result.params, targets)
        rows[name] = {
            "truth": TRUTH,
            "fitted": result.params,
            "outcome": result.outcome,
            "outcome_reason": result.outcome_reason,
            "rmse_mm": 1e3 * result.rmse,
            "tolerance_mm": 1e3 * result.tolerance,
            "motion_mm": 1e3 * result.motion,
            "replay_rmse_mm": 1e3 * replay,
            "iterations": result.iterations,
            "fit_s": fit_s,
        }
        print(json.dumps({name: rows[name]}, indent=1), flush=True)
    headers = ["scene", "fitted", "outcome", "fit RMSE mm", "tolerance mm", "Blender replay mm", "fit s"]
    table = [
        [
            name,
            ", ".join(f"{k} {v:.4g}" for k, v in row["fitted"].items()),
            row["outcome"],
            f"{row['rmse_mm']:.4g}",
            f"{row['tolerance_mm']:.4g}",
            f"{row['replay_rmse_mm']:.4g}",
            f"{row['fit_s']:.0f}",
        ]
        for name, row in rows.items()
    ]
    summary = {"frames": frames, "hidden": TRUTH, "start": "Blender's defaults (tension 15, bending 0.5)"}
    notes = [f"{name}: {row['outcome_reason']}" for name, row in rows.items()]
    record_results("self_collision_fit", summary, (headers, table), notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
