"""Levenberg–Marquardt over the free log values of a :class:`~.spec.ParameterSpec`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .optimize import (
    LeastSquaresProblem,
    OptimizeResult,
    OptimizeSettings,
    ProgressCallback,
    Run,
    eval_residuals,
    format_values,
    projected_gradient,
    start_point,
)
from .spec import ParameterSpec

__all__ = ["levenberg_marquardt"]

# Damping limits and per-iteration retry count.
_LM_MAX_TRIALS = 12
_LM_MAX_DAMPING = 1e16
_LM_MIN_DAMPING = 1e-15


def levenberg_marquardt(
    problem: LeastSquaresProblem,
    spec: ParameterSpec,
    settings: OptimizeSettings | None = None,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> OptimizeResult:
    """Levenberg–Marquardt on ``0.5 * |r|^2`` over the free log values.

    Damping is Marquardt-scaled (``J^T J + mu * diag(J^T J)``, the diagonal floored so a
    parameter with no effect cannot make the system singular) and adapted with Nielsen's
    rule on accepted steps. A step is accepted only if the loss decreases; otherwise the
    damping grows and the step is retried (up to 12 times per iteration). Parameters
    sitting on a bound whose gradient points outwards are held fixed for the iteration.
    """
    settings = settings or OptimizeSettings()
    run = Run(spec, settings, progress, cancel)
    counter = run.counter

    z, values, r, run.warnings = start_point(spec, settings, lambda v: eval_residuals(problem, v, counter))
    run.initial_values = dict(values)
    loss = 0.5 * float(r @ r)
    run.history.append(loss)
    run.report(values)

    def jacobian_at(v: dict[str, float]) -> np.ndarray:
        counter.jacobians += 1
        return spec.jacobian_to_free(problem.jacobian(v), v)

    jac = jacobian_at(values)
    if not np.all(np.isfinite(jac)):
        run.warnings.append(f"non-finite Jacobian at {format_values(values)}")
        return run.result("no_progress", values, loss, jac)
    mu = float(settings.lm_initial_damping)
    nu = 2.0

    for _ in range(settings.max_iterations):
        if stop := run.interrupted():
            return run.result(stop, values, loss, jac)
        g_full = jac.T @ r
        g, active = projected_gradient(spec, z, g_full)
        if float(np.linalg.norm(g)) < settings.grad_tol or loss == 0.0:
            return run.result("converged_gradient", values, loss, jac)
        free = ~active
        jtj = jac.T @ jac
        diag = np.diag(jtj).copy()
        diag = np.maximum(diag, max(1e-12 * float(diag.max(initial=0.0)), 1e-300))
        a_free = jtj[np.ix_(free, free)]
        d_free = diag[free]
        g_free = g[free]

        accepted = False
        for _trial in range(_LM_MAX_TRIALS):
            if stop := run.interrupted():
                return run.result(stop, values, loss, jac)
            system = a_free + mu * np.diag(d_free)
            try:
                delta_free = np.linalg.solve(system, -g_free)
            except np.linalg.LinAlgError:
                delta_free = np.linalg.lstsq(system, -g_free, rcond=None)[0]
            delta = np.zeros_like(z)
            delta[free] = delta_free
            z_trial = spec.clip(z + delta)
            step = z_trial - z
            if not np.any(step != 0.0):
                return run.result("no_progress", values, loss, jac)
            values_trial = spec.from_free(z_trial)
            r_trial = eval_residuals(problem, values_trial, counter)
            loss_trial = 0.5 * float(r_trial @ r_trial) if r_trial is not None else math.inf
            if loss_trial < loss:
                predicted = -(float(g_full @ step) + 0.5 * float(step @ jtj @ step))
                rho = (loss - loss_trial) / predicted if predicted > 0.0 else 0.0
                mu = max(mu * max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), _LM_MIN_DAMPING)
                nu = 2.0
                accepted = True
                break
            mu *= nu
            nu *= 2.0
            if mu > _LM_MAX_DAMPING:
                break
        if not accepted:
            return run.result("no_progress", values, loss, jac)

        rel_change = (loss - loss_trial) / max(loss, 1e-300)
        z, r, values, loss = z_trial, r_trial, values_trial, loss_trial
        run.history.append(loss)
        # reported only once the new point's Jacobian is usable
        new_jac = jacobian_at(values)
        if not np.all(np.isfinite(new_jac)):
            run.warnings.append(f"non-finite Jacobian at {format_values(values)}")
            return run.result("no_progress", values, loss, jac)
        jac = new_jac
        run.report(values)
        if rel_change < settings.rel_loss_tol or loss <= settings.abs_loss_tol:
            return run.result("converged_loss", values, loss, jac)
    return run.result("max_iterations", values, loss, jac)
