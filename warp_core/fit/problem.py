"""What a fit is asked to do: the targets, the problem (model, start values, what to fit)
and the run settings."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UserError
from ..mesh import ClothMesh
from ..models import get_model
from ..models.base import ModelSettings
from ..tracks.targets import FootageTargets

__all__ = ["FitError", "FitProblem", "FitSettings", "Target"]


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
    params: ModelSettings  # the model's settings: start values and the fixed settings
    targets: list[Target]
    fit: list[str]
    ties: dict[str, str] = field(default_factory=dict)  # follower -> leader
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    start_frame: int = 1
    goals: np.ndarray | None = None  # (frames from start_frame to the last target, N, 3)
    loss: str = "auto"  # "vertex", "surface", "tracks" or "auto"
    model: str = "blender_cloth"  # registry name, see ``warp_core.models.get_model``
    # footage targets (markers seen by a camera) instead of ``targets``
    tracks: FootageTargets | None = None

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
        if self.tracks is not None:
            return "tracks"
        if self.loss != "auto":
            return self.loss
        n = self.mesh.vertex_count
        same = all(t.triangles is None and len(t.positions) == n for t in self.targets)
        return "vertex" if same else "surface"

    def validate(self) -> None:
        """Raise ValueError with a message naming what is wrong."""
        if self.tracks is not None and self.targets:
            raise ValueError("footage targets and mesh targets cannot be mixed in one fit: choose one kind")
        if not self.targets and self.tracks is None:
            raise ValueError("no targets: add at least one target frame")
        if not self.fit:
            raise ValueError("no parameters to fit: choose at least one")
        names = [p.name for p in get_model(self.model).parameters]
        unknown = [p for p in list(self.fit) + list(self.ties) + list(self.ties.values()) if p not in names]
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; choose from {', '.join(names)}")
        for follower, leader in self.ties.items():
            if leader not in self.fit:
                raise ValueError(f"tie {follower} = {leader}: {leader} is not being fitted")
        self.params.validate()
        zero = [p for p in self.fit if getattr(self.params, p) <= 0.0]
        if zero:
            raise ValueError(f"start value of {', '.join(zero)} is 0: fitting works on ratios, start above 0")
        if self.loss not in ("auto", "vertex", "surface", "tracks"):
            raise ValueError(f"loss must be 'vertex', 'surface', 'tracks' or 'auto', got {self.loss!r}")
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
            if self.loss_kind == "vertex" and len(pos) != n:
                raise ValueError(
                    f"target at frame {t.frame} has {len(pos)} vertices, the cloth has {n}: use the surface "
                    "loss for a target with different topology"
                )
            if self.loss_kind == "surface" and t.triangles is None:
                raise ValueError(f"target at frame {t.frame}: the surface loss needs the target's triangles")
            if t.weights is not None and (len(t.weights) != n or np.any(np.asarray(t.weights) < 0)):
                raise ValueError(f"target at frame {t.frame}: weights must be {n} values >= 0")
        if self.goals is not None:
            need = self.frame_end - self.start_frame + 1
            if self.goals.shape[0] < need or self.goals.shape[1:] != (n, 3):
                raise ValueError(f"pin goals must have shape ({need}, {n}, 3), got {self.goals.shape}")


@dataclass
class FitSettings:
    # "lm", "lbfgs", "adam" or "auto" (Levenberg-Marquardt up to 12 free parameters, L-BFGS above,
    # finished by Levenberg-Marquardt's trust region)
    optimizer: str = "auto"
    max_iterations: int = 30  # accepted steps, over all runs of the fit
    time_budget_s: float | None = None
    rel_loss_tol: float = 1e-10
    # stop refining once the targets are matched this closely (below Blender's own float32
    # noise); 1e-5 of the motion instead when that is smaller (a tiny cloth)
    rmse_tolerance_m: float = 1e-6
    # what counts as matched, for the outcome: None = min(1 mm, 0.1 % of the motion), never
    # below the precision's noise (see ``warp_core.fit.outcome``); set it for noisy targets
    tolerance_m: float | None = None
    # the same for footage targets, in pixels of reprojection RMSE: None = 1 px
    tolerance_px: float | None = None
    device: str = "cpu"
    precision: str = "float64"
    adam_lr: float = 0.05
    # the tape gradient L-BFGS and Adam step along: "stable" (per substep the exact reverse
    # unless it explodes, then the implicit-solve one; per parameter the loss's slope over the
    # tangent step where the tape claims that step moves the cloth by over a tenth of its
    # motion) or "exact" (every CG iteration differentiated)
    gradient: str = "stable"
    recover_from_divergence: bool = True
    # the global phase (Levenberg–Marquardt and L-BFGS): start points per fitted parameter,
    # how many of them are refined, and other start values to try (e.g. a preset's). One
    # simulation per point: on Blender-made scenes whose targets lie 50+ frames in, valleys
    # a factor of 1.5 wide were missed by 3 points per parameter and found by 8; of six
    # fits 8 points left in local minima (stiff sheets, four at quality 4), 16 found two
    # (more refinements or iterations found one). It only runs when the start falls short.
    global_search: bool = True
    global_points_per_parameter: int = 16
    global_refine: int = 3
    extra_starts: list[dict[str, float]] = field(default_factory=list)
    # the rollouts of one Jacobian or of a global phase's start points as batches of the
    # same launches (``blender_cloth``, scenes a batch covers): "auto" on CUDA, where one
    # rollout leaves most of the device idle (the CPU runs them side by side on its cores
    # instead), "on" or "off"; the same numbers either way, bit for bit
    batch_rollouts: str = "auto"
