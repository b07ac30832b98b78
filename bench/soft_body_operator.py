"""The panel operator on a soft body of more than 10,000 tets (CPU, the real bpy module): a cube
dropped on the ground, targets from the model at hidden values, Young's modulus and damping
fitted from 3x off, written back, baked, and the Mesh Cache playback compared with the model.

    .venv/bin/python bench/soft_body_operator.py [--cells 12] [--out result.json]

At 12 lattice cells along its side the cube is 12^3 cells of 6 tets: 10,368 tets.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "blender")]

import blender_env  # noqa: E402,I001  (sets up an isolated Blender profile before bpy)
import bpy  # noqa: E402
import numpy as np  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cells", type=int, default=12)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    blender_env.import_addon_package().register()
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    from addon_scenes import model_trajectory, playback
    from soft_body_scenes import add_targets, select_only, soft_object

    truth = {"young_modulus": 2.0e4, "damping": 0.02}
    frames = [8, 14, 20, 30]
    ob = soft_object("cube", cells=args.cells)
    values = ob.fit_to_target_soft_body
    for k, v in truth.items():
        setattr(values, k, v)
    t = time.perf_counter()
    add_targets(ob, model_trajectory(ob, max(frames)), frames)
    rollout_s = time.perf_counter() - t
    values.young_modulus, values.damping = 3.0 * truth["young_modulus"], truth["damping"] / 3.0
    ob.fit_to_target.fit_young_modulus = ob.fit_to_target.fit_damping = True
    select_only(ob)
    t = time.perf_counter()
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    fit_s = time.perf_counter() - t
    record = json.loads(ob.fit_to_target.result_json)
    written = {k: float(getattr(values, k)) for k in truth}
    assert bpy.ops.object.fit_to_target_bake() == {"FINISHED"}
    all_frames = list(range(1, bpy.context.scene.frame_end + 1))
    played = playback(ob, all_frames)
    expected = model_trajectory(ob, all_frames[-1])
    out = {
        "tets": record["geometry"]["tets"],
        "worst_quality": record["geometry"]["worst_quality"],
        "rollout_s": rollout_s,
        "fit_s": fit_s,
        "rollouts": record["n_forward"],
        "outcome": record["outcome"],
        "errors": {k: record["params"][k] / v - 1.0 for k, v in truth.items()},
        "written": written,
        "rmse_m": record["rmse_m"],
        "initial_rmse_m": record["initial_rmse_m"],
        "playback_vs_model_m": float(np.abs(played - expected).max()),
    }
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
