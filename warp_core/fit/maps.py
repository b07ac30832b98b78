"""Per-vertex weight maps: a fit problem's tape gradient with respect to them, and a map fit.

The maps are a model's ``map_kinds``: for Blender's cloth, the weights of its stiffness and
shrink vertex groups. A map fit moves one map's weights within [0, 1] by L-BFGS in the box
(``optimizers.box_lbfgs``) on the tape gradient, the model's parameters held, with a
smoothness penalty ``0.5 * smoothness * sum over mesh edges (w_i - w_j)^2``: many weight
maps give the same springs (on a grid, the structural springs take the mean of two
neighbours, so a checkerboard added to the weights changes none of them), and the penalty
picks the smooth one, which also stays paintable. The group's minimum and maximum are the
problem's settings and stay fixed, so the weights-times-maximum ambiguity does not arise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..mesh import ClothMesh
from .objective.objective import FitObjective
from .optimizers.box_lbfgs import minimize_box
from .problem.problem import FitError, FitProblem
from .problem.settings import FitSettings

__all__ = ["MapFitResult", "fit_map", "map_gradient", "smoothness_penalty"]


def map_gradient(
    problem: FitProblem,
    settings: FitSettings,
    values: dict[str, float] | None,
    kinds: Sequence[str],
) -> dict[str, np.ndarray]:
    """kind -> d loss / d weight of each vertex ((N,) float64) for each of ``kinds`` (some of
    the problem's model's ``map_kinds``), at the continuous parameter ``values`` (None: the
    problem's start values) and the weights the problem's mesh holds; the loss is the fit's
    0.5 |r|^2, the gradient of ``settings.gradient``'s kind. FitError where the model or
    the scene has no such gradient."""
    objective = FitObjective(problem, settings, [])
    start = problem.model_settings.values() if values is None else values
    return objective.map_gradient(start, kinds)[1]


def smoothness_penalty(mesh: ClothMesh, weights: np.ndarray, smoothness: float) -> tuple[float, np.ndarray]:
    """``0.5 * smoothness * sum over the mesh's edges (w_i - w_j)^2`` and its gradient
    (``smoothness`` times the graph Laplacian applied to the weights)."""
    i, j = mesh.edges[:, 0], mesh.edges[:, 1]
    diff = weights[i] - weights[j]
    grad = np.zeros_like(weights)
    np.add.at(grad, i, smoothness * diff)
    np.add.at(grad, j, -smoothness * diff)
    return 0.5 * smoothness * float(diff @ diff), grad


@dataclass
class MapFitResult:
    """A fitted weight map: made by :func:`fit_map`, read by its caller."""

    kind: str
    weights: np.ndarray  # (N,) in [0, 1]
    loss: float  # the data loss 0.5 |r|^2 at ``weights``
    start_loss: float  # and at the start weights
    penalty: float  # the smoothness penalty at ``weights``
    rmse: float  # the RMS misfit the loss stands for, in the target's unit
    iterations: int  # accepted steps
    evaluations: int  # rollouts on a tape, one gradient each
    stop: str  # why the box L-BFGS stopped (``box_lbfgs.BoxResult.stop``)


def fit_map(
    problem: FitProblem,
    settings: FitSettings,
    kind: str,
    smoothness: float,
    start: np.ndarray | None = None,
    max_iterations: int = 50,
) -> MapFitResult:
    """Fit the weights of the ``kind`` map (one of the model's ``map_kinds`` that its
    simulators can repaint) to the problem's targets at the problem's parameter values, from
    ``start`` (default: 0.5 everywhere, the middle of the box), with the gradient of
    ``settings.gradient``'s kind."""
    objective = FitObjective(problem, settings, [])
    if kind not in objective.model.map_kinds:
        raise FitError(f"the {objective.model.label} model has no {kind!r} map to fit")
    values = problem.model_settings.values()
    n = problem.mesh.vertex_count
    x0 = np.full(n, 0.5) if start is None else np.asarray(start, dtype=np.float64)
    losses: list[float] = []

    def fun(w: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            objective.set_maps({kind: w})
        except ValueError as e:
            raise FitError(str(e)) from e
        loss, grads = objective.map_gradient(values, [kind])
        losses.append(loss)
        penalty, penalty_grad = smoothness_penalty(problem.mesh, w, smoothness)
        return loss + penalty, grads[kind] + penalty_grad

    found = minimize_box(fun, x0, (np.zeros(n), np.ones(n)), max_iterations=max_iterations)
    objective.set_maps({kind: found.x})
    loss = found.value - smoothness_penalty(problem.mesh, found.x, smoothness)[0]
    return MapFitResult(
        kind=kind,
        weights=found.x,
        loss=loss,
        start_loss=losses[0],
        penalty=found.value - loss,
        rmse=objective.rmse_of_loss(loss),
        iterations=found.iterations,
        evaluations=found.evaluations,
        stop=found.stop,
    )
