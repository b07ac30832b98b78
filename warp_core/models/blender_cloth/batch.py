"""Batches: B parameter sets (and optionally B pin-goal sequences) of one mesh, simulated
by the same launches.

A batch lays B copies of the mesh one after the other in every array (the vertices,
springs and hinges, their index tables offset), and each kernel finds its element's
member, and so the member's parameters, from the element's index (``force_kernels``).
Every sum that couples vertices stays within a member and runs in the single run's order:
the per-vertex gathers (a member's own springs and hinges) and the CG's dot products
(``dots.py``: partial sums per member, one result per member and iteration). Each member
keeps its own CG: its scalars, its convergence flag and its iteration count; a member
whose CG has converged iterates masked (an exact no-op) while others go on, and the
iterations stop once no member is active. So each member is its single run bit for bit,
with the same CG iteration counts.

A batch runs on ``ClothSimulator.batched``: a copy of the simulator on these tiled
arrays. Not in a batch (refused, run the members one at a time): object and self
collisions, pressure, force fields and a dynamic mesh (each holds whole-mesh sums or state), and a
tape: the adjoint runs per member, on single rollouts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import warp as wp

from ...tape import suspended_tape
from .arrays import ClothArrays
from .maps import painted_weights

# most members of one batch on the CPU (its kernels gain little from more: they run one
# element after the other either way)
CPU_MAX_MEMBERS = 64
# share of the free device memory a batch may take (the rest: other buffers, fragmentation)
DEVICE_MEMORY_SHARE = 0.5


@dataclass
class BatchRollout:
    """Every member's positions at the requested frames and CG iterations per substep:
    made by :func:`rollout_batch`, read by the fit's tangents and global phase."""

    frames: list[int]
    positions: np.ndarray  # (B, frames, N, 3) float64
    cg_iterations: np.ndarray  # (B, substeps) int32

    def member(self, m: int) -> np.ndarray:
        return self.positions[m]


def refusal(sim) -> str | None:
    """Why ``sim``'s scene cannot run as a batch (None: it can)."""
    s = sim.settings
    if sim.has_collisions:
        return "object collisions"
    if s.use_self_collision:
        return "self collisions"
    for flag, name in ((s.use_pressure, "pressure"), (s.force_fields, "force fields")):
        if flag:
            return name
    if s.use_dynamic_mesh:
        return "a dynamic mesh"
    return None


def batch_arrays(a: ClothArrays, members: int) -> ClothArrays:
    """``members`` copies of one mesh's arrays, one after the other, indices offset."""
    if a.members != 1:
        raise ValueError("batch_arrays takes a single mesh's arrays")
    n, n_springs, n_hinges = a.vertex_count, a.spring_count, a.hinge_count
    face_entries = a.hinge_face_vertices.shape[0]
    d = a.device

    def tiled(arr: wp.array, step: int | np.ndarray = 0) -> wp.array:
        x = arr.numpy()
        step = np.asarray(step, dtype=x.dtype)
        return wp.array(np.concatenate([x + m * step for m in range(members)]), dtype=arr.dtype, device=d)

    def table_offsets(offsets: wp.array) -> wp.array:
        x = offsets.numpy()
        entries = x[-1]
        parts = [x[:-1] + m * entries for m in range(members)] + [np.array([members * entries], x.dtype)]
        return wp.array(np.concatenate(parts), dtype=wp.int32, device=d)

    empty_tris = np.zeros(members * n + 1, np.int32)
    return dataclasses.replace(
        a,
        vertex_count=members * n,
        spring_count=members * n_springs,
        hinge_count=members * n_hinges,
        rest_positions=tiled(a.rest_positions),
        spring_vertices=tiled(a.spring_vertices, n),
        spring_kind=tiled(a.spring_kind),
        hinge_vertices=tiled(a.hinge_vertices, n),
        hinge_spring=tiled(a.hinge_spring, n_springs),
        hinge_face_a=tiled(a.hinge_face_a, np.array([face_entries, 0])),
        hinge_face_b=tiled(a.hinge_face_b, np.array([face_entries, 0])),
        hinge_face_vertices=tiled(a.hinge_face_vertices, n),
        pinned=tiled(a.pinned),
        goal_weight=tiled(a.goal_weight),
        spring_lin_stiffness=tiled(a.spring_lin_stiffness),
        hinge_ang_stiffness=tiled(a.hinge_ang_stiffness),
        vertex_spring_offsets=table_offsets(a.vertex_spring_offsets),
        vertex_spring_ids=tiled(a.vertex_spring_ids, n_springs),
        vertex_spring_other=tiled(a.vertex_spring_other, n),
        vertex_spring_sign=tiled(a.vertex_spring_sign),
        vertex_hinge_offsets=table_offsets(a.vertex_hinge_offsets),
        vertex_hinge_ids=tiled(a.vertex_hinge_ids, n_hinges),
        vertex_hinge_roles=tiled(a.vertex_hinge_roles),
        spring_rest_length=tiled(a.spring_rest_length),
        hinge_rest_angle=tiled(a.hinge_rest_angle),
        spring_shrink=tiled(a.spring_shrink),
        # pressure and force fields are refused in a batch: their tables stay empty
        pressure_tris=wp.zeros(0, dtype=wp.vec3i, device=d),
        vertex_tri_offsets=wp.array(empty_tris, dtype=wp.int32, device=d),
        vertex_tri_ids=wp.zeros(0, dtype=wp.int32, device=d),
        members=members,
    )


