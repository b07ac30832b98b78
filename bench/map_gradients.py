"""The weight-map benchmark's gradient check (``bench/maps.py``): does the tape gradient of a
free map point downhill on scenes Blender's cloth made? No bpy.

The unknowns are those of ``warp_core.fit.free_map``: ``u_v = log s_v``, the log stiffness
of every vertex, which the simulator runs as weights over a fixed range ``[s0 / SPAN, s0 *
SPAN]`` (``s0`` the problem's uniform start, Blender's default). At three points (``POINTS``):
the uniform start, a rough random map (each vertex's stiffness log-uniform in
``RANDOM_RANGE`` on its own) and a smooth random one (the start times a sum of random bumps
spanning a 3-8x contrast, like the hidden maps), and along random directions ``d`` (one sign
per vertex), it compares the directional derivative ``grad . d`` of each tape gradient
(``stable``, what the fit uses, and ``exact``) with

* ``slope``: the central difference of the whole rollout's loss 0.5 |r|^2 over ``u +- STEP
  d`` (every vertex's stiffness +-1 %, ``bench/gradients.py``'s step), with the solver's
  iteration counts of the base point repeated (``Rollout.frozen``): the slope an optimizer
  steps along; ``twin``: the same slope from ``u + TWIN_NUDGE`` (same counts: every vertex's
  stiffness 1e-12 higher, a change of the weights as small as rounding, where one unit in
  the last place of ``u`` would often leave them as they are), which says whether the slope
  is determined at all (a chaotic rollout's is not); ``half``: the slope over ``u +- STEP / 2
  d``, which says whether the loss has a slope at that scale (Blender's tension-only shear
  springs switch their stiffness and damping at their rest length: the loss of a hanging
  sheet jumps every 1e-4 or so along a direction, and at a symmetric point, where springs
  sit exactly at their rest length, a change of 1e-14 moves it by 0.2 %);
* with ``direction_kind`` "smooth" each sign vector is first smoothed by the operator the free
  map's L-BFGS starts from as its inverse Hessian (``fit.mesh_smoothing.MeshSmoother``, its
  default radius) and scaled to a largest entry of 1: the directions that fit steps along,
  where "signs" are the roughest a map can take;
* ``fine``: the central differences over ``+- h d`` (frozen counts too) for each ``h`` of
  ``FINE_STEPS``: the exact tape's own check (:func:`fine_verdict`). One step does not do for
  all: where a map makes the rollout chaotic, the local derivative is up to 1e9 times the 1 %
  slope and holds only over steps of 1e-8 or less; at some points float64 rounding itself,
  grown through the rollout, moves the loss by more than any step's difference, and no
  difference can check the tape there.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from slope_agreement import agreement

STEP = 0.01  # +-1 % of every vertex's stiffness (bench/gradients.py's step)
TWIN_NUDGE = 1e-12  # the twin's start: every log stiffness this much higher
FINE_STEPS = (1e-5, 1e-6, 1e-7, 1e-8, 1e-9)  # the exact tape's own check
FINE_AGREE = 1e-2  # relative: the tape agrees with a difference
SETTLED = 1e-3  # relative: two neighbouring steps' differences agree (the loss is smooth there)
FINE_DIRECTIONS = 3  # directions per point checked at FINE_STEPS
RANDOM_RANGE = (2.0, 60.0)  # the rough point's stiffness per vertex (log-uniform)
SMOOTH_CONTRAST = (3.0, 8.0)  # the smooth point's, between its softest and stiffest vertex
POINTS = ("uniform", "rough", "smooth")
DIRECTION_KINDS = ("signs", "smooth")
KINDS = ("stable", "exact")


@dataclass
class FreeMapPoint:
    """The free map's unknowns on one problem, as ``free_map`` runs them: made by
    :func:`free_map_point`, read by :func:`compare`."""

    objective: Any  # FitObjective of the problem, no parameters
    kind: str
    low: float  # the fixed range the weights blend over
    high: float
    model_values: dict[str, float]  # the kind's base and Max fields at that range

    def weights(self, u: np.ndarray) -> np.ndarray:
        return np.clip((np.exp(u) - self.low) / (self.high - self.low), 0.0, 1.0)

    def loss(self, u: np.ndarray, frozen: Any = None) -> float:
        self.objective.set_maps({self.kind: self.weights(u)})
        x, _ = self.objective.positions(self.model_values, frozen=frozen)
        r = self.objective.residuals_at(x)
        return 0.5 * float(r @ r)

    def frozen(self, u: np.ndarray) -> Any:
        self.objective.set_maps({self.kind: self.weights(u)})
        return self.objective.positions(self.model_values)[1]

    def gradient(self, u: np.ndarray, kind: str) -> tuple[float, np.ndarray]:
        """Loss and d loss / d u from the tape of ``kind`` (chained as ``free_map`` does)."""
        self.objective.set_maps({self.kind: self.weights(u)})
        loss, maps = self.objective.map_gradient(self.model_values, [self.kind], kind=kind)
        return loss, maps[self.kind] / (self.high - self.low) * np.exp(u)


def free_map_point(problem: Any, fit: ModuleType) -> tuple[FreeMapPoint, float]:
    """The unknowns of ``problem``'s free map (``fit``: the fit engine's package) and the
    uniform start's stiffness ``s0``."""
    free_map = importlib.import_module(f"{fit.__name__}.free_map")
    objective = fit.FitObjective(problem, fit.FitSettings(device="cpu", precision="float64"), [])
    kind = problem.maps[0].kind
    rng = objective.model.map_ranges[kind]
    start = problem.model_settings.values()
    first = rng.base[0]
    s0 = float(start[first])
    param = next(p for p in objective.model.parameters if p.name == first)
    lo, hi = problem.bounds.get(first, param.fit_bounds())
    low, high = max(s0 / free_map.SPAN, lo), min(s0 * free_map.SPAN, hi)
    values = {}
    for base, top in zip(rng.base, rng.top, strict=True):
        ratio = float(start[base]) / s0
        values[base], values[top] = low * ratio, high * ratio
    return FreeMapPoint(objective, kind, low, high, values), s0


