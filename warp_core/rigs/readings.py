"""What a fabric test reads off a cloth's state: the numbers a lab sheet gives.

Pure numpy on positions, so a rig simulated by this project and the same rig run by
Blender's own cloth are read by one function.

* **Cantilever** (ASTM D1388 / BS 3356): a strip is pushed over a platform edge until the
  line from the edge to its tip falls to an angle below the horizontal (41.5 deg in the
  standards). Peirce's elastica gives the bending length from the overhang ``O`` and that
  angle: ``c = O * (cos(theta / 2) / (8 tan theta)) ** (1 / 3)``, about ``O / 2`` at
  41.5 deg; the flexural rigidity per width is ``G = w * c**3`` with ``w`` the weight per
  area (N/m^2).
* **Drape** (BS 5058 / ISO 9073-9, Cusick): a disc of fabric settles on a smaller support
  disc; the drape coefficient is ``(shadow - support) / (specimen - support)`` of the areas
  seen from above (1: stays flat, 0: hangs straight down), and the node count is the number
  of folds around it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DrapeReading",
    "bending_length",
    "drape_reading",
    "flexural_rigidity",
    "shadow_radius",
    "tip_angle",
]

# rays of the shadow outline (a tenth of a degree apart: a 30 cm specimen's outline to
# 0.2 mm)
SHADOW_RAYS = 3600
# a fold counts as a node where its outline stands this share of the specimen's overhang
# (specimen radius - support radius) above the troughs beside it
NODE_PROMINENCE = 0.05


def bending_length(overhang_m: float, tip_angle_rad: float) -> float:
    """Peirce's bending length (m) of a strip whose tip line falls ``tip_angle_rad`` below the
    horizontal at an overhang of ``overhang_m``."""
    if not overhang_m > 0.0 or not 0.0 < tip_angle_rad < 0.5 * math.pi:
        raise ValueError(
            f"an overhang > 0 and a tip angle in (0, 90) deg are needed, got {overhang_m} m and "
            f"{math.degrees(tip_angle_rad):.3g} deg"
        )
    ratio = math.cos(0.5 * tip_angle_rad) / (8.0 * math.tan(tip_angle_rad))
    return overhang_m * ratio ** (1.0 / 3.0)


def flexural_rigidity(bending_length_m: float, weight_gsm: float, gravity: float = 9.81) -> float:
    """``G = w c^3`` (N m, per metre of width) of a fabric of ``weight_gsm`` g/m^2."""
    return weight_gsm * 1e-3 * gravity * bending_length_m**3


def tip_angle(centreline: np.ndarray, edge: np.ndarray, down: np.ndarray | None = None) -> float:
    """The angle (rad) below the horizontal of the line from the platform ``edge`` (a point)
    to the strip's tip: the last of ``centreline`` (the strip's points in order along it).
    ``down``: the direction of gravity (default -z)."""
    down = np.array([0.0, 0.0, -1.0]) if down is None else np.asarray(down, dtype=float)
    down = down / np.linalg.norm(down)
    chord = np.asarray(centreline, dtype=float)[-1] - np.asarray(edge, dtype=float)
    drop = float(chord @ down)
    across = float(np.linalg.norm(chord - drop * down))
    return math.atan2(drop, across)


@dataclass(frozen=True)
class DrapeReading:
    """A drape test's reading: made by :func:`drape_reading`, read by the fabric fit and its
    report."""

    coefficient: float  # (shadow - support) / (specimen - support)
    shadow_area_m2: float
    nodes: int  # folds around the outline


def shadow_radius(
    positions: np.ndarray, edges: np.ndarray, centre: np.ndarray, rays: int = SHADOW_RAYS
) -> np.ndarray:
    """The outline of the cloth's shadow from above (on the x-y plane) as the farthest reach
    of its projected ``edges`` (``ClothMesh.edges``) along ``rays`` directions from ``centre``
    (x, y), one radius per ray at angles ``2 pi k / rays``. The shadow of a draped disc is
    star-shaped about its centre, so its outline is this."""
    p = np.asarray(positions, dtype=float)[:, :2] - np.asarray(centre, dtype=float)[:2]
    edges = np.asarray(edges, dtype=np.int64)
    a, b = p[edges[:, 0]], p[edges[:, 1]]
    angles = 2.0 * math.pi * np.arange(rays) / rays
    direction = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    radius = np.zeros(rays)
    # a ray t * d meets a + s (b - a) where t d - s (b - a) = a (Cramer's rule per pair)
    ab = b - a
    for start in range(0, rays, 256):
        d = direction[start : start + 256, None, :]
        det = -d[..., 0] * ab[None, :, 1] + d[..., 1] * ab[None, :, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (-a[None, :, 0] * ab[None, :, 1] + a[None, :, 1] * ab[None, :, 0]) / det
            s = (d[..., 0] * a[None, :, 1] - d[..., 1] * a[None, :, 0]) / det
        # a ray through a vertex meets both its edges at s = 1 and 0 only up to rounding
        hit = (np.abs(det) > 1e-15) & (s >= -1e-9) & (s <= 1.0 + 1e-9) & (t >= 0.0)
        radius[start : start + 256] = np.where(hit, t, 0.0).max(axis=1)
    return radius


def drape_reading(
    positions: np.ndarray,
    edges: np.ndarray,
    centre: np.ndarray,
    support_radius_m: float,
    specimen_radius_m: float,
) -> DrapeReading:
    """The drape coefficient and node count of a settled specimen (positions (N, 3), its mesh's
    edges, the support's centre), by the standards' areas: the specimen's and the
    support's as discs of their nominal radii."""
    if not 0.0 < support_radius_m < specimen_radius_m:
        raise ValueError(
            f"a support radius in (0, specimen radius) is needed, got {support_radius_m} m and "
            f"{specimen_radius_m} m"
        )
    radius = np.maximum(shadow_radius(positions, edges, centre), support_radius_m)
    # the polygon through the outline's points, not a sum of sectors: exact for a polygon
    turn = 2.0 * math.pi / len(radius)
    shadow = 0.5 * math.sin(turn) * float(radius @ np.roll(radius, -1))
    support, specimen = math.pi * support_radius_m**2, math.pi * specimen_radius_m**2
    return DrapeReading(
        coefficient=(shadow - support) / (specimen - support),
        shadow_area_m2=shadow,
        nodes=_nodes(radius, NODE_PROMINENCE * (specimen_radius_m - support_radius_m)),
    )


def _nodes(radius: np.ndarray, prominence: float) -> int:
    """Maxima of the periodic outline that stand ``prominence`` above the troughs on both
    sides: walked once around from the highest point (a peak whatever lies beside it)."""
    if float(radius.max() - radius.min()) < prominence:
        return 0
    r = np.roll(radius, -int(np.argmax(radius)))
    count, rising, low, high = 1, False, float(r[0]), float(r[0])
    for value in map(float, r[1:]):
        if not rising:
            low = min(low, value)
            rising, high = value - low >= prominence, value
        else:
            high = max(high, value)
            if high - value >= prominence:
                count, rising, low = count + 1, False, value
    # a rise still climbing at the end climbs into the highest point, counted first
    return count
