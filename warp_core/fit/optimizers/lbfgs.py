"""Limited-memory BFGS over the free log values, within the bounds, for many parameters.

Adam needs hundreds of steps to settle where curvature differs by orders of magnitude
between parameters (stiffness against damping); a quasi-Newton model of the curvature,
built from the gradients already computed, takes few. Bounds are handled by projection: a
parameter at a bound whose gradient pushes outwards is held for the step, and every trial
point is clipped into the box.

Each step backtracks from the quasi-Newton step (and the first from a step that moves no
log value by more than ``FIRST_STEP``) until the loss falls by a small fraction of what the
gradient predicts (Armijo), each shorter trial where a quadratic through the loss puts the
minimum: with every stiffness, damping and the mass of a Blender-made scene free, the
minimum along the gradient lay at a log step of 3e-5, where ten halvings from
``FIRST_STEP`` stopped at 2.4e-4 and the fit with them (0.53 mm RMSE). The tape gradient
is "stable" (see the cloth model's ``adjoint_stable``) and can be a little off the true
slope, so when a quasi-Newton step finds no such point the memory is dropped and the step
is tried along the gradient alone; only when that fails too does the run stop
("no_progress").

Within a finished run (``lbfgs_finished_run``), L-BFGS takes its curvature from Gauss-Newton:
one Jacobian of tangents at its start gives J^T J, BFGS updates it with each step's gradient
pair, and each step minimises that model in the trust region's start box
(``GaussNewtonCurvature``); a plain L-BFGS pass starts from a scaled identity, which has to
learn over many steps that stiffness and damping differ in curvature by orders of magnitude.
Measured on 12 Blender-made scenes with every stiffness and damping free (seed 25, 3x
Levenberg-Marquardt's time), with it and the hand-over after 4 steps (below; it was 12): 10
matched within the tolerance where 8 did before (two had run out of budget still descending),
and the replay was no worse than LM's on 6, not 4; on seed 22, not looked at while building
it, 9 matched as before (LM 9), no worse than LM on 5 (before 6).

Where L-BFGS stops short of the stop loss at what looks like an optimum (no step found, the
loss no longer falling, or not halved over the steps that cost one Jacobian's rollouts),
``lbfgs_finished_run`` goes on with Levenberg-Marquardt's trust region from there
(``lm.trust_region_run``), within the same budgets, and where that stops, with L-BFGS again
(its curvature from the trust region's last Jacobian), for as long as an L-BFGS pass gains
``CYCLE_GAIN``. Near the optimum the stable gradient's remaining error is as large as the
slope itself: measured on a Blender-made scene with every stiffness and damping free, the
line searches shrank to 1e-5 of the quasi-Newton step there, and over 12 such scenes L-BFGS
alone ended 4.6x above the replay RMSE Levenberg-Marquardt reached (geometric mean), finished
0.55x. The trust region's Jacobian of tangents (two rollouts a free parameter) measures the
slope over a 1 % step, where the stable gradient cannot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..problem.spec import ParameterSpec
from .base import (
    GradientObjective,
    LogJacobianObjective,
    OptimizeResult,
    OptimizeSettings,
    ProgressCallback,
    ResidualObjective,
    RunState,
    eval_gradient,
    eval_jacobian,
    eval_residuals,
    format_values,
    projected_gradient,
)
from .lm import trust_region_run, weak_columns
from .run import Run, Tracker, start_gradient_run
from .subproblem import gauss_newton_normal, minimize_box_quadratic, step_box

__all__ = ["FINISH_STOPS", "lbfgs", "lbfgs_finished_run", "lbfgs_run"]

MEMORY = 8  # curvature pairs kept
FIRST_STEP = 0.25  # largest log change of a step without curvature information (x1.28)
ARMIJO = 1e-4  # fraction of the predicted decrease a step must achieve
MAX_TRIALS = 20  # trial steps per line search, each 0.1-0.5 of the last
# L-BFGS stops after which the trust region finishes the run (others: a budget ran out, or
# the loss is below the stop loss already)
FINISH_STOPS = ("no_progress", "converged_loss", "converged_gradient", "slow_descent")
# A finished run hands over once the loss has not halved over the accepted steps that cost as
# many rollouts as one Jacobian of tangents (two per free parameter), at least MIN_WINDOW: by
# then L-BFGS has spent one trust-region step's rollouts without halving the loss. Measured on
# Blender-made scenes with 12 free parameters (CPU, float64), one stable gradient costs 6.5-8.3
# forward rollouts and a Jacobian 23-30, so a step (a gradient and about one trial) costs
# STEP_ROLLOUTS. Handing over after 4 steps or after 10 (one trust-region pass, no L-BFGS
# re-run, before the Gauss-Newton curvature) moved no fit's outcome class on 12 such scenes
# but one's (stalled at a model RMSE of 3.1 mm after 4, matched after 10).
STEP_ROLLOUTS = 9
MIN_WINDOW = 4
# Where the trust region stops, L-BFGS runs again (fresh memory); another round follows only
# if that pass took the loss below this fraction of where it started
CYCLE_GAIN = 0.9
# The finished run's L-BFGS takes Gauss-Newton's J^T J (from one Jacobian of tangents at its
# start, then the trust region's last) as the curvature its pairs correct, in place of a
# scaled identity: stiffness and damping differ in curvature by orders of magnitude, which
# a scaled identity learns only over many steps. Its steps move no log value by more than
# the trust region's start radius. The ridge keeps nearly collinear columns solvable.
GN_RIDGE = 1e-9


def _direction(g: np.ndarray, pairs: list[tuple[np.ndarray, np.ndarray]], free: np.ndarray) -> np.ndarray:
    """-H g by the two-loop recursion, on the parameters not held at a bound."""
    q = np.where(free, g, 0.0)
    alphas = []
    for s, y in reversed(pairs):
        a = float(s @ q) / float(y @ s)
        alphas.append(a)
        q = q - a * y
    if pairs:
        s, y = pairs[-1]
        q = q * (float(s @ y) / float(y @ y))
    else:
        q = q * (FIRST_STEP / max(float(np.abs(q).max()), 1e-300))
    for (s, y), a in zip(pairs, reversed(alphas), strict=True):
        b = float(y @ q) / float(y @ s)
        q = q + (a - b) * s
    return -np.where(free, q, 0.0)


class GaussNewtonCurvature:
    """A dense quasi-Newton model of the loss's curvature in the free log values, started
    from Gauss-Newton's J^T J and updated by BFGS with each accepted step's gradient pair;
    a step minimises the model in the trust region's start box (as the trust region does,
    ``subproblem.minimize_box_quadratic``). Columns of J that move the cloth by less than
    ``settings.hold_below`` (``lm.weak_columns``) are held."""

    def __init__(self, jac: np.ndarray, settings: OptimizeSettings) -> None:
        self.held = weak_columns(jac, settings)
        self.start = gauss_newton_normal(jac, GN_RIDGE)
        self.hessian = self.start.copy()
        self.radius = settings.trust_radius

    def reset(self) -> None:
        self.hessian = self.start.copy()

    def step(self, spec: ParameterSpec, z: np.ndarray, g: np.ndarray, active: np.ndarray) -> np.ndarray:
        lower, upper = step_box(spec, z, self.radius, self.held | active)
        return minimize_box_quadratic(self.hessian, g, lower, upper)

    def update(self, s: np.ndarray, y: np.ndarray) -> None:
        """BFGS with a pair that keeps the model positive definite (s.y > 0, checked by the
        caller for the L-BFGS memory)."""
        bs = self.hessian @ s
        sbs = float(s @ bs)
        if sbs > 0.0:
            self.hessian = self.hessian - np.outer(bs, bs) / sbs + np.outer(y, y) / float(s @ y)


def lbfgs(
    objective: GradientObjective,
    spec: ParameterSpec,
    settings: OptimizeSettings | None = None,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> OptimizeResult:
    """Projected L-BFGS with a backtracking line search on the log-space gradient."""
    settings = settings or OptimizeSettings()
    run, z, values, loss, g = start_gradient_run(objective, spec, settings, progress, cancel)
    return _descend(objective, settings, run, z, values, loss, g)


def lbfgs_run(
    objective: GradientObjective,
    spec: ParameterSpec,
    settings: OptimizeSettings,
    tracker: Tracker,
    start: RunState,
    report_start: bool = False,
    slow_window: int | None = None,
    curvature: GaussNewtonCurvature | None = None,
) -> OptimizeResult:
    """One L-BFGS run from ``start`` sharing ``tracker``'s budgets (a local method of the
    global phase, as ``lm.trust_region_run``); the start's gradient is taken first. Ends
    as "no_jacobian" where that gradient cannot be computed; with ``slow_window``, as
    "slow_descent" once the loss has not halved over that many accepted steps; with
    ``curvature``, its steps minimise that model (see ``GaussNewtonCurvature``)."""
    run = Run(spec, tracker)
    z = np.array(start.z, dtype=np.float64)
    values = start.values_in(spec)
    found = eval_gradient(objective, spec, values, tracker.counter)
    if found is None:
        run.begin(values, 0.5 * float(start.r @ start.r), report_start)
        tracker.warnings.append(f"the gradient cannot be computed at {format_values(values)}")
        return run.result("no_jacobian", values, run.history[0])
    loss, g = found
    run.begin(values, loss, report_start)
    return _descend(objective, settings, run, z, values, loss, g, _Pass(slow_window, curvature))


def lbfgs_finished_run(
    objective: GradientObjective,
    spec: ParameterSpec,
    settings: OptimizeSettings,
    tracker: Tracker,
    start: RunState,
    report_start: bool = False,
) -> OptimizeResult:
    """``lbfgs_run``, then, where it stopped short of the stop loss at what looks like an
    optimum (``FINISH_STOPS``) and the budgets allow, the trust region from its best point,
    and L-BFGS again from where that stops for as long as a pass lowers the loss by
    ``CYCLE_GAIN`` (see the module docstring): one run's history, its last method's stop and
    state. A start with a Jacobian (a finished run resumed after a slow stop) resumes the
    trust region."""
    if start.jacobian is not None:
        resumed = trust_region_run(objective, spec, settings, tracker, start, report_start)
        return replace(resumed, finished_by="trust_region")
    finishable = isinstance(objective, LogJacobianObjective)
    window = max(MIN_WINDOW, math.ceil(2 * spec.n_free / STEP_ROLLOUTS)) if finishable else None
    curvature = None
    if finishable:
        jac = eval_jacobian(objective, spec, start.values_in(spec), tracker.counter)
        curvature = GaussNewtonCurvature(jac, settings) if jac is not None else None
    best = lbfgs_run(objective, spec, settings, tracker, start, report_start, window, curvature)
    joined = _Joined(best)
    while finishable and _goes_on(best, settings, tracker):
        r = eval_residuals(objective, best.values, tracker.counter)
        if r is None:  # cannot happen for a point a run accepted, but never go on from one
            break
        here = RunState(spec.to_free(best.values), r, None, settings.trust_radius, best.values)
        best = joined.add(trust_region_run(objective, spec, settings, tracker, here))
        if not _goes_on(best, settings, tracker):
            break
        before = best.best_loss
        if best.state is not None:  # the trust region's own point and residuals, its Jacobian dropped
            if best.state.jacobian is not None:
                curvature = GaussNewtonCurvature(best.state.jacobian, settings)
            here = replace(best.state, jacobian=None, radius=settings.trust_radius)
        best = joined.add(lbfgs_run(objective, spec, settings, tracker, here, False, window, curvature))
        if not best.best_loss < CYCLE_GAIN * before:
            break
    if best.stop_reason != "slow_descent":
        return best
    # an L-BFGS pass's own hand-over is no stop of the run: a budget ended it, or the last
    # pass gained too little to go on (no step either method takes gains much)
    budget = tracker.interrupted() or ("max_iterations" if tracker.out_of_iterations() else None)
    return replace(best, stop_reason=budget or "no_progress", cancelled=budget == "cancelled")


class _Joined:
    """The passes of one finished run as one result: the history of every pass that lowered
    the loss, from the first pass's start; the best pass's values, stop and state."""

    def __init__(self, first: OptimizeResult) -> None:
        self.best = first
        self.history = list(first.loss_history)
        self.initial = first.initial_values

    def add(self, run: OptimizeResult) -> OptimizeResult:
        if not run.best_loss < self.best.best_loss:  # it accepted no step
            return self.best
        self.history += run.loss_history[1:]
        self.best = replace(
            run,
            initial_values=self.initial,
            loss_history=list(self.history),
            iterations=len(self.history) - 1,
            finished_by="trust_region",
        )
        return self.best


def _goes_on(result: OptimizeResult, settings: OptimizeSettings, tracker: Tracker) -> bool:
    """Has ``result`` stopped short of the stop loss, at what looks like an optimum, with
    budget left?"""
    return (
        result.stop_reason in FINISH_STOPS
        and result.best_loss > settings.abs_loss_tol
        and not tracker.interrupted()
        and not tracker.out_of_iterations()
    )


@dataclass
class _Pass:
    slow_window: int | None = None
    curvature: GaussNewtonCurvature | None = None


def _descend(
    objective: GradientObjective,
    settings: OptimizeSettings,
    run: Run,
    z: np.ndarray,
    values: dict[str, float],
    loss: float,
    g: np.ndarray,
    how: _Pass | None = None,
) -> OptimizeResult:
    """The L-BFGS iterations of ``run`` from ``z`` (loss and log-space gradient given);
    with ``how.slow_window``, they stop ("slow_descent") once the loss has not halved over
    that many accepted steps; ``how.curvature``: see ``lbfgs_run``."""
    spec, tracker = run.spec, run.tracker
    how = how or _Pass()
    slow_window, curvature = how.slow_window, how.curvature
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    while not tracker.out_of_iterations():
        if stop := run.interrupted():
            return run.result(stop, values, loss)
        g_proj, active = projected_gradient(spec, z, g)
        if not np.any(g_proj) or loss == 0.0:
            return run.result("converged_gradient", values, loss)
        found = None
        for memory in (pairs, []):  # the quasi-Newton step, then the gradient alone
            if curvature is not None and memory is pairs:
                d = curvature.step(spec, z, g_proj, active)
            else:
                d = _direction(g_proj, memory, ~active)
            if not float(d @ g_proj) < 0.0:
                continue
            found = _line_search(objective, spec, run, z, loss, g_proj, d)
            if found is not None or run.interrupted():
                break
            pairs.clear()
            if curvature is not None:
                curvature.reset()
        if found is None:
            return run.result(run.interrupted() or "no_progress", values, loss)
        z_new, values_new, loss_new, g_new = found
        s, y = z_new - z, g_new - g
        if float(s @ y) > 1e-12 * float(np.linalg.norm(s) * np.linalg.norm(y)):
            pairs.append((s, y))  # only pairs that keep the model positive definite
            del pairs[:-MEMORY]
            if curvature is not None:
                curvature.update(s, y)
        rel_change = (loss - loss_new) / max(loss, 1e-300)
        z, values, loss, g = z_new, values_new, loss_new, g_new
        run.accept(values, loss)
        if rel_change < settings.rel_loss_tol or loss <= settings.abs_loss_tol:
            return run.result("converged_loss", values, loss)
        history = run.history
        if slow_window is not None and len(history) > slow_window and loss > 0.5 * history[-1 - slow_window]:
            return run.result("slow_descent", values, loss)
    return run.result("max_iterations", values, loss)


def _line_search(
    objective: GradientObjective,
    spec: ParameterSpec,
    run: Run,
    z: np.ndarray,
    loss: float,
    g: np.ndarray,
    d: np.ndarray,
) -> tuple[np.ndarray, dict[str, float], float, np.ndarray] | None:
    """Backtrack along ``d`` from ``z`` until the loss falls enough; None if it never does.

    The first trial takes the gradient with the loss (most steps are accepted there); later
    trials simulate only, and the gradient is taken once a trial is accepted. Each shorter
    step is the minimum of the quadratic through the loss, its slope along ``d`` and the
    last trial, kept within [0.1, 0.5] of that trial: a valley a thousand times narrower
    than the first step is reached in a few trials, not ten halvings."""
    slope = float(g @ d)
    step = 1.0
    loss_only = isinstance(objective, ResidualObjective)
    for trial in range(MAX_TRIALS):
        if run.interrupted():
            return None
        z_trial = spec.clip(z + step * d)
        if not np.any(z_trial != z):
            return None
        values = spec.from_free(z_trial)
        if trial == 0 or not loss_only:
            out = eval_gradient(objective, spec, values, run.counter)
            trial_loss = None if out is None else out[0]
        else:
            r = eval_residuals(objective, values, run.counter)
            trial_loss, out = (None, None) if r is None else (0.5 * float(r @ r), None)
        if trial_loss is not None and trial_loss <= loss + ARMIJO * float(g @ (z_trial - z)):
            if out is None:
                out = eval_gradient(objective, spec, values, run.counter)
            if out is not None:
                return z_trial, values, out[0], out[1]
        step *= _shrink(loss, slope, step, trial_loss)
    return None


def _shrink(loss: float, slope: float, step: float, trial_loss: float | None) -> float:
    """Factor for the next trial step: the quadratic model's minimiser over ``step``,
    safeguarded to [0.1, 0.5] (0.5 where the trial failed to simulate)."""
    if trial_loss is None:
        return 0.5
    curvature = trial_loss - loss - slope * step  # 0.5 c step^2 of the quadratic model
    if not curvature > 0.0:
        return 0.5
    return min(max(-slope * step / (2.0 * curvature), 0.1), 0.5)
