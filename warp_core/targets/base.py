"""What every kind of target gives a fit: the ``TargetKind`` base, its required methods and its
optional capabilities with their neutral defaults.

A target kind compares a rollout with what the fit is asked to reproduce. ``x`` is always the
rollout's positions at the target frames, ``(frames, N, 3)`` float64, in the order of the
problem's ``target_frames``. The residuals are the kind's own (weighted, Huber-scaled, ...) such
that the loss is ``0.5 |r|^2``; the reports (errors, RMSE, motion, change) are in the kind's
:class:`~.units.Unit`.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import warp as wp

from .units import METRES, Unit

__all__ = ["TargetKind", "largest_coordinate"]


class TargetKind(ABC):
    """What a fit compares its rollouts against, one subclass per kind (``vertex``, ``surface``,
    ``tracks``). Made by :func:`warp_core.targets.target_for` from a problem (one per
    ``FitObjective``); read by the objective (residuals, tangents, the tape loss and the
    reports), the tangents (``side_by_side``, ``at_base_point``), the engine and the verdict
    (the unit and the capabilities below), and the footage fit (``bindings_held``).

    Required: the methods marked abstract. Optional capabilities are declared here with
    neutral defaults, so a kind that lacks one needs no code and nobody asks with ``hasattr``.
    """

    name: str  # the loss's name, as ``FitProblem.loss_kind`` gives it
    label: str  # how messages name such targets ("footage targets")
    unit: Unit = METRES
    # whether the residuals keep no per-point state (no correspondences, no profiled bindings),
    # so several points' residuals may be computed side by side
    side_by_side: bool = False
    # the tape loss: whether the kind has one, and why not (the objective's refusal) if it has not
    has_tape_gradient: bool = True
    tape_refusal: str | None = None
    # why the kind cannot take part in a shared fit, or None when it can
    shared_refusal: str | None = None
    # measurement noise (tracked markers): what a fit leaves at the optimum is that noise, and a
    # parameter counts as determined when its 95 % confidence interval lies within +- this
    # fraction; None for exact targets
    noise_spread: float | None = None
    # per-track reports (errors, bindings, markers far off) for the result
    reports_tracks: bool = False
    # whether :meth:`residual_adjoint` carries a residual-space vector back to the positions
    has_residual_adjoint: bool = False

    # ------------------------------------------------------------------ required
    @abstractmethod
    def residuals(self, x: np.ndarray) -> np.ndarray:
        """The residual vector at positions ``x``: the loss is ``0.5 |r|^2``."""

    @abstractmethod
    def residual_tangents(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
        """``(dr/dx) dx`` at ``x`` for a position tangent ``dx`` (same shape as ``x``), with the
        state of the last :meth:`at_base_point` (or :meth:`residuals`) at ``x``."""

    def residual_adjoint(self, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
        """``(dr/dx)^T y`` at ``x`` for a residual-space vector ``y``, shaped as ``x``: what a
        free map's Gauss–Newton probes carry back through the tape. None where the kind has
        none (:attr:`has_residual_adjoint`)."""
        return None

    @abstractmethod
    def errors(self, x: np.ndarray) -> dict[int, np.ndarray]:
        """Scene frame -> the error of each compared point there, in the unit."""

    @abstractmethod
    def rmse(self, x: np.ndarray) -> float:
        """The RMS misfit the loss stands for: ``loss = 0.5 * matched_points() * rmse^2``
        (while no robust scaling applies)."""

    @abstractmethod
    def motion(self, rest: np.ndarray) -> float:
        """The RMS misfit of the cloth left at ``rest`` (N, 3): what there is to fit."""

    @abstractmethod
    def matched_points(self) -> int:
        """What the loss averages over (see :meth:`rmse`)."""

    @abstractmethod
    def coordinate_scale(self) -> float:
        """What float rounding of the compared quantities is relative to, in the unit."""

    @abstractmethod
    def residual_scale(self) -> np.ndarray | float:
        """Per residual entry (or one scalar), the factor that turns it back into the unit."""

    # ------------------------------------------------------------------ with defaults
    def rmse_of_loss(self, loss: float) -> float:
        """The RMS misfit, in the unit, that a loss stands for (see :meth:`rmse`): how a running
        fit, which knows only its losses, reports how close it is."""
        if not (loss >= 0.0 and math.isfinite(loss)):
            return math.nan
        return math.sqrt(2.0 * loss / max(self.matched_points(), 1))

    def at_base_point(self, x: np.ndarray) -> None:  # noqa: B027  (most kinds need nothing)
        """Make ready for :meth:`residual_tangents` at the base point ``x`` of a Jacobian."""

    def launch_loss(self, k: int, row: wp.array, loss: wp.array, sim: Any) -> None:
        """``loss[0] += 0.5 |r_k|^2`` for target frame ``k`` on the tape, from ``row``, the
        simulator ``sim``'s positions there (only where ``has_tape_gradient``)."""
        raise RuntimeError(self.tape_refusal or f"{self.label} have no tape loss")

    def change(self, x0: np.ndarray, x1: np.ndarray) -> float:
        """RMS difference of two rollouts in the unit (here: distance in metres)."""
        return float(np.sqrt(np.mean(np.sum((x1 - x0) ** 2, axis=-1))))

    # ------------------------------------------------------------------ footage capabilities
    @property
    def refines_bindings(self) -> bool:
        """Whether the kind re-solves where its points sit on the surface for every rollout;
        such a fit searches with them held (:meth:`bindings_held`), then refines."""
        return False

    def bindings_held(self) -> contextlib.AbstractContextManager[None]:
        """Within it, every point stays where it was bound (see :attr:`refines_bindings`)."""
        return contextlib.nullcontext()

    @property
    def profiled_count(self) -> int:
        """Points whose binding is re-solved: each takes two degrees of freedom off the residuals."""
        return 0

    def noise_rmse(self, fitted: int) -> float | None:
        """The RMSE the targets' own noise explains with ``fitted`` parameters fitted, or None."""
        return None

    def track_errors(self, x: np.ndarray) -> dict[str, float]:
        """Track name -> RMS error, worst first (empty without tracks)."""
        return {}

    def track_bindings(self, x: np.ndarray) -> dict[str, dict[str, Any]]:
        """Track name -> where its markers put it on the surface (empty without tracks)."""
        return {}

    def track_warnings(self, x: np.ndarray) -> list[str]:
        """Warnings naming single tracks: far off, and why (empty without tracks)."""
        return []

    def systematic_modes(self, x: np.ndarray) -> np.ndarray | None:
        """(modes, M) residual changes of errors that do not average out (a camera off by its
        solve's error), one standard deviation each; None without such errors."""
        return None


def largest_coordinate(arrays: list[np.ndarray]) -> float:
    """The largest coordinate magnitude over ``arrays`` (each may be empty)."""
    return float(max(np.abs(a).max(initial=0.0) for a in arrays))
