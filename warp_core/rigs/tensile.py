"""Strip tensile rigs in Blender's cloth model: a straight strip (elongation at a load ->
``tension_stiffness``) and a bias strip cut at 45 deg to the grid (-> ``shear_stiffness``),
read as a lab reads them: the elongation (%) at a load per width, by default Kawabata's
KES-FB1 EMT (500 gf/cm = 490.3 N/m). Blender scales weights by 1e-3 against its springs, so
``tension_stiffness`` is a thousandth of the newtons per unit strain a spring carries: EMT 3 %
on 10 mm quads is a tension near 0.15, a hundredth of Blender's default 15.

* **The load is the strip's own weight.** Blender's cloth has no point force and one vertex
  mass for all vertices, so no clamp or end weight can be carried the same way in both
  solvers. The strip hangs from its clamped (pinned) top, and the rig sets the vertex mass so
  that it is loaded as by the lab load at its end: a chain whose vertices weigh ``w_v`` at
  depths ``d_v`` drops at its bottom as under an end load ``sum(w_v d_v) / gauge`` (the
  tension at a depth is the weight below it), Blender's springs being linear in the length:
  for equal rows the hanging weight times (N + 1) / 2N. Exact for chains alone; with shear
  springs the strip's contraction across, held at the clamp where a hanging strip is loaded
  most, makes it read 0.3-6 % short of an end-loaded one (a static solve of its springs).
  The load per width is put on the width of sheet the strip's load-carrying springs stand for
  (:func:`loaded_width`): a strip of chains alone reads exactly ``1e-3 load edge / tension``.
* **The bias strip** is the quad grid turned 45 deg and cut along whole quads, its long sides
  zigzags: a fill of triangles would add structural springs along the strip (stiff in
  tension, what a bias test keeps out) and change Blender's mean structural length (its
  springs' stiffness is per that length). The grid edges run at +-45 deg, each quad's
  diagonals (shear springs) along and across the strip. Pulled on the bias a sheet trellises:
  the edges turn unstretched and the diagonals along the pull carry the load, so the strip
  reads about ``1e-3 load edge / (2 shear)``, less where the clamp holds the trellis back.

The strip does not stop dead (its bottom moves up to 2 micrometres a frame once settled), so
the reading is the window mean of the bottom row's drop, settled once that moves by less than
a fraction of itself from one window to the next.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..mesh import ClothMesh
from ..models.blender_cloth.params import ClothParams
from .cantilever import model_windows, settle_windows

__all__ = [
    "KES_LOAD_N_PER_M",
    "StripFit",
    "StripReading",
    "StripRig",
    "fit_shear",
    "fit_tension",
    "linear_elongation",
    "loaded_width",
    "run_strip",
    "strip_elongation",
    "strip_mesh",
    "strip_reading",
    "strip_settings",
    "strip_vertex_mass",
]

KES_LOAD_N_PER_M = 500.0 * 9.80665e-3 / 1e-2  # KES-FB1 EMT: 500 gf per cm of width
FORCE_SCALE = 1e-3  # Blender's gravity against its springs (time counted in frames)


@dataclass(frozen=True)
class StripRig:
    """A strip tensile rig's geometry, load and run: made by the caller (the fits, the tests,
    the Blender rig), read by :func:`strip_mesh`, :func:`strip_settings` and
    :func:`run_strip`.

    ``edge_m`` is the artist's mesh edge. Width and gauge count cells: quads for the straight
    strip, turned quads (diamonds ``edge sqrt 2`` wide and high) for the bias strip. A rig of
    the same cells reads the same at any edge with the stiffnesses in proportion to the edge,
    so a fitted stiffness moves to another mesh in proportion to its edge."""

    width_cells: int = 5
    gauge_cells: int = 20  # the clamp (top row) to the bottom row
    edge_m: float = 0.01
    bias: bool = False
    load_n_per_m: float = KES_LOAD_N_PER_M  # per metre of width
    # air damping shapes only the approach to rest: at Blender's default 1 bias strips settle
    # in 60-80 frames, at 10 they creep for 140-180 and the window reads 0.05 % short
    air_damping: float = 1.0
    quality: int | None = None  # substeps per frame; None: the settings'
    window_frames: int = 20
    # settled: the window mean elongation moved by less than this fraction of itself
    settle_fraction: float = 2e-3
    frame_limit: int = 400

    def __post_init__(self) -> None:
        # a bias strip one diamond wide would fall apart into a chain of single diamonds
        least_width = 2 if self.bias else 1
        for name, least in (("width_cells", least_width), ("gauge_cells", 2), ("window_frames", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}")
        for name in ("edge_m", "load_n_per_m", "settle_fraction"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0.0:
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not 0.0 <= self.air_damping <= 10.0:
            raise ValueError(f"air_damping must be within Blender's [0, 10], got {self.air_damping!r}")
        if self.frame_limit < self.window_frames:
            raise ValueError(f"frame_limit ({self.frame_limit}) must hold a window ({self.window_frames})")

    @property
    def gauge_m(self) -> float:  # the clamp to the bottom row, at rest
        return self.gauge_cells * self.edge_m * (math.sqrt(2.0) if self.bias else 1.0)


@dataclass(frozen=True)
class StripReading:
    """What the strip rig reads: made by :func:`strip_reading` (for :func:`run_strip` and the
    Blender runs of the rig), read by the fits, the tests and the measurements."""

    elongation: float  # the last window's mean bottom-row drop over the gauge (0.03: 3 %)
    settled: bool  # the window mean moved by less than the rig's fraction before the limit
    frames: int
    drift: float  # the last window's mean minus the one before, relative to the mean
    motion_m: float  # largest frame-to-frame move of the bottom row in the last window
    load_n: float  # the end load the strip's weight stands for (load per width x width)

    @property
    def elongation_percent(self) -> float:
        return 100.0 * self.elongation


def strip_mesh(rig: StripRig) -> tuple[ClothMesh, np.ndarray]:
    """The strip hanging in the x-z plane from the clamp (the line z = 0: the vertices on and
    above it pinned), its length down -z; and the bottom row's vertex indices (z = -gauge)."""
    w, n = rig.width_cells, rig.gauge_cells
    if not rig.bias:
        index = np.arange((w + 1) * (n + 1)).reshape(n + 1, w + 1)
        j, i = np.divmod(index.ravel(), w + 1)
        vertices = np.stack([i, 0 * i, -j], axis=1) * rig.edge_m
        quads = [
            [index[r, c], index[r + 1, c], index[r + 1, c + 1], index[r, c + 1]] for r, c in np.ndindex(n, w)
        ]
        return _pinned(vertices, quads), index[-1]
    # the turned grid: points (i, j) with i + j even, half a diamond (edge / sqrt 2) apart, and
    # a diamond around each (i, j) with i + j odd. The clamp holds the top zigzag (rows 0 and
    # 1): pinning the diamonds' top tips alone would let the first row turn about them
    step = rig.edge_m / math.sqrt(2.0)
    centres = [(i, j) for j in range(1, 2 * n + 1) for i in range(1, 2 * w) if (i + j) % 2 == 1]
    used = {(i + di, j + dj) for i, j in centres for di, dj in ((0, -1), (-1, 0), (0, 1), (1, 0))}
    points = sorted(used, key=lambda p: (p[1], p[0]))
    index_of = {p: k for k, p in enumerate(points)}
    # shifted up a row so that the clamp line (row 1) is z = 0 and the gauge ends at row 2n + 1
    vertices = np.array([(i * step, 0.0, (1 - j) * step) for i, j in points])
    quads = [
        [index_of[(i, j - 1)], index_of[(i - 1, j)], index_of[(i, j + 1)], index_of[(i + 1, j)]]
        for i, j in centres
    ]
    bottom = np.array([index_of[p] for p in points if p[1] == 2 * n + 1])
    return _pinned(vertices, quads), bottom


