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

__all__ = [
    "FitError",
    "FitObjective",
    "FitProblem",
    "FitResult",
    "FitSettings",
    "OUTCOMES",
    "Target",
    "fit",
    "problem_metadata",
]
