"""Levenberg-Marquardt's Jacobian, one column per free parameter in log space: central
differences of rollouts (``tangents.log_tangents``: two a column), or the model's forward
tangents (``models.base.TangentSimulator``: one recorded rollout and a solve a substep for
all columns), as ``FitSettings.jacobian`` asks; "auto" takes the tangents while the base
rollout's steps end at the roots they differentiate, differences otherwise.

Measured on the soft body on this project's 2-core CPU:

* Cost: a 750-tet box's tangents take 0.71 s for one column, 1.13 s for two, 1.12 s for four
  and 1.48 s for nine, with their recorded rollout; one rollout takes 0.24 s at VBD's
  default 10 iterations. The tangents' solves do not grow with VBD's iterations, the
  rollouts do: on a bar hanging in 3, 6 and 9 stiffness regions at 100 iterations LM took
  13.8 s, 17.7 s and 24.5 s on tangents against 38.2 s, 175.0 s and 264.7 s on differences,
  each converged (``bench/soft_body_regions.py``).
* Where they hold: they are the derivatives of each implicit step's root. A box hanging
  from pins, whose steps end within 9e-5 of their roots at 60 iterations, has tangents
  within 2e-3 of its rollouts' differences; at 30 iterations (7e-3) within 12 %, at 10
  (0.29) they part by 49 % and 70 %. With Newton's contact damping (acting only while a
  node approaches) bodies dropped on the ground could end their steps about 5 from their
  roots at any iteration count (10 to 100), their tangents 3 % to 200 % off the
  differences, and a fit on them stalled where differences converged; the contacts are
  undamped since (``soft_body.scene.set_contact_stiffness``), and a dropped body's steps
  converge as a hanging one's do. Hence ``TANGENT_RESIDUAL``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...models.base import TangentSimulator
from ..problem.problem import FitError
from .mapped import RegionSimulator
from .tangents import log_tangents, tangent_sides

__all__ = ["JACOBIANS", "expect_jacobians", "jacobian_kind", "log_jacobian_of", "verdict_jacobian"]

JACOBIANS = ("auto", "differences", "tangents")
# "auto" takes tangents while every step of the base rollout ends within this (relative,
# ``models.soft_body.adjoint_step.step_residual``) of its root: 9e-5 gave tangents within
# 2e-3 of the rollouts' differences, 7e-3 within 12 %
TANGENT_RESIDUAL = 1e-3
SWITCHED = "tangents, then differences"  # what a fit whose steps left their roots used

# FitObjective (not imported: it imports this module)
FitObjective = Any


def jacobian_kind(objective: FitObjective) -> str:
    """The kind the next Jacobian takes: ``objective.settings.jacobian``, "auto" resolved
    (tangents where the model has them, until a base rollout's steps left their roots);
    FitError for an unknown kind or tangents asked of a model without them."""
    kind = objective.settings.jacobian
    if kind not in JACOBIANS:
        raise FitError(f"jacobian must be one of {', '.join(map(repr, JACOBIANS))}, got {kind!r}")
    sim = objective.sim
    has = sim.has_tangents() if isinstance(sim, RegionSimulator) else isinstance(sim, TangentSimulator)
    if kind == "tangents" and not has:
        raise FitError(
            f"the {objective.model.label} model's rollouts have no forward tangents: "
            "use the jacobian 'differences' or 'auto'"
        )
    if kind == "auto":
        return "tangents" if has and not objective.tangents_refused else "differences"
    return kind


def expect_jacobians(objective: FitObjective) -> None:
    """Before any rollout: refuse a Jacobian the model cannot give (:func:`jacobian_kind`),
    and where the Jacobians are to be tangents, have the simulator keep each rollout's
    recording: a Levenberg-Marquardt Jacobian is taken at the point its step just simulated,
    whose rollout the tangents, or the check that refuses them, then need not run again.
    It keeps them after a refusal too: its rollouts run the recording's frame graph, and on
    the CPU capturing the plain one as well cost more than the recording's launches over a
    fit (soft-body robustness seed 78, scenes 5 and 6: turned off at the refusal, "auto"
    took 0.4-1.4 s longer than differences in the same rollouts; left on, 0.3 s longer to
    0.8 s shorter)."""
    if jacobian_kind(objective) == "tangents":
        objective.sim.keep_recording = True


def log_jacobian_of(objective: FitObjective, values: dict[str, float]) -> np.ndarray:
    """d residual / d log value of each free parameter of ``objective.spec`` (its followers
    moved with it), by :func:`jacobian_kind`'s kind; the objective keeps which it took
    (``jacobian_used``: the kind, or ``SWITCHED`` once differences followed tangents) and
    whether "auto" refused the tangents (``tangents_refused``, for the rest of the fit)."""
    groups = _groups(objective)
    kind = jacobian_kind(objective)
    if kind == "tangents":
        limit = TANGENT_RESIDUAL if objective.settings.jacobian == "auto" else None
        columns = _tangent_columns(objective, values, groups, limit)
        if columns is not None:
            objective.jacobian_used = "tangents"
            return columns
        objective.tangents_refused = True
    if objective.jacobian_used in ("tangents", SWITCHED):
        objective.jacobian_used = SWITCHED
    else:
        objective.jacobian_used = "differences"
    return np.stack(log_tangents(objective, values, groups), axis=1)


def verdict_jacobian(
    objective: FitObjective, values: dict[str, float]
) -> tuple[np.ndarray | None, str | None]:
    """The Jacobian a fit's verdict (what is determined, the matched ranges) reads where the
    fit took the tangents it was told to take (``jacobian`` "tangents": its steps are not
    checked), and a warning where it is not the fit's: the tangents again where every step
    of the rollout ended within ``TANGENT_RESIDUAL`` of its root, else central differences.
    (None, None) where the fit's own Jacobian stands. On 16 soft bodies at VBD's default 10
    iterations, tangents so taken put 3 fits' hidden values outside the matched ranges they
    reported (``bench/soft_body_robustness.py --seed 72 --jacobians tangents``)."""
    if objective.settings.jacobian != "tangents" or objective.jacobian_used != "tangents":
        return None, None
    groups = _groups(objective)
    columns = _tangent_columns(objective, values, groups, TANGENT_RESIDUAL)
    if columns is not None:
        return columns, None
    warning = (
        f"the tangents were taken as asked, but the rollout's solver steps end further than "
        f"{TANGENT_RESIDUAL:g} from the roots they differentiate (raise the solver's iterations): "
        "what is determined and the matched ranges come from central differences instead"
    )
    return np.stack(log_tangents(objective, values, groups), axis=1), warning


def _groups(objective: FitObjective) -> list[tuple[list[str], tuple[float, float]]]:
    # each free parameter's names (its followers with it) and its log bounds
    spec = objective.spec
    return [(spec.group(k), (float(spec.log_lower[k]), float(spec.log_upper[k]))) for k in range(spec.n_free)]


def _tangent_columns(
    objective: FitObjective,
    values: dict[str, float],
    groups: list[tuple[list[str], tuple[float, float]]],
    limit: float | None,
) -> np.ndarray | None:
    """The Jacobian from the model's tangents; None where a step of the base rollout ended
    further than ``limit`` (if any) from its root."""
    objective.check_bounds(values)
    objective.sim.set_params(values)
    # every name of a group is at exp(z): d value / dz is its value (none where the bounds
    # leave the group no room, as the differences' zero column)
    room = [tangent_sides(objective.tangent_step, values[g[0]], b) is not None for g, b in groups]
    directions = [{n: values[n] if r else 0.0 for n in g} for (g, _), r in zip(groups, room, strict=True)]
    problem = objective.problem
    kept = objective.sim.holds_recording(problem.frame_end, objective.frames, problem.goals)
    x, dx = objective.sim.position_tangents(
        problem.frame_end, objective.frames, directions, problem.goals, max_residual=limit
    )
    objective.n_forward += not kept
    objective.check_diverged(x, values)
    if dx is None:
        return None
    objective.target.at_base_point(x)
    return np.stack([objective.target.residual_tangents(x, column) for column in dx], axis=1)
