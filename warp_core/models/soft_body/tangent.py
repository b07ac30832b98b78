"""Forward tangents of the soft body by the implicit-function theorem: the derivatives of
a rollout's embedded positions by the parameters, one column per direction, for the fit's
Levenberg-Marquardt Jacobians.

The adjoint (``adjoint``) carries one loss back through the converged substeps; a tangent
carries one parameter direction forward through the same steps. At a substep's root
``r(x') = M / dt^2 (x' - y) - f(x'; x, theta) = 0`` with ``y = x + dt v + dt^2 g``,

    H dx' = M / dt^2 (dx + dt dv) + df/dx dx + df/dtheta dtheta - dM/dtheta / dt^2 (x' - y),

``H = M / dt^2 - df/dx'``, and ``dv' = (dx' - dx) / dt``: one linear solve a substep for all
directions at once (``tangent_step``). What is differentiated is what the adjoint
differentiates: the root of each step (not VBD's truncated iterations), the contacts the
solver found frozen, and the parameters through the tets' materials (k_mu, k_lambda,
k_damp), the contacts' stiffness (which follows the tets' mean Young's modulus) and the
nodes' masses. The Jacobian columns of a directional derivative the fit would otherwise
take as two rollouts each (central differences) cost one recorded rollout and one pass of
these solves in all; with ``keep_recording`` (set by the fit where its Jacobians may be
tangents) the recorded rollout is the simulator's last, where that was at the same point.

Made by :func:`soft_body_tangents` for a ``SoftBodySimulator``; read by the simulator's
``position_tangents`` (the fit) and tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from .adjoint import contact_refusal, keep_recorded, recorded_rollout
from .adjoint_device import device_step_residual
from .adjoint_step import StepOperator, step_residual
from .recording import Recording, rollout_point
from .tangent_step import NodeSums, TetJacobians, force_product, solve_tangents

__all__ = ["ForwardTangents", "SoftBodyTangents", "material_directions", "soft_body_tangents"]

# a direction's central difference of the closed-form materials moves each value by this
# fraction of itself (the materials are at most quadratic in the values but for the Poisson
# ratio, whose O(h^2) error is then 1e-12)
MATERIAL_STEP = 1e-6


@dataclass
class SoftBodyTangents:
    """A rollout's embedded positions and their derivatives along each direction: made by
    :func:`soft_body_tangents`, read by the fit's objective and tests."""

    positions: np.ndarray  # (F, V, 3) at the output frames, as the rollout returned them
    # (D, F, V, 3) d positions / d (direction's step); None where a step ended further from
    # its root than the caller's ``max_residual`` (the tangents would not be the rollout's)
    tangents: np.ndarray | None
    solve_products: int  # the most products any substep's solve took
    # the largest step's |r(x')| over |M / dt^2 (x' - y)| or the weight (``adjoint_step.step_residual``),
    # over the steps solved (where a step is over ``max_residual``: on the host the first
    # such, on the device the worst of all)
    residual: float


@dataclass
class MaterialDirection:
    """What one parameter direction moves: made by :func:`material_directions`, read by
    :func:`soft_body_tangents`."""

    materials: np.ndarray  # (T, 3) d (k_mu, k_lambda, k_damp)
    log_contact_stiffness: float  # d log ke (and kd)
    density: float


def material_directions(
    sim: Any,
    directions: Sequence[Mapping[str, float]],
    weight_directions: Sequence[Mapping[str, np.ndarray]] | None = None,
) -> list[MaterialDirection]:
    """Each direction (parameter -> d value, with the painted weights' change kind -> (N,)
    where given) as the change of every tet's material, of the contacts' stiffness and of
    the density, by central differences of the simulator's own closed-form materials at its
    settings and maps (bilinear in the values and weights: the differences are exact but for
    the Poisson ratio's O(h^2))."""
    settings = sim.settings
    values = settings.values()
    maps = sim.materials
    out = []
    for k, direction in enumerate(directions):
        moving = {n: float(dv) for n, dv in direction.items() if dv != 0.0}
        painted = weight_directions[k] if weight_directions is not None else {}
        ratios = [abs(values[n]) / abs(dv) for n, dv in moving.items() if values[n] != 0.0]
        ratios += [1.0 / float(np.abs(dw).max()) for dw in painted.values() if np.abs(dw).max() > 0.0]
        h = MATERIAL_STEP * (min(ratios) if ratios else 1.0)
        sides = []
        for sign in (1.0, -1.0):
            side = settings.replace(**{n: values[n] + sign * h * dv for n, dv in moving.items()})
            weights = {
                kind: maps.weights.get(kind, np.zeros(maps.vertex_count)) + sign * h * dw
                for kind, dw in painted.items()
            }
            sides.append(maps.materials_with(side, weights))
        (plus, mean_plus), (minus, mean_minus) = sides
        materials = (plus - minus) / (2.0 * h)
        contact = (np.log(mean_plus) - np.log(mean_minus)) / (2.0 * h)
        out.append(MaterialDirection(materials, float(contact), float(direction.get("density", 0.0))))
    return out


