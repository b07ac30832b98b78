"""The keyframe mismatch of a model's rollout, as the optimizers see it.

Levenberg–Marquardt takes the keyframe residuals and a Jacobian of forward tangents, as
central differences of rollouts with the model's discrete choices (``Rollout.frozen``, e.g.
a solver's iteration counts) repeated from the base point, except where repeating them
would leave a solve far from converged (see the model's ``Rollout.frozen``). The step is
deliberately not tiny: a stiff sheet can be chaotic at the micrometre scale (explicit
bending inside an implicit step, springs switching between tension and compression),
where the exact local derivative says nothing about the next LM step; a 1 % step in log
space measures the slope that matters. In float32 the rollouts carry rounding noise of about 1e-5 of the
motion, so the step is 3 % there (the step that balances that noise against the
curvature the central difference neglects). Next to a bound the difference is one-sided,
towards the inside: no simulation runs outside the bounds; the rollouts of one Jacobian run
side by side on the CPU's cores (``tangents``). Adam takes the exact tape gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import warp as wp

from ..losses import SurfaceDistance, launch_vertex_distance_loss
from ..models import get_model
from ..tracks.loss import Reprojection
from .optimize import format_values
from .problem import FitError, FitProblem, FitSettings
from .spec import ParameterSpec
from .tangents import (
    RolloutPool,
    log_tangents,
    residuals_side_by_side,
    side_by_side_width,
    smoothed_where_chaotic,
)

__all__ = ["DIVERGENCE_EXTENT", "MAX_STRETCH", "TANGENT_STEP", "TANGENT_STEPS", "FitObjective"]

# A solver may not produce NaN when it blows up: Blender's, from an unstable start (e.g.
# stiff explicit bending), throws the cloth into a bounded, torn-apart state instead. An
# edge longer than MAX_STRETCH times its rest length (``Simulator.max_stretch``), or a
# vertex beyond DIVERGENCE_EXTENT mesh sizes, marks such a rollout as diverged.
MAX_STRETCH = 10.0
DIVERGENCE_EXTENT = 1000.0
# forward-tangent step in log space, by precision (see the module docstring)
TANGENT_STEP = 1e-2
TANGENT_STEPS = {"float64": TANGENT_STEP, "float32": 3e-2}


class FitObjective:
    """Residuals, Jacobian and gradient of the keyframe mismatch for the optimizers.

    The simulator comes from the problem's model (``problem.model`` in the registry);
    ``names`` are the parameters the Jacobian and gradient are taken for (may be empty
    when only errors are wanted). With a ``spec`` (the fit's parameters, ties and bounds),
    :meth:`log_jacobian` gives one column per free parameter, and a point outside the
    spec's bounds is refused (ValueError) instead of simulated.
    """

    def __init__(
        self,
        problem: FitProblem,
        settings: FitSettings,
        names: list[str],
        spec: ParameterSpec | None = None,
    ) -> None:
        problem.validate()
        self.problem = problem
        self.settings = settings
        self.names = names  # parameters the Jacobian and gradient are taken for
        self.spec = spec
        self.tangent_step = TANGENT_STEPS.get(settings.precision, TANGENT_STEP)
        self.model = get_model(problem.model)
        # position of each parameter in the simulator's ``params`` (and its gradient)
        self._param_index = {p.name: k for k, p in enumerate(self.model.parameters)}

        def build() -> Any:
            return self.model.build(
                problem.mesh,
                problem.params,
                device=settings.device,
                precision=settings.precision,
                start_frame=problem.start_frame,
            )

        try:
            self.sim = build()
        except ValueError as e:
            raise FitError(str(e)) from e
        self.rollout_pool = RolloutPool(build)  # more simulators for a Jacobian's rollouts
        self.targets = sorted(problem.targets, key=lambda t: t.frame)
        self.frames = problem.target_frames
        self.kind = problem.loss_kind
        # the unit of RMSE, tolerance and motion: pixels for footage targets
        self.unit = "px" if self.kind == "tracks" else "m"
        n = problem.mesh.vertex_count
        self.n_forward = 0
        self.n_backward = 0
        self.n_smoothed = 0  # stable-gradient entries taken as the loss's slope over a step
        self.smoothed_last: tuple[str, ...] = ()  # free names the last stable gradient smoothed
        self._motion_norm: float | None = None  # see tangents.motion_norm
        self._cache: tuple[tuple, np.ndarray, Any, dict] | None = None
        extent = float(np.ptp(problem.mesh.vertices, axis=0).max()) or 1.0
        self._limit = DIVERGENCE_EXTENT * extent + float(np.abs(problem.mesh.vertices).max())
        if self.kind == "tracks":
            rest = (problem.start_frame, problem.mesh.vertices)
            self.tracks = Reprojection(problem.tracks, self.frames, extent, rest)
        elif self.kind == "vertex":
            self.weights = [
                np.ones(n) if t.weights is None else np.asarray(t.weights, float) for t in self.targets
            ]
            self.sqrt_w = np.concatenate([np.repeat(np.sqrt(w), 3) for w in self.weights])
            self.target_stack = np.stack([np.asarray(t.positions, float) for t in self.targets])
        else:
            tris = problem.mesh.triangles()
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
        self._check_bounds(values)
        self.sim.set_params(values)
        rollout = self.sim.rollout(
            self.problem.frame_end,
            self.frames,
            self.problem.goals,
            frozen=frozen,
        )
        self.n_forward += 1
        x = rollout.numpy()
        self._check_diverged(x, values)
        if frozen is None:
            self._cache = (key, x, rollout.frozen, getattr(rollout, "extras", {}))
        return x, rollout.frozen

    def _check_bounds(self, values: dict[str, float]) -> None:
        if self.spec is None:
            return
        for name, (lo, hi) in self.spec.bounds.items():
            v = values.get(name)
            if v is not None and not (max(lo, 0.0) <= v <= hi):
                raise ValueError(f"{name} = {v:.6g} is outside the fit's bounds [{lo:g}, {hi:g}]")

    def _check_diverged(self, x: np.ndarray, values: dict[str, float]) -> None:
        """A rollout that is non-finite, flew off or was torn apart is a diverged one."""
        if not np.isfinite(x).all() or np.abs(x).max() > self._limit or self.sim.max_stretch(x) > MAX_STRETCH:
            raise FloatingPointError(f"the simulation diverged at {format_values(values)}")

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        x, _ = self.positions(values)
        return self._residuals_at(x)

    def residuals_of(self, points: list[dict[str, float]]) -> list[np.ndarray | None]:
        """Residuals at several points, their rollouts side by side (None: refused or diverged)."""
        return residuals_side_by_side(self, points)

    def side_by_side(self) -> int:
        """How many points ``residuals_of`` simulates at once."""
        return side_by_side_width(self)

    def restore_params(self) -> None:
        """The simulator back at the cached point's values (other rollouts moved it)."""
        if self._cache is not None:
            self.sim.set_params(dict(self._cache[0]))

    def _residuals_at(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "tracks":
            return self.tracks.residuals(x)
        if self.kind == "vertex":
            return self.sqrt_w * (x - self.target_stack).ravel()
        return np.concatenate([s.residuals(x[k]) for k, s in enumerate(self.surfaces)])

    def log_jacobian(self, values: dict[str, float]) -> np.ndarray:
        """d residual / d log value of each free parameter of ``self.spec`` (its followers
        moved with it), one-sided next to a bound."""
        if self.spec is None:
            raise ValueError("log_jacobian needs the objective's spec")
        spec = self.spec
        groups = [
            (spec.group(k), (float(spec.log_lower[k]), float(spec.log_upper[k]))) for k in range(spec.n_free)
        ]
        return np.stack(log_tangents(self, values, groups), axis=1)

    def _residual_tangents(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
        if self.kind == "tracks":
            return self.tracks.residual_tangents(x, dx)
        if self.kind == "vertex":
            return self.sqrt_w * dx.ravel()
        return np.concatenate([s.residual_tangents(dx[k]) for k, s in enumerate(self.surfaces)])

    def _moved(self, values: dict[str, float], group: list[str], z: float) -> dict[str, float]:
        out = dict(values)
        v = math.exp(z)
        for name in group:
            lo, hi = self.spec.bounds.get(name, (0.0, math.inf)) if self.spec else (0.0, math.inf)
            out[name] = min(max(v, lo), hi)
        return out

    def gradient(self, values: dict[str, float], kind: str | None = None) -> tuple[float, dict[str, float]]:
        """Loss 0.5 |r|^2 and its gradient from the tape, of ``kind`` (default the settings'
        ``gradient``): ``exact``, ``stable`` or ``implicit`` (see the cloth model's
        ``adjoint_stable``)."""
        if self.kind == "tracks":
            raise FitError(
                "footage targets have no tape gradient: fit them with Levenberg-Marquardt "
                "(at most 12 free parameters)"
            )
        self._check_bounds(values)
        self.sim.set_params(values)
        dtype = self.sim.dtype
        d = self.sim.device
        loss = wp.zeros(1, dtype=dtype, device=d, requires_grad=True)
        self.sim.params.grad.zero_()
        self.sim.gradient = kind or self.settings.gradient
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
        # a torn-apart rollout can have a finite loss: the same check as for residuals
        self._check_diverged(rollout.numpy(), values)
        stable = (kind or self.settings.gradient) == "stable"
        frozen = rollout.frozen if stable else None
        tape.backward(loss)
        self.n_backward += 1
        grad = self.sim.params.grad.numpy().astype(float)
        tape.zero()
        found = {name: float(grad[self._param_index[name]]) for name in self.names}
        return value, smoothed_where_chaotic(self, values, value, found, frozen) if stable else found

    # ------------------------------------------------------------------ reporting
    def errors(self, values: dict[str, float]) -> dict[int, np.ndarray]:
        """Per-vertex distance (metres) to the target at each target frame (for footage
        targets: per-marker pixel error at each frame with markers)."""
        x, _ = self.positions(values)
        if self.kind == "tracks":
            return self.tracks.per_frame(x)
        if self.kind == "vertex":
            return {f: np.linalg.norm(x[k] - self.target_stack[k], axis=1) for k, f in enumerate(self.frames)}
        out = {}
        for k, f in enumerate(self.frames):
            s = self.surfaces[k]
            s.update_correspondences(wp.array(x[k], dtype=self.sim.vec3, device=self.sim.device))
            out[f] = np.linalg.norm(x[k] - s.cloth_closest_points.numpy(), axis=1)
        return out

    def track_errors(self, values: dict[str, float]) -> dict[str, float]:
        """Track name -> RMS pixel error, worst first (empty unless footage targets)."""
        if self.kind != "tracks":
            return {}
        x, _ = self.positions(values)
        return self.tracks.per_track(x)

    def noise_rmse(self) -> float | None:
        """Footage: the reprojection RMSE the markers' own noise explains at the best values
        (sqrt(2) x their per-axis jitter, less the degrees of freedom the fit and the profiled
        bindings take), at the top of what the jitter's estimate allows (two standard errors);
        None otherwise or when the tracks are too short to tell."""
        jitter = self.problem.tracks.jitter_px() if self.kind == "tracks" else None
        if jitter is None:
            return None
        sigma, relative_error = jitter
        entries = 2 * self.tracks.marker_count
        free = entries - len(self.names) - 2 * self.tracks.profiled_count
        return math.sqrt(2.0) * sigma * (1.0 + 2.0 * relative_error) * math.sqrt(max(free, 1) / entries)

    def track_bindings(self, values: dict[str, float]) -> dict[str, list[float]]:
        """Track name -> barycentrics its markers put it at (empty unless footage targets)."""
        if self.kind != "tracks":
            return {}
        x, _ = self.positions(values)
        return self.tracks.binding_map(x)

    def rmse(self, values: dict[str, float]) -> float:
        x, _ = self.positions(values)
        if self.kind == "tracks":
            return self.tracks.rmse(x)
        if self.kind == "vertex":
            return float(np.sqrt(np.mean(np.sum((x - self.target_stack) ** 2, axis=-1))))
        return float(np.sqrt(np.mean([s.value(x[k]) for k, s in enumerate(self.surfaces)])))

    def motion(self) -> float:
        """RMS distance (metres) of the targets from the rest positions: the size of what
        the fit has to reproduce (for surface targets, the symmetric surface distance)."""
        rest = np.asarray(self.problem.mesh.vertices, dtype=np.float64)
        if self.kind == "tracks":
            return self.tracks.motion(rest)
        if self.kind == "vertex":
            return float(np.sqrt(np.mean(np.sum((self.target_stack - rest[None]) ** 2, axis=-1))))
        return float(np.sqrt(np.mean([s.value(rest) for s in self.surfaces])))

    def contacts(self, values: dict[str, float]) -> dict | None:
        """Where the rollout at ``values`` touched collision objects: the frames (scene
        frame numbers) and how many vertices touched; None without colliders."""
        self.positions(values)
        found = self._cache[3].get("contacts") if self._cache is not None else None
        if found is None:
            return None
        start = self.problem.start_frame
        return {"frames": [start + f for f in found["frames"]], "vertices": found["vertices"]}

    def rounding_gap(self, values: dict[str, float]) -> float | None:
        """RMS distance (metres) between this rollout at ``values`` and the same rollout in
        the other precision (float32 <-> float64): how far rounding alone moves the motion
        there. None when the other precision's rollout cannot be run."""
        other = "float32" if self.settings.precision == "float64" else "float64"
        x, _ = self.positions(values)
        try:
            sim = self.model.build(
                self.problem.mesh,
                self.problem.params,
                device=self.settings.device,
                precision=other,
                start_frame=self.problem.start_frame,
            )
            sim.set_params(values)
            y = sim.rollout(self.problem.frame_end, self.frames, self.problem.goals).numpy()
        except (ValueError, RuntimeError):
            return None
        if not np.isfinite(y).all():
            return math.inf
        return self.change(x, y)

    def change(self, x0: np.ndarray, x1: np.ndarray) -> float:
        """RMS difference of two rollouts in the fit's unit (metres; pixels as seen by the
        camera for footage targets)."""
        if self.kind == "tracks":
            return self.tracks.change(x0, x1)
        return float(np.sqrt(np.mean(np.sum((x1 - x0) ** 2, axis=-1))))

    def matched_points(self) -> int:
        """What the loss averages over: loss = 0.5 * matched_points * RMSE^2 (every target
        vertex for the vertex loss; every target frame, a mean each, for the surface loss)."""
        if self.kind == "tracks":
            return self.tracks.marker_count
        if self.kind == "vertex":
            return self.problem.mesh.vertex_count * len(self.targets)
        return len(self.targets)

    @property
    def device(self) -> str:
        return self.sim.device

    def coordinate_scale(self) -> float:
        """Largest coordinate magnitude of the rest mesh and the targets: what float rounding
        of positions is relative to (for footage targets, the image size in pixels)."""
        if self.kind == "tracks":
            intr = self.problem.tracks.intrinsics
            return float(max(intr.width, intr.height))
        arrays = [np.asarray(self.problem.mesh.vertices)] + [np.asarray(t.positions) for t in self.targets]
        return float(max(np.abs(a).max(initial=0.0) for a in arrays))

    def residual_scale(self) -> np.ndarray | float:
        if self.kind == "tracks":
            return self.tracks.residual_scale()
        if self.kind == "vertex":
            with np.errstate(divide="ignore"):
                return np.where(self.sqrt_w > 0, 1.0 / np.maximum(self.sqrt_w, 1e-300), 0.0)
        scales = []
        for s in self.surfaces:
            a = s.cloth_weights.numpy().astype(float)
            b = s.target_weights.numpy().astype(float)
            scales.append(np.repeat(1.0 / np.sqrt(0.5 * np.concatenate([a, b])), 3))
        return np.concatenate(scales)
