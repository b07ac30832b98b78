"""Adam over the free log values of a :class:`~.spec.ParameterSpec`, for many parameters."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..problem.spec import ParameterSpec
from .base import (
    GradientObjective,
    OptimizeResult,
    OptimizeSettings,
    ProgressCallback,
    ResidualObjective,
    eval_gradient,
    projected_gradient,
)
from .run import start_gradient_run

__all__ = ["adam"]

# Moment decay rates, epsilon, and how many step halvings one iteration may try.
_ADAM_BETA1 = 0.9
_ADAM_BETA2 = 0.999
_ADAM_EPS = 1e-12
_ADAM_MAX_HALVINGS = 12


def adam(
    objective: GradientObjective | ResidualObjective,
    spec: ParameterSpec,
    settings: OptimizeSettings | None = None,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> OptimizeResult:
    """Adam on the log-space gradient, for many parameters.

    Uses ``objective.gradient`` if the objective has one, else ``0.5 * |r|^2`` and ``J^T r``.
    A step is accepted only if the loss does not increase and is finite; otherwise it is
    halved and retried (up to 12 times). The step size stays reduced after a halving and
    doubles back towards ``adam_lr`` after each step accepted at the first try. Moments
    are updated only with gradients of accepted points. When no halving of the momentum
    step lowers the loss (after an overshoot the momentum points uphill), the moments are
    dropped and the step is tried again from the gradient at this point alone; only if
    that fails too does the run stop as stuck.
    """
    settings = settings or OptimizeSettings()
    run, z, values, loss, g = start_gradient_run(objective, spec, settings, progress, cancel)
    tracker, counter = run.tracker, run.counter

    m = np.zeros_like(z)
    v = np.zeros_like(z)
    lr_scale = 1.0
    t = 0
    while not tracker.out_of_iterations():
        if stop := run.interrupted():
            return run.result(stop, values, loss)
        g_proj, _active = projected_gradient(spec, z, g)
        if float(np.linalg.norm(g_proj)) < settings.grad_tol or loss == 0.0:
            return run.result("converged_gradient", values, loss)
        t += 1
        m_new = _ADAM_BETA1 * m + (1.0 - _ADAM_BETA1) * g_proj
        v_new = _ADAM_BETA2 * v + (1.0 - _ADAM_BETA2) * g_proj * g_proj
        m_hat = m_new / (1.0 - _ADAM_BETA1**t)
        v_hat = v_new / (1.0 - _ADAM_BETA2**t)
        direction = m_hat / (np.sqrt(v_hat) + _ADAM_EPS)

        accepted = False
        for halving in range(_ADAM_MAX_HALVINGS):
            if stop := run.interrupted():
                return run.result(stop, values, loss)
            z_trial = spec.clip(z - settings.adam_lr * lr_scale * direction)
            if not np.any(z_trial != z):
                return run.result("no_progress", values, loss)
            values_trial = spec.from_free(z_trial)
            out = eval_gradient(objective, spec, values_trial, counter)
            if out is not None and out[0] <= loss:
                accepted = True
                lr_scale = min(1.0, lr_scale * 2.0) if halving == 0 else lr_scale
                break
            lr_scale *= 0.5
        if not accepted:
            if t == 1:
                return run.result("no_progress", values, loss)
            m, v, t, lr_scale = np.zeros_like(z), np.zeros_like(z), 0, 1.0
            continue

        loss_trial, g_trial = out
        rel_change = (loss - loss_trial) / max(loss, 1e-300)
        m, v = m_new, v_new
        z, values, loss, g = z_trial, values_trial, loss_trial, g_trial
        run.accept(values, loss)
        if rel_change < settings.rel_loss_tol or loss <= settings.abs_loss_tol:
            return run.result("converged_loss", values, loss)
    return run.result("max_iterations", values, loss)