def bytes_per_member(sim) -> int:
    """Device memory one member of a forward batch takes: the mesh's arrays, the substep's
    work arrays (two CG buffer sets) and the captured graphs' state and goals."""
    a = sim.arrays
    real = 8 if sim.precision == "float64" else 4
    vec, mat = 3 * real, 9 * real
    n, s, h = a.vertex_count, a.spring_count, a.hinge_count
    entries = a.vertex_spring_ids.shape[0] + a.vertex_hinge_ids.shape[0]
    mesh = n * (vec + 3 * 4 + 2 * real) + s * (2 * 4 + 4 * real) + h * (6 * 4 + 2 * real) + entries * 12
    work = n * (12 * vec + 4 * mat) + s * (3 * vec + 4 * mat) + h * 3 * vec
    graphs = 6 * n * vec
    return int(mesh + work + graphs)


def members_per_batch(sim, wanted: int) -> int:
    """How many members one batch of ``wanted`` rollouts holds: all of them unless the
    device's free memory (CUDA) or ``CPU_MAX_MEMBERS`` says fewer."""
    device = wp.get_device(sim.device)
    limit = CPU_MAX_MEMBERS
    if device.is_cuda:
        limit = max(1, int(DEVICE_MEMORY_SHARE * device.free_memory) // max(bytes_per_member(sim), 1))
    return max(1, min(wanted, limit))


def batch_width(sim, rollouts: int) -> int:
    """Members per batch for ``rollouts`` rollouts of ``sim``'s scene (0: it cannot batch)."""
    return 0 if refusal(sim) is not None else members_per_batch(sim, rollouts)


def rollout_batch(
    sim,
    param_sets: list[dict[str, float]],
    frame_end: int,
    output_frames: list[int] | None = None,
    goals: np.ndarray | None = None,
    frozen: np.ndarray | None = None,
    maps: Sequence[Mapping[str, np.ndarray]] | None = None,
) -> BatchRollout:
    """Every parameter set in ``param_sets`` (continuous parameters over ``sim``'s current
    settings) simulated as one batch; ``goals`` the pin goals of all members (frames, N, 3)
    or of each (B, frames, N, 3); ``frozen`` as ``ClothSimulator.rollout``'s, for every
    member; ``maps`` each member's stiffness maps (kind -> (N,) weights, as ``set_maps``
    takes them; kinds not given keep ``sim``'s). Each member equals ``sim.rollout`` with its
    values (and maps), bit for bit."""
    why = refusal(sim)
    if why is not None:
        raise ValueError(f"{why} cannot run as a batch: simulate the parameter sets one at a time")
    with suspended_tape() as tape:
        if tape is not None:
            raise ValueError("a batch records no tape gradient: take gradients from single rollouts")
    members = len(param_sets)
    if members < 1:
        raise ValueError("a batch needs at least one parameter set")
    rows = [sim.settings.with_parameters(values)[1] for values in param_sets]
    batch = sim.batched(members)
    batch.settings = sim.settings
    batch.cg_tolerance = sim.cg_tolerance
    batch.graphs_enabled = sim.graphs_enabled
    batch.params.assign(np.asarray(rows, dtype=sim.np_float).ravel())
    _paint_members(sim, batch, members, maps)
    n = sim.vertex_count
    stacked = None
    if goals is not None:
        goals = np.asarray(goals, dtype=np.float64)
        if goals.ndim == 4:
            if goals.shape[0] != members:
                raise ValueError(f"pin goals for {goals.shape[0]} members, the batch has {members}")
            stacked = np.concatenate(list(goals), axis=1)
        else:
            stacked = np.concatenate([goals] * members, axis=1)
        if stacked.shape[1:] != (members * n, 3):
            raise ValueError(f"pin goals must be (frames, {n}, 3) or ({members}, frames, {n}, 3)")
    result = batch.rollout(frame_end, output_frames, stacked, frozen=frozen, keep_states=False)
    x = result.numpy()
    positions = x.reshape(x.shape[0], members, n, 3).transpose(1, 0, 2, 3)
    counts = result.cg_iterations.reshape(-1, members).T
    return BatchRollout(result.frames, np.ascontiguousarray(positions), np.ascontiguousarray(counts))


def batch_windows(
    sim, starts: np.ndarray, param_sets: Sequence[Mapping[str, float]] | None = None
) -> Callable[[int], np.ndarray]:
    """Every member of a batch started at rest from its own positions ``starts`` (B, N, 3),
    its pins held there, at ``sim``'s settings (with ``param_sets[m]``'s continuous
    parameters, where given), run on window by window: ``next_window(n)`` runs every member
    on by ``n`` frames from where the last window left it and gives the positions over them,
    (B, n, N, 3). Member m equals ``sim.rollout`` (at its values) from x0 = pin goals =
    ``starts[m]`` run window by window, bit for bit (the rigs' repeated starts, lifted by
    micrometres: one problem rounded differently; a rig read at several settings at once)."""
    why = refusal(sim)
    if why is not None:
        raise ValueError(f"{why} cannot run as a batch: simulate the starts one at a time")
    starts = np.asarray(starts, dtype=np.float64)
    n = sim.vertex_count
    if starts.ndim != 3 or starts.shape[1:] != (n, 3) or len(starts) < 1:
        raise ValueError(f"starts must be (members, {n}, 3), got {starts.shape}")
    if not np.isfinite(starts).all():
        raise ValueError("the starts contain NaN or infinite values")
    members = len(starts)
    if param_sets is not None and len(param_sets) != members:
        raise ValueError(f"parameter sets for {len(param_sets)} members, the batch has {members}")
    rows = [sim.settings.with_parameters(dict(values))[1] for values in (param_sets or [{}] * members)]
    batch = sim.batched(members)
    batch.settings = sim.settings
    batch.cg_tolerance = sim.cg_tolerance
    batch.graphs_enabled = sim.graphs_enabled
    batch.params.assign(np.asarray(rows, dtype=sim.np_float).ravel())
    _paint_members(sim, batch, members, None)
    held = starts.reshape(members * n, 3)
    state = {"x": wp.array(held.astype(sim.np_float), dtype=sim.vec3, device=sim.device), "v": None}

    def next_window(count: int) -> np.ndarray:
        goals = np.broadcast_to(held, (count + 1, members * n, 3))
        rollout = batch.rollout(
            batch.start_frame + count, None, goals, x0=state["x"], v0=state["v"], keep_states=True
        )
        state["x"], state["v"] = rollout.state_x[-1], rollout.state_v[-1]
        x = rollout.numpy()[1:]
        return np.ascontiguousarray(x.reshape(count, members, n, 3).transpose(1, 0, 2, 3))

    return next_window


def _paint_members(sim, batch, members: int, maps: Sequence[Mapping[str, np.ndarray]] | None) -> None:
    """Every member's spring and hinge weights on the batch's arrays: its own maps', or
    ``sim``'s (a kept batch may hold an earlier call's)."""
    if maps is not None and len(maps) != members:
        raise ValueError(f"weight maps for {len(maps)} members, the batch has {members}")
    top = sim.topology
    lin, ang = [], []
    for m in range(members):
        if maps is None or not maps[m]:
            lin.append(top.spring_lin_stiffness)
            ang.append(top.hinge_ang_stiffness)
            continue
        _, member_lin, member_ang = painted_weights(sim.mesh, top, maps[m])
        lin.append(member_lin)
        ang.append(member_ang)
    batch.arrays.spring_lin_stiffness.assign(np.concatenate(lin).astype(sim.np_float))
    if batch.arrays.hinge_count:
        batch.arrays.hinge_ang_stiffness.assign(np.concatenate(ang).astype(sim.np_float))
