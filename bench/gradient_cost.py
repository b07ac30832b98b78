"""What one tape gradient costs: forward alone, and forward + backward for each kind.

    python bench/gradient_cost.py [--device cpu] [--sizes 12,32] [--frames 30]
                                  [--precision float64] [--out result.json]

Grid n x n over 1 m, one edge pinned, Blender's defaults (quality 5); the loss is the
squared distance at frames 10, 20 and 30 to a rollout with 1.5x the tension and bending
stiffness. Each time is the median of three runs after a warm-up (compiles, graphs).
``stable`` runs both reverses of every substep (the exact one, and the implicit-solve one
that guards it), so it costs about the sum of ``exact`` and ``implicit``'s backward passes.

``--fit-path`` also times the gradient as a fit takes it (``FitObjective.gradient``), all
twelve continuous fields free (every stiffness and damping, mass, pin stiffness, goal
friction): ``exact``; ``stable`` as it comes (smoothing where the sheet asks for it); and
``stable`` with every group smoothed (``CHAOS_FRACTION`` 0: 24 more rollouts, the worst
case), the rollouts side by side on the CPU's cores or in batches on a GPU.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from many_parameters import FIELDS as TWELVE  # noqa: E402  (every continuous field)

from warp_core import ClothParams, ClothSimulator, grid_mesh  # noqa: E402
from warp_core.fit import FitProblem, FitSettings, Target
from warp_core.fit.objective import tangents
from warp_core.fit.objective.objective import FitObjective  # noqa: E402
from warp_core.fit.problem.spec import parameter_spec  # noqa: E402
from warp_core.targets.vertex import launch_vertex_distance_loss  # noqa: E402

wp.config.log_level = wp.LOG_WARNING
KINDS = ("exact", "stable", "implicit")


def sheet(n: int):
    mesh = grid_mesh(n, n, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    return mesh


def median_time(work, device: str) -> float:
    work()  # warm-up
    times = []
    for _ in range(3):
        wp.synchronize_device(device)
        t = time.perf_counter()
        work()
        wp.synchronize_device(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


class Case:
    """The sheet's simulator at Blender's defaults and its loss against the stiffer rollout."""

    def __init__(self, n: int, frames: int, device: str, precision: str) -> None:
        mesh = sheet(n)
        self.mesh = mesh
        self.frames = frames
        self.output = [frames // 3, 2 * frames // 3, frames]
        truth = ClothParams(tension_stiffness=22.5, compression_stiffness=22.5, bending_stiffness=0.75)
        target_sim = ClothSimulator(mesh, truth, device=device, precision=precision)
        self.targets = target_sim.rollout(frames, self.output, keep_states=False).positions
        self.sim = ClothSimulator(mesh, ClothParams(), device=device, precision=precision)
        self.weights = wp.full(self.sim.vertex_count, 1.0, dtype=self.sim.dtype, device=self.sim.device)

    def forward(self) -> None:
        self.sim.rollout(self.frames, self.output, keep_states=False)

    def forward_backward(self):
        """One forward and backward pass; the parameters' gradient."""
        sim = self.sim
        sim.params.grad.zero_()
        loss = wp.zeros(1, dtype=sim.dtype, device=sim.device, requires_grad=True)
        tape = wp.Tape()
        with tape:
            rollout = sim.rollout(self.frames, self.output)
            for k in range(len(self.output)):
                launch_vertex_distance_loss(
                    rollout.positions[k], self.targets[k], self.weights, loss, scale=0.5
                )
        tape.backward(loss)
        grad = sim.params.grad.numpy().copy()
        tape.zero()
        return grad

    def gradient(self, kind: str):
        self.sim.gradient = kind
        grad = self.forward_backward()
        self.sim.gradient = "exact"
        return grad


def compare_with_cpu(device: str) -> dict:
    """Largest difference of each kind's gradient between ``device`` and the CPU, over the
    largest component (12 x 12, float64)."""
    here, cpu = Case(12, 30, device, "float64"), Case(12, 30, "cpu", "float64")
    out = {}
    for kind in KINDS:
        a, b = cpu.gradient(kind), here.gradient(kind)
        out[kind] = float(abs(a - b).max() / abs(a).max())
    return out


