"""Levenberg-Marquardt's Jacobian, one column per free parameter in log space: central
differences of rollouts (``tangents.log_tangents``: two a column), or the model's forward
tangents (``models.base.TangentSimulator``: one recorded rollout and a solve a substep for
all columns), as ``FitSettings.jacobian`` asks.

Why differences stay the default, measured on the soft body on this project's 2-core CPU
(``bench/soft_body_robustness.py --jacobians tangents,differences``): a 750-tet box's
tangents take 0.71 s for one column, 1.13 s for two, 1.12 s for four and 1.48 s for nine,
where one rollout takes 0.24 s, so they pay from about three columns; but they are the
derivatives of each implicit step's root, and at VBD's default iterations a dropped body's
steps stop short of it: on four drawn scenes (seed 51, E and damping) the fit on tangents
stalled on a sphere dropped 10 cm where differences converged, and on the other three took
longer for half the rollouts (a hanging box: 11.0 s and 16 rollouts against 9.6 s and 32).
With converged steps they pay at two columns already (``tests/core/test_soft_body_tangents``:
7.0 s against 11.0 s). The gap is the solver's, not the tangents': a 4-cell bar hanging in
two stiffness regions, whose tangents agree with its rollouts' differences within 7e-4 at
100 iterations, parts from them by 0.51 and 2.47 at the default 10.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...models.base import TangentSimulator
from ..problem.problem import FitError
from .mapped import RegionSimulator
from .tangents import log_tangents, tangent_sides

__all__ = ["JACOBIANS", "jacobian_kind", "log_jacobian_of"]

JACOBIANS = ("differences", "tangents")

# FitObjective (not imported: it imports this module)
FitObjective = Any


def jacobian_kind(objective: FitObjective) -> str:
    """``objective.settings.jacobian``; FitError for an unknown kind or tangents asked of a
    model without them."""
    kind = objective.settings.jacobian
    if kind not in JACOBIANS:
        raise FitError(f"jacobian must be one of {', '.join(map(repr, JACOBIANS))}, got {kind!r}")
    sim = objective.sim
    has = sim.has_tangents() if isinstance(sim, RegionSimulator) else isinstance(sim, TangentSimulator)
    if kind == "tangents" and not has:
        raise FitError(
            f"the {objective.model.label} model's rollouts have no forward tangents: "
            "use the jacobian 'differences'"
        )
    return kind


def log_jacobian_of(objective: FitObjective, values: dict[str, float]) -> np.ndarray:
    """d residual / d log value of each free parameter of ``objective.spec`` (its followers
    moved with it), by :func:`jacobian_kind`'s kind, which the objective keeps
    (``jacobian_used``)."""
    spec = objective.spec
    groups = [
        (spec.group(k), (float(spec.log_lower[k]), float(spec.log_upper[k]))) for k in range(spec.n_free)
    ]
    kind = objective.jacobian_used = jacobian_kind(objective)
    if kind == "differences":
        return np.stack(log_tangents(objective, values, groups), axis=1)
    objective.check_bounds(values)
    objective.sim.set_params(values)
    # every name of a group is at exp(z): d value / dz is its value (none where the bounds
    # leave the group no room, as the differences' zero column)
    room = [tangent_sides(objective.tangent_step, values[g[0]], b) is not None for g, b in groups]
    directions = [{n: values[n] if r else 0.0 for n in g} for (g, _), r in zip(groups, room, strict=True)]
    problem = objective.problem
    x, dx = objective.sim.position_tangents(problem.frame_end, objective.frames, directions, problem.goals)
    objective.n_forward += 1
    objective.check_diverged(x, values)
    objective.target.at_base_point(x)
    return np.stack([objective.target.residual_tangents(x, column) for column in dx], axis=1)
