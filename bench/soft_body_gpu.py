"""The soft-body model on a GPU: a cantilever against Euler-Bernoulli, the forward time of a
54k-tet body against Newton's own VBD loop on the same model, a two-parameter fit of a
50k-tet body and a fit of its three painted regions' stiffness, one adjoint gradient against
one forward rollout, and CUDA against the CPU on a small body with a moving collider.

    python bench/soft_body_gpu.py [--device cuda:0] [--out result.json] [--skip cantilever,...]

Everything is float32 (Newton's VBD). Times are wall clock after a warm-up (kernels compiled
and the frame's CUDA graph captured): a simulator's later rollouts, which is what a fit runs.
The fits are timed after the same fits of a coarse slab, which load every kernel they launch.
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

import newton  # noqa: E402
from soft_body_meshes import box_mesh, rising_plate  # noqa: E402

from warp_core.fit import FitProblem, FitSettings, Target, fit  # noqa: E402
from warp_core.fit.problem.maps import MapSpec  # noqa: E402
from warp_core.models.soft_body import SoftBodyParams, SoftBodySimulator  # noqa: E402
from warp_core.models.soft_body.adjoint import soft_body_gradient  # noqa: E402

RHO, G = 1000.0, 9.81
WARM_UP_BUDGET_S = 5.0  # the coarse fits' first Jacobian launches every kernel a fit does
FIT_BUDGET_S = 240.0  # the fit stops there (outcome "budget") rather than run on


def static_offset(d: np.ndarray, fps: float) -> tuple[float, float]:
    """(s, w) of the least-squares d(t) = s + a cos(w t) + b sin(w t), w scanned: the
    position an undamped oscillation about a static state oscillates about."""
    t = np.arange(len(d)) / fps
    best = None
    for w in np.linspace(5.0, 120.0, 461):
        basis = np.stack([np.ones_like(t), np.cos(w * t), np.sin(w * t)], axis=1)
        c = np.linalg.lstsq(basis, d, rcond=None)[0]
        r = float(np.sum((basis @ c - d) ** 2))
        if best is None or r < best[0]:
            best = (r, float(c[0]), float(w))
    return best[1], best[2]


def cantilever(device: str) -> dict:
    """A 1 m cantilever of 10 x 10 cm clamped at one end face, under its own weight: tip
    deflection q L^4 / (8 E I) = 15 mm (E = 98.1 MPa, nu = 0).

    Linear tets lock in bending: linear elasticity solved exactly on this kind of lattice gives
    0.852 of Euler-Bernoulli with 4 cells through the thickness and 0.932 with 6; here 10
    (100 x 10 x 10 cells, 12,221 nodes, 60,000 tets). VBD's Gauss-Seidel sweeps do not settle a
    slender stiff bar to rest (damping makes them sink it too far), so the bar runs undamped
    from rest at 240 fps, 100 substeps of 20 iterations, 96 frames (2.7 periods), and the
    offset its tip oscillates about is the static deflection."""
    length, thick, n = 1.0, 0.1, 100
    k = round(n * thick / length)
    e = 1.5 * RHO * G * length**4 / (thick**2 * 0.015 * length)
    mesh = box_mesh((0.0, 0.0, 0.0), (length, thick, thick), (n, k, k), pin=lambda v: v[:, 0] < 1e-9)
    fps = 240.0
    params = SoftBodyParams(
        young_modulus=e,
        poisson_ratio=0.0,
        damping=0.0,
        density=RHO,
        substeps=100,
        iterations=20,
        lattice_cells=n,
        fps=fps,
        gravity=(0.0, 0.0, -G),
    )
    t = time.perf_counter()
    sim = SoftBodySimulator(mesh, params, device=device)
    x = sim.rollout(1 + 96).numpy()
    seconds = time.perf_counter() - t
    tip = np.abs(mesh.vertices[:, 0] - length) < 1e-9
    d = -(x[:, tip, 2].mean(axis=1) - mesh.vertices[tip, 2].mean())
    i = thick**4 / 12.0
    eb = RHO * G * thick * thick * length**4 / (8.0 * e * i)
    offset, omega = static_offset(d, fps)
    omega_eb = 1.875**2 * np.sqrt(e * i / (RHO * thick * thick * length**4))
    return {
        "tets": sim.tet_count,
        "nodes": sim.node_count,
        "seconds": seconds,
        "deflection_over_euler_bernoulli": offset / eb,
        "frequency_over_euler_bernoulli": omega / omega_eb,
        "within_5_percent": bool(abs(offset / eb - 1.0) <= 0.05),
    }


def slab(cells: int) -> tuple:
    """A 1.5 x 1.5 x 0.5 m slab 0.2 m above the ground on a lattice of ``cells`` along its
    side (30: 30 x 30 x 10 cells, 54,000 tets), and its settings: 4 substeps x 10 iterations."""
    mesh = box_mesh((-0.75, -0.75, 0.2), (0.75, 0.75, 0.7), (6, 6, 2))
    params = SoftBodyParams(
        young_modulus=1e5,
        poisson_ratio=0.3,
        damping=0.01,
        substeps=4,
        iterations=10,
        lattice_cells=cells,
        ground=True,
        ground_height=0.0,
    )
    return mesh, params


def newton_loop(model: "newton.Model", substeps: int, iterations: int, frames: int, device: str) -> float:
    """Newton's own step loop (its examples' pattern, default solver options, collision every
    substep, one frame captured as a CUDA graph) on ``model``: seconds per frame."""
    solver = newton.solvers.SolverVBD(model, iterations=iterations)
    pipe = newton.CollisionPipeline(model) if model.shape_count else None
    contacts = pipe.contacts() if pipe else None
    states = [model.state(), model.state()]
    control = model.control()
    dt = 1.0 / (24.0 * substeps)

    def frame() -> None:
        for _ in range(substeps):
            s0, s1 = states
            s0.clear_forces()
            if pipe:
                pipe.collide(s0, contacts)
            solver.step(s0, s1, control, contacts, dt)
            states.reverse()

    frame()
    with wp.ScopedCapture(device=device) as capture:
        frame()
    for _ in range(3):
        wp.capture_launch(capture.graph)
    wp.synchronize_device(device)
    t = time.perf_counter()
    for _ in range(frames):
        wp.capture_launch(capture.graph)
    wp.synchronize_device(device)
    return (time.perf_counter() - t) / frames


def forward(device: str, frames: int = 60) -> dict:
    mesh, params = slab(30)
    sim = SoftBodySimulator(mesh, params, device=device)
    sim.rollout(4)  # compile, size Newton's buffers, capture
    sim.rollout(1 + frames, [1 + frames])
    wp.synchronize_device(device)
    t = time.perf_counter()
    sim.rollout(1 + frames, [1 + frames])
    wp.synchronize_device(device)
    ours = (time.perf_counter() - t) / frames
    bare = newton_loop(sim.scene.model, params.substeps, params.iterations, frames, device)
    return {
        "tets": sim.tet_count,
        "nodes": sim.node_count,
        "frames": frames,
        "ours_ms_per_frame": ours * 1e3,
        "newton_ms_per_frame": bare * 1e3,
        "ratio": ours / bare,
    }


def two_parameter_fit(device: str, cells: int = 28, budget_s: float = FIT_BUDGET_S) -> dict:
    """Young's modulus and damping of the slab dropped on the ground, from 3x off, targets
    from the model at frames 10, 20 and 30 (the rollouts run to frame 30)."""
    mesh, truth = slab(cells)
    frames = [10, 20, 30]
    sim = SoftBodySimulator(mesh, truth, device=device)
    x = sim.rollout(30, frames).numpy()  # the targets
    start = truth.replace(young_modulus=3 * truth.young_modulus, damping=truth.damping / 3)
    problem = FitProblem(
        mesh,
        start,
        [Target(f, x[k]) for k, f in enumerate(frames)],
        ["young_modulus", "damping"],
        model="soft_body",
    )
    t = time.perf_counter()
    result = fit(problem, FitSettings(device=device, precision="float32", time_budget_s=budget_s))
    seconds = time.perf_counter() - t
    return {
        "tets": sim.tet_count,
        "seconds": seconds,
        "outcome": result.outcome,
        "young_modulus_error": result.params["young_modulus"] / truth.young_modulus - 1.0,
        "damping_error": result.params["damping"] / truth.damping - 1.0,
        "rmse_m": result.rmse,
        "rollouts": result.n_forward,
        "jacobian": result.jacobian,
    }


REGION_YOUNG_MODULUS = (5e4, 2.5e5, 1e5)  # the slab's thirds along x: a 5x contrast


def three_region_fit(
    device: str, optimizer: str = "auto", cells: int = 28, budget_s: float = FIT_BUDGET_S
) -> dict:
    """The slab of :func:`two_parameter_fit` painted in three thirds along x of hidden Young's
    modulus ``REGION_YOUNG_MODULUS``, fitted from the default 1e5 everywhere (the regions'
    values only), targets at frames 10, 20 and 30."""
    mesh, truth = slab(cells)
    third = np.minimum(((mesh.vertices[:, 0] + 0.75) / 0.5 + 1e-6).astype(int), 2)
    regions = {f"r{k}": (third == k) * 1.0 for k in range(3)}
    hidden = np.array(REGION_YOUNG_MODULUS)[third]
    lo, hi = hidden.min(), hidden.max()
    mesh.young_modulus_weight = (hidden - lo) / (hi - lo)
    frames = [10, 20, 30]
    sim = SoftBodySimulator(mesh, truth.replace(young_modulus=lo, young_modulus_max=hi), device=device)
    x = sim.rollout(30, frames).numpy()
    mesh.young_modulus_weight = None
    problem = FitProblem(
        mesh,
        truth,
        [Target(f, x[k]) for k, f in enumerate(frames)],
        [],
        model="soft_body",
        maps=[MapSpec("stiffness", regions)],
    )
    settings = FitSettings(device=device, precision="float32", optimizer=optimizer)
    settings.time_budget_s = budget_s
    t = time.perf_counter()
    result = fit(problem, settings)
    seconds = time.perf_counter() - t
    errors = [result.params[f"stiffness:r{k}"] / e - 1.0 for k, e in enumerate(REGION_YOUNG_MODULUS)]
    return {
        "tets": sim.tet_count,
        "optimizer": optimizer,
        "seconds": seconds,
        "outcome": result.outcome,
        "region_errors": errors,
        "rmse_m": result.rmse,
        "rollouts": result.n_forward,
        "backward": result.n_backward,
        "jacobian": result.jacobian,
    }


def adjoint_cost(device: str) -> dict:
    """One adjoint gradient (its recorded rollout included) against one forward rollout of
    the slab dropped 30 frames, at VBD's default 10 iterations and at 60."""
    out = {}
    for iterations in (10, 60):
        mesh, params = slab(28)
        params = params.replace(iterations=iterations)
        frames = [10, 20, 30]
        sim = SoftBodySimulator(mesh, params, device=device)
        x = sim.rollout(30, frames).numpy()
        sim.set_params({"young_modulus": 1.3 * params.young_modulus})
        soft_body_gradient(sim, 30, frames, sim.rollout(30, frames).numpy() - x)  # warm-up
        wp.synchronize_device(device)
        t = time.perf_counter()
        y = sim.rollout(30, frames).numpy()
        forward_s = time.perf_counter() - t
        t = time.perf_counter()
        gradient = soft_body_gradient(sim, 30, frames, y - x)
        gradient_s = time.perf_counter() - t
        out[f"iterations_{iterations}"] = {
            "forward_s": forward_s,
            "gradient_s": gradient_s,
            "ratio": gradient_s / forward_s,
            "residual": gradient.residual,
            "solve_products": gradient.solve_products,
        }
    return out


