"""How chaotic a fitted motion is where contacts decide it: the same values simulated once
more from a start moved by far less than any scene setting could."""

from __future__ import annotations

import math

import numpy as np

from ..objective.objective import FitObjective

# How far the probe moves the start (metres): below anything a scene sets, so what it
# measures is the motion's sensitivity, not a different scene
START_NUDGE_M = 1e-6


def start_gap(objective: FitObjective, values: dict[str, float]) -> float | None:
    """Where the simulator says contacts may decide the motion (``Simulator.contact_probe``):
    RMS distance, in the target's unit, between the rollout at ``values`` and the same rollout
    started ``START_NUDGE_M`` higher. Where contacts decide the motion (cloth sliding off an
    edge or a curved top), Blender's own result moves as far under such a change (measured),
    so its replay is not assured closer. None where the probe does not apply or the rollout
    cannot be run."""
    sim = objective.sim
    if not sim.contact_probe:
        return None
    problem = objective.problem
    x, _ = objective.positions(values)
    try:
        sim.set_params(values)
        shift = np.array([0.0, 0.0, START_NUDGE_M])
        y = sim.rollout_shifted(shift, problem.frame_end, objective.frames, problem.goals).numpy()
    except (ValueError, RuntimeError):
        return None
    if not np.isfinite(y).all():
        return math.inf
    return objective.change(x, y)
