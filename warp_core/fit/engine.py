"""Fit a model's parameters to its targets: ``fit()`` is the recipe.

1. The problem is checked and its parameters laid out in log space (:mod:`.problem`); a
   map's regions are parameters like the others (``problem.maps``), and a problem with a
   free map (one stiffness per vertex) goes to its own method, :mod:`.free_map`, which
   returns the same result.
2. The objective simulates the model and compares it with the target kind
   (:mod:`.objective`, :mod:`warp_core.targets`).
3. The search (:func:`.stages.run_objective`): Levenberg–Marquardt (default up to 12 free
   parameters) on the keyframe residuals and a Jacobian of forward tangents, inside a trust
   region on the log step (:mod:`.optimizers.lm`), from the start values and, where that falls
   short, from space-filling points of the plausible ranges (:mod:`.optimizers.global_search`);
   L-BFGS (the default above 12) inside the same global phase on the tape gradient, finished
   by the trust region where it slows down (:func:`.optimizers.lbfgs.lbfgs_finished_run`);
   Adam (on request) along the gradient from the start alone. Both take the ``stable``
   gradient unless told otherwise. A footage target's tracks stay where they were bound
   during the search.
4. For a target that refines its bindings (footage), the refinement stage
   (:func:`.stages.refine_bindings`).
5. The verdict, built by each stage (:mod:`.verdict`): one honest outcome with its reason,
   identifiability, the rounding check and the contact probe.

As it goes, the fit tells its caller each point it accepts and each phase it enters, with the
RMSE reached in the target's unit (:mod:`.progress`).

Parameters are optimized in log space within the model's hard limits, with a positive floor
where a limit is 0 (``Parameter.floor``).
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import one_line
from .free_map import fit_free_map
from .objective.objective import FitObjective
from .optimizers.base import ProgressCallback
from .problem.problem import FitError, FitProblem
from .problem.settings import FitSettings
from .problem.spec import parameter_spec
from .progress import ProgressListener, Reporter
from .stages import refine_bindings, run_objective
from .verdict.result import FitResult

__all__ = ["fit"]

# seconds past the time budget a fit may end without saying why (the verdict's own work)
OVERRUN_S = 0.5


def fit(
    problem: FitProblem,
    settings: FitSettings | None = None,
    progress: ProgressCallback | ProgressListener | None = None,
    cancel: Any = None,
) -> FitResult:
    """Fit ``problem.free_parameters`` so the simulation matches the targets.

    ``progress``: a plain callback ``(iteration, loss, values)``, called at every accepted
    point, or a :class:`~.progress.ProgressListener`, which hears the phases and RMSE as well.

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


def _fit(problem: FitProblem, settings: FitSettings, progress: Any, cancel: Any) -> FitResult:
    t0 = time.perf_counter()
    report = Reporter(progress, t0, (problem.model, settings.precision, str(settings.device)))
    try:
        problem.validate()
        if any(m.free for m in problem.maps):
            return fit_free_map(problem, settings, report, cancel, t0)
        spec = parameter_spec(problem)
        report.preparing()
        objective = FitObjective(problem, settings, spec.names, spec=spec)
    except ValueError as e:
        raise FitError(one_line(e)) from e
    report.measure(objective.unit, objective.rmse_of_loss)
    target = objective.target
    budget = settings.time_budget_s

    # the budget counts from here: preparing the fit (building the simulation) is part of it
    run_settings = settings.with_budget_left(t0)
    with target.bindings_held():
        found = run_objective(problem, spec, objective, run_settings, report, cancel, t0)
    if target.refines_bindings:
        found = refine_bindings(problem, objective, settings, found, report, cancel, t0)
    if budget is not None and found.stop_reason == "time_budget" and found.seconds > budget + OVERRUN_S:
        found.outcome_reason += "; " + _overrun(found.seconds, budget, report.first_report_s)
    return found


def _overrun(seconds: float, budget: float, start_s: float | None) -> str:
    """Why a fit stopped by its time budget ran past it."""
    head = f"it ran {seconds:.1f} s of a {budget:g} s time budget, which is checked between simulations"
    if start_s is not None and start_s > budget:
        return f"{head}: preparing the fit and simulating its start took {start_s:.1f} s"
    return f"{head}: the simulations of its last step (its sensitivities) began before the budget ran out"
