"""Fit a model's parameters to keyframe targets: ``fit()`` picks the optimizer, runs it
on the objective and assembles the result with its outcome.

Levenberg–Marquardt (default up to 12 free parameters) takes the keyframe residuals and a
Jacobian of forward tangents (see :mod:`.objective`), inside a trust region on the log
step (:mod:`.lm`), started from the start values and, where that falls short, from a few
space-filling points of the plausible ranges (:mod:`.global_search`). L-BFGS (the default
for more parameters than a Jacobian of tangents at every step affords) runs inside the same
global phase on the tape gradient, and where it slows down or stops short the trust region
finishes from its best point (:func:`.lbfgs.lbfgs_finished_run`; the report's
``search.finished_by``); Adam (on request) steps along the gradient from the start alone.
Both take the ``stable`` gradient unless told otherwise. Parameters are optimized in log
space within the model's hard limits, with a positive floor where a limit is 0
(``Parameter.floor``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..errors import one_line
from ..models import get_model
from .adam import adam
from .footage import fit_footage
from .global_search import SearchOptions, SearchResult, search
from .lbfgs import lbfgs_finished_run
from .lm import trust_region_run
from .objective import FitObjective
from .optimize import FitDivergedError, OptimizeSettings
from .outcome import fit_scales
from .problem import FitError, FitProblem, FitSettings
from .result import FitResult
from .result_build import build_result, failed_result
from .spec import ParameterSpec

__all__ = ["LM_MAX_PARAMETERS", "fit", "parameter_spec", "problem_metadata", "run_objective"]

# Up to here a Jacobian of tangents (two rollouts a free parameter) costs no more than about
# three stable gradients (one costs 6.5-8.3 forward rollouts), and Levenberg-Marquardt's steps
# gain more than L-BFGS's. With all twelve stiffness and damping fields free on 48 Blender-made
# scenes (robustness seeds 22, 25, 26 and 28), LM matched 39 within the tolerance and L-BFGS on
# the stable gradient, finished by the trust region, 38, in 1.3-2.5x LM's time, its replay no
# worse than LM's on 18; above 12 the Jacobian's cost grows with every parameter.
LM_MAX_PARAMETERS = 12


def parameter_spec(problem: FitProblem) -> ParameterSpec:
    """The fitted and tied parameters with their start values and bounds: the problem's
    own bounds, else the model's hard limits, the lower one raised to the parameter's floor
    where it is 0 (the fit works on log values)."""
    params = {p.name: p for p in get_model(problem.model).parameters}
    names = list(dict.fromkeys(list(problem.fit) + list(problem.ties)))
    initial = {n: float(getattr(problem.params, n)) for n in names}
    # followers start at their leader's value
    for follower, leader in problem.ties.items():
        initial[follower] = initial[leader]
    bounds = {}
    for n in names:
        lo, hi = problem.bounds.get(n, params[n].bounds)
        if not lo > 0.0:
            lo = min(params[n].fit_bounds()[0], 0.5 * hi)
        bounds[n] = (float(lo), float(hi))
    return ParameterSpec(names=names, initial=initial, bounds=bounds, ties=dict(problem.ties))


def fit(
    problem: FitProblem,
    settings: FitSettings | None = None,
    progress: Callable[[int, float, dict[str, float]], None] | None = None,
    cancel: Any = None,
) -> FitResult:
    """Fit ``problem.fit`` so the simulation matches the targets.

    Returns a result with one ``outcome`` (converged, misfit, stalled or failed) and its
    reason; raises only FitError, with a one-line reason, when the fit cannot start (a
    problem that is not valid). Never returns NaN parameters.
    """
    settings = settings or FitSettings()
    try:
        return _fit(problem, settings, progress, cancel)
    except FitError:
        raise
    except Exception as e:  # the contract: nothing but FitError leaves fit()
        raise FitError(f"the fit stopped on an unexpected error: {one_line(e)}") from e


def _fit(
    problem: FitProblem,
    settings: FitSettings,
    progress: Callable[[int, float, dict[str, float]], None] | None,
    cancel: Any,
) -> FitResult:
    t0 = time.perf_counter()
    try:
        problem.validate()
        spec = parameter_spec(problem)
        objective = FitObjective(problem, settings, spec.names, spec=spec)
    except ValueError as e:
        raise FitError(one_line(e)) from e
    if objective.kind == "tracks":
        return fit_footage(problem, spec, objective, settings, progress, cancel, t0, run_objective)
    return run_objective(problem, spec, objective, settings, progress, cancel, t0)


def run_objective(
    problem: FitProblem,
    spec: ParameterSpec,
    objective: Any,
    settings: FitSettings,
    progress: Callable[[int, float, dict[str, float]], None] | None,
    cancel: Any,
    t0: float,
) -> FitResult:
    """Optimize ``objective`` (a :class:`FitObjective`, or one with the same methods such as
    a shared fit's joint objective) over ``spec``; ``problem`` supplies the model, the
    settings the fitted values go into, and the bounds."""
    optimizer = settings.optimizer
    if optimizer == "auto":
        # above LM_MAX_PARAMETERS, L-BFGS: with 12 free fields it matched as often as LM where
        # Adam, with three times LM's time, stalled on most scenes
        optimizer = "lm" if spec.n_free <= LM_MAX_PARAMETERS else "lbfgs"
    if optimizer not in ("lm", "adam", "lbfgs"):
        raise FitError(f"optimizer must be 'lm', 'adam', 'lbfgs' or 'auto', got {settings.optimizer!r}")
    first_order = optimizer != "lm"  # steps along the tape gradient
    method = {"adam": "Adam", "lbfgs": "L-BFGS"}.get(optimizer, optimizer)
    if settings.gradient not in ("stable", "exact"):
        raise FitError(f"gradient must be 'stable' or 'exact', got {settings.gradient!r}")
    if first_order and not getattr(get_model(problem.model), "differentiable", True):
        raise FitError(
            f"the {problem.model} model has no tape gradient, which {method} needs: fit at most "
            f"{LM_MAX_PARAMETERS} parameters with Levenberg-Marquardt (finite differences)"
        )
    unit = getattr(objective, "unit", "m")
    if first_order and unit == "px":
        raise FitError(
            f"footage targets have no tape gradient, which {method} needs: fit at most "
            f"{LM_MAX_PARAMETERS} parameters with Levenberg-Marquardt (finite differences)"
        )
    if first_order and getattr(problem.params, "colliders", ()):
        raise FitError(
            f"object collisions have no tape gradient, which {method} needs: fit at most "
            f"{LM_MAX_PARAMETERS} parameters with Levenberg-Marquardt (finite differences)"
        )
    tolerance = settings.tolerance_px if unit == "px" else settings.tolerance_m
    if tolerance is not None and not tolerance > 0.0:
        raise FitError(
            f"the tolerance must be > 0 {'pixels' if unit == 'px' else 'metres'} (or None for the "
            f"automatic rule), got {tolerance}"
        )
    scales = fit_scales(
        objective.motion(),
        objective.coordinate_scale(),
        settings.precision,
        tolerance,
        settings.rmse_tolerance_m,
        unit,
        objective.noise_rmse() if unit == "px" else None,
    )
    points = objective.matched_points()
    opt_settings = OptimizeSettings(
        abs_loss_tol=0.5 * points * scales.stop_m**2,
        max_iterations=settings.max_iterations,
        rel_loss_tol=settings.rel_loss_tol,
        grad_tol=0.0,  # scale-free: the trust region decides when nothing is left
        time_budget_s=settings.time_budget_s,
        adam_lr=settings.adam_lr,
        recover_from_divergence=settings.recover_from_divergence,
        min_trust_radius=0.01 * objective.tangent_step,
        hold_below=scales.hold_m,
        residual_scale=objective.residual_scale(),
    )
    try:
        if optimizer in ("lm", "lbfgs"):
            options = _search_options(problem, spec, settings, 0.5 * points * scales.tolerance_m**2)
            local = trust_region_run if optimizer == "lm" else lbfgs_finished_run
            found = search(objective, spec, opt_settings, options, progress, cancel, local_method=local)
        else:
            result = adam(objective, spec, opt_settings, progress=progress, cancel=cancel)
            found = SearchResult(result, list(result.loss_history), result.iterations)
    except FitDivergedError as e:
        result = failed_result(problem, spec, objective, optimizer, scales, one_line(e), t0)
    else:
        result = build_result(problem, spec, objective, optimizer, scales, found, t0)
    result.gradient = settings.gradient if first_order else None
    return result


def _search_options(
    problem: FitProblem, spec: ParameterSpec, settings: FitSettings, matched_loss: float
) -> SearchOptions:
    params = {p.name: p for p in get_model(problem.model).parameters}
    plausible = {}
    for k, name in enumerate(spec.free_names):
        lo, hi = params[name].plausible_range()
        # within the fit's own bounds (a problem may narrow them)
        lo = max(lo, math.exp(spec.log_lower[k]))
        hi = min(hi, math.exp(spec.log_upper[k]))
        if lo < hi:
            plausible[name] = (lo, hi)
    return SearchOptions(
        enabled=settings.global_search,
        per_parameter=settings.global_points_per_parameter,
        refine=settings.global_refine,
        plausible=plausible,
        extra_starts=[dict(s) for s in settings.extra_starts],
        matched_loss=matched_loss,
    )


def problem_metadata(problem: FitProblem) -> dict[str, Any]:
    """The problem apart from its arrays, as plain JSON data (settings as their
    ``as_dict()`` where they hold arrays, else ``dataclasses.asdict``; what
    ``Model.settings_from_dict`` reads back)."""
    as_dict = getattr(problem.params, "as_dict", None)
    return {
        "model": problem.model,
        "params": as_dict() if as_dict is not None else asdict(problem.params),
        "fit": list(problem.fit),
        "ties": dict(problem.ties),
        "bounds": {k: list(v) for k, v in problem.bounds.items()},
        "start_frame": problem.start_frame,
        "loss": problem.loss,
        "target_frames": problem.target_frames,
    }
