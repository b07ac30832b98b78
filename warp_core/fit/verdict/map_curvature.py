"""What a free map's targets determine: the data's Gauss–Newton curvature along each
vertex's log stiffness, by Hutchinson probes (``warp_core.fit.free_map`` reads it twice: its
mean scales the smoothness prior, and a vertex whose curvature the prior's outweighs is
reported as undetermined)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from ..objective.tangents import batch_width, batched_positions

__all__ = ["PROBES", "MapUnknowns", "VerdictClock", "gauss_newton", "undetermined_vertices"]

PROBES = 8  # Hutchinson probes for the curvature of each vertex


class MapUnknowns(Protocol):
    """A free map's unknowns as the probes read them (``free_map``'s): the objective, the map
    kind, the vertex count, the box of the log stiffness and the blending range."""

    objective: Any
    n: int
    lower: np.ndarray
    upper: np.ndarray
    low: float
    high: float

    @property
    def kind(self) -> str: ...

    def values(self, x: np.ndarray) -> dict[str, float]: ...

    def weights(self, x: np.ndarray) -> np.ndarray: ...


def gauss_newton(
    free: MapUnknowns, x: np.ndarray, probes: int, diagonal: bool
) -> tuple[np.ndarray | None, float]:
    """The Gauss–Newton curvature ``J^T J`` of the data along the vertices' ``u_v`` at ``x``,
    by Hutchinson probes (Rademacher ``p``): ``J p`` from central differences of two rollouts,
    its mean square over the vertices (the trace over N: returned second), and with
    ``diagonal`` each vertex's ``p_v (J^T J p)_v``, ``J^T`` carried back through the tape (the
    fit's gradient) from ``J p`` (first; None where the target kind has no adjoint)."""
    objective, kind = free.objective, free.kind
    values = free.values(x)
    h = objective.tangent_step
    rng = np.random.default_rng(0)

    def positions(at: np.ndarray) -> np.ndarray:
        objective.set_maps({kind: free.weights(at)})
        return objective.positions(values)[0]

    base = positions(x)
    lower, upper = free.lower[: free.n], free.upper[: free.n]
    diag: np.ndarray | None = np.zeros(free.n) if diagonal else None
    trace = 0.0
    signs = [rng.choice([-1.0, 1.0], size=free.n) for _ in range(probes)]
    moved = []  # each probe's two sides
    for p in signs:
        up, down = np.minimum(x[: free.n] + h * p, upper), np.maximum(x[: free.n] - h * p, lower)
        moved += [np.concatenate([u, x[free.n :]]) for u in (up, down)]
    sides = _rollouts(free, values, moved)
    for k, p in enumerate(signs):
        jp = objective.residuals_at(sides[2 * k]) - objective.residuals_at(sides[2 * k + 1])
        jp /= 2.0 * h  # (a bound cuts a probe short: it only scales that entry down)
        trace += float(jp @ jp) / free.n
        adjoint = objective.target.residual_adjoint(base, jp) if diag is not None else None
        if adjoint is None:
            diag = None
            continue
        objective.set_maps({kind: free.weights(x)})
        objective.sim.record_maps([kind])
        _, _, tape = objective.backward_pass(values, None, targets=base - adjoint)
        by_weight = objective.sim.map_gradients()[kind]
        tape.zero()
        diag += p * by_weight / (free.high - free.low) * np.exp(x[: free.n])
    objective.set_maps({kind: free.weights(x)})
    return (None if diag is None else diag / probes), trace / probes


def _rollouts(free: MapUnknowns, values: dict[str, float], points: list[np.ndarray]) -> list[np.ndarray]:
    """Positions at the target frames of a rollout with the map at each of ``points``: as
    batches where the device batches rollouts (a GPU), else one after another."""
    objective, kind = free.objective, free.kind
    width = batch_width(objective, len(points))
    if width < 2:
        found = []
        for at in points:
            objective.set_maps({kind: free.weights(at)})
            found.append(objective.positions(values)[0])
        return found
    maps = [{kind: free.weights(at)} for at in points]
    found = batched_positions(objective, [values] * len(points), width, maps=maps)
    objective.n_forward += len(points)
    return found


def undetermined_vertices(free: MapUnknowns, x: np.ndarray, strength: float, edges: np.ndarray) -> np.ndarray:
    """Vertices where the data's Gauss–Newton curvature along ``u_v`` is at most the prior's
    (see the module docstring); none where the target kind cannot say."""
    diag, trace = gauss_newton(free, x, PROBES, diagonal=True)
    if diag is None:
        return np.zeros(0, dtype=np.int64)
    degree = np.bincount(edges.ravel(), minlength=free.n).astype(np.float64)
    # without a prior, a vertex the targets see a billion times less than the mean one
    floor = np.maximum(strength * degree, 1e-9 * trace)
    return np.flatnonzero(np.abs(diag) <= floor)


class VerdictClock:
    """What the verdict after the per-vertex stage will cost, from that stage's own timings:
    made and read by ``free_map.fit_free_map``, so that a time budget holds the verdict too.
    The verdict is :func:`undetermined_vertices` (a base rollout, two per probe, batched as
    the mean curvature's ``scale_s`` of ``scale_probes`` probes were, and a backward pass per
    probe, as long as one of the stage's gradients), then the errors' and the rounding
    check's rollouts (H200, 64 x 64 sheet, 60 frames: 8 probes 26 s; a 2-core CPU, 32 x 32:
    63 s)."""

    def __init__(self, scale_s: float, scale_probes: int) -> None:
        self.rollout_s = scale_s / (1 + 2 * scale_probes)
        self.gradient_s: list[float] = []  # each rollout on a tape with its backward pass

    @contextmanager
    def gradient(self) -> Iterator[None]:
        began = time.perf_counter()
        yield
        self.gradient_s.append(time.perf_counter() - began)

    def verdict_s(self) -> float:
        """The verdict's foreseen seconds with the next gradient's; 0 until a second gradient
        has run: the first builds the tape and loads its kernels (10 x 10 sheet, CPU: 1.2 s,
        the next ones 0.15 s)."""
        if len(self.gradient_s) < 2:
            return 0.0
        # and the evaluation about to start, which the budget is checked before
        return (3 + 2 * PROBES) * self.rollout_s + (PROBES + 1) * float(np.median(self.gradient_s[1:]))
