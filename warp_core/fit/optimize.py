"""Optimizers over a small set of named positive parameters, in log space with bounds.

Nothing here knows about physics: a problem maps a dict of parameter values to a residual
vector (Levenberg–Marquardt) or to a loss and its gradient (Adam). The optimizers work on
``z = log(value)`` of the *free* parameters (ties make some parameters followers of
others), clip ``z`` to the log of the bounds, and turn the problem's derivatives with
respect to the named values into log-space derivatives with the chain rule
``d/dlog p = p d/dp`` (a leader's column is the sum of its own and its followers'
columns, each times the shared value).

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

__all__ = [
    "FitDivergedError",
    "GradientProblem",
    "LeastSquaresProblem",
    "OptimizeResult",
    "OptimizeSettings",
    "ParameterSpec",
    "adam",
    "identifiability",
    "levenberg_marquardt",
]

ProgressCallback = Callable[[int, float, dict[str, float]], None]

# Exceptions a problem may raise for a parameter point it cannot evaluate (treated as a
# rejected trial step, like NaN residuals).
_EVALUATION_ERRORS = (FloatingPointError, ValueError)

# Levenberg–Marquardt damping limits and per-iteration retry count.
_LM_MAX_TRIALS = 12
_LM_MAX_DAMPING = 1e16
_LM_MIN_DAMPING = 1e-15
# Adam: moment decay rates, epsilon, and how many step halvings one iteration may try.
_ADAM_BETA1 = 0.9
_ADAM_BETA2 = 0.999
_ADAM_EPS = 1e-12
_ADAM_MAX_HALVINGS = 12
# Divergence recovery: fractions of the way from the start to the bounds' geometric
# midpoint (log space), then uniform factors on all free values.
_RECOVERY_MIDPOINT_FRACTIONS = (0.25, 0.5, 1.0)
_RECOVERY_SCALE_FACTORS = (0.5, 2.0, 0.1, 10.0, 0.01, 0.001)


class FitDivergedError(RuntimeError):
    """The problem cannot be evaluated (non-finite result) at the start values."""


@dataclass
class ParameterSpec:
    """Named positive parameters, their start values, bounds and ties.

    ``ties`` maps a follower name to a leader name: the follower always equals the leader
    and only leaders are free variables (no chains: a leader cannot itself follow).
    ``bounds`` maps a name to ``(lo, hi)``; a name without bounds is unbounded, and
    ``lo <= 0`` means no lower bound in log space. A leader's effective bounds are the
    intersection of its own and its followers' bounds. Start values are clipped into the
    effective bounds; a follower's own entry in ``initial`` is ignored.
    """

    names: list[str]
    initial: dict[str, float]
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    ties: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.names = list(self.names)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"parameter names must be unique, got {self.names}")
        if not self.names:
            raise ValueError("at least one parameter is needed")
        known = set(self.names)
        for follower, leader in self.ties.items():
            if follower not in known or leader not in known:
                raise ValueError(f"tie {follower!r} -> {leader!r} names a parameter not in {self.names}")
            if follower == leader:
                raise ValueError(f"parameter {follower!r} cannot be tied to itself")
            if leader in self.ties:
                raise ValueError(f"tie {follower!r} -> {leader!r}: {leader!r} is itself tied (no chains)")
        for name in set(self.bounds) - known:
            raise ValueError(f"bounds given for unknown parameter {name!r}")
        for name, (lo, hi) in self.bounds.items():
            if not (hi > 0.0) or not (lo < hi) or math.isnan(lo):
                raise ValueError(f"bounds for {name!r} must satisfy lo < hi and hi > 0, got ({lo}, {hi})")
        self.free_names: list[str] = [n for n in self.names if n not in self.ties]
        self._leader_index = {n: i for i, n in enumerate(self.free_names)}
        self._column_leader = np.array(
            [self._leader_index[self.ties.get(n, n)] for n in self.names], dtype=np.int64
        )
        lo = np.full(len(self.free_names), -np.inf)
        hi = np.full(len(self.free_names), np.inf)
        for name, (b_lo, b_hi) in self.bounds.items():
            k = self._column_leader[self.names.index(name)]
            if b_lo > 0.0:
                lo[k] = max(lo[k], math.log(b_lo))
            hi[k] = min(hi[k], math.log(b_hi))
        if np.any(lo > hi):
            bad = [self.free_names[k] for k in np.nonzero(lo > hi)[0]]
            raise ValueError(f"tied parameters have disjoint bounds: {bad}")
        self.log_lower = lo
        self.log_upper = hi
        for name in self.free_names:
            v = self.initial.get(name)
            if v is None:
                raise ValueError(f"no initial value for {name!r}")
            if not (math.isfinite(v) and v > 0.0):
                raise ValueError(f"initial value of {name!r} must be finite and > 0, got {v!r}")

    @property
    def n_free(self) -> int:
        return len(self.free_names)

    def clip(self, z: np.ndarray) -> np.ndarray:
        """Clip log-space free values to the log of the bounds."""
        return np.clip(np.asarray(z, dtype=np.float64), self.log_lower, self.log_upper)

    def to_free(self, values: dict[str, float]) -> np.ndarray:
        """Free (log) vector from a dict of values (leaders only are read), clipped to bounds."""
        z = np.array([math.log(values[n]) for n in self.free_names], dtype=np.float64)
        return self.clip(z)

    def from_free(self, z: np.ndarray) -> dict[str, float]:
        """All named values (followers filled from their leaders) from a free (log) vector."""
        z = np.asarray(z, dtype=np.float64)
        if z.shape != (self.n_free,):
            raise ValueError(f"free vector must have shape ({self.n_free},), got {z.shape}")
        return {n: float(math.exp(z[self._column_leader[i]])) for i, n in enumerate(self.names)}

    def initial_free(self) -> np.ndarray:
        return self.to_free(self.initial)

    def initial_values(self) -> dict[str, float]:
        """The start values clipped to the bounds, exact where no clipping happened (unlike
        ``from_free(initial_free())``, which goes through exp(log(.)))."""
        z = self.initial_free()
        out = {}
        for i, n in enumerate(self.names):
            k = self._column_leader[i]
            v = float(self.initial[self.free_names[k]])
            out[n] = v if math.log(v) == z[k] else float(math.exp(z[k]))
        return out

    def geometric_midpoint(self, z: np.ndarray) -> np.ndarray:
        """Log of the bounds' geometric midpoint; ``z`` where a side is unbounded."""
        bounded = np.isfinite(self.log_lower) & np.isfinite(self.log_upper)
        mid = 0.5 * (np.where(bounded, self.log_lower, 0.0) + np.where(bounded, self.log_upper, 0.0))
        return np.where(bounded, mid, z)

    def chain_matrix(self, values: dict[str, float]) -> np.ndarray:
        """``T`` (n_names, n_free) with ``d/dz = (d/dvalue) @ T``: ``T[i, leader(i)] = value_i``."""
        t = np.zeros((len(self.names), self.n_free))
        for i, n in enumerate(self.names):
            t[i, self._column_leader[i]] = values[n]
        return t

    def jacobian_to_free(self, jacobian: np.ndarray, values: dict[str, float]) -> np.ndarray:
        """Jacobian w.r.t. the named values (M, n_names) -> w.r.t. the free log values (M, n_free)."""
        jacobian = np.asarray(jacobian, dtype=np.float64)
        if jacobian.ndim != 2 or jacobian.shape[1] != len(self.names):
            raise ValueError(
                f"jacobian must have shape (M, {len(self.names)}) with columns {self.names}, "
                f"got {jacobian.shape}"
            )
        return jacobian @ self.chain_matrix(values)

    def gradient_to_free(self, gradient: dict[str, float], values: dict[str, float]) -> np.ndarray:
        """Gradient dict name -> dL/dvalue -> log-space gradient of the free parameters."""
        missing = [n for n in self.names if n not in gradient]
        if missing:
            raise ValueError(f"gradient lacks entries for {missing}")
        g = np.array([float(gradient[n]) for n in self.names])
        return self.chain_matrix(values).T @ g


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


