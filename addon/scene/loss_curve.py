"""A fit's RMSE per iteration as a picture: drawn with numpy (:func:`curve_pixels`) and kept in
an Image datablock named after the object (:func:`update_curve_image`), which the panel shows
and the Image Editor opens large.

The RMSE of each iteration comes from the loss the optimizer reported: the fit's loss is
``0.5 * matched points * RMSE^2`` (``FitObjective.matched_points``), so each RMSE is the
record's final RMSE scaled by the square root of its loss over the last loss
(:func:`rmse_history`). Robust footage losses (Huber) bend that rule for markers far off, so
their early iterations are approximate.

While a fit runs, neither the matched points nor the tolerance are known to the add-on yet:
:func:`relative_rmse` gives the RMSE relative to the start's, which a log scale draws with the
same shape.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np

from ...warp_core.targets.units import unit_of
from .records import read_record

IMAGE_SIZE = (480, 240)  # width, height of the image the Image Editor shows
PREVIEW_SIZE = (192, 192)  # the panel's picture (an icon preview, square)
IMAGE_SUFFIX = " Fit Loss"
IMAGE_TAG = "fit_to_target_curve"  # the image's custom property naming its object

BACKGROUND = (0.11, 0.11, 0.11, 1.0)
MATCHED_BAND = (0.1, 0.2, 0.1, 1.0)  # below the tolerance
TOLERANCE_RGBA = (0.25, 0.85, 0.3, 1.0)
CURVE_RGBA = (0.95, 0.6, 0.15, 1.0)
MARGIN_PX = 6


def rmse_history(record: dict[str, Any]) -> list[float]:
    """The RMSE after each iteration (iteration 0: the start values), in the record's unit:
    the record's own ``rmse_history_<unit>`` when it keeps one, else derived from its
    ``loss_history`` (see the module docstring), scaled so that the last entry is the record's
    RMSE (or, failing that, the first its initial RMSE). A member of a shared fit gets the
    joint loss's curve so scaled. [] when neither can be had."""
    unit = unit_of(record.get("unit"))
    kept = record.get(f"rmse_history_{unit.symbol}")
    if isinstance(kept, list):
        return [float(v) for v in kept]
    losses = [float(v) for v in record.get("loss_history") or []]
    if not losses:
        return []
    ends = (
        (record.get(f"rmse_{unit.symbol}"), losses[-1]),
        (record.get(f"initial_rmse_{unit.symbol}"), losses[0]),
    )
    for rmse, loss in ends:
        if _positive(rmse) and _positive(loss):
            return rmse_from_losses(losses, float(rmse) ** 2 / loss)
    return []


def rmse_from_losses(losses: Sequence[float], rmse_squared_per_loss: float) -> list[float]:
    """``sqrt(loss * rmse_squared_per_loss)`` for each loss: ``2 / matched points`` is the
    factor (the fit's loss is ``0.5 * matched points * RMSE^2``)."""
    return [math.sqrt(max(float(loss), 0.0) * rmse_squared_per_loss) for loss in losses]


def relative_rmse(losses: Sequence[float]) -> list[float]:
    """The RMSE of each loss relative to the first one's, ``sqrt(loss / first loss)``: the
    curve of a fit still running (draw it with no tolerance); [] when the first loss is not
    a positive number."""
    if not losses or not _positive(losses[0]):
        return []
    return rmse_from_losses(losses, 1.0 / float(losses[0]))


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0.0


@dataclass(frozen=True)
class CurveAxes:
    """Where a value and an iteration land in a curve picture. Made by :func:`curve_axes`; read
    by :func:`curve_pixels` and by anyone placing marks on the same picture. Rows count up
    from the bottom (as Blender's ``Image.pixels``); values are on a log scale."""

    width_px: int
    height_px: int
    log_low: float  # log10 of the value at the bottom row of the plot area
    log_high: float  # log10 of the value at its top row
    count: int  # iterations plotted

    def row(self, value: float) -> float:
        """The (fractional) row of ``value``, from 0 at the bottom."""
        top = self.height_px - 1 - MARGIN_PX
        t = (math.log10(value) - self.log_low) / (self.log_high - self.log_low)
        return MARGIN_PX + t * (top - MARGIN_PX)

    def column(self, iteration: int) -> float:
        """The (fractional) column of iteration ``iteration`` (0 at the left)."""
        right = self.width_px - 1 - MARGIN_PX
        if self.count < 2:
            return 0.5 * (MARGIN_PX + right)
        return MARGIN_PX + iteration * (right - MARGIN_PX) / (self.count - 1)


def curve_axes(
    rmse_values: Sequence[float], tolerance: float | None, width_px: int, height_px: int
) -> CurveAxes:
    """The axes of :func:`curve_pixels`: the smallest and largest positive value (and the
    tolerance) spread over the plot's height with a tenth of a decade to spare at each end."""
    shown = [v for v in rmse_values if _positive(v)]
    if _positive(tolerance):
        shown.append(float(tolerance))
    if not shown:
        shown = [1.0]
    low, high = math.log10(min(shown)), math.log10(max(shown))
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    pad = max(0.1, 0.05 * (high - low))
    return CurveAxes(int(width_px), int(height_px), low - pad, high + pad, len(rmse_values))


