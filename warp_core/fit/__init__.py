"""Fitting a model's parameters to keyframe targets: problem, objective, optimizers,
identifiability and the result.

The engine reaches a model only through the registry (``warp_core.models.get_model``) and
the ``Model``/``Simulator`` protocols, so a new model needs no change here.
"""

from .engine import fit
from .objective.objective import FitObjective
from .objective.rollout_pool import limit_cpu_threads
from .problem.files import problem_metadata
from .problem.problem import FitError, FitProblem, Target
from .problem.settings import FitSettings
from .progress import PHASES, FitProgress, ProgressListener, listener
from .shared import SharedFitResult, fit_shared
from .verdict.outcome import OUTCOMES
from .verdict.result import FitResult

__all__ = [
    "FitError",
    "FitObjective",
    "FitProblem",
    "FitResult",
    "FitProgress",
    "FitSettings",
    "PHASES",
    "ProgressListener",
    "SharedFitResult",
    "OUTCOMES",
    "Target",
    "fit",
    "fit_shared",
    "listener",
    "limit_cpu_threads",
    "problem_metadata",
]
