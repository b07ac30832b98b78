"""The keyframe mismatch of a model's rollout, as the optimizers see it.

Levenberg–Marquardt takes the keyframe residuals and a Jacobian of forward tangents, as
central differences of rollouts with the model's discrete choices (``Rollout.frozen``, e.g.
a solver's iteration counts) repeated from the base point. The step is deliberately not
tiny: a stiff sheet can be chaotic at the micrometre scale (explicit bending inside an
implicit step, springs switching between tension and compression), where the exact local
derivative says nothing about the next LM step; a 1 % step in log space measures the
slope that matters. Adam takes the exact tape gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import warp as wp

from ..losses import SurfaceDistance, launch_vertex_distance_loss
from ..mesh import ClothMesh
from ..models import get_model
from .optimize import format_values
from .problem import FitError, FitProblem, FitSettings

__all__ = ["DIVERGENCE_EXTENT", "MAX_STRETCH", "TANGENT_STEP", "FitObjective"]

# A solver may not produce NaN when it blows up: Blender's, from an unstable start (e.g.
# stiff explicit bending), throws the cloth into a bounded, torn-apart state instead. An
# edge longer than MAX_STRETCH times its rest length (``Simulator.max_stretch``), or a
# vertex beyond DIVERGENCE_EXTENT mesh sizes, marks such a rollout as diverged.
MAX_STRETCH = 10.0
DIVERGENCE_EXTENT = 1000.0
# forward-tangent step in log space (see the module docstring)
TANGENT_STEP = 1e-2


class FitObjective:
    """Residuals, Jacobian and gradient of the keyframe mismatch for the optimizers.

    The simulator comes from the problem's model (``problem.model`` in the registry);
    ``names`` are the parameters the Jacobian and gradient are taken for (may be empty
    when only errors are wanted).
    """

    def __init__(self, problem: FitProblem, settings: FitSettings, names: list[str]) -> None:
        problem.validate()
        self.problem = problem
        self.settings = settings
        self.names = names  # parameters the Jacobian and gradient are taken for
        self.model = get_model(problem.model)
        # position of each parameter in the simulator's ``params`` (and its gradient)
        self._param_index = {p.name: k for k, p in enumerate(self.model.parameters)}
        try:
            self.sim = self.model.build(
                problem.mesh,
                problem.params,
                device=settings.device,
                precision=settings.precision,
                start_frame=problem.start_frame,
            )
        except ValueError as e:
            raise FitError(str(e)) from e
        self.targets = sorted(problem.targets, key=lambda t: t.frame)
        self.frames = [t.frame for t in self.targets]
        self.kind = problem.loss_kind
        n = problem.mesh.vertex_count
        self.n_forward = 0
        self.n_backward = 0
        self._cache: tuple[tuple, np.ndarray, Any] | None = None
        extent = float(np.ptp(problem.mesh.vertices, axis=0).max()) or 1.0
        self._limit = DIVERGENCE_EXTENT * extent + float(np.abs(problem.mesh.vertices).max())
        if self.kind == "vertex":
            self.weights = [
                np.ones(n) if t.weights is None else np.asarray(t.weights, float) for t in self.targets
            ]
            self.sqrt_w = np.concatenate([np.repeat(np.sqrt(w), 3) for w in self.weights])
            self.target_stack = np.stack([np.asarray(t.positions, float) for t in self.targets])
        else:
            tris = _triangulate(problem.mesh)
            dtype = self.sim.dtype
            self.surfaces = [
                SurfaceDistance(
                    tris,
                    n,
                    np.asarray(t.positions, float),
                    np.asarray(t.triangles),
                    dtype=dtype,
                    device=self.sim.device,
                )
                for t in self.targets
            ]

    # ------------------------------------------------------------------ forward
    def positions(self, values: dict[str, float], frozen: Any = None) -> tuple[np.ndarray, Any]:
        key = tuple(sorted(values.items()))
        if frozen is None and self._cache is not None and self._cache[0] == key:
            return self._cache[1], self._cache[2]
        self.sim.set_params(values)
        rollout = self.sim.rollout(
            self.problem.frame_end,
            self.frames,
            self.problem.goals,
            frozen=frozen,
        )
        self.n_forward += 1
        x = rollout.numpy()
        if not np.isfinite(x).all() or np.abs(x).max() > self._limit or self.sim.max_stretch(x) > MAX_STRETCH:
            raise FloatingPointError(f"the simulation diverged at {format_values(values)}")
        if frozen is None:
            self._cache = (key, x, rollout.frozen)
        return x, rollout.frozen

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        x, _ = self.positions(values)
        return self._residuals_at(x)

    def _residuals_at(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "vertex":
            return self.sqrt_w * (x - self.target_stack).ravel()
        return np.concatenate([s.residuals(x[k]) for k, s in enumerate(self.surfaces)])

    def jacobian(self, values: dict[str, float]) -> np.ndarray:
        """d residual / d value for each parameter in ``self.names`` (forward tangents)."""
        x, frozen = self.positions(values)
        if self.kind == "surface":
            self._residuals_at(x)  # correspondences at the base point
        cols = []
        for name in self.names:
            up, down = dict(values), dict(values)
            up[name] = values[name] * math.exp(TANGENT_STEP)
            down[name] = values[name] * math.exp(-TANGENT_STEP)
            xp, _ = self.positions(up, frozen=frozen)
            xm, _ = self.positions(down, frozen=frozen)
            dx = (xp - xm) / (up[name] - down[name])
            if self.kind == "vertex":
                cols.append(self.sqrt_w * dx.ravel())
            else:
                cols.append(np.concatenate([s.residual_tangents(dx[k]) for k, s in enumerate(self.surfaces)]))
        self.sim.set_params(values)
        return np.stack(cols, axis=1)

    def gradient(self, values: dict[str, float]) -> tuple[float, dict[str, float]]:
        """Loss 0.5 |r|^2 and its exact gradient from the tape."""
        self.sim.set_params(values)
        dtype = self.sim.dtype
        d = self.sim.device
        loss = wp.zeros(1, dtype=dtype, device=d, requires_grad=True)
        self.sim.params.grad.zero_()
        tape = wp.Tape()
        with tape:
            rollout = self.sim.rollout(self.problem.frame_end, self.frames, self.problem.goals)
            for k in range(len(self.frames)):
                row = rollout.positions[k]
                if self.kind == "vertex":
                    target = wp.array(self.target_stack[k], dtype=self.sim.vec3, device=d)
                    w = wp.array(self.weights[k], dtype=dtype, device=d)
                    launch_vertex_distance_loss(row, target, w, loss, scale=0.5)
                else:
                    self.surfaces[k].launch_loss(row, loss, scale=0.5)
        self.n_forward += 1
        value = float(loss.numpy()[0])
        if not math.isfinite(value):
            raise FloatingPointError(f"the simulation diverged at {format_values(values)}")
        tape.backward(loss)
        self.n_backward += 1
        grad = self.sim.params.grad.numpy().astype(float)
        tape.zero()
        return value, {name: float(grad[self._param_index[name]]) for name in self.names}

    # ------------------------------------------------------------------ reporting
    def errors(self, values: dict[str, float]) -> dict[int, np.ndarray]:
        """Per-vertex distance (metres) to the target at each target frame."""
        x, _ = self.positions(values)
        if self.kind == "vertex":
            return {f: np.linalg.norm(x[k] - self.target_stack[k], axis=1) for k, f in enumerate(self.frames)}
        out = {}
        for k, f in enumerate(self.frames):
            s = self.surfaces[k]
            s.update_correspondences(wp.array(x[k], dtype=self.sim.vec3, device=self.sim.device))
            out[f] = np.linalg.norm(x[k] - s.cloth_closest_points.numpy(), axis=1)
        return out

    def rmse(self, values: dict[str, float]) -> float:
        x, _ = self.positions(values)
        if self.kind == "vertex":
            return float(np.sqrt(np.mean(np.sum((x - self.target_stack) ** 2, axis=-1))))
        return float(np.sqrt(np.mean([s.value(x[k]) for k, s in enumerate(self.surfaces)])))

    def residual_scale(self) -> np.ndarray | float:
        if self.kind == "vertex":
            with np.errstate(divide="ignore"):
                return np.where(self.sqrt_w > 0, 1.0 / np.maximum(self.sqrt_w, 1e-300), 0.0)
        scales = []
        for s in self.surfaces:
            a = s.cloth_weights.numpy().astype(float)
            b = s.target_weights.numpy().astype(float)
            scales.append(np.repeat(1.0 / np.sqrt(0.5 * np.concatenate([a, b])), 3))
        return np.concatenate(scales)


def _triangulate(mesh: ClothMesh) -> np.ndarray:
    tris = []
    for c in mesh.polygons():
        for k in range(1, len(c) - 1):
            tris.append((c[0], c[k], c[k + 1]))
    return np.array(tris, dtype=np.int32)
