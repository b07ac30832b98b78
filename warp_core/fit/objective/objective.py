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
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import warp as wp

from ...models import get_model
from ...targets import TargetKind, Unit, target_for
from ...targets.vertex import launch_point_loss
from ..optimizers.base import format_values
from ..problem.problem import FitError, FitProblem
from ..problem.settings import FitSettings
from ..problem.spec import ParameterSpec
from .mapped import RegionSimulator
from .rollout_pool import RolloutPool
from .tangent_columns import expect_jacobians, log_jacobian_of
from .tangents import residuals_side_by_side, side_by_side_width, smoothed_where_chaotic

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

    Made by the fit engine (``engine.fit``), the shared fit (one per object) and the add-on's
    error colours; read by the optimizers (residuals, Jacobian, gradient), the verdict (errors,
    RMSE, motion, scales) and the footage fit. Holds the problem and settings, the model's
    simulator (``sim``, from ``problem.model`` in the registry) with a pool of more for a
    Jacobian's rollouts, the target it compares against (``target``, a
    :class:`~warp_core.targets.TargetKind` whose kind and unit it never asks about), the
    evaluation counts, and the last rollout (cached by its values).

    ``names`` are the parameters the Jacobian and gradient are taken for (may be empty when
    only errors are wanted). With a ``spec`` (the fit's parameters, ties and bounds),
    :meth:`log_jacobian` gives one column per free parameter, and a point outside the spec's
    bounds is refused (ValueError) instead of simulated.
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

        self.layout = problem.map_layout()

        def build() -> Any:
            return self.build_simulator(settings.precision)

        try:
            self.sim = build()
        except ValueError as e:
            raise FitError(str(e)) from e
        self.rollout_pool = RolloutPool(build)  # more simulators for a Jacobian's rollouts
        self.frames = problem.target_frames
        self.target: TargetKind = target_for(problem, self.sim)
        self.n_forward = 0
        self.n_backward = 0
        self.jacobian_used: str | None = None  # see ``tangent_columns``, once a Jacobian is taken
        self.tangents_refused = False  # a base rollout's steps left their roots (``tangent_columns``)
        expect_jacobians(self)  # a Jacobian the model cannot give is refused before any rollout
        self.n_smoothed = 0  # stable-gradient entries taken as the loss's slope over a step
        # the largest "gradient_residual" a backward pass reported (``ModelRollout.extras``)
        self.gradient_residual = 0.0
        self.smoothed_last: tuple[str, ...] = ()  # free names the last stable gradient smoothed
        self._motion_norm: float | None = None  # see motion_norm
        # the last point simulated, and the first: a fit's verdict reads the start's RMSE
        # again after the search has left it (one rollout fewer a fit)
        self._cache: tuple[tuple, np.ndarray, Any, dict] | None = None
        self._first: tuple[tuple, np.ndarray, Any, dict] | None = None
        extent = float(np.ptp(problem.mesh.vertices, axis=0).max()) or 1.0
        self._limit = DIVERGENCE_EXTENT * extent + float(np.abs(problem.mesh.vertices).max())

    def build_simulator(self, precision: str) -> Any:
        """A simulator of the problem in ``precision`` on the fit's device; with region maps,
        one that takes the region values as parameters (``mapped.RegionSimulator``)."""
        problem = self.problem
        sim = self.model.build(
            problem.mesh,
            problem.model_settings,
            device=self.settings.device,
            precision=precision,
            start_frame=problem.start_frame,
        )
        if self.layout is None or not self.layout.has_regions:
            return sim
        return RegionSimulator(sim, self.layout, problem.model_settings.values())

    @property
    def unit(self) -> Unit:
        """The unit of RMSE, tolerance and motion: the target's."""
        return self.target.unit

    def tape_gradient_refusal(self) -> str | None:
        """Why this objective has no tape gradient, as the subject of a sentence ("object
        collisions have no tape gradient"); None where it has one. The model's word comes
        first, then the target kind's, then the simulator's for its scene."""
        if not self.model.differentiable:
            return self.sim.tape_gradient_refusal() or f"the {self.model.name} model has no tape gradient"
        if not self.target.has_tape_gradient:
            return f"{self.target.label} have no tape gradient"
        return self.sim.tape_gradient_refusal()

    # ------------------------------------------------------------------ forward
    def positions(self, values: dict[str, float], frozen: Any = None) -> tuple[np.ndarray, Any]:
        key = tuple(sorted(values.items()))
        if frozen is None:
            for kept in (self._cache, self._first):
                if kept is not None and kept[0] == key:
                    return kept[1], kept[2]
        self.check_bounds(values)
        self.sim.set_params(values)
        rollout = self.sim.rollout(self.problem.frame_end, self.frames, self.problem.goals, frozen=frozen)
        self.n_forward += 1
        x = rollout.numpy()
        self.check_diverged(x, values)
        if frozen is None:
            self._cache = (key, x, rollout.frozen, rollout.extras)
            self._first = self._first or self._cache
        return x, rollout.frozen

    def check_bounds(self, values: dict[str, float]) -> None:
        """Refuse (ValueError) a point outside the spec's bounds: it is not simulated."""
        for name, (lo, hi) in (self.spec.bounds if self.spec is not None else {}).items():
            v = values.get(name)
            if v is not None and not (max(lo, 0.0) <= v <= hi):
                raise ValueError(f"{name} = {v:.6g} is outside the fit's bounds [{lo:g}, {hi:g}]")

    def check_diverged(self, x: np.ndarray, values: dict[str, float]) -> None:
        """A rollout that is non-finite, flew off or was torn apart is a diverged one."""
        if not np.isfinite(x).all() or np.abs(x).max() > self._limit or self.sim.max_stretch(x) > MAX_STRETCH:
            raise FloatingPointError(f"the simulation diverged at {format_values(values)}")

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        x, _ = self.positions(values)
        return self.residuals_at(x)

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

    def residuals_at(self, x: np.ndarray) -> np.ndarray:
        """The residuals of a rollout's positions ``x`` at the target frames."""
        return self.target.residuals(x)

    def log_jacobian(self, values: dict[str, float]) -> np.ndarray:
        """d residual / d log value of each free parameter of ``self.spec`` (its followers
        moved with it): forward tangents or central differences (``tangent_columns``)."""
        if self.spec is None:
            raise ValueError("log_jacobian needs the objective's spec")
        return log_jacobian_of(self, values)

    def moved(self, values: dict[str, float], group: list[str], z: float) -> dict[str, float]:
        """``values`` with every name of ``group`` at ``exp(z)``, within its bounds."""
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
        regions = self.layout is not None and self.layout.has_regions
        if regions:
            self.sim.record_maps([r.kind for r in self.layout.regions])
        value, rollout, tape = self.backward_pass(values, kind)
        stable = (kind or self.settings.gradient_for(self.model.gradient_kinds)) == "stable"
        frozen = rollout.frozen if stable else None
        grad = self.sim.params.grad.numpy().astype(float)
        own = [name for name in self.names if name in self._param_index]
        found = {name: float(grad[self._param_index[name]]) for name in own}
        if regions:
            start = self.problem.model_settings.values()
            found.update(self.layout.region_gradient(self.sim.map_gradients(), values, start, self.names))
        tape.zero()
        return value, smoothed_where_chaotic(self, values, value, found, frozen) if stable else found

    def map_gradient(
        self, values: dict[str, float], maps: Sequence[str], kind: str | None = None
    ) -> tuple[float, dict[str, np.ndarray]]:
        """Loss 0.5 |r|^2 and its gradient with respect to the per-vertex weights of each of
        ``maps`` (some of the model's ``map_kinds``; kind -> (N,)), from the tape of ``kind``
        as :meth:`gradient`'s. Where the stable gradient smooths a parameter's entry over the
        tangent step, a map's entries are as the tape gave them. The simulator records these
        maps from then on (a parameter gradient with them costs a little more, same numbers)."""
        loss, found, _, _ = self.map_and_parameter_gradient(values, maps, kind)
        return loss, found

    def map_and_parameter_gradient(
        self, values: dict[str, float], maps: Sequence[str], kind: str | None = None
    ) -> tuple[float, dict[str, np.ndarray], dict[str, float], Any]:
        """:meth:`map_gradient`, the model's parameters' gradient from the same backward pass
        (no smoothing), and the rollout's discrete choices (``Rollout.frozen``)."""
        missing = [m for m in maps if m not in self.model.map_kinds]
        if missing:
            raise FitError(f"the {self.model.label} model has no tape gradient for the map(s) {missing}")
        refusal = self.tape_gradient_refusal()
        if refusal is not None:
            raise FitError(f"{refusal}: no map gradient")
        self.sim.record_maps(maps)
        value, rollout, tape = self.backward_pass(values, kind)
        found = self.sim.map_gradients()
        grad = self.sim.params.grad.numpy().astype(float)
        tape.zero()
        return value, found, {name: float(grad[k]) for name, k in self._param_index.items()}, rollout.repeated

    def set_maps(self, maps: Mapping[str, np.ndarray]) -> None:
        """New per-vertex weights for some of the model's maps (``Simulator.set_maps``) on the
        simulator the tape runs; the cached rollout goes with the old ones. The pool's
        simulators (a Jacobian's rollouts) keep the problem's weights."""
        self.sim.set_maps(maps)
        self._cache = self._first = None

    def backward_pass(
        self, values: dict[str, float], kind: str | None, targets: np.ndarray | None = None
    ) -> tuple[float, Any, wp.Tape]:
        """A rollout at ``values`` on a tape, its loss and the backward pass of ``kind``: the
        loss, the rollout and the tape (the caller reads the gradients, then zeroes it). With
        ``targets`` ((frames, N, 3) positions) the loss is ``0.5 |x - targets|^2`` instead of
        the target kind's: its gradient with respect to the positions is ``x - targets``."""
        if not self.target.has_tape_gradient:
            raise FitError(self.target.tape_refusal or f"{self.target.label} have no tape gradient")
        self.check_bounds(values)
        self.sim.set_params(values)
        dtype = self.sim.dtype
        d = self.sim.device
        loss = wp.zeros(1, dtype=dtype, device=d, requires_grad=True)
        self.sim.params.grad.zero_()
        self.sim.gradient = kind or self.settings.gradient_for(self.model.gradient_kinds)
        tape = wp.Tape()
        with tape:
            rollout = self.sim.rollout(self.problem.frame_end, self.frames, self.problem.goals)
            for k in range(len(self.frames)):
                if targets is None:
                    self.target.launch_loss(k, rollout.positions[k], loss, self.sim)
                else:
                    launch_point_loss(rollout.positions[k], targets[k], loss, self.sim)
        self.n_forward += 1
        value = float(loss.numpy()[0])
        if not math.isfinite(value):
            raise FloatingPointError(f"the simulation diverged at {format_values(values)}")
        # a torn-apart rollout can have a finite loss: the same check as for residuals
        self.check_diverged(rollout.numpy(), values)
        tape.backward(loss)
        self.n_backward += 1
        self.gradient_residual = max(self.gradient_residual, rollout.extras.get("gradient_residual", 0.0))
        return value, rollout, tape

    # ------------------------------------------------------------------ reporting
    def errors(self, values: dict[str, float]) -> dict[int, np.ndarray]:
        """Target frame -> the error of each compared point there, in the unit (per vertex for
        mesh targets, per marker for footage)."""
        x, _ = self.positions(values)
        return self.target.errors(x)

    def track_errors(self, values: dict[str, float]) -> dict[str, float]:
        """Track name -> RMS error, worst first (empty unless the target reports tracks)."""
        if not self.target.reports_tracks:
            return {}
        x, _ = self.positions(values)
        return self.target.track_errors(x)

    def noise_rmse(self) -> float | None:
        """The RMSE the targets' own noise explains at the best values with ``names`` fitted
        (see ``TargetKind.noise_rmse``); None for exact targets."""
        return self.target.noise_rmse(len(self.names))

    def track_bindings(self, values: dict[str, float]) -> dict[str, dict[str, Any]]:
        """Track name -> where its markers put it (empty unless the target reports tracks)."""
        if not self.target.reports_tracks:
            return {}
        x, _ = self.positions(values)
        return self.target.track_bindings(x)

    def rmse(self, values: dict[str, float]) -> float:
        x, _ = self.positions(values)
        return self.target.rmse(x)

    def motion(self) -> float:
        """The RMS misfit of the cloth left at rest (the target's own measure, in the unit):
        the size of what the fit has to reproduce."""
        rest = np.asarray(self.problem.mesh.vertices, dtype=np.float64)
        return self.target.motion(rest)

    def motion_norm(self) -> float:
        """|r| with the cloth at rest at every target frame: the whole motion, in the loss's
        units (computed once)."""
        if self._motion_norm is None:
            rest = np.asarray(self.problem.mesh.vertices, dtype=np.float64)
            residuals = self.residuals_at(np.stack([rest] * len(self.frames)))
            self._motion_norm = float(np.linalg.norm(residuals))
        return self._motion_norm

    def contacts(self, values: dict[str, float]) -> dict | None:
        """Where the rollout at ``values`` touched colliders (scene frames, vertices), or None."""
        self.positions(values)
        found = self._cache[3].get("contacts") if self._cache is not None else None
        if found is None:
            return None
        start = self.problem.start_frame
        return {"frames": [start + f for f in found["frames"]], "vertices": found["vertices"]}

    def rounding_gap(
        self, values: dict[str, float], maps: Mapping[str, np.ndarray] | None = None
    ) -> float | None:
        """RMS difference (in the unit) between this rollout at ``values`` and the same rollout in
        the other precision (float32 <-> float64): how far rounding alone moves the motion
        there. None when the other precision's rollout cannot be run."""
        other = "float32" if self.settings.precision == "float64" else "float64"
        x, _ = self.positions(values)
        try:
            sim = self.build_simulator(other)
            if maps:  # the weights the cached rollout ran with
                sim.set_maps(maps)
            sim.set_params(values)
            y = sim.rollout(self.problem.frame_end, self.frames, self.problem.goals).numpy()
        except (ValueError, RuntimeError):
            return None
        if not np.isfinite(y).all():
            return math.inf
        return self.change(x, y)

    def change(self, x0: np.ndarray, x1: np.ndarray) -> float:
        """RMS difference of two rollouts in the fit's unit (as the target measures it)."""
        return self.target.change(x0, x1)

    def matched_points(self) -> int:
        """What the loss averages over: loss = 0.5 * matched_points * RMSE^2."""
        return self.target.matched_points()

    def rmse_of_loss(self, loss: float) -> float:
        """The RMSE, in the unit, that a loss stands for (the target's ``rmse_of_loss``)."""
        return self.target.rmse_of_loss(loss)

    @property
    def device(self) -> str:
        return self.sim.device

    def coordinate_scale(self) -> float:
        """What float rounding of the compared quantities is relative to, in the unit."""
        return self.target.coordinate_scale()

    def residual_scale(self) -> np.ndarray | float:
        return self.target.residual_scale()
