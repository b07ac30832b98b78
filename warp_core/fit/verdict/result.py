"""What a fit returns: the fitted values, how well they match, and how the run went."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...models.base import ModelSettings
from ...targets.units import unit_of

__all__ = ["FitResult"]

# the misfits a record names with their unit (``rmse_m``, or ``rmse_px`` and ``rmse_m`` None)
_MISFIT_KEYS = ("rmse", "initial_rmse", "max_error", "motion", "tolerance", "rounding_gap")


@dataclass
class FitResult:
    """What a fit returns: the fitted values, how well they match, and how the run went.

    Made by the verdict's builder (``build_result``, ``failed_result``) for ``engine.fit``,
    then adjusted by the footage fit (two stages as one) and the shared fit (each member's
    match); read by the add-on (write-back, records, the panel), ``python -m warp_core``, the
    benchmarks and the tests. Every misfit (RMSE, maximum error, motion, tolerance, gaps,
    per-vertex errors) is in ``unit``; :meth:`summary` writes the documented JSON record.
    """

    params: dict[str, float]  # fitted values of the fitted (and tied) parameters
    initial_params: dict[str, float]
    model_settings: ModelSettings  # the model's start settings with the fitted values applied
    loss_history: list[float]
    initial_loss: float
    final_loss: float
    # frame -> the error of each compared point, in the unit: (N,) per vertex for mesh
    # targets, one per marker at that frame for footage
    per_vertex_error: dict[int, np.ndarray]
    rmse: float
    max_error: float
    initial_rmse: float | None  # None when the start values make the simulation diverge
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
    # One honest outcome (see ``warp_core.fit.verdict.outcome``): "converged" (targets matched
    # within ``tolerance``), "misfit" (an optimum of the fitted parameters that leaves
    # them off), "stalled" (stopped by a budget or cancel first) or "failed" (nothing
    # could be simulated; the values are the start values).
    outcome: str = "converged"
    outcome_reason: str = ""  # one sentence
    motion: float = 0.0  # RMS misfit of the cloth left at rest: what there was to fit
    rmse_relative: float | None = None  # rmse / motion (None when the motion is 0)
    tolerance: float = 0.0  # the RMSE that counted as matched
    undetermined: list[str] = field(default_factory=list)  # parameters the targets do not determine
    at_bounds: dict[str, str] = field(default_factory=dict)  # name -> "lower" / "upper"
    # the global phase: whether it ran, start points simulated, and how many were refined
    search: dict[str, Any] = field(default_factory=dict)
    # for a match: how far rounding alone moves the motion at the fitted values (float32
    # against float64 rollouts of the model), in the unit; None when not measured
    rounding_gap: float | None = None
    # for a match through collisions: how far the same values move when the cloth starts
    # 1 µm higher (contacts can make the motion chaotic), in the unit; None when not measured
    start_gap: float | None = None
    # the symbol of the unit of every misfit above ("m"; "px" for footage targets)
    unit: str = "m"
    track_errors: dict[str, float] = field(default_factory=dict)  # track -> RMS px, worst first
    # track -> where its markers put it: "triangle" (its own or one across an edge),
    # "barycentric" there, "drift_m" (how far it moved from where it was bound)
    track_bindings: dict[str, dict[str, Any]] = field(default_factory=dict)
    # footage with the automatic tolerance: the RMSE the markers' own noise explains
    noise_rmse: float | None = None
    # with collision objects: the frames the fitted rollout touched them in and how many
    # vertices touched (None without colliders)
    contacts: dict[str, Any] | None = None
    # the tape gradient L-BFGS or Adam stepped along (the cloth's "stable" or "exact", the soft
    # body's "implicit"); None for LM
    gradient: str | None = None
    # entries of the stable gradient taken as the loss's slope over a tangent step, where
    # the tape's derivative overstated what such a step does (see ``tangents``)
    n_smoothed: int = 0
    # how Levenberg-Marquardt's Jacobian columns were taken: "tangents" (the model's forward
    # tangents), "differences" (central differences of rollouts) or "tangents, then
    # differences" (``objective.tangent_columns``); None where none was
    jacobian: str | None = None
    # kind -> the fitted weights of each map (N,) in [0, 1], their range in ``model_settings``
    maps: dict[str, np.ndarray] = field(default_factory=dict)
    # kind -> what the report says of each fitted map (``free_map.map_summary``)
    map_report: dict[str, dict[str, Any]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: the per-object entry of a fit report (no per-vertex arrays)."""
        out = {
            "params": self.params,
            "initial_params": self.initial_params,
            "initial_loss": self.initial_loss,
            "final_loss": self.final_loss,
            "rmse_m": self.rmse,
            "initial_rmse_m": self.initial_rmse,
            "max_error_m": self.max_error,
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
            "motion_m": self.motion,
            "rmse_relative": self.rmse_relative,
            "tolerance_m": self.tolerance,
            "undetermined": list(self.undetermined),
            "at_bounds": dict(self.at_bounds),
            "search": dict(self.search),
            "rounding_gap_m": self.rounding_gap,
        }
        if self.gradient is not None:
            out["gradient"] = self.gradient
            out["n_smoothed"] = self.n_smoothed
        if self.jacobian is not None:
            out["jacobian"] = self.jacobian
        if self.map_report:
            weights = {k: [float(w) for w in self.maps[k]] for k in self.map_report}
            out["maps"] = {k: {**v, "vertex_weights": weights[k]} for k, v in self.map_report.items()}
        if self.start_gap is not None:
            out["start_gap_m"] = self.start_gap
        if self.contacts is not None:
            out["contacts"] = {
                "frames": list(self.contacts["frames"]),
                "vertices": int(self.contacts["vertices"]),
            }
        unit = unit_of(self.unit)
        if not unit.metre_keys:
            # JSON readers get the unit in the key names; the metre keys stay, empty
            suffix = unit.symbol
            for key in _MISFIT_KEYS:
                out[f"{key}_{suffix}"], out[f"{key}_m"] = out[f"{key}_m"], None
            if "start_gap_m" in out:
                out[f"start_gap_{suffix}"] = out.pop("start_gap_m")
            out["unit"] = suffix
            out[f"track_errors_{suffix}"] = dict(self.track_errors)
            out["track_bindings"] = {k: dict(v) for k, v in self.track_bindings.items()}
            out[f"noise_rmse_{suffix}"] = self.noise_rmse
        return out
