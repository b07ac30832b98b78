"""The bugs ``mutations.py`` plants, one at a time: each an exact, single-match text
replacement in one file that keeps the code importable and changes what it computes.

``first`` names the test files most likely to catch the bug; they run before the rest of
the suite (a listed file that does not exist is left out when the mutation runs).
"""

from __future__ import annotations

from dataclasses import dataclass

FORCES = "warp_core/models/blender_cloth/force_kernels.py"
SOLVER = "warp_core/models/blender_cloth/solver_kernels.py"
STEP = "warp_core/models/blender_cloth/step.py"
CG = "warp_core/models/blender_cloth/cg.py"
ADJOINT = "warp_core/models/blender_cloth/adjoint.py"
TOPOLOGY = "warp_core/models/blender_cloth/topology.py"
OBJECTIVE = "warp_core/fit/objective/objective.py"
VERTEX_TARGET = "warp_core/targets/vertex.py"
ADAM = "warp_core/fit/optimizers/adam.py"
CLI_RUN = "addon/cli/run.py"
CLI_OBJECTS = "addon/cli/objects.py"
SHARED = "warp_core/fit/shared.py"
FIT_RESULTS = "addon/ui/fit_results.py"

# test files by what they check
FORWARD = ("tests/blender/test_cloth_forward.py",)
SOFT_PINS = ("tests/blender/test_soft_pins.py", "tests/core/test_moving_pins.py")
BLENDER_REF = ("tests/blender/test_blender_ref.py",)
GRADIENTS = ("tests/core/test_cloth_gradients.py",)
PATHS_AGREE = ("tests/core/test_cloth_validation.py",)
MOVING_PINS = ("tests/core/test_moving_pins.py",)
FIT_FRAMES = ("tests/core/test_fit_frames.py", "tests/core/test_fit.py")
OPTIMIZE = ("tests/core/test_optimize.py",)
FIT_BLENDER = ("tests/blender/test_fit_blender.py",)
BATCH = ("tests/blender/test_batch_flags.py", "tests/blender/test_batch.py")
SELECTED = (
    "tests/core/test_shared_fit.py",
    "tests/blender/test_selected_objects.py",
    "tests/blender/test_tangents.py",
)


@dataclass(frozen=True)
class Mutation:
    """Replace ``old`` (which must occur exactly once in ``path``) with ``new``."""

    id: str
    description: str
    path: str  # relative to the repository root
    old: str
    new: str
    first: tuple[str, ...] = ()  # test files to run before the rest of the suite


def _one_percent(mid: str, what: str, old: str, new: str, first: tuple[str, ...]) -> Mutation:
    return Mutation(mid, f"{what} 1 % too large", FORCES, old, new, first)


def _cli_flag(flag: str, path: str, old: str, new: str, instead: str = "the object's setting") -> Mutation:
    mid = "cli_" + flag.removeprefix("--").replace("-", "_")
    return Mutation(mid, f"batch command ignores {flag} ({instead} is used)", path, old, new, BATCH)


