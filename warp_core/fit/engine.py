"""Fit a model's parameters to keyframe targets: ``fit()`` picks the optimizer, runs it
on the objective and assembles the result.

Levenberg–Marquardt (default up to 8 free parameters) takes the keyframe residuals and a
Jacobian of forward tangents (see :mod:`.objective`); Adam (more parameters) takes the
exact tape gradient. Parameters are optimized in log space within the model's bounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np

from ..models import get_model
from .adam import adam
from .identifiability import identifiability
from .lm import levenberg_marquardt
from .objective import FitObjective
from .optimize import FitDivergedError, OptimizeResult, OptimizeSettings
from .problem import FitError, FitProblem, FitSettings
from .result import FitResult
from .spec import ParameterSpec

__all__ = ["LM_MAX_PARAMETERS", "fit", "parameter_spec", "problem_metadata"]

LM_MAX_PARAMETERS = 8


def parameter_spec(problem: FitProblem) -> ParameterSpec:
    """The fitted and tied parameters with their start values and bounds (the problem's
    own bounds, else the model's)."""
    model_bounds = {p.name: p.bounds for p in get_model(problem.model).parameters}
    names = list(dict.fromkeys(list(problem.fit) + list(problem.ties)))
    initial = {n: float(getattr(problem.params, n)) for n in names}
    # followers start at their leader's value
    for follower, leader in problem.ties.items():
        initial[follower] = initial[leader]
    bounds = {n: problem.bounds.get(n, model_bounds[n]) for n in names}
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
        objective = FitObjective(problem, settings, spec.names)
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
    """The problem apart from its arrays, as plain JSON data (settings as
    ``dataclasses.asdict``, which ``Model.settings_from_dict`` reads back)."""
    return {
        "model": problem.model,
        "params": asdict(problem.params),
        "fit": list(problem.fit),
        "ties": dict(problem.ties),
        "bounds": {k: list(v) for k, v in problem.bounds.items()},
        "start_frame": problem.start_frame,
        "loss": problem.loss,
        "target_frames": [t.frame for t in problem.targets],
    }
