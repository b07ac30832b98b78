"""What the optimizers share: settings and result, the problem protocols, the start point
with divergence recovery, and the bookkeeping of one run (budget, cancel, counts).

Nothing here knows about physics: a problem maps a dict of parameter values to a residual
vector (Levenberg–Marquardt, :mod:`.lm`) or to a loss and its gradient (Adam, :mod:`.adam`);
both work in the log space of :class:`~.spec.ParameterSpec`.

A trial point whose residuals or loss are NaN/inf, or whose evaluation raises
``FloatingPointError`` or ``ValueError``, is a rejected step: the optimizers back off and
never return non-finite parameters.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .spec import ParameterSpec

__all__ = [
    "FitDivergedError",
    "GradientProblem",
    "LeastSquaresProblem",
    "OptimizeResult",
    "OptimizeSettings",
    "ProgressCallback",
]

ProgressCallback = Callable[[int, float, dict[str, float]], None]

# Exceptions a problem may raise for a parameter point it cannot evaluate (treated as a
# rejected trial step, like NaN residuals).
EVALUATION_ERRORS = (FloatingPointError, ValueError)

# Divergence recovery: fractions of the way from the start to the bounds' geometric
# midpoint (log space), then uniform factors on all free values.
_RECOVERY_MIDPOINT_FRACTIONS = (0.25, 0.5, 1.0)
_RECOVERY_SCALE_FACTORS = (0.5, 2.0, 0.1, 10.0, 0.01, 0.001)


class FitDivergedError(RuntimeError):
    """The problem cannot be evaluated (non-finite result) at the start values."""


@runtime_checkable
class LeastSquaresProblem(Protocol):
    """Loss ``0.5 * |r(values)|^2`` with a flattened, weighted residual vector ``r``."""

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        """Residual vector (M,) at ``values``."""
        ...

    def jacobian(self, values: dict[str, float]) -> np.ndarray:
        """``dr/dvalue`` (M, len(spec.names)), columns in ``spec.names`` order (not log space)."""
        ...


@runtime_checkable
class GradientProblem(Protocol):
    """A loss with its gradient; what Adam needs (a LeastSquaresProblem also works)."""

    def gradient(self, values: dict[str, float]) -> tuple[float, dict[str, float]]:
        """``(loss, {name: dL/dvalue})`` at ``values``."""
        ...


@dataclass
class OptimizeSettings:
    max_iterations: int = 30
    rel_loss_tol: float = 1e-8  # stop when an accepted step changes the loss by less (relative)
    abs_loss_tol: float = 0.0  # stop once the loss is at or below this (already good enough)
    grad_tol: float = 1e-12  # stop when the log-space (projected) gradient norm is below
    time_budget_s: float | None = None
    lm_initial_damping: float = 1e-3
    adam_lr: float = 0.05  # log-space step: 0.05 changes a value by about 5% per iteration
    recover_from_divergence: bool = True


@dataclass
class OptimizeResult:
    values: dict[str, float]  # best values found
    initial_values: dict[str, float]  # where the optimizer actually started
    loss_history: list[float]  # accepted losses, first = initial
    iterations: int  # accepted iterations
    n_residual_evals: int
    n_jacobian_evals: int
    n_gradient_evals: int
    # converged_loss, converged_gradient, max_iterations, time_budget, cancelled, no_progress
    stop_reason: str
    cancelled: bool
    seconds: float
    jacobian: np.ndarray | None  # last Jacobian in log space of free params (LM), (M, n_free)
    best_loss: float
    free_names: list[str] = field(default_factory=list)  # columns of ``jacobian``
    warnings: list[str] = field(default_factory=list)

    @property
    def initial_loss(self) -> float:
        return self.loss_history[0]


def cancel_check(cancel: Any) -> Callable[[], bool]:
    if cancel is None:
        return lambda: False
    if hasattr(cancel, "is_set"):
        return lambda: bool(cancel.is_set())
    if callable(cancel):
        return lambda: bool(cancel())
    raise TypeError("cancel must be a callable returning bool or an object with is_set()")


class Clock:
    def __init__(self, budget_s: float | None) -> None:
        self.start = time.perf_counter()
        self.budget_s = budget_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def over_budget(self) -> bool:
        return self.budget_s is not None and self.elapsed() >= self.budget_s


def format_values(values: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.6g}" for k, v in values.items())


class Counter:
    def __init__(self) -> None:
        self.residuals = 0
        self.jacobians = 0
        self.gradients = 0


class Run:
    """The bookkeeping of one optimizer run: clock, cancel, evaluation counts, accepted
    losses and warnings; it reports progress and builds the result wherever the run stops."""

    def __init__(
        self,
        spec: ParameterSpec,
        settings: OptimizeSettings,
        progress: ProgressCallback | None,
        cancel: Any,
    ) -> None:
        self.spec = spec
        self.clock = Clock(settings.time_budget_s)
        self.cancelled = cancel_check(cancel)
        self.counter = Counter()
        self.progress = progress
        self.initial_values: dict[str, float] = {}
        self.history: list[float] = []
        self.warnings: list[str] = []

    def interrupted(self) -> str | None:
        """The stop reason if the caller cancelled or the time budget is spent, else None."""
        if self.cancelled():
            return "cancelled"
        if self.clock.over_budget():
            return "time_budget"
        return None

    def report(self, values: dict[str, float]) -> None:
        """Tell the caller about the last accepted point (iteration 0 is the start)."""
        if self.progress is not None:
            self.progress(len(self.history) - 1, self.history[-1], dict(values))

    def result(
        self, stop: str, values: dict[str, float], loss: float, jacobian: np.ndarray | None = None
    ) -> OptimizeResult:
        """The result of a run that stopped for ``stop`` at ``values`` (the best so far)."""
        counter = self.counter
        return OptimizeResult(
            values=dict(values),
            initial_values=self.initial_values,
            loss_history=self.history,
            iterations=len(self.history) - 1,
            n_residual_evals=counter.residuals,
            n_jacobian_evals=counter.jacobians,
            n_gradient_evals=counter.gradients,
            stop_reason=stop,
            cancelled=stop == "cancelled",
            seconds=self.clock.elapsed(),
            jacobian=jacobian,
            best_loss=loss,
            free_names=list(self.spec.free_names),
            warnings=self.warnings,
        )


def eval_residuals(
    problem: LeastSquaresProblem, values: dict[str, float], counter: Counter
) -> np.ndarray | None:
    """Residuals as float64, or None if non-finite or the problem refused the point."""
    counter.residuals += 1
    try:
        r = np.asarray(problem.residuals(values), dtype=np.float64).ravel()
    except EVALUATION_ERRORS:
        return None
    if not np.all(np.isfinite(r)):
        return None
    return r


def eval_gradient(
    problem: Any, spec: ParameterSpec, values: dict[str, float], counter: Counter
) -> tuple[float, np.ndarray] | None:
    """(loss, log-space gradient), or None if non-finite or refused."""
    try:
        if hasattr(problem, "gradient"):
            counter.gradients += 1
            loss, grad = problem.gradient(values)
            loss = float(loss)
            g = spec.gradient_to_free(grad, values)
        else:
            counter.residuals += 1
            r = np.asarray(problem.residuals(values), dtype=np.float64).ravel()
            if not np.all(np.isfinite(r)):
                return None
            counter.jacobians += 1
            j = spec.jacobian_to_free(problem.jacobian(values), values)
            loss = 0.5 * float(r @ r)
            g = j.T @ r
    except EVALUATION_ERRORS:
        return None
    if not (math.isfinite(loss) and np.all(np.isfinite(g))):
        return None
    return loss, g


def start_point(
    spec: ParameterSpec,
    settings: OptimizeSettings,
    evaluate: Callable[[dict[str, float]], Any],
) -> tuple[np.ndarray, dict[str, float], Any, list[str]]:
    """Evaluate the start values; on failure optionally try a few other start points.

    Recovery (``settings.recover_from_divergence``): move the free log values a quarter,
    half, then all the way to the bounds' geometric midpoint (unbounded sides stay put),
    then multiply all free values of the original start by 0.5, 2, 0.1, 10, 0.01 and
    0.001 (clipped to bounds). The finite candidate with the lowest loss is used (a start
    that merely does not blow up can still be far off) and a warning names both points.
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
    candidates = []
    mid = spec.geometric_midpoint(z0)
    for s in _RECOVERY_MIDPOINT_FRACTIONS:
        candidates.append(spec.clip(z0 + s * (mid - z0)))
    for f in _RECOVERY_SCALE_FACTORS:
        candidates.append(spec.clip(z0 + math.log(f)))
    tried = set()
    best = None
    for z in candidates:
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
        f"{len(tried)} other start points tried (towards the bounds' midpoint, "
        "all values x0.5/x2/x0.1/x10/x0.01/x0.001)"
    )


def projected_gradient(spec: ParameterSpec, z: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient with entries zeroed where a bound blocks descent; and the active mask."""
    at_lower = (z <= spec.log_lower) & (g > 0.0)
    at_upper = (z >= spec.log_upper) & (g < 0.0)
    active = at_lower | at_upper
    return np.where(active, 0.0, g), active
