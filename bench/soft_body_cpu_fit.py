"""A small soft body fitted on the CPU: a 30 cm cube on a lattice of 3 x 3 x 3 cells (162
tets) dropped 10 cm onto the ground, Young's modulus and damping from 3x off, targets from
the model every 4 frames over 2 s (VBD's default 4 substeps x 10 iterations), fitted by the
default optimizer (Levenberg-Marquardt on finite differences) and by L-BFGS on the adjoint.
Also one adjoint gradient against one forward rollout of the same scene (medians of several,
taken in turn).

    python bench/soft_body_cpu_fit.py [--out result.json] [--no-record]

Times are wall clock with the kernels compiled (a warm-up fit runs first). The run is
recorded in ``bench/results/soft_body_cpu_fit.json`` unless ``--no-record``.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "core"), str(ROOT / "bench")]

from results import record  # noqa: E402
from soft_body_meshes import box_mesh  # noqa: E402

from warp_core.fit import FitProblem, FitSettings, Target, fit  # noqa: E402
from warp_core.models.soft_body import SoftBodyParams, SoftBodySimulator  # noqa: E402
from warp_core.models.soft_body.adjoint import soft_body_gradient  # noqa: E402

FRAMES = list(range(5, 50, 4))
TRUTH = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=3, ground=True)
REPEATS = 7  # forward rollouts and gradients timed, in turn; their medians are reported


def scene() -> tuple:
    mesh = box_mesh((0.0, 0.0, 0.1), (0.3, 0.3, 0.4), (3, 3, 3))
    sim = SoftBodySimulator(mesh, TRUTH)
    return mesh, sim, sim.rollout(FRAMES[-1], FRAMES).numpy()


def timed_fit(optimizer: str) -> dict:
    mesh, sim, x = scene()
    start = TRUTH.replace(young_modulus=3 * TRUTH.young_modulus, damping=3 * TRUTH.damping)
    targets = [Target(f, x[k]) for k, f in enumerate(FRAMES)]
    problem = FitProblem(mesh, start, targets, ["young_modulus", "damping"], model="soft_body")
    t = time.perf_counter()
    result = fit(problem, FitSettings(precision="float32", optimizer=optimizer))
    return {
        "optimizer": optimizer,
        "tets": sim.tet_count,
        "seconds": time.perf_counter() - t,
        "outcome": result.outcome,
        "young_modulus_error": result.params["young_modulus"] / TRUTH.young_modulus - 1.0,
        "damping_error": result.params["damping"] / TRUTH.damping - 1.0,
        "rollouts": result.n_forward,
        "backward": result.n_backward,
    }


def gradient_cost(repeats: int = REPEATS) -> dict:
    """The median of ``repeats`` forward rollouts and of as many gradients, taken in turn
    (one of each on this 2-core machine ranged from 1.27 to 1.79 in their ratio)."""
    _, sim, x = scene()
    # one gradient first, as a fit's first one: the recorded rollout's graphs are captured
    # then and kept, as the rollouts' are (a new Young's modulus keeps both)
    sim.set_params({"young_modulus": 2.5e4})
    soft_body_gradient(sim, FRAMES[-1], FRAMES, sim.rollout(FRAMES[-1], FRAMES).numpy() - x)
    sim.set_params({"young_modulus": 3e4})
    forward_s, gradient_s = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        y = sim.rollout(FRAMES[-1], FRAMES).numpy()
        forward_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        gradient = soft_body_gradient(sim, FRAMES[-1], FRAMES, y - x)
        gradient_s.append(time.perf_counter() - t)
    return {
        "forward_s": float(np.median(forward_s)),
        "gradient_s": float(np.median(gradient_s)),
        "ratio": float(np.median(gradient_s) / np.median(forward_s)),
        "ratios": [g / f for f, g in zip(forward_s, gradient_s, strict=True)],
        "repeats": repeats,
        "residual": gradient.residual,
        "solve_products": gradient.solve_products,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--no-record", action="store_true", help="do not record the run")
    args = parser.parse_args()
    wp.config.quiet = True
    timed_fit("lbfgs")  # compiles every kernel either fit runs
    out = {"lm": timed_fit("auto"), "lbfgs": timed_fit("lbfgs"), "gradient": gradient_cost()}
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.write_text(json.dumps(out, indent=2))
    if not args.no_record:
        record_run(out)
    return 0


def record_run(out: dict) -> None:
    """The fits and the gradient's cost into ``bench/results/soft_body_cpu_fit.json``."""
    headers = ["fit", "seconds", "outcome", "rollouts", "backward", "E error", "damping error"]
    rows = [
        [
            f"{name} ({fit['optimizer']})",
            f"{fit['seconds']:.1f}",
            fit["outcome"],
            str(fit["rollouts"]),
            str(fit["backward"]),
            f"{fit['young_modulus_error']:.1e}",
            f"{fit['damping_error']:.1e}",
        ]
        for name, fit in (("LM", out["lm"]), ("L-BFGS", out["lbfgs"]))
    ]
    gradient = out["gradient"]
    summary = {
        "tets": out["lm"]["tets"],
        "LM fit seconds": round(out["lm"]["seconds"], 1),
        "L-BFGS fit seconds": round(out["lbfgs"]["seconds"], 1),
        "forward rollout seconds": round(gradient["forward_s"], 3),
        "adjoint gradient seconds": round(gradient["gradient_s"], 3),
        "gradient / forward": round(gradient["ratio"], 2),
        "gradient / forward, lowest and highest of the pairs": [
            round(min(gradient["ratios"]), 2),
            round(max(gradient["ratios"]), 2),
        ],
        "step residual at the default iterations": round(gradient["residual"], 4),
    }
    notes = [
        "forward: a rollout at a new Young's modulus, after a gradient at another (every graph "
        "captured, as in a fit); gradient: the same rollout recorded, then the adjoint; each the "
        f"median of {REPEATS}, taken in turn"
    ]
    record("soft_body_cpu_fit", summary, (headers, rows), notes)


if __name__ == "__main__":
    sys.exit(main())