PHYSICS = [
    _one_percent(
        "tension_stiffness",
        "tension stiffness",
        "p + PARAM_TENSION, p + PARAM_TENSION_MAX, lin) * inv_avg_spring_length",
        "p + PARAM_TENSION, p + PARAM_TENSION_MAX, lin) * dtype(1.01) * inv_avg_spring_length",
        FORWARD,
    ),
    _one_percent(
        "compression_stiffness",
        "compression stiffness",
        "group_stiffness(params, p + PARAM_COMPRESSION, p + PARAM_COMPRESSION_MAX, lin)\n",
        "group_stiffness(params, p + PARAM_COMPRESSION, p + PARAM_COMPRESSION_MAX, lin) * dtype(1.01)\n",
        FORWARD,
    ),
    _one_percent(
        "shear_stiffness",
        "shear stiffness",
        "p + PARAM_SHEAR, p + PARAM_SHEAR_MAX, lin) * inv_avg_spring_length",
        "p + PARAM_SHEAR, p + PARAM_SHEAR_MAX, lin) * dtype(1.01) * inv_avg_spring_length",
        FORWARD,
    ),
    _one_percent(
        "bending_stiffness",
        "bending stiffness (angular model)",
        "k = bending * spring_rest_length[hinge_spring[h]] * dtype(0.1)",
        "k = bending * dtype(1.01) * spring_rest_length[hinge_spring[h]] * dtype(0.1)",
        FORWARD,
    ),
    _one_percent(
        "bending_stiffness_linear",
        "bending stiffness (linear model)",
        "group_stiffness(params, p + PARAM_BENDING, p + PARAM_BENDING_MAX, lin)\n",
        "group_stiffness(params, p + PARAM_BENDING, p + PARAM_BENDING_MAX, lin) * dtype(1.01)\n",
        FORWARD,
    ),
    _one_percent(
        "air_damping",
        "air damping",
        "drag = params[p + PARAM_AIR] * dtype(0.01)",
        "drag = params[p + PARAM_AIR] * dtype(0.0101)",
        FORWARD + BLENDER_REF,
    ),
    _one_percent(
        "tension_damping",
        "tension (structural) damping",
        "damping = params[p + PARAM_TENSION_DAMPING]",
        "damping = params[p + PARAM_TENSION_DAMPING] * dtype(1.01)",
        FORWARD,
    ),
    _one_percent(
        "compression_damping",
        "compression damping",
        "damping = params[p + PARAM_COMPRESSION_DAMPING]",
        "damping = params[p + PARAM_COMPRESSION_DAMPING] * dtype(1.01)",
        FORWARD,
    ),
    _one_percent(
        "shear_damping",
        "shear damping",
        "damping = params[p + PARAM_SHEAR_DAMPING]",
        "damping = params[p + PARAM_SHEAR_DAMPING] * dtype(1.01)",
        FORWARD,
    ),
    _one_percent(
        "bending_damping",
        "bending damping (angular model)",
        "f = k * (angle - hinge_rest_angle[h]) - params[p + PARAM_BENDING_DAMPING] * (",
        "f = k * (angle - hinge_rest_angle[h]) - params[p + PARAM_BENDING_DAMPING] * dtype(1.01) * (",
        FORWARD,
    ),
    _one_percent(
        "pin_stiffness",
        "pin (goal spring) stiffness",
        "k = w * params[p + PARAM_PIN_STIFFNESS] * inv_avg_spring_length",
        "k = w * params[p + PARAM_PIN_STIFFNESS] * dtype(1.01) * inv_avg_spring_length",
        SOFT_PINS + FORWARD,
    ),
    Mutation(
        "stiffness_group_ignored",
        "stiffness vertex groups ignored: every spring at the minimum stiffness",
        FORCES,
        "lin = spring_lin_stiffness[s]",
        "lin = dtype(0.0)",
        ("tests/blender/test_stiffness_groups.py", "tests/core/test_stiffness_groups_core.py"),
    ),
    Mutation(
        "shrinking_ignored",
        "shrinking ignored: every spring at its unshrunk rest length",
        TOPOLOGY,
        "    return np.sqrt(k[pairs[:, 0]] * k[pairs[:, 1]])",
        "    return np.ones(len(pairs))",
        ("tests/blender/test_shrinking.py",),
    ),
    Mutation(
        "mass",
        "vertex mass 1 % too large in the system matrix (inertia)",
        SOLVER,
        "system_diag[i] = params[p + PARAM_MASS] * wp.identity(3, dtype)",
        "system_diag[i] = params[p + PARAM_MASS] * dtype(1.01) * wp.identity(3, dtype)",
        BLENDER_REF + FORWARD,
    ),
    _one_percent(
        "gravity",
        "gravity",
        "f = mass * gravity * dtype(0.001)",
        "f = mass * gravity * dtype(0.00101)",
        BLENDER_REF + FORWARD,
    ),
    Mutation(
        "soft_pin_double",
        "soft pins (0 < weight < 1): goal spring stiffness doubled",
        TOPOLOGY,
        "goal = np.where((pinned == 0) & (w4 > np.finfo(np.float32).eps), w4, 0.0)",
        "goal = np.where((pinned == 0) & (w4 > np.finfo(np.float32).eps), 2.0 * w4, 0.0)",
        SOFT_PINS + FORWARD,
    ),
]

