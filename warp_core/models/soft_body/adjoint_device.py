"""The soft-body adjoint's substeps on the device (``adjoint.backward`` on CUDA): the loop of
the host path, run by kernels over a :class:`~.recording.DeviceRecording`.

Everything the loop carries from substep to substep (``x_bar``, ``v_bar``, the tets'
``materials_bar``, the density's and the contacts' sums, the worst step residual) lives in
device arrays; the substep's index too, so a substep (its solve's loop included, as
``adjoint_solve`` captures it) is one captured graph where graphs are on, the same for every
substep, and the host launches them one after another without waiting. What crosses to the
host, once at the end: the solves' tally (the most products, the worst residual, a failed
solve), the sums and ``materials_bar``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from .adjoint_dots import Dots
from .adjoint_operator import DeviceStepOperator
from .adjoint_solve import TOLERANCE, DeviceBiCGStab, captured
from .adjoint_step import solve_bounds
from .recording import DeviceRecording

__all__ = ["DeviceSums", "device_backward", "device_step_residual"]

# the loop's scalars: three dot products, then what it reports
RESIDUAL2, INERTIA2, DENSITY_DOT, WORST, DENSITY_BAR, CONTACT_BAR = range(6)
SLOTS = 6

Vectors = wp.array(dtype=wp.vec3d)


@dataclass
class DeviceSums:
    """What :func:`device_backward` found, as ``adjoint.backward``'s host loop sums it: made
    there, read by ``adjoint.backward``."""

    materials_bar: np.ndarray  # (T, 3)
    density_bar: float
    contact_bar: float
    residual: float  # the worst step's
    solve_products: int  # the most any solve took
    solve_residual: float  # the worst any solve ended at


@wp.kernel
def _step_terms(
    step: wp.array(dtype=int),
    vs: wp.array2d(dtype=wp.vec3),
    x_start: Vectors,
    x_end: Vectors,
    forces: wp.array(dtype=wp.vec3),
    free: wp.array(dtype=wp.int32),
    mass_dt2: wp.array(dtype=wp.float64),
    unit_mass: wp.array(dtype=wp.float64),
    gravity: wp.vec3d,
    dt: wp.float64,
    residual: Vectors,
    inertia: Vectors,
    weighted: Vectors,
):
    # the step's residual r(x') and inertia term, and u (x' - y) for the density's derivative
    i = wp.tid()
    y = x_start[i] + dt * wp.vec3d(vs[step[0], i]) + dt * dt * gravity
    moved = x_end[i] - y
    inertia[i] = mass_dt2[i] * moved
    weighted[i] = unit_mass[i] * moved
    value = wp.vec3d()
    if free[i] != 0:
        value = inertia[i] - wp.vec3d(forces[i])
    residual[i] = value


@wp.func
def _step_residual(values: wp.array(dtype=wp.float64), weight: wp.float64):
    # in free fall the inertia term vanishes with the forces: the weight is the scale then
    scale = wp.max(wp.sqrt(values[INERTIA2]), weight)
    if scale == wp.float64(0.0):
        scale = wp.float64(1.0)
    return wp.sqrt(values[RESIDUAL2]) / scale


@wp.kernel
def _keep_worst_residual(values: wp.array(dtype=wp.float64), weight: wp.float64):
    values[WORST] = wp.max(values[WORST], _step_residual(values, weight))


@wp.kernel
def _set_tolerance(
    values: wp.array(dtype=wp.float64),
    weight: wp.float64,
    bounds: wp.vec3d,
    solve_scalars: wp.array(dtype=wp.float64),
):
    # adjoint_step.solve_tolerance of the step (``bounds``: adjoint_step.solve_bounds)
    tolerance = wp.max(bounds[1], bounds[0] * _step_residual(values, weight))
    solve_scalars[TOLERANCE] = wp.min(bounds[2], tolerance)


@wp.kernel
def _end_bar(
    step: wp.array(dtype=int),
    grad_rows: wp.array(dtype=int),
    node_grads: wp.array2d(dtype=wp.vec3d),
    free: wp.array(dtype=wp.int32),
    x_bar: Vectors,
    v_bar: Vectors,
    dt: wp.float64,
    rhs: Vectors,
):
    # what the loss and the later steps ask of x': the solve's right-hand side
    i = wp.tid()
    value = wp.vec3d()
    if free[i] != 0:
        value = x_bar[i] + v_bar[i] / dt
        row = grad_rows[step[0]]
        if row >= 0:
            value = value + node_grads[row, i]
    rhs[i] = value


@wp.kernel
def _add_materials(grads: wp.array2d(dtype=wp.float64), total: wp.array2d(dtype=wp.float64)):
    t, k = wp.tid()
    total[t, k] = total[t, k] + grads[t, k]


@wp.kernel
def _add_density(values: wp.array(dtype=wp.float64), dt2: wp.float64):
    values[DENSITY_BAR] = values[DENSITY_BAR] - values[DENSITY_DOT] / dt2


@wp.kernel
def _carry(
    free: wp.array(dtype=wp.int32),
    mass_dt2: wp.array(dtype=wp.float64),
    mass_dt: wp.array(dtype=wp.float64),
    lam: Vectors,
    grad_start64: Vectors,
    grad_start: wp.array(dtype=wp.vec3),
    dt: wp.float64,
    x_bar: Vectors,
    v_bar: Vectors,
):
    # the adjoints of the step's start
    i = wp.tid()
    x_value, v_value = wp.vec3d(), wp.vec3d()
    if free[i] != 0:
        x_value = mass_dt2[i] * lam[i] + (grad_start64[i] + wp.vec3d(grad_start[i])) - v_bar[i] / dt
        v_value = mass_dt[i] * lam[i]
    x_bar[i] = x_value
    v_bar[i] = v_value


@wp.kernel
def _previous_step(step: wp.array(dtype=int)):
    step[0] = step[0] - 1


class _Loop:
    """The device arrays and launches of one backward pass: made and run by
    :func:`device_backward`."""

    def __init__(
        self, sim: Any, recording: DeviceRecording, node_grads: dict[int, np.ndarray], dt: float
    ) -> None:
        d, n = sim.device, sim.node_count
        self.device, self.nodes, self.dt = d, n, dt
        self.step = wp.zeros(1, dtype=int, device=d)
        self.op = DeviceStepOperator(sim, dt, recording, self.step)
        self.recording = recording
        free = ~sim.pinned_nodes
        unit_mass = sim.scene.unit_mass * free
        mass = unit_mass * float(sim.settings.density)
        self.unit_mass = wp.array(unit_mass, dtype=wp.float64, device=d)
        self.mass_dt = wp.array(mass / dt, dtype=wp.float64, device=d)
        gravity = np.asarray(sim.settings.gravity, dtype=np.float64)
        self.gravity = wp.vec3d(*gravity)
        self.weight = wp.float64(np.linalg.norm(mass) * np.linalg.norm(gravity))
        rows = np.full(recording.substeps, -1, dtype=np.int32)
        pulls = np.zeros((max(len(node_grads), 1), n, 3))
        for row, (step, pull) in enumerate(sorted(node_grads.items())):
            rows[step], pulls[row] = row, pull
        self.grad_rows = wp.array(rows, dtype=int, device=d)
        self.node_grads = wp.array(pulls, dtype=wp.vec3d, device=d)
        self.x_bar, self.v_bar, self.rhs, self.residual, self.inertia, self.weighted = (
            wp.zeros(n, dtype=wp.vec3d, device=d) for _ in range(6)
        )
        self.materials_bar = wp.zeros((sim.tet_count, 3), dtype=wp.float64, device=d)
        self.dots = Dots(n, SLOTS, d)
        self.values = self.dots.values
        self.solver = DeviceBiCGStab(self.op.apply, self.op.inverse, graphs=sim.use_graphs)
        self.graphs = sim.use_graphs
        self.phases: dict[str, object | None] = {}  # each phase's graph (None: launched one by one)

    def _phase(self, name: str, launches: Callable[[], None]) -> None:
        if self.graphs and name not in self.phases:
            self.phases[name] = captured(self.device, launches)
        graph = self.phases.get(name)
        if graph is not None:
            wp.capture_launch(graph)
        else:
            launches()

    def _residual(self) -> None:
        """The operator at the substep and its residual, kept where it is the worst yet."""
        op, d, host = self.op, self.device, self.op.host
        op.place()
        op.forces()
        inputs = [self.step, self.recording.vs, host.x_start64, host.x_end64, host.out, op.free]
        inputs += [op.mass_dt2, self.unit_mass, self.gravity, wp.float64(self.dt)]
        outputs = [self.residual, self.inertia, self.weighted]
        wp.launch(_step_terms, dim=self.nodes, inputs=inputs, outputs=outputs, device=d)
        self.dots(self.residual, self.residual, RESIDUAL2)
        self.dots(self.inertia, self.inertia, INERTIA2)
        wp.launch(_keep_worst_residual, dim=1, inputs=[self.values, self.weight], device=d)

    def _check(self) -> None:
        self._residual()
        wp.launch(_previous_step, dim=1, inputs=[self.step], device=self.device)

    def _before_solve(self) -> None:
        """The operator at the substep, its residual checked, the solve started."""
        op, d = self.op, self.device
        self._residual()
        op.take_contact_blocks()
        bounds = wp.vec3d(*solve_bounds())
        inputs = [self.values, self.weight, bounds, self.solver.scalars]
        wp.launch(_set_tolerance, dim=1, inputs=inputs, device=d)
        inputs = [self.step, self.grad_rows, self.node_grads, op.free, self.x_bar, self.v_bar]
        wp.launch(
            _end_bar, dim=self.nodes, inputs=[*inputs, wp.float64(self.dt)], outputs=[self.rhs], device=d
        )
        self.solver.start(self.rhs)

    def _after_solve(self) -> None:
        """The solution carried to the step's start and to the parameters."""
        op, d, host, lam = self.op, self.device, self.op.host, self.solver.lam
        op.pullback(lam)
        wp.launch(
            _add_materials,
            dim=self.materials_bar.shape,
            inputs=[host.grad_materials, self.materials_bar],
            device=d,
        )
        op.add_contact_stiffness(self.values, CONTACT_BAR)
        self.dots(lam, self.weighted, DENSITY_DOT)
        wp.launch(_add_density, dim=1, inputs=[self.values, wp.float64(self.dt**2)], device=d)
        inputs = [op.free, op.mass_dt2, self.mass_dt, lam, host.grad_start64, host.grad_start]
        outputs = [self.x_bar, self.v_bar]
        wp.launch(_carry, dim=self.nodes, inputs=[*inputs, wp.float64(self.dt)], outputs=outputs, device=d)
        wp.launch(_previous_step, dim=1, inputs=[self.step], device=d)

    def worst_residual(self, first: int) -> float:
        """Substeps ``first`` down to 0, their residuals only; the worst."""
        self.step.fill_(first)
        for _ in range(first + 1):
            self._phase("check", self._check)
        return float(self.values.numpy()[WORST])

    def _substep(self) -> None:
        self._before_solve()
        self.solver.launches()
        self._after_solve()

    def run(self, first: int) -> tuple[int, float]:
        """Substeps ``first`` down to 0, with no readback between them; the most products
        and the worst solve residual (the solve's FloatingPointError where one failed)."""
        self.step.fill_(first)
        self.solver.reset_tally()
        for _ in range(first + 1):
            self._phase("substep", self._substep)
        return self.solver.read_tally()