def _pinned(vertices: np.ndarray, quads: list[list[int]]) -> ClothMesh:
    pins = (vertices[:, 2] > -1e-12).astype(np.float64)  # the clamp: all at or above z = 0
    return ClothMesh.from_polygons(vertices, [[int(v) for v in q] for q in quads], pin_weights=pins)


def loaded_width(rig: StripRig) -> float:
    """The width of fabric the strip stands for: its springs that carry the pull, times
    their spacing in a sheet. Straight: ``width + 1`` chains along the pull, an edge apart.
    Bias: the diamonds' diagonals along the pull, ``width - 1`` and ``width`` of them in
    alternate rows (the zigzag sides' half diamonds carry none), a diamond (edge sqrt 2) apart."""
    if rig.bias:
        return (rig.width_cells - 0.5) * rig.edge_m * math.sqrt(2.0)
    return (rig.width_cells + 1) * rig.edge_m


def strip_vertex_mass(rig: StripRig, gravity: float = 9.81) -> tuple[float, float]:
    """The vertex mass (kg) that loads the strip as the rig's load at its end would, and that
    end load (N), the load per width times :func:`loaded_width`."""
    mesh, _ = strip_mesh(rig)
    depth = -mesh.vertices[mesh.pin_weights == 0.0, 2]
    load = rig.load_n_per_m * loaded_width(rig)
    return load * rig.gauge_m / (gravity * float(depth.sum())), load


