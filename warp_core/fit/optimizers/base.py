"""What the optimizers share: settings and result, the objective protocols, the start point
with divergence recovery, and the bookkeeping of one run (budget, cancel, counts).

Nothing here knows about physics: an objective maps a dict of parameter values to a residual
vector (Levenberg–Marquardt, :mod:`.lm`) or to a loss and its gradient (Adam, :mod:`.adam`);
both work in the log space of :class:`~.spec.ParameterSpec`.

A trial point whose residuals or loss are NaN/inf, or whose evaluation raises
``FloatingPointError`` or ``ValueError``, is a rejected step: the optimizers back off and
never return non-finite parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..problem.spec import ParameterSpec

__all__ = [
    "FitDivergedError",
    "GradientObjective",
    "LogJacobianObjective",
    "ResidualObjective",
    "SideBySideObjective",
    "ValueJacobianObjective",
    "OptimizeResult",
    "OptimizeSettings",
    "ProgressCallback",
]

ProgressCallback = Callable[[int, float, dict[str, float]], None]

# Exceptions an objective may raise for a parameter point it cannot evaluate (treated as a
# rejected trial step, like NaN residuals).
EVALUATION_ERRORS = (FloatingPointError, ValueError)

# Divergence recovery: fractions of the way from the start to the bounds' geometric
# midpoint (log space), then uniform factors on all free values.
_RECOVERY_MIDPOINT_FRACTIONS = (0.25, 0.5, 1.0)
_RECOVERY_SCALE_FACTORS = (0.5, 2.0, 0.1, 10.0, 0.01, 0.001)


class FitDivergedError(RuntimeError):
    """The objective cannot be evaluated (non-finite result) at the start values."""


# What an objective offers is declared by the protocols it satisfies: the optimizers ask
# ``isinstance(objective, Protocol)`` for each capability below, never for a method by name.


@runtime_checkable
class ResidualObjective(Protocol):
    """Loss ``0.5 * |r(values)|^2`` with a flattened, weighted residual vector ``r``: what
    Levenberg-Marquardt and the global phase need (with a Jacobian of either kind below)."""

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        """Residual vector (M,) at ``values``."""
        ...


@runtime_checkable
class ValueJacobianObjective(Protocol):
    """Residuals whose Jacobian is taken per value (the optimizers apply the chain rule)."""

    def jacobian(self, values: dict[str, float]) -> np.ndarray:
        """``dr/dvalue`` (M, len(spec.names)), columns in ``spec.names`` order (not log space)."""
        ...


@runtime_checkable
class LogJacobianObjective(Protocol):
    """Residuals whose Jacobian comes per free log value, followers moved with their leader
    (a fit's objective: forward tangents in log space, one-sided next to a bound)."""

    def log_jacobian(self, values: dict[str, float]) -> np.ndarray:
        """``dr/dlog p`` (M, n_free), one column per free parameter of the objective's spec."""
        ...


@runtime_checkable
class GradientObjective(Protocol):
    """A loss with its gradient; what Adam and L-BFGS step along (without it they take
    ``J^T r`` of a ResidualObjective)."""

    def gradient(self, values: dict[str, float]) -> tuple[float, dict[str, float]]:
        """``(loss, {name: dL/dvalue})`` at ``values``."""
        ...


@runtime_checkable
class SideBySideObjective(Protocol):
    """Residuals of several points simulated at once (the global phase's start points)."""

    def residuals_of(self, points: list[dict[str, float]]) -> list[np.ndarray | None]:
        """Residuals at each point, None where it is refused or diverges."""
        ...

    def side_by_side(self) -> int:
        """How many points ``residuals_of`` simulates at once (1: one after another)."""
        ...


@dataclass
class OptimizeSettings:
    max_iterations: int = 30  # accepted steps, over all runs of one fit
    rel_loss_tol: float = 1e-8  # stop when an accepted step changes the loss by less (relative)
    abs_loss_tol: float = 0.0  # stop once the loss is at or below this (already good enough)
    grad_tol: float = 1e-12  # stop when the log-space (projected) gradient norm is below
    time_budget_s: float | None = None
    adam_lr: float = 0.05  # log-space step: 0.05 changes a value by about 5% per iteration
    recover_from_divergence: bool = True
    # Trust region on the log step (largest change of any free log value): start, cap, and
    # the radius below which it has collapsed (no step the model trusts improves the loss).
    trust_radius: float = math.log(4.0)
    max_trust_radius: float = math.log(64.0)
    min_trust_radius: float = 1e-4
    # A free parameter whose doubling changes no residual entry (times ``residual_scale``)
    # by more than ``hold_below`` is held where it is for that step (0: only a column of
    # exact zeros is held).
    hold_below: float = 0.0
    residual_scale: float | np.ndarray = 1.0
    # Leave a run whose loss has not halved over its last 3 accepted steps (after at least 6),
    # so a multi-start search can try other starts ("slow"; resumable from ``state``).
    slow_exit: bool = False


@dataclass
class RunState:
    """Where a trust-region run stopped, to resume it: free log values, residuals, log-space
    Jacobian and trust radius."""

    z: np.ndarray
    r: np.ndarray
    jacobian: np.ndarray | None
    radius: float
    values: dict[str, float] | None = None  # exactly the start values, where known

    def values_in(self, spec: ParameterSpec) -> dict[str, float]:
        """The values here: exactly the start values where known, else from the log values."""
        return dict(self.values) if self.values is not None else spec.from_free(np.asarray(self.z))


@dataclass
class OptimizeResult:
    values: dict[str, float]  # best values found
    initial_values: dict[str, float]  # where the optimizer actually started
    loss_history: list[float]  # accepted losses, first = initial
    iterations: int  # accepted iterations
    n_residual_evals: int
    n_jacobian_evals: int
    n_gradient_evals: int
    # converged_loss, converged_gradient, no_progress (trust region collapsed): it stopped at
    # an optimum (``stationary``); max_iterations, time_budget, cancelled, slow: it did not
    stop_reason: str
    cancelled: bool
    seconds: float
    jacobian: np.ndarray | None  # last Jacobian in log space of free params (LM), (M, n_free)
    best_loss: float
    free_names: list[str] = field(default_factory=list)  # columns of ``jacobian``
    warnings: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # free parameters held at the last step
    state: RunState | None = None
    finished_by: str | None = None  # "trust_region" where it finished an L-BFGS run

    @property
    def initial_loss(self) -> float:
        return self.loss_history[0]

    @property
    def stationary(self) -> bool:
        return self.stop_reason in STATIONARY_STOPS


# Stop reasons of a run that ended at an optimum of its parameters (to its resolution).
STATIONARY_STOPS = ("converged_loss", "converged_gradient", "no_progress")


def format_values(values: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.6g}" for k, v in values.items())


class Counter:
    def __init__(self) -> None:
        self.residuals = 0
        self.jacobians = 0
        self.gradients = 0


def eval_residuals(
    objective: ResidualObjective, values: dict[str, float], counter: Counter
) -> np.ndarray | None:
    """Residuals as float64, or None if non-finite or the objective refused the point."""
    counter.residuals += 1
    try:
        return _finite(objective.residuals(values))
    except EVALUATION_ERRORS:
        return None


def eval_residuals_many(
    objective: ResidualObjective, points: list[dict[str, float]], counter: Counter
) -> list[np.ndarray | None]:
    """``eval_residuals`` at each point, simulated side by side where the objective can
    (``residuals_of``: None for a point it refused)."""
    if len(points) < 2 or not isinstance(objective, SideBySideObjective):
        return [eval_residuals(objective, v, counter) for v in points]
    counter.residuals += len(points)
    return [None if r is None else _finite(r) for r in objective.residuals_of(points)]


def _finite(r: Any) -> np.ndarray | None:
    r = np.asarray(r, dtype=np.float64).ravel()
    return r if np.all(np.isfinite(r)) else None


def eval_gradient(
    objective: Any, spec: ParameterSpec, values: dict[str, float], counter: Counter
) -> tuple[float, np.ndarray] | None:
    """(loss, log-space gradient), or None if non-finite or refused."""
    try:
        if isinstance(objective, GradientObjective):
            counter.gradients += 1
            loss, grad = objective.gradient(values)
            loss = float(loss)
            g = spec.gradient_to_free(grad, values)
        else:
            counter.residuals += 1
            r = np.asarray(objective.residuals(values), dtype=np.float64).ravel()
            if not np.all(np.isfinite(r)):
                return None
            j = eval_jacobian(objective, spec, values, counter)
            if j is None:
                return None
            loss = 0.5 * float(r @ r)
            g = j.T @ r
    except EVALUATION_ERRORS:
        return None
    if not (math.isfinite(loss) and np.all(np.isfinite(g))):
        return None
    return loss, g


def eval_jacobian(
    objective: Any, spec: ParameterSpec, values: dict[str, float], counter: Counter
) -> np.ndarray | None:
    """``dr/dlog p`` of the free parameters (M, n_free), or None if it cannot be computed.

    An objective with a ``log_jacobian(values)`` method gives it directly (one column per free
    parameter, followers moved with their leader); otherwise ``jacobian`` goes through the
    chain rule.
    """
    counter.jacobians += 1
    try:
        if isinstance(objective, LogJacobianObjective):
            jac = np.asarray(objective.log_jacobian(values), dtype=np.float64)
        else:
            jac = spec.jacobian_to_free(objective.jacobian(values), values)
    except EVALUATION_ERRORS:
        return None
    if jac.ndim != 2 or jac.shape[1] != spec.n_free or not np.all(np.isfinite(jac)):
        return None
    return jac


def recovery_points(spec: ParameterSpec) -> list[np.ndarray]:
    """Other start points for a start that diverges: the free log values a quarter, half,
    then all the way to the bounds' geometric midpoint, then all free values of the start
    times 0.5, 2, 0.1, 10, 0.01 and 0.001 (clipped to the bounds)."""
    z0 = spec.initial_free()
    mid = spec.geometric_midpoint(z0)
    points = [spec.clip(z0 + s * (mid - z0)) for s in _RECOVERY_MIDPOINT_FRACTIONS]
    points += [spec.clip(z0 + math.log(f)) for f in _RECOVERY_SCALE_FACTORS]
    return points


def start_point(
    spec: ParameterSpec,
    settings: OptimizeSettings,
    evaluate: Callable[[dict[str, float]], Any],
    extra: list[np.ndarray] | None = None,
) -> tuple[np.ndarray, dict[str, float], Any, list[str]]:
    """Evaluate the start values; on failure optionally try a few other start points.

    Recovery (``settings.recover_from_divergence``) tries :func:`recovery_points`, then
    ``extra`` (free log vectors, e.g. a global search's design). The finite candidate with
    the lowest loss is used (a start that merely does not blow up can still be far off)
    and a warning names both points.
    """
    z0 = spec.initial_free()
    values0 = spec.initial_values()
    first = evaluate(values0)
    if first is not None:
        return z0, values0, first, []
    start_text = format_values(spec.from_free(z0))
    if not settings.recover_from_divergence:
        raise FitDivergedError(
            f"the simulation diverged (non-finite loss) at the start values {start_text}; "
            "choose other start values or enable recovery"
        )
    tried = {tuple(np.round(z0, 12))}
    best = None
    for z in recovery_points(spec) + list(extra or []):
        key = tuple(np.round(z, 12))
        if key in tried:
            continue
        tried.add(key)
        values = spec.from_free(z)
        out = evaluate(values)
        if out is not None:
            loss = 0.5 * float(out @ out) if isinstance(out, np.ndarray) else float(out[0])
            if best is None or loss < best[0]:
                best = (loss, z, values, out)
    if best is not None:
        _, z, values, out = best
        warning = (
            f"the simulation diverged at the start values {start_text}; "
            f"started from {format_values(values)} instead"
        )
        return z, values, out, [warning]
    raise FitDivergedError(
        f"the simulation diverged (non-finite loss) at the start values {start_text} and at "
        f"{len(tried) - 1} other start points tried (towards the bounds' midpoint, "
        "all values x0.5/x2/x0.1/x10/x0.01/x0.001" + (", spread over the plausible ranges)" if extra else ")")
    )


def projected_gradient(spec: ParameterSpec, z: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient with entries zeroed where a bound blocks descent; and the active mask."""
    at_lower = (z <= spec.log_lower) & (g > 0.0)
    at_upper = (z >= spec.log_upper) & (g < 0.0)
    active = at_lower | at_upper
    return np.where(active, 0.0, g), active
