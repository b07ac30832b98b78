"""Levenberg–Marquardt with a trust region on the log step, over the free log values of a
:class:`~.spec.ParameterSpec`.

The model is Gauss–Newton's ``0.5 * |r + J s|^2`` with the objective's Jacobian. Instead of
Marquardt's damping, the step is bounded in a box: no free log value moves by more than the
trust radius (start: ln 4, a factor of 4), nor past its bounds. The radius follows the ratio
of the actual to the predicted loss reduction: it shrinks after a poor or rejected step and
grows after a good one that used the whole region. A rejected step is retried in the
smaller region; the run only gives up ("no_progress") once the region has collapsed below
``min_trust_radius``, i.e. no step the linear model trusts lowers the loss: a stationary
point to the resolution of the model.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..problem.spec import ParameterSpec
from .base import (
    OptimizeResult,
    OptimizeSettings,
    ProgressCallback,
    ResidualObjective,
    RunState,
    eval_jacobian,
    eval_residuals,
    format_values,
    projected_gradient,
    start_point,
)
from .run import Run, Tracker
from .subproblem import box_gauss_newton_step, step_box

__all__ = ["levenberg_marquardt", "trust_region_run"]

# Ratio thresholds: below _POOR the region shrinks to a quarter of the step taken; above
# _GOOD with the step on the region's edge it doubles.
_POOR = 0.25
_GOOD = 0.75
# "slow": the loss has not halved over the last _SLOW_WINDOW accepted steps, after at
# least _SLOW_AFTER of them
_SLOW_AFTER = 6
_SLOW_WINDOW = 3


def levenberg_marquardt(
    objective: ResidualObjective,
    spec: ParameterSpec,
    settings: OptimizeSettings | None = None,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> OptimizeResult:
    """Trust-region Levenberg–Marquardt on ``0.5 * |r|^2`` from the spec's start values
    (see the module docstring). Parameters sitting on a bound whose gradient points
    outwards stay there; parameters with no effect (``settings.hold_below``) are held."""
    settings = settings or OptimizeSettings()
    tracker = Tracker(settings, progress, cancel)
    z, values, r, warnings = start_point(
        spec, settings, lambda v: eval_residuals(objective, v, tracker.counter)
    )
    tracker.warnings += warnings
    start = RunState(z, r, None, settings.trust_radius, values)
    return trust_region_run(objective, spec, settings, tracker, start, report_start=True)


def trust_region_run(
    objective: ResidualObjective,
    spec: ParameterSpec,
    settings: OptimizeSettings,
    tracker: Tracker,
    start: RunState,
    report_start: bool = False,
) -> OptimizeResult:
    """One trust-region run from ``start`` (its Jacobian is computed if it has none), sharing
    ``tracker``'s budgets; returns at the best point it reached."""
    run = Run(spec, tracker)
    counter = tracker.counter
    z = np.array(start.z, dtype=np.float64)
    r = start.r
    values = start.values_in(spec)
    loss = 0.5 * float(r @ r)
    run.begin(values, loss, report_start)
    radius = float(start.radius)
    if start.jacobian is None and (reason := run.interrupted()):
        return run.result(reason, values, loss)  # no sensitivities past the budget or a cancel
    jac = start.jacobian if start.jacobian is not None else eval_jacobian(objective, spec, values, counter)
    if jac is None:
        tracker.warnings.append(f"the sensitivities cannot be computed at {format_values(values)}")
        return run.result("no_jacobian", values, loss)

    def stop(reason: str) -> OptimizeResult:
        return run.result(reason, values, loss, jac, RunState(z, r, jac, radius, values))

    while True:
        if loss <= settings.abs_loss_tol:
            return stop("converged_loss")
        if reason := run.interrupted():
            return stop(reason)
        if tracker.out_of_iterations():
            return stop("max_iterations")
        g = jac.T @ r
        held = weak_columns(jac, settings)
        run.held = [spec.free_names[k] for k in np.flatnonzero(held)]
        g_proj, active = projected_gradient(spec, z, g)
        movable = ~held & ~active
        if not movable.any() or float(np.max(np.abs(g_proj[movable]))) <= settings.grad_tol:
            return stop("converged_gradient")

        while True:
            lower, upper = step_box(spec, z, radius, held)
            z_trial = spec.clip(z + box_gauss_newton_step(jac, r, lower, upper))
            step = z_trial - z
            size = float(np.max(np.abs(step), initial=0.0))
            jac_step = jac @ step
            predicted = -(float(g @ step) + 0.5 * float(jac_step @ jac_step))
            if size == 0.0 or predicted <= 1e-14 * loss:
                return stop("converged_gradient")  # the model sees nothing left to gain
            values_trial = spec.from_free(z_trial)
            r_trial = eval_residuals(objective, values_trial, counter)
            loss_trial = 0.5 * float(r_trial @ r_trial) if r_trial is not None else math.inf
            jac_trial = None
            if loss_trial < loss:
                jac_trial = eval_jacobian(objective, spec, values_trial, counter)
                if jac_trial is None:
                    tracker.warnings.append(
                        f"the sensitivities cannot be computed at {format_values(values_trial)}; "
                        "took a smaller step instead"
                    )
            if jac_trial is not None:
                rho = (loss - loss_trial) / predicted
                if rho < _POOR:
                    radius = _POOR * size
                elif rho > _GOOD and size >= 0.9 * radius:
                    radius = min(2.0 * radius, settings.max_trust_radius)
                break
            radius = _POOR * size
            if radius < settings.min_trust_radius:
                return stop("no_progress")
            if reason := run.interrupted():
                return stop(reason)

        rel_change = (loss - loss_trial) / max(loss, 1e-300)
        z, r, values, loss, jac = z_trial, r_trial, values_trial, loss_trial, jac_trial
        radius = max(radius, settings.min_trust_radius)
        run.accept(values, loss)
        if loss > settings.abs_loss_tol and rel_change < settings.rel_loss_tol:
            return stop("converged_loss")
        if settings.slow_exit and is_slow(run.history) and loss > settings.abs_loss_tol:
            return stop("slow")


def weak_columns(jac: np.ndarray, settings: OptimizeSettings) -> np.ndarray:
    """Free parameters whose doubling changes no residual entry (in the target's units) by
    more than ``settings.hold_below``: held where they are for the step."""
    scale = np.broadcast_to(np.asarray(settings.residual_scale, dtype=np.float64), (jac.shape[0],))
    effect = np.max(np.abs(jac) * scale[:, None], axis=0, initial=0.0) * math.log(2.0)
    return effect <= settings.hold_below


def is_slow(history: list[float]) -> bool:
    """Has the loss failed to halve over the last few accepted steps of a run?"""
    if len(history) <= _SLOW_AFTER:
        return False
    return history[-1] > 0.5 * history[-1 - _SLOW_WINDOW]
