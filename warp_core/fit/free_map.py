"""A free weight map: one stiffness per vertex, fitted by L-BFGS in a box on the tape gradient.

The fit engine (``engine.fit``) hands a problem whose map is free (``MapSpec`` without
regions) to :func:`fit_free_map`; its result is the engine's :class:`FitResult`, with the
same honest outcome.

* **First, the best uniform map**: the map as one region covering every vertex, with the
  problem's free parameters, by the engine's own search (global phase, trust region); its
  RMSE is what the map has to improve on (reported). **Then a coarse map**: a few soft
  regions by the trust region (``coarse_map``), which a jump of the loss does not stop.
  Its values start the per-vertex stage.

* **Unknowns**: ``u_v = log s_v`` for every vertex (``s_v`` the stiffness of the map's first
  base parameter there; see ``problem.maps``), and the log of each of the problem's free
  parameters (dampings, bending, ...), in one box L-BFGS (``optimizers.box_lbfgs``): both
  get their gradient from one backward pass of the tape. While the fit runs, the simulator
  blends over a fixed range ``[s0 / SPAN, s0 * SPAN]`` around the start ``s0`` (within the
  parameter's limits), which is also the box of every ``s_v``; the result's range is then
  the smallest to the largest fitted value (``MapLayout``'s rule). L-BFGS starts from the
  mesh's smoothing operator (``mesh_smoothing``) as its inverse Hessian: the raw per-vertex
  gradient is rough where springs switch, its smoothed form is the trend the loss follows.
  Under a time budget the stage stops while the verdict (below) still fits in it, its cost
  foreseen from the stage's own rollouts (``VerdictClock``). Else it goes on while steps
  gain, past the tolerance: on the maps benchmark (seed 47) stopping once matched and five
  steps had not halved the loss took a third of the time, but the fitted maps correlated
  0.90-0.91 with the hidden ones instead of 0.96-1.00, their ranges off by up to 35 %.
* **Smoothness prior**: many maps give the same springs (a structural spring sees the mean
  of two vertices), so the loss adds ``0.5 * smoothness * c * sum over mesh edges (u_i -
  u_j)^2``, with ``c`` the data's mean curvature per vertex at the start (below): at
  ``smoothness`` 1 an edge's difference costs what a typical vertex's own misfit does, for a
  napkin as for a sail; on log stiffness, a band twice as stiff costs the same at any
  stiffness.
* **What the targets determine**: the data's Gauss–Newton curvature along each ``u_v``
  (the diagonal of ``J^T J``, by Hutchinson probes: ``PROBES`` Rademacher vectors ``p``, each
  ``J p`` from two rollouts and ``J^T (J p)`` from one backward pass) against the prior's at
  that vertex. A vertex where the prior's curvature is larger has the value the prior gives
  it (from its neighbours), not one the targets set: reported as undetermined, with its
  index. The prior's scale ``c`` is the same curvature's mean over the vertices.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..models import get_model
from .coarse_map import COARSE_REGIONS, STAGE_REL_LOSS_TOL, coarse_fit
from .mesh_smoothing import MeshSmoother, laplacian_times
from .objective.objective import FitObjective
from .optimizers.box_lbfgs import minimize_box
from .problem.maps import (
    MapSpec,
    blend_weights,
    range_settings,
    region_parameter,
    start_ratios,
    weight_stats,
)
from .problem.problem import FitError, FitProblem
from .problem.settings import FitSettings
from .problem.spec import ParameterSpec, fit_parameters, parameter_spec
from .progress import Reporter
from .stages import run_objective
from .verdict.map_curvature import VerdictClock, gauss_newton, undetermined_vertices
from .verdict.outcome import classify, fit_scales, rounding_check
from .verdict.result import FitResult

__all__ = ["SPAN", "fit_free_map", "smoothness_penalty"]

SPAN = 100.0  # the box of each vertex's stiffness: the start value divided and times this
SCALE_PROBES = 2  # Hutchinson probes for the data's mean curvature, which scales the prior
UNIFORM = "uniform"  # the one region of the uniform fit that starts a free map


@dataclass
class _Found:
    """Where the box L-BFGS left the map: made by :func:`fit_free_map`, read by ``_result``."""

    x: np.ndarray
    stop: str
    iterations: int
    losses: list[float]  # the data loss at each accepted point
    strength: float  # the prior's strength as applied


class _Stopped(Exception):
    """The time budget or the caller stopped the search (its best point stands)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def smoothness_penalty(edges: np.ndarray, u: np.ndarray, strength: float) -> tuple[float, np.ndarray]:
    """``0.5 * strength * sum over edges (u_i - u_j)^2`` and its gradient."""
    diff = u[edges[:, 0]] - u[edges[:, 1]]
    return 0.5 * strength * float(diff @ diff), strength * laplacian_times(edges, u)


