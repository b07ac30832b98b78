"""How chaotic a fitted motion is where contacts decide it: the same values simulated once
more from a start moved by far less than any scene setting could."""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from .objective import FitObjective

# How far the probe moves the start (metres): below anything a scene sets, so what it
# measures is the motion's sensitivity, not a different scene
START_NUDGE_M = 1e-6


def start_gap(objective: FitObjective, values: dict[str, float]) -> float | None:
    """For a cloth with collision objects: RMS distance (metres; pixels for footage targets)
    between the rollout at ``values`` and the same rollout started ``START_NUDGE_M`` higher.
    Where contacts decide the motion (cloth sliding off an edge or a curved top), Blender's
    own result moves as far under such a change (measured), so its replay is not assured
    closer. None without colliders, for other models, or when the rollout cannot be run."""
    problem = objective.problem
    if problem.model != "blender_cloth" or not getattr(problem.params, "colliders", ()):
        return None
    x, _ = objective.positions(values)
    sim = objective.sim
    start = sim.rest_positions.numpy().astype(np.float64) + np.array([0.0, 0.0, START_NUDGE_M])
    try:
        sim.set_params(values)
        nudged = wp.array(start, dtype=sim.vec3, device=sim.device)
        y = sim.rollout(problem.frame_end, objective.frames, problem.goals, x0=nudged).numpy()
    except (ValueError, RuntimeError):
        return None
    if not np.isfinite(y).all():
        return math.inf
    return objective.change(x, y)
