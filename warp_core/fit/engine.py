"""Fit cloth parameters to keyframe targets: the problem, the result, and ``fit()``.

Levenberg–Marquardt (default up to 8 free parameters) takes the keyframe residuals and a
Jacobian of forward tangents, as central differences of rollouts with the CG iteration
counts frozen at the base point. The step is deliberately not tiny: a stiff sheet can be
chaotic at the micrometre scale (explicit bending inside an implicit step, springs
switching between tension and compression), where the exact local derivative says nothing
about the next LM step; a 1 % step in log space measures the slope that matters.
Adam (more parameters) takes the exact tape gradient.
Parameters are optimized in log space within Blender's bounds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import warp as wp

from ..errors import UserError
from ..losses import SurfaceDistance, launch_vertex_distance_loss
from ..mesh import ClothMesh
from ..models.blender_cloth.params import PARAMETER_BOUNDS, PARAMETER_NAMES, ClothParams
from ..models.blender_cloth.simulator import ClothSimulator
from .optimize import (
    FitDivergedError,
    OptimizeResult,
    OptimizeSettings,
    ParameterSpec,
    adam,
    identifiability,
    levenberg_marquardt,
)

LM_MAX_PARAMETERS = 8
# Blender's solver rarely produces NaN: an unstable start (e.g. stiff explicit bending)
# throws the cloth into a bounded, torn-apart state instead. A structural spring longer
# than MAX_STRETCH times its rest length, or a vertex beyond DIVERGENCE_EXTENT mesh sizes,
# marks such a rollout as diverged.
MAX_STRETCH = 10.0
DIVERGENCE_EXTENT = 1000.0
# forward-tangent step in log space (see the module docstring)
TANGENT_STEP = 1e-2


class FitError(UserError, RuntimeError):
    """A fit that cannot run or cannot start (message says what to change)."""


@dataclass
class Target:
    """Where the cloth should be at one frame.

    ``positions`` are world positions: one per cloth vertex (same topology), or the
    vertices of another mesh with ``triangles`` (a remeshed or scanned target).
    ``weights`` (per cloth vertex, same topology only) weight the squared distances.
    """

    frame: int
    positions: np.ndarray
    triangles: np.ndarray | None = None
    weights: np.ndarray | None = None


@dataclass
class FitProblem:
    mesh: ClothMesh
    params: ClothParams  # start values and the fixed settings (quality, gravity, ...)
    targets: list[Target]
    fit: list[str]
    ties: dict[str, str] = field(default_factory=dict)  # follower -> leader
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    start_frame: int = 1
    goals: np.ndarray | None = None  # (frames from start_frame to the last target, N, 3)
    loss: str = "auto"  # "vertex", "surface", or "auto"

    @property
    def frame_end(self) -> int:
        return max(t.frame for t in self.targets)

    @property
    def loss_kind(self) -> str:
        if self.loss != "auto":
            return self.loss
        n = self.mesh.vertex_count
        same = all(t.triangles is None and len(t.positions) == n for t in self.targets)
        return "vertex" if same else "surface"

    def validate(self) -> None:
        """Raise ValueError with a message naming what is wrong."""
        if not self.targets:
            raise ValueError("no targets: add at least one target frame")
        if not self.fit:
            raise ValueError("no parameters to fit: choose at least one")
        unknown = [
            p for p in list(self.fit) + list(self.ties) + list(self.ties.values()) if p not in PARAMETER_NAMES
        ]
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; choose from {', '.join(PARAMETER_NAMES)}")
        for follower, leader in self.ties.items():
            if leader not in self.fit:
                raise ValueError(f"tie {follower} = {leader}: {leader} is not being fitted")
        self.params.validate()
        zero = [p for p in self.fit if getattr(self.params, p) <= 0.0]
        if zero:
            raise ValueError(f"start value of {', '.join(zero)} is 0: fitting works on ratios, start above 0")
        if self.loss not in ("auto", "vertex", "surface"):
            raise ValueError(f"loss must be 'vertex', 'surface' or 'auto', got {self.loss!r}")
        n = self.mesh.vertex_count
        for t in self.targets:
            if t.frame <= self.start_frame:
                raise ValueError(
                    f"target frame {t.frame} is not after the simulation start frame {self.start_frame}"
                )
            pos = np.asarray(t.positions)
            if pos.ndim != 2 or pos.shape[1] != 3 or not np.isfinite(pos).all():
                raise ValueError(f"target at frame {t.frame}: positions must be finite (M, 3)")
            if self.loss_kind == "vertex" and len(pos) != n:
                raise ValueError(
                    f"target at frame {t.frame} has {len(pos)} vertices, the cloth has {n}: use the surface "
                    "loss for a target with different topology"
                )
            if self.loss_kind == "surface" and t.triangles is None:
                raise ValueError(f"target at frame {t.frame}: the surface loss needs the target's triangles")
            if t.weights is not None and (len(t.weights) != n or np.any(np.asarray(t.weights) < 0)):
                raise ValueError(f"target at frame {t.frame}: weights must be {n} values >= 0")
        if self.goals is not None:
            need = self.frame_end - self.start_frame + 1
            if self.goals.shape[0] < need or self.goals.shape[1:] != (n, 3):
                raise ValueError(f"pin goals must have shape ({need}, {n}, 3), got {self.goals.shape}")


@dataclass
class FitSettings:
    optimizer: str = "auto"  # "lm", "adam" or "auto"
    max_iterations: int = 30
    time_budget_s: float | None = None
    rel_loss_tol: float = 1e-10
    # stop once the targets are matched this closely: below Blender's own float32 noise
    rmse_tolerance_m: float = 1e-6
    device: str = "cpu"
    precision: str = "float64"
    adam_lr: float = 0.05
    recover_from_divergence: bool = True


@dataclass
class FitResult:
    params: dict[str, float]  # fitted values of the fitted (and tied) parameters
    initial_params: dict[str, float]
    all_params: ClothParams  # start settings with the fitted values applied
    loss_history: list[float]
    initial_loss: float
    final_loss: float
    per_vertex_error: dict[int, np.ndarray]  # frame -> (N,) metres
    rmse_m: float
    max_error_m: float
    initial_rmse_m: float | None  # None when the start values make the simulation diverge
    iterations: int
    n_forward: int
    n_backward: int
    seconds: float
    device: str
    optimizer: str
    stop_reason: str
    cancelled: bool
    identifiability: list[dict[str, Any]]
    warnings: list[str]

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (report format of DESIGN.md, per object)."""
        return {
            "params": self.params,
            "initial_params": self.initial_params,
            "initial_loss": self.initial_loss,
            "final_loss": self.final_loss,
            "rmse_m": self.rmse_m,
            "initial_rmse_m": self.initial_rmse_m,
            "max_error_m": self.max_error_m,
            "iterations": self.iterations,
            "n_forward": self.n_forward,
            "n_backward": self.n_backward,
            "seconds": self.seconds,
            "device": self.device,
            "optimizer": self.optimizer,
            "stop_reason": self.stop_reason,
            "cancelled": self.cancelled,
            "loss_history": self.loss_history,
            "identifiability": self.identifiability,
            "warnings": self.warnings,
        }


