"""What a fit's result means: how closely it has to match the targets, and one honest
outcome in words.

Scales, all in the targets' unit (metres; pixels for footage, whose own rules the unit carries:
``warp_core.targets.units``) and all derived from the targets themselves, so a 1 mm cloth and
a 10 m sail are judged alike:

- motion: RMS distance of the targets from the rest positions (what there is to fit);
- noise: what the precision's rounding leaves in a rollout, ``NOISE_ULPS`` epsilons of the
  largest coordinate (float32 rollouts of 1 m sheets differ from float64 by 20-130 of
  them after 30 frames; 1000 leaves room for longer and larger ones);
- tolerance (what counts as matched): ``FitSettings.tolerance_m`` when given, else
  ``min(1 mm, 0.1 % of the motion)``, never below the noise nor below the stop threshold.
  With it a fit called converged is within 1 mm RMSE of its targets, and Blender replays
  this model to 1e-6-2e-5 of the motion (1.5e-4 with animated pins), well inside that;
- stop threshold (where the optimizer stops refining a match): ``FitSettings
  .rmse_tolerance_m`` (1 micrometre), or 1e-5 of the motion when that is smaller, never
  below ten epsilons of the largest coordinate;
- hold threshold: a parameter whose doubling moves no target point by 1 % of the
  tolerance is held where it is for a step (it cannot be resolved; left free it would
  only wander); one whose doubling moves none by ``min(0.1 mm, 1 % of the motion)`` (the
  unit's ``report_floor``; or a tenth of a larger tolerance given for noisy targets) is
  reported as not determined by the targets.

Outcomes: ``converged`` when the RMSE is within the tolerance and stays within it under
rounding (see :func:`rounding_check`); otherwise ``misfit`` when
the optimizer stopped at an optimum of the fitted parameters (its trust region collapsed
or the model saw nothing left to gain), ``stalled`` when a budget, the caller or a point
it could not linearize stopped it first, and ``failed`` when no start point could be
simulated at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...targets.units import METRES, Unit

__all__ = ["FitScales", "classify", "fit_scales", "rounding_check"]

NOISE_ULPS = 1000.0
STOP_ULPS = 10.0
MATCH_M = 1e-3
MATCH_FRACTION = 1e-3
STOP_FRACTION = 1e-5
HOLD_FRACTION = 0.01
REPORT_FRACTION = 0.01
# The best valley leaves about the markers' own noise (their jitter, read from the tracks,
# sqrt(2) times per axis, fewer the degrees of freedom the fit takes). With the automatic
# tolerance a fit must come within this factor of it: a valley that leaves more is another
# one or a model that misses something (measured: through a camera solved from room features
# tracked to 0.5 px, 0.998 px RMS, within 1 px but 1.33 x the noise, every value off).
NOISE_SLACK = 1.1
EPSILON = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}

OUTCOMES = ("converged", "misfit", "stalled", "failed")


@dataclass(frozen=True)
class FitScales:
    """How closely one fit has to match its targets, every scale in ``unit`` (see the module
    docstring). Made by :func:`fit_scales` (the engine, once per fit; the shared fit, once per
    object); read by the engine (stop and hold thresholds, the matched loss), the outcome
    rules and the result's builder."""

    motion: float  # RMS misfit of the cloth left at rest: what there is to fit
    noise: float  # what the precision's rounding leaves in a rollout
    tolerance: float  # RMSE at or below which the targets count as matched
    stop: float  # RMSE at which the optimizer stops refining
    hold: float  # a doubling that moves no target point by this much: held for the step
    report: float  # ... by this much: reported as not determined by the targets
    unit: Unit = METRES  # the unit of all the above
    # noisy targets with the automatic tolerance: the RMSE their noise explains, times
    # NOISE_SLACK; a fit above it is not matched even within the tolerance
    jitter: float | None = None

    def format(self, value: float | None) -> str:
        return self.unit.format(value)


def fit_scales(
    motion: float,
    coordinate_scale: float,
    precision: str,
    tolerance: float | None,
    rmse_tolerance_m: float,
    unit: Unit = METRES,
    noise_rmse: float | None = None,
) -> FitScales:
    """The scales of one fit (see the module docstring for the rules): ``tolerance`` is the
    one asked for in ``unit`` (None: automatic), ``noise_rmse`` the RMSE noisy targets'
    own noise explains (None for exact ones)."""
    eps = EPSILON.get(precision, EPSILON["float32"])
    size = max(coordinate_scale, motion)
    noise = NOISE_ULPS * eps * size
    floor = unit.stop_floor if unit.stop_floor is not None else rmse_tolerance_m
    stop = max(min(floor, STOP_FRACTION * motion), STOP_ULPS * eps * size)
    if tolerance is not None:
        matched = float(tolerance)
        stop = min(stop, matched)
    elif unit.default_tolerance is not None:
        matched = max(unit.default_tolerance, stop)
    else:
        matched = max(min(MATCH_M, MATCH_FRACTION * motion), noise, stop)
    return FitScales(
        motion=float(motion),
        noise=noise,
        tolerance=matched,
        stop=stop,
        hold=HOLD_FRACTION * matched,
        report=max(min(unit.report_floor, REPORT_FRACTION * motion), 0.1 * matched),
        unit=unit,
        jitter=NOISE_SLACK * noise_rmse if tolerance is None and noise_rmse else None,
    )