def strip_settings(settings: ClothParams, rig: StripRig) -> ClothParams:
    """The settings the rig simulates: the fabric's stiffnesses and damping with the rig's
    vertex mass (the load: a fabric's own weight is a thousandth of it), air damping and
    quality, no colliders or force fields. Gravity must point down -z, along the strip."""
    gx, gy, gz = settings.gravity
    if gx != 0.0 or gy != 0.0 or not gz < 0.0:
        raise ValueError(f"the strip rig needs gravity along -z, got {settings.gravity}")
    mass, _ = strip_vertex_mass(rig, -gz)
    return settings.replace(
        mass=mass,
        air_damping=rig.air_damping,
        quality=settings.quality if rig.quality is None else rig.quality,
        colliders=(),
        force_fields=(),
    )


def linear_elongation(settings: ClothParams, rig: StripRig) -> float:
    """The small-strain elongation (a fraction) of a sheet of the rig's springs under the
    rig's load per width. Straight: the springs along the pull and each cell's diagonals, which
    the sheet's contraction across partly relaxes (it balances ``C e_y + S (e_x + e_y) = 0``):
    ``1e-3 load edge / (T + S C / (C + S))``. Bias: the grid trellises, its edges unstretched,
    the diagonals along the pull carry it: ``1e-3 load edge / (2 S)``. Infinite: nothing does."""
    t, c, s = settings.tension_stiffness, settings.compression_stiffness, settings.shear_stiffness
    stiffness = 2.0 * s if rig.bias else t + (s * c / (c + s) if c + s > 0.0 else 0.0)
    return FORCE_SCALE * rig.load_n_per_m * rig.edge_m / stiffness if stiffness > 0.0 else math.inf


def strip_elongation(positions: np.ndarray, rig: StripRig) -> np.ndarray:
    """The elongation of each frame of ``positions`` (frames, N, 3): the bottom row's mean
    drop below its rest height (-gauge) over the gauge."""
    z = np.asarray(positions, dtype=np.float64)[:, strip_mesh(rig)[1], 2].mean(axis=1)
    return (-z - rig.gauge_m) / rig.gauge_m


