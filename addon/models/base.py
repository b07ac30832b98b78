"""What the add-on needs from a material model on the Blender side.

A model of ``warp_core.models`` knows the physics and its parameters. Its scene side knows
where the model's settings live in Blender: which modifier holds them, how to read them and
the mesh the modifier acts on, how to write fitted values back, and which rows it adds to
the panel. The generic add-on code (checks, requests, operators, the batch command) only
speaks to :class:`SceneModel`, found by model name in :mod:`.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .parameter_rows import ParameterGroup

if TYPE_CHECKING:
    import bpy

    from ...warp_core.mesh import ClothMesh
    from ...warp_core.models import ModelSettings
    from ..scene.steps import StepGenerator


@dataclass(frozen=True)
class TieOption:
    """A panel option that fits a group of parameters as one value."""

    key: str  # its BoolProperty on ``Object.fit_to_target``
    label: str
    description: str
    members: tuple[str, ...]  # the first fitted member leads, the others follow it
    default: bool = True


@dataclass(frozen=True)
class MapTarget:
    """Where a scene side writes one kind of weight map: a field naming the vertex group and
    the Max values its weights blend towards, both on the struct ``SceneModel.map_holder``
    gives (the Cloth modifier's settings, or the object's own model values)."""

    label: str  # Blender's name of the kind: "Structural", "Stiffness"
    group_field: str  # the holder's field naming the group: "vertex_group_bending"
    max_fields: tuple[str, ...]  # the holder's values at weight 1, written with the weights
    new_group: str  # the name of a group the write makes where the field names none
    group_label: str  # how messages name the group: "the Cloth's Bending Group"
    description: str  # the Weight Map menu's tooltip
    # maximum -> the minimum the holder raises it to when set below (Blender's RNA clamps)
    min_fields: tuple[tuple[str, str], ...] = ()
    offered: bool = True  # whether the Weight Map menu offers it (a fit can find it)


class FrameSampler(Protocol):
    """Scene data besides the object that a model reads frame by frame while its goals are
    sampled (the Collision objects a cloth meets), then adds to its settings.

    Entered around the goal pass, called as ``on_frame(k, frame)`` at each of its frames
    (consecutive, from the cache start), then ``settings`` completes what ``read_settings``
    gave."""

    def __enter__(self) -> FrameSampler: ...

    def __exit__(self, *exc: object) -> None: ...

    def __call__(self, k: int, frame: float) -> None: ...

    def settings(self, settings: ModelSettings) -> ModelSettings: ...


class NoFrameSampler:
    """The :class:`FrameSampler` of a model that reads everything in ``read_settings``."""

    def __enter__(self) -> NoFrameSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, k: int, frame: float) -> None:
        return None

    def settings(self, settings: ModelSettings) -> ModelSettings:
        return settings


class SceneModel(Protocol):
    """One model's scene side. ``name`` is the ``warp_core.models`` name it reads for."""

    name: str
    modifier_label: str  # how messages name its modifier: "Cloth"
    settings_fields: tuple[str, ...]  # the settings a fit may start from (start values, presets)
    default_fit: tuple[str, ...]  # parameters ticked on a new object
    ties: tuple[TieOption, ...]
    parameter_groups: tuple[ParameterGroup, ...]  # the Parameters rows, with Blender's names
    precision: str  # the fit's and the bake's: "float64", or "float32" where the solver has no other
    # whether Device Auto picks the CPU or a GPU by the mesh's size (crossovers measured for this model)
    auto_device_by_size: bool
    # the weight maps (of the model's ``map_ranges``) whose fitted weights this side writes into
    # the object's vertex groups: the panel's Weight Map and the batch command's --fit-map offer these
    map_kinds: tuple[str, ...]
    # kind -> where its weights and Max values go (every one of ``map_kinds``, in the menu's order)
    map_targets: dict[str, MapTarget]
    free_maps: bool  # whether a map may be free (one weight per vertex), not only regions

    def map_holder(self, ob: bpy.types.Object) -> Any:
        """The struct holding the ``map_targets``' group fields and Max values (None where
        the object lacks the modifier)."""

    def find_modifier(self, ob: bpy.types.Object) -> bpy.types.Modifier | None: ...

    def cache_frame_range(self, mod: bpy.types.Modifier) -> tuple[int, int]:
        """(start, end) of the modifier's simulation: the start frame is the rest state."""

    def read_settings(self, mod: bpy.types.Modifier, scene: bpy.types.Scene) -> ModelSettings: ...

    def read_geometry(self, ob: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> ClothMesh:
        """The mesh entering the modifier at the current frame, in world space."""

    def check_geometry(self, mesh: ClothMesh) -> None:
        """Raise ValueError naming what the model cannot simulate in ``mesh`` (bad input,
        found before the fit instead of failing it)."""

    def sample_goals_steps(
        self,
        ob: bpy.types.Object,
        depsgraph: bpy.types.Depsgraph,
        scene: bpy.types.Scene,
        frames: Sequence[float],
        on_frame: Callable[[int, float], None] | None = None,
    ) -> StepGenerator[tuple[np.ndarray, np.ndarray]]:
        """(goals (F, N, 3), world matrices (F, 4, 4)) at ``frames`` as stepped work
        (``addon/scene/steps.py``; ``run_blocking`` runs it in one go): a ``Step`` per frame,
        ``on_frame(k, frame)`` run with the scene at each frame. The scene frame is restored
        at the end, and when it is closed halfway."""

    def frame_sampler(
        self,
        scene: bpy.types.Scene,
        ob: bpy.types.Object,
        mod: bpy.types.Modifier,
        depsgraph: bpy.types.Depsgraph,
    ) -> FrameSampler:
        """What to read during the goal pass besides the goals (see :class:`FrameSampler`)."""

    def unmodeled_settings(
        self, scene: bpy.types.Scene, ob: bpy.types.Object, mod: bpy.types.Modifier
    ) -> list[str]:
        """One phrase per setting in use that changes the motion but is not simulated."""

    def cautions(self, mod: bpy.types.Modifier) -> list[str]:
        """One warning per setting that is simulated but makes the scene's own solver too
        sensitive for its replay of any values to match the fit closely."""

    def current_values(self, mod: bpy.types.Modifier, names: Sequence[str]) -> dict[str, Any]:
        """The modifier's values of ``names`` as plain numbers (for Revert)."""

    def write_values(self, mod: bpy.types.Modifier, values: dict[str, Any]) -> None: ...

    def draw_parameters(self, layout: bpy.types.UILayout, settings: Any, fitted: dict[str, float]) -> None:
        """The Parameters rows choosing what to fit (``settings`` is ``Object.fit_to_target``;
        ``fitted``: the values of the object's last fit of this model, by parameter)."""


def resolve_ties(
    chosen: Sequence[str], ties_on: dict[str, bool], ties: Sequence[TieOption]
) -> tuple[list[str], dict[str, str]]:
    """Apply the tie options to a list of chosen parameters: within an active group the first
    chosen member leads and every other member follows it (even if not chosen itself)."""
    free = list(chosen)
    followers: dict[str, str] = {}
    for tie in ties:
        if not ties_on.get(tie.key):
            continue
        leaders = [n for n in tie.members if n in chosen]
        if not leaders:
            continue
        for follower in tie.members:
            if follower != leaders[0]:
                followers[follower] = leaders[0]
                if follower in free:
                    free.remove(follower)
    return free, followers


def plain(value: Any) -> Any:
    """A setting's value as a plain Python number or string (JSON-ready)."""
    return value if isinstance(value, str | int | float | bool) else float(value)


def as_type_of(current: Any, value: Any) -> Any:
    """``value`` as the type of the setting that holds ``current`` (JSON and presets may give
    5.0 for an integer setting such as quality)."""
    if isinstance(current, bool):
        return bool(value)
    if isinstance(current, int):
        return int(round(float(value)))
    if isinstance(current, float):
        return float(value)
    return value