_STOP_WORDS = {
    "max_iterations": "stopped by the iteration limit",
    "slow": "stopped by the iteration limit",
    "time_budget": "stopped by the time budget",
    "cancelled": "cancelled",
    # Adam's own stops: it cannot tell an optimum from a stall
    "no_progress": "stopped when no step improved it",
    "converged_loss": "stopped when its steps stopped improving it",
}


def classify(
    rmse: float,
    scales: FitScales,
    stop_reason: str,
    stationary: bool,
    undetermined: list[str],
) -> tuple[str, str]:
    """``(outcome, reason)`` of a fit that produced values (see the module docstring)."""
    off = f"{scales.unit.rmse_label} {scales.format(rmse)}{_share(rmse, scales.motion, scales.unit)}"
    tol = f"the tolerance {scales.format(scales.tolerance)}"
    noisy = scales.jitter is not None and rmse > scales.jitter
    if math.isfinite(rmse) and rmse <= scales.tolerance and noisy:
        return ("misfit" if stationary else "stalled"), (
            f"{off} is within {tol} but more than the markers' own noise explains "
            f"({scales.format(scales.jitter / NOISE_SLACK)} RMS): another set of values may match "
            "better, or the model misses something; fit from other start values, or set the "
            f"tolerance ({scales.unit.name}) to accept it"
        )
    if math.isfinite(rmse) and rmse <= scales.tolerance:
        reason = f"the targets are matched: {off}, within {tol}"
        if undetermined:
            reason += f"; the targets do not determine {', '.join(undetermined)} (its value is uncertain)"
        return "converged", reason
    if stationary:
        hint = scales.unit.misfit_hint
        return "misfit", (
            f"the best values of the fitted parameters leave the targets off by {off}, over {tol}: "
            "fit more parameters or check the scene settings (gravity, mass, quality, pins, "
            f"collisions){hint}"
        )
    if stop_reason == "no_jacobian":
        return "stalled", (
            f"stopped at {off}, over {tol}: the simulation's sensitivities could not be computed "
            "there (try other start values)"
        )
    what = _STOP_WORDS.get(stop_reason, f"stopped ({stop_reason})")
    return "stalled", (
        f"{what} at {off}, over {tol}, before the fit settled: allow more iterations or time, or start closer"
    )


def rounding_check(rmse: float, gap: float | None, tolerance: float, unit: Unit = METRES) -> str | None:
    """Why a match is not assured, or None: Blender's solver computes in float32, so a
    motion that moves by ``gap`` (in ``unit``) between float32 and float64 rollouts of this model at
    the fitted values can end that far from where this fit found it. Converged needs
    ``rmse + gap`` within the tolerance (the two can add up, as they did on Blender-made
    scenes: model 0.90 mm and rounding 0.78 mm off, Blender's replay 1.68 mm)."""
    return _not_assured(
        rmse,
        gap,
        tolerance,
        unit,
        "the motion is this sensitive to rounding: the same values move by {gap} between float32 "
        "and float64, so Blender's float32 solver is not assured to stay within the tolerance "
        "{tolerance} (stiff, lightly damped cloth at a low quality is; raise the quality or check "
        "the result by baking)",
    )


def contact_check(rmse: float, gap: float | None, tolerance: float, unit: Unit = METRES) -> str | None:
    """Why a match through collisions is not assured, or None: the same values started
    1 µm higher move by ``gap`` (``sensitivity.start_gap``). Blender's own result moves
    alike there (60 frames of a sheet dropped onto a sphere: 8.7 mm RMS in Blender, 9.1 mm
    in this model), so converged needs ``rmse + gap`` within the tolerance."""
    return _not_assured(
        rmse,
        gap,
        tolerance,
        unit,
        "its contacts make the motion chaotic: started 1 µm higher, the same values move by {gap} "
        "RMS, and Blender's own cloth moves alike, so its replay is not assured within the "
        "tolerance {tolerance} (check the result by baking)",
    )


def _not_assured(rmse: float, gap: float | None, tolerance: float, unit: Unit, cause: str) -> str | None:
    """``cause`` (with {gap} and {tolerance}) after the match, or None while ``rmse + gap``
    stays within the tolerance."""
    if gap is None or not math.isfinite(gap) or rmse + gap <= tolerance:
        return None
    fmt = unit.format
    return f"the targets are matched in this model ({fmt(rmse)} RMSE) but " + cause.format(
        gap=fmt(gap), tolerance=fmt(tolerance)
    )


def failed_reason(error: str) -> str:
    return f"no start point could be simulated: {error}"


def _share(rmse: float, motion: float, unit: Unit) -> str:
    if not (motion > 0.0 and math.isfinite(rmse)):
        return ""
    return f" ({100.0 * rmse / motion:.3g} % of the motion {unit.format(motion)})"
