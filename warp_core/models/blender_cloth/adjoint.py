"""Reverse pass of a rollout, recorded on the caller's ``wp.Tape`` with ``record_func``.

The forward keeps x and v at every substep start. Going backwards, each substep is
recomputed under an inner tape with its CG iteration count frozen (one buffer set per CG
iteration) and differentiated by Warp's autodiff: the exact gradient of what the
truncated solver computes, with memory O(substeps * N) plus one substep's transient
buffers. With graphs, each substep index and CG length (rounded up to a block bound) is
captured once and replayed; the work arrays and graphs stay on the simulator for the next
backward pass until a setting the graphs bake in changes. ``sim.gradient`` chooses the
reverse: exact, implicit or stable (``adjoint_stable``). Where the simulator records weight
maps (``maps``), each substep's reverse also yields the gradient of the per-spring weights
(and rest lengths), which a ``maps.MapRecorder`` sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import warp as wp

from ...capture import graph_capture
from .adjoint_kernels import accumulate_scalar_kernel, accumulate_vec3_kernel
from .adjoint_stable import ImplicitSubstepReverse, SubstepGuard
from .arrays import ClothArrays
from .buffers import SubstepBuffers
from .graphs import graph_key
from .maps import MapRecorder, release_gradients
from .params import ClothParams
from .schedule import CG_BLOCK_BOUNDS, CG_MAX_ITERATIONS
from .state import ClothState, RolloutPlan
from .step import CGControl, SubstepInputs, SubstepSolver

GRADIENT_KINDS = ("exact", "stable", "implicit")


@dataclass
class BackwardWorkspace:
    """What a backward pass works in: the running adjoint, one substep's inputs and
    outputs, the parameters' copy and the work buffers. Made and read by the backward pass
    (``_workspace``), kept in the simulator's ``backward_workspace`` between passes so
    that the graphs captured by one (one per substep index and CG length, which point at
    these arrays) serve the next."""

    key: tuple
    adj_x: wp.array
    adj_v: wp.array
    param_grad: wp.array
    x_in: wp.array
    v_in: wp.array
    x_out: wp.array
    v_out: wp.array
    params_in: wp.array
    goal_old: wp.array
    goal_new: wp.array
    use_graphs: bool
    buf: SubstepBuffers | None = None
    implicit: ImplicitSubstepReverse | None = None
    guard: SubstepGuard | None = None
    maps: MapRecorder | None = None  # where the simulator records weight maps
    graphs: dict = field(default_factory=dict)


class ReversibleSimulator(Protocol):
    """What the backward pass reads from the simulator that ran the rollout, and where it
    keeps its workspace between passes. ``simulator.ClothSimulator`` is one; it imports
    this module to record its backward pass, so this module names only what it reads."""

    device: str
    dtype: Any  # wp.float32 or wp.float64
    vec3: Any  # the matching Warp vector type
    precision: str
    params: wp.array
    settings: ClothParams
    solver: SubstepSolver
    gradient: str  # one of GRADIENT_KINDS
    cg_tolerance: float
    recorded_maps: tuple[str, ...]  # the weight maps whose gradient the backward pass sums (maps.py)
    arrays: ClothArrays  # the mesh's arrays, whose weights' gradients a MapRecorder switches on
    # the last pass's workspace, reused while what its graphs bake in is unchanged
    backward_workspace: BackwardWorkspace | None

    @property
    def vertex_count(self) -> int: ...

    @property
    def use_graphs(self) -> bool: ...

    def make_buffers(self, cg_sets: int, requires_grad: bool) -> SubstepBuffers: ...

    def load_modules(self) -> None: ...

    def frame_rest(self, plan: RolloutPlan, fi: int) -> None: ...


class RecordedRollout(Protocol):
    """What the backward pass reads from the rollout it reverses (``simulator.Rollout``)."""

    frames: list[int]
    positions: wp.array  # (frames, N) vec3, with gradients
    cg_iterations: np.ndarray  # per substep
    state_x: wp.array | None  # (substeps + 1, N) vec3: the forward kept every substep start
    state_v: wp.array | None


def tape_bytes_per_vertex_substep(sim: ReversibleSimulator) -> int:
    """Bytes the rollout keeps per vertex per substep for the backward pass (x and v)."""
    scalar = 4 if sim.precision == "float32" else 8
    return 2 * 3 * scalar


def recompute_bytes(sim: ReversibleSimulator, cg_iterations: int) -> int:
    """Transient bytes of the recompute buffers (values and gradients) for a substep of
    ``cg_iterations`` CG iterations; with captured graphs every substep keeps buffers for
    all 100. Allocated once per backward pass, not per substep."""
    if sim.use_graphs:
        cg_iterations = CG_MAX_ITERATIONS
    buf = sim.make_buffers(max(cg_iterations, 1), requires_grad=False)
    arrays = [a for a in vars(buf).values() if isinstance(a, wp.array)]
    arrays += [a for value in vars(buf).values() if isinstance(value, list) for a in value]
    # x, v in and out, and the parameters, are the other arrays with gradients
    extra = 4 * sim.vertex_count * 3 * (4 if sim.precision == "float32" else 8)
    return 2 * (sum(a.capacity for a in arrays) + extra)


def _workspace(
    sim: ReversibleSimulator,
    settings,
    schedule,
    with_exact: bool,
    with_implicit: bool,
    maps: tuple[str, ...],
) -> BackwardWorkspace:
    """The simulator's workspace for a backward pass of these settings and weight maps,
    captured anew only when what the graphs bake in (schedule, gravity, ...; ``graph_key``),
    the kind or the maps changed."""
    use_graphs = sim.use_graphs
    key = (graph_key(settings, schedule), with_exact, with_implicit, use_graphs, sim.cg_tolerance, maps)
    ws = sim.backward_workspace
    if ws is not None and ws.key == key:
        return ws
    # before any capture: the graphs bake in whether the arrays have gradients
    recorder = MapRecorder(sim.arrays, maps) if maps else None
    if recorder is None:
        release_gradients(sim.arrays)
    d, n, vec3 = sim.device, sim.vertex_count, sim.vec3

    def vec(requires_grad: bool = False) -> wp.array:
        return wp.zeros(n, dtype=vec3, device=d, requires_grad=requires_grad)

    ws = BackwardWorkspace(
        key=key,
        adj_x=vec(),
        adj_v=vec(),
        param_grad=wp.zeros_like(sim.params.grad),
        x_in=vec(True),
        v_in=vec(True),
        x_out=vec(True),
        v_out=vec(True),
        params_in=wp.zeros(sim.params.shape[0], dtype=sim.dtype, device=d, requires_grad=True),
        goal_old=vec(),
        goal_new=vec(),
        use_graphs=use_graphs,
        maps=recorder,
    )
    if with_implicit:
        ws.implicit = ImplicitSubstepReverse(sim.solver, sim.make_buffers, sim.cg_tolerance)
    if with_implicit and with_exact:
        ws.guard = SubstepGuard(sim.solver, sim.params.shape[0], recorder.grads if recorder else ())
    if use_graphs and with_exact:
        # every CG iteration keeps its own buffers; the graphs replay the recompute and its
        # backward for any substep of their index and length (masked iterations add nothing)
        ws.buf = sim.make_buffers(CG_MAX_ITERATIONS, requires_grad=True)
        sim.load_modules()
    sim.backward_workspace = ws
    return ws


def _grow_buffers(
    sim: ReversibleSimulator, current: SubstepBuffers | None, iterations: int
) -> SubstepBuffers:
    if current is not None and current.cg_sets >= max(iterations, 1):
        return current
    return sim.make_buffers(max(iterations, 1), requires_grad=True)


def record_rollout_backward(
    tape: wp.Tape,
    sim: ReversibleSimulator,
    rollout: RecordedRollout,
    plan: RolloutPlan,
    x0: wp.array | None,
    v0: wp.array | None,
) -> None:
    """Record on ``tape`` the backward pass of ``rollout``, which ``sim`` ran from ``plan``
    (and from ``x0``, ``v0`` when given: their gradients are accumulated too)."""
    schedule = plan.schedule
    goal = plan.goals
    n_sub = len(schedule)
    total = len(rollout.cg_iterations)
    f0 = plan.start_frame
    # output rows by the state index they copy (state s = after s substeps)
    rows_at_state: dict[int, list[int]] = {}
    for r, f in enumerate(rollout.frames):
        rows_at_state.setdefault((f - f0) * n_sub, []).append(r)
    user_params = sim.params
    # values only: a clone of an array with requires_grad would carry its gradient along
    params_snapshot = wp.clone(user_params, requires_grad=False)
    # the settings (and maps recorded) of the forward pass, even if the caller changes them
    # before backward
    settings_snapshot = sim.settings
    maps_snapshot = tuple(sim.recorded_maps)
    if sim.gradient not in GRADIENT_KINDS:
        raise ValueError(f"gradient must be one of {GRADIENT_KINDS}, got {sim.gradient!r}")
    with_implicit = sim.gradient in ("implicit", "stable")
    with_exact = sim.gradient in ("exact", "stable")

    def backward() -> None:
        d = sim.device
        n = sim.vertex_count
        out_grad = rollout.positions.grad
        ws = _workspace(sim, settings_snapshot, schedule, with_exact, with_implicit, maps_snapshot)
        adj_x, adj_v, param_grad = ws.adj_x, ws.adj_v, ws.param_grad
        x_in, v_in, x_out, v_out, params_in = ws.x_in, ws.v_in, ws.x_out, ws.v_out, ws.params_in
        buf, graphs, implicit, guard = ws.buf, ws.graphs, ws.implicit, ws.guard
        goal_old, goal_new, use_graphs, maps = ws.goal_old, ws.goal_new, ws.use_graphs, ws.maps
        for array in (adj_x, adj_v, param_grad, params_in.grad):
            array.zero_()
        if maps is not None:
            maps.zero()
        wp.copy(params_in, params_snapshot)

        def substep(
            buffers: SubstepBuffers, old: wp.array, new: wp.array, in_graph: bool, k: int, iterations: int
        ) -> None:
            sim.solver.launch(
                settings_snapshot,
                buffers,
                params_in,
                ClothState(x_in, v_in),
                SubstepInputs.of(old, new, schedule, k),
                ClothState(x_out, v_out),
                CGControl(frozen_count=iterations, in_graph=in_graph, graph_iterations=iterations),
            )

        def commit() -> None:
            """The substep's gradients (in x_in, v_in and params_in) become the running ones."""
            wp.copy(adj_x, x_in.grad)
            wp.copy(adj_v, v_in.grad)
            wp.launch(
                accumulate_scalar_kernel(sim.dtype),
                dim=params_in.shape[0],
                device=d,
                inputs=[params_in.grad],
                outputs=[param_grad],
            )
            if maps is not None:
                maps.add()

        def reverse(inner: wp.Tape) -> None:
            inner.backward(grads={x_out: adj_x, v_out: adj_v})
            if guard is not None:
                guard.choose(x_in.grad, v_in.grad, params_in.grad)
            commit()
            inner.zero()

        rest_frame = -1
        for s in range(total, 0, -1):
            for r in rows_at_state.get(s, []):
                wp.launch(
                    accumulate_vec3_kernel(sim.dtype), dim=n, device=d, inputs=[out_grad[r]], outputs=[adj_x]
                )
            k = (s - 1) % n_sub
            fi = (s - 1) // n_sub
            iterations = int(rollout.cg_iterations[s - 1])
            if fi != rest_frame:  # the rest shape the forward pass had for this frame
                sim.frame_rest(plan, fi)
                rest_frame = fi
            wp.copy(x_in, rollout.state_x[s - 1])
            wp.copy(v_in, rollout.state_v[s - 1])
            if implicit is not None:
                # the implicit reverse first: kept aside for the guard, or taken as it is
                wp.copy(x_out.grad, adj_x)
                wp.copy(v_out.grad, adj_v)
                if use_graphs:  # the captured reverse reads the goals from fixed arrays
                    wp.copy(goal_old, goal[fi])
                    wp.copy(goal_new, goal[fi + 1])
                    inputs = SubstepInputs.of(goal_old, goal_new, schedule, k)
                else:
                    inputs = SubstepInputs.of(goal[fi], goal[fi + 1], schedule, k)
                start, out = ClothState(x_in, v_in), ClothState(x_out, v_out)
                key = k if use_graphs else None
                implicit.reverse(settings_snapshot, params_in, start, inputs, out, iterations, key)
                if guard is not None:
                    guard.keep(x_in.grad, v_in.grad, params_in.grad)
                else:
                    commit()
                implicit.zero()
            if not with_exact:
                continue
            if use_graphs:
                wp.copy(goal_old, goal[fi])
                wp.copy(goal_new, goal[fi + 1])
                buf.frozen.fill_(iterations)
                # a graph launches its iterations whether they are needed or masked, so one
                # per block bound the count reaches (CG_BLOCK_BOUNDS): at most 3 masked
                length = next(b for b in CG_BLOCK_BOUNDS if b >= iterations)
                if (k, length) not in graphs:
                    inner = wp.Tape()
                    with graph_capture(d, force_module_load=False) as capture:
                        with inner:
                            substep(buf, goal_old, goal_new, True, k, length)
                        reverse(inner)
                    graphs[(k, length)] = capture.graph
                wp.capture_launch(graphs[(k, length)])
            else:
                buf = ws.buf = _grow_buffers(sim, buf, iterations)
                inner = wp.Tape()
                with inner:
                    substep(buf, goal[fi], goal[fi + 1], False, k, iterations)
                reverse(inner)
        for r in rows_at_state.get(0, []):
            wp.launch(
                accumulate_vec3_kernel(sim.dtype), dim=n, device=d, inputs=[out_grad[r]], outputs=[adj_x]
            )
        wp.launch(
            accumulate_scalar_kernel(sim.dtype),
            dim=user_params.shape[0],
            device=d,
            inputs=[param_grad],
            outputs=[user_params.grad],
        )
        if x0 is not None and x0.requires_grad:
            wp.launch(accumulate_vec3_kernel(sim.dtype), dim=n, device=d, inputs=[adj_x], outputs=[x0.grad])
        if v0 is not None and v0.requires_grad:
            wp.launch(accumulate_vec3_kernel(sim.dtype), dim=n, device=d, inputs=[adj_v], outputs=[v0.grad])

    arrays = [rollout.positions, user_params]
    arrays += [a for a in (x0, v0) if a is not None and a.requires_grad]
    tape.record_func(backward, arrays)