def soft_body_tangents(
    sim: Any,
    frame_end: int,
    output_frames: list[int],
    directions: Sequence[Mapping[str, float]],
    goals: np.ndarray | None = None,
    weight_directions: Sequence[Mapping[str, np.ndarray]] | None = None,
    max_residual: float | None = None,
    check_on_device: bool | None = None,
) -> SoftBodyTangents:
    """A recorded rollout of ``sim`` to ``frame_end`` and the derivatives of its embedded
    positions at ``output_frames`` along each of ``directions`` (parameter -> d value, and
    the painted weights' change where ``weight_directions`` gives one), unless a step ends
    further than ``max_residual`` from its root (then no tangents, and every step's residual
    is checked before any is solved); NotImplementedError where the rollout has no gradient,
    FloatingPointError where a substep's solve does not converge.

    ``check_on_device``: check the steps by the adjoint's device loop
    (``adjoint_device.device_step_residual``), the recording kept on the device, so that a
    refusal moves nothing to the host; None: on CUDA. The host's check stops at the first
    step over ``max_residual``, the device's checks them all: on this project's 2-core CPU,
    a 47k-tet slab dropped on the ground took 0.63 s to read its recording and refuse on the
    host, 2.3 s on the device loop's CPU kernels."""
    run = lambda: sim.rollout(frame_end, output_frames, goals)  # noqa: E731
    if check_on_device is None:
        check_on_device = wp.get_device(sim.device).is_cuda
    on_device = max_residual is not None and check_on_device
    point = rollout_point(sim, frame_end, output_frames, goals)
    recording, result = recorded_rollout(sim, frame_end, run, device_resident=on_device, point=point)
    positions = result.numpy()
    if on_device:
        last = _last_step(sim, output_frames, recording.substeps)
        worst = device_step_residual(sim, recording, last, sim.step_history.dt)
        if worst > max_residual:
            return SoftBodyTangents(positions, None, 0, worst)
        recording, max_residual = sim.step_history.read(), None
    moves = material_directions(sim, directions, weight_directions)
    node_tangents, products, residual = _forward(sim, recording, output_frames, moves, max_residual)
    if node_tangents is None:
        return SoftBodyTangents(positions, None, products, residual)
    nodes, weights = sim.lattice.vertex_nodes, sim.lattice.vertex_weights
    tangents = np.zeros((len(directions), len(output_frames), sim.vertex_count, 3))
    for row, dx in node_tangents.items():
        # (N, 3, D) -> the vertices' weighted sums of their four nodes
        tangents[:, row] = np.einsum("vk,vkad->dva", weights, dx[nodes])
    return SoftBodyTangents(positions, tangents, products, residual)


def _last_step(sim: Any, output_frames: list[int], substeps: int) -> int:
    """The last substep a tangent at ``output_frames`` depends on (-1: none)."""
    steps = int(sim.settings.substeps)
    last = max(((int(f) - sim.start_frame) * steps - 1 for f in output_frames), default=-1)
    return min(last + 1, substeps) - 1


