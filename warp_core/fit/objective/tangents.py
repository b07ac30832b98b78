"""Forward tangents of a fit: central differences of rollouts with the base point's
discrete choices repeated (see ``objective``). The rollouts of one Jacobian, and the global
phase's start points (``residuals_side_by_side``), run as the model's batches where it has
them on a GPU, else side by side (``rollout_pool``: on the CPU's cores, or two at a time on
a GPU's streams).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from .rollout_pool import MAX_WORKERS, RolloutPool, cpu_workers, gpu_lanes

# the stable gradient's smoothing: where the tape's derivative of the loss for a tangent
# step is more than this fraction of |r| times the whole motion's |r| (the residuals with
# the cloth at rest), it claims by Cauchy-Schwarz that a step that small moves the cloth by
# more than that fraction of its motion. On 20 Blender-made scenes x 3 starts the right
# derivatives reached 0.008 of it, the exploded ones 0.27 to 2e30.
CHAOS_FRACTION = 0.1
# a global phase's start points per batch, at most (fewer where device memory says so)
BATCH_GLOBAL_POINTS = 64


class TangentObjective(Protocol):
    """What these functions use of the objective (``FitObjective``, which calls them)."""

    problem: Any
    settings: Any
    spec: Any
    sim: Any
    target: Any
    frames: list[int]
    rollout_pool: RolloutPool
    tangent_step: float
    n_forward: int
    n_smoothed: int
    smoothed_last: tuple[str, ...]

    def positions(self, values: dict[str, float], frozen: Any = None) -> tuple[np.ndarray, Any]: ...

    def check_bounds(self, values: dict[str, float]) -> None: ...

    def check_diverged(self, x: np.ndarray, values: dict[str, float]) -> None: ...

    def residuals_at(self, x: np.ndarray) -> np.ndarray: ...

    def moved(self, values: dict[str, float], group: list[str], z: float) -> dict[str, float]: ...

    def restore_params(self) -> None: ...

    def motion_norm(self) -> float: ...


def batch_width(objective: TangentObjective, rollouts: int) -> int:
    """Members per batch for ``rollouts`` rollouts (0: no batches, as FitSettings'
    ``batch_rollouts`` and the scene say)."""
    mode = objective.settings.batch_rollouts
    sim = objective.sim
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"batch_rollouts must be 'auto', 'on' or 'off', got {mode!r}")
    if mode == "off" or rollouts < 2:
        return 0
    if mode == "auto" and str(sim.device).startswith("cpu"):
        return 0
    return sim.batch_width(rollouts)


def run_rollouts(
    objective: TangentObjective, points: list[dict[str, float]], frozen: np.ndarray | None = None
) -> list[np.ndarray]:
    """Positions at the target frames of a rollout at each point: in batches where
    ``batch_width`` says so, else side by side on a GPU's streams or the CPU's cores
    (``RolloutPool``; "off" in ``batch_rollouts`` keeps a GPU's one after another)."""
    problem = objective.problem
    width = batch_width(objective, len(points))
    if width >= 2:
        return batched_positions(objective, points, width, frozen)

    def issue(v: dict[str, float]) -> Callable[[Any], Any]:
        def run(sim: Any) -> Any:
            sim.set_params(v)
            return sim.rollout(problem.frame_end, objective.frames, problem.goals, frozen=frozen)

        return run

    jobs = [issue(v) for v in points]
    lanes = gpu_lanes(objective.sim, len(points)) if objective.settings.batch_rollouts != "off" else 1
    if lanes > 1:
        return objective.rollout_pool.run_on_streams(objective.sim, jobs, lanes)
    workers = cpu_workers(objective.sim, len(points))
    return objective.rollout_pool.run(objective.sim, [_read(job) for job in jobs], workers)


def _read(job: Callable[[Any], Any]) -> Callable[[Any], np.ndarray]:
    return lambda sim: job(sim).numpy()


def batched_positions(
    objective: TangentObjective,
    points: list[dict[str, float]],
    width: int,
    frozen: np.ndarray | None = None,
    maps: list[dict[str, np.ndarray]] | None = None,
) -> list[np.ndarray]:
    """Positions at the target frames of a rollout at each point (with its weight maps, where
    given), in batches of ``width`` members."""
    problem, sim = objective.problem, objective.sim
    found: list[np.ndarray] = []
    for start in range(0, len(points), width):
        chunk = slice(start, start + width)
        batch = sim.rollout_batch(
            points[chunk],
            problem.frame_end,
            objective.frames,
            problem.goals,
            frozen,
            maps=None if maps is None else maps[chunk],
        )
        found += list(batch.positions)
    return found


def residuals_side_by_side(
    objective: TangentObjective, points: list[dict[str, float]]
) -> list[np.ndarray | None]:
    """The residuals at each point (None where it is refused or diverges), the rollouts run
    side by side on the CPU's cores or as batches: the same numbers as one after another,
    bit for bit (``optimize.eval_residuals_many`` drops non-finite ones)."""
    from ..optimizers.base import EVALUATION_ERRORS  # the optimizers import the objective

    allowed = []  # indices of the points within the bounds
    for k, v in enumerate(points):
        try:
            objective.check_bounds(v)
            allowed.append(k)
        except EVALUATION_ERRORS:
            pass
    inside = [points[k] for k in allowed]
    try:
        simulated = run_rollouts(objective, inside)
    except EVALUATION_ERRORS:
        simulated = [_one_rollout(objective, v) for v in inside]  # which point failed
    found: list[np.ndarray | None] = [None] * len(points)
    for k, x in zip(allowed, simulated, strict=True):
        found[k] = x
    objective.n_forward += len(points)
    objective.restore_params()
    out: list[np.ndarray | None] = []
    for v, x in zip(points, found, strict=True):
        try:
            if x is not None:
                objective.check_diverged(x, v)
                x = objective.residuals_at(x)
        except EVALUATION_ERRORS:
            x = None
        out.append(x)
    return out


def _one_rollout(objective: TangentObjective, v: dict[str, float]) -> np.ndarray | None:
    """A rollout at ``v`` alone (None where it fails)."""
    from ..optimizers.base import EVALUATION_ERRORS

    try:
        return run_rollouts(objective, [v])[0]
    except EVALUATION_ERRORS:
        return None


def side_by_side_width(objective: TangentObjective) -> int:
    """How many points ``residuals_side_by_side`` runs at once (1: one after another)."""
    if not objective.target.side_by_side:
        return 1  # the target's residuals keep per-point state
    width = batch_width(objective, BATCH_GLOBAL_POINTS)
    return width or max(cpu_workers(objective.sim, MAX_WORKERS), gpu_lanes(objective.sim, MAX_WORKERS))


def log_tangents(
    objective: TangentObjective, values: dict[str, float], groups: list[tuple[list[str], tuple[float, float]]]
) -> list[np.ndarray]:
    """d residual / d log value of each (names moved together, their log bounds), as a
    central difference of frozen rollouts where both sides fit in the bounds, else from
    the base point towards the side with room. The rollouts run side by side on the
    CPU's cores or as batches (``run_rollouts``)."""
    x, frozen = objective.positions(values)
    objective.target.at_base_point(x)
    sides = [tangent_sides(objective.tangent_step, values[group[0]], b) for group, b in groups]
    points = [(k, p) for k, s in enumerate(sides) if s is not None for p in s[:2] if p != s[2]]
    moved = [objective.moved(values, groups[k][0], p) for k, p in points]
    for v in moved:
        objective.check_bounds(v)

    found = run_rollouts(objective, moved, frozen)
    objective.n_forward += len(found)
    for v, xs in zip(moved, found, strict=True):
        objective.check_diverged(xs, v)
    at = {(k, p): xs for (k, p), xs in zip(points, found, strict=True)}
    objective.sim.set_params(values)
    fixed = None  # the column of a parameter the bounds leave no room: zeros
    cols = []
    for k, s in enumerate(sides):
        if s is None:
            fixed = np.zeros_like(objective.residuals_at(x)) if fixed is None else fixed
            cols.append(fixed)
            continue
        up, down, z = s
        dx = (at.get((k, up), x) - at.get((k, down), x)) / (up - down)
        cols.append(objective.target.residual_tangents(x, dx))
    return cols


def tangent_sides(
    step: float, value: float, bounds: tuple[float, float]
) -> tuple[float, float, float] | None:
    """(up, down, base) log values of a tangent: a central difference, or one-sided at or
    next to a bound; None when the bounds leave no room."""
    h = step
    z = math.log(value)
    lo, hi = bounds
    up, down = min(z + h, hi), max(z - h, lo)
    if up - z < 0.5 * h and z - down >= 0.5 * h:
        up = z  # at or next to the upper bound: backward difference
    elif z - down < 0.5 * h and up - z >= 0.5 * h:
        down = z  # at or next to the lower bound: forward difference
    return None if up <= down else (up, down, z)


def loss_slopes(
    objective: TangentObjective,
    values: dict[str, float],
    groups: list[list[str]],
    loss: float,
    frozen: np.ndarray,
) -> list[float]:
    """d loss / d log value of each group (names moved together) as the central difference
    of the loss 0.5 |r|^2 over the tangent step, CG counts ``frozen`` (one-sided next to a
    bound, from ``loss`` at ``values``): the exact derivative of the loss averaged over that
    step, what a step of that size sees where the loss curves on a finer scale."""
    bounds = objective.spec.bounds if objective.spec is not None else {}
    sides = []
    for group in groups:
        lo, hi = bounds.get(group[0], (0.0, math.inf))
        log_lo = math.log(lo) if lo > 0.0 else -math.inf
        log_hi = math.log(hi) if hi < math.inf else math.inf
        sides.append(tangent_sides(objective.tangent_step, values[group[0]], (log_lo, log_hi)))
    points = [(k, p) for k, s in enumerate(sides) if s is not None for p in s[:2] if p != s[2]]
    moved = [objective.moved(values, groups[k], p) for k, p in points]
    found = run_rollouts(objective, moved, frozen)
    objective.n_forward += len(found)
    losses = {}
    for point, v, xs in zip(points, moved, found, strict=True):
        objective.check_diverged(xs, v)
        r = objective.residuals_at(xs)
        losses[point] = 0.5 * float(r @ r)
    objective.sim.set_params(values)
    slopes = []
    for k, s in enumerate(sides):
        up, down, _ = s if s is not None else (0.0, 0.0, 0.0)
        if s is not None:
            slopes.append((losses.get((k, up), loss) - losses.get((k, down), loss)) / (up - down))
        else:
            slopes.append(0.0)  # the bounds leave it no room
    return slopes


def smoothed_where_chaotic(
    objective: TangentObjective,
    values: dict[str, float],
    loss: float,
    grad: dict[str, float],
    frozen: np.ndarray,
) -> dict[str, float]:
    """``grad`` (d loss / d value), but where it says a tangent step in a free parameter's
    log value (its tied followers with it) moves the cloth by more than ``CHAOS_FRACTION``
    of its whole motion, the loss curves on a finer scale than the steps an optimizer takes
    (measured: stiff, lightly damped starts whose adjoint grows to 1e5-1e34 times the
    loss): there the slope of the loss over that step (``loss_slopes``, two rollouts each),
    given to the group's first name (the others 0: the optimizers read a group's sum).
    Near an optimum |r| is small and the derivative with it, so the test does not fire
    there, where the derivative is what a short step needs."""
    spec = objective.spec
    groups = [spec.group(k) for k in range(spec.n_free)] if spec is not None else [[n] for n in grad]
    limit = CHAOS_FRACTION * math.sqrt(2.0 * loss) * objective.motion_norm()
    step = objective.tangent_step
    chaotic = []
    for group in groups:
        d_log = sum(grad.get(n, 0.0) * values[n] for n in group)
        if not abs(d_log) * step <= limit:
            chaotic.append(group)
    objective.smoothed_last = tuple(group[0] for group in chaotic)
    if not chaotic:
        return grad
    objective.n_smoothed += len(chaotic)
    out = dict(grad)
    for group, slope in zip(chaotic, loss_slopes(objective, values, chaotic, loss, frozen), strict=True):
        out.update({n: 0.0 for n in group})
        out[group[0]] = slope / values[group[0]]
    return out
