"""Fitting a model's parameters to keyframe targets: problem, objective, optimizers,
identifiability and the result."""

from .engine import (
    ClothFitObjective,
    FitError,
    FitProblem,
    FitResult,
    FitSettings,
    Target,
    fit,
    problem_metadata,
)

__all__ = [
    "ClothFitObjective",
    "FitError",
    "FitProblem",
    "FitResult",
    "FitSettings",
    "Target",
    "fit",
    "problem_metadata",
]