def cuda_vs_cpu(device: str) -> dict:
    """A 20 cm cube dropped on a slab that rises under it, then the ground: CUDA against CPU."""
    cube, params = rising_plate()
    a = SoftBodySimulator(cube, params, device=device).rollout(31).numpy()
    b = SoftBodySimulator(cube, params, device="cpu").rollout(31).numpy()
    motion = float(np.abs(b - b[0]).max())
    return {"max_deviation_m": float(np.abs(a - b).max()), "motion_m": motion}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--skip", default="", help="comma-separated: cantilever, forward, fit, regions, adjoint, cpu"
    )
    args = parser.parse_args()
    wp.config.quiet = True
    skip = set(filter(None, args.skip.split(",")))
    out = {"device": wp.get_device(args.device).name}
    if not {"fit", "regions"} <= skip:
        # the same fits on a coarse slab first: every kernel a fit launches (the rollouts',
        # the recording's, the tangents' residual check) is loaded before one is timed
        two_parameter_fit(args.device, cells=4, budget_s=WARM_UP_BUDGET_S)
        three_region_fit(args.device, cells=4, budget_s=WARM_UP_BUDGET_S)
    for key, run in (
        ("cpu", cuda_vs_cpu),
        ("forward", forward),
        ("adjoint", adjoint_cost),
        ("fit", two_parameter_fit),
        ("regions", three_region_fit),
        ("cantilever", cantilever),
    ):
        if key in skip:
            continue
        out[key] = run(args.device)
        print(key, json.dumps(out[key]), flush=True)
        if args.out:  # after each part: a run cut short keeps the parts it finished
            args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
