"""A free map's coarse stage: the map as a few soft regions, fitted by the engine's trust region.

Between the best uniform map and one stiffness per vertex (``free_map``), the map is first
fitted as ``COARSE_REGIONS`` smooth bumps that sum to one at every vertex (regions in the
sense of ``problem.maps``, each a fit parameter): Levenberg–Marquardt on central differences
of rollouts that repeat the base point's solver iteration counts, which a jump of the loss
(a count switching, a spring turning from tension to compression inside the one Newton step
of an implicit substep) does not stop, where the tape's gradient alone can point nowhere
useful at the uniform optimum. The per-vertex stage starts from its result.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..models import get_model
from .objective.objective import FitObjective
from .problem.maps import MapSpec, start_ratios
from .problem.problem import FitProblem
from .problem.settings import FitSettings
from .problem.spec import parameter_spec
from .progress import Reporter
from .stages import run_objective
from .verdict.result import FitResult

__all__ = ["COARSE_REGIONS", "STAGE_REL_LOSS_TOL", "coarse_fit", "soft_regions"]

COARSE_REGIONS = 9  # bumps of the coarse stage (a 3 x 3 over a sheet)
# the uniform and coarse stages only start the next: they stop once a step gains less than
# this share of the loss (the per-vertex stage refines every value they leave)
STAGE_REL_LOSS_TOL = 1e-3


def soft_regions(vertices: np.ndarray, count: int) -> dict[str, np.ndarray]:
    """``count`` smooth memberships over the vertices that sum to one at each: Gaussian bumps
    around vertices spread by farthest-point sampling (from the one nearest the centroid),
    their width half the spacing such points have on a square of the mesh's extent."""
    x = np.asarray(vertices, dtype=np.float64)
    count = max(1, min(count, len(x)))
    centres = [int(np.argmin(np.linalg.norm(x - x.mean(axis=0), axis=1)))]
    nearest = np.linalg.norm(x - x[centres[0]], axis=1)
    while len(centres) < count:
        centres.append(int(np.argmax(nearest)))
        nearest = np.minimum(nearest, np.linalg.norm(x - x[centres[-1]], axis=1))
    extent = float(np.ptp(x, axis=0).max()) or 1.0
    width = 0.5 * extent / np.sqrt(count)
    d2 = ((x[:, None, :] - x[None, centres, :]) ** 2).sum(axis=2)
    bumps = np.exp(-0.5 * (d2 - d2.min(axis=1, keepdims=True)) / width**2)
    bumps /= bumps.sum(axis=1, keepdims=True)
    return {f"c{k}": bumps[:, k] for k in range(count)}


def coarse_fit(
    problem: FitProblem,
    settings: FitSettings,
    start: FitResult,
    s0: float,
    report: Reporter,
    cancel: Any,
    t0: float,
) -> tuple[FitResult, np.ndarray]:
    """The coarse stage from the uniform fit ``start`` (its value ``s0`` and free parameters):
    its result, and each vertex's stiffness (of the map's first base parameter) there."""
    kind = problem.maps[0].kind
    rng = get_model(problem.model).map_ranges[kind]
    moved = {b: s0 * ratio for b, ratio in start_ratios(rng, problem.model_settings.values()).items()}
    moved.update({n: start.params[n] for n in problem.free_parameters if n in start.params})
    regions = soft_regions(problem.mesh.vertices, COARSE_REGIONS)
    coarse = dataclasses.replace(
        problem, model_settings=problem.model_settings.replace(**moved), maps=[MapSpec(kind, regions)]
    )
    # the uniform stage searched globally; this one refines from it
    run = dataclasses.replace(settings, global_search=False, rel_loss_tol=STAGE_REL_LOSS_TOL)
    run = run.with_budget_left(t0)
    spec = parameter_spec(coarse)
    objective = FitObjective(coarse, run, spec.names, spec=spec)
    result = run_objective(coarse, spec, objective, run, report, cancel, t0)
    layout = coarse.map_layout()
    stiffness = layout.stiffness(result.params, coarse.model_settings.values())[kind]
    return result, stiffness
