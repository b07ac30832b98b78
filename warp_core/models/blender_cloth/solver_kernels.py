"""Blender's cloth integrator in Warp: one linearized backward-Euler solve per substep,

    (M - h dF/dv - h^2 dF/dx) dv = h (F + h dF/dx v),   v += dv,   x += h v,

solved with Blender's truncated, filtered conjugate gradients (x0 = 0, stop when
r.r <= 1e-4 |S b|^2 or after 100 iterations; those constants and the substep schedule
are in ``schedule.py``). The truncation changes the dynamics, so it is emulated rather
than replaced by an exact solve.

Each CG iteration reads one set of buffers and writes the next, and iterations past
convergence are masked no-ops: the same kernels serve the forward pass (two buffer sets,
ping-pong, host convergence check every few iterations) and the adjoint's per-substep
recompute (one buffer set per iteration, differentiated by Warp's autodiff).
"""

import functools
from types import SimpleNamespace

import warp as wp

from .force_kernels import NO_FMA, PARAM_COUNT, PARAM_MASS, force_kernels
from .member import member_functions
from .schedule import CG_MAX_ITERATIONS


@functools.cache
def solver_kernels(dtype, batched: bool = False) -> SimpleNamespace:
    """The integrator's kernels for one scalar type, of a batch or a single run."""
    fk = force_kernels(dtype, batched)
    member_of, member_count = member_functions(batched)
    rows = CG_MAX_ITERATIONS + 2  # CG scalars per member
    vec3, mat33 = fk.vec3, fk.mat33

    @wp.func
    def filtered(value: vec3, pinned: wp.int32):
        # Blender's filter S: hard-pinned vertices have no free degree of freedom
        out = value
        if pinned != 0:
            out = vec3()
        return out

    @wp.kernel(module="unique", module_options=NO_FMA)
    def pin_velocities(
        v: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        goal_old: wp.array(dtype=vec3),
        goal_new: wp.array(dtype=vec3),
        inv_time_scale: dtype,
        v_out: wp.array(dtype=vec3),
    ):
        """Frame start: pinned vertices take the velocity of their goal."""
        i = wp.tid()
        out = v[i]
        if pinned[i] != 0:
            out = (goal_new[i] - goal_old[i]) * inv_time_scale
        v_out[i] = out

    @wp.kernel(module="unique", module_options=NO_FMA)
    def assemble_vertices(
        v: wp.array(dtype=vec3),
        vertex_force: wp.array(dtype=vec3),
        vertex_dfdx: wp.array(dtype=mat33),
        vertex_dfdv: wp.array(dtype=mat33),
        hinge_force_a: wp.array(dtype=vec3),
        hinge_force_b: wp.array(dtype=vec3),
        hinge_force_edge: wp.array(dtype=vec3),
        vertex_hinge_offsets: wp.array(dtype=wp.int32),
        vertex_hinge_ids: wp.array(dtype=wp.int32),
        vertex_hinge_roles: wp.array(dtype=wp.int32),
        spring_force: wp.array(dtype=vec3),
        spring_dfdx: wp.array(dtype=mat33),
        spring_dfdv: wp.array(dtype=mat33),
        vertex_spring_offsets: wp.array(dtype=wp.int32),
        vertex_spring_ids: wp.array(dtype=wp.int32),
        vertex_spring_other: wp.array(dtype=wp.int32),
        vertex_spring_sign: wp.array(dtype=wp.int32),
        params: wp.array(dtype=dtype),
        member_vertices: wp.int32,
        h: dtype,
        system_diag: wp.array(dtype=mat33),
        rhs: wp.array(dtype=vec3),
    ):
        """Gathers each vertex's hinge and spring terms in a fixed order (no atomics, so
        every device sums alike), then the diagonal block A_ii = M - h dF/dv - h^2 dF/dx
        and the right-hand side b = h (F + h dF/dx v)."""
        i = wp.tid()
        f = vertex_force[i]
        jx = vertex_dfdx[i]
        jv = vertex_dfdv[i]
        # 0/1/-1 factors rather than branches keep the loop body a plain sum (x + 0 y == x)
        for e in range(vertex_hinge_offsets[i], vertex_hinge_offsets[i + 1]):
            hinge = vertex_hinge_ids[e]
            role = vertex_hinge_roles[e]
            in_a = dtype(role & 1)
            in_b = dtype((role >> 1) & 1)
            on_edge = dtype((role >> 2) & 1)
            f = f + in_a * hinge_force_a[hinge] + in_b * hinge_force_b[hinge]
            f = f - on_edge * hinge_force_edge[hinge]
        coupling = vec3()
        for e in range(vertex_spring_offsets[i], vertex_spring_offsets[i + 1]):
            s = vertex_spring_ids[e]
            f = f + dtype(vertex_spring_sign[e]) * spring_force[s]
            jx = jx + spring_dfdx[s]
            jv = jv + spring_dfdv[s]
            # (dF/dx v)_i: the diagonal block is the sum of the spring blocks, the
            # off-diagonal ones are -spring_dfdx. Accumulated here rather than as jx * v[i]
            # after the loop: Warp's adjoint does not see values a dynamic loop computed.
            coupling = coupling + spring_dfdx[s] * (v[i] - v[vertex_spring_other[e]])
        p = member_of(i, member_vertices) * PARAM_COUNT  # the member's parameters
        system_diag[i] = params[p + PARAM_MASS] * wp.identity(3, dtype) - h * jv - (h * h) * jx
        rhs[i] = h * f + (h * h) * (vertex_dfdx[i] * v[i]) + (h * h) * coupling

    @wp.kernel(module="unique", module_options=NO_FMA)
    def assemble_springs(
        spring_dfdx: wp.array(dtype=mat33),
        spring_dfdv: wp.array(dtype=mat33),
        h: dtype,
        system_offdiag: wp.array(dtype=mat33),
    ):
        # off-diagonal blocks: dF/dx_ij = -spring_dfdx, so A_ij = h dfdv + h^2 dfdx
        s = wp.tid()
        system_offdiag[s] = h * spring_dfdv[s] + (h * h) * spring_dfdx[s]

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_init(
        rhs: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        residual: wp.array(dtype=vec3),
        direction: wp.array(dtype=vec3),
        dv: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        r = filtered(rhs[i], pinned[i])
        residual[i] = r
        direction[i] = r
        dv[i] = vec3()

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_start(
        delta: wp.array(dtype=dtype),
        frozen: wp.array(dtype=wp.int32),
        active: wp.array(dtype=wp.int32),
        any_active: wp.array(dtype=wp.int32),
    ):
        # member m (one thread each): frozen[0] >= 0: run exactly that many iterations;
        # <= -2: -2 - frozen[0] iterations, more if still far from converged; -1: Blender's
        # test (a device value, so one captured graph serves every substep)
        m = wp.tid()
        act = int(0)  # noqa: UP018 (a dynamic Warp variable)
        frozen_count = frozen[0]
        if frozen_count >= 0:
            if frozen_count > 0:
                act = 1
        elif delta[m] > dtype(0.0):
            act = 1
        active[m] = act
        if active.shape[0] != any_active.shape[0]:
            # a batch (a single run's any_active is its active): whether any member iterates
            wp.atomic_max(any_active, 0, act)

    @wp.kernel(module="unique", module_options=NO_FMA)
    def matvec(
        system_diag: wp.array(dtype=mat33),
        system_offdiag: wp.array(dtype=mat33),
        vertex_spring_offsets: wp.array(dtype=wp.int32),
        vertex_spring_ids: wp.array(dtype=wp.int32),
        vertex_spring_other: wp.array(dtype=wp.int32),
        direction: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        product: wp.array(dtype=vec3),
    ):
        """product = S A direction, gathered per vertex (the spring blocks are symmetric)."""
        i = wp.tid()
        acc = system_diag[i] * direction[i]
        for e in range(vertex_spring_offsets[i], vertex_spring_offsets[i + 1]):
            acc = acc + system_offdiag[vertex_spring_ids[e]] * direction[vertex_spring_other[e]]
        product[i] = filtered(acc, pinned[i])

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_update(
        dv: wp.array(dtype=vec3),
        residual: wp.array(dtype=vec3),
        direction: wp.array(dtype=vec3),
        product: wp.array(dtype=vec3),
        curvature: wp.array(dtype=dtype),
        delta: wp.array(dtype=dtype),
        active: wp.array(dtype=wp.int32),
        k: wp.int32,
        k_base: wp.array(dtype=wp.int32),
        member_vertices: wp.int32,
        dv_next: wp.array(dtype=vec3),
        residual_next: wp.array(dtype=vec3),
    ):
        # a member's CG scalars of iteration k sit at k * members + member
        i = wp.tid()
        members = member_count(active.shape[0], rows)
        r = (k + k_base[0]) * members + member_of(i, member_vertices)
        alpha = dtype(0.0)
        if active[r] != 0:
            alpha = delta[r] / curvature[r]
        dv_next[i] = dv[i] + alpha * direction[i]
        residual_next[i] = residual[i] - alpha * product[i]

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_direction(
        residual_next: wp.array(dtype=vec3),
        direction: wp.array(dtype=vec3),
        delta: wp.array(dtype=dtype),
        pinned: wp.array(dtype=wp.int32),
        k: wp.int32,
        k_base: wp.array(dtype=wp.int32),
        frozen: wp.array(dtype=wp.int32),
        member_vertices: wp.int32,
        tolerance: dtype,
        active: wp.array(dtype=wp.int32),
        any_active: wp.array(dtype=wp.int32),
        direction_next: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        k = k + k_base[0]
        members = member_count(active.shape[0], rows)
        m = member_of(i, member_vertices)
        r = k * members + m  # iteration k's scalars of this vertex's member
        r_next = r + members
        act = int(0)  # noqa: UP018 (a dynamic Warp variable)
        frozen_count = frozen[0]
        if active[r] != 0:
            if frozen_count >= 0:
                if k + 1 < frozen_count:
                    act = 1
            elif frozen_count <= -2:
                # a floor (a perturbed rollout for a tangent): the given count, and more only
                # while the residual is still 10x above Blender's tolerance (r.r 100x)
                if k + 1 < -2 - frozen_count:
                    act = 1
                elif delta[r_next] > dtype(100.0) * tolerance * delta[m] and k + 1 < CG_MAX_ITERATIONS:
                    act = 1
            elif delta[r_next] > tolerance * delta[m] and k + 1 < CG_MAX_ITERATIONS:
                act = 1
        if i == m * member_vertices:
            active[r_next] = act
            if members > 1:
                wp.atomic_max(any_active, k + 1, act)
        c = direction[i]
        if act != 0:
            c = filtered(residual_next[i] + (delta[r_next] / delta[r]) * direction[i], pinned[i])
        direction_next[i] = c

    @wp.kernel(module="unique", module_options=NO_FMA)
    def finish_substep(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        dv: wp.array(dtype=vec3),
        pinned: wp.array(dtype=wp.int32),
        goal_old: wp.array(dtype=vec3),
        goal_new: wp.array(dtype=vec3),
        pin_time: dtype,
        h: dtype,
        x_out: wp.array(dtype=vec3),
        v_out: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        v_new = v[i] + dv[i]
        x_new = x[i] + h * v_new
        if pinned[i] != 0:
            x_new = goal_old[i] + (goal_new[i] - goal_old[i]) * pin_time
        x_out[i] = x_new
        v_out[i] = v_new

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_loop_start(
        any_active: wp.array(dtype=wp.int32), k_base: wp.array(dtype=wp.int32), more: wp.array(dtype=wp.int32)
    ):
        # a captured CG loop: iterations 0 and 1 first, while the CG (of any member) is active
        k_base[0] = 0
        more[0] = any_active[0]

    @wp.kernel(module="unique", module_options=NO_FMA)
    def cg_loop_next(
        any_active: wp.array(dtype=wp.int32),
        k_base: wp.array(dtype=wp.int32),
        more: wp.array(dtype=wp.int32),
    ):
        # the next two iterations, if the CG of any member is still active there
        k = k_base[0] + 2
        k_base[0] = k
        go = int(0)  # noqa: UP018 (a dynamic Warp variable)
        if k < CG_MAX_ITERATIONS:
            go = any_active[k]
        more[0] = go

    @wp.kernel(module="unique", module_options=NO_FMA)
    def count_iterations(
        active: wp.array(dtype=wp.int32), substep: wp.int32, counts: wp.array(dtype=wp.int32)
    ):
        # member m's iterations of the substep, into counts[substep * members + m]
        m = wp.tid()
        members = member_count(active.shape[0], rows)
        n = int(0)  # noqa: UP018 (a dynamic Warp variable)
        for k in range(CG_MAX_ITERATIONS + 2):
            n += active[k * members + m]
        counts[substep * members + m] = n

    return SimpleNamespace(
        forces=fk,
        pin_velocities=pin_velocities,
        assemble_vertices=assemble_vertices,
        assemble_springs=assemble_springs,
        cg_init=cg_init,
        cg_start=cg_start,
        matvec=matvec,
        cg_update=cg_update,
        cg_direction=cg_direction,
        finish_substep=finish_substep,
        count_iterations=count_iterations,
        cg_loop_start=cg_loop_start,
        cg_loop_next=cg_loop_next,
    )
