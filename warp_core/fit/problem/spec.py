"""The optimizers' view of the parameters: named positive values, optimized in log space.

The optimizers work on ``z = log(value)`` of the *free* parameters (ties make some
parameters followers of others), clip ``z`` to the log of the bounds, and turn a
problem's derivatives with respect to the named values into log-space derivatives with
the chain rule ``d/dlog p = p d/dp`` (a leader's column is the sum of its own and its
followers' columns, each times the shared value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...models import get_model
from ...models.base import Parameter

if TYPE_CHECKING:
    from .problem import FitProblem

__all__ = ["ParameterSpec", "fit_parameters", "parameter_spec"]


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
        # the same bounds as values, so exp(log(bound)) rounding never lands outside them
        self.value_lower = np.zeros(len(self.free_names))
        self.value_upper = np.full(len(self.free_names), np.inf)
        for name, (b_lo, b_hi) in self.bounds.items():
            k = self._column_leader[self.names.index(name)]
            if b_lo > 0.0:
                lo[k] = max(lo[k], math.log(b_lo))
                self.value_lower[k] = max(self.value_lower[k], b_lo)
            hi[k] = min(hi[k], math.log(b_hi))
            self.value_upper[k] = min(self.value_upper[k], b_hi)
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
        free = [self.free_value(k, z[k]) for k in range(self.n_free)]
        return {n: free[self._column_leader[i]] for i, n in enumerate(self.names)}

    def free_value(self, k: int, z_k: float) -> float:
        """The value of free parameter ``k`` at log value ``z_k``, kept within its bounds."""
        return float(min(max(math.exp(z_k), self.value_lower[k]), self.value_upper[k]))

    def group(self, k: int) -> list[str]:
        """Free parameter ``k`` and its followers: the names that move together."""
        return [n for i, n in enumerate(self.names) if self._column_leader[i] == k]

    def initial_free(self) -> np.ndarray:
        return self.to_free(self.initial)

    def initial_values(self) -> dict[str, float]:
        """The start values, moved onto the bounds where they lie outside them (exactly,
        unlike ``from_free(initial_free())``, which goes through exp(log(.)))."""
        out = {}
        for i, n in enumerate(self.names):
            k = self._column_leader[i]
            v = float(self.initial[self.free_names[k]])
            out[n] = float(min(max(v, self.value_lower[k]), self.value_upper[k]))
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


def fit_parameters(problem: FitProblem) -> dict[str, Parameter]:
    """Every parameter a fit of ``problem`` may move, by name: the model's, and one per map
    region (``maps.MapLayout.region_parameters``)."""
    params = {p.name: p for p in get_model(problem.model).parameters}
    layout = problem.map_layout()
    if layout is not None:
        params.update(layout.region_parameters())
    return params


def parameter_spec(problem: FitProblem) -> ParameterSpec:
    """The fitted and tied parameters with their start values and bounds: the problem's
    own bounds, else the model's hard limits, the lower one raised to the parameter's floor
    where it is 0 (the fit works on log values). A map region starts at its map's rest value
    (the map uniform)."""
    params = fit_parameters(problem)
    layout = problem.map_layout()
    regions = list(layout.region_names) if layout is not None else []
    names = list(dict.fromkeys(list(problem.free_parameters) + list(problem.ties) + regions))
    start = problem.model_settings.values()
    if layout is not None:
        start.update(layout.start_values(start))
    initial = {n: float(start[n]) for n in names}
    # followers start at their leader's value
    for follower, leader in problem.ties.items():
        initial[follower] = initial[leader]
    bounds = {}
    for n in names:
        lo, hi = problem.bounds.get(n, params[n].bounds)
        if not lo > 0.0:
            lo = min(params[n].fit_bounds()[0], 0.5 * hi)
        bounds[n] = (float(lo), float(hi))
    return ParameterSpec(names=names, initial=initial, bounds=bounds, ties=dict(problem.ties))
