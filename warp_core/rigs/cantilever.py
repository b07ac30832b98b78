"""The cantilever bending test (ASTM D1388 / BS 3356) in Blender's cloth model.

A strip lies along +x on a platform whose edge is the line x = 0, z = 0; the part on the
platform is pinned (the platform holds it flat, Peirce's clamped end) and the overhang hangs
free under gravity (-z). Once it has settled, the line from the platform edge to the tip
falls ``theta`` below the horizontal and Peirce's elastica gives the bending length
(``readings.bending_length``).

Two things of the solver shape the rig:

* **Mass scale.** At a real fabric's vertex mass (150 g/m^2 on 5 mm quads: 3.75 mg) the
  weights are a few 1e-8 N against springs of stiffness 15 and the solver's errors outweigh
  them: the strip does not hang (its tip even rises above the platform). The statics of an
  inextensible strip depend on bending / mass only, so the rig multiplies the vertex mass
  and the bending by one factor, ``mass_scale``. The in-plane stiffnesses must keep the
  heavier strip inextensible too: a real fabric's tension is soft (a 3 % stretch at
  Kawabata's load is a tension near 0.15 on 10 mm quads, ``tensile.py``), and left as it is
  under the scaled weight the strip stretches and reads nothing like the fabric (bending
  0.028 on 10 mm quads, tension 0.146, shear 0.023: its tip stands level, a "bending length"
  of 512 mm). So they are scaled too, but only up to Blender's defaults (tension and
  compression 15, shear 5: ``IN_PLANE_CEILING``), where the heavier strip stretches by
  under 1 % and Blender's own cloth reads what this model reads (0.55 %); scaled all the
  way (tension 15 000, held to 10 000) Blender reads 34.1 deg where this model reads 36.9.
  A shear scaled to far below its default is raised to it (``CantileverRig.shear_floor``).
* **No rest.** The solver keeps the strip trembling by a few tenths of a millimetre per
  frame about its resting shape however long it runs (with bending off too, at any quality
  from 3 to 40, and more, not less, with the CG tolerance tightened), so the rig reads the
  shape averaged over a window of frames and calls the strip settled when that average
  stops drifting, not when every frame stands still. A longer, heavier strip trembles
  more (a millimetre a frame on an 80 mm overhang of a 350 g/m^2 canvas) and needs longer
  windows (``fabric.fabric_rig``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from ..mesh import ClothMesh
from ..models import get_model
from ..models.blender_cloth.params import ALL_PARAMETER_NAMES, ClothParams
from .readings import bending_length, tip_angle

# Blender's defaults: the in-plane stiffnesses the rigs raise a soft fabric's to under the
# scaled weight (``scaled_statics``)
IN_PLANE_CEILING = {"tension_stiffness": 15.0, "compression_stiffness": 15.0, "shear_stiffness": 5.0}
IN_PLANE = tuple(name + suffix for name in IN_PLANE_CEILING for suffix in ("", "_max"))

__all__ = [
    "CantileverReading",
    "CantileverRig",
    "cantilever_strip",
    "lifted_windows",
    "model_windows",
    "rig_settings",
    "run_cantilever",
    "scaled_statics",
    "settle_reading",
    "settle_windows",
    "strip_centreline",
]


@dataclass(frozen=True)
class CantileverRig:
    """The cantilever rig's geometry and how long it runs: made by the caller (a fit's rig
    check, the tests, the bench script), read by :func:`cantilever_strip` and
    :func:`run_cantilever`.

    The mesh resolution is the artist's (Blender's bending stiffness acts per hinge, so the
    same fabric needs a different value at another resolution): ``edge_m`` is the quad
    edge length, and the width, platform length and overhang are whole numbers of edges.
    """

    width_m: float = 0.025  # the standards' 25 mm strip
    edge_m: float = 0.005
    platform_m: float = 0.02  # length resting (pinned) on the platform
    overhang_m: float = 0.045
    # vertex mass and bending stiffness are both multiplied by this (statics unchanged).
    # Measured on a 45 mm overhang at air damping 10: at 100 the strip still creeps down
    # after 1000 frames, at 10,000 it settles in 150 but trembles 3 mm a frame; at 1000 it
    # settles in about 350 frames trembling 0.2 mm a frame
    mass_scale: float = 1000.0
    # air damping does not change the resting shape, only how it is reached, so the rig
    # sets its own: at 1 the 50-frame means of the tip angle wander by +-1 deg about the
    # resting shape, at 10 (overdamped: a slower approach) by +-0.2 deg
    air_damping: float = 10.0
    # the scaled shear is held at least here (Blender's default). The test loads the quads'
    # shear little (a 150 g/m^2 strip, 50 mm overhang on 10 mm quads: 25.08 mm at shear 5,
    # 24.94 at 1, 24.90 at 0.1), but far below it the strip is a trellis that the solver's
    # tremble walks sideways and that never settles: at a drape fit's floor of 1e-6 (1e-3
    # scaled) the tip of an 80 mm canvas overhang wandered +-12 mm across in 4000 frames
    shear_floor: float = IN_PLANE_CEILING["shear_stiffness"]
    quality: int | None = None  # substeps per frame; None: the settings' quality
    # the tip's mean position over each window of frames is compared with the last window's:
    # on a settled 45 mm overhang successive 50-frame means move 1-3 micrometres a frame
    # (0.1-0.2 deg of tip angle), on one still creeping down at frame 100 over 200
    window_frames: int = 50
    settle_m_per_frame: float = 4e-6
    frame_limit: int = 1000

    def edges_along(self, length_m: float, what: str) -> int:
        """``length_m`` in whole edges (ValueError where it is not one)."""
        count = round(length_m / self.edge_m)
        if count < 1 or abs(count * self.edge_m - length_m) > 1e-9:
            raise ValueError(f"the {what} ({length_m} m) must be a whole number of {self.edge_m} m edges")
        return count


@dataclass(frozen=True)
class CantileverReading:
    """What the cantilever rig reads off a settled strip: made by :func:`settle_reading` (for
    :func:`run_cantilever` and the runs of Blender's own cloth in the Blender tests), read
    by the fabric fit's rig checks, the tests and the bench script."""

    overhang_m: float
    tip_angle_rad: float  # of the window-averaged centreline
    # Peirce's, from the overhang and tip angle; NaN where the tip is not below the platform
    # (an unscaled fabric's strip can even rise: its weight is below the solver's noise)
    bending_length_m: float
    settled: bool  # the windowed tip drifted less than the rig's tolerance before the limit
    frames: int  # frames simulated
    tip_motion_m: float  # largest tip motion from one frame to the next in the last window
    tip_drift_m: float  # the last window's mean tip minus the one before, per frame

    @property
    def tip_angle_deg(self) -> float:
        return math.degrees(self.tip_angle_rad)


def cantilever_strip(rig: CantileverRig) -> tuple[ClothMesh, np.ndarray]:
    """The strip as a quad mesh along +x (platform edge at x = 0, the platform's part at
    x <= 0 pinned with weight 1), and its vertex indices as (rows across the width, columns
    along x): ``grid[:, -1]`` is the tip edge."""
    across = rig.edges_along(rig.width_m, "width") + 1
    back = rig.edges_along(rig.platform_m, "platform length")
    along = back + rig.edges_along(rig.overhang_m, "overhang") + 1
    xs = (np.arange(along) - back) * rig.edge_m
    ys = (np.arange(across) - 0.5 * (across - 1)) * rig.edge_m
    grid = np.arange(across * along).reshape(across, along)
    vertices = np.zeros((across * along, 3))
    vertices[:, 0] = np.tile(xs, across)
    vertices[:, 1] = np.repeat(ys, along)
    quads = [
        [grid[j, i], grid[j, i + 1], grid[j + 1, i + 1], grid[j + 1, i]]
        for j in range(across - 1)
        for i in range(along - 1)
    ]
    # the edge column too: the platform holds the strip flat up to its edge
    pins = (np.arange(along) <= back).astype(np.float64)
    return ClothMesh.from_polygons(vertices, quads, pin_weights=np.tile(pins, across)), grid


def rig_settings(settings: ClothParams, rig: CantileverRig) -> ClothParams:
    """The settings the rig simulates: :func:`scaled_statics` at the rig's mass scale, the
    shear no lower than the rig's floor, the rig's air damping and quality, and none of the
    fitted scene's colliders or force fields (the rig is a scene of its own). Gravity stays
    the settings' but must point down -z, across the strip as it lies."""
    gx, gy, gz = settings.gravity
    if gx != 0.0 or gy != 0.0 or not gz < 0.0:
        raise ValueError(f"the cantilever rig needs gravity along -z, got {settings.gravity}")
    scaled = scaled_statics(settings, rig.mass_scale)
    shear = {name: max(getattr(scaled, name), rig.shear_floor) for name in IN_PLANE if "shear" in name}
    return scaled.replace(
        **shear,
        air_damping=rig.air_damping,
        quality=settings.quality if rig.quality is None else rig.quality,
        colliders=(),
        force_fields=(),
    )


def scaled_statics(settings: ClothParams, scale: float) -> ClothParams:
    """``settings`` with the vertex mass and bending (its group maximum too) times ``scale``,
    and the in-plane stiffnesses times ``scale`` but no higher than ``IN_PLANE_CEILING`` (nor
    lower than they were): the resting shape of the fabric under a weight ``scale`` times the
    solver's noise, the strip as inextensible as Blender's defaults keep it."""
    values = {
        name: max(value, min(value * scale, IN_PLANE_CEILING[name.removesuffix("_max")]))
        for name in IN_PLANE
        for value in [getattr(settings, name)]
    }
    return settings.replace(
        mass=settings.mass * scale,
        bending_stiffness=settings.bending_stiffness * scale,
        bending_stiffness_max=settings.bending_stiffness_max * scale,
        **values,
    )


def strip_centreline(positions: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The strip's centreline, the mean over its width, of ``positions`` (frames, N, 3) as
    (frames, columns, 3), platform end first (``grid`` from :func:`cantilever_strip`)."""
    return np.asarray(positions, dtype=np.float64)[:, grid].mean(axis=1)


def settle_windows(
    next_window: Callable[[int], np.ndarray],
    window: int,
    frame_limit: int,
    measure: Callable[[np.ndarray], Any],
    change: Callable[[Any, Any], float],
    tolerance: float,
    hopeless: Callable[[Any], bool] = lambda value: False,
) -> tuple[np.ndarray, Any, float, bool, int]:
    """The loop of every rig's window rule, whichever solver runs the cloth: windows of
    ``window`` frames (``next_window(n)``: the cloth run on by ``n`` frames, its data over
    them) are run until ``change(value, previous)`` (``previous`` None after the first) of
    the ``measure`` of a window's data is within ``tolerance`` (absolute), another window
    would pass ``frame_limit``, or the value is ``hopeless``. The last window's (data,
    value, change, settled, frames simulated)."""
    previous = None
    frames = 0
    while True:
        data = np.asarray(next_window(window), dtype=np.float64)
        frames += window
        value = measure(data)
        drift = change(value, previous)
        settled = bool(abs(drift) < tolerance)
        if settled or frames + window > frame_limit or hopeless(value):
            return data, value, drift, settled, frames
        previous = value


def settle_reading(next_window: Callable[[int], np.ndarray], rig: CantileverRig) -> CantileverReading:
    """The window rule every run of the rig reads by, whichever solver hangs the strip.

    ``next_window(n)`` runs the strip on by ``n`` frames and gives its centreline over them,
    (n, columns, 3) (:func:`strip_centreline`). Windows of ``rig.window_frames`` are run
    until a window's mean tip has moved less than ``rig.settle_m_per_frame`` a frame since
    the last window's, or another window would pass ``rig.frame_limit``; the tip angle and
    Peirce's bending length are read off the last window's mean centreline."""
    window = rig.window_frames
    if window < 2 or rig.frame_limit < window:
        raise ValueError("a window of >= 2 frames and a frame limit of at least one window are needed")

    def mean_tip(centre: np.ndarray) -> np.ndarray:
        if centre.ndim != 3 or len(centre) != window:
            raise ValueError(
                f"a window of {window} frames of (columns, 3) centrelines is needed, got {centre.shape}"
            )
        return centre[:, -1].mean(axis=0)

    def per_frame(tip: np.ndarray, previous: np.ndarray | None) -> float:
        return math.inf if previous is None else float(np.linalg.norm(tip - previous)) / window

    centre, _, drift, settled, frames = settle_windows(
        next_window, window, rig.frame_limit, mean_tip, per_frame, rig.settle_m_per_frame
    )
    motion = float(np.linalg.norm(np.diff(centre[:, -1], axis=0), axis=1).max())
    angle = tip_angle(centre.mean(axis=0), np.zeros(3))
    return CantileverReading(
        overhang_m=rig.overhang_m,
        tip_angle_rad=angle,
        bending_length_m=bending_length(rig.overhang_m, angle) if 0.0 < angle < 0.5 * math.pi else math.nan,
        settled=settled,
        frames=frames,
        tip_motion_m=motion,
        tip_drift_m=drift,
    )


def model_windows(
    mesh: ClothMesh,
    settings: ClothParams,
    device: str = "cpu",
    precision: str = "float64",
    lift_m: float = 0.0,
) -> Callable[[int], np.ndarray]:
    """A rig's cloth in this project's model as its window rules take it: ``next_window(n)``
    runs it on by ``n`` frames and gives the positions over them, (n, N, 3). Each window
    goes on from the last one's positions and velocities (bit for bit one long rollout), so
    a rig can stop as soon as its cloth has settled. ``lift_m``: the cloth and its pins
    start that far up along z (the positions given lowered by it again)."""
    sim = get_model("blender_cloth").build(mesh, settings, device, precision)
    up = np.array([0.0, 0.0, lift_m])
    held = None if lift_m == 0.0 else mesh.vertices + up
    x0 = sim.rest_positions if held is None else wp.array(held, dtype=sim.vec3, device=sim.device)
    state = {"x": x0, "v": None}

    def next_window(count: int) -> np.ndarray:
        goals = None if held is None else np.broadcast_to(held, (count + 1, *held.shape))
        rollout = sim.rollout(sim.start_frame + count, None, goals, state["x"], state["v"], keep_states=True)
        state["x"], state["v"] = rollout.state_x[-1], rollout.state_v[-1]
        return rollout.numpy()[1:] - up

    return next_window


def lifted_windows(
    mesh: ClothMesh,
    settings: ClothParams,
    lifts_m: tuple[float, ...],
    device: str = "cpu",
    precision: str = "float64",
    together: bool = True,
) -> list[Callable[[int], np.ndarray]]:
    """A rig's cloth started from each of ``lifts_m`` (the mesh and its pins lifted along z
    by so many metres: the same problem, rounded differently) in this project's model: one
    ``next_window`` per start as :func:`model_windows` gives, its positions lowered by its
    lift, each reading what its own run would, bit for bit.

    ``together``: the starts run as one batch (:func:`lifted_batch`). Otherwise, or where
    the scene cannot batch, each start is a :func:`model_windows` of its own; without self
    collisions (whose pair room may grow and need a new graph) those may run side by side
    in threads (on a CPU a batch runs its members one after the other anyway, and Warp's
    CPU kernels run without Python's lock)."""
    lifts = _lifts(lifts_m)
    batched = lifted_batch(mesh, [settings], lifts_m, device, precision) if together else None
    if batched is not None:
        return batched[0]
    return [model_windows(mesh, settings, device, precision, float(lift)) for lift in lifts]


def lifted_batch(
    mesh: ClothMesh,
    settings: list[ClothParams],
    lifts_m: tuple[float, ...],
    device: str = "cpu",
    precision: str = "float64",
) -> list[list[Callable[[int], np.ndarray]]] | None:
    """Each of ``settings`` started from each of ``lifts_m`` (as :func:`lifted_windows`),
    all as one batch whose launches they share (what a GPU wants): for each settings, one
    ``next_window`` per lift, each reading what its own run would, bit for bit. The batch
    runs on while any start asks for another window and keeps the windows a start has not
    read yet for it; call them one after the other. None where the scene cannot batch
    (pressure, self collisions, a dynamic mesh: ``batch.refusal``) or the settings differ in
    more than their continuous parameters."""
    lifts = _lifts(lifts_m)
    if not settings:
        raise ValueError("at least one set of cloth settings is needed")
    first = settings[0]
    sim = get_model("blender_cloth").build(mesh, first, device, precision)
    members = len(settings) * len(lifts)
    if sim.batch_width(members) < members:
        return None
    if any(s.replace(**{k: getattr(first, k) for k in ALL_PARAMETER_NAMES}) != first for s in settings[1:]):
        return None
    values = [{k: getattr(s, k) for k in ALL_PARAMETER_NAMES} for s in settings for _ in lifts]
    up = np.array([0.0, 0.0, 1.0])
    tiled = np.tile(lifts, len(settings))
    batch = sim.batch_windows(mesh.vertices[None] + tiled[:, None, None] * up, values)
    unread: list[list[np.ndarray]] = [[] for _ in range(members)]

    def start(m: int) -> Callable[[int], np.ndarray]:
        def next_window(count: int) -> np.ndarray:
            if not unread[m]:
                block = batch(count)
                for k, queue in enumerate(unread):
                    queue.append(block[k])
            window = unread[m].pop(0)
            if len(window) != count:
                raise ValueError(f"every start must ask for windows of one length: {count} and {len(window)}")
            return window - tiled[m] * up

        return next_window

    width = len(lifts)
    return [[start(k * width + j) for j in range(width)] for k in range(len(settings))]


def _lifts(lifts_m: tuple[float, ...]) -> np.ndarray:
    lifts = np.asarray(lifts_m, dtype=np.float64)
    if lifts.ndim != 1 or len(lifts) < 1 or not np.isfinite(lifts).all():
        raise ValueError(f"lifts_m must be one or more finite lifts in metres, got {lifts_m!r}")
    return lifts


def run_cantilever(
    settings: ClothParams,
    rig: CantileverRig | None = None,
    device: str = "cpu",
    precision: str = "float64",
) -> CantileverReading:
    """Hang the strip of ``rig`` with the cloth ``settings`` (a fabric's, at its real vertex
    mass: the rig scales it) in this project's model and read it by :func:`settle_reading`."""
    rig = rig or CantileverRig()
    mesh, grid = cantilever_strip(rig)
    positions = model_windows(mesh, rig_settings(settings, rig), device, precision)
    return settle_reading(lambda count: strip_centreline(positions(count), grid), rig)