def compare(point: FreeMapPoint, u: np.ndarray, directions: np.ndarray) -> list[dict[str, Any]]:
    """One row per direction (see the module docstring)."""
    grads = {kind: point.gradient(u, kind)[1] for kind in KINDS}
    frozen = point.frozen(u)
    twin_u = u + TWIN_NUDGE
    rows = []

    def slope(at: np.ndarray, d: np.ndarray, h: float) -> float:
        return (point.loss(at + h * d, frozen) - point.loss(at - h * d, frozen)) / (2.0 * h)

    for k, d in enumerate(directions):
        row: dict[str, Any] = {"slope": slope(u, d, STEP), "twin": slope(twin_u, d, STEP)}
        row["half"] = slope(u, d, 0.5 * STEP)
        for kind, g in grads.items():
            row[kind] = float(g @ d)
        if k < FINE_DIRECTIONS:
            row["fine"] = [[h, slope(u, d, h)] for h in FINE_STEPS]
        rows.append(row)
    return rows


def smooth_field(rest: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random smooth field over the sheet in [0, 1]: three bumps of random sign, place and width."""
    p = rest[:, :2] - rest[:, :2].mean(axis=0)
    p /= max(float(np.ptp(p, axis=0).max()), 1e-12)
    f = np.zeros(len(p))
    for _ in range(3):
        centre, width = rng.uniform(-0.5, 0.5, 2), rng.uniform(0.2, 0.4)
        f += rng.uniform(-1.0, 1.0) * np.exp(-np.sum((p - centre) ** 2, axis=1) / (2.0 * width**2))
    return (f - f.min()) / max(float(np.ptp(f)), 1e-12)


def check_problem(
    problem: Any, fit: ModuleType, directions: int, seed: int, direction_kind: str = "signs"
) -> list[dict[str, Any]]:
    """Every row of ``problem`` at each of ``POINTS``, ``directions`` random directions each, of
    ``direction_kind`` (``DIRECTION_KINDS``; see the module docstring); every row carries its
    ``point``."""
    if direction_kind not in DIRECTION_KINDS:
        raise ValueError(f"direction_kind must be one of {DIRECTION_KINDS}, got {direction_kind!r}")
    point, s0 = free_map_point(problem, fit)
    n = problem.mesh.vertex_count
    smoother = importlib.import_module(f"{fit.__name__}.mesh_smoothing").MeshSmoother(problem.mesh.edges, n)
    rng = np.random.default_rng(seed)
    contrast = math.log(rng.uniform(*SMOOTH_CONTRAST))
    at = {
        "uniform": np.full(n, math.log(s0)),
        "rough": rng.uniform(math.log(RANDOM_RANGE[0]), math.log(RANDOM_RANGE[1]), n),
        "smooth": math.log(s0) + contrast * (smooth_field(problem.mesh.vertices, rng) - 0.5),
    }
    rows = []
    for label, u in at.items():
        signs = rng.choice([-1.0, 1.0], size=(directions, n))
        if direction_kind == "smooth":
            smoothed = [smoother(d) for d in signs]
            signs = np.stack([d / np.abs(d).max() for d in smoothed])
        for row in compare(point, u, signs):
            rows.append({"point": label, **row})
    return rows


def judge(rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The share of directions whose ``kind`` derivative has the slope's sign, and is within
    2x of it (a non-finite one counts as neither); the same where the slope is determined."""
    return {"directions": len(rows), **agreement(rows, kind)[0]}


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def fine_verdict(row: dict[str, Any]) -> tuple[str, float]:
    """(verdict, the exact tape's smallest relative error against a fine difference) of a
    checked row: "agrees" (within ``FINE_AGREE`` at some step), "off" (two neighbouring steps
    agree within ``SETTLED`` with each other but not with the tape: a tape that is wrong) or
    "unresolved" (no two neighbouring steps agree: a chaotic rollout no difference resolves)."""
    slopes = [f for _, f in row["fine"]]
    error = min(relative(row["exact"], f) for f in slopes)
    if error <= FINE_AGREE:
        return "agrees", error
    settled = any(relative(a, b) <= SETTLED for a, b in zip(slopes, slopes[1:], strict=False))
    return ("off" if settled else "unresolved"), error


def fine_errors(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    """verdict -> the exact tape's relative errors of the checked rows with it."""
    out: dict[str, list[float]] = {"agrees": [], "off": [], "unresolved": []}
    for r in rows:
        if "fine" in r:
            verdict, error = fine_verdict(r)
            out[verdict].append(error)
    return out