def strip_reading(next_window: Callable[[int], np.ndarray], rig: StripRig) -> StripReading:
    """The window rule every run of the rig reads by, whichever solver hangs the strip.

    ``next_window(n)`` runs the strip on by ``n`` frames and gives its positions over them,
    (n, N, 3). Windows of ``rig.window_frames`` are run until a window's mean elongation has
    moved by less than ``rig.settle_fraction`` of itself since the last window's, or another
    window would pass ``rig.frame_limit``; the reading is the last window's mean."""
    _, bottom = strip_mesh(rig)  # for the motion
    window = rig.window_frames

    def mean_elongation(positions: np.ndarray) -> float:
        if positions.ndim != 3 or len(positions) != window:
            raise ValueError(f"next_window({window}) gave {positions.shape}, not ({window}, N, 3)")
        return float(strip_elongation(positions, rig).mean())

    def relative(mean: float, previous: float | None) -> float:
        return math.inf if previous is None else abs(mean - previous) / max(abs(mean), 1e-12)

    positions, mean, drift, settled, frames = settle_windows(
        next_window,
        window,
        rig.frame_limit,
        mean_elongation,
        relative,
        rig.settle_fraction,
        hopeless=lambda mean: not math.isfinite(mean),
    )
    motion = float(np.linalg.norm(np.diff(positions[:, bottom], axis=0), axis=2).max())
    return StripReading(mean, settled, frames, drift, motion, rig.load_n_per_m * loaded_width(rig))


def run_strip(
    settings: ClothParams,
    rig: StripRig | None = None,
    device: str = "cpu",
    precision: str = "float64",
) -> StripReading:
    """Hang the strip of ``rig`` with the fabric's cloth ``settings`` (stiffnesses; the rig
    sets the mass) in this project's model and read it by :func:`strip_reading`."""
    rig = rig or StripRig()
    mesh, _ = strip_mesh(rig)
    return strip_reading(model_windows(mesh, strip_settings(settings, rig), device, precision), rig)


@dataclass(frozen=True)
class StripFit:
    """The stiffness :func:`fit_tension` or :func:`fit_shear` found and the rig's readings
    behind it: made by them, read by the caller and the tests. ``outcome``: ``"matched"`` (the
    rig reads the elongation within 1 %, settled), ``"unreachable"`` (no value in Blender's
    [0, 10000] reaches it: ``reading`` is the nearest), ``"unsettled"`` (the nearest reading's
    strip had not settled) or ``"stalled"`` (the runs ran out short of 1 %)."""

    target_percent: float
    field: str  # "tension_stiffness" or "shear_stiffness"
    settings: ClothParams  # the fabric's settings with the fitted value(s); its own mass
    rig: StripRig
    reading: StripReading  # at the fitted value
    outcome: str
    seconds: float
    history: tuple[tuple[float, StripReading], ...]  # every rig run's (value, reading)

    @property
    def runs(self) -> int:
        return len(self.history)

    @property
    def stiffness(self) -> float:
        return float(getattr(self.settings, self.field))

    @property
    def error(self) -> float:  # the reading over the requested elongation, minus 1
        return self.reading.elongation_percent / self.target_percent - 1.0


ELONGATION_RANGE_PERCENT = (0.05, 60.0)  # a firm interlining to a loose knit at the EMT load
TOLERANCE, AIM, AIM_RUNS, MAX_RUNS = 0.01, 0.003, 3, 8
# the search's floor (Blender's 0 is no step in log): bias strips read 37-41 % there
STIFFNESS_FLOOR, STIFFNESS_CEILING = 1e-3, 10000.0
# elongation ~ 1 / stiffness: the first step's slope in log-log; the secants are held to
# [-2, -0.3] so that two readings a rounding apart cannot throw a step far off
LAW_SLOPE, SLOPE_RANGE = -1.0, (-2.0, -0.3)


def fit_tension(
    elongation_percent: float,
    settings: ClothParams,
    rig: StripRig | None = None,
    compression: bool = True,
    device: str = "cpu",
    precision: str = "float64",
) -> StripFit:
    """The ``tension_stiffness`` (and ``compression_stiffness``, unless ``compression`` is
    False: then the settings' stays) at which the straight strip of ``rig`` reads
    ``elongation_percent`` at its load; the other settings (shear: it moves the reading) stay."""
    rig = rig or StripRig()
    if rig.bias:
        raise ValueError("fit_tension needs a straight strip (bias=False); a bias strip reads the shear")
    fields = ("tension_stiffness", "compression_stiffness")[: 2 if compression else 1]
    return _fit(elongation_percent, fields, settings, rig, device, precision)