SOLVER_AND_ADJOINT = [
    Mutation(
        "cg_tolerance",
        "forward CG stops at a 10x looser residual",
        CG,
        "tolerance: float = CG_TOLERANCE  # r.r",
        "tolerance: float = CG_TOLERANCE * 10.0  # r.r",
        FORWARD,
    ),
    # The captured-graph path runs every CG iteration and masks those past convergence, so
    # the last update there is never lost; the kernel-by-kernel path stops at convergence
    # and reads the final iterate from the ping-pong buffers.
    Mutation(
        "cg_forward_iteration",
        "forward CG drops its last iteration (kernel-by-kernel path)",
        STEP,
        "final = launched % 2 if buf.ping_pong else launched",
        "final = (launched - 1) % 2 if buf.ping_pong else launched",
        PATHS_AGREE + GRADIENTS,
    ),
    Mutation(
        "cg_backward_iteration",
        "adjoint recomputes each substep with one CG iteration fewer than the forward",
        ADJOINT,
        "iterations = int(rollout.cg_iterations[s - 1])",
        "iterations = max(int(rollout.cg_iterations[s - 1]) - 1, 0)",
        GRADIENTS,
    ),
    Mutation(
        "pin_time_backward",
        "adjoint uses substep 0's goal and pin times for every substep of a frame",
        ADJOINT,
        "SubstepInputs.of(old, new, schedule, k),",
        "SubstepInputs(old, new, k == 0, *schedule.times(0), schedule.h),",
        MOVING_PINS + GRADIENTS,
    ),
]

FIT = [
    Mutation(
        "frame_dropped_from_loss",
        "vertex loss: last target frame left out of the residuals (loss value), kept in the Jacobian",
        VERTEX_TARGET,
        "return self.sqrt_w * (x - self.target_stack).ravel()",
        "return self.sqrt_w * np.concatenate([(x - self.target_stack)[:-1].ravel(), np.zeros(x[-1].size)])",
        FIT_FRAMES,
    ),
    Mutation(
        "frame_dropped_from_jacobian",
        "vertex loss: last target frame left out of the residual Jacobian, kept in the loss",
        VERTEX_TARGET,
        "return self.sqrt_w * dx.ravel()",
        "return self.sqrt_w * np.concatenate([dx[:-1].ravel(), np.zeros(dx[-1].size)])",
        FIT_FRAMES,
    ),
    Mutation(
        "last_frame_weight_zero",
        "vertex loss: last target frame weighted 0 (loss and slope alike)",
        VERTEX_TARGET,
        "np.ones(n) if t.weights is None else np.asarray(t.weights, float) for t in self.targets",
        "(np.ones(n) if t.weights is None else np.asarray(t.weights, float)) * (t is not self.targets[-1])"
        " for t in self.targets",
        FIT_FRAMES,
    ),
    Mutation(
        "adam_sign",
        "Adam steps along the gradient's opposite sign",
        ADAM,
        "g_proj, _active = projected_gradient(spec, z, g)",
        "g_proj, _active = projected_gradient(spec, z, -g)",
        OPTIMIZE + FIT_FRAMES,
    ),
    Mutation(
        "ties_ignored",
        "ties not applied in the simulation: a follower keeps its start value",
        OBJECTIVE,
        "self.check_bounds(values)\n        self.sim.set_params(values)\n        rollout",
        "self.check_bounds(values)\n"
        "        self.sim.set_params({k: v for k, v in values.items() if k not in self.problem.ties})\n"
        "        rollout",
        ("tests/core/test_fit.py",) + FIT_BLENDER,
    ),
]