class _FreeMap:
    """The map's unknowns and what they set on the simulator: made and read by
    :func:`fit_free_map`."""

    def __init__(
        self,
        problem: FitProblem,
        objective: FitObjective,
        spec: ParameterSpec | None,
        begin: tuple[dict[str, float], np.ndarray],
        s0: float,
    ) -> None:
        self.problem, self.objective, self.spec = problem, objective, spec
        self.map: MapSpec = problem.maps[0]
        self.range = objective.model.map_ranges[self.map.kind]
        self.start = problem.model_settings.values()
        first = self.range.base[0]
        # the box: around the best uniform value ``s0``
        lo, hi = problem.bounds.get(first, fit_parameters(problem)[first].fit_bounds())
        self.low, self.high = max(s0 / SPAN, lo), min(s0 * SPAN, hi)
        self.ratios = start_ratios(self.range, self.start)
        self.n = problem.mesh.vertex_count
        self.names = list(spec.free_names) if spec is not None else []
        params, stiffness = begin  # where the per-vertex stage starts
        z0 = spec.to_free(params) if spec is not None else np.zeros(0)
        u0 = np.log(np.clip(stiffness, self.low, self.high))
        self.x0 = np.concatenate([u0, z0])
        self.anchor: Any = None  # the last tape rollout's discrete choices (``trial_loss``)
        self.lower = np.concatenate([np.full(self.n, math.log(self.low)), spec.log_lower if spec else []])
        self.upper = np.concatenate([np.full(self.n, math.log(self.high)), spec.log_upper if spec else []])

    @property
    def kind(self) -> str:
        return self.map.kind

    def values(self, x: np.ndarray) -> dict[str, float]:
        """The model's values at ``x``: the free parameters and the fixed blending range."""
        out = self.spec.from_free(x[self.n :]) if self.spec is not None else {}
        return {**out, **range_settings(self.range, self.ratios, self.low, self.high)}

    def weights(self, x: np.ndarray) -> np.ndarray:
        return blend_weights(np.exp(x[: self.n]), self.low, self.high)

    def loss_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """The data loss 0.5 |r|^2 at ``x`` and its gradient with respect to ``x``."""
        values = self.values(x)
        self.objective.set_maps({self.map.kind: self.weights(x)})
        loss, maps, params, self.anchor = self.objective.map_and_parameter_gradient(values, [self.map.kind])
        s = np.exp(x[: self.n])
        by_u = maps[self.map.kind] / (self.high - self.low) * s
        by_z = np.zeros(len(self.names))
        if self.spec is not None:
            chained = self.spec.gradient_to_free({n: params[n] for n in self.spec.names}, values)
            by_z = np.asarray(chained)
        return loss, np.concatenate([by_u, by_z])

    def trial_loss(self, x: np.ndarray) -> float:
        """The data loss at ``x`` with the discrete choices (CG iteration counts) of the last
        :meth:`loss_and_gradient`'s rollout repeated: smooth along a line search, where a
        change of one count in a hundred substeps can move the loss itself by a per cent."""
        self.objective.set_maps({self.map.kind: self.weights(x)})
        positions, _ = self.objective.positions(self.values(x), frozen=self.anchor)
        residuals = self.objective.residuals_at(positions)
        return 0.5 * float(residuals @ residuals)

    def fitted_values(self, x: np.ndarray) -> tuple[dict[str, float], dict[str, float], np.ndarray]:
        """(fitted parameters, the model's values, the weights) as written back: the range
        from the smallest to the largest fitted stiffness."""
        params = self.spec.from_free(x[self.n :]) if self.spec is not None else {}
        s = np.exp(x[: self.n])
        lo, hi = float(s.min()), float(s.max())
        model_values = {**params, **range_settings(self.range, self.ratios, lo, hi)}
        return params, model_values, blend_weights(s, lo, hi)


