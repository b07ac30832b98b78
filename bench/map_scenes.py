"""The scenes of the weight-map benchmark (``bench/maps.py``): drawn from a seed, with their
painted regions and hidden stiffness maps (no bpy, no Warp).

Every scene comes from its own generator, seeded by (seed, mode, index), so region scene 3
is the same whether 3 or 10 are made. A scene is a square sheet lying flat (Blender's grid,
centred on the origin) that is released and hangs under gravity from its pins; the pin
layout cycles with the index (one edge row, two corners, an edge row on an object that
moves and turns), and so does the region layout. Geometry below is in units of the sheet's
side (coordinates from -0.5 to 0.5), so a layout means the same on every size.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from robustness_scenes import PinMotion, draw_motion

# Hidden stiffness ranges (log-uniform) by map kind, and the contrast between the stiffest
# and the softest part of a map: at least 3x, so a uniform value cannot match the targets
RANGES: dict[str, tuple[float, float]] = {"structural": (2.0, 60.0), "bending": (0.05, 20.0)}
CONTRAST = (3.0, 8.0)
PIN_KINDS = ("one_row", "two_corners", "animated_object")
REGION_LAYOUTS = ("halves", "thirds", "band", "disc")
FREE_SHAPES = ("band", "gradient", "bump")
GRID_RANGE = (8, 14)  # vertices per side
# the cloth's vertex mass under a structural map (Blender's default 0.3 kg): heavier, so the
# load stretches the sheet enough that the map's soft and stiff parts differ by millimetres (at
# 0.3 kg a 4x contrast moved some sheets by under 1 mm RMS from their best uniform value). A
# bending map keeps Blender's default: weight flattens folds and hides the bending (at 0.24
# and 1.1 with 1 kg the best uniform bending replayed within 0.6 mm)
MASS_RANGE_KG = (0.5, 1.2)
BENDING_MASS_KG = 0.3
SIZE_RANGE_M = (0.6, 1.5)
QUALITY = 5
LAST_FRAME_RANGE = (20, 40)
TARGET_COUNT = (2, 4)
FIRST_TARGET = 8  # targets lie between this frame and the last one (which is always one)
BENDING_EVERY = 5  # every fifth region scene (index 4, 9, ...) maps bending, the rest structural
SUCCESS_RMSE_M = 1e-3
REGION_TOLERANCE = 0.05  # a determined region's value within 5 % of the truth


@dataclass
class MapScene:
    """One drawn scene: made by :func:`draw_region_scene` / :func:`draw_free_scene`, read by
    the Blender side (``map_blender``: building, painting, the hidden map) and the report.

    ``layout`` is a region layout (``REGION_LAYOUTS``) for a region scene or a smooth shape
    (``FREE_SHAPES``) for a free one; ``borders`` are positions along ``axis`` (0: x, 1: y)
    in units of the side; ``width`` is a soft border's (or a band's, bump's) width, 0 for a
    hard border; ``truth`` holds region -> stiffness, or "low" and "high" of a free map."""

    name: str
    mode: str  # "regions" or "free"
    kind: str  # "structural" or "bending"
    grid: int
    size_m: float
    mass_kg: float  # the cloth's vertex mass
    pins: str
    target_frames: list[int]
    layout: str
    axis: int
    borders: list[float]
    width: float
    centre: tuple[float, float]
    radius: float
    truth: dict[str, float]
    quality: int = QUALITY
    motion: PinMotion | None = None

    @property
    def last_frame(self) -> int:
        return max(self.target_frames)

    @property
    def spacing(self) -> float:
        """The grid's spacing in units of the side."""
        return 1.0 / (self.grid - 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MapScene:
        fields = dict(data)
        fields["centre"] = tuple(fields["centre"])
        if fields.get("motion") is not None:
            m = fields["motion"]
            fields["motion"] = PinMotion(tuple(m["offset_m"]), m["turn_rad"], m["end_frame"])
        return cls(**fields)


def log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def significant(value: float, digits: int = 4) -> float:
    return float(f"{value:.{digits}g}")


def snapped(position: float, grid: int) -> float:
    """``position`` moved to the nearest midpoint between two grid lines: a hard border
    then never passes through a vertex."""
    k = round((position + 0.5) * (grid - 1) - 0.5)
    return (min(max(k, 0), grid - 2) + 0.5) / (grid - 1) - 0.5


def draw_common(rng: np.random.Generator, index: int, kind: str) -> dict[str, Any]:
    """Size, mass, pins and frames: what region and free scenes draw alike."""
    pins = PIN_KINDS[index % len(PIN_KINDS)]
    last = int(rng.integers(LAST_FRAME_RANGE[0], LAST_FRAME_RANGE[1] + 1))
    count = int(rng.integers(TARGET_COUNT[0], TARGET_COUNT[1] + 1))
    earlier = rng.choice(np.arange(FIRST_TARGET, last), count - 1, replace=False)
    grid = int(rng.integers(GRID_RANGE[0], GRID_RANGE[1] + 1))
    size = round(log_uniform(rng, *SIZE_RANGE_M), 3)
    mass = round(log_uniform(rng, *MASS_RANGE_KG), 3)  # drawn for every scene: the draws stay aligned
    return {
        "grid": grid,
        "size_m": size,
        "mass_kg": BENDING_MASS_KG if kind == "bending" else mass,
        "pins": pins,
        "target_frames": sorted(int(f) for f in earlier) + [last],
        "motion": draw_motion(rng) if pins == "animated_object" else None,
    }


def draw_values(rng: np.random.Generator, kind: str, names: list[str]) -> dict[str, float]:
    """Hidden values: the softest and the stiffest part 3-8x apart (log-uniform), within the
    kind's range; further regions between them; in random order."""
    contrast = log_uniform(rng, *CONTRAST)
    low = log_uniform(rng, RANGES[kind][0], RANGES[kind][1] / contrast)
    values = [low, low * contrast] + [log_uniform(rng, low, low * contrast) for _ in names[2:]]
    order = rng.permutation(len(names))
    return {name: significant(values[k]) for name, k in zip(names, order, strict=True)}


def draw_region_scene(seed: int, index: int) -> MapScene:
    rng = np.random.default_rng([seed, 1, index])
    kind = "bending" if index % BENDING_EVERY == BENDING_EVERY - 1 else "structural"
    common = draw_common(rng, index, kind)
    grid = common["grid"]
    layout = REGION_LAYOUTS[index % len(REGION_LAYOUTS)]
    soft = bool(rng.random() < 0.5)
    width = rng.uniform(1.5, 3.0) / (grid - 1) if soft else 0.0
    axis = int(rng.integers(0, 2))
    centre, radius = (0.0, 0.0), 0.0
    if layout == "halves":
        borders = [rng.uniform(-0.15, 0.15)]
    elif layout == "thirds":
        borders = [-1.0 / 6.0 + rng.uniform(-0.05, 0.05), 1.0 / 6.0 + rng.uniform(-0.05, 0.05)]
    elif layout == "band":
        middle, half = rng.uniform(-0.15, 0.15), rng.uniform(0.12, 0.2)
        borders = [middle - half, middle + half]
    else:
        borders = []
        centre = (round(rng.uniform(-0.15, 0.15), 4), round(rng.uniform(-0.15, 0.15), 4))
        radius = round(rng.uniform(0.2, 0.3), 4)
    borders = [round(snapped(b, grid) if not soft else b, 6) for b in borders]
    names = region_names(layout)
    return MapScene(
        name=f"regions_{index:02d}",
        mode="regions",
        kind=kind,
        layout=layout,
        axis=axis,
        borders=borders,
        width=round(width, 6),
        centre=centre,
        radius=radius,
        truth=draw_values(rng, kind, names),
        **common,
    )


def draw_free_scene(seed: int, index: int) -> MapScene:
    rng = np.random.default_rng([seed, 2, index])
    common = draw_common(rng, index, "structural")
    shape = FREE_SHAPES[index % len(FREE_SHAPES)]
    axis = int(rng.integers(0, 2))
    centre = (round(rng.uniform(-0.2, 0.2), 4), round(rng.uniform(-0.2, 0.2), 4))
    width = round(rng.uniform(0.15, 0.3), 4)  # a band's or a bump's
    angle = rng.uniform(0.0, 2.0 * math.pi)  # a gradient's direction
    low_high = draw_values(rng, "structural", ["low", "high"])
    truth = dict(zip(("low", "high"), sorted(low_high.values()), strict=True))
    return MapScene(
        name=f"free_{index:02d}",
        mode="free",
        kind="structural",
        layout=shape,
        axis=axis,
        borders=[round(angle, 6)] if shape == "gradient" else [],
        width=width,
        centre=centre,
        radius=width,
        truth=truth,
        **common,
    )


def region_names(layout: str) -> list[str]:
    if layout == "halves":
        return ["Part1", "Part2"]
    if layout == "thirds":
        return ["Part1", "Part2", "Part3"]
    return ["Band" if layout == "band" else "Disc", "Rest"]


def ramp(t: np.ndarray, border: float, width: float) -> np.ndarray:
    """The share beyond ``border`` along ``t``: 0 before it, 1 after, linear over ``width``."""
    if width <= 0.0:
        return (t > border).astype(np.float64)
    return np.clip(0.5 + (t - border) / width, 0.0, 1.0)


def region_weights(scene: MapScene, rest: np.ndarray) -> dict[str, np.ndarray]:
    """Each region's painted weight per vertex, from the rest positions (the sheet centred
    on the origin); the regions' weights add up to 1 at every vertex."""
    p = rest[:, :2] / scene.size_m
    names = region_names(scene.layout)
    if scene.layout == "disc":
        d = np.linalg.norm(p - np.asarray(scene.centre), axis=1)
        inside = 1.0 - ramp(d, scene.radius, scene.width)
        return {names[0]: inside, names[1]: 1.0 - inside}
    t = p[:, scene.axis]
    beyond = [np.ones(len(t))] + [ramp(t, b, scene.width) for b in scene.borders] + [np.zeros(len(t))]
    parts = [beyond[k] - beyond[k + 1] for k in range(len(beyond) - 1)]
    if scene.layout == "band":
        return {names[0]: parts[1], names[1]: parts[0] + parts[2]}
    return dict(zip(names, parts, strict=True))


def hidden_stiffness(scene: MapScene, rest: np.ndarray) -> np.ndarray:
    """The hidden stiffness per vertex: the regions' values blended as painted, or the
    free map's smooth shape between its low and high value."""
    if scene.mode == "regions":
        weights = region_weights(scene, rest)
        return sum(weights[name] * value for name, value in scene.truth.items())
    p = rest[:, :2] / scene.size_m
    if scene.layout == "gradient":
        angle = scene.borders[0]
        f = p @ np.array([math.cos(angle), math.sin(angle)])
    elif scene.layout == "band":
        f = np.exp(-(((p[:, scene.axis] - scene.centre[scene.axis]) / scene.width) ** 2))
    else:
        f = np.exp(-np.sum((p - np.asarray(scene.centre)) ** 2, axis=1) / (2.0 * scene.radius**2))
    f = (f - f.min()) / (f.max() - f.min())
    return scene.truth["low"] + (scene.truth["high"] - scene.truth["low"]) * f


def group_weights(stiffness: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(weights, base, Max) that make ``stiffness`` in Blender: base the smallest value, Max
    the largest, the weights between them."""
    low, high = float(stiffness.min()), float(stiffness.max())
    return (stiffness - low) / (high - low), low, high


@dataclass
class SceneRecord:
    """What the benchmark measured on one scene: made by ``bench/maps.py`` phase by phase,
    kept in ``records.json`` and read by the summary (``map_report``)."""

    name: str
    mode: str
    kind: str
    spec: dict[str, Any]
    vertices: int = 0
    motion_m: float = 0.0  # largest displacement of a vertex from rest at a target frame
    truth: dict[str, float] = field(default_factory=dict)
    fitted: dict[str, float] = field(default_factory=dict)  # region values (regions mode)
    determined: dict[str, bool] = field(default_factory=dict)
    outcome: str = ""
    outcome_reason: str = ""
    stop_reason: str = ""
    iterations: int = 0
    fit_rmse_m: float | None = None  # the fit's own model against the targets
    truth_model_rmse_m: float | None = None  # the fit's model at the hidden values
    replay_rmse_m: float | None = None  # Blender's cloth with the written map
    replay_max_m: float | None = None
    fit_s: float | None = None
    uniform_value: float | None = None
    uniform_outcome: str = ""
    uniform_fit_rmse_m: float | None = None
    uniform_replay_rmse_m: float | None = None  # Blender's cloth with the best uniform value
    uniform_fit_s: float | None = None
    smoothness: float | None = None  # free: the prior's strength the fit ran with
    correlation_determined: float | None = None  # free: fitted against hidden stiffness
    correlation_all: float | None = None
    undetermined: int = 0
    group: str = ""  # the vertex group the write-back filled
    # False where the best uniform value replays within 1 mm too: the map's match is no evidence,
    # and another scene is drawn in its place
    counted: bool = True
    error: str = ""
    seconds: float = 0.0