def _cancel_check(cancel: Any) -> Callable[[], bool]:
    if cancel is None:
        return lambda: False
    if hasattr(cancel, "is_set"):
        return lambda: bool(cancel.is_set())
    if callable(cancel):
        return lambda: bool(cancel())
    raise TypeError("cancel must be a callable returning bool or an object with is_set()")


class _Clock:
    def __init__(self, budget_s: float | None) -> None:
        self.start = time.perf_counter()
        self.budget_s = budget_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def over_budget(self) -> bool:
        return self.budget_s is not None and self.elapsed() >= self.budget_s


def _fmt_values(values: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.6g}" for k, v in values.items())


class _Counter:
    def __init__(self) -> None:
        self.residuals = 0
        self.jacobians = 0
        self.gradients = 0


def _result(
    stop: str,
    spec: ParameterSpec,
    values: dict[str, float],
    initial_values: dict[str, float],
    history: list[float],
    loss: float,
    jacobian: np.ndarray | None,
    counter: _Counter,
    clock: _Clock,
    warnings: list[str],
) -> OptimizeResult:
    """The result of a run that stopped for ``stop`` at ``values`` (the best so far)."""
    return OptimizeResult(
        values=dict(values),
        initial_values=initial_values,
        loss_history=history,
        iterations=len(history) - 1,
        n_residual_evals=counter.residuals,
        n_jacobian_evals=counter.jacobians,
        n_gradient_evals=counter.gradients,
        stop_reason=stop,
        cancelled=stop == "cancelled",
        seconds=clock.elapsed(),
        jacobian=jacobian,
        best_loss=loss,
        free_names=list(spec.free_names),
        warnings=warnings,
    )


