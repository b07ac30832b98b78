"""The soft body's adjoint gradient at the solver's own iteration count: does it agree with
central differences of the rollouts VBD actually makes, and what does it cost?

The adjoint (``warp_core.models.soft_body.adjoint``) differentiates the converged implicit
step; VBD stops after a fixed number of iterations (``SoftBodyParams.iterations``, 10 by
default), short of it, so the gradient is that of a slightly different rollout. On random
bodies hanging from a swinging hold or dropped onto the ground (box or sphere, materials
and sizes drawn as in ``soft_body_robustness.py``), at two start points each (3x
softer and 3x stiffer than the targets' hidden values, damping likewise), the loss
0.5 |x - targets|^2 over three frames is differentiated by the adjoint and by central
differences at +-1 % of each parameter (Young's modulus, Poisson ratio, damping time,
density). Records the share of entries whose sign agrees and of those within 2x, the
largest step residual, and the times of one rollout and of one adjoint.

    python bench/soft_body_gradients.py [--seed 1] [--scenes 20] [--iterations 10] [--out F]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "core")]

from soft_body_meshes import box_mesh, sphere_mesh  # noqa: E402

from warp_core.models.soft_body import PARAMETER_NAMES, SoftBodyParams, SoftBodySimulator  # noqa: E402
from warp_core.models.soft_body.adjoint import soft_body_gradient  # noqa: E402

STEP = 0.01  # central differences at +-1 % of each parameter
STARTS = (1.0 / 3.0, 3.0)  # start stiffness and damping as a multiple of the hidden values


def scene(rng: np.random.Generator, iterations: int) -> tuple:
    """(description, mesh, hidden params, goals or None, loss frames): a body hanging from a
    swinging hold, or dropped onto the ground (as ``soft_body_robustness.py`` draws them)."""
    size = float(rng.uniform(0.15, 0.4))
    hang = bool(rng.random() < 0.35)
    if rng.random() < 0.5:
        mesh = box_mesh((-size / 2, -size / 2, 0.0), (size / 2, size / 2, size), (2, 2, 2))
        kind = "box"
    else:
        mesh, kind = sphere_mesh(size / 2, 8, 12, centre=(0.0, 0.0, size / 2)), "sphere"
    if hang:
        mesh.pin_weights = (mesh.vertices[:, 2] > size * (1.0 - 1e-6 if kind == "box" else 0.9)).astype(float)
    drop = 0.0 if hang else float(rng.uniform(0.05, 0.3))
    mesh.vertices[:, 2] += drop
    truth = SoftBodyParams(
        young_modulus=float(np.exp(rng.uniform(np.log(5e3), np.log(5e5)))),
        poisson_ratio=float(rng.uniform(0.1, 0.45)),
        damping=float(np.exp(rng.uniform(np.log(0.003), np.log(0.05)))),
        density=float(rng.uniform(500.0, 2000.0)),
        lattice_cells=int(rng.integers(3, 6)),
        iterations=iterations,
        ground=not hang,
    )
    last = int(rng.integers(16, 31))
    frames = sorted({int(f) for f in np.linspace(last / 3, last, 3)})
    goals = None
    if hang:
        swing = float(rng.uniform(0.02, 0.1)) * size / 0.2
        goals = np.repeat(mesh.vertices[None], last + 1, axis=0)
        goals[:, :, 0] += swing * np.sin(np.linspace(0.0, float(rng.uniform(2.0, 6.0)), last + 1))[:, None]
    text = (
        f"{kind} {'hanging' if hang else f'dropped {drop:.2f} m'}, {size:.2f} m, {truth.lattice_cells} cells"
    )
    return text, mesh, truth, goals, frames


def measure(mesh, truth: SoftBodyParams, goals: np.ndarray | None, frames: list[int], factor: float) -> dict:
    sim = SoftBodySimulator(mesh, truth)
    targets = sim.rollout(frames[-1], frames, goals).numpy()
    start = truth.values()
    start.update(young_modulus=truth.young_modulus * factor, damping=truth.damping * factor)
    sim.set_params(start)

    def loss(values: dict[str, float]) -> tuple[float, np.ndarray]:
        sim.set_params(values)
        x = sim.rollout(frames[-1], frames, goals).numpy()
        return 0.5 * float(np.sum((x - targets) ** 2)), x

    t = time.perf_counter()
    _, x = loss(start)
    forward_s = time.perf_counter() - t
    t = time.perf_counter()
    gradient = soft_body_gradient(sim, frames[-1], frames, x - targets, goals)
    adjoint_s = time.perf_counter() - t
    rows = {}
    for name in PARAMETER_NAMES:
        h = STEP * start[name]
        up, down = loss({**start, name: start[name] + h})[0], loss({**start, name: start[name] - h})[0]
        rows[name] = {"adjoint": gradient.parameters[name], "difference": (up - down) / (2.0 * h)}
    return {
        "gradients": rows,
        "residual": gradient.residual,
        "solve_products": gradient.solve_products,
        "forward_s": forward_s,
        "adjoint_s": adjoint_s,
    }


def agreement(rows: list[dict]) -> tuple[float, float]:
    """Shares of entries whose sign agrees, and of those within 2x of the difference."""
    pairs = [(g["adjoint"], g["difference"]) for r in rows for g in r["gradients"].values()]
    sign = np.mean([np.sign(a) == np.sign(d) for a, d in pairs])
    within = np.mean([d != 0.0 and 0.5 <= a / d <= 2.0 for a, d in pairs])
    return float(sign), float(within)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenes", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=SoftBodyParams().iterations)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    for k in range(args.scenes):
        text, mesh, truth, goals, frames = scene(rng, args.iterations)
        for factor in STARTS:
            row = {"scene": text, "start_factor": factor, **measure(mesh, truth, goals, frames, factor)}
            rows.append(row)
            ratios = " ".join(
                f"{n[:4]} {g['adjoint'] / g['difference']:+.3f}" if g["difference"] else f"{n[:4]} -"
                for n, g in row["gradients"].items()
            )
            print(
                f"{k:2d} {text:42s} x{factor:.2f}: {ratios}  residual {row['residual']:.1e} "
                f"forward {row['forward_s']:.2f} s adjoint {row['adjoint_s']:.2f} s",
                flush=True,
            )
    sign, within = agreement(rows)
    ratio = np.median([r["adjoint_s"] / r["forward_s"] for r in rows])
    summary = {
        "entries": len(rows) * len(PARAMETER_NAMES),
        "sign_agreement": sign,
        "within_2x": within,
        "worst_residual": max(r["residual"] for r in rows),
        "median_adjoint_over_forward": float(ratio),
    }
    print(json.dumps(summary))
    if args.out is not None:
        args.out.write_text(
            json.dumps({"iterations": args.iterations, "summary": summary, "rows": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
