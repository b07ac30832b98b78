"""The units a fit's misfits are measured in: metres for mesh targets, pixels for footage.

A :class:`Unit` says how its misfits are named, written and judged: the RMSE's label, the
``FitSettings`` tolerance that applies, how a value and a threshold are printed, the scales
the outcome's rules start from, and what a record written in it looks like. Each target kind
has one (``TargetKind.unit``); the fit's scales, outcome, identifiability report and result
read it instead of asking which kind of target they judge.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["METRES", "PIXELS", "Unit", "format_length", "format_mm", "significant", "unit_of"]


def format_mm(metres: Any) -> str:
    """A length in metres as millimetres ("-" for none or a non-finite value)."""
    if metres is None or not isinstance(metres, int | float) or not math.isfinite(metres):
        return "-"
    return f"{metres * 1000.0:.4g} mm"


def format_px(pixels: Any) -> str:
    """A distance in pixels ("-" for none or a non-finite value)."""
    if pixels is None or not isinstance(pixels, int | float) or not math.isfinite(pixels):
        return "-"
    return f"{pixels:.4g} px"


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, in plain decimals (1234, 4.21, 0.0123): a
    number that changes while it is read, as a running fit's RMSE, reads best without exponents."""
    if value == 0.0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(digits - 1 - math.floor(math.log10(abs(value))), 0)
    return f"{value:.{decimals}f}"


def progress_mm(metres: Any) -> str:
    """A running misfit in metres as millimetres, 3 significant digits ("-" for none)."""
    if metres is None or not isinstance(metres, int | float) or not math.isfinite(metres):
        return "-"
    return f"{significant(metres * 1000.0)} mm"


def progress_px(pixels: Any) -> str:
    """A running misfit in pixels, 3 significant digits ("-" for none)."""
    if pixels is None or not isinstance(pixels, int | float) or not math.isfinite(pixels):
        return "-"
    return f"{significant(pixels)} px"


def format_length(metres: float) -> str:
    """A threshold in metres in the unit that reads best: mm, cm or m."""
    if metres < 1e-2:
        return f"{metres * 1e3:g} mm"
    if metres < 1.0:
        return f"{metres * 1e2:g} cm"
    return f"{metres:g} m"


def format_px_threshold(pixels: float) -> str:
    return f"{pixels:g} px"


@dataclass(frozen=True)
class Unit:
    """One unit of misfit. Made here (:data:`METRES`, :data:`PIXELS`), held by each target kind
    and by ``FitScales``; read by the fit engine, the outcome rules, the identifiability report,
    ``FitResult.summary``, the record tables (through :func:`unit_of`) and a running fit's
    progress (``FitProgress.unit``)."""

    symbol: str  # "m", "px": the suffix of a record's misfit keys
    name: str  # in messages: "the tolerance must be > 0 metres"
    rmse_label: str  # the RMSE's name in outcomes and tables
    tolerance_field: str  # the FitSettings field holding a tolerance in this unit
    # how a misfit and an identifiability threshold are printed, and a running fit's misfit
    misfit_format: Callable[[Any], str]
    threshold_format: Callable[[float], str]
    progress_format: Callable[[Any], str]
    # the outcome's rules in this unit (see ``warp_core.fit.verdict.outcome``): the automatic
    # tolerance (None: derived from the motion and the precision's noise), the floor where
    # refining stops (None: ``FitSettings.rmse_tolerance_m``), and the change a parameter's
    # doubling must make to count as determined (before the share of the motion)
    default_tolerance: float | None
    stop_floor: float | None
    report_floor: float
    # what a misfit outcome adds: the advice for noisy measurements in this unit
    misfit_hint: str
    # whether a record keeps this unit's misfits under the documented metre keys (``rmse_m``);
    # otherwise under ``<key>_<symbol>``, the metre keys left empty, with the unit named
    metre_keys: bool

    def format(self, value: Any) -> str:
        """A misfit in this unit, as the reports print it."""
        return self.misfit_format(value)

    def format_progress(self, value: Any) -> str:
        """A running fit's misfit in this unit, as its progress prints it (3 significant digits)."""
        return self.progress_format(value)

    def format_threshold(self, value: float) -> str:
        """An identifiability threshold (the change a doubling must make) in this unit."""
        return self.threshold_format(value)


METRES = Unit(
    symbol="m",
    name="metres",
    rmse_label="RMSE",
    tolerance_field="tolerance_m",
    misfit_format=format_mm,
    threshold_format=format_length,
    progress_format=progress_mm,
    default_tolerance=None,
    stop_floor=None,
    report_floor=1e-4,
    misfit_hint="",
    metre_keys=True,
)

# A tracked marker scatters by a fraction of a pixel, so the automatic tolerance is one pixel
# RMS, not a share of the motion; refining stops at a thousandth of a pixel; a parameter whose
# doubling moves no marker by a tenth of a pixel is not determined by the tracks.
PIXELS = Unit(
    symbol="px",
    name="pixels",
    rmse_label="reprojection RMSE",
    tolerance_field="tolerance_px",
    misfit_format=format_px,
    threshold_format=format_px_threshold,
    progress_format=progress_px,
    default_tolerance=1.0,
    stop_floor=1e-3,
    report_floor=0.1,
    misfit_hint="; if the markers are noisy, raise the tolerance (pixels)",
    metre_keys=False,
)

_BY_SYMBOL = {unit.symbol: unit for unit in (METRES, PIXELS)}


def unit_of(symbol: str | None) -> Unit:
    """The unit a record names (its ``"unit"``); records without one, as every record of mesh
    targets, are in metres."""
    return _BY_SYMBOL.get(symbol or METRES.symbol, METRES)
