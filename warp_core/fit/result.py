"""What a fit returns: the fitted values, how well they match, and how the run went."""

from __future__ import annotations

from dataclasses import dataclass, field
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
    # One honest outcome (see ``warp_core.fit.outcome``): "converged" (targets matched
    # within ``tolerance_m``), "misfit" (an optimum of the fitted parameters that leaves
    # them off), "stalled" (stopped by a budget or cancel first) or "failed" (nothing
    # could be simulated; the values are the start values).
    outcome: str = "converged"
    outcome_reason: str = ""  # one sentence
    motion_m: float = 0.0  # RMS distance of the targets from the rest positions
    rmse_relative: float | None = None  # rmse_m / motion_m (None when the motion is 0)
    tolerance_m: float = 0.0  # the RMSE that counted as matched
    undetermined: list[str] = field(default_factory=list)  # parameters the targets do not determine
    at_bounds: dict[str, str] = field(default_factory=dict)  # name -> "lower" / "upper"
    # the global phase: whether it ran, start points simulated, and how many were refined
    search: dict[str, Any] = field(default_factory=dict)
    # for a match: how far rounding alone moves the motion at the fitted values (float32
    # against float64 rollouts of the model), metres; None when not measured
    rounding_gap_m: float | None = None
    # for a match through collisions: how far the same values move when the cloth starts
    # 1 µm higher (contacts can make the motion chaotic), metres; None when not measured
    start_gap_m: float | None = None
    # "m", or "px" for footage targets: then every *_m misfit above (RMSE, maximum error,
    # motion, tolerance, rounding gap, per-vertex errors, which are per marker) is in pixels
    unit: str = "m"
    track_errors: dict[str, float] = field(default_factory=dict)  # track -> RMS px, worst first
    # track -> the barycentrics its markers put it at (the binding's triangle, its affine frame)
    track_bindings: dict[str, list[float]] = field(default_factory=dict)
    # footage with the automatic tolerance: the RMSE the markers' own noise explains
    noise_rmse: float | None = None
    # with collision objects: the frames the fitted rollout touched them in and how many
    # vertices touched (None without colliders)
    contacts: dict[str, Any] | None = None
    # the tape gradient L-BFGS or Adam stepped along ("stable" or "exact"); None for LM
    gradient: str | None = None
    # entries of the stable gradient taken as the loss's slope over a tangent step, where
    # the tape's derivative overstated what such a step does (see ``tangents``)
    n_smoothed: int = 0

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: the per-object entry of a fit report (no per-vertex arrays)."""
        out = {
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
            "outcome": self.outcome,
            "outcome_reason": self.outcome_reason,
            "motion_m": self.motion_m,
            "rmse_relative": self.rmse_relative,
            "tolerance_m": self.tolerance_m,
            "undetermined": list(self.undetermined),
            "at_bounds": dict(self.at_bounds),
            "search": dict(self.search),
            "rounding_gap_m": self.rounding_gap_m,
        }
        if self.gradient is not None:
            out["gradient"] = self.gradient
            out["n_smoothed"] = self.n_smoothed
        if self.start_gap_m is not None:
            out["start_gap_m"] = self.start_gap_m
        if self.contacts is not None:
            out["contacts"] = {
                "frames": list(self.contacts["frames"]),
                "vertices": int(self.contacts["vertices"]),
            }
        if self.unit == "px":
            # JSON readers get the unit in the key names; the metre keys stay, empty
            for key in ("rmse", "initial_rmse", "max_error", "motion", "tolerance", "rounding_gap"):
                out[f"{key}_px"], out[f"{key}_m"] = out[f"{key}_m"], None
            if "start_gap_m" in out:
                out["start_gap_px"] = out.pop("start_gap_m")
            out["unit"] = "px"
            out["track_errors_px"] = dict(self.track_errors)
            out["track_bindings"] = {k: list(v) for k, v in self.track_bindings.items()}
            out["noise_rmse_px"] = self.noise_rmse
        return out