def measure(n: int, frames: int, device: str, precision: str) -> dict:
    case = Case(n, frames, device, precision)
    sim, forward, forward_backward = case.sim, case.forward, case.forward_backward

    row = {
        "n": n,
        "vertices": sim.vertex_count,
        "frames": frames,
        "forward_s": median_time(forward, sim.device),
    }
    for kind in KINDS:
        sim.gradient = kind
        row[f"{kind}_s"] = median_time(forward_backward, sim.device)
    sim.gradient = "exact"
    row["stable_over_exact"] = row["stable_s"] / row["exact_s"]
    return row


def measure_fit_path(n: int, frames: int, device: str, precision: str) -> dict:
    """The fit engine's gradient of the sheet's problem with the twelve fields free: exact,
    stable as it comes, stable with every group smoothed."""
    case = Case(n, frames, device, precision)
    problem = FitProblem(
        case.mesh,
        ClothParams(goal_friction=0.1),
        [Target(f, case.targets[k].numpy()) for k, f in enumerate(case.output)],
        free_parameters=list(TWELVE),
    )
    spec = parameter_spec(problem)
    objective = FitObjective(problem, FitSettings(device=device, precision=precision), spec.names, spec=spec)
    values = spec.initial_values()
    row: dict = {"n": n, "frames": frames, "free": spec.n_free}
    row["fit_exact_s"] = median_time(lambda: objective.gradient(values, kind="exact"), device)
    before = objective.n_smoothed
    row["fit_stable_s"] = median_time(lambda: objective.gradient(values, kind="stable"), device)
    row["smoothed_as_it_comes"] = (objective.n_smoothed - before) // 4  # warm-up + 3 runs
    fraction = tangents.CHAOS_FRACTION
    tangents.CHAOS_FRACTION = 0.0
    try:
        stable = lambda: objective.gradient(values, kind="stable")  # noqa: E731
        row["fit_stable_all_smoothed_s"] = median_time(stable, device)
    finally:
        tangents.CHAOS_FRACTION = fraction
    row["stable_over_exact"] = row["fit_stable_s"] / row["fit_exact_s"]
    row["all_smoothed_over_exact"] = row["fit_stable_all_smoothed_s"] / row["fit_exact_s"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sizes", default="12,32")
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--precision", default="float64")
    ap.add_argument(
        "--compare-cpu", action="store_true", help="also check the device's gradients against the CPU's"
    )
    ap.add_argument("--fit-path", action="store_true", help="also time the fit engine's 12-field gradient")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    if args.compare_cpu:
        diffs = compare_with_cpu(args.device)
        rows.append({"compare_cpu": diffs})
        print(
            "max |device - cpu| / max |cpu|:", ", ".join(f"{k} {v:.2g}" for k, v in diffs.items()), flush=True
        )
    for n in [int(s) for s in args.sizes.split(",")]:
        row = measure(n, args.frames, args.device, args.precision)
        rows.append(row)
        print(
            f"{n}x{n} on {args.device} ({args.precision}): forward {row['forward_s']:.3f} s; "
            + ", ".join(f"{kind} f+b {row[f'{kind}_s']:.3f} s" for kind in KINDS)
            + f"; stable / exact {row['stable_over_exact']:.2f}",
            flush=True,
        )
        if args.fit_path:
            row = measure_fit_path(n, args.frames, args.device, args.precision)
            rows.append(row)
            print(
                f"{n}x{n} on {args.device}, fit engine, {row['free']} free: "
                f"exact {row['fit_exact_s']:.3f} s, "
                f"stable {row['fit_stable_s']:.3f} s ({row['smoothed_as_it_comes']} smoothed), "
                f"every group smoothed {row['fit_stable_all_smoothed_s']:.3f} s; over exact "
                f"{row['stable_over_exact']:.2f} and {row['all_smoothed_over_exact']:.2f}",
                flush=True,
            )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