def fit_shear(
    bias_elongation_percent: float,
    settings: ClothParams,
    rig: StripRig | None = None,
    device: str = "cpu",
    precision: str = "float64",
) -> StripFit:
    """The ``shear_stiffness`` at which the bias strip of ``rig`` (default: the default rig cut
    on the bias) reads ``bias_elongation_percent`` at its load; tension and compression stay
    the settings' (they move the reading a little: the clamp holds the trellis back)."""
    rig = rig or StripRig(bias=True)
    if not rig.bias:
        raise ValueError("fit_shear needs a bias strip (bias=True); a straight strip reads the tension")
    return _fit(bias_elongation_percent, ("shear_stiffness",), settings, rig, device, precision)


def _fit(percent: float, fields: tuple[str, ...], base: ClothParams, rig: StripRig, *run: str) -> StripFit:
    """Secant steps in log(elongation) against log(value) of ``fields`` (set alike) from the
    sheet's linear answer."""
    lo_p, hi_p = ELONGATION_RANGE_PERCENT
    if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not lo_p <= percent <= hi_p:
        raise ValueError(f"the elongation {percent!r} % is outside the plausible [{lo_p:g}, {hi_p:g}] %")
    start = time.perf_counter()

    def at(value: float) -> ClothParams:
        return base.replace(**dict.fromkeys(fields, value))

    target = percent / 100.0
    # the first value: the sheet's linear answer (~ 1 / value, so its answer at 1 over the target)
    value = _clamp(linear_elongation(at(1.0), rig) / target)
    history: list[tuple[float, StripReading]] = []
    outcome = "stalled"
    for _ in range(MAX_RUNS):
        reading = run_strip(at(value), rig, *run)
        history.append((value, reading))
        miss = abs(reading.elongation / target - 1.0) if math.isfinite(reading.elongation) else math.inf
        if miss <= AIM or (miss <= TOLERANCE and len(history) >= AIM_RUNS):
            outcome = "matched" if reading.settled else "unsettled"
            break
        if miss == math.inf or reading.elongation <= 0.0:
            proposal = value * 4.0  # torn or risen: far too soft
        else:
            proposal = value * (target / reading.elongation) ** (1.0 / _slope(history))
        clamped = _clamp(proposal)
        if clamped != proposal and clamped == value:
            outcome = "unreachable"  # already at Blender's bound (or the floor) and still short
            break
        value = clamped
    best_value, best = min(history, key=lambda run: _miss(run[1], target))
    if outcome == "stalled":
        if not best.settled:
            outcome = "unsettled"
        elif abs(best.elongation / target - 1.0) <= TOLERANCE:
            outcome = "matched"
    seconds = time.perf_counter() - start
    return StripFit(float(percent), fields[0], at(best_value), rig, best, outcome, seconds, tuple(history))


def _clamp(value: float) -> float:
    return min(max(value, STIFFNESS_FLOOR), STIFFNESS_CEILING)


def _miss(reading: StripReading, target: float) -> float:
    # a reading's log distance from the target; unsettled ones after settled, none last
    e = reading.elongation
    if not math.isfinite(e) or e <= 0.0:
        return math.inf
    return abs(math.log(e / target)) + (0.0 if reading.settled else 10.0)


def _slope(history: list[tuple[float, StripReading]]) -> float:
    # d log elongation / d log value through the last two readings, the law's until two differ
    points = [(v, r.elongation) for v, r in history if math.isfinite(r.elongation) and r.elongation > 0.0]
    if len(points) >= 2:
        (v0, e0), (v1, e1) = points[-2], points[-1]
        if abs(math.log(v1 / v0)) > 1e-3:
            return min(max(math.log(e1 / e0) / math.log(v1 / v0), SLOPE_RANGE[0]), SLOPE_RANGE[1])
    return LAW_SLOPE
