"""The Cusick drape test (BS 5058 / ISO 9073-9) in Blender's cloth model.

A disc of fabric (30 cm) is clamped between two smaller discs (18 cm) on a stand and falls
into folds around them under gravity (-z); the drape coefficient is the share of the
overhanging ring that its shadow from above still covers (``readings.drape_reading``). The
clamp holds the specimen flat inside the support radius, so the rig pins every vertex there
and needs no collider.

The solver shapes the rig as it does the cantilever's (``rigs.cantilever``): at a real
fabric's vertex mass its errors outweigh gravity, so mass and bending are scaled by one
factor, the in-plane stiffnesses raised towards Blender's defaults with them
(``cantilever.scaled_statics``, :func:`drape_settings`), and it never rests, so the rig
reads the shape averaged over windows of frames and calls it settled when the windowed
coefficient stops drifting (:func:`drape_settle`).

A specimen can rest with a fold more or less, or its folds shaped otherwise, and which it
takes turns on rounding: lifted by a few micrometres (the same problem rounded differently)
a crepe-like specimen on 15 mm edges reads 0.299, 0.325, 0.338 and 0.312 in this model
(lifted 0, 1, 2, 5 um; float64), and 0.344, 0.340, 0.389 and 0.342 in Blender's own cloth.
No one run is *the* reading, so the rig drapes the specimen from several lifts at once (one
batch on a GPU, side by side on a CPU's cores: :func:`run_drape`) and reads their mean,
with their spread: an artist's scene rests like any one of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import warp as wp

from ..capture import side_by_side
from ..fit.objective.rollout_pool import cpu_cores
from ..mesh import ClothMesh
from ..models.blender_cloth.params import PARAMETER_BOUNDS, ClothParams
from .cantilever import lifted_batch, lifted_windows, scaled_statics, settle_windows
from .readings import DrapeReading, drape_reading

__all__ = [
    "DrapeRig",
    "DrapeRunReading",
    "drape_mean",
    "drape_scale",
    "drape_settings",
    "drape_settle",
    "drape_specimen",
    "run_drape",
    "run_drapes",
]

# Blender's RNA clamp on bending stiffness (10000): the scaled bending must stay below it
BENDING_LIMIT = PARAMETER_BOUNDS["bending_stiffness"][1]
# Laplacian passes that even out the quads of the rim band (below)
RELAX_PASSES = 30
RELAX_BAND_EDGES = 3.0


@dataclass(frozen=True)
class DrapeRig:
    """The drape rig's geometry and how long it runs: made by the caller (a fit's rig check,
    the tests, a bench script), read by :func:`drape_specimen`, :func:`drape_settings`,
    :func:`drape_settle` and :func:`run_drape`.

    ``edge_m`` is the artist's mesh edge: Blender's bending acts per hinge and its mass per
    vertex, so one fabric's values depend on it.
    """

    specimen_radius_m: float = 0.15  # the standard's 30 cm disc
    support_radius_m: float = 0.09  # on an 18 cm support, clamped by a top disc as large
    edge_m: float = 0.01
    # vertex mass and bending are multiplied by this (drape_settings); at 10 mm edges and
    # 1000 the specimen settles in 100-350 frames
    mass_scale: float = 1000.0
    # changes how the folds are reached, not where they rest: overdamped, so they creep in
    # rather than swing through
    air_damping: float = 10.0
    quality: int | None = None  # substeps per frame; None: the settings' quality
    # the coefficient of each window's mean positions is compared with the last window's. At
    # 10 mm edges successive 25-frame windows of a settled specimen read 0.001 apart, but a
    # stiff one lies near flat for a while before it buckles into folds (bending 0.03:
    # 0.964, 0.962, 0.961, then down to 0.945 by frame 200), which 25-frame windows
    # mistake for rest; 50-frame ones see it move
    window_frames: int = 50
    settle_coefficient: float = 0.003
    frame_limit: int = 600
    # the specimen is draped from each of these lifts (m) and read as their mean (above); four
    # as the benchmark runs Blender's own cloth; a batch on a GPU, side by side on a CPU's cores
    lifts_m: tuple[float, ...] = (0.0, 1e-6, 2e-6, 5e-6)

    def __post_init__(self) -> None:
        if not 0.0 < self.support_radius_m < self.specimen_radius_m:
            raise ValueError(
                f"the support radius ({self.support_radius_m} m) must be > 0 and below the specimen "
                f"radius ({self.specimen_radius_m} m)"
            )
        if not 0.0 < self.edge_m <= 0.25 * (self.specimen_radius_m - self.support_radius_m):
            raise ValueError(
                f"the edge ({self.edge_m} m) must be > 0 and leave at least 4 edges across the "
                f"overhang ({self.specimen_radius_m - self.support_radius_m:.4g} m)"
            )
        if not self.mass_scale >= 1.0:
            raise ValueError(f"mass_scale must be >= 1, got {self.mass_scale!r}")
        if not self.lifts_m or not all(math.isfinite(lift) and abs(lift) <= 1e-4 for lift in self.lifts_m):
            raise ValueError(f"lifts_m must be one or more lifts of at most 0.1 mm, got {self.lifts_m!r}")


@dataclass(frozen=True)
class DrapeRunReading:
    """What the drape rig reads off a settled specimen: made by :func:`drape_settle` (one run:
    of :func:`run_drape`, or of Blender's own cloth in the Blender tests) and by
    :func:`drape_mean` (several starts, :func:`run_drape`'s reading), read by the fabric
    fit's rig checks, the tests and bench scripts."""

    coefficient: float  # of the window-averaged positions; of several starts, their mean
    nodes: int  # of several starts, the median's
    shadow_area_m2: float
    settled: bool  # the windowed coefficient moved less than the rig's tolerance (every start's)
    frames: int  # frames simulated (the longest start's)
    drift: float  # the last window's coefficient minus the one before (the largest start's)
    scale: float  # what mass and bending were multiplied by (drape_scale)
    coefficients: tuple[float, ...] = ()  # each start's, where several were read (drape_mean)

    @property
    def spread(self) -> float:
        """How far the starts' coefficients lie apart (0 for one run)."""
        return max(self.coefficients) - min(self.coefficients) if self.coefficients else 0.0


def drape_specimen(rig: DrapeRig) -> ClothMesh:
    """The specimen as a quad mesh at z = 0 centred on the origin, vertices within the
    support radius pinned with weight 1.

    A square grid of ``edge_m`` (what an artist cuts a disc from), its cells whose corners
    all lie within half an edge of the outline kept, and one ring of quads from that stepped
    boundary out to the circle (each boundary vertex projected radially onto it), so the
    outline is a polygon on the circle. Blender's mass is per vertex: the grid keeps the
    area each vertex carries (its mass per area) the same everywhere but near the rim. The
    steps leave the rim quads between a third and one and a half edges deep, so the vertices
    within 3 edges of the rim are relaxed (each moved to the mean of its neighbours, those
    on the rim along the circle only). At 10 mm edges (777 vertices, 524 free, 112 on the
    rim) every edge is then 0.65-1.28 edges long, 43 % of them (the rim band's) more than
    1 % off; the rim's vertices carry 0.28-0.54 of a grid vertex's area (any grid's edge
    ones carry a half), the rest of the band 0.46-1.30. 15 mm: 0.67-1.20, 5 mm: 0.64-1.33.
    A polar mesh (rings of quads) would follow the circle everywhere, but its sectors widen
    outwards, and quads cannot add sectors ring by ring without irregular transitions."""
    h, radius = rig.edge_m, rig.specimen_radius_m
    n = int(math.ceil(radius / h)) + 1
    ij = np.stack(np.meshgrid(np.arange(-n, n + 1), np.arange(-n, n + 1), indexing="ij"), axis=-1)
    points = ij.reshape(-1, 2) * h
    inside = np.linalg.norm(points, axis=1) <= radius - 0.5 * h
    index = np.arange(len(points)).reshape(2 * n + 1, 2 * n + 1)
    cells = [
        [index[i, j], index[i + 1, j], index[i + 1, j + 1], index[i, j + 1]]
        for i in range(2 * n)
        for j in range(2 * n)
        if inside[[index[i, j], index[i + 1, j], index[i + 1, j + 1], index[i, j + 1]]].all()
    ]
    loop = _boundary_loop(cells)
    used = np.unique(np.concatenate([np.asarray(cells).ravel(), loop]))
    renumber = np.full(len(points), -1)
    renumber[used] = np.arange(len(used))
    grid_xy = points[used]
    ring_xy = grid_xy[renumber[loop]] * (radius / np.linalg.norm(grid_xy[renumber[loop]], axis=1))[:, None]
    xy = np.concatenate([grid_xy, ring_xy])
    count = len(loop)
    outer = len(grid_xy) + np.arange(count)
    inner = renumber[loop]
    quads = [renumber[c].tolist() for c in cells]
    quads += [[inner[k], outer[k], outer[(k + 1) % count], inner[(k + 1) % count]] for k in range(count)]
    quads = [q if _signed_area(xy[q]) > 0.0 else q[::-1] for q in quads]
    xy = _relax(xy, quads, outer, radius, radius - RELAX_BAND_EDGES * h)
    vertices = np.zeros((len(xy), 3))
    vertices[:, :2] = xy
    # a hair inside the support edge: the grid's vertices on it are clamped, not float luck
    pins = (np.linalg.norm(xy, axis=1) <= rig.support_radius_m + 1e-9).astype(np.float64)
    return ClothMesh.from_polygons(vertices, quads, pin_weights=pins)


def _signed_area(corners: np.ndarray) -> float:
    x, y = corners[:, 0], corners[:, 1]
    return 0.5 * float(x @ np.roll(y, -1) - y @ np.roll(x, -1))


def _boundary_loop(cells: list[list[int]]) -> np.ndarray:
    """The kept cells' outer boundary as one loop of vertex indices, counter-clockwise (the
    cells are counter-clockwise, so each boundary edge runs along the loop)."""
    count: dict[tuple[int, int], int] = {}
    for c in cells:
        for a, b in zip(c, c[1:] + c[:1], strict=True):
            count[(a, b)] = count.get((a, b), 0) + 1
    following = {a: b for (a, b) in count if (b, a) not in count}
    start = min(following)
    loop = [start]
    while following[loop[-1]] != start:
        loop.append(following[loop[-1]])
    if len(loop) != len(following):
        raise ValueError("the specimen's grid cells do not make one disc")
    return np.asarray(loop)


def _relax(xy: np.ndarray, quads: list[list[int]], rim: np.ndarray, radius: float, band: float) -> np.ndarray:
    """``xy`` with the vertices beyond ``band`` moved towards the mean of their edge
    neighbours, the ``rim`` ones kept on the circle."""
    neighbours: list[set[int]] = [set() for _ in range(len(xy))]
    for q in quads:
        for a, b in zip(q, q[1:] + q[:1], strict=True):
            neighbours[a].add(b)
            neighbours[b].add(a)
    moving = np.flatnonzero(np.linalg.norm(xy, axis=1) > band)
    lists = [sorted(neighbours[v]) for v in moving]
    on_rim = np.isin(moving, rim)
    xy = xy.copy()
    for _ in range(RELAX_PASSES):
        mean = np.array([xy[nb].mean(axis=0) for nb in lists])
        length = np.linalg.norm(mean[on_rim], axis=1, keepdims=True)
        mean[on_rim] *= radius / length
        xy[moving] = mean
    return xy


def drape_scale(settings: ClothParams, rig: DrapeRig) -> float:
    """What the rig multiplies mass and bending by: its mass scale, or less where the scaled
    bending (or its group maximum) would pass Blender's 10000; at a smaller scale the
    solver's noise weighs more against the weight (``DrapeRig.mass_scale``)."""
    largest = max(settings.bending_stiffness, settings.bending_stiffness_max)
    return rig.mass_scale if largest <= 0.0 else min(rig.mass_scale, BENDING_LIMIT / largest)


def drape_settings(settings: ClothParams, rig: DrapeRig) -> ClothParams:
    """The settings the rig simulates: ``scaled_statics`` at :func:`drape_scale` (mass and
    bending times the scale; tension, compression and shear too, but no higher than Blender's
    defaults), the rig's air damping and quality, and none of the fitted scene's colliders
    or force fields. Gravity stays the settings' but must point down -z, across the flat
    specimen.

    At Blender's defaults the in-plane stiffnesses stay as given, holding up a specimen that
    weighs the scale times more: its hanging ring stretches by a percent or so where an
    unscaled one would not (a near-rigid one reads up to 1.03), and they move the reading by
    up to 0.03 (10 mm edges, quality 10: shear 5, 50, 500 read 0.513, 0.540, 0.547 at
    bending 0.003 and 0.843, 0.812, 0.824 at 0.01; tension 15, 150, 1500 read 0.513, 0.541,
    0.546 and 0.843, 0.844, 0.862), mostly by a change in the number of folds. A real
    fabric's are a hundred times softer (``tensile.py``) and are raised to those defaults:
    left soft, the scaled weight would stretch the ring like a knit. Scaling them all the
    way (exact statics) was measured and refused: with tension 15 Blender's 10000 caps the
    scale at 667, where the specimen swings for hundreds of frames (its coefficient between
    0.76 and 0.98 at quality 5), and at a scale of 100 it is still creeping down after 400
    frames."""
    gx, gy, gz = settings.gravity
    if gx != 0.0 or gy != 0.0 or not gz < 0.0:
        raise ValueError(f"the drape rig needs gravity along -z, got {settings.gravity}")
    return scaled_statics(settings, drape_scale(settings, rig)).replace(
        air_damping=rig.air_damping,
        quality=settings.quality if rig.quality is None else rig.quality,
        colliders=(),
        force_fields=(),
    )


def drape_settle(
    next_window: Callable[[int], np.ndarray], mesh: ClothMesh, rig: DrapeRig, scale: float = math.nan
) -> DrapeRunReading:
    """The window rule every run of the rig reads by, whichever solver drapes the specimen.

    ``next_window(n)`` runs the specimen on by ``n`` frames and gives its positions over them,
    (n, N, 3), support centred on the origin. Windows of ``rig.window_frames`` are run until
    the coefficient of a window's mean positions differs from the last window's by less than
    ``rig.settle_coefficient``, or another window would pass ``rig.frame_limit``; the reading
    is the last window's. ``scale`` is only passed on to the reading."""
    window = rig.window_frames
    if window < 2 or rig.frame_limit < 2 * window:
        raise ValueError("a window of >= 2 frames and a frame limit of at least two windows are needed")

    def read(positions: np.ndarray) -> DrapeReading:
        if positions.shape != (window, mesh.vertex_count, 3):
            raise ValueError(
                f"a window of {window} frames of ({mesh.vertex_count}, 3) positions is needed, "
                f"got {positions.shape}"
            )
        # positions, not per-frame readings, are averaged: one outline per window, and the
        # trembling is small beside the folds
        return drape_reading(
            positions.mean(axis=0), mesh.edges, np.zeros(2), rig.support_radius_m, rig.specimen_radius_m
        )

    def moved(reading: DrapeReading, previous: DrapeReading | None) -> float:
        return reading.coefficient - (math.nan if previous is None else previous.coefficient)

    _, reading, drift, settled, frames = settle_windows(
        next_window, window, rig.frame_limit, read, moved, rig.settle_coefficient
    )
    return DrapeRunReading(
        coefficient=reading.coefficient,
        nodes=reading.nodes,
        shadow_area_m2=reading.shadow_area_m2,
        settled=bool(settled),
        frames=frames,
        drift=float(drift),
        scale=scale,
    )


def drape_mean(readings: Sequence[DrapeRunReading]) -> DrapeRunReading:
    """One reading of the same specimen draped from several starts: the mean coefficient
    and shadow, the nodes of the start whose coefficient is the median, settled only where
    every start settled, and each start's coefficient (``spread``)."""
    if not readings:
        raise ValueError("a mean of drape readings needs at least one")
    coefficients = tuple(r.coefficient for r in readings)
    middle = sorted(readings, key=lambda r: r.coefficient)[(len(readings) - 1) // 2]
    return DrapeRunReading(
        coefficient=float(np.mean(coefficients)),
        nodes=middle.nodes,
        shadow_area_m2=float(np.mean([r.shadow_area_m2 for r in readings])),
        settled=all(r.settled for r in readings),
        frames=max(r.frames for r in readings),
        drift=max((r.drift for r in readings), key=abs),
        scale=readings[0].scale,
        coefficients=coefficients,
    )


def run_drape(
    settings: ClothParams,
    rig: DrapeRig | None = None,
    device: str = "cpu",
    precision: str = "float64",
) -> DrapeRunReading:
    """Drape the specimen of ``rig`` with the cloth ``settings`` (a fabric's, at its real
    vertex mass: the rig scales it) in this project's model from each of the rig's lifts
    (``cantilever.lifted_windows``), each read by :func:`drape_settle`; their
    :func:`drape_mean`."""
    rig = rig or DrapeRig()
    mesh = drape_specimen(rig)
    scale = drape_scale(settings, rig)
    # a GPU runs the starts as one batch; a CPU each on a core of its own (lifted_windows)
    apart = wp.get_device(device).is_cpu and len(rig.lifts_m) > 1 and not settings.use_self_collision
    starts = lifted_windows(mesh, drape_settings(settings, rig), rig.lifts_m, device, precision, not apart)

    def settle(next_window: Callable[[int], np.ndarray]) -> DrapeRunReading:
        return drape_settle(next_window, mesh, rig, scale)

    if not apart:
        return drape_mean([settle(next_window) for next_window in starts])
    # Warp's CPU graph capture is process-wide (``capture``): each start records its graphs
    # in its first window, alone; the windows after it replay them side by side
    first = [next_window(rig.window_frames) for next_window in starts]

    def settle_beside(m: int) -> DrapeRunReading:
        ran = [first[m]]

        def next_window(count: int) -> np.ndarray:
            return ran.pop() if ran and len(ran[0]) == count else starts[m](count)

        with side_by_side():
            return settle(next_window)

    with ThreadPoolExecutor(max_workers=min(len(starts), cpu_cores())) as pool:
        return drape_mean(list(pool.map(settle_beside, range(len(starts)))))


def run_drapes(
    settings: Sequence[ClothParams],
    rig: DrapeRig | None = None,
    device: str = "cpu",
    precision: str = "float64",
    together: bool | None = None,
) -> list[DrapeRunReading]:
    """:func:`run_drape`'s reading at each of ``settings``, each the same. ``together``
    (default: on a GPU) runs them as one batch, every settings' lifts its members, until
    the slowest settles (on the H200 four settings took 2.2x one's time: 400 frames against
    250, each 1.4x one setting's). Otherwise, or where they cannot share a batch, one after
    the other (on a CPU each with its lifts side by side)."""
    rig = rig or DrapeRig()
    if together is None:
        together = not wp.get_device(device).is_cpu
    if len(settings) > 1 and together:
        mesh = drape_specimen(rig)
        scaled = [drape_settings(s, rig) for s in settings]
        batched = lifted_batch(mesh, scaled, rig.lifts_m, device, precision)
        if batched is not None:
            return [
                drape_mean([drape_settle(w, mesh, rig, drape_scale(s, rig)) for w in starts])
                for s, starts in zip(settings, batched, strict=True)
            ]
    return [run_drape(s, rig, device, precision) for s in settings]