def _eval_residuals(
    problem: LeastSquaresProblem, values: dict[str, float], counter: _Counter
) -> np.ndarray | None:
    """Residuals as float64, or None if non-finite or the problem refused the point."""
    counter.residuals += 1
    try:
        r = np.asarray(problem.residuals(values), dtype=np.float64).ravel()
    except _EVALUATION_ERRORS:
        return None
    if not np.all(np.isfinite(r)):
        return None
    return r


def _eval_gradient(
    problem: Any, spec: ParameterSpec, values: dict[str, float], counter: _Counter
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
    except _EVALUATION_ERRORS:
        return None
    if not (math.isfinite(loss) and np.all(np.isfinite(g))):
        return None
    return loss, g


def _start_point(
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
    start_text = _fmt_values(spec.from_free(z0))
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
            f"started from {_fmt_values(values)} instead"
        )
        return z, values, out, [warning]
    raise FitDivergedError(
        f"the simulation diverged (non-finite loss) at the start values {start_text} and at "
        f"{len(tried)} other start points tried (towards the bounds' midpoint, "
        "all values x0.5/x2/x0.1/x10/x0.01/x0.001)"
    )


def _projected_gradient(spec: ParameterSpec, z: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient with entries zeroed where a bound blocks descent; and the active mask."""
    at_lower = (z <= spec.log_lower) & (g > 0.0)
    at_upper = (z >= spec.log_upper) & (g < 0.0)
    active = at_lower | at_upper
    return np.where(active, 0.0, g), active


def levenberg_marquardt(
    problem: LeastSquaresProblem,
    spec: ParameterSpec,
    settings: OptimizeSettings | None = None,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> OptimizeResult:
    """Levenberg–Marquardt on ``0.5 * |r|^2`` over the free log values.

    Damping is Marquardt-scaled (``J^T J + mu * diag(J^T J)``, the diagonal floored so a
    parameter with no effect cannot make the system singular) and adapted with Nielsen's
    rule on accepted steps. A step is accepted only if the loss decreases; otherwise the
    damping grows and the step is retried (up to 12 times per iteration). Parameters
    sitting on a bound whose gradient points outwards are held fixed for the iteration.
    """
    settings = settings or OptimizeSettings()
    clock = _Clock(settings.time_budget_s)
    cancelled = _cancel_check(cancel)
    counter = _Counter()

    z, values, r, warnings = _start_point(spec, settings, lambda v: _eval_residuals(problem, v, counter))
    initial_values = dict(values)
    loss = 0.5 * float(r @ r)
    history = [loss]
    if progress is not None:
        progress(0, loss, dict(values))

    def jacobian_at(v: dict[str, float]) -> np.ndarray:
        counter.jacobians += 1
        return spec.jacobian_to_free(problem.jacobian(v), v)

    def result(stop: str) -> OptimizeResult:
        return _result(stop, spec, values, initial_values, history, loss, jac, counter, clock, warnings)

    jac = jacobian_at(values)
    if not np.all(np.isfinite(jac)):
        warnings.append(f"non-finite Jacobian at {_fmt_values(values)}")
        return result("no_progress")
    mu = float(settings.lm_initial_damping)
    nu = 2.0

    for _ in range(settings.max_iterations):
        if cancelled():
            return result("cancelled")
        if clock.over_budget():
            return result("time_budget")
        g_full = jac.T @ r
        g, active = _projected_gradient(spec, z, g_full)
        if float(np.linalg.norm(g)) < settings.grad_tol or loss == 0.0:
            return result("converged_gradient")
        free = ~active
        jtj = jac.T @ jac
        diag = np.diag(jtj).copy()
        diag = np.maximum(diag, max(1e-12 * float(diag.max(initial=0.0)), 1e-300))
        a_free = jtj[np.ix_(free, free)]
        d_free = diag[free]
        g_free = g[free]

        accepted = False
        for _trial in range(_LM_MAX_TRIALS):
            if cancelled():
                return result("cancelled")
            if clock.over_budget():
                return result("time_budget")
            system = a_free + mu * np.diag(d_free)
            try:
                delta_free = np.linalg.solve(system, -g_free)
            except np.linalg.LinAlgError:
                delta_free = np.linalg.lstsq(system, -g_free, rcond=None)[0]
            delta = np.zeros_like(z)
            delta[free] = delta_free
            z_trial = spec.clip(z + delta)
            step = z_trial - z
            if not np.any(step != 0.0):
                return result("no_progress")
            values_trial = spec.from_free(z_trial)
            r_trial = _eval_residuals(problem, values_trial, counter)
            loss_trial = 0.5 * float(r_trial @ r_trial) if r_trial is not None else math.inf
            if loss_trial < loss:
                predicted = -(float(g_full @ step) + 0.5 * float(step @ jtj @ step))
                rho = (loss - loss_trial) / predicted if predicted > 0.0 else 0.0
                mu = max(mu * max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), _LM_MIN_DAMPING)
                nu = 2.0
                accepted = True
                break
            mu *= nu
            nu *= 2.0
            if mu > _LM_MAX_DAMPING:
                break
        if not accepted:
            return result("no_progress")

        rel_change = (loss - loss_trial) / max(loss, 1e-300)
        z, r, values, loss = z_trial, r_trial, values_trial, loss_trial
        history.append(loss)
        new_jac = jacobian_at(values)
        if not np.all(np.isfinite(new_jac)):
            warnings.append(f"non-finite Jacobian at {_fmt_values(values)}")
            return result("no_progress")
        jac = new_jac
        if progress is not None:
            progress(len(history) - 1, loss, dict(values))
        if rel_change < settings.rel_loss_tol or loss <= settings.abs_loss_tol:
            return result("converged_loss")
    return result("max_iterations")


def adam(
    problem: GradientProblem | LeastSquaresProblem,
    spec: ParameterSpec,
    settings: OptimizeSettings | None = None,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> OptimizeResult:
    """Adam on the log-space gradient, for many parameters.

    Uses ``problem.gradient`` if the problem has one, else ``0.5 * |r|^2`` and ``J^T r``.
    A step is accepted only if the loss does not increase and is finite; otherwise it is
    halved and retried (up to 12 times). The step size stays reduced after a halving and
    doubles back towards ``adam_lr`` after each step accepted at the first try. Moments
    are updated only with gradients of accepted points.
    """
    settings = settings or OptimizeSettings()
    clock = _Clock(settings.time_budget_s)
    cancelled = _cancel_check(cancel)
    counter = _Counter()

    z, values, (loss, g), warnings = _start_point(
        spec, settings, lambda v: _eval_gradient(problem, spec, v, counter)
    )
    initial_values = dict(values)
    history = [loss]
    if progress is not None:
        progress(0, loss, dict(values))

    def result(stop: str) -> OptimizeResult:
        return _result(stop, spec, values, initial_values, history, loss, None, counter, clock, warnings)

    m = np.zeros_like(z)
    v = np.zeros_like(z)
    lr_scale = 1.0
    t = 0
    for _ in range(settings.max_iterations):
        if cancelled():
            return result("cancelled")
        if clock.over_budget():
            return result("time_budget")
        g_proj, _active = _projected_gradient(spec, z, g)
        if float(np.linalg.norm(g_proj)) < settings.grad_tol or loss == 0.0:
            return result("converged_gradient")
        t += 1
        m_new = _ADAM_BETA1 * m + (1.0 - _ADAM_BETA1) * g_proj
        v_new = _ADAM_BETA2 * v + (1.0 - _ADAM_BETA2) * g_proj * g_proj
        m_hat = m_new / (1.0 - _ADAM_BETA1**t)
        v_hat = v_new / (1.0 - _ADAM_BETA2**t)
        direction = m_hat / (np.sqrt(v_hat) + _ADAM_EPS)

        accepted = False
        for halving in range(_ADAM_MAX_HALVINGS):
            if cancelled():
                return result("cancelled")
            if clock.over_budget():
                return result("time_budget")
            z_trial = spec.clip(z - settings.adam_lr * lr_scale * direction)
            if not np.any(z_trial != z):
                return result("no_progress")
            values_trial = spec.from_free(z_trial)
            out = _eval_gradient(problem, spec, values_trial, counter)
            if out is not None and out[0] <= loss:
                accepted = True
                lr_scale = min(1.0, lr_scale * 2.0) if halving == 0 else lr_scale
                break
            lr_scale *= 0.5
        if not accepted:
            return result("no_progress")

        loss_trial, g_trial = out
        rel_change = (loss - loss_trial) / max(loss, 1e-300)
        m, v = m_new, v_new
        z, values, loss, g = z_trial, values_trial, loss_trial, g_trial
        history.append(loss)
        if progress is not None:
            progress(len(history) - 1, loss, dict(values))
        if rel_change < settings.rel_loss_tol or loss <= settings.abs_loss_tol:
            return result("converged_loss")
    return result("max_iterations")


def identifiability(
    jacobian_log: np.ndarray,
    names: list[str],
    values: dict[str, float],
    residual_scale: float | np.ndarray = 1.0,
    threshold: float = 1e-4,
    collinear_cos: float = 0.999,
) -> list[dict[str, Any]]:
    """How much the target constrains each free parameter, to first order.

    ``jacobian_log`` is ``dr/dlog p`` (M, len(names)), e.g. ``OptimizeResult.jacobian``
    with ``OptimizeResult.free_names``. ``residual_scale`` (scalar or (M,)) converts a
    residual entry to the target's units, metres for position residuals (``1/sqrt(w)``
    for residuals ``sqrt(w) * (x - t)``). Doubling parameter k changes the residuals by
    about ``J[:, k] * ln 2``; its RMS and max over entries are reported, and a parameter
    whose max change is below ``threshold`` (default 0.1 mm) gets a warning. Pairs of
    columns with ``|cos| > collinear_cos`` are flagged (on the first of the pair).

    Returns one dict per parameter: ``name``, ``value``, ``rms_change``, ``max_change``,
    ``determined`` (bool), ``collinear_with`` (list of names), ``warnings`` (list of str).
    """
    jac = np.asarray(jacobian_log, dtype=np.float64)
    if jac.ndim != 2 or jac.shape[1] != len(names):
        raise ValueError(f"jacobian must have shape (M, {len(names)}), got {jac.shape}")
    scale = np.broadcast_to(np.asarray(residual_scale, dtype=np.float64), (jac.shape[0],))
    change = jac * scale[:, None] * math.log(2.0)
    n_rows = max(jac.shape[0], 1)
    unit = _format_length(threshold)
    entries: list[dict[str, Any]] = []
    for k, name in enumerate(names):
        col = change[:, k]
        rms = float(np.sqrt(np.sum(col * col) / n_rows))
        mx = float(np.max(np.abs(col), initial=0.0))
        determined = mx >= threshold
        warns = []
        if not determined:
            warns.append(
                f"{name}: x2 changes the target frames by < {unit}; the target does not determine it"
            )
        entries.append(
            {
                "name": name,
                "value": float(values[name]) if name in values else float("nan"),
                "rms_change": rms,
                "max_change": mx,
                "determined": determined,
                "collinear_with": [],
                "warnings": warns,
            }
        )
    norms = np.linalg.norm(jac, axis=0)
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            if not (entries[a]["determined"] and entries[b]["determined"]) or norms[a] * norms[b] == 0.0:
                continue
            cos = float(jac[:, a] @ jac[:, b]) / (norms[a] * norms[b])
            if abs(cos) > collinear_cos:
                entries[a]["collinear_with"].append(names[b])
                entries[b]["collinear_with"].append(names[a])
                entries[a]["warnings"].append(
                    f"{names[a]} and {names[b]} have the same effect on the target; "
                    "only their combination is determined"
                )
    return entries


def _format_length(metres: float) -> str:
    if metres < 1e-2:
        return f"{metres * 1e3:g} mm"
    if metres < 1.0:
        return f"{metres * 1e2:g} cm"
    return f"{metres:g} m"
