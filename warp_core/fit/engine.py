"""Fit a model's parameters to its targets: ``fit()`` is the recipe.

1. The problem is checked and its parameters laid out in log space (:mod:`.problem`).
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

Parameters are optimized in log space within the model's hard limits, with a positive floor
where a limit is 0 (``Parameter.floor``).
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import one_line
from .objective.objective import FitObjective
from .optimizers.base import ProgressCallback
from .problem.problem import FitError, FitProblem
from .problem.settings import FitSettings
from .problem.spec import parameter_spec
from .stages import refine_bindings, run_objective
from .verdict.result import FitResult

__all__ = ["fit"]


def fit(
    problem: FitProblem,
    settings: FitSettings | None = None,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> FitResult:
    """Fit ``problem.free_parameters`` so the simulation matches the targets.

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
    problem: FitProblem, settings: FitSettings, progress: ProgressCallback | None, cancel: Any
) -> FitResult:
    t0 = time.perf_counter()
    try:
        problem.validate()
        spec = parameter_spec(problem)
        objective = FitObjective(problem, settings, spec.names, spec=spec)
    except ValueError as e:
        raise FitError(one_line(e)) from e
    target = objective.target
    with target.bindings_held():
        found = run_objective(problem, spec, objective, settings, progress, cancel, t0)
    if target.refines_bindings:
        found = refine_bindings(problem, objective, settings, found, progress, cancel, t0)
    return found
