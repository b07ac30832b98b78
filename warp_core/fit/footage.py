"""Footage targets fit in two stages: the search with every track held where it was bound,
then a local refinement with the bindings profiled out.

Profiled bindings (:mod:`warp_core.tracks.loss`) remove the bias of a track bound a few
millimetres off, but during a global search they also let every track slide to make up for
wrong values: on a clamped sheet filmed through Blender's camera solve the search then
settled in a second valley (tension 2.7x, air damping 13 % low, 1.1x the best valley's RMS)
that the bound tracks alone do not have. So the search (local run, global phase) runs with
the bindings held, and Levenberg-Marquardt then refines from its values with the bindings
profiled, without a global phase. The result counts both stages (runs, iterations, time)
and keeps the start values and the search summary of the first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .objective import FitObjective
from .problem import FitProblem, FitSettings
from .result import FitResult
from .result_build import start_warnings
from .spec import ParameterSpec

__all__ = ["fit_footage"]


def fit_footage(
    problem: FitProblem,
    spec: ParameterSpec,
    objective: FitObjective,
    settings: FitSettings,
    progress: Callable[[int, float, dict[str, float]], None] | None,
    cancel: Any,
    t0: float,
    run_objective: Callable[..., FitResult],
) -> FitResult:
    """Both stages; ``run_objective`` is the engine's (:func:`.engine.run_objective`)."""
    reprojection = objective.tracks
    profiled = reprojection.profiled.copy()
    reprojection.profiled[:] = False
    try:
        found = run_objective(problem, spec, objective, settings, progress, cancel, t0)
    finally:
        reprojection.profiled[:] = profiled
    if found.outcome == "failed" or found.cancelled or not profiled.any():
        return found
    start = {name: found.params[name] for name in spec.names}
    refine_spec = ParameterSpec(names=spec.names, initial=start, bounds=spec.bounds, ties=spec.ties)
    objective.spec = refine_spec
    done = found.iterations

    def shifted(k: int, loss: float, values: dict[str, float]) -> None:
        if progress is not None:
            progress(done + k, loss, values)

    budget = settings.time_budget_s
    local = replace(
        settings,
        global_search=False,
        max_iterations=max(settings.max_iterations - found.iterations, 1),
        time_budget_s=None if budget is None else max(budget - found.seconds, 1.0),
    )
    refined = run_objective(problem, refine_spec, objective, local, shifted, cancel, t0)
    if refined.outcome == "failed":
        return found
    return replace(
        refined,
        initial_params=found.initial_params,
        initial_rmse_m=found.initial_rmse_m,
        initial_loss=found.initial_loss,
        loss_history=found.loss_history + refined.loss_history,
        iterations=found.iterations + refined.iterations,
        search=found.search,
        # the start's warnings; what the values are and how well they are determined is the
        # second stage's to say
        warnings=start_warnings(problem, spec) + refined.warnings,
    )