def device_step_residual(sim: Any, recording: DeviceRecording, first: int, dt: float) -> float:
    """The worst residual of the substeps ``first`` down to 0 of ``recording`` on its device,
    each as ``adjoint_step.step_residual`` gives it on the host, with one number read back:
    whether the steps end at the roots their tangents would differentiate, without moving
    the recording to the host. In an H100 profile of a 47k-tet slab's fit the refused
    tangents took 0.68 s of 6.1 s, their recorded rollout 0.13 s of that; reading the
    recording and checking it on the host took 0.63 s on this project's CPU."""
    if first < 0:
        return 0.0
    return _Loop(sim, recording, {}, dt).worst_residual(first)


def device_backward(
    sim: Any, recording: DeviceRecording, node_grads: dict[int, np.ndarray], dt: float
) -> DeviceSums:
    """``adjoint.backward``'s loop over the substeps of ``recording`` on its device, given the
    loss's pull on the nodes at the end of the substeps it names (``sim``: a
    SoftBodySimulator); FloatingPointError where a solve does not converge."""
    last = max(node_grads, default=-1)  # later steps move no position the loss reads
    first = min(last + 1, recording.substeps) - 1
    loop = _Loop(sim, recording, node_grads, dt)
    products, solve_residual = loop.run(first) if first >= 0 else (0, 0.0)
    values = loop.values.numpy()
    return DeviceSums(
        loop.materials_bar.numpy(),
        float(values[DENSITY_BAR]),
        float(values[CONTACT_BAR]),
        float(values[WORST]),
        products,
        solve_residual,
    )
