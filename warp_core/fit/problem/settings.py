"""How a fit runs: the optimizer, budgets, tolerances, device and precision."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from .problem import FitError

__all__ = ["FitSettings"]


@dataclass
class FitSettings:
    """How to run a fit, apart from what to fit: made by the add-on (from the panel or the batch
    command line), presets and tests; read by ``engine.fit``, the objective (device, precision,
    gradient kind, batching) and the optimizers' settings built from it."""

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
    # below the precision's noise (see ``warp_core.fit.verdict.outcome``); set it for noisy targets
    tolerance_m: float | None = None
    # the same for footage targets, in pixels of reprojection RMSE: None = 1 px
    tolerance_px: float | None = None
    device: str = "cpu"
    precision: str = "float64"
    adam_lr: float = 0.05
    # the tape gradient L-BFGS and Adam step along, one of the model's ``gradient_kinds``;
    # "auto": its first. Blender's cloth: "stable" (per substep the exact reverse unless it
    # explodes, then the implicit-solve one; per parameter the loss's slope over the tangent
    # step where the tape claims that step moves the cloth by over a tenth of its motion) or
    # "exact" (every CG iteration differentiated); the soft body: "implicit" (the adjoint of
    # its converged implicit steps)
    gradient: str = "auto"
    # Levenberg-Marquardt's Jacobian columns: "differences" (central differences of rollouts,
    # two a column), "tangents" (the model's forward tangents: one recorded rollout and a
    # solve a substep for all columns; the soft body's) or "auto": tangents where the model
    # has them and every step of the base rollout ends within ``TANGENT_RESIDUAL`` of the
    # root the tangents differentiate, differences from the first Jacobian where one does
    # not (``objective.tangent_columns``)
    jacobian: str = "auto"
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
    # same launches (``blender_cloth``, scenes a batch covers; a model without batches runs
    # them two at a time on streams): "auto" on CUDA, where one rollout leaves most of the
    # device idle (the CPU runs them side by side on its cores instead), "on" or "off"; the
    # same numbers either way, bit for bit
    batch_rollouts: str = "auto"

    def with_budget_left(self, t0: float) -> FitSettings:
        """These settings with what is left of the time budget counted from ``t0``
        (``time.perf_counter()``; a sliver above 0 when none is: a search then stops at its
        first check, after simulating its start); as they are without a budget."""
        if self.time_budget_s is None:
            return self
        left = max(self.time_budget_s - (time.perf_counter() - t0), 1e-9)
        return dataclasses.replace(self, time_budget_s=left)

    def gradient_for(self, kinds: tuple[str, ...]) -> str:
        """The gradient kind a fit steps along, of a model with gradient ``kinds``: ``gradient``
        itself, or with "auto" the model's first kind ("auto" where it has none). FitError
        for a kind the model does not have."""
        if self.gradient == "auto":
            return kinds[0] if kinds else "auto"
        if kinds and self.gradient not in kinds:
            known = ", ".join(map(repr, kinds))
            raise FitError(f"gradient must be 'auto' or one of {known}, got {self.gradient!r}")
        return self.gradient
