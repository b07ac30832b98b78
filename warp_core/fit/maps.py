"""Per-vertex weight maps: a fit problem's tape gradient with respect to them.

The maps are a model's ``map_kinds``: for Blender's cloth, the weights of its stiffness and
shrink vertex groups. Fitting them is the fit engine's work (``problem.maps``: regions as
parameters, a free map by ``free_map``); this is the gradient on its own, for the checks and
benchmarks that compare it with finite differences.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .objective.objective import FitObjective
from .problem.problem import FitProblem
from .problem.settings import FitSettings

__all__ = ["map_gradient"]


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