class ClothFitObjective:
    """Residuals, Jacobian and gradient of the keyframe mismatch for the optimizers."""

    def __init__(self, problem: FitProblem, settings: FitSettings, names: list[str]) -> None:
        problem.validate()
        self.problem = problem
        self.settings = settings
        self.names = names  # parameters the Jacobian and gradient are taken for
        try:
            self.sim = ClothSimulator(
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
        self._cache: tuple[tuple, np.ndarray, np.ndarray] | None = None
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
    def positions(
        self, values: dict[str, float], frozen: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
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
            raise FloatingPointError(f"the simulation diverged at {_fmt(values)}")
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
        x, counts = self.positions(values)
        if self.kind == "surface":
            self._residuals_at(x)  # correspondences at the base point
        cols = []
        for name in self.names:
            up, down = dict(values), dict(values)
            up[name] = values[name] * math.exp(TANGENT_STEP)
            down[name] = values[name] * math.exp(-TANGENT_STEP)
            xp, _ = self.positions(up, frozen=counts)
            xm, _ = self.positions(down, frozen=counts)
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
            raise FloatingPointError(f"the simulation diverged at {_fmt(values)}")
        tape.backward(loss)
        self.n_backward += 1
        grad = self.sim.params.grad.numpy().astype(float)
        tape.zero()
        return value, {name: float(grad[PARAMETER_NAMES.index(name)]) for name in self.names}

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


def _fmt(values: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.6g}" for k, v in values.items())


def _triangulate(mesh: ClothMesh) -> np.ndarray:
    tris = []
    for c in mesh.polygons():
        for k in range(1, len(c) - 1):
            tris.append((c[0], c[k], c[k + 1]))
    return np.array(tris, dtype=np.int32)


def parameter_spec(problem: FitProblem) -> ParameterSpec:
    names = list(dict.fromkeys(list(problem.fit) + list(problem.ties)))
    initial = {n: float(getattr(problem.params, n)) for n in names}
    # followers start at their leader's value
    for follower, leader in problem.ties.items():
        initial[follower] = initial[leader]
    bounds = {n: problem.bounds.get(n, PARAMETER_BOUNDS[n]) for n in names}
    return ParameterSpec(names=names, initial=initial, bounds=bounds, ties=dict(problem.ties))


def fit(
    problem: FitProblem,
    settings: FitSettings | None = None,
    progress: Callable[[int, float, dict[str, float]], None] | None = None,
    cancel: Any = None,
) -> FitResult:
    """Fit ``problem.fit`` so the simulation matches the targets. Raises FitError with a
    one-line reason when the fit cannot start; never returns NaN parameters."""
    settings = settings or FitSettings()
    t0 = time.perf_counter()
    try:
        problem.validate()
        spec = parameter_spec(problem)
        objective = ClothFitObjective(problem, settings, spec.names)
    except ValueError as e:
        raise FitError(str(e)) from e
    optimizer = settings.optimizer
    if optimizer == "auto":
        optimizer = "lm" if spec.n_free <= LM_MAX_PARAMETERS else "adam"
    # loss = 0.5 * (number of matched points) * RMSE^2 for the vertex loss, and
    # 0.5 * (number of target frames) * RMSE^2 for the surface loss (a mean per frame)
    points = (
        problem.mesh.vertex_count * len(problem.targets)
        if objective.kind == "vertex"
        else len(problem.targets)
    )
    opt_settings = OptimizeSettings(
        abs_loss_tol=0.5 * points * settings.rmse_tolerance_m**2,
        max_iterations=settings.max_iterations,
        rel_loss_tol=settings.rel_loss_tol,
        time_budget_s=settings.time_budget_s,
        adam_lr=settings.adam_lr,
        recover_from_divergence=settings.recover_from_divergence,
    )
    run = levenberg_marquardt if optimizer == "lm" else adam
    try:
        result: OptimizeResult = run(objective, spec, opt_settings, progress=progress, cancel=cancel)
    except FitDivergedError as e:
        raise FitError(f"the simulation diverges at the start values and no nearby start worked: {e}") from e

    values = {k: float(v) for k, v in result.values.items()}
    initial = spec.initial_values()
    warnings = list(result.warnings)
    jac = result.jacobian
    if jac is None:
        jac = spec.jacobian_to_free(objective.jacobian(values), values)
    ident = identifiability(jac, result.free_names, values, objective.residual_scale())
    for entry in ident:
        warnings += entry["warnings"]
    try:
        initial_rmse = objective.rmse(initial)
    except FloatingPointError:
        initial_rmse = None
    errors = objective.errors(values)
    all_errors = np.concatenate(list(errors.values()))
    full = problem.params.replace(**values)
    return FitResult(
        params=values,
        initial_params=initial,
        all_params=full,
        loss_history=[float(v) for v in result.loss_history],
        initial_loss=float(result.loss_history[0]),
        final_loss=float(result.best_loss),
        per_vertex_error=errors,
        rmse_m=objective.rmse(values),
        max_error_m=float(all_errors.max()),
        initial_rmse_m=initial_rmse,
        iterations=result.iterations,
        n_forward=objective.n_forward,
        n_backward=objective.n_backward,
        seconds=time.perf_counter() - t0,
        device=objective.sim.device,
        optimizer=optimizer,
        stop_reason=result.stop_reason,
        cancelled=result.cancelled,
        identifiability=ident,
        warnings=warnings,
    )


def problem_metadata(problem: FitProblem) -> dict[str, Any]:
    return {
        "params": asdict(problem.params),
        "fit": list(problem.fit),
        "ties": dict(problem.ties),
        "bounds": {k: list(v) for k, v in problem.bounds.items()},
        "start_frame": problem.start_frame,
        "loss": problem.loss,
        "target_frames": [t.frame for t in problem.targets],
    }
