"""Fitting a model's parameters to keyframe targets: problem, objective, optimizers,
identifiability and the result.

The engine reaches a model only through the registry (``warp_core.models.get_model``) and
the ``Model``/``Simulator`` protocols, so a new model needs no change here.
"""

from .engine import fit, problem_metadata
from .objective import FitObjective
from .outcome import OUTCOMES
from .problem import FitError, FitProblem, FitSettings, Target
from .result import FitResult
from .shared import SharedFitResult, fit_shared

__all__ = [
    "FitError",
    "FitObjective",
    "FitProblem",
    "FitResult",
    "FitSettings",
    "SharedFitResult",
    "OUTCOMES",
    "Target",
    "fit",
    "fit_shared",
    "problem_metadata",
]
