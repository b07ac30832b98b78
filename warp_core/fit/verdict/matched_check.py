"""Each matched range checked by simulation at its ends.

``identifiability`` gives each determined parameter the range it can move in while the
targets stay matched, from the Jacobian at the fitted values: the ends of the tolerance
ellipsoid along the line on which the others make up for it best. A motion whose effect
is not linear over that range (a body's bounce on the ground, whose timing shifts with its
stiffness and damping together) has a valley that the ellipsoid misjudges: on a soft box
dropped onto the ground (``bench/soft_body_robustness.py`` seed 70, scene 0) the truth
matched the targets exactly and lay 29 % above the fitted Young's modulus, where the
first-order range reached 17 %.

So each end is simulated (all of them side by side, one rollout each) and the line is
measured there: along it, from the fitted values (a minimum, where the loss has no slope),
the loss of a residual linear in the values grows with the square of the distance, so one
rollout gives where it reaches the tolerance,

    rmse(t)^2 = rmse(0)^2 + t^2 (rmse(1)^2 - rmse(0)^2),

``t`` in units of the first-order half-width. The range's ends move to those crossings, at
most ``MAX_STRETCH`` times as far as the first order (a line on which the loss does not
grow is left at that). A fit that is not matched, or has no Jacobian, keeps the
first-order ranges.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .identifiability import MATCHED_RANGE_CAP

__all__ = ["MAX_STRETCH", "check_matched_ranges", "extremal_steps"]

# an end moves at most this many first-order half-widths from the fitted value
MAX_STRETCH = 4.0


def extremal_steps(jac: np.ndarray) -> np.ndarray | None:
    """(n, n): column ``k`` is the step in log space to where parameter ``k`` is largest on
    the ellipsoid ``|J dz| = 1`` (the others following), ``(J^T J)^-1 e_k / sqrt(...)``;
    None where the targets leave some direction unseen (a range is then unbounded)."""
    jtj = jac.T @ jac
    eigenvalues, vectors = np.linalg.eigh(jtj)
    if eigenvalues.size == 0 or eigenvalues.min() <= 1e-12 * max(float(eigenvalues.max()), 1e-300):
        return None
    inverse = (vectors / eigenvalues) @ vectors.T
    return inverse / np.sqrt(np.diag(inverse))[None, :]


def check_matched_ranges(
    entries: list[dict[str, Any]],
    jac: np.ndarray,
    z: np.ndarray,
    tolerance_norm: float,
    fitted_norm: float,
    norms_at: Callable[[list[np.ndarray]], list[float | None]],
    log_bounds: tuple[np.ndarray, np.ndarray],
) -> int:
    """Move each determined entry's ``matched_range`` (from ``identifiability``, the free
    parameters in ``jac``'s column order, log space at ``z``) to where the residual norm
    reaches ``tolerance_norm`` along its line, measured by ``norms_at`` (the residual norm
    at each log point, None where it cannot be simulated) from ``fitted_norm`` at ``z``;
    entries checked get ``matched_range_checked``. Returns the points simulated."""
    steps = extremal_steps(jac)
    if steps is None:
        return 0
    lower, upper = log_bounds
    ends: list[tuple[int, float, np.ndarray, float, float]] = []
    for k, entry in enumerate(entries):
        found = entry.get("matched_range")
        if not entry["determined"] or found is None:
            continue
        half = math.log(found[1])
        if not math.isfinite(half) or half >= MATCHED_RANGE_CAP or half <= 0.0:
            continue
        step = steps[:, k] * tolerance_norm  # its k-th entry is ``half``
        for sign in (-1.0, 1.0):
            room = _room(z, sign * step, lower, upper)
            ends.append((k, sign, z + room * sign * step, room, half))
    if not ends:
        return 0
    norms = norms_at([end[2] for end in ends])
    spare = max(tolerance_norm**2 - fitted_norm**2, 0.0)
    reach: dict[tuple[int, float], tuple[float, float]] = {}
    for (k, sign, _, moved, half), norm in zip(ends, norms, strict=True):
        if norm is None or not math.isfinite(norm) or moved <= 0.0:
            continue  # that end keeps its first-order value
        grown = norm**2 - fitted_norm**2
        t = MAX_STRETCH if grown <= 0.0 else min(moved * math.sqrt(spare / grown), MAX_STRETCH)
        if moved < 1.0 and t >= moved:
            continue  # matched up to the bound that ends the line: the range reaches it
        reach[(k, sign)] = (t, half)
    for (k, sign), (t, half) in reach.items():
        entry = entries[k]
        low, high = entry["matched_range"]
        if sign < 0:
            low = math.exp(-t * half)
        else:
            high = math.exp(t * half)
        entry["matched_range"] = [low, high]
        entry["matched_range_checked"] = True
    return len(ends)


def _room(z: np.ndarray, step: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """The largest s <= 1 with ``z + s * step`` within the bounds: the line's end short of a
    bound, every parameter on it still where the line puts it."""
    room = 1.0
    for start, move, lo, hi in zip(z, step, lower, upper, strict=True):
        if move > 0.0 and start + move > hi:
            room = min(room, max(hi - start, 0.0) / move)
        elif move < 0.0 and start + move < lo:
            room = min(room, max(start - lo, 0.0) / -move)
    return room
