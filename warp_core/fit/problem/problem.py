"""What a fit is asked to do: the targets and the problem (model, start values, what to fit)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import UserError
from ...mesh import ClothMesh
from ...models import DEFAULT_MODEL
from ...models.base import ModelSettings
from ...targets.mesh_checks import check_mesh_target
from ...tracks.targets import FootageTargets
from .maps import MapLayout, MapSpec
from .rules import auto_loss, check_loss_name, check_parameters, check_targets

__all__ = ["FitError", "FitProblem", "Target"]


class FitError(UserError, RuntimeError):
    """A fit that cannot run or cannot start (message says what to change)."""


@dataclass
class Target:
    """Where the cloth should be at one frame.

    ``positions`` are world positions: one per cloth vertex (same topology), or the
    vertices of another mesh with ``triangles`` (a remeshed or scanned target).
    ``weights`` (per cloth vertex, same topology only) weight the squared distances.
    """

    frame: int
    positions: np.ndarray
    triangles: np.ndarray | None = None
    weights: np.ndarray | None = None


@dataclass
class FitProblem:
    mesh: ClothMesh  # the geometry the model simulates
    model_settings: ModelSettings  # the model's settings: start values and the fixed settings
    targets: list[Target]
    free_parameters: list[str]  # the parameters the fit moves (their followers in ``ties``)
    ties: dict[str, str] = field(default_factory=dict)  # follower -> leader
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    start_frame: int = 1
    goals: np.ndarray | None = None  # (frames from start_frame to the last target, N, 3)
    loss: str = "auto"  # "vertex", "surface", "tracks" or "auto"
    model: str = DEFAULT_MODEL  # registry name, see ``warp_core.models.get_model``
    # footage targets (markers seen by a camera) instead of ``targets``
    tracks: FootageTargets | None = None
    # weight maps the fit moves (``maps.MapSpec``): regions add one parameter each
    maps: list[MapSpec] = field(default_factory=list)

    @property
    def target_frames(self) -> list[int]:
        if self.tracks is not None:
            return [f for f in self.tracks.frames if f > self.start_frame]
        return sorted(t.frame for t in self.targets)

    @property
    def frame_end(self) -> int:
        return max(self.target_frames)

    @property
    def loss_kind(self) -> str:
        """The loss the fit uses ("auto" decided from the targets, see ``rules.auto_loss``)."""
        return auto_loss(
            self.loss,
            [len(t.positions) for t in self.targets],
            self.mesh.vertex_count,
            has_footage=self.tracks is not None,
            surface_targets=any(t.triangles is not None for t in self.targets),
        )

    def map_layout(self) -> MapLayout | None:
        """The maps laid out for the fit (None without maps); ValueError naming a bad one."""
        return MapLayout(self.model, self.maps, self.mesh.vertex_count) if self.maps else None

    def check_maps(self) -> None:
        """ValueError where the maps ask for something the fit cannot do."""
        layout = self.map_layout()
        derived = sorted(layout.derived() & (set(self.free_parameters) | set(self.ties)))
        if derived:
            raise ValueError(
                f"{', '.join(derived)} {'is' if len(derived) == 1 else 'are'} set by the fitted map (the "
                f"range of its weights): do not fit {'it' if len(derived) == 1 else 'them'} too"
            )
        if self.tracks is not None:
            raise ValueError("maps are fitted to mesh targets, not to footage")

    def validate(self) -> None:
        """Raise ValueError with a message naming what is wrong."""
        check_targets(self.tracks is not None, bool(self.targets))
        check_parameters(self.model, self.free_parameters, self.ties, has_maps=bool(self.maps))
        for follower, leader in self.ties.items():
            if leader not in self.free_parameters:
                raise ValueError(f"tie {follower} = {leader}: {leader} is not being fitted")
        self.model_settings.validate()
        if self.maps:
            self.check_maps()
        start = self.model_settings.values()
        zero = [p for p in self.free_parameters if start[p] <= 0.0]
        if zero:
            raise ValueError(f"start value of {', '.join(zero)} is 0: fitting works on ratios, start above 0")
        check_loss_name(self.loss)
        n = self.mesh.vertex_count
        if self.loss == "tracks" and self.tracks is None:
            raise ValueError("the tracks loss needs footage targets")
        if self.tracks is not None:
            self.tracks.validate(n, self.start_frame)
        for t in self.targets:
            if t.frame <= self.start_frame:
                raise ValueError(
                    f"target frame {t.frame} is not after the simulation start frame {self.start_frame}"
                )
            pos = np.asarray(t.positions)
            if pos.ndim != 2 or pos.shape[1] != 3 or not np.isfinite(pos).all():
                raise ValueError(f"target at frame {t.frame}: positions must be finite (M, 3)")
            check_mesh_target(self.loss_kind, t.frame, pos, t.triangles, n)
            if t.weights is not None and (len(t.weights) != n or np.any(np.asarray(t.weights) < 0)):
                raise ValueError(f"target at frame {t.frame}: weights must be {n} values >= 0")
        if self.goals is not None:
            need = self.frame_end - self.start_frame + 1
            if self.goals.shape[0] < need or self.goals.shape[1:] != (n, 3):
                raise ValueError(f"pin goals must have shape ({need}, {n}, 3), got {self.goals.shape}")
