"""The stages of a fit: one optimisation of an objective (the optimizer chosen, the scales its
outcome is judged on, the search, the verdict), and the refinement stage of a target whose
bindings are refined after the search (footage)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ..errors import one_line
from ..models import get_model
from .objective.objective import FitObjective
from .optimizers.adam import adam
from .optimizers.base import FitDivergedError, OptimizeSettings
from .optimizers.global_search import SearchOptions, SearchResult, search
from .optimizers.lbfgs import lbfgs_finished_run
from .optimizers.lm import trust_region_run
from .problem.problem import FitError, FitProblem
from .problem.settings import FitSettings
from .problem.spec import ParameterSpec, fit_parameters
from .progress import Reporter
from .verdict.build import build_result, failed_result, start_warnings
from .verdict.outcome import fit_scales
from .verdict.result import FitResult

__all__ = ["LM_MAX_PARAMETERS", "refine_bindings", "run_objective"]

# Up to here a Jacobian of tangents (two rollouts a free parameter) costs no more than about
# three stable gradients (one costs 6.5-8.3 forward rollouts), and Levenberg-Marquardt's steps
# gain more than L-BFGS's. With all twelve stiffness and damping fields free on 48 Blender-made
# scenes (robustness seeds 22, 25, 26 and 28), LM matched 39 within the tolerance and L-BFGS on
# the stable gradient, finished by the trust region, 38, in 1.3-2.5x LM's time, its replay no
# worse than LM's on 18; above 12 the Jacobian's cost grows with every parameter.
LM_MAX_PARAMETERS = 12


def run_objective(
    problem: FitProblem,
    spec: ParameterSpec,
    objective: Any,
    settings: FitSettings,
    progress: Reporter | None,
    cancel: Any,
    t0: float,
) -> FitResult:
    """Optimize ``objective`` (a :class:`FitObjective`, or one with the same methods such as
    a shared fit's joint objective) over ``spec``; ``problem`` supplies the model, the
    settings the fitted values go into, and the bounds; ``progress`` hears the accepted
    points and the phases."""
    optimizer = settings.optimizer
    if optimizer == "auto":
        # above LM_MAX_PARAMETERS, L-BFGS: with 12 free fields it matched as often as LM where
        # Adam, with three times LM's time, stalled on most scenes
        optimizer = "lm" if spec.n_free <= LM_MAX_PARAMETERS else "lbfgs"
    if optimizer not in ("lm", "adam", "lbfgs"):
        raise FitError(f"optimizer must be 'lm', 'adam', 'lbfgs' or 'auto', got {settings.optimizer!r}")
    first_order = optimizer != "lm"  # steps along the tape gradient
    method = {"adam": "Adam", "lbfgs": "L-BFGS"}.get(optimizer, optimizer)
    gradient = settings.gradient_for(get_model(problem.model).gradient_kinds)
    refusal = objective.tape_gradient_refusal()
    if first_order and refusal is not None:
        raise FitError(
            f"{refusal}, which {method} needs: fit at most "
            f"{LM_MAX_PARAMETERS} parameters with Levenberg-Marquardt (finite differences)"
        )
    unit = objective.unit
    # one object's target (a shared fit's joint objective stands for several, mesh targets only)
    target = objective.target if isinstance(objective, FitObjective) else None
    tolerance = getattr(settings, unit.tolerance_field)
    if tolerance is not None and not tolerance > 0.0:
        raise FitError(
            f"the tolerance must be > 0 {unit.name} (or None for the automatic rule), got {tolerance}"
        )
    scales = fit_scales(
        objective.motion(),
        objective.coordinate_scale(),
        settings.precision,
        tolerance,
        settings.rmse_tolerance_m,
        unit,
        objective.noise_rmse() if target is not None else None,
    )
    points = objective.matched_points()
    opt_settings = OptimizeSettings(
        abs_loss_tol=0.5 * points * scales.stop**2,
        max_iterations=settings.max_iterations,
        rel_loss_tol=settings.rel_loss_tol,
        grad_tol=0.0,  # scale-free: the trust region decides when nothing is left
        time_budget_s=settings.time_budget_s,
        adam_lr=settings.adam_lr,
        recover_from_divergence=settings.recover_from_divergence,
        min_trust_radius=0.01 * objective.tangent_step,
        hold_below=scales.hold,
        residual_scale=objective.residual_scale(),
    )
    try:
        if optimizer in ("lm", "lbfgs"):
            options = _search_options(problem, spec, settings, 0.5 * points * scales.tolerance**2)
            local = trust_region_run if optimizer == "lm" else lbfgs_finished_run
            found = search(objective, spec, opt_settings, options, progress, cancel, local_method=local)
        else:
            result = adam(objective, spec, opt_settings, progress=progress, cancel=cancel)
            found = SearchResult(result, list(result.loss_history), result.iterations)
    except FitDivergedError as e:
        result = failed_result(problem, spec, objective, optimizer, scales, one_line(e), t0)
    else:
        result = build_result(problem, spec, objective, optimizer, scales, found, t0, progress)
    result.gradient = gradient if first_order else None
    return result


def _search_options(
    problem: FitProblem, spec: ParameterSpec, settings: FitSettings, matched_loss: float
) -> SearchOptions:
    params = fit_parameters(problem)
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


def refine_bindings(
    problem: FitProblem,
    objective: FitObjective,
    settings: FitSettings,
    found: FitResult,
    progress: Reporter | None,
    cancel: Any,
    t0: float,
) -> FitResult:
    """The second stage of a fit whose target refines its bindings (footage): Levenberg-Marquardt
    from the search's values with the bindings profiled out, no global phase; the result counts
    both stages (runs, iterations, time) and keeps the start values and the search summary of
    the first. The search's own result where it failed, was cancelled or the refinement fails.

    Profiled bindings (:mod:`warp_core.targets.reprojection`) remove the bias of a track bound
    a few millimetres off, but during a global search they also let every track slide to make
    up for wrong values: on a clamped sheet filmed through Blender's camera solve the search
    then settled in a second valley (tension 2.7x, air damping 13 % low, 1.1x the best valley's
    RMS) that the bound tracks alone do not have. So the search runs with the bindings held
    (``TargetKind.bindings_held``) and this stage refines after it."""
    if found.outcome == "failed" or found.cancelled:
        return found
    spec = objective.spec
    start = {name: found.params[name] for name in spec.names}
    refine_spec = ParameterSpec(names=spec.names, initial=start, bounds=spec.bounds, ties=spec.ties)
    objective.spec = refine_spec
    # its iterations are counted on from the search's
    stage = progress.shifted(found.iterations) if progress is not None else None
    if stage is not None:
        stage.phase("refinement")
    budget = settings.time_budget_s
    local = replace(
        settings,
        global_search=False,
        max_iterations=max(settings.max_iterations - found.iterations, 1),
        time_budget_s=None if budget is None else max(budget - found.seconds, 1.0),
    )
    refined = run_objective(problem, refine_spec, objective, local, stage, cancel, t0)
    if refined.outcome == "failed":
        return found
    return replace(
        refined,
        initial_params=found.initial_params,
        initial_rmse=found.initial_rmse,
        initial_loss=found.initial_loss,
        loss_history=found.loss_history + refined.loss_history,
        iterations=found.iterations + refined.iterations,
        search=found.search,
        # the start's warnings; what the values are and how well they are determined is the
        # second stage's to say
        warnings=start_warnings(problem, spec) + refined.warnings,
    )
