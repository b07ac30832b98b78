"""What a fit returns: the fitted values, how well they match, and how the run went."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..models.base import ModelSettings

__all__ = ["FitResult"]


@dataclass
class FitResult:
    params: dict[str, float]  # fitted values of the fitted (and tied) parameters
    initial_params: dict[str, float]
    all_params: ModelSettings  # the model's start settings with the fitted values applied
    loss_history: list[float]
    initial_loss: float
    final_loss: float
    per_vertex_error: dict[int, np.ndarray]  # frame -> (N,) metres
    rmse_m: float
    max_error_m: float
    initial_rmse_m: float | None  # None when the start values make the simulation diverge
    iterations: int
    n_forward: int
    n_backward: int
    seconds: float
    device: str
    optimizer: str
    stop_reason: str
    cancelled: bool
    identifiability: list[dict[str, Any]]
    warnings: list[str]

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: the per-object entry of a fit report (no per-vertex arrays)."""
        return {
            "params": self.params,
            "initial_params": self.initial_params,
            "initial_loss": self.initial_loss,
            "final_loss": self.final_loss,
            "rmse_m": self.rmse_m,
            "initial_rmse_m": self.initial_rmse_m,
            "max_error_m": self.max_error_m,
            "iterations": self.iterations,
            "n_forward": self.n_forward,
            "n_backward": self.n_backward,
            "seconds": self.seconds,
            "device": self.device,
            "optimizer": self.optimizer,
            "stop_reason": self.stop_reason,
            "cancelled": self.cancelled,
            "loss_history": self.loss_history,
            "identifiability": self.identifiability,
            "warnings": self.warnings,
        }
