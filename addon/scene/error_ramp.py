"""Per-vertex error as colours on a fixed scale of the fit's tolerance: green within it, yellow
at 3 times it, red from 10 times it (no bpy: plain numpy).

The scale is fixed, not stretched to the largest error, so the colours say whether the cloth
matches its targets: a fit that is off by a thousandth of its tolerance is all green, one that
is off by ten tolerances is red wherever it is.
"""

from __future__ import annotations

import numpy as np

# where each colour is reached, in multiples of the tolerance
GREEN_UP_TO = 1.0
YELLOW_AT = 3.0
RED_FROM = 10.0

GREEN = (0.0, 1.0, 0.0, 1.0)
YELLOW = (1.0, 1.0, 0.0, 1.0)
RED = (1.0, 0.0, 0.0, 1.0)
# a vertex no target compares (footage: a vertex no track is bound to)
NOT_COMPARED = (0.5, 0.5, 0.5, 1.0)

# (multiple of the tolerance, colour) of each row of a legend
LEGEND = (("Green", GREEN_UP_TO, GREEN), ("Yellow", YELLOW_AT, YELLOW), ("Red", RED_FROM, RED))


def error_ramp(errors: np.ndarray, tolerance: float) -> np.ndarray:
    """RGBA (N, 4) float32 of each error (N,) on the tolerance's scale.

    Green up to 1x ``tolerance``; from there to yellow at 3x and on to red at 10x, each step
    in proportion to the logarithm of the error (a factor of 2 looks alike anywhere on the
    scale); red beyond. A NaN error (not compared) is grey; an infinite one is red.
    ``tolerance`` must be a positive number in the errors' unit.
    """
    if not (np.isfinite(tolerance) and tolerance > 0.0):
        raise ValueError(f"the tolerance of an error ramp must be a positive number, got {tolerance!r}")
    error = np.asarray(errors, dtype=np.float64).reshape(-1)
    measured = ~np.isnan(error)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(measured, np.maximum(error, 0.0) / tolerance, 0.0)
        log_ratio = np.log(np.maximum(ratio, GREEN_UP_TO))
    # 0..1 from green to yellow, then 0..1 from yellow to red
    up = np.clip(log_ratio / np.log(YELLOW_AT / GREEN_UP_TO), 0.0, 1.0)
    down = np.clip((log_ratio - np.log(YELLOW_AT)) / np.log(RED_FROM / YELLOW_AT), 0.0, 1.0)
    rgba = np.empty((len(error), 4), dtype=np.float32)
    rgba[:, 0] = up
    rgba[:, 1] = 1.0 - down
    rgba[:, 2] = 0.0
    rgba[:, 3] = 1.0
    rgba[~measured] = NOT_COMPARED
    return rgba
