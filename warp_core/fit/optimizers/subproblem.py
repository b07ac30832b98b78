"""The trust-region step: the Gauss–Newton model minimized inside a box.

The box is the trust region (each free log value moves by at most the radius) intersected
with the parameters' bounds, so a step never leaves the bounds and a parameter pressed
against a bound simply stays there while the others move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..problem.spec import ParameterSpec

__all__ = ["box_gauss_newton_step", "gauss_newton_normal", "minimize_box_quadratic", "step_box"]

# A tiny ridge keeps the model strictly convex when columns are (nearly) dependent; it is
# relative to the largest curvature so it does not depend on the residuals' units.
_RIDGE = 1e-12


def box_gauss_newton_step(jac: np.ndarray, r: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The step ``s`` (lower <= s <= upper, with lower <= 0 <= upper) that minimizes the
    Gauss–Newton model ``0.5 * |r + J s|^2``."""
    return minimize_box_quadratic(gauss_newton_normal(jac), jac.T @ r, lower, upper)


def gauss_newton_normal(jac: np.ndarray, ridge: float = _RIDGE) -> np.ndarray:
    """``J^T J`` plus ``ridge`` times its largest diagonal entry on the diagonal."""
    a = jac.T @ jac
    scale = float(np.max(np.diag(a), initial=0.0))
    return a + (ridge * scale + 1e-300) * np.eye(a.shape[0])


def step_box(
    spec: ParameterSpec, z: np.ndarray, radius: float, fixed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of a step from ``z``: no free log value moves by more than ``radius`` or
    past its bounds, the ``fixed`` ones not at all (lower <= 0 <= upper)."""
    lower = np.minimum(np.maximum(-radius, spec.log_lower - z), 0.0)
    upper = np.maximum(np.minimum(radius, spec.log_upper - z), 0.0)
    lower[fixed] = upper[fixed] = 0.0
    return lower, upper


def minimize_box_quadratic(a: np.ndarray, g: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``argmin 0.5 s^T A s + g^T s`` over ``lower <= s <= upper`` for a symmetric positive
    definite ``A`` of a few rows, by a primal active-set method from the feasible ``s = 0``
    clipped into the box: solve on the free variables; if that leaves the box, walk to the
    first bound and fix that variable there; else release the bound variable whose
    multiplier has the wrong sign, until none has."""
    n = len(g)
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    s = np.clip(np.zeros(n), lower, upper)
    # 0 free, -1 at its lower bound, +1 at its upper bound; no room means fixed for good
    side = np.zeros(n, dtype=np.int64)
    pinned = lower >= upper
    side[pinned] = -1
    s[pinned] = lower[pinned]
    for _ in range(8 * n + 16):
        free = side == 0
        target = s.copy()
        if free.any():
            rhs = -(g[free] + a[np.ix_(free, ~free)] @ s[~free])
            try:
                target[free] = np.linalg.solve(a[np.ix_(free, free)], rhs)
            except np.linalg.LinAlgError:
                target[free] = np.linalg.lstsq(a[np.ix_(free, free)], rhs, rcond=None)[0]
        d = target - s
        alpha, blocking, blocking_side = 1.0, -1, 0
        for i in np.flatnonzero(free):
            if d[i] < 0.0 and target[i] < lower[i]:
                t, b = (lower[i] - s[i]) / d[i], -1
            elif d[i] > 0.0 and target[i] > upper[i]:
                t, b = (upper[i] - s[i]) / d[i], 1
            else:
                continue
            if t < alpha:
                alpha, blocking, blocking_side = t, i, b
        if blocking >= 0:
            s = np.clip(s + max(alpha, 0.0) * d, lower, upper)
            side[blocking] = blocking_side
            s[blocking] = lower[blocking] if blocking_side < 0 else upper[blocking]
            continue
        s = np.clip(target, lower, upper)
        grad = a @ s + g
        # a variable at its lower bound wants to move up when its gradient is negative
        wrong = np.where((side < 0) & ~pinned, -grad, 0.0) + np.where((side > 0) & ~pinned, grad, 0.0)
        worst = int(np.argmax(wrong))
        if wrong[worst] <= 0.0:
            return s
        side[worst] = 0
    return s
