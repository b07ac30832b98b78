"""The soft body's gradient by the implicit-function theorem: the adjoint of Newton's VBD
substeps, whatever iterations produced them.

A substep from positions ``x`` and velocities ``v`` (pinned nodes already at the step's end)
is implicit Euler: VBD iterates towards the ``x'`` where every free node's residual

    r(x') = M / dt^2 (x' - y) - f(x'; x, theta) = 0,    y = x + dt v + dt^2 g,

vanishes (``f``: the tets' stable Neo-Hookean and damping forces and the contact forces
of the ground and the colliders; ``theta``: each tet's materials, the contacts' stiffness
and the nodes' masses), and then ``v' = (x' - x) / dt``. At such an ``x'``, ``dx' = -H^-1 dr`` with
``H = dr/dx' = M / dt^2 - df/dx'``, so the adjoint of ``x'`` (``xbar'``, what the loss and
the later steps ask of it) becomes ``lam = H^-T xbar'``, one linear solve a substep
(``adjoint_step``), and is carried to the step's inputs and parameters by the partial
derivatives of ``r``: ``xbar += M / dt^2 lam + (df/dx)^T lam``, ``vbar += M / dt lam``,
``materials_bar += (df/dmaterials)^T lam``, ``density_bar -= lam . (u (x' - y)) / dt^2``
(``u``: the node masses per unit density).

What is differentiated: the converged step. VBD runs a fixed number of iterations; where
it stops short of the root, the gradient is that of the root, not of the rollout VBD made
(:attr:`SoftBodyGradient.residual` says how far each step was from it; at VBD's default 10
iterations a dropped body's steps are often far from it, see ``bench/soft_body_gradients.py``).
Which nodes touch the ground or a collider, and where, is frozen as the solver found it: a
contact is a plane through the point of the surface it found, placed at the collider's pose
at the substep's end and moving with its body over the substep (the ground stands still).

A rollout inside a ``wp.Tape`` records itself and puts this backward pass on the tape
(:func:`record_on_tape`), so the fit's L-BFGS and Adam take it like any tape gradient.

Where it runs (:func:`resident`): where the simulator captures its graphs (the default, on
CUDA and the CPU) or on CUDA, the recording stays on the device and so does the whole loop
(``adjoint_device``: the solve's scalars cross to the host once every ``SOLVE_CHECK``
iterations); otherwise the loop below, on host arrays.

Made by :func:`soft_body_gradient` for a ``SoftBodySimulator``; read by tests and the fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from .adjoint_device import device_backward
from .adjoint_step import StepOperator, solve_adjoint, solve_tolerance, step_residual
from .materials import parameter_gradient
from .params import GRADIENT_KIND, PARAMETER_NAMES
from .recording import DeviceRecording, Recording, RolloutPoint, StepHistory

# ``sim``: a SoftBodySimulator, whose rollouts on a tape call this module (so not imported)
SoftBodySimulator = Any
__all__ = [
    "SoftBodyGradient",
    "backward",
    "contact_refusal",
    "keep_recorded",
    "record_on_tape",
    "recorded_rollout",
    "resident",
    "soft_body_gradient",
]


@dataclass
class SoftBodyGradient:
    """The loss's derivatives by the soft body's parameters: made by
    :func:`soft_body_gradient`, read by tests and the fit."""

    parameters: dict[str, float]  # every one of PARAMETER_NAMES
    tet_materials: np.ndarray  # (T, 3): d loss / d (k_mu, k_lambda, k_damp) of every tet
    residual: float  # the largest step's |r(x')| over |M / dt^2 (x' - y)| or the weight (0: converged)
    solve_products: int  # the most Hessian products any substep's adjoint solve took
    # the largest residual any substep's solve ended at, relative to its right-hand side
    # (``adjoint_step.solve_tolerance`` of its step, up to ``SOLVE_ACCEPT`` on a stiff body)
    solve_residual: float = 0.0


def _node_grads(sim: SoftBodySimulator, output_frames: list[int], position_grads: np.ndarray) -> dict:
    """The loss's pull on the nodes at the end of each substep that ends an output frame,
    through the embedding (vertex = sum of its four nodes' weighted positions)."""
    steps = int(sim.settings.substeps)
    nodes, weights = sim.lattice.vertex_nodes, sim.lattice.vertex_weights
    pulls: dict[int, np.ndarray] = {}
    for row, frame in enumerate(output_frames):
        step = (int(frame) - sim.start_frame) * steps - 1
        if step >= 0:
            pull = pulls.setdefault(step, np.zeros((sim.node_count, 3)))
            np.add.at(pull, nodes.ravel(), (weights[..., None] * position_grads[row, :, None]).reshape(-1, 3))
    return pulls


def soft_body_gradient(
    sim: SoftBodySimulator,
    frame_end: int,
    output_frames: list[int],
    position_grads: np.ndarray,
    goals: np.ndarray | None = None,
    *,
    device_resident: bool | None = None,
) -> SoftBodyGradient:
    """d loss / d parameters of a rollout to ``frame_end``, given d loss / d (the embedded
    mesh's positions at ``output_frames``), shape (len(output_frames), vertices, 3): a
    recorded rollout, then :func:`backward`, on the device or the host (:func:`resident`)."""
    run = lambda: sim.rollout(frame_end, output_frames, goals)  # noqa: E731
    recording, _ = recorded_rollout(sim, frame_end, run, device_resident)
    return backward(sim, recording, output_frames, position_grads)


def resident(sim: SoftBodySimulator, device_resident: bool | None = None) -> bool:
    """Whether the backward pass of ``sim`` runs on its device (``adjoint_device``): as asked,
    or (None) where the device is CUDA or the simulator captures its graphs (the device loop
    captures its own then; kernel by kernel it is slower on the CPU than the host loop).

    Measured on an H200, a 20 cm cube of 48,000 tets (9,261 nodes) dropped on the ground, 12
    frames: a gradient (recorded rollout and backward pass) 0.61 s on the device loop (12
    forward rollouts' time), 9.4 s on the host loop (187); the tests' 27-node cube 0.25 s and
    0.61 s. On the CPU (2 cores, warm kernels), the tests' 20 cm cube dropped on the ground
    (27 nodes, 48 tets, 18 frames): 0.140 s on the device loop, 0.196 s on the host loop (the
    backward passes alone 0.047 s and 0.103 s; 64 nodes: 0.102 s and 0.189 s), with the
    simulator's graphs on; with them off the device loop launches its kernels one by one,
    0.285 s a backward pass against the host's 0.096 s. The CPU fit's bench cube (162 tets):
    one gradient 1.66x a forward rollout on the device loop, 2.64x on the host loop."""
    if device_resident is None:
        return wp.get_device(sim.device).is_cuda or sim.use_graphs
    return device_resident


def recorded_rollout(
    sim: SoftBodySimulator,
    frame_end: int,
    run: Callable[[], Any],
    device_resident: bool | None = None,
    point: RolloutPoint | None = None,
) -> tuple[Recording | DeviceRecording, Any]:
    """``run()``, a rollout of ``sim`` to ``frame_end``, with its substeps recorded on the
    device (``recording.StepHistory``, kept on ``sim`` from one gradient to the next of the
    same length, so its captured graphs are reused) and read for the host or kept on the
    device (:func:`resident`); NotImplementedError where the rollout has no gradient. With
    ``point`` (``recording.rollout_point`` of this rollout), a recording :func:`keep_recorded`
    kept of the same point is read instead of running it again."""
    refusal = contact_refusal(sim)
    if refusal is not None:
        raise NotImplementedError(refusal)
    history = _history(sim, frame_end)
    result = None if point is None else history.kept_result(point)
    if result is None:
        result = _record(sim, history, run)
    return (history.read_on_device() if resident(sim, device_resident) else history.read()), result


def keep_recorded(sim: SoftBodySimulator, frame_end: int, run: Callable[[], Any], point: RolloutPoint) -> Any:
    """``run()`` (a rollout of ``sim`` to ``frame_end`` at ``point``) recorded, the recording
    kept on the device for a :func:`recorded_rollout` of the same point; its result."""
    history = _history(sim, frame_end)
    result = _record(sim, history, run)
    history.keep(point, result)
    return result


def _history(sim: SoftBodySimulator, frame_end: int) -> StepHistory:
    substeps = (int(frame_end) - sim.start_frame) * int(sim.settings.substeps)
    history = sim.step_history
    if history is None or history.substeps != substeps:
        history = sim.step_history = StepHistory(sim, substeps)
    return history


def _record(sim: SoftBodySimulator, history: StepHistory, run: Callable[[], Any]) -> Any:
    history.reset()
    sim.step_recorder = history
    try:
        return run()
    finally:
        sim.step_recorder = None


def contact_refusal(sim: SoftBodySimulator) -> str | None:
    """Why ``sim``'s rollouts have no gradient, or None: every contact Newton makes for it (a
    node against the ground or a collider's surface) has one."""
    return None


def record_on_tape(sim: SoftBodySimulator, tape: wp.Tape, frame_end: int, run: Callable[[], Any]) -> Any:
    """Run ``run`` (a rollout of ``sim`` to ``frame_end`` whose positions have a gradient
    array) recorded, and put its backward pass on ``tape``: d loss / d positions, as the
    tape's later launches leave it, into ``sim.params.grad`` (``PARAMETER_NAMES`` order)."""
    if sim.gradient != GRADIENT_KIND:
        raise ValueError(f"the soft body's gradient is {GRADIENT_KIND!r}, got {sim.gradient!r}")
    recorder, result = recorded_rollout(sim, frame_end, run)

    def pull() -> None:
        gradient = backward(sim, recorder, result.frames, result.positions.grad.numpy())
        result.extras["gradient_residual"] = gradient.residual
        found = gradient.parameters
        grads = sim.params.grad.numpy() + np.array([found[n] for n in PARAMETER_NAMES], dtype=np.float32)
        sim.params.grad.assign(grads)

    tape.record_func(pull, [result.positions, sim.params])
    return result


def backward(
    sim: SoftBodySimulator,
    recorder: Recording | DeviceRecording,
    output_frames: list[int],
    position_grads: np.ndarray,
) -> SoftBodyGradient:
    """The adjoint of the rollout ``recorder`` holds, given d loss / d (the embedded mesh's
    positions at ``output_frames``), shape (len(output_frames), vertices, 3): on the device
    for a :class:`DeviceRecording` (``adjoint_device``, the same sums as the loop here)."""
    position_grads = np.asarray(position_grads, dtype=np.float64)
    if position_grads.shape != (len(output_frames), sim.vertex_count, 3):
        raise ValueError(
            f"position_grads must have shape ({len(output_frames)}, {sim.vertex_count}, 3), "
            f"got {position_grads.shape}"
        )
    settings = sim.settings
    dt = 1.0 / (float(settings.fps) * int(settings.substeps))
    node_grads = _node_grads(sim, output_frames, position_grads)
    if isinstance(recorder, DeviceRecording):
        s = device_backward(sim, recorder, node_grads, dt)
        sums = (s.materials_bar, s.density_bar, s.contact_bar)
        return _gradient(sim, *sums, s.residual, s.solve_products, s.solve_residual)
    n_steps = len(recorder.x) - 1  # the last entry is the state the last step left
    # x'_n: the next step's start with the pins where this step left them
    free = ~sim.pinned_nodes
    x_end = [np.where(free[:, None], recorder.x[n + 1], recorder.x[n]) for n in range(n_steps)]
    unit_mass = sim.scene.unit_mass * free
    mass = unit_mass * float(settings.density)
    gravity = np.asarray(settings.gravity, dtype=np.float64)
    weight = float(np.linalg.norm(mass) * np.linalg.norm(gravity))
    op = StepOperator(sim, dt)
    x_bar = np.zeros((sim.node_count, 3))
    v_bar = np.zeros((sim.node_count, 3))
    materials_bar = np.zeros((sim.tet_count, 3))
    density_bar = contact_bar = 0.0
    worst_residual, most_products, worst_solve = 0.0, 0, 0.0
    last = max(node_grads, default=-1)  # later steps move no position the loss reads
    for n in reversed(range(min(last + 1, n_steps))):
        x_start, v_start = recorder.x[n], recorder.v[n]
        y = x_start + dt * v_start + dt * dt * gravity
        op.at(x_end[n], x_start, recorder.contacts[n])
        residual = step_residual(op, mass, x_end[n], y, weight)
        worst_residual = max(worst_residual, residual)

        end_bar = x_bar + v_bar / dt + node_grads.get(n, 0.0)
        lam, products, solve_residual = solve_adjoint(op, mass / dt**2, end_bar, solve_tolerance(residual))
        most_products, worst_solve = max(most_products, products), max(worst_solve, solve_residual)
        f_start_bar, f_materials_bar, f_contact_bar = op.pullback(lam)
        materials_bar += f_materials_bar
        contact_bar += f_contact_bar
        density_bar -= float(np.sum(lam * unit_mass[:, None] * (x_end[n] - y))) / dt**2
        x_bar = np.where(free[:, None], mass[:, None] / dt**2 * lam + f_start_bar - v_bar / dt, 0.0)
        v_bar = np.where(free[:, None], mass[:, None] / dt * lam, 0.0)
    sums = (materials_bar, density_bar, contact_bar)
    return _gradient(sim, *sums, worst_residual, most_products, worst_solve)


def _gradient(
    sim: SoftBodySimulator,
    materials_bar: np.ndarray,
    density_bar: float,
    contact_bar: float,
    residual: float,
    products: int,
    solve_residual: float,
) -> SoftBodyGradient:
    """The parameters' gradient from the backward loop's sums (either loop's)."""
    settings = sim.settings
    # the maps' gradients too (``materials``): the contacts' stiffness and damping follow
    # the mean Young's modulus
    found = parameter_gradient(settings, sim.materials.tet_weights, materials_bar, contact_bar)
    sim.materials.keep_gradient(settings, found.per_tet)
    parameters = {**found.parameters, "density": density_bar}
    return SoftBodyGradient(parameters, materials_bar, residual, products, solve_residual)