def curve_pixels(
    rmse_values: Sequence[float], tolerance: float | None, width_px: int, height_px: int
) -> np.ndarray:
    """RGBA (height, width, 4) float32 of the RMSE per iteration on a log scale: the curve
    (:data:`CURVE_RGBA`, a point per iteration) over the tolerance's horizontal line
    (:data:`TOLERANCE_RGBA`, with the band below it tinted); no text. Row 0 is the bottom row,
    ready for ``Image.pixels``. Values that are not positive numbers (a diverged or exact
    iteration) are left out of the line; ``tolerance`` None draws no line."""
    if width_px < 2 * MARGIN_PX + 2 or height_px < 2 * MARGIN_PX + 2:
        raise ValueError(f"a curve needs at least {2 * MARGIN_PX + 2} pixels each way")
    axes = curve_axes(rmse_values, tolerance, width_px, height_px)
    pixels = np.empty((height_px, width_px, 4), dtype=np.float32)
    pixels[:] = BACKGROUND
    if _positive(tolerance):
        row = int(round(axes.row(float(tolerance))))
        pixels[:row, :] = MATCHED_BAND
        dashes = (np.arange(width_px) // 6) % 3 != 2
        pixels[row, dashes] = TOLERANCE_RGBA
    points = [(axes.column(k), axes.row(float(v))) for k, v in enumerate(rmse_values) if _positive(v)]
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        _segment(pixels, x0, y0, x1, y1, CURVE_RGBA)
    if len(points) <= width_px // 8:  # a dot per iteration while they stay apart
        for x, y in points:
            _dot(pixels, x, y, 2, CURVE_RGBA)
    return pixels


def _segment(pixels: np.ndarray, x0: float, y0: float, x1: float, y1: float, rgba: tuple) -> None:
    """A line two pixels thick from (x0, y0) to (x1, y1), sampled densely."""
    steps = int(max(abs(x1 - x0), abs(y1 - y0)) * 2) + 2
    t = np.linspace(0.0, 1.0, steps)
    xs, ys = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
    h, w = pixels.shape[:2]
    for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1)):
        cols = np.clip(np.floor(xs).astype(int) + dx, 0, w - 1)
        rows = np.clip(np.floor(ys).astype(int) + dy, 0, h - 1)
        pixels[rows, cols] = rgba


def _dot(pixels: np.ndarray, x: float, y: float, radius: int, rgba: tuple) -> None:
    h, w = pixels.shape[:2]
    cx, cy = int(round(x)), int(round(y))
    rows = slice(max(cy - radius, 0), min(cy + radius + 1, h))
    cols = slice(max(cx - radius, 0), min(cx + radius + 1, w))
    pixels[rows, cols] = rgba


def curve_image_name(ob: bpy.types.Object) -> str:
    """The name a new loss-curve image of the object gets: the object's and " Fit Loss"
    (Blender adds ".001" when an image of that name exists)."""
    return f"{ob.name}{IMAGE_SUFFIX}"


def curve_image(ob: bpy.types.Object) -> bpy.types.Image | None:
    """The object's loss-curve image, if one was drawn in this Blender session (found by the
    object's name in the image's ``fit_to_target_curve`` property, so an image of the user's
    that happens to have the same name is never drawn over)."""
    return next((im for im in bpy.data.images if im.get(IMAGE_TAG) == ob.name), None)


def update_curve_image(
    ob: bpy.types.Object, values: Sequence[float], tolerance: float | None
) -> bpy.types.Image:
    """Draw ``values`` (RMSE per iteration, see :func:`curve_pixels`) into the object's image
    (:func:`curve_image`), made the first time and updated in place after that, and into the
    image's preview (what the panel shows). Main thread; callable from a fit's progress
    updates and at write-back.

    The image has no fake user and is not packed: it is not saved with the .blend, and the
    add-on draws it again from the result record when a file is opened.
    """
    width, height = IMAGE_SIZE
    image = curve_image(ob)
    if image is None:
        image = bpy.data.images.new(curve_image_name(ob), width, height, alpha=True)
        image[IMAGE_TAG] = ob.name
    elif tuple(image.size) != (width, height):
        image.scale(width, height)
    image.use_fake_user = False
    image.pixels.foreach_set(curve_pixels(values, tolerance, width, height).ravel())
    image.update()
    preview = image.preview_ensure()
    preview.image_size = PREVIEW_SIZE
    preview.image_pixels_float = curve_pixels(values, tolerance, *PREVIEW_SIZE).ravel()
    return image


def record_curve_image(ob: bpy.types.Object) -> bpy.types.Image | None:
    """Draw the object's last result's curve (:func:`rmse_history`, its tolerance) into its
    image; None when the object has no result with a loss history."""
    record = read_record(ob)
    values = rmse_history(record) if record is not None else []
    if not values:
        return None
    tolerance = record.get(f"tolerance_{unit_of(record.get('unit')).symbol}")
    return update_curve_image(ob, values, tolerance if _positive(tolerance) else None)


_pending: set[str] = set()  # objects whose curve image a timer is about to draw


def schedule_curve_image(ob: bpy.types.Object) -> None:
    """Draw the object's curve image from its record as soon as Blender allows it: a panel's
    draw may not make datablocks, so it asks for one this way (after a file is opened or an
    undo took the image away)."""
    if ob.name in _pending:
        return
    _pending.add(ob.name)
    bpy.app.timers.register(functools.partial(_draw_later, ob.name), first_interval=0.0)


def _draw_later(name: str) -> None:
    _pending.discard(name)
    ob = bpy.data.objects.get(name)
    if ob is not None and getattr(ob, "fit_to_target", None) is not None:
        record_curve_image(ob)
        for window in bpy.context.window_manager.windows:
            for area in window.screen.areas:
                if area.type == "VIEW_3D":
                    area.tag_redraw()
