"""For the gradient tests: a squared-distance loss recorded on a ``wp.Tape`` through a
rollout of the blender_cloth simulator, and the same loss from plain forward runs with the
CG iteration counts frozen, which is what central differences of the tape's gradient need."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from warp_core.models.blender_cloth.simulator import ClothSimulator

vec3d = wp.types.vector(3, wp.float64)


@wp.kernel
def squared_distance_loss(
    positions: wp.array2d(dtype=vec3d), target: wp.array2d(dtype=vec3d), loss: wp.array(dtype=wp.float64)
):
    f, i = wp.tid()
    d = positions[f, i] - target[f, i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@dataclass
class GradientCase:
    """A float64 simulator, the frames it is compared at, the targets there, and the pin
    goals per frame (None: the mesh's own pins stand still)."""

    sim: ClothSimulator
    frame_end: int
    frames: list[int]
    target: np.ndarray
    goals: np.ndarray | None = None

    def tape_gradients(self, x0: np.ndarray, v0: np.ndarray) -> tuple[float, np.ndarray, tuple]:
        """(loss, CG iterations of every substep, (d/d params, d/d x0, d/d v0)) from the tape."""
        sim = self.sim
        x0_wp = wp.array(x0, dtype=vec3d, requires_grad=True)
        v0_wp = wp.array(v0, dtype=vec3d, requires_grad=True)
        loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
        sim.params.grad.zero_()
        tape = wp.Tape()
        with tape:
            rollout = sim.rollout(self.frame_end, self.frames, goals=self.goals, x0=x0_wp, v0=v0_wp)
            self.launch_loss(rollout.positions, loss)
        tape.backward(loss)
        grads = (sim.params.grad.numpy().copy(), x0_wp.grad.numpy().copy(), v0_wp.grad.numpy().copy())
        tape.zero()
        return loss.numpy()[0], rollout.cg_iterations, grads

    def launch_loss(self, positions: wp.array, loss: wp.array) -> None:
        wp.launch(
            squared_distance_loss,
            dim=(len(self.frames), self.sim.vertex_count),
            inputs=[positions, wp.array(self.target, dtype=vec3d)],
            outputs=[loss],
        )

    def loss(
        self, x0: np.ndarray, v0: np.ndarray, iterations: np.ndarray | None, values: dict | None = None
    ) -> float:
        """The loss of a plain forward run (at ``values``, then restored), CG counts frozen."""
        sim = self.sim
        saved = sim.param_values()
        if values:
            sim.set_params(values)
        try:
            out = sim.rollout(
                self.frame_end,
                self.frames,
                goals=self.goals,
                x0=wp.array(x0, dtype=vec3d),
                v0=wp.array(v0, dtype=vec3d),
                frozen=iterations,
                keep_states=False,
            )
        finally:
            sim.set_params(saved)
        return float(((out.numpy() - self.target) ** 2).sum())


def curved_sheet(curvature: float) -> tuple[np.ndarray, list[list[int]]]:
    """6 x 6 vertices over 1 m, every third quad split into two triangles, bent by
    ``curvature * y^2`` plus a ripple along x: (vertices, polygons)."""
    from warp_core import grid_mesh

    base = grid_mesh(6, 6, 1.0, 1.0)
    polygons: list[list[int]] = []
    for k, p in enumerate(base.polygons()):
        polygons += [[p[0], p[1], p[2]], [p[0], p[2], p[3]]] if k % 3 == 0 else [list(p)]
    vertices = base.vertices.copy()
    vertices[:, 2] = curvature * vertices[:, 1] ** 2 + 0.05 * np.sin(3 * vertices[:, 0])
    return vertices, polygons


def start_off_rest(
    sim: ClothSimulator,
    rng: np.random.Generator,
    x_noise: float,
    frame_end: int,
    frames: list[int],
    goals: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x0, v0, target): free vertices moved by ``x_noise`` off the rest shape (at exact rest
    every spring sits on its tension/compression switch, where the loss has a kink and
    finite differences mean nothing), a random v0, and the rollout from them plus 1 cm noise."""
    free = (sim.topology.pinned == 0)[:, None]
    rest = sim.mesh.vertices
    x0 = rest + x_noise * rng.standard_normal(rest.shape) * free
    v0 = 0.02 * rng.standard_normal(rest.shape) * free
    target = sim.rollout(
        frame_end,
        frames,
        goals=goals,
        x0=wp.array(x0, dtype=vec3d),
        v0=wp.array(v0, dtype=vec3d),
        keep_states=False,
    ).numpy()
    return x0, v0, target + 0.01 * rng.standard_normal(target.shape)


def assert_parameter_gradients(
    case: GradientCase, x0: np.ndarray, v0: np.ndarray, names: list[str], rel: float = 1e-3
) -> None:
    """The tape's d loss / d parameter against a central difference (1e-6 relative, CG counts
    held) for each of ``names``: within ``rel``, and neither side zero."""
    sim = case.sim
    _, iterations, (param_grad, _, _) = case.tape_gradients(x0, v0)
    base = sim.param_values()
    order = list(base)  # the simulator's parameter order
    for name in names:
        step = 1e-6 * base[name]
        plus = case.loss(x0, v0, iterations, {name: base[name] + step})
        minus = case.loss(x0, v0, iterations, {name: base[name] - step})
        fd = (plus - minus) / (2 * step)
        grad = param_grad[order.index(name)]
        assert fd != 0.0, name
        assert abs(grad - fd) <= rel * abs(fd), f"{name}: adjoint {grad:.9e} fd {fd:.9e}"