CLI = [
    _cli_flag(
        "--max-iters",
        CLI_OBJECTS,
        "request.max_iterations = args.max_iters",
        "request.max_iterations = request.max_iterations",
    ),
    _cli_flag(
        "--time-budget",
        CLI_OBJECTS,
        "request.time_budget_s = args.time_budget",
        "request.time_budget_s = request.time_budget_s",
    ),
    _cli_flag(
        "--tolerance",
        CLI_OBJECTS,
        "request.tolerance_m = args.tolerance",
        "request.tolerance_m = request.tolerance_m",
    ),
    _cli_flag("--loss", CLI_OBJECTS, "request.loss = args.loss", "request.loss = request.loss"),
    _cli_flag(
        "--object",
        CLI_RUN,
        "objects = pick_objects(scene, args.object, targets, args.model)",
        "objects = pick_objects(scene, [], targets, args.model)",
        "every object with targets",
    ),
    _cli_flag(
        "--device",
        CLI_RUN,
        "scene, objects, (chosen, targets, device, start_values, tracks, maps)",
        "scene, objects, (chosen, targets, None, start_values, tracks, maps)",
    ),
    _cli_flag(
        "--preset",
        CLI_RUN,
        "scene, objects, (chosen, targets, device, start_values, tracks, maps)",
        "scene, objects, (chosen, targets, device, None, tracks, maps)",
        "the object's start values",
    ),
]

SEVERAL_OBJECTS = [
    Mutation(
        "shared_first_object_only",
        "a shared fit sums only the first object's residuals",
        SHARED,
        "return np.concatenate([m.residuals(values) for m in self.members])",
        "return np.concatenate([m.residuals(values) for m in self.members[:1]])",
        SELECTED,
    ),
    Mutation(
        "shared_pooled_outcome",
        "a shared fit is called converged on the pooled RMSE alone",
        SHARED,
        "if rmse <= tolerance_m and not joint.cancelled and rounding is None:",
        'if (rmse <= tolerance_m or outcome == "converged") and not joint.cancelled and rounding is None:',
        SELECTED,
    ),
    Mutation(
        "cancel_writes_finished_objects",
        "cancelling a run of several objects still writes the ones that finished",
        FIT_RESULTS,
        "if job.cancel_requested or any(",
        "if job.results[0] is None and any(",
        SELECTED,
    ),
    Mutation(
        "tangent_counts_held_exactly",
        "tangent rollouts hold the base's CG counts even far from convergence",
        "warp_core/models/blender_cloth/simulator.py",
        "return -2 - np.asarray(self.cg_iterations, dtype=np.int32)",
        "return np.asarray(self.cg_iterations, dtype=np.int32)",
        SELECTED,
    ),
]

FEATURES = [
    Mutation(
        "wind_factor_ignored",
        "force fields: the whole push acts as wind (the wind factor ignored)",
        "warp_core/models/blender_cloth/fields.py",
        "share = fields[f, WIND_FACTOR]",
        "share = dtype(1.0)",
        ("tests/blender/test_force_fields.py",),
    ),
    Mutation(
        "field_push_per_frame",
        "force fields: the push is not divided by the frame rate",
        "warp_core/models/blender_cloth/fields.py",
        "out = push * (dtype(1.0) / fps)",
        "out = push",
        ("tests/blender/test_force_fields.py",),
    ),
    Mutation(
        "pressure_volume_ignored",
        "pressure: no pull back towards the rest volume",
        "warp_core/models/blender_cloth/pressure.py",
        "p = v0 / (volume_6x(x, tris) / dtype(6.0)) - dtype(1.0)",
        "p = dtype(0.0) * volume_6x(x, tris)",
        ("tests/blender/test_pressure.py", "tests/core/test_pressure_core.py"),
    ),
    Mutation(
        "dynamic_rest_frozen",
        "dynamic mesh: the rest shape stays the start frame's",
        "warp_core/models/blender_cloth/simulator.py",
        "if self.settings.use_dynamic_mesh:",
        "if False and self.settings.use_dynamic_mesh:",
        ("tests/blender/test_dynamic_mesh.py", "tests/core/test_dynamic_mesh_core.py"),
    ),
    Mutation(
        "sewing_cap_ignored",
        "sewing: the force is not capped",
        "warp_core/models/blender_cloth/force_kernels.py",
        "stretch = sewing_force_max",
        "stretch = stretch",
        ("tests/blender/test_sewing.py",),
    ),
]

MUTATIONS: list[Mutation] = PHYSICS + SOLVER_AND_ADJOINT + FIT + CLI + SEVERAL_OBJECTS + FEATURES