def _forward(
    sim: Any,
    recording: Recording,
    output_frames: list[int],
    moves: list[MaterialDirection],
    max_residual: float | None,
) -> tuple[dict[int, np.ndarray] | None, int, float]:
    """Output row -> the nodes' tangents (N, 3, D) at that frame (None: a step's residual
    over ``max_residual``), the most products a substep's solve took and the largest step
    residual met."""
    settings = sim.settings
    steps = int(settings.substeps)
    dt = 1.0 / (float(settings.fps) * steps)
    wanted = {}
    for row, frame in enumerate(output_frames):
        wanted.setdefault((int(frame) - sim.start_frame) * steps - 1, []).append(row)
    free = ~sim.pinned_nodes
    unit_mass = sim.scene.unit_mass * free
    mass = unit_mass * float(settings.density)
    gravity = np.asarray(settings.gravity, dtype=np.float64)
    weight = float(np.linalg.norm(mass) * np.linalg.norm(gravity))
    materials = sim.scene.model.tet_materials.numpy().astype(np.float64)
    d_materials = np.stack([m.materials for m in moves], axis=-1)  # (T, 3, D)
    d_contact = np.array([m.log_contact_stiffness for m in moves])
    d_density = np.array([m.density for m in moves])
    op = StepOperator(sim, dt)
    dx = np.zeros((sim.node_count, 3, len(moves)))
    dv = np.zeros_like(dx)
    out: dict[int, np.ndarray] = {}  # rows of frames before the first substep stay zero
    most, worst = 0, 0.0
    steps_solved = range(_last_step(sim, output_frames, len(recording.x) - 1) + 1)

    def step_at(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x_start, v_start = recording.x[n], recording.v[n]
        x_end = np.where(free[:, None], recording.x[n + 1], x_start)
        op.at(x_end, x_start, recording.contacts[n])
        return x_start, x_end, x_start + dt * v_start + dt * dt * gravity

    if max_residual is not None:
        # every step checked before any is solved: a refusal (often a contact late in the
        # rollout) then costs one force evaluation a step, not the solves before it
        for n in steps_solved:
            _, x_end, y = step_at(n)
            worst = max(worst, step_residual(op, mass, x_end, y, weight))
            if worst > max_residual:
                return None, most, worst
    # made only once no step refused: their row kernels are a module of their own to load
    tets = TetJacobians(sim, dt)
    sums = NodeSums(tets.tets, sim.node_count)
    for n in steps_solved:
        x_start, x_end, y = step_at(n)
        if max_residual is None:
            worst = max(worst, step_residual(op, mass, x_end, y, weight))
        jac = tets.at(x_end, x_start, materials)
        jac.contacts = op.contact_blocks
        rhs = mass[:, None, None] / dt**2 * (dx + dt * dv) + force_product(jac, sums, dx, start=True)
        rhs += sums(np.matmul(jac.materials, d_materials))
        if jac.contacts is not None:
            rhs += jac.contacts[2][:, :, None] * d_contact
        rhs -= (unit_mass[:, None] * (x_end - y) / dt**2)[:, :, None] * d_density
        dx_end, products = solve_tangents(jac, sums, mass / dt**2, free, rhs)
        most = max(most, products)
        dx_end = np.where(free[:, None, None], dx_end, 0.0)
        dv = (dx_end - dx) / dt * free[:, None, None]
        dx = dx_end
        for row in wanted.get(n, ()):
            out[row] = dx.copy()
    return out, most, worst


class ForwardTangents:
    """The soft-body simulator's forward tangents, as the fit's ``models.base.TangentSimulator``
    asks for them (mixed into ``SoftBodySimulator``)."""

    # while True, every rollout off a tape is recorded and the recording kept, so that
    # tangents at the point just simulated (the fit's Jacobian after its step) read it
    # instead of running the rollout again (``models.base.TangentSimulator``)
    keep_recording = False

    def kept_if_asked(
        self,
        frame_end: int,
        output_frames: list[int] | None,
        goals: np.ndarray | None,
        run: Callable[[], Any],
    ) -> Any:
        """``run()``, the simulator's rollout off a tape, recorded and kept where
        ``keep_recording`` asks (and the rollout has a gradient)."""
        if not self.keep_recording or self.step_recorder is not None or contact_refusal(self) is not None:
            return run()
        return keep_recorded(self, frame_end, run, rollout_point(self, frame_end, output_frames, goals))

    def holds_recording(
        self, frame_end: int, output_frames: list[int], goals: np.ndarray | None = None
    ) -> bool:
        """Whether :meth:`position_tangents` with these arguments, now, reads a kept
        recording instead of running a rollout."""
        history = self.step_history
        point = rollout_point(self, frame_end, output_frames, goals)
        return history is not None and history.kept_result(point) is not None

    def position_tangents(
        self,
        frame_end: int,
        output_frames: list[int],
        directions: Sequence[Mapping[str, float]],
        goals: np.ndarray | None = None,
        weight_directions: Sequence[Mapping[str, np.ndarray]] | None = None,
        max_residual: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(positions (F, V, 3), their derivatives along each direction (D, F, V, 3) or None)
        of a rollout to ``frame_end``: :func:`soft_body_tangents`."""
        found = soft_body_tangents(
            self, frame_end, output_frames, directions, goals, weight_directions, max_residual
        )
        return found.positions, found.tangents
