"""L-BFGS within a box, for many unknowns at once (a weight per vertex), numpy only.

The extension ships numpy, not SciPy, so this is not SciPy's L-BFGS-B: the bounds are held by
projection, as in ``lbfgs.py`` (an unknown at a bound whose gradient pushes outwards is held
for the step, every trial point is clipped into the box), and each step backtracks from the
quasi-Newton step until the value falls by a small fraction of what the gradient predicts
(Armijo). Without curvature pairs yet, the first step moves no unknown by more than
``FIRST_STEP`` of the box's width, and its linear model promises at most half the value.

A ``precondition`` (v -> M^-1 v, M symmetric positive definite) stands in for the identity
as the starting inverse Hessian: the first step is -M^-1 g and the two-loop recursion starts
from M^-1 scaled by the newest pair (L-BFGS in M's inner product).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["BoxResult", "minimize_box"]

MEMORY = 10  # curvature pairs kept
ARMIJO = 1e-4  # fraction of the predicted decrease a step must achieve
MAX_TRIALS = 20  # trial steps per line search, each half the last
FIRST_STEP = 0.1  # largest move of an unknown without curvature, as a fraction of its range


@dataclass
class BoxResult:
    """Where :func:`minimize_box` stopped: made by it, read by the free-map fit (``free_map``)."""

    x: np.ndarray
    value: float
    gradient: np.ndarray
    iterations: int  # accepted steps
    evaluations: int  # calls of the function
    stop: str  # "converged_gradient", "converged_value", "max_iterations" or "no_progress"


def _two_loop(
    g: np.ndarray,
    pairs: list[tuple[np.ndarray, np.ndarray]],
    precondition: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """The L-BFGS product H g from the kept pairs (s, y), H0 = M^-1 scaled by the newest pair."""
    q = g.copy()
    alphas = []
    for s, y in reversed(pairs):
        a = (s @ q) / (y @ s)
        alphas.append(a)
        q -= a * y
    s, y = pairs[-1]
    r = precondition(q)
    r *= (s @ y) / (y @ precondition(y))
    for (s, y), a in zip(pairs, reversed(alphas), strict=True):
        r += (a - (y @ r) / (y @ s)) * s
    return r


def minimize_box(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x0: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray],
    max_iterations: int = 50,
    rel_tol: float = 1e-9,
    trial: Callable[[np.ndarray], float] | None = None,
    precondition: Callable[[np.ndarray], np.ndarray] | None = None,
) -> BoxResult:
    """Minimise ``fun`` (x -> value, gradient) over ``bounds`` (lower, upper arrays) from ``x0``,
    for at most ``max_iterations`` accepted steps or until a step gains less than ``rel_tol``
    of the value.

    ``trial`` (x -> value), where given, judges the line search's points instead of ``fun``:
    the value as seen from the step's start (for a simulation, with the start's discrete
    choices repeated, so that the line is smooth where the value itself jumps), and cheaper
    (no gradient), against its own value at the step's start. ``fun`` then gives the
    accepted point's own value and gradient; a step's gain is what ``trial`` saw.
    ``precondition``: see the module docstring (default the identity)."""
    if precondition is None:
        precondition = np.copy
    lower, upper = (np.asarray(b, dtype=np.float64) for b in bounds)
    x = np.clip(np.asarray(x0, dtype=np.float64), lower, upper)
    f, g = fun(x)
    evaluations, steps, pairs, stop = 1, 0, [], "max_iterations"
    while steps < max_iterations:
        if np.abs(x - np.clip(x - g, lower, upper)).max() == 0.0:
            stop = "converged_gradient"
            break
        # held: at a bound with the gradient pushing outwards
        free = ~(((x <= lower) & (g > 0.0)) | ((x >= upper) & (g < 0.0)))
        if pairs:
            d = -_two_loop(g * free, pairs, precondition) * free
        if not pairs or not d @ g < 0.0:  # no memory, or no descent: M^-1 g alone, memory dropped
            d, pairs = -precondition(g * free) * free, []
        if not pairs:
            # no curvature yet: no unknown moves by more than FIRST_STEP of the box, nor does
            # the linear model promise more than half the value (many unknowns each moving a
            # little add up to a large change)
            d *= FIRST_STEP * np.max(upper - lower) / np.abs(d).max()
            predicted = -(g @ d)
            if predicted > 0.5 * abs(f) > 0.0:
                d *= 0.5 * abs(f) / predicted
        # the line's own value at its start: ``fun``'s can differ from it by rounding (a
        # simulation on a tape sums in another order), which in float32 is more than the
        # decrease of a short step, and no step would pass
        f_line = f
        if trial is not None:
            f_line = trial(x)
            evaluations += 1
        t = 1.0
        for _ in range(MAX_TRIALS):
            x_new = np.clip(x + t * d, lower, upper)
            if trial is None:
                f_new, g_new = fun(x_new)
            else:
                f_new = trial(x_new)
            evaluations += 1
            if f_new <= f_line + ARMIJO * (g @ (x_new - x)):
                break
            t *= 0.5
        else:
            stop = "no_progress"
            break
        gain = f_line - f_new
        if trial is not None:
            f_new, g_new = fun(x_new)
            evaluations += 1
        s, y = x_new - x, g_new - g
        if s @ y > 1e-12 * np.sqrt((s @ s) * (y @ y)):
            pairs = [*pairs, (s, y)][-MEMORY:]
        x, f, g = x_new, f_new, g_new
        steps += 1
        if gain <= rel_tol * abs(f):
            stop = "converged_value"
            break
    return BoxResult(x, f, g, steps, evaluations, stop)