def fit_free_map(
    problem: FitProblem, settings: FitSettings, report: Reporter, cancel: Any, t0: float
) -> FitResult:
    """Fit the problem's free map and free parameters (see the module docstring)."""
    spec = parameter_spec(problem) if problem.free_parameters else None
    report.preparing()
    objective = FitObjective(problem, settings, list(spec.names) if spec else [], spec=spec)
    refusal = objective.tape_gradient_refusal()
    if refusal is not None:
        raise FitError(f"a free map is fitted on the tape gradient, and {refusal}: fit regions instead")
    if not objective.target.has_residual_adjoint:
        raise FitError(
            f"a free map is fitted to targets of the cloth's own vertices (what they determine is measured "
            f"vertex by vertex), not to {objective.target.label}: use the vertex loss, or fit regions"
        )
    uniform, s0 = _uniform_fit(problem, settings, report, cancel, t0)
    if uniform.outcome == "failed" or uniform.cancelled:
        return uniform
    stages = [uniform]
    report = report.shifted(uniform.iterations + 1)
    begin = (uniform.params, np.full(problem.mesh.vertex_count, s0))
    coarse, stiffness = coarse_fit(problem, settings, uniform, s0, report, cancel, t0)
    if coarse.cancelled:
        return uniform
    if coarse.outcome != "failed":
        stages.append(coarse)
        begin = (coarse.params, stiffness)
        report = report.shifted(coarse.iterations + 1)
    free = _FreeMap(problem, objective, spec, begin, s0)
    edges = problem.mesh.edges
    report.phase("refinement")
    # the prior's scale: the data's mean curvature per vertex at the start
    # (a few probes do for the mean over the vertices)
    began = time.perf_counter()
    strength = free.map.smoothness * gauss_newton(free, free.x0, SCALE_PROBES, diagonal=False)[1]
    clock = VerdictClock(time.perf_counter() - began, SCALE_PROBES)
    losses: list[float] = []
    best: list[Any] = [math.inf, free.x0]
    budget = settings.time_budget_s

    def check() -> None:
        if cancel is not None and cancel.is_set():
            raise _Stopped("cancelled")
        if budget is not None and time.perf_counter() - t0 + clock.verdict_s() > budget:
            raise _Stopped("time_budget")

    def trial(x: np.ndarray) -> float:
        check()
        return free.trial_loss(x) + smoothness_penalty(edges, x[: free.n], strength)[0]

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        check()
        with clock.gradient():
            loss, grad = free.loss_and_gradient(x)
        penalty, penalty_grad = smoothness_penalty(edges, x[: free.n], strength)
        grad[: free.n] += penalty_grad
        total = loss + penalty
        if total < best[0]:
            best[0], best[1] = total, x.copy()
            losses.append(loss)
            report(len(losses) - 1, loss, free.values(x))
        return total, grad

    try:
        box = minimize_box(
            fun,
            free.x0,
            (free.lower, free.upper),
            max_iterations=settings.max_iterations,
            trial=trial,
            precondition=MeshSmoother(edges, free.n),
        )
        found = _Found(box.x, box.stop, box.iterations, losses, strength)
    except _Stopped as e:
        found = _Found(best[1], e.reason, len(losses) - 1, losses, strength)
    except (FloatingPointError, ValueError) as e:
        raise FitError(f"the free {free.map.kind} map could not be simulated: {e}") from e
    result = _result(problem, settings, free, found, t0, report)
    entry = result.map_report[free.map.kind]
    entry["uniform"] = {"value": s0, "rmse_m": float(uniform.rmse)}
    if len(stages) > 1:
        entry["coarse"] = {"regions": COARSE_REGIONS, "rmse_m": float(coarse.rmse)}
    # the start is the problem's, which the uniform stage began from
    result.initial_loss, result.initial_rmse = uniform.initial_loss, uniform.initial_rmse
    for stage in stages:
        result.iterations += stage.iterations
        result.n_forward += stage.n_forward
        result.n_backward += stage.n_backward
    result.search = dict(uniform.search)
    return result


