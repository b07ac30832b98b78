"""The scenes of the robustness benchmark and the records its phases exchange (no bpy, no Warp).

Every scene is drawn from its own generator, seeded by (seed, index), so scene 7 is the same
whether 10 or 40 scenes are made. Pin layout and quads/triangles cycle with the index, so any
ten consecutive scenes cover every combination of the two.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# Truth ranges (log-uniform) of the parameters a scene may fit; the rest stay at Blender's defaults.
RANGES: dict[str, tuple[float, float]] = {
    "tension_stiffness": (5.0, 150.0),
    "bending_stiffness": (0.05, 20.0),
    "air_damping": (0.2, 8.0),
    "tension_damping": (1.0, 40.0),
}
PARAMETERS = tuple(RANGES)
SHORT = {"tension_stiffness": "T", "bending_stiffness": "B", "air_damping": "A", "tension_damping": "D"}
# Blender's default tie "Compression = Tension" (the add-on's tie_compression).
TIES = {"compression_stiffness": "tension_stiffness"}
PIN_KINDS = ("one_row", "two_rows", "two_corners", "animated_object", "hooked_empty")
GRID_RANGE = (6, 20)  # vertices per side
SIZE_RANGE_M = (0.5, 2.0)
QUALITY_RANGE = (4, 10)
FRAME_RANGE = (10, 60)
SUCCESS_RMSE_M = 1e-3
TRUTH_RMSE_M = 1e-5  # the replay of the true values must be this close (sanity check)
# Relative change of the true values whose effect on Blender's own result measures how chaotic
# a scene is: where it moves the cloth by about a millimetre, no fit can promise 1 mm.
JITTER = 1e-6


@dataclass
class PinMotion:
    """How the pinned part moves: a straight move and a turn about z, from frame 1 to ``end_frame``."""

    offset_m: tuple[float, float, float]
    turn_rad: float
    end_frame: int


@dataclass
class SceneSpec:
    index: int
    grid: int  # vertices per side
    size_m: float  # side of the square sheet
    triangles: bool
    pins: str  # one of PIN_KINDS
    quality: int
    target_frames: list[int]
    fitted: list[str]  # free parameters (compression follows tension)
    truth: dict[str, float]  # true values of the fitted parameters and their followers
    motion: PinMotion | None = None  # animated pins only

    @property
    def name(self) -> str:
        return f"scene_{self.index:02d}"

    @property
    def last_frame(self) -> int:
        return max(self.target_frames)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SceneSpec:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        motion = fields.get("motion")
        if motion is not None:
            fields["motion"] = PinMotion(tuple(motion["offset_m"]), motion["turn_rad"], motion["end_frame"])
        return cls(**fields)


def log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def draw_motion(rng: np.random.Generator) -> PinMotion:
    """A move of 0.2-0.6 m, mostly sideways, and a turn of up to 0.6 rad, done by frame 15-40."""
    distance = rng.uniform(0.2, 0.6)
    heading = rng.uniform(0.0, 2.0 * math.pi)
    offset = (distance * math.cos(heading), distance * math.sin(heading), rng.uniform(-0.2, 0.2))
    turn = round(rng.uniform(-0.6, 0.6), 4)
    return PinMotion(tuple(round(c, 4) for c in offset), turn, int(rng.integers(15, 41)))


def draw_scene(seed: int, index: int) -> SceneSpec:
    rng = np.random.default_rng([seed, index])
    pins = PIN_KINDS[index % len(PIN_KINDS)]
    count = int(rng.integers(2, len(PARAMETERS) + 1))
    fitted = [PARAMETERS[k] for k in sorted(rng.choice(len(PARAMETERS), size=count, replace=False))]
    truth = {name: round(log_uniform(rng, *RANGES[name]), 4) for name in fitted}
    for follower, leader in TIES.items():
        if leader in truth:
            truth[follower] = truth[leader]
    n_frames = int(rng.integers(1, 4))
    choices = np.arange(FRAME_RANGE[0], FRAME_RANGE[1] + 1)
    frames = sorted(int(f) for f in rng.choice(choices, n_frames, replace=False))
    return SceneSpec(
        index=index,
        grid=int(rng.integers(GRID_RANGE[0], GRID_RANGE[1] + 1)),
        size_m=round(log_uniform(rng, *SIZE_RANGE_M), 3),
        triangles=(index // len(PIN_KINDS)) % 2 == 1,
        pins=pins,
        quality=int(rng.integers(QUALITY_RANGE[0], QUALITY_RANGE[1] + 1)),
        target_frames=frames,
        fitted=fitted,
        truth=truth,
        motion=draw_motion(rng) if pins in ("animated_object", "hooked_empty") else None,
    )


def draw_scenes(seed: int, count: int, first: int = 0) -> list[SceneSpec]:
    return [draw_scene(seed, k) for k in range(first, first + count)]


@dataclass
class GeneratedScene:
    """What ``generate`` wrote for one scene (``scenes.json``)."""

    spec: SceneSpec
    defaults: dict[str, float]  # Blender's default values of the fitted parameters: the fit's start
    motion_m: float  # largest displacement of a vertex from its rest position at a target frame
    max_stretch: float  # longest edge over its rest length at a target frame (a sign of a blow-up)
    vertex_count: int
    error: str = ""
    seconds: float = 0.0  # building the scene, Blender's run, export and save

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "spec": self.spec.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GeneratedScene:
        return cls(**{**data, "spec": SceneSpec.from_dict(data["spec"])})


@dataclass
class FitRecord:
    """One fit's outcome as the ``fit`` phase saw it (``fits.json``)."""

    index: int
    params: dict[str, float] = field(default_factory=dict)  # fitted values, tied followers included
    fit_s: float | None = None  # the fit's own time
    wall_s: float = 0.0  # the whole command, start-up included
    stop_reason: str = ""
    outcome: str | None = None  # the result's ``outcome`` where the fit reports one
    rmse_m: float | None = None  # the fit's own RMSE (its model against the targets)
    start_rmse_m: float | None = None  # the same at the start values (Blender's defaults)
    iterations: int | None = None
    # each determined parameter's reported matched range (factors about its fitted value)
    matched_ranges: dict[str, list[float]] = field(default_factory=dict)
    error: str = ""  # why there is no result


