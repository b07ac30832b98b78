"""Per-region soft-body stiffness on the CPU: where does the adjoint gradient beat finite
differences? A 10 x 10 cm bar hanging from its top face and swung 8 cm sideways, painted in
N equal slices along its length, each of a hidden Young's modulus (1e4 to 5e4 Pa), fitted
back from the default 1e5 everywhere by Levenberg-Marquardt (a Jacobian of central
differences: 2N rollouts) and by L-BFGS on the adjoint (a rollout and a gradient a step).

    python bench/soft_body_regions.py [--regions 3,6,9] [--seed N] [--fits lm,lbfgs] [--iterations N]
        [--out result.json] [--no-record]
    python bench/soft_body_regions.py --record-from result.json [--seed N]  (record a run's --out)

``--fits`` also takes ``lm-tangents``: Levenberg-Marquardt on the model's forward tangents (one
recorded rollout a Jacobian), which are the derivatives of each step's root: give VBD
``--iterations`` enough that the bars' steps converge (100: a 4-cell bar's tangents within
7e-4 of its rollouts' differences; at the default 10 they part by 0.5 and more).
``--seed`` draws each bar's hidden moduli (log-uniform over the same range), its swing
(5-10 cm) and how far it swings (3-5 radians of a sine) instead of the fixed pattern.

Times are wall clock on this machine with the kernels compiled (a warm-up fit runs first).
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
from soft_body_meshes import box_mesh, swinging_goals  # noqa: E402

from warp_core.fit import FitProblem, FitSettings, Target, fit  # noqa: E402
from warp_core.fit.problem.maps import MapSpec  # noqa: E402
from warp_core.models.soft_body import SoftBodyParams, SoftBodySimulator  # noqa: E402

FRAMES_N = 12
CELLS_PER_REGION = 2  # lattice cells along the bar in each painted slice
E_LOW, E_HIGH = 1e4, 5e4
# the regions' hidden moduli, in turn along the bar: every contrast up to 5x
PATTERN = (1.0, 5.0, 2.5, 1.6, 4.0, 2.0, 3.2, 1.3, 4.5)


FITS = {"lm": ("lm", "differences"), "lbfgs": ("lbfgs", "differences"), "lm-tangents": ("lm", "tangents")}
LABELS = {"lm": "LM", "lbfgs": "L-BFGS", "lm-tangents": "LM on tangents"}


def problem(
    regions: int, rng: np.random.Generator | None = None, iterations: int | None = None
) -> tuple[FitProblem, dict[str, float]]:
    """The bar of ``regions`` slices and the hidden modulus of each (drawn by ``rng``, with
    the swing, where given)."""
    length = 0.05 * CELLS_PER_REGION * regions
    mesh = box_mesh(
        (0.0, 0.0, -length),
        (0.1, 0.1, 0.0),
        (1, 1, CELLS_PER_REGION * regions),
        pin=lambda v: v[:, 2] > -1e-9,
    )
    depth = -mesh.vertices[:, 2]
    slice_m = length / regions
    index = np.minimum((depth / slice_m + 1e-9).astype(int), regions - 1)
    weights = {f"r{k}": (index == k) * 1.0 for k in range(regions)}
    reach, turns = 0.08, 4.0
    factors = [PATTERN[k % len(PATTERN)] for k in range(regions)]
    if rng is not None:
        factors = list(np.exp(rng.uniform(0.0, np.log(E_HIGH / E_LOW), regions)))
        reach, turns = rng.uniform(0.05, 0.10), rng.uniform(3.0, 5.0)
    truth = {f"r{k}": E_LOW * float(factors[k]) for k in range(regions)}
    stiffness = sum(truth[k] * w for k, w in weights.items())
    mesh.young_modulus_weight = (stiffness - E_LOW) / (E_HIGH - E_LOW)
    cells = CELLS_PER_REGION * regions
    base = SoftBodyParams(damping=0.02, lattice_cells=cells)
    if iterations is not None:
        base = base.replace(iterations=iterations)
    hidden = base.replace(young_modulus=E_LOW, young_modulus_max=E_HIGH)
    goals = swinging_goals(mesh, FRAMES_N, reach, turns)
    frames = list(range(3, FRAMES_N + 2, 2))
    x = SoftBodySimulator(mesh, hidden).rollout(1 + FRAMES_N, frames, goals).numpy()
    mesh.young_modulus_weight = None
    fit_problem = FitProblem(
        mesh,
        base,
        [Target(f, x[k]) for k, f in enumerate(frames)],
        [],
        model="soft_body",
        goals=goals,
        maps=[MapSpec("stiffness", weights)],
    )
    return fit_problem, truth


def timed_fit(regions: int, kind: str, seed: int | None = None, iterations: int | None = None) -> dict:
    rng = None if seed is None else np.random.default_rng([seed, regions])
    fit_problem, truth = problem(regions, rng, iterations)
    optimizer, jacobian = FITS[kind]
    settings = FitSettings(precision="float32", optimizer=optimizer, jacobian=jacobian, max_iterations=100)
    t = time.perf_counter()
    result = fit(fit_problem, settings)
    seconds = time.perf_counter() - t
    errors = [result.params[f"stiffness:{name}"] / value - 1.0 for name, value in truth.items()]
    undetermined = [
        n for n, e in result.summary()["maps"]["stiffness"]["regions"].items() if not e["determined"]
    ]
    return {
        "regions": regions,
        "optimizer": kind,
        "iterations": fit_problem.model_settings.iterations,
        "seconds": seconds,
        "outcome": result.outcome,
        "largest_error": float(np.max(np.abs(errors))),
        "undetermined": undetermined,
        "rollouts": result.n_forward,
        "backward": result.n_backward,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--regions", default="3,6,9")
    parser.add_argument("--seed", type=int, help="draw the bars' moduli and swings (default: fixed)")
    parser.add_argument("--fits", default="lm,lbfgs", help=f"comma-separated, of {', '.join(FITS)}")
    parser.add_argument("--iterations", type=int, help="VBD iterations a substep (default: the model's)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--no-record", action="store_true", help="do not record the run")
    parser.add_argument("--record-from", type=Path, help="record the runs a --out file holds, and stop")
    args = parser.parse_args()
    if args.record_from is not None:
        record_runs(json.loads(args.record_from.read_text()), args.seed)
        return 0
    wp.config.quiet = True
    counts = [int(n) for n in args.regions.split(",")]
    kinds = args.fits.split(",")
    for kind in kinds:
        if kind not in FITS:
            parser.error(f"unknown fit {kind!r} (choose from {', '.join(FITS)})")
    for kind in kinds:
        if kind != "lm" or len(kinds) == 1:  # compiles every kernel the fits run
            timed_fit(counts[0], kind, iterations=args.iterations)
    runs = []
    for n in counts:
        for kind in kinds:
            run = timed_fit(n, kind, args.seed, args.iterations)
            runs.append(run)
            print(json.dumps(run), flush=True)
    if args.out:
        args.out.write_text(json.dumps(runs, indent=2))
    if not args.no_record:
        record_runs(runs, args.seed)
    return 0


def record_runs(runs: list[dict], seed: int | None = None) -> None:
    """The fits into ``bench/results/soft_body_regions.json`` and the benchmarks page."""
    headers = ["regions", "fit", "seconds", "outcome", "largest region error", "rollouts", "backward"]
    rows = [
        [
            str(r["regions"]),
            LABELS[r["optimizer"]],
            f"{r['seconds']:.1f}",
            r["outcome"],
            f"{r['largest_error']:.1e}",
            str(r["rollouts"]),
            str(r["backward"]),
        ]
        for r in runs
    ]
    by = {(r["regions"], r["optimizer"]): r["seconds"] for r in runs}
    summary: dict = {
        f"{n} regions: {LABELS[kind]} / LM time": round(by[(n, kind)] / by[(n, "lm")], 2)
        for n in sorted({r["regions"] for r in runs})
        for kind in FITS
        if kind != "lm" and (n, kind) in by and (n, "lm") in by
    }
    for kind, name in LABELS.items():
        mine = [r for r in runs if r["optimizer"] == kind]
        if not mine:
            continue
        converged = sum(r["outcome"] == "converged" for r in mine)
        seconds = sum(r["seconds"] for r in mine)
        summary[f"{name}: converged, seconds in all"] = f"{converged} of {len(mine)}, {seconds:.1f}"
    record(
        "soft_body_regions",
        summary,
        (headers, rows),
        [
            f"frames: {FRAMES_N}, {CELLS_PER_REGION} cells a region",
            "hidden moduli and swings: " + ("the fixed pattern" if seed is None else f"drawn, seed {seed}"),
            f"VBD iterations a substep: {runs[0].get('iterations', 'the default')}",
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