def _uniform_fit(
    problem: FitProblem, settings: FitSettings, report: Reporter, cancel: Any, t0: float
) -> tuple[FitResult, float]:
    """The best uniform map with the free parameters, by the engine's search (its global
    phase and trust region), and its value: the free map's start, and what it has to improve
    on. Where the range's other parameters start equal to its first (compression = tension),
    they are tied to it, a plain fit that batches its rollouts on a GPU; else the map is one
    region covering every vertex."""
    kind = problem.maps[0].kind
    rng = get_model(problem.model).map_ranges[kind]
    first, start = rng.base[0], problem.model_settings.values()
    others = [*rng.base[1:], *rng.top]
    if all(start[name] == start[first] for name in others):
        names = list(dict.fromkeys([*problem.free_parameters, first]))
        ties = {**problem.ties, **dict.fromkeys(others, first)}
        uniform = dataclasses.replace(problem, maps=[], free_parameters=names, ties=ties)
        value = first
    else:
        regions = {UNIFORM: np.ones(problem.mesh.vertex_count)}
        uniform = dataclasses.replace(problem, maps=[MapSpec(kind, regions)])
        value = region_parameter(kind, UNIFORM)
    spec = parameter_spec(uniform)
    objective = FitObjective(uniform, settings, spec.names, spec=spec)
    report.measure(objective.unit, objective.rmse_of_loss)
    run = dataclasses.replace(settings, rel_loss_tol=STAGE_REL_LOSS_TOL).with_budget_left(t0)
    result = run_objective(uniform, spec, objective, run, report, cancel, t0)
    return result, float(result.params[value])


def _result(
    problem: FitProblem, settings: FitSettings, free: _FreeMap, found: _Found, t0: float, report: Reporter
) -> FitResult:
    """The result at ``found.x``: the verdict as the engine's (tolerance, outcome, rounding)."""
    objective, x, stop, losses = free.objective, found.x, found.stop, found.losses
    undetermined = undetermined_vertices(free, x, found.strength, problem.mesh.edges)
    sim_values = free.values(x)
    objective.set_maps({free.map.kind: free.weights(x)})
    errors = objective.errors(sim_values)
    rmse, motion = objective.rmse(sim_values), objective.motion()
    scales = fit_scales(
        motion,
        objective.target.coordinate_scale(),
        settings.precision,
        settings.tolerance_m,
        settings.rmse_tolerance_m,
        objective.unit,
    )
    stationary = stop in ("converged_gradient", "converged_value", "no_progress")
    outcome, reason = classify(rmse, scales, stop, stationary, [])
    warnings: list[str] = []
    gap = None
    if outcome == "converged":
        report.phase("rounding")
        gap = objective.rounding_gap(sim_values, maps={free.map.kind: free.weights(x)})
        rounding = rounding_check(rmse, gap, scales.tolerance, scales.unit)
        if rounding is not None:
            outcome, reason = "misfit", rounding
            warnings.append(rounding)
    if len(undetermined):
        note = (
            f"the targets do not determine the {free.map.kind} weight of {len(undetermined)} of "
            f"{free.n} vertices: the smoothness prior set them from their neighbours"
        )
        reason += f"; {note}"
        warnings.append(note)
    params, model_values, weights = free.fitted_values(x)
    all_errors = np.concatenate(list(errors.values()))
    entry = {
        "kind": free.map.kind,
        "mode": "free",
        "base": model_values[free.range.base[0]],
        "top": model_values[free.range.top[0]],
        "settings": {n: model_values[n] for n in (*free.range.base, *free.range.top)},
        "weights": weight_stats(weights),
        "vertices": free.n,
        "undetermined_vertices": len(undetermined),
        "undetermined_vertex_indices": [int(v) for v in undetermined],
        "smoothness": free.map.smoothness,
    }
    initial = free.spec.initial_values() if free.spec is not None else {}
    return FitResult(
        params=params,
        initial_params=initial,
        model_settings=problem.model_settings.replace(**model_values),
        loss_history=losses,
        initial_loss=losses[0] if losses else math.nan,
        final_loss=losses[-1] if losses else math.nan,
        per_vertex_error=errors,
        rmse=rmse,
        max_error=float(all_errors.max()),
        initial_rmse=objective.rmse_of_loss(losses[0]) if losses else None,
        iterations=found.iterations,
        n_forward=objective.n_forward,
        n_backward=objective.n_backward,
        seconds=time.perf_counter() - t0,
        device=objective.device,
        optimizer="box_lbfgs",
        stop_reason=stop,
        cancelled=stop == "cancelled",
        identifiability=[],
        warnings=warnings,
        outcome=outcome,
        outcome_reason=reason,
        motion=scales.motion,
        rmse_relative=rmse / scales.motion if scales.motion > 0.0 else None,
        tolerance=scales.tolerance,
        rounding_gap=gap,
        unit=scales.unit.symbol,
        gradient=settings.gradient_for(get_model(problem.model).gradient_kinds),
        maps={free.map.kind: weights},
        map_report={free.map.kind: entry},
    )