@dataclass
class ReplayRecord:
    """Blender's cloth run with the fitted (and, on request, the true) values (``replays.json``)."""

    index: int
    rmse_m: float | None = None
    max_error_m: float | None = None
    truth_rmse_m: float | None = None  # Blender with the true values (the pipeline check)
    truth_model_rmse_m: float | None = None  # the fit's model with the true values
    jitter_rmse_m: float | None = None  # Blender with the true values times (1 + JITTER)
    error: str = ""
    seconds: float = 0.0


def determined_ranges(identifiability: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each determined parameter's reported matched range (factors low, high about its
    fitted value) from a fit result's ``identifiability``."""
    return {
        e["name"]: list(e["matched_range"])
        for e in identifiability
        if e.get("determined") and e.get("matched_range") is not None
    }


def truth_outside(
    truth: dict[str, float], params: dict[str, float], ranges: dict[str, list[float]]
) -> list[str]:
    """The parameters whose reported matched range (``determined_ranges``) leaves the true
    value out: a claim about the values that is wrong."""
    return [
        name
        for name, (low, high) in ranges.items()
        if name in truth and name in params and not low * params[name] <= truth[name] <= high * params[name]
    ]


def write_json(path: Path, data: Any) -> None:
    """Write through a temporary file, so an interrupted phase never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def load_generated(out: Path) -> list[GeneratedScene]:
    return [GeneratedScene.from_dict(s) for s in read_json(out / "scenes.json")["scenes"]]


def load_records(path: Path, cls: type) -> dict[int, Any]:
    """Records by scene index; an absent file means the phase has not run yet."""
    if not path.is_file():
        return {}
    return {r["index"]: cls(**r) for r in read_json(path)["records"]}


def save_records(path: Path, records: dict[int, Any], meta: dict[str, Any]) -> None:
    write_json(path, {**meta, "records": [asdict(records[k]) for k in sorted(records)]})


def record_timing(out: Path, phase: str, seconds: float) -> None:
    path = out / "timings.json"
    timings = read_json(path) if path.is_file() else {}
    timings[phase] = round(seconds, 1)
    write_json(path, timings)
