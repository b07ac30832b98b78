"""The cloth's vertex-group weight maps: their loss gradient from the tape, and new weights.

How Blender applies the groups (``cloth.cc``: ``cloth_apply_vgroup``, ``cloth_build_springs``,
``cloth_update_springs``, ``cloth_shrink_factor``; ``SIM_mass_spring.cc``:
``cloth_calc_spring_force``), read for this module:

* Every spring's weight (``lin_stiffness``) is the arithmetic mean ``(w_i + w_j) / 2`` of its
  two vertices' weights, in float32: no per-spring min or max, and a vertex outside the group
  counts 0. Structural springs take the structural group, the polygon diagonals (shear
  springs) the shear group, the LINEAR model's bending springs the bending group.
* The stiffness is ``min + weight * |max - min|`` (``fabsf``, so a maximum below the
  minimum softens). A structural spring's weight scales both its tension and its compression
  stiffness, each towards its own maximum.
* The ANGULAR model's hinges (``ang_stiffness``) take the mean bending-group weight of the
  two vertices of the hinge axis only, not of the faces' other vertices; the hinge stiffness
  is ``(bending + weight * |bending_max - bending|) * L0 * 0.1``. A quad diagonal is both a
  shear spring (shear group) and a hinge (bending group).
* Sewing springs get weight 0 at every step (``cloth_update_springs`` resets all and gives
  them none back): no group acts on them. Internal springs take their own group (not
  simulated here).
* Shrinking: each vertex's factor ``k_v = (1 - shrink_min) + (shrink_min - shrink_max) w_v``;
  a spring's rest length is its rest distance times ``sqrt(k_i k_j)`` (the geometric mean),
  for structural, shear and LINEAR bending springs, not sewing ones; hinge rest angles are
  measured unshrunk. The shrunk structural lengths also make the mean length ``L̄`` that
  divides every linear spring's (and goal spring's) stiffness.

So ``d k_s / d w_v = |max - min| / 2`` for each spring ``s`` at ``v``. Warp differentiates
the kernels' ``group_stiffness``, so the tape gives ``d loss / d weight_s`` (the ``|max -
min|`` included) for each spring and hinge, and a vertex gets half of each of its springs'
and hinges' (:func:`vertex_gradients`). The shrink map goes through the rest lengths and
``1 / L̄`` instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import warp as wp

from ...mesh import ClothMesh
from .adjoint_kernels import accumulate_scalar_kernel
from .arrays import ClothArrays
from .params import ClothParams
from .topology import (
    SPRING_BENDING_LINEAR,
    SPRING_SEWING,
    SPRING_SHEAR,
    SPRING_STRUCTURAL,
    Topology,
    hinge_ang_stiffness,
    spring_lin_stiffness,
)

# the maps whose gradient a rollout on a tape can record, and the mesh field holding each
MAP_FIELDS: dict[str, str] = {
    "structural": "structural_stiffness_weight",
    "shear": "shear_stiffness_weight",
    "bending": "bending_stiffness_weight",
    "shrink": "shrink_weight",
}
MAP_KINDS: tuple[str, ...] = tuple(MAP_FIELDS)
# the maps ``paint`` changes on a simulator: shrinking changes the rest lengths, which a
# simulator measures once (``ClothSimulator.set_params`` refuses a new shrink range alike)
PAINTABLE_KINDS: tuple[str, ...] = ("structural", "shear", "bending")
# the ``ClothArrays`` whose gradient each map needs
_SOURCES: dict[str, tuple[str, ...]] = {
    "structural": ("spring_lin_stiffness",),
    "shear": ("spring_lin_stiffness",),
    "bending": ("spring_lin_stiffness", "hinge_ang_stiffness"),
    "shrink": ("spring_rest_length", "inv_avg_spring_length"),
}
_ALL_SOURCES = ("spring_lin_stiffness", "hinge_ang_stiffness", "spring_rest_length", "inv_avg_spring_length")


@dataclass(frozen=True)
class SpringSensitivities:
    """The loss's gradient with respect to each spring's and hinge's inputs over a whole
    rollout: made by :meth:`MapRecorder.sensitivities` after a backward pass, read by
    :func:`vertex_gradients` (and by tests). Zero where the maps recorded did not need it."""

    spring_weight: np.ndarray  # (S,) d loss / d lin_stiffness (the |max - min| included)
    hinge_weight: np.ndarray  # (H,) d loss / d ang_stiffness
    rest_length: np.ndarray  # (S,) d loss / d rest length (as shrunk)
    inverse_mean_length: float  # d loss / d (1 / L̄), L̄ the mean structural rest length


class MapRecorder:
    """Sums, over the substeps of a backward pass, the gradient with respect to the arrays
    the recorded maps act through (``_SOURCES``). Made by the backward pass's workspace
    (``adjoint``) for a simulator that records maps: it switches on those arrays'
    gradients, which each substep's reverse writes; ``add`` (once per substep, inside a
    captured graph too) sums them, ``grads`` are what the stable reverse's guard chooses
    between; read by :func:`vertex_gradients`."""

    def __init__(self, arrays: ClothArrays, kinds: tuple[str, ...]) -> None:
        self.kinds = kinds
        names = dict.fromkeys(name for kind in kinds for name in _SOURCES[kind])
        self.sources = {name: getattr(arrays, name) for name in names if getattr(arrays, name).shape[0]}
        for array in self.sources.values():
            array.requires_grad = True
        self.totals = {
            name: wp.zeros(a.shape[0], dtype=a.dtype, device=a.device) for name, a in self.sources.items()
        }
        self.kernel = accumulate_scalar_kernel(arrays.dtype)
        wp.load_module(self.kernel.module, device=arrays.device)  # a graph capture must not load it

    @property
    def grads(self) -> tuple[wp.array, ...]:
        return tuple(a.grad for a in self.sources.values())

    def zero(self) -> None:
        for name, array in self.sources.items():
            array.grad.zero_()
            self.totals[name].zero_()

    def add(self) -> None:
        """The substep's gradients (in the arrays' ``grad``) into the totals."""
        for name, array in self.sources.items():
            total = self.totals[name]
            wp.launch(
                self.kernel, dim=total.shape[0], device=total.device, inputs=[array.grad], outputs=[total]
            )

    def sensitivities(self, top: Topology) -> SpringSensitivities:
        def total(name: str, size: int) -> np.ndarray:
            found = self.totals.get(name)
            return np.zeros(size) if found is None else found.numpy().astype(np.float64)

        springs, hinges = len(top.spring_kind), len(top.hinge_spring)
        return SpringSensitivities(
            spring_weight=total("spring_lin_stiffness", springs),
            hinge_weight=total("hinge_ang_stiffness", hinges),
            rest_length=total("spring_rest_length", springs),
            inverse_mean_length=float(total("inv_avg_spring_length", 1)[0]),
        )


def release_gradients(arrays: ClothArrays) -> None:
    """No map recorded: the arrays a :class:`MapRecorder` switched on take no gradient again."""
    for name in _ALL_SOURCES:
        getattr(arrays, name).requires_grad = False


def checked_kinds(kinds: Sequence[str], settings: ClothParams) -> tuple[str, ...]:
    """``kinds`` as a tuple, each once; ValueError for an unknown one, and for the shrink map
    of a dynamic mesh (its rest lengths follow the animated mesh every frame, so one
    gradient per rest length no longer says which frame's length it was)."""
    kinds = tuple(dict.fromkeys(kinds))
    unknown = [k for k in kinds if k not in MAP_FIELDS]
    if unknown:
        raise ValueError(f"unknown weight map(s) {unknown}; choose from {', '.join(MAP_KINDS)}")
    if "shrink" in kinds and settings.use_dynamic_mesh:
        raise ValueError("the shrink map has no tape gradient with a dynamic mesh")
    return kinds


class MappedCloth(Protocol):
    """What :func:`vertex_gradients` reads from the simulator that ran the backward pass."""

    mesh: ClothMesh
    topology: Topology
    settings: ClothParams
    recorded_maps: tuple[str, ...]


def vertex_gradients(sim: MappedCloth, recorder: MapRecorder | None) -> dict[str, np.ndarray]:
    """kind -> d loss / d weight of each vertex, (N,) float64, for every map ``sim`` records,
    from the last backward pass (``recorder``: its workspace's). Where Max shrinking is 1 a
    vertex at weight 1 has factor 0 and an infinite shrink gradient."""
    if not sim.recorded_maps:
        return {}
    if recorder is None or recorder.kinds != sim.recorded_maps:
        raise ValueError("no backward pass has recorded these maps: run a rollout on a tape and backward")
    top, n = sim.topology, sim.mesh.vertex_count
    sens = recorder.sensitivities(top)
    kind = top.spring_kind

    def halves(values: np.ndarray, pairs: np.ndarray) -> np.ndarray:
        # a mean of two weights: half of its gradient to each vertex
        out = np.zeros(n)
        np.add.at(out, pairs[:, 0], 0.5 * values)
        np.add.at(out, pairs[:, 1], 0.5 * values)
        return out

    def springs_of(spring_kind: int) -> np.ndarray:
        mask = kind == spring_kind
        return halves(sens.spring_weight[mask], top.spring_vertices[mask])

    found = {
        "structural": lambda: springs_of(SPRING_STRUCTURAL),
        "shear": lambda: springs_of(SPRING_SHEAR),
        "bending": lambda: springs_of(SPRING_BENDING_LINEAR) + halves(sens.hinge_weight, top.hinge_vertices),
        "shrink": lambda: _shrink_gradient(sim, sens),
    }
    return {k: found[k]() for k in sim.recorded_maps}


def _shrink_gradient(sim: MappedCloth, sens: SpringSensitivities) -> np.ndarray:
    """rest_s = |X_j - X_i| sqrt(k_i k_j) and 1 / L̄ = count / sum of structural rest_s."""
    top, mesh, settings = sim.topology, sim.mesh, sim.settings
    pairs = top.spring_vertices
    x = mesh.vertices
    distance = np.linalg.norm(x[pairs[:, 1]] - x[pairs[:, 0]], axis=1)
    structural = top.spring_kind == SPRING_STRUCTURAL
    rest = distance * top.spring_shrink
    by_rest = sens.rest_length.copy()
    if structural.any() and rest[structural].sum() > 0.0:
        # d (count / total) / d rest_s = -count / total^2 = -(1 / L̄)^2 / count
        inv_avg = structural.sum() / rest[structural].sum()
        by_rest[structural] -= sens.inverse_mean_length * inv_avg**2 / structural.sum()
    by_factor = np.where(top.spring_kind == SPRING_SEWING, 0.0, by_rest * distance)
    w = np.zeros(mesh.vertex_count) if mesh.shrink_weight is None else mesh.shrink_weight
    lo, hi = settings.shrink_min, settings.shrink_max
    k = (1.0 - lo) + (lo - hi) * w
    i, j = pairs[:, 0], pairs[:, 1]
    out = np.zeros(mesh.vertex_count)
    with np.errstate(divide="ignore", invalid="ignore"):
        # d sqrt(k_i k_j) / d k_i = sqrt(k_j / k_i) / 2, and d k_v / d w_v = lo - hi
        np.add.at(out, i, by_factor * 0.5 * np.sqrt(k[j] / k[i]) * (lo - hi))
        np.add.at(out, j, by_factor * 0.5 * np.sqrt(k[i] / k[j]) * (lo - hi))
    return out


def paint(
    mesh: ClothMesh, top: Topology, arrays: ClothArrays, maps: Mapping[str, np.ndarray]
) -> tuple[ClothMesh, Topology]:
    """New weights for some stiffness maps (kind -> (N,) in [0, 1]) on a simulator's arrays:
    the mesh and topology that now hold them (the given ones are left as they were). Not
    between a rollout on a tape and its backward pass: that recomputes with these arrays."""
    mesh, lin, ang = painted_weights(mesh, top, maps)
    np_float = np.float32 if arrays.dtype == wp.float32 else np.float64
    arrays.spring_lin_stiffness.assign(lin.astype(np_float))
    if arrays.hinge_count:
        arrays.hinge_ang_stiffness.assign(ang.astype(np_float))
    return mesh, dataclasses.replace(top, spring_lin_stiffness=lin, hinge_ang_stiffness=ang)


def painted_weights(
    mesh: ClothMesh, top: Topology, maps: Mapping[str, np.ndarray]
) -> tuple[ClothMesh, np.ndarray, np.ndarray]:
    """The mesh holding some stiffness maps' new weights (kind -> (N,) in [0, 1]; the given
    mesh is left as it was), and the weight of every spring and hinge it gives
    (``spring_lin_stiffness``, ``hinge_ang_stiffness``): what :func:`paint` puts on a
    simulator's arrays, and a batch on each member's (``batch.rollout_batch``)."""
    n = mesh.vertex_count
    changes = {}
    for kind, weights in maps.items():
        if kind not in PAINTABLE_KINDS:
            if kind == "shrink":
                raise ValueError("shrinking changes the rest lengths: build a new ClothSimulator")
            raise ValueError(f"unknown weight map {kind!r}; choose from {', '.join(PAINTABLE_KINDS)}")
        w = np.ascontiguousarray(weights, dtype=np.float64).ravel()
        if len(w) != n or not np.isfinite(w).all() or w.min(initial=0.0) < 0.0 or w.max(initial=0.0) > 1.0:
            raise ValueError(f"the {kind} map must be one finite value in [0, 1] per vertex")
        changes[MAP_FIELDS[kind]] = w
    mesh = dataclasses.replace(mesh, **changes)
    lin = spring_lin_stiffness(mesh, top.spring_vertices, top.spring_kind)
    ang = hinge_ang_stiffness(mesh, top.hinge_vertices)
    return mesh, lin, ang
